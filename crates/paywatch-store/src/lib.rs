//! paywatch's storage: one schema (`migrations/`) on SQLite, the embedded default, or on
//! Postgres, for production and for several replicas. Both are reached through sqlx's
//! `Any` driver, so every query here is written once and runs on both.
//!
//! Writes are idempotent (unique keys, upserts) and each batch of rows commits in one
//! transaction together with the cursor that says it was read.

mod audits;
mod batches;
mod escrow;
mod heads;
mod health;
mod history;
mod leases;
mod lookups;
mod migrations;
mod query;
mod refunds;
mod repairs;
mod replication;
mod retention;
mod reviews;
mod rollback;
mod rows;
mod signed;
mod sql;
mod totals;
mod transfers;
mod webhooks;

use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Executor};

pub use audits::AuditKind;
pub use batches::{Committed, TokenCursor};
pub use escrow::{StoredEscrow, StoredEscrowEvent};
pub use heads::HeadUpdate;
pub use health::WorkerHealth;
pub use leases::Lease;
pub use lookups::MAX_COALESCED;
pub use migrations::migrator_for;
pub use query::{ChainHead, HistoryEntry, PaymentEvent, PaymentLookup, StoredPayment, StoredRefund};
pub use replication::StandbyPosition;
pub use reviews::{ReviewRecording, StoredReview};
pub use rollback::RollbackSummary;
pub use signed::BoundIntent;
pub use totals::StateTotals;
pub use transfers::StoredTransfer;
pub use webhooks::DeadLetter;

/// The schema, embedded from `migrations/` at build time.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// Set on every SQLite connection: write-ahead logging (readers never wait for the
/// writer), fsync at checkpoints only, and a 10 s wait for the write lock.
const SQLITE_PRAGMAS: &str =
    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 10000;";

/// Which database a store URL points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file: single process, zero set-up.
    Sqlite,
    /// A Postgres server: production, several replicas.
    Postgres,
}

/// A store error, with what went wrong.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store URL is neither `sqlite:` nor `postgres:`.
    #[error(
        "unsupported store URL `{0}`: use sqlite://FILE (default sqlite://paywatch.db) or postgres://USER@HOST:PORT/DATABASE"
    )]
    UnsupportedUrl(String),
    /// The database refused or failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// Applying the schema failed.
    #[error("could not apply the schema migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored value is not what paywatch writes (the database was edited by hand?).
    #[error("corrupt row in `{table}`: {detail}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// A fenced store's lease is no longer its own.
    #[error(
        "this process no longer holds the lease on {job}: another process took over, or the lease lapsed while the store was unreachable"
    )]
    LeaseLost {
        /// The job whose lease is gone.
        job: String,
    },
    /// The lookup readers stopped (the runtime that opened the store is shutting down).
    #[error("the store's lookup readers have stopped; is paywatch shutting down?")]
    ReadersStopped,
    /// The failure of a statement that answered several lookups at once.
    #[error(transparent)]
    Shared(std::sync::Arc<Self>),
    /// A re-read payment's facts differ from the stored ones under the same key: the node
    /// answers the same transaction differently than before. Nothing is overwritten.
    #[error(
        "payment {payment_id} #{index_in_tx} on {network} is stored as {stored}, but the node now answers {answered}; nothing was overwritten — check the RPC endpoint"
    )]
    ConflictingPayment {
        /// The network.
        network: String,
        /// The payment's transaction.
        payment_id: String,
        /// Its number in the transaction.
        index_in_tx: u32,
        /// The stored facts (payer → pay_to amount asset).
        stored: String,
        /// The facts of the new answer.
        answered: String,
    },
    /// A Postgres feature was asked of a SQLite store.
    #[error("{what} is a Postgres feature; this store is SQLite")]
    PostgresOnly {
        /// What was asked.
        what: &'static str,
    },
    /// A number does not fit the database's signed 64-bit integers.
    #[error("{what} {value} does not fit in a signed 64-bit column")]
    OutOfRange {
        /// Which number.
        what: &'static str,
        /// The value.
        value: u64,
    },
}

impl StoreError {
    /// Whether the database did not answer at all (refused or dropped the connection, or
    /// none came within the acquire timeout), as against answering with a refusal.
    pub fn is_unreachable(&self) -> bool {
        match self {
            Self::Database(sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed) => true,
            Self::Shared(inner) => inner.is_unreachable(),
            _ => false,
        }
    }

    /// Whether trying again cannot heal it: the stored data is not what paywatch writes,
    /// the node's answer conflicts with a stored payment, the schema did not apply, or the
    /// configuration asks what the store cannot do. A worker stops on such an error and
    /// says what to do; any other (a dropped connection, a lost lease) is tried again.
    pub fn is_fatal(&self) -> bool {
        match self {
            Self::Corrupt { .. }
            | Self::ConflictingPayment { .. }
            | Self::Migrate(_)
            | Self::UnsupportedUrl(_)
            | Self::PostgresOnly { .. }
            | Self::OutOfRange { .. } => true,
            Self::Shared(inner) => inner.is_fatal(),
            Self::Database(_) | Self::LeaseLost { .. } | Self::ReadersStopped => false,
        }
    }
}

