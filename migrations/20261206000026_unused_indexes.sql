-- Indexes no query reads (issue 18: a payment costs what its queries need). Each kept a
-- copy of its columns for every row written.
-- payments_by_block (network, block_number) is the first half of payments_by_listing
-- (network, block_number, payment_id, index_in_tx), which serves every query by block.
DROP INDEX payments_by_block;
-- Authorization lookups read payments_by_authorization (migration 16); the refund rules
-- read an authorization by its transaction (the primary key).
DROP INDEX authorizations_by_nonce;
-- Every query of transfers is by block (the refund rules, pruning, rollback, audits) or by
-- the primary key.
DROP INDEX transfers_by_parties;
