-- Revealed intents: what a payer committed to in its EIP-3009 nonce, checked by paywatch.
CREATE TABLE intents (
    network       TEXT   NOT NULL,
    payment_id    TEXT   NOT NULL,
    index_in_tx   BIGINT NOT NULL,
    method        TEXT   NOT NULL,
    url           TEXT   NOT NULL,
    body_sha256   TEXT,
    class         TEXT   NOT NULL,
    max_atomic    TEXT   NOT NULL,
    salt          TEXT   NOT NULL,
    revealed_ms   BIGINT NOT NULL,
    PRIMARY KEY (network, payment_id, index_in_tx)
);
