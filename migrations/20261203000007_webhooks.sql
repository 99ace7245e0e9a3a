-- Webhook delivery: per sink, the last event delivered or dead-lettered (advanced in the
-- same transaction as the dead letter), and the events that failed every attempt.
CREATE TABLE webhook_cursors (
    name       TEXT   NOT NULL PRIMARY KEY,
    last_event BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);

CREATE TABLE webhook_dead_letters (
    name     TEXT   NOT NULL,
    event_id BIGINT NOT NULL,
    attempts BIGINT NOT NULL,
    error    TEXT   NOT NULL,
    at_ms    BIGINT NOT NULL,
    PRIMARY KEY (name, event_id)
);
