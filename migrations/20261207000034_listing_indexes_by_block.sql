-- Issue 18: an index holds what its query seeks by. A listing page seeks to its cursor's
-- block and reads on in block order; the payment id and index that order the few
-- payments of one block (one payer's, one seller's) are sorted on those rows — both
-- databases sort only the right part of the order (Postgres: Incremental Sort; SQLite:
-- a temp b-tree for the right part) and stop at the page's end. Keying the listing
-- indexes by the transaction hash and index too copied a hash per payment into each.
DROP INDEX payments_by_listing;
DROP INDEX payments_by_payer_listing;
DROP INDEX payments_by_pay_to_listing;
CREATE INDEX payments_by_listing ON payments (network, block_number);
CREATE INDEX payments_by_payer_listing ON payments (network, payer, block_number);
CREATE INDEX payments_by_pay_to_listing ON payments (network, pay_to, block_number);
