//! A fresh store per test: a SQLite file in a temporary directory, or a new database on the
//! Postgres server at `$PAYWATCH_TEST_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`).

use std::sync::atomic::{AtomicU64, Ordering};

use paywatch_store::{Store, StoreOptions};
use sqlx::{Connection, Executor, PgConnection, Row};

/// Which database a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A SQLite file.
    Sqlite,
    /// A Postgres database.
    Postgres,
}

/// A test database; removed when dropped.
pub struct TestDb {
    /// Its URL.
    pub url: String,
    kind: Kind,
    name: String,
    _dir: Option<tempfile::TempDir>,
}

pub(crate) fn admin_url() -> String {
    std::env::var("PAYWATCH_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

impl TestDb {
    /// Creates an empty database of `kind`.
    pub async fn create(kind: Kind) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "paywatch_test_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        match kind {
            Kind::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}", dir.path().join("paywatch.db").display());
                Self {
                    url,
                    kind,
                    name,
                    _dir: Some(dir),
                }
            }
            Kind::Postgres => {
                let admin = admin_url();
                let mut conn = PgConnection::connect(&admin)
                    .await
                    .unwrap_or_else(|e| panic!("connect to Postgres at {admin} (is it running?): {e}"));
                conn.execute(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                )))
                .await
                .expect("drop old test database");
                conn.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                    .await
                    .expect("create test database");
                let mut url = url::Url::parse(&admin).expect("admin URL");
                url.set_path(&name);
                Self {
                    url: url.to_string(),
                    kind,
                    name,
                    _dir: None,
                }
            }
        }
    }

    /// Opens the store on it, applying the schema.
    pub async fn open(&self) -> Store {
        Store::open(&self.url, &StoreOptions::default())
            .await
            .expect("open store")
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if self.kind != Kind::Postgres {
            return;
        }
        let name = self.name.clone();
        // Drop runs outside any runtime guarantee: use a thread with its own small runtime.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let mut conn = PgConnection::connect(&admin_url()).await.ok()?;
                conn.execute(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                )))
                .await
                .ok()
            })
        })
        .join();
    }
}

/// How long one end-to-end test may run before it fails instead of hanging.
pub const TEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Declares one test per store kind: `name::sqlite` and `name::postgres`, each calling
/// `body(Kind)` and failing if it runs longer than [`TEST_TIMEOUT`].
#[macro_export]
macro_rules! on_both_stores {
    ($name:ident, $body:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                tokio::time::timeout(
                    $crate::stores::TEST_TIMEOUT,
                    super::$body($crate::stores::Kind::Sqlite),
                )
                .await
                .expect("test timed out");
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                tokio::time::timeout(
                    $crate::stores::TEST_TIMEOUT,
                    super::$body($crate::stores::Kind::Postgres),
                )
                .await
                .expect("test timed out");
            }
        }
    };
}

/// The bytes a closed store takes on disk, indexes included: a SQLite file (with its
/// write-ahead log, if any), or the Postgres database's tables and indexes (the sum of
/// [`stored_bytes_by_relation`], which is `pg_total_relation_size` of every table).
pub async fn stored_bytes(db: &TestDb) -> u64 {
    match db.kind {
        Kind::Sqlite => {
            let path = db.url.trim_start_matches("sqlite://");
            [path.to_string(), format!("{path}-wal")]
                .iter()
                .filter_map(|file| std::fs::metadata(file).ok())
                .map(|meta| meta.len())
                .sum()
        }
        Kind::Postgres => stored_bytes_by_relation(db)
            .await
            .iter()
            .map(|(_, bytes)| bytes)
            .sum(),
    }
}

/// The bytes each table and index of a closed store takes: SQLite's
/// `dbstat` pages per table and index, or Postgres's `pg_table_size` of each table (its
/// TOAST and maps included) and `pg_relation_size` of each index. Their sum is
/// [`stored_bytes`] less SQLite's file header and free pages.
pub async fn stored_bytes_by_relation(db: &TestDb) -> Vec<(String, u64)> {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&db.url).await.expect("connect to measure");
    let sql = match db.kind {
        Kind::Sqlite => "SELECT name, CAST(SUM(pgsize) AS BIGINT) AS bytes FROM dbstat GROUP BY name",
        Kind::Postgres => {
            "SELECT CAST(c.relname AS TEXT) AS name, CAST(CASE c.relkind WHEN 'r' THEN pg_table_size(c.oid) \
             ELSE pg_relation_size(c.oid) END AS BIGINT) AS bytes FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i')"
        }
    };
    let sizes: Vec<(String, u64)> = sqlx::query(sql)
        .fetch_all(&pool)
        .await
        .expect("relation sizes")
        .iter()
        .map(|row| {
            let bytes: i64 = row.get("bytes");
            (row.get("name"), bytes.try_into().unwrap_or_default())
        })
        .collect();
    pool.close().await;
    sizes
}

/// A transfer listing of every kept transfer of `network`, no other filter.
pub fn every_transfer(network: &str) -> paywatch_core::listing::TransferFilter {
    paywatch_core::listing::TransferFilter {
        network: network.parse().expect("a network id"),
        address: None,
        from_address: None,
        to_address: None,
        asset: None,
        from: None,
        to: None,
    }
}

/// Runs `sql` (`$1` bound to `network`) without the store's API: a hand edit, as an
/// operator or a broken disk would make one.
pub async fn execute(db: &TestDb, sql: &str, network: &str) {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&db.url).await.expect("connect to edit");
    sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
        .bind(network.to_string())
        .execute(&pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    pool.close().await;
}

