-- Transfers kept only as possible refunds are pruned once examined by the refund rules
-- and older than the refund window; this is how far each network's pruning has gone.
ALTER TABLE chain_heads ADD COLUMN transfers_pruned_block BIGINT;
