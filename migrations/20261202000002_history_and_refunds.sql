-- Payment history, refunds and the refund scan position.

-- How many transitions a payment has had; the next history row's seq.
ALTER TABLE payments ADD COLUMN history_len BIGINT NOT NULL DEFAULT 0;
-- Sum of the final refunds tied to the payment, exact decimal text.
ALTER TABLE payments ADD COLUMN refunded_amount TEXT NOT NULL DEFAULT '0';

-- Every state change of every payment, with its cause, in order (seq).
CREATE TABLE payment_history (
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
    PRIMARY KEY (network, payment_id, index_in_tx, seq)
);

-- Money sent back from pay_to to payer, tied to one payment by a named rule.
CREATE TABLE refunds (
    network            TEXT   NOT NULL,
    refund_tx_id       TEXT   NOT NULL,
    refund_event_index BIGINT NOT NULL,
    payment_id         TEXT   NOT NULL,
    index_in_tx        BIGINT NOT NULL,
    amount             TEXT   NOT NULL,
    rule               TEXT   NOT NULL,
    block_number       BIGINT NOT NULL,
    assigned_ms        BIGINT NOT NULL,
    PRIMARY KEY (network, refund_tx_id, refund_event_index)
);
CREATE INDEX refunds_by_payment ON refunds (network, payment_id, index_in_tx);
CREATE INDEX payments_by_parties ON payments (network, pay_to, payer, asset, block_number);

-- Final blocks up to which transfers have been examined as refunds.
ALTER TABLE chain_heads ADD COLUMN refund_scanned_block BIGINT;