/// The rows `table` (a table or view) holds for `network`, read without the store's API.
pub async fn table_rows(db: &TestDb, table: &str, network: &str) -> u64 {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&db.url).await.expect("connect to count");
    let count: i64 = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT COUNT(*) AS n FROM {table} WHERE network = $1"
    )))
    .bind(network.to_string())
    .fetch_one(&pool)
    .await
    .expect("count rows")
    .get("n");
    pool.close().await;
    count.try_into().expect("a count is not negative")
}

/// Every ingested row, without paywatch's own observation times, in a fixed order, and
/// the length of the (checked gap-free) event sequence.
pub async fn dump(url: &str, network: &str) -> Vec<String> {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let mut out = Vec::new();
    for (table, columns, order) in [
        (
            "stored_transfers",
            "tx_id, event_index, block_number, block_hash, token, from_address, to_address, amount",
            "tx_id, event_index",
        ),
        (
            "authorizations",
            "tx_id, event_index, block_number, block_hash, token, authorizer, nonce",
            "tx_id, event_index",
        ),
        (
            "payments",
            "payment_id, index_in_tx, event_index, block_number, block_hash, payer, pay_to, amount, asset, nonce, state, refunded_amount, \
             method, fee_amount, captured_amount, held_amount, released_amount",
            "payment_id, index_in_tx",
        ),
        (
            "escrow_events",
            "tx_id, event_index, block_number, block_hash, escrow, payment_id, kind, amount, CAST(fee_bps AS BIGINT), \
             fee_receiver, token_collector, CAST(applied AS BIGINT)",
            "tx_id, event_index",
        ),
        ("cursors", "token, next_block", "token"),
        ("blocks", "number, hash", "number"),
        (
            "refunds",
            "refund_tx_id, refund_event_index, payment_id, index_in_tx, amount, rule, block_number",
            "refund_tx_id, refund_event_index",
        ),
        (
            "payment_history",
            "payment_id, index_in_tx, seq, from_state, to_state, cause, block_number, COALESCE(tx_id, payment_id)",
            "payment_id, index_in_tx, seq",
        ),
    ] {
        let sql = format!("SELECT {columns} FROM {table} WHERE network = '{network}' ORDER BY {order}");
        for row in sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(&pool)
            .await
            .unwrap()
        {
            let mut line = table.to_string();
            for i in 0..row.len() {
                let text: Option<String> = row.try_get(i).ok().flatten();
                let number: Option<i64> = row.try_get(i).ok().flatten();
                line.push_str(&format!(
                    " {}",
                    text.or(number.map(|n| n.to_string())).unwrap_or_default()
                ));
            }
            out.push(line);
        }
    }
    // The event sequence is gap-free whatever was killed: ids 1..=n over the n rows of
    // both kinds of event.
    let row = sqlx::query(
        "SELECT COUNT(*), MIN(event_id), MAX(event_id) FROM \
         (SELECT event_id FROM payment_history UNION ALL SELECT event_id FROM review_events) AS events",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let (count, first, last): (i64, Option<i64>, Option<i64>) = (
        row.get(0),
        row.try_get(1).ok().flatten(),
        row.try_get(2).ok().flatten(),
    );
    assert_eq!((first, last), (Some(1), Some(count)), "event ids 1..={count}");
    out.push(format!("events {count}"));
    pool.close().await;
    out
}

/// The lines of a [`dump`] the chain alone determines — payments, transfers,
/// authorizations, refunds and escrow events — for comparing runs whose histories differ by when each
/// payment was first seen.
pub fn chain_facts(dump: Vec<String>) -> Vec<String> {
    dump.into_iter()
        .filter(|line| {
            [
                "stored_transfers ",
                "authorizations ",
                "payments ",
                "refunds ",
                "escrow_events ",
            ]
            .iter()
            .any(|table| line.starts_with(table))
        })
        .collect()
}

/// The process id in the owner name (`host:pid:random`) of `job`'s lease, while it is live.
pub async fn lease_owner_pid(store: &Store, job: &str) -> Option<u32> {
    let leases = store.leases().await.ok()?;
    let lease = leases.into_iter().find(|l| l.job == job && !l.expired)?;
    lease.owner.split(':').nth(1)?.parse().ok()
}

/// What a test compares of a stored payment: its id and number, payer, pay_to, amount,
/// state, refunded amount and nonce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentFacts {
    /// Transaction hash (or signature).
    pub payment_id: String,
    /// Its number in the transaction.
    pub index_in_tx: u32,
    /// Who paid.
    pub payer: String,
    /// Who was paid.
    pub pay_to: String,
    /// Exact amount.
    pub amount: String,
    /// State.
    pub state: String,
    /// Sum of final refunds.
    pub refunded_amount: String,
    /// The authorization's nonce.
    pub nonce: Option<String>,
}

/// The facts of every payment `filter` selects (up to 1,000), in chain order.
pub async fn payment_facts(
    store: &Store,
    filter: &paywatch_core::listing::PaymentFilter,
) -> Vec<PaymentFacts> {
    store
        .list_payments(filter, None, 1_000)
        .await
        .expect("list payments")
        .into_iter()
        .map(|p| PaymentFacts {
            payment_id: p.payment_id,
            index_in_tx: p.index_in_tx,
            payer: p.payer,
            pay_to: p.pay_to,
            amount: p.amount,
            state: p.state.to_string(),
            refunded_amount: p.refunded_amount,
            nonce: p.nonce,
        })
        .collect()
}
