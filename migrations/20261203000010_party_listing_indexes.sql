-- Reconciliation by payer or by pay_to, a page at a time: each filter gets an index in the
-- listing's order, so a keyset page is an index range scan of `limit` rows whatever the
-- table's size (the parties index leads with pay_to and does not serve payer alone, nor
-- the block order under pay_to alone).
CREATE INDEX payments_by_payer_listing ON payments (network, payer, block_number, payment_id, index_in_tx);
CREATE INDEX payments_by_pay_to_listing ON payments (network, pay_to, block_number, payment_id, index_in_tx);
