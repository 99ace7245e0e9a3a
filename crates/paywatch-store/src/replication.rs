//! Postgres streaming replication as the read side sees it: how far the primary has
//! written its write-ahead log, how far a standby has replayed it, and which cluster a
//! server belongs to. Postgres only.

use sqlx::Row;

use crate::{Backend, Store, StoreError};

/// Where a standby stands in replaying the primary's write-ahead log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StandbyPosition {
    /// The server is a standby: it replays a primary's log and refuses writes.
    pub in_recovery: bool,
    /// The log position replayed so far (bytes from the log's start); `None` on a server
    /// that never replayed a log.
    pub replayed: Option<u64>,
}

impl Store {
    /// The primary's current write-ahead log position, in bytes from the log's start.
    pub async fn wal_written(&self) -> Result<u64, StoreError> {
        self.postgres_only("the write-ahead log position")?;
        let row = sqlx::query("SELECT CAST(pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') AS BIGINT)")
            .fetch_one(&self.pool)
            .await?;
        wal_bytes(row.try_get::<i64, _>(0)?)
    }

    /// Whether this server is a standby and how far it has replayed its primary's log.
    pub async fn standby_position(&self) -> Result<StandbyPosition, StoreError> {
        self.postgres_only("a standby's replay position")?;
        let row = sqlx::query(
            "SELECT pg_is_in_recovery(), CAST(pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0') AS BIGINT)",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(StandbyPosition {
            in_recovery: row.try_get(0)?,
            replayed: row.try_get::<Option<i64>, _>(1)?.map(wal_bytes).transpose()?,
        })
    }

    /// The database cluster's system identifier, which a physical standby shares with its
    /// primary; `None` when this role may not read it (`pg_control_system()` needs
    /// `pg_monitor` or a superuser on some installations).
    pub async fn cluster_identifier(&self) -> Result<Option<String>, StoreError> {
        self.postgres_only("the cluster identifier")?;
        let read = sqlx::query("SELECT CAST(system_identifier AS TEXT) FROM pg_control_system()")
            .fetch_one(&self.pool)
            .await;
        match read {
            Ok(row) => Ok(Some(row.try_get(0)?)),
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42501") => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn postgres_only(&self, what: &'static str) -> Result<(), StoreError> {
        match self.backend {
            Backend::Postgres => Ok(()),
            Backend::Sqlite => Err(StoreError::PostgresOnly { what }),
        }
    }
}

fn wal_bytes(value: i64) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt {
        table: "pg_wal",
        detail: format!("negative log position {value}"),
    })
}
