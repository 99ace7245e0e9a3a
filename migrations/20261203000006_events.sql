-- One global sequence over every payment state change, for the event stream
-- (GET /v1/events): gap-free and in commit order. A writer reserves its ids by updating
-- the single counter row, which Postgres keeps locked until the writer commits, so a
-- reader that sees event N has every event below N; SQLite has one writer anyway.
ALTER TABLE payment_history ADD COLUMN event_id BIGINT;

-- Rows written before this migration are numbered in the order they were recorded.
UPDATE payment_history SET event_id = (
    SELECT COUNT(*) FROM payment_history AS earlier
    WHERE (earlier.at_ms, earlier.network, earlier.payment_id, earlier.index_in_tx, earlier.seq)
       <= (payment_history.at_ms, payment_history.network, payment_history.payment_id,
           payment_history.index_in_tx, payment_history.seq)
);

CREATE UNIQUE INDEX payment_history_by_event ON payment_history (event_id);

CREATE TABLE event_counter (
    id         BIGINT NOT NULL PRIMARY KEY,
    last_event BIGINT NOT NULL
);
INSERT INTO event_counter (id, last_event)
SELECT 1, COALESCE(MAX(event_id), 0) FROM payment_history;
