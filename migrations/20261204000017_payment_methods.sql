-- Each payment names how its money moved (paywatch-core: PaymentMethod): EIP-3009, Permit2
-- through x402's exact proxy, Permit2 through x402's upto proxy, an ERC-7710 delegation,
-- or an SPL transfer. Every payment stored before was read from EIP-3009 logs (EVM) or
-- SPL transfers (Solana). An upto payment also keeps the maximum its payer signed.
ALTER TABLE payments ADD COLUMN method TEXT NOT NULL DEFAULT 'eip3009';
UPDATE payments SET method = 'spl' WHERE network LIKE 'solana:%';
ALTER TABLE payments ADD COLUMN max_amount TEXT;

-- postgres:begin
ALTER TABLE payments ADD CONSTRAINT payments_method_known
    CHECK (method IN ('eip3009', 'permit2', 'upto', 'erc7710', 'spl'));
-- postgres:end

-- sqlite:begin
CREATE TRIGGER payments_method_known_insert BEFORE INSERT ON payments
WHEN NEW.method NOT IN ('eip3009', 'permit2', 'upto', 'erc7710', 'spl')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: payments_method_known'); END;
CREATE TRIGGER payments_method_known_update BEFORE UPDATE OF method ON payments
WHEN NEW.method NOT IN ('eip3009', 'permit2', 'upto', 'erc7710', 'spl')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: payments_method_known'); END;
-- sqlite:end
