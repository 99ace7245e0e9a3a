-- A Token-2022 `transferCheckedWithFee` payment keeps the fee withheld in the seller's
-- account beside its amount (what the seller received): the payer sent amount + fee.
-- Payments stored before carry none (no fee, or stored before fees were recorded).
ALTER TABLE payments ADD COLUMN fee_amount TEXT;
