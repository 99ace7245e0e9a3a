-- Each payment names who settled it: the account that sent the transaction (EVM, from
-- its receipt) or paid its fee (Solana), in x402 the facilitator. Payments stored before
-- have none recorded (NULL); a finance team lists and sums by it.
ALTER TABLE payments ADD COLUMN facilitator TEXT;

CREATE INDEX payments_by_facilitator ON payments (network, facilitator, block_number)
    WHERE facilitator IS NOT NULL;
