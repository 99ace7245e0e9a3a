-- Reconciliation listings page through a network's payments in (block, payment id, index)
-- order with a keyset cursor: this index serves both the order and the seek.
CREATE INDEX payments_by_listing ON payments (network, block_number, payment_id, index_in_tx);
