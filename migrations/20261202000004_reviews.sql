-- Reviews recorded by POST /v1/reviews/verify with "record": true: one per (network, payment).
CREATE TABLE reviews (
    network     TEXT   NOT NULL,
    payment_id  TEXT   NOT NULL,
    message     TEXT   NOT NULL,
    signature   TEXT   NOT NULL,
    recorded_ms BIGINT NOT NULL,
    PRIMARY KEY (network, payment_id)
);