/// A write transaction of the store.
pub(crate) type Tx<'c> = sqlx::Transaction<'c, sqlx::Any>;

/// A handle on the store; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    /// Payment lookups, answered by a few readers that share statements under load.
    lookups: lookups::LookupQueue,
    /// When set, writes commit only while this lease is held.
    fence: Option<std::sync::Arc<leases::Fence>>,
}

/// Options for opening a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Most connections in the pool.
    pub max_connections: u32,
    /// How long a statement may wait for a connection (and for the server to accept one)
    /// before it fails.
    pub acquire_timeout: std::time::Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_connections: 8,
            acquire_timeout: std::time::Duration::from_secs(30),
        }
    }
}

/// The backend of `url`, and the pool to open on it with `options`.
fn pool_of(
    url: &str,
    options: &StoreOptions,
) -> Result<(Backend, AnyPoolOptions, AnyConnectOptions), StoreError> {
    sqlx::any::install_default_drivers();
    let (backend, url) = normalize_url(url)?;
    let connect_options = AnyConnectOptions::from_str(&url)?;
    let mut pool_options = AnyPoolOptions::new()
        .max_connections(options.max_connections.max(1))
        .acquire_timeout(options.acquire_timeout);
    if backend == Backend::Sqlite {
        // A file has no connection to lose: checking each one before use would only
        // add a round trip to its worker thread per query.
        pool_options = pool_options
            .test_before_acquire(false)
            .after_connect(|conn, _meta| {
                Box::pin(async move {
                    conn.execute(SQLITE_PRAGMAS).await?;
                    Ok(())
                })
            });
    }
    Ok((backend, pool_options, connect_options))
}

impl Store {
    /// Connects to `url` (`sqlite://FILE` or `postgres://…`) without touching the schema.
    /// A SQLite file is created if missing and put in WAL mode.
    pub async fn connect(url: &str, options: &StoreOptions) -> Result<Self, StoreError> {
        let (backend, pool_options, connect_options) = pool_of(url, options)?;
        let pool = pool_options.connect_with(connect_options).await?;
        Ok(Self::over(pool, backend, options))
    }

    /// [`Store::connect`] without connecting yet: the pool connects on first use, so a
    /// database that is down now (a read replica restarting) fails reads, not the start.
    pub fn connect_lazy(url: &str, options: &StoreOptions) -> Result<Self, StoreError> {
        let (backend, pool_options, connect_options) = pool_of(url, options)?;
        Ok(Self::over(
            pool_options.connect_lazy_with(connect_options),
            backend,
            options,
        ))
    }

    fn over(pool: AnyPool, backend: Backend, options: &StoreOptions) -> Self {
        Self {
            lookups: lookups::LookupQueue::start(pool.clone(), backend, lookup_readers(backend, options)),
            pool,
            backend,
            fence: None,
        }
    }

    /// Connects and applies any schema migrations not yet applied.
    pub async fn open(url: &str, options: &StoreOptions) -> Result<Self, StoreError> {
        let store = Self::connect(url, options).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Applies the schema migrations that are not applied yet.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        migrator_for(self.backend, &MIGRATOR).run(&self.pool).await?;
        Ok(())
    }

    /// Which database this is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Checks the database answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Closes the pool, waiting for connections in use.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// How many lookup statements may run at once: at most half the pool (the rest is left to
/// writers and listings) and, on SQLite, whose reads run on this machine's cores, no more
/// than there are cores; more would only add thread switches.
fn lookup_readers(backend: Backend, options: &StoreOptions) -> usize {
    let half_pool = (options.max_connections / 2).max(1) as usize;
    match backend {
        Backend::Sqlite => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            half_pool.min(cores)
        }
        Backend::Postgres => half_pool,
    }
}

fn normalize_url(url: &str) -> Result<(Backend, String), StoreError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok((Backend::Postgres, url.to_string()));
    }
    if url.starts_with("sqlite:") {
        if url.contains("mode=") || url.contains(":memory:") {
            return Ok((Backend::Sqlite, url.to_string()));
        }
        let sep = if url.contains('?') { '&' } else { '?' };
        return Ok((Backend::Sqlite, format!("{url}{sep}mode=rwc")));
    }
    Err(StoreError::UnsupportedUrl(url.to_string()))
}

/// Milliseconds since the Unix epoch, for observation times.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Converts a block number to the database's signed integer.
pub(crate) fn to_i64(what: &'static str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::OutOfRange { what, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_store_urls() {
        assert_eq!(
            normalize_url("sqlite://paywatch.db").unwrap(),
            (Backend::Sqlite, "sqlite://paywatch.db?mode=rwc".to_string())
        );
        assert_eq!(
            normalize_url("sqlite://x.db?mode=ro").unwrap().1,
            "sqlite://x.db?mode=ro"
        );
        assert_eq!(normalize_url("postgres://u@h/db").unwrap().0, Backend::Postgres);
        assert!(matches!(
            normalize_url("mysql://u@h/db"),
            Err(StoreError::UnsupportedUrl(_))
        ));
        assert!(matches!(
            normalize_url("paywatch.db"),
            Err(StoreError::UnsupportedUrl(_))
        ));
    }
}
