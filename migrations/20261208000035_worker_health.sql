-- What each network's worker last did, for `paywatch status` and `/readyz`: when it
-- (re)started, when it last completed a step and the chain head it saw then, its last
-- failure, the RPC endpoints it dropped for serving another chain (one per line), and why
-- it stopped, if it did. Times are the database's clock, in Unix milliseconds.
CREATE TABLE worker_health (
    network TEXT PRIMARY KEY,
    started_ms BIGINT NOT NULL,
    stepped_ms BIGINT,
    seen_head BIGINT,
    failed_ms BIGINT,
    failure TEXT,
    refused_endpoints TEXT NOT NULL DEFAULT '',
    stopped TEXT
);
