-- Solana: the SPL Memo text of a transfer's transaction, so a refund can name its payment.
ALTER TABLE transfers ADD COLUMN memo TEXT;
