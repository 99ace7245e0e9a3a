-- Each payment carries the memo of its transaction (Solana's SPL Memo: the seller's
-- extra.memo or the client's nonce), for reconciliation by memo. Stored Solana payments
-- take it from their transfer row, which has kept it since the Solana worker began.
ALTER TABLE payments ADD COLUMN memo TEXT;

UPDATE payments SET memo = (
    SELECT t.memo FROM transfers t
    WHERE t.network = payments.network AND t.tx_id = payments.payment_id
      AND t.event_index = payments.event_index)
WHERE network LIKE 'solana:%';

CREATE INDEX payments_by_memo ON payments (network, memo) WHERE memo IS NOT NULL;
