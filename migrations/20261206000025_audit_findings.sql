-- What audits found: one row per payment or transfer an audit found the store and the
-- chain to disagree on, with the difference (the JSON line `paywatch audit` prints). With
-- `verification = "lagging"`, a payment named here, whose own or refund transfer is named
-- here, or on whose refund route a later transfer is missing, answers `verified: false`. A difference found again is not stored twice.
CREATE TABLE audit_findings (
    network      TEXT   NOT NULL,
    -- What the row names: a payment (tx_id = payment id, position = index in its
    -- transaction) or a transfer (tx_id = its transaction, position = its log index).
    subject      TEXT   NOT NULL CHECK (subject IN ('payment', 'transfer')),
    tx_id        TEXT   NOT NULL,
    position     BIGINT NOT NULL,
    block_number BIGINT NOT NULL,
    -- A transfer the store lacks: the refund route it runs on (from, to, asset), so the
    -- payments on that route before it answer `verified: false` (their refunds may be wrong).
    refund_from  TEXT,
    refund_to    TEXT,
    refund_asset TEXT,
    difference   TEXT   NOT NULL,
    found_ms     BIGINT NOT NULL,
    PRIMARY KEY (network, subject, tx_id, position)
);
