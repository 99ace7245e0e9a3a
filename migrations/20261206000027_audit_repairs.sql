-- `paywatch audit --repair`: two history causes for what a repair changes, and when a
-- finding was repaired.
--   refuted    an audit found the chain does not hold what a provider answered (a made-up
--              payment, or a made-up refund tied to it); the repair took it back.
--   corrected  an audit found the chain holding other facts for a payment; the repair
--              replaced them, the state kept.
-- A finding with `repaired_ms` set no longer makes its payment answer `verified: false`:
-- the store holds what the chain holds. `audits.repaired` counts the differences an audit
-- repaired. SQLite adds a value to a CHECK only by rebuilding the table (as migration 24
-- did); Postgres replaces the constraint. The lists are checked against core's enum by a
-- test (tests/migrations.rs).

ALTER TABLE audit_findings ADD COLUMN repaired_ms BIGINT;
ALTER TABLE audits ADD COLUMN repaired BIGINT NOT NULL DEFAULT 0;

-- postgres:begin
ALTER TABLE payment_history DROP CONSTRAINT payment_history_cause_known;
ALTER TABLE payment_history ADD CONSTRAINT payment_history_cause_known
    CHECK (cause IN ('seen', 'seen_final', 'final', 'reorged', 'reincluded', 'refund', 'refund_reorged', 'vanished', 'captured', 'capture_reorged', 'released', 'release_reorged', 'refuted', 'corrected'));
-- postgres:end

-- sqlite:begin
CREATE TABLE payment_history_checked (
    network      TEXT   NOT NULL,
    payment_id   TEXT   NOT NULL,
    index_in_tx  BIGINT NOT NULL,
    seq          BIGINT NOT NULL,
    from_state   TEXT,
    to_state     TEXT   NOT NULL,
    cause        TEXT   NOT NULL,
    block_number BIGINT,
    tx_id        TEXT,
    at_ms        BIGINT NOT NULL,
    event_id     BIGINT,
    PRIMARY KEY (network, payment_id, index_in_tx, seq),
    CONSTRAINT payment_history_states_known CHECK (
        (from_state IS NULL
        OR from_state = 'pending'
        OR from_state = 'paid'
        OR from_state = 'partially_refunded'
        OR from_state = 'refunded'
        OR from_state = 'dropped'
        OR from_state = 'held'
        OR from_state = 'released')
        AND (to_state = 'pending'
        OR to_state = 'paid'
        OR to_state = 'partially_refunded'
        OR to_state = 'refunded'
        OR to_state = 'dropped'
        OR to_state = 'held'
        OR to_state = 'released')),
    CONSTRAINT payment_history_cause_known CHECK (cause = 'seen'
        OR cause = 'seen_final'
        OR cause = 'final'
        OR cause = 'reorged'
        OR cause = 'reincluded'
        OR cause = 'refund'
        OR cause = 'refund_reorged'
        OR cause = 'vanished'
        OR cause = 'captured'
        OR cause = 'capture_reorged'
        OR cause = 'released'
        OR cause = 'release_reorged'
        OR cause = 'refuted'
        OR cause = 'corrected')
);
INSERT INTO payment_history_checked (network, payment_id, index_in_tx, seq, from_state,
    to_state, cause, block_number, tx_id, at_ms, event_id)
SELECT network, payment_id, index_in_tx, seq, from_state,
    to_state, cause, block_number, tx_id, at_ms, event_id
FROM payment_history;
DROP TABLE payment_history;
ALTER TABLE payment_history_checked RENAME TO payment_history;
CREATE UNIQUE INDEX payment_history_by_event ON payment_history (event_id);
-- sqlite:end
