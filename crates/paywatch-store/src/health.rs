//! What each network's worker last did (`worker_health`): when it started, last completed
//! a step and failed, the endpoints it refused, why it stopped. Written by the runtime that
//! drives the workers (inside the worker's lease, so a process that lost it cannot write
//! over its successor's record), read by `paywatch status` and `/readyz`; times are the
//! database's clock, so processes on several hosts compare them alike.

use sqlx::{AssertSqlSafe, Row};

use crate::rows::to_u64;
use crate::{Store, StoreError, to_i64};

/// A worker's health as recorded, with its times as ages by the database's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerHealth {
    /// The network.
    pub network: String,
    /// Milliseconds since the worker last (re)started.
    pub started_ago_ms: i64,
    /// Milliseconds since it last completed a step, if it did since it started.
    pub stepped_ago_ms: Option<i64>,
    /// The chain head it saw at that step.
    pub seen_head: Option<u64>,
    /// Milliseconds since its last failed step, if one failed since it started.
    pub failed_ago_ms: Option<i64>,
    /// Why that step failed.
    pub failure: Option<String>,
    /// The RPC endpoints it dropped for serving another chain, each with what it serves.
    pub refused_endpoints: Vec<String>,
    /// Why it stopped for good, if it did.
    pub stopped: Option<String>,
}

impl Store {
    /// Records that the worker of `network` (re)starts: its steps, failure and stop so far
    /// are forgotten.
    pub async fn worker_started(&self, network: &str) -> Result<(), StoreError> {
        let now = self.backend.now_ms_sql();
        let mut tx = self.write_tx().await?;
        sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO worker_health (network, started_ms) VALUES ($1, {now}) \
             ON CONFLICT (network) DO UPDATE SET started_ms = excluded.started_ms, stepped_ms = NULL, \
             seen_head = NULL, failed_ms = NULL, failure = NULL, refused_endpoints = '', stopped = NULL"
        )))
        .bind(network.to_string())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records that the worker of `network` completed a step, having seen the chain head
    /// `seen_head`, with the endpoints it refuses so far.
    pub async fn worker_stepped(
        &self,
        network: &str,
        seen_head: Option<u64>,
        refused_endpoints: &[String],
    ) -> Result<(), StoreError> {
        let now = self.backend.now_ms_sql();
        let mut tx = self.write_tx().await?;
        sqlx::query(AssertSqlSafe(format!(
            "UPDATE worker_health SET stepped_ms = {now}, seen_head = COALESCE($2, seen_head), \
             refused_endpoints = $3 WHERE network = $1"
        )))
        .bind(network.to_string())
        .bind(seen_head.map(|head| to_i64("block number", head)).transpose()?)
        .bind(refused_endpoints.join("\n"))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records that a step of the worker of `network` failed with `failure`.
    pub async fn worker_failed(
        &self,
        network: &str,
        failure: &str,
        refused_endpoints: &[String],
    ) -> Result<(), StoreError> {
        let now = self.backend.now_ms_sql();
        let mut tx = self.write_tx().await?;
        sqlx::query(AssertSqlSafe(format!(
            "UPDATE worker_health SET failed_ms = {now}, failure = $2, refused_endpoints = $3 \
             WHERE network = $1"
        )))
        .bind(network.to_string())
        .bind(failure.to_string())
        .bind(refused_endpoints.join("\n"))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records that the worker of `network` stopped for good, and why.
    pub async fn worker_stopped(&self, network: &str, reason: &str) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        sqlx::query("UPDATE worker_health SET stopped = $2 WHERE network = $1")
            .bind(network.to_string())
            .bind(reason.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// What the worker of `network` last recorded, if one ever ran on this store.
    pub async fn worker_health(&self, network: &str) -> Result<Option<WorkerHealth>, StoreError> {
        let now = self.backend.now_ms_sql();
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT network, {now} - started_ms AS started_ago_ms, {now} - stepped_ms AS stepped_ago_ms, \
             seen_head, {now} - failed_ms AS failed_ago_ms, failure, refused_endpoints, stopped \
             FROM worker_health WHERE network = $1"
        )))
        .bind(network.to_string())
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            let refused: String = row.try_get("refused_endpoints")?;
            Ok(WorkerHealth {
                network: row.try_get("network")?,
                started_ago_ms: row.try_get("started_ago_ms")?,
                stepped_ago_ms: row.try_get("stepped_ago_ms")?,
                seen_head: row
                    .try_get::<Option<i64>, _>("seen_head")?
                    .map(|head| to_u64("worker_health", "seen_head", head))
                    .transpose()?,
                failed_ago_ms: row.try_get("failed_ago_ms")?,
                failure: row.try_get("failure")?,
                refused_endpoints: refused.lines().map(str::to_string).collect(),
                stopped: row.try_get("stopped")?,
            })
        })
        .transpose()
    }
}
