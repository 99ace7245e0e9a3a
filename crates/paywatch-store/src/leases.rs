//! Leases on writing jobs, for several paywatch processes on one store: a job (a
//! network's worker, a webhook sink) is owned by one process until its lease expires,
//! renewed by heartbeat. Expiry is judged by the database's clock. A store handle fenced
//! by a lease checks, inside each of its write transactions, that the lease is still its
//! own and unexpired, and holds that row locked to the commit: a process that lost its
//! lease (paused, partitioned) can never commit over its successor.

use std::sync::Arc;
use std::time::Duration;

use sqlx::{AssertSqlSafe, Row};

use crate::{Backend, Store, StoreError, Tx, to_i64};

/// The lease a fenced store writes under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fence {
    job: String,
    owner: String,
}

/// A lease as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The job: `worker:<network>` or `webhook:<name>`.
    pub job: String,
    /// The owning process (`host:pid:random`).
    pub owner: String,
    /// When it lapses unless renewed, Unix milliseconds (database clock).
    pub expires_ms: i64,
    /// When this owner took it.
    pub acquired_ms: i64,
    /// When this owner last renewed it.
    pub renewed_ms: i64,
    /// Whether it had lapsed when read.
    pub expired: bool,
}

impl Backend {
    /// The database's clock in Unix milliseconds, as SQL.
    pub(crate) fn now_ms_sql(self) -> &'static str {
        match self {
            Self::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
            Self::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
        }
    }
}

impl Store {
    /// Takes or renews the lease on `job` for `owner` for `ttl`: true when `owner` holds
    /// it afterwards (it was free, lapsed, or already its own).
    pub async fn acquire_lease(&self, job: &str, owner: &str, ttl: Duration) -> Result<bool, StoreError> {
        let now = self.backend.now_ms_sql();
        let sql = format!(
            "INSERT INTO worker_leases (job, owner, expires_ms, acquired_ms, renewed_ms) \
             VALUES ($1, $2, {now} + $3, {now}, {now}) \
             ON CONFLICT (job) DO UPDATE SET owner = excluded.owner, expires_ms = excluded.expires_ms, \
             renewed_ms = excluded.renewed_ms, acquired_ms = CASE WHEN worker_leases.owner = excluded.owner \
             THEN worker_leases.acquired_ms ELSE excluded.acquired_ms END \
             WHERE worker_leases.owner = excluded.owner OR worker_leases.expires_ms < {now} \
             RETURNING owner"
        );
        let ttl_ms = to_i64("lease ttl", u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))?;
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(job.to_string())
            .bind(owner.to_string())
            .bind(ttl_ms)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    /// Gives up `owner`'s lease on `job` at once, so another process need not wait for it
    /// to lapse.
    pub async fn release_lease(&self, job: &str, owner: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE worker_leases SET expires_ms = 0 WHERE job = $1 AND owner = $2")
            .bind(job.to_string())
            .bind(owner.to_string())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Every lease, by job.
    pub async fn leases(&self) -> Result<Vec<Lease>, StoreError> {
        let sql = format!(
            "SELECT job, owner, expires_ms, acquired_ms, renewed_ms, \
             CAST(CASE WHEN expires_ms < {} THEN 1 ELSE 0 END AS BIGINT) AS expired FROM worker_leases ORDER BY job",
            self.backend.now_ms_sql()
        );
        let rows = sqlx::query(AssertSqlSafe(sql)).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| {
                let expired: i64 = row.try_get("expired")?;
                Ok(Lease {
                    job: row.try_get("job")?,
                    owner: row.try_get("owner")?,
                    expires_ms: row.try_get("expires_ms")?,
                    acquired_ms: row.try_get("acquired_ms")?,
                    renewed_ms: row.try_get("renewed_ms")?,
                    expired: expired != 0,
                })
            })
            .collect()
    }

    /// This store, writing only while `owner` holds the lease on `job`: each write
    /// transaction first checks the lease and fails with [`StoreError::LeaseLost`] when
    /// it is another's or has lapsed.
    pub fn fenced(&self, job: &str, owner: &str) -> Self {
        Self {
            fence: Some(Arc::new(Fence {
                job: job.to_string(),
                owner: owner.to_string(),
            })),
            ..self.clone()
        }
    }

    /// A write transaction: every write of a worker or a leased job goes through one. It
    /// checks the fence (if any) first and keeps its row locked until the transaction
    /// ends, so no take-over can interleave with the commit.
    pub(crate) async fn write_tx(&self) -> Result<Tx<'static>, StoreError> {
        let mut tx = self.pool.begin().await?;
        self.check_fence(&mut tx).await?;
        Ok(tx)
    }

    /// Inside a write transaction: the fence, if any, is held.
    async fn check_fence(&self, tx: &mut Tx<'_>) -> Result<(), StoreError> {
        let Some(fence) = &self.fence else {
            return Ok(());
        };
        let sql = format!(
            "UPDATE worker_leases SET renewed_ms = renewed_ms WHERE job = $1 AND owner = $2 AND expires_ms > {}",
            self.backend.now_ms_sql()
        );
        let held = sqlx::query(AssertSqlSafe(sql))
            .bind(fence.job.clone())
            .bind(fence.owner.clone())
            .execute(&mut **tx)
            .await?
            .rows_affected();
        if held == 1 {
            Ok(())
        } else {
            Err(StoreError::LeaseLost {
                job: fence.job.clone(),
            })
        }
    }
}
