-- Under `verification = "lagging"` a payment's state is committed as the primary answers it
-- and cross-checked later by the scheduled audit. When an audit (or a repair) covers every
-- block a payment's state is made of, the same commit writes a `verification` event here:
-- the audit's verdict (`verified` 1, or 0 when an unrepaired finding is about it) on the
-- state of the payment's last history row (its `seq`, states, cause, block and tx, copied
-- as review_events copies them), numbered from the one global event sequence
-- (event_counter), so the event stream serves it in commit order with the other kinds.
CREATE TABLE verification_events (
    event_id     BIGINT NOT NULL PRIMARY KEY,
    network      TEXT   NOT NULL,
    payment_id   TEXT   NOT NULL,
    index_in_tx  BIGINT NOT NULL,
    seq          BIGINT NOT NULL,
    cause        TEXT   NOT NULL,
    from_state   TEXT,
    to_state     TEXT   NOT NULL,
    block_number BIGINT,
    tx_id        TEXT,
    verified     BIGINT NOT NULL CHECK (verified IN (0, 1)),
    at_ms        BIGINT NOT NULL
);
