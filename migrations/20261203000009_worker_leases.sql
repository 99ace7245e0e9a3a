-- Leases: which process owns each writing job (a network's worker, a webhook sink) when
-- several paywatch processes share one store. Times are the database's clock, in Unix
-- milliseconds, so replicas on different machines agree on expiry.
CREATE TABLE worker_leases (
    job         TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    expires_ms  BIGINT NOT NULL,
    acquired_ms BIGINT NOT NULL,
    renewed_ms  BIGINT NOT NULL
);
