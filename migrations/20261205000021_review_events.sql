-- A review provider follows the state it publishes beside each recorded review. When a
-- change of a reviewed payment's state changes its published state (paid ↔ refunded, or
-- a reorg), the same commit writes a `review_state` event here, numbered from the one
-- global event sequence (event_counter) right after the payment's own history rows, so
-- the event stream serves both kinds in commit order.
CREATE TABLE review_events (
    event_id    BIGINT NOT NULL PRIMARY KEY,
    network     TEXT   NOT NULL,
    payment_id  TEXT   NOT NULL,
    index_in_tx BIGINT NOT NULL,
    -- The payment history row that caused it (its `seq`), and that row's cause.
    seq         BIGINT NOT NULL,
    cause       TEXT   NOT NULL,
    -- The published state before and after (PaymentState::published).
    from_state  TEXT   NOT NULL,
    to_state    TEXT   NOT NULL,
    block_number BIGINT,
    tx_id       TEXT,
    at_ms       BIGINT NOT NULL
);
CREATE INDEX review_events_by_payment ON review_events (network, payment_id, index_in_tx);
