-- Each payment names who settled it, in x402 the facilitator: the account that paid the
-- transaction's fee (Solana; EVM logs do not name the sender, NULL). Payments stored
-- before have none recorded (NULL); a review provider or finance team lists and sums by it.
ALTER TABLE payments ADD COLUMN facilitator TEXT;

CREATE INDEX payments_by_facilitator ON payments (network, facilitator, block_number)
    WHERE facilitator IS NOT NULL;
