-- SQLite checks the vocabulary (states, causes, refund rules, methods) with CHECK
-- constraints on the tables themselves instead of the triggers of migrations 15, 17 and
-- 19, and writes each as `=` comparisons joined by OR. A trigger runs a sub-program for
-- every row written, and an `IN (…)` list in a CHECK or a trigger builds a temporary
-- table for every row; a CHECK of comparisons costs about nothing (README, Benchmarks:
-- the SQLite ingest before and after the redesign). SQLite adds a
-- CHECK to a table only by rebuilding it, so the three tables are rebuilt, with their
-- rows and indexes. Postgres keeps its CHECK constraints (an `IN` there costs nothing
-- measurable). The lists are checked against core's enums by a test (tests/migrations.rs).

-- postgres:begin
SELECT 1;
-- postgres:end

-- sqlite:begin
DROP TRIGGER payments_state_known_insert;
DROP TRIGGER payments_state_known_update;
DROP TRIGGER payment_history_known_insert;
DROP TRIGGER payment_history_known_update;
DROP TRIGGER refunds_rule_known_insert;
DROP TRIGGER refunds_rule_known_update;
DROP TRIGGER payments_method_known_insert;
DROP TRIGGER payments_method_known_update;

CREATE TABLE payments_checked (
    network          TEXT   NOT NULL,
    payment_id       TEXT   NOT NULL,
    index_in_tx      BIGINT NOT NULL,
    event_index      BIGINT NOT NULL,
    block_number     BIGINT NOT NULL,
    block_hash       TEXT   NOT NULL,
    block_time       BIGINT,
    payer            TEXT   NOT NULL,
    pay_to           TEXT   NOT NULL,
    amount           TEXT   NOT NULL,
    asset            TEXT   NOT NULL,
    nonce            TEXT,
    state            TEXT   NOT NULL,
    first_seen_ms    BIGINT NOT NULL,
    state_changed_ms BIGINT NOT NULL,
    history_len      BIGINT NOT NULL DEFAULT 0,
    refunded_amount  TEXT   NOT NULL DEFAULT '0',
    memo             TEXT,
    facilitator      TEXT,
    method           TEXT   NOT NULL DEFAULT 'eip3009',
    max_amount       TEXT,
    fee_amount       TEXT,
    captured_amount  TEXT,
    released_amount  TEXT,
    held_amount      TEXT,
    PRIMARY KEY (network, payment_id, index_in_tx),
    CONSTRAINT payments_state_known CHECK (state = 'pending'
        OR state = 'paid'
        OR state = 'partially_refunded'
        OR state = 'refunded'
        OR state = 'dropped'
        OR state = 'held'
        OR state = 'released'),
    CONSTRAINT payments_method_known CHECK (method = 'eip3009'
        OR method = 'permit2'
        OR method = 'upto'
        OR method = 'erc7710'
        OR method = 'auth_capture'
        OR method = 'spl')
);
INSERT INTO payments_checked (network, payment_id, index_in_tx, event_index, block_number,
    block_hash, block_time, payer, pay_to, amount, asset, nonce, state, first_seen_ms,
    state_changed_ms, history_len, refunded_amount, memo, facilitator, method, max_amount,
    fee_amount, captured_amount, released_amount, held_amount)
SELECT network, payment_id, index_in_tx, event_index, block_number,
    block_hash, block_time, payer, pay_to, amount, asset, nonce, state, first_seen_ms,
    state_changed_ms, history_len, refunded_amount, memo, facilitator, method, max_amount,
    fee_amount, captured_amount, released_amount, held_amount
FROM payments;
DROP TABLE payments;
ALTER TABLE payments_checked RENAME TO payments;
CREATE INDEX payments_by_block ON payments (network, block_number);
CREATE INDEX payments_by_state ON payments (network, state, block_number);
CREATE INDEX payments_by_parties ON payments (network, pay_to, payer, asset, block_number);
CREATE INDEX payments_by_listing ON payments (network, block_number, payment_id, index_in_tx);
CREATE INDEX payments_by_payer_listing ON payments (network, payer, block_number, payment_id, index_in_tx);
CREATE INDEX payments_by_pay_to_listing ON payments (network, pay_to, block_number, payment_id, index_in_tx);
CREATE INDEX payments_by_memo ON payments (network, memo) WHERE memo IS NOT NULL;
CREATE INDEX payments_by_facilitator ON payments (network, facilitator, block_number)
    WHERE facilitator IS NOT NULL;
CREATE INDEX payments_by_authorization ON payments (network, payer, nonce, asset)
    WHERE nonce IS NOT NULL;

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
        OR cause = 'release_reorged')
);
INSERT INTO payment_history_checked (network, payment_id, index_in_tx, seq, from_state,
    to_state, cause, block_number, tx_id, at_ms, event_id)
SELECT network, payment_id, index_in_tx, seq, from_state,
    to_state, cause, block_number, tx_id, at_ms, event_id
FROM payment_history;
DROP TABLE payment_history;
ALTER TABLE payment_history_checked RENAME TO payment_history;
CREATE UNIQUE INDEX payment_history_by_event ON payment_history (event_id);

CREATE TABLE refunds_checked (
    network            TEXT   NOT NULL,
    refund_tx_id       TEXT   NOT NULL,
    refund_event_index BIGINT NOT NULL,
    payment_id         TEXT   NOT NULL,
    index_in_tx        BIGINT NOT NULL,
    amount             TEXT   NOT NULL,
    rule               TEXT   NOT NULL,
    block_number       BIGINT NOT NULL,
    assigned_ms        BIGINT NOT NULL,
    PRIMARY KEY (network, refund_tx_id, refund_event_index),
    CONSTRAINT refunds_rule_known CHECK (rule = 'escrow'
        OR rule = 'nonce_commitment'
        OR rule = 'memo'
        OR rule = 'matching')
);
INSERT INTO refunds_checked (network, refund_tx_id, refund_event_index, payment_id,
    index_in_tx, amount, rule, block_number, assigned_ms)
SELECT network, refund_tx_id, refund_event_index, payment_id,
    index_in_tx, amount, rule, block_number, assigned_ms
FROM refunds;
DROP TABLE refunds;
ALTER TABLE refunds_checked RENAME TO refunds;
CREATE INDEX refunds_by_payment ON refunds (network, payment_id, index_in_tx);
-- sqlite:end
