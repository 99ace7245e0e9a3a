-- A transaction that settles several payments can have one review per payment: reviews
-- are keyed by (network, payment_id, index_in_tx). A review recorded before this could
-- only be of a transaction holding one payment, so it takes that payment's number.
CREATE TABLE reviews_by_payment (
    network     TEXT   NOT NULL,
    payment_id  TEXT   NOT NULL,
    index_in_tx BIGINT NOT NULL,
    message     TEXT   NOT NULL,
    signature   TEXT   NOT NULL,
    recorded_ms BIGINT NOT NULL,
    PRIMARY KEY (network, payment_id, index_in_tx)
);

INSERT INTO reviews_by_payment (network, payment_id, index_in_tx, message, signature, recorded_ms)
SELECT r.network, r.payment_id,
       COALESCE((SELECT MIN(p.index_in_tx) FROM payments p
                 WHERE p.network = r.network AND p.payment_id = r.payment_id), 0),
       r.message, r.signature, r.recorded_ms
FROM reviews r;

DROP TABLE reviews;
ALTER TABLE reviews_by_payment RENAME TO reviews;
