//! Schema migrations that rewrite stored rows, on SQLite and on Postgres: a store written
//! by an earlier paywatch is opened by this one and its rows read as this one writes them.

use paywatch_store::ReviewRecording;
use paywatch_tests::on_both_stores;
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::tools::repo_root;
use sqlx::{AnyPool, Row};

const NET: &str = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp";
/// Base and its USDC, for the EVM migrations' tests.
const EVM: &str = "eip155:8453";
const TOKEN: &str = "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913";
const USDC: &str = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";
const FACILITATOR: &str = "2wKupLR9q6wXYppw8Gr2NvWxKBUqm4PPJKkQfoxHDBg4";
const SELLER_A: &str = "7xLk17EQQ5KLDLDe44wCmupJKJjTGd8hs3eSVVhCx932";
const SELLER_B: &str = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin";
const SELLER_C: &str = "3emsAVdmGKERbHjmGfQ6oZ1e35dkf5iYcS6U4CPKFVaa";
const SIG: &str = "5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW";
const SIG2: &str = "4RPQ8mkVv9jzqNgmJYdAGBCKMJXCbHe6EUidxN8hmcDpRb3qgJXbgP3n1FJVqJnGxjwPmDuTC3PB6UGNyNFSxTDf";

/// Applies the migrations before `first_new` (file name prefix) to `url`, each cut to
/// the backend's own section as the store cuts them.
async fn migrate_before(url: &str, first_new: &str) {
    let backend = if url.starts_with("sqlite:") {
        paywatch_store::Backend::Sqlite
    } else {
        paywatch_store::Backend::Postgres
    };
    let old = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(repo_root().join("migrations")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if name.as_str() < first_new {
            std::fs::copy(&path, old.path().join(name)).unwrap();
        }
    }
    let pool = pool(url).await;
    let full = sqlx::migrate::Migrator::new(old.path()).await.unwrap();
    paywatch_store::migrator_for(backend, &full)
        .run(&pool)
        .await
        .unwrap();
}

async fn pool(url: &str) -> AnyPool {
    sqlx::any::install_default_drivers();
    let url = if url.starts_with("sqlite:") {
        format!("{url}?mode=rwc")
    } else {
        url.to_string()
    };
    AnyPool::connect(&url).await.unwrap()
}

async fn exec(pool: &AnyPool, sql: &str) {
    sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

fn transfer(sig: &str, index: u64, to: &str, amount: u64) -> String {
    format!(
        "INSERT INTO transfers (network, tx_id, event_index, block_number, block_hash, block_time, token, from_address, to_address, amount) \
         VALUES ('{NET}', '{sig}', {index}, 300, 'H', 1700000000, '{USDC}', '{FACILITATOR}', '{to}', '{amount}')"
    )
}

fn payment(sig: &str, index_in_tx: u64, event_index: u64, pay_to: &str, amount: u64) -> String {
    format!(
        "INSERT INTO payments (network, payment_id, index_in_tx, event_index, block_number, block_hash, block_time, payer, pay_to, amount, asset, state, history_len, first_seen_ms, state_changed_ms) \
         VALUES ('{NET}', '{sig}', {index_in_tx}, {event_index}, 300, 'H', 1700000000, '{FACILITATOR}', '{pay_to}', '{amount}', '{USDC}', 'paid', 1, 1, 1)"
    )
}

fn history(sig: &str, index_in_tx: u64, event_id: u64) -> String {
    format!(
        "INSERT INTO payment_history (network, payment_id, index_in_tx, seq, from_state, to_state, cause, block_number, tx_id, at_ms, event_id) \
         VALUES ('{NET}', '{sig}', {index_in_tx}, 0, NULL, 'paid', 'seen_final', 300, '{sig}', {event_id}, {event_id})"
    )
}

/// The first paywatch numbered a Solana transaction's payments by their order among the
/// payments to watched wallets. In `SIG` (transfers to A, B, C at instructions 0, 1, 2)
/// only B and C were watched: B was #0, C #1. In `SIG2` wallet A was added later, and the
/// re-read left A's number with B's facts. After the migration every payment is numbered
/// by its instruction, with its own facts, and its history, refunds and intent follow it.
async fn solana_payments_are_renumbered_by_instruction(kind: Kind) {
    let db = TestDb::create(kind).await;
    migrate_before(&db.url, "20261203000011").await;
    let pool = pool(&db.url).await;
    for sig in [SIG, SIG2] {
        exec(&pool, &transfer(sig, 0, SELLER_A, 100)).await;
        exec(&pool, &transfer(sig, 1, SELLER_B, 200)).await;
        exec(&pool, &transfer(sig, 2, SELLER_C, 300)).await;
    }
    exec(&pool, &payment(SIG, 0, 1, SELLER_B, 200)).await;
    exec(&pool, &payment(SIG, 1, 2, SELLER_C, 300)).await;
    exec(&pool, &history(SIG, 0, 1)).await;
    exec(&pool, &history(SIG, 1, 2)).await;
    exec(&pool, &payment(SIG2, 0, 0, SELLER_B, 200)).await;
    exec(&pool, &payment(SIG2, 1, 1, SELLER_B, 200)).await;
    exec(&pool, &history(SIG2, 0, 3)).await;
    exec(&pool, &history(SIG2, 1, 4)).await;
    exec(
        &pool,
        &format!(
            "INSERT INTO refunds (network, refund_tx_id, refund_event_index, payment_id, index_in_tx, amount, rule, block_number, assigned_ms) \
             VALUES ('{NET}', 'R', 0, '{SIG}', 1, '300', 'memo', 400, 1)"
        ),
    )
    .await;
    exec(
        &pool,
        &format!(
            "INSERT INTO intents (network, payment_id, index_in_tx, method, url, class, max_atomic, salt, revealed_ms) \
             VALUES ('{NET}', '{SIG}', 0, 'GET', 'https://x/y', 'c', '200', 's', 1)"
        ),
    )
    .await;
    // An EVM payment is left as it is.
    exec(
        &pool,
        "INSERT INTO payments (network, payment_id, index_in_tx, event_index, block_number, block_hash, payer, pay_to, amount, asset, state, first_seen_ms, state_changed_ms) \
         VALUES ('eip155:8453', '0xaa', 0, 7, 1, 'H', '0x1', '0x2', '5', '0x3', 'paid', 1, 1)",
    )
    .await;

    db.open().await;

    let rows = sqlx::query("SELECT payment_id, index_in_tx, event_index, pay_to, amount FROM payments ORDER BY payment_id, index_in_tx")
        .fetch_all(&pool)
        .await
        .unwrap();
    let payments: Vec<(String, i64, i64, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r.get("payment_id"),
                r.get("index_in_tx"),
                r.get("event_index"),
                r.get("pay_to"),
                r.get("amount"),
            )
        })
        .collect();
    let row = |sig: &str, index: i64, to: &str, amount: &str| {
        (sig.to_string(), index, index, to.to_string(), amount.to_string())
    };
    let mut expected = vec![
        ("0xaa".to_string(), 0, 7, "0x2".to_string(), "5".to_string()),
        row(SIG2, 0, SELLER_A, "100"),
        row(SIG2, 1, SELLER_B, "200"),
        row(SIG, 1, SELLER_B, "200"),
        row(SIG, 2, SELLER_C, "300"),
    ];
    expected.sort();
    assert_eq!(payments, expected);

    let keys = |sql: &str| {
        let pool = pool.clone();
        let sql = sql.to_string();
        async move {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .fetch_all(&pool)
                .await
                .unwrap()
                .iter()
                .map(|r| (r.get::<String, _>("payment_id"), r.get::<i64, _>("index_in_tx")))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        keys("SELECT payment_id, index_in_tx FROM payment_history ORDER BY event_id").await,
        vec![
            (SIG.to_string(), 1),
            (SIG.to_string(), 2),
            (SIG2.to_string(), 0),
            (SIG2.to_string(), 1)
        ]
    );
    assert_eq!(
        keys("SELECT payment_id, index_in_tx FROM refunds").await,
        vec![(SIG.to_string(), 2)]
    );
    assert_eq!(
        keys("SELECT payment_id, index_in_tx FROM intents").await,
        vec![(SIG.to_string(), 1)]
    );
}
on_both_stores!(solana_renumbering, solana_payments_are_renumbered_by_instruction);

/// Reviews were one per (network, payment); they are now one per payment of a
/// transaction. A review recorded before could only be of a transaction holding one
/// payment, and takes that payment's number (2 here, a Solana payment at instruction 2);
/// a review of a payment not indexed (any more) takes 0.
async fn reviews_take_the_number_of_their_payment(kind: Kind) {
    let db = TestDb::create(kind).await;
    migrate_before(&db.url, "20261204000012").await;
    let pool = pool(&db.url).await;
    exec(&pool, &payment(SIG, 2, 2, SELLER_C, 300)).await;
    for sig in [SIG, SIG2] {
        exec(
            &pool,
            &format!(
                "INSERT INTO reviews (network, payment_id, message, signature, recorded_ms) \
                 VALUES ('{NET}', '{sig}', 'x402 review v1…', 'sig', 1)"
            ),
        )
        .await;
    }

    let store = db.open().await;

    let rows = sqlx::query("SELECT payment_id, index_in_tx, message FROM reviews ORDER BY payment_id")
        .fetch_all(&pool)
        .await
        .unwrap();
    let reviews: Vec<(String, i64, String)> = rows
        .iter()
        .map(|r| (r.get("payment_id"), r.get("index_in_tx"), r.get("message")))
        .collect();
    assert_eq!(
        reviews,
        vec![
            (SIG2.to_string(), 0, "x402 review v1…".to_string()),
            (SIG.to_string(), 2, "x402 review v1…".to_string()),
        ]
    );
    assert!(store.review_exists(NET, SIG, Some(2)).await.unwrap());
    assert!(!store.review_exists(NET, SIG, Some(0)).await.unwrap());
    assert!(store.review_exists(NET, SIG, None).await.unwrap());
    assert_eq!(
        store
            .record_review(NET, SIG, 0, "another payment of the same transaction", "sig")
            .await
            .unwrap(),
        ReviewRecording::Recorded { state: None }
    );
    assert_eq!(
        store
            .record_review(NET, SIG, 2, "a second review", "sig")
            .await
            .unwrap(),
        ReviewRecording::Duplicate
    );
}
on_both_stores!(reviews_per_payment, reviews_take_the_number_of_their_payment);

/// Payments gained their transaction's memo; stored Solana payments take it from their
/// transfer row, EVM payments have none.
async fn stored_solana_payments_take_their_transfers_memo(kind: Kind) {
    let db = TestDb::create(kind).await;
    migrate_before(&db.url, "20261204000013").await;
    let pool = pool(&db.url).await;
    exec(&pool, &transfer(SIG, 1, SELLER_B, 200)).await;
    exec(
        &pool,
        &format!("UPDATE transfers SET memo = 'order-42' WHERE tx_id = '{SIG}' AND event_index = 1"),
    )
    .await;
    exec(&pool, &payment(SIG, 1, 1, SELLER_B, 200)).await;
    exec(
        &pool,
        "INSERT INTO payments (network, payment_id, index_in_tx, event_index, block_number, block_hash, payer, pay_to, amount, asset, state, first_seen_ms, state_changed_ms) \
         VALUES ('eip155:8453', '0xaa', 0, 7, 1, 'H', '0x1', '0x2', '5', '0x3', 'paid', 1, 1)",
    )
    .await;

    let store = db.open().await;

    let memos = |network: &str, id: &str| {
        let store = store.clone();
        let (network, id) = (network.to_string(), id.to_string());
        async move {
            store
                .payments_by_id(&network, &id)
                .await
                .unwrap()
                .into_iter()
                .map(|p| p.memo)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(memos(NET, SIG).await, vec![Some("order-42".to_string())]);
    assert_eq!(memos("eip155:8453", "0xaa").await, vec![None]);
}
on_both_stores!(payment_memos, stored_solana_payments_take_their_transfers_memo);

/// Payments gained their method: stored EVM payments were all EIP-3009, stored Solana
/// payments SPL transfers; a method core does not write is refused.
async fn stored_payments_take_the_method_they_were_read_by(kind: Kind) {
    use paywatch_core::PaymentMethod;
    let db = TestDb::create(kind).await;
    migrate_before(&db.url, "20261204000017").await;
    let before = pool(&db.url).await;
    exec(&before, &payment(SIG, 0, 1, SELLER_B, 200)).await;
    exec(
        &before,
        "INSERT INTO payments (network, payment_id, index_in_tx, event_index, block_number, block_hash, payer, pay_to, amount, asset, state, first_seen_ms, state_changed_ms) \
         VALUES ('eip155:8453', '0xaa', 0, 7, 1, 'H', '0x1', '0x2', '5', '0x3', 'paid', 1, 1)",
    )
    .await;
    drop(before);

    let store = db.open().await;
    let methods = |network: &'static str, id: &'static str| {
        let store = store.clone();
        async move {
            store
                .payments_by_id(network, id)
                .await
                .unwrap()
                .into_iter()
                .map(|p| (p.method, p.max_amount))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(methods(NET, SIG).await, vec![(PaymentMethod::Spl, None)]);
    assert_eq!(
        methods("eip155:8453", "0xaa").await,
        vec![(PaymentMethod::Eip3009, None)]
    );
    let after = pool(&db.url).await;
    let error = sqlx::query("UPDATE payments SET method = 'permit3' WHERE payment_id = '0xaa'")
        .execute(&after)
        .await
        .expect_err("an unknown method is refused");
    assert!(error.to_string().contains("payments_method_known"), "{error}");
}
on_both_stores!(payment_methods, stored_payments_take_the_method_they_were_read_by);

/// The spellings core's enum writes, as the migration lists them: `('a', 'b')`.
fn listed<T: Copy + Into<&'static str>>(values: &[T]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("'{}'", (*v).into())).collect();
    format!("({})", quoted.join(", "))
}

/// The newest vocabulary migrations of Postgres (the escrow's; the audit repairs' for the
/// history causes) list exactly the states, causes, rules and methods core writes, and
/// the escrow event kinds (both backends): a new variant without a migration fails here,
/// not in production. SQLite's lists (since migration 24, CHECKs of `=` comparisons) are
/// checked by writing every variant ([`unknown_states_causes_and_rules_are_refused`]).
#[test]
fn the_vocabulary_migration_lists_what_core_writes() {
    use paywatch_core::PaymentMethod;
    use paywatch_core::records::EscrowEventKind;
    use paywatch_core::refunds::RefundRule;
    use paywatch_core::state::{HistoryCause, PaymentState};
    use strum::VariantArray;
    let sql =
        std::fs::read_to_string(repo_root().join("migrations/20261204000019_escrowed_payments.sql")).unwrap();
    let (shared, rest) = sql.split_once("-- postgres:begin").unwrap();
    let (postgres, _) = rest.split_once("-- sqlite:begin").unwrap();
    assert_eq!(
        shared.matches(listed(EscrowEventKind::VARIANTS).as_str()).count(),
        1
    );
    assert_eq!(shared.matches(" IN (").count(), 1);
    let times = [3, 1, 1];
    for (list, expected) in [
        listed(PaymentState::VARIANTS),
        listed(RefundRule::VARIANTS),
        listed(PaymentMethod::VARIANTS),
    ]
    .iter()
    .zip(times)
    {
        assert_eq!(postgres.matches(list.as_str()).count(), expected, "{list}");
    }
    // The escrow's migration also listed the causes of its day.
    assert_eq!(postgres.matches(" IN (").count(), times.iter().sum::<usize>() + 1);
    let repairs =
        std::fs::read_to_string(repo_root().join("migrations/20261206000027_audit_repairs.sql")).unwrap();
    let (_, rest) = repairs.split_once("-- postgres:begin").unwrap();
    let (postgres, _) = rest.split_once("-- postgres:end").unwrap();
    assert!(
        postgres.contains(&format!("cause IN {}", listed(HistoryCause::VARIANTS))),
        "{postgres}"
    );
}

/// The audits' migration lists exactly the sources core writes.
#[test]
fn the_audits_migration_lists_the_sources_core_writes() {
    use paywatch_core::records::AuditSource;
    use strum::VariantArray;
    let sql = std::fs::read_to_string(repo_root().join("migrations/20261205000023_audits.sql")).unwrap();
    assert!(
        sql.contains(&format!("source IN {}", listed(AuditSource::VARIANTS))),
        "{sql}"
    );
}

/// The view of payments' own transfers leaves out what core calls dropped and escrowed.
#[test]
fn the_payment_transfers_view_spells_cores_state_and_method() {
    use paywatch_core::PaymentMethod;
    use paywatch_core::state::PaymentState;
    let sql =
        std::fs::read_to_string(repo_root().join("migrations/20261207000030_payment_transfers_folded.sql"))
            .unwrap();
    for filter in [
        format!("p.state <> '{}'", PaymentState::Dropped.as_str()),
        format!("p.method <> '{}'", PaymentMethod::AuthCapture.as_str()),
    ] {
        assert!(sql.contains(&filter), "{filter}");
    }
}

/// The audit findings' migration lists exactly the subjects core writes.
#[test]
fn the_audit_findings_migration_lists_the_subjects_core_writes() {
    use paywatch_core::records::FindingSubject;
    use strum::VariantArray;
    let sql =
        std::fs::read_to_string(repo_root().join("migrations/20261206000025_audit_findings.sql")).unwrap();
    assert!(
        sql.contains(&format!("subject IN {}", listed(FindingSubject::VARIANTS))),
        "{sql}"
    );
}

/// The database refuses a state, cause, rule or method that core does not write, on
/// insert and on update, and takes every one it does.
async fn unknown_states_causes_and_rules_are_refused(kind: Kind) {
    use paywatch_core::PaymentMethod;
    use paywatch_core::refunds::RefundRule;
    use paywatch_core::state::{HistoryCause, PaymentState};
    use strum::VariantArray;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    drop(store);
    let pool = pool(&db.url).await;
    let refused = |sql: String| {
        let pool = pool.clone();
        async move {
            let error = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .execute(&pool)
                .await
                .expect_err(&sql);
            assert!(
                error.to_string().contains("CHECK constraint") || error.to_string().contains("_known"),
                "{sql}: {error}"
            );
        }
    };
    // Every variant core writes is taken.
    for (n, state) in PaymentState::VARIANTS.iter().enumerate() {
        let id = format!("state-{n}");
        exec(
            &pool,
            &payment(&id, 0, 0, SELLER_A, 1).replace("'paid'", &format!("'{}'", <&str>::from(*state))),
        )
        .await;
        exec(
            &pool,
            &history(&id, 0, 1000 + n as u64)
                .replace("NULL, 'paid'", &format!("'{0}', '{0}'", <&str>::from(*state))),
        )
        .await;
    }
    for (n, cause) in HistoryCause::VARIANTS.iter().enumerate() {
        exec(
            &pool,
            &history("state-0", 0, 2000 + n as u64)
                .replace("'seen_final'", &format!("'{}'", <&str>::from(*cause)))
                .replace(", 0, NULL", &format!(", {}, NULL", n + 1)),
        )
        .await;
    }
    for (n, method) in PaymentMethod::VARIANTS.iter().enumerate() {
        exec(
            &pool,
            &format!(
                "UPDATE payments SET method = '{}' WHERE payment_id = 'state-{n}'",
                <&str>::from(*method)
            ),
        )
        .await;
    }
    for (n, rule) in RefundRule::VARIANTS.iter().enumerate() {
        exec(
            &pool,
            &format!(
                "INSERT INTO refunds (network, refund_tx_id, refund_event_index, payment_id, index_in_tx, amount, rule, block_number, assigned_ms) \
                 VALUES ('{NET}', 'rule-{n}', 0, 'state-0', 0, '1', '{}', 301, 1)",
                <&str>::from(*rule)
            ),
        )
        .await;
    }
    refused("UPDATE payments SET method = 'transfer' WHERE payment_id = 'state-0'".to_string()).await;
    exec(&pool, &payment(SIG, 0, 0, SELLER_A, 100)).await;
    refused(payment(SIG2, 0, 0, SELLER_A, 100).replace("'paid'", "'settled'")).await;
    refused(format!(
        "UPDATE payments SET state = 'Paid' WHERE payment_id = '{SIG}'"
    ))
    .await;
    exec(
        &pool,
        &format!("UPDATE payments SET state = 'refunded' WHERE payment_id = '{SIG}'"),
    )
    .await;
    exec(&pool, &history(SIG, 0, 1)).await;
    refused(
        history(SIG, 0, 2)
            .replace("'seen_final'", "'seen-final'")
            .replace(", 0, NULL", ", 1, NULL"),
    )
    .await;
    refused(
        history(SIG, 0, 3)
            .replace("NULL, 'paid'", "'unknown', 'paid'")
            .replace(", 0, NULL", ", 2, NULL"),
    )
    .await;
    refused(format!(
        "UPDATE payment_history SET cause = 'because' WHERE payment_id = '{SIG}'"
    ))
    .await;
    let refund = |rule: &str, index: u64| {
        format!(
            "INSERT INTO refunds (network, refund_tx_id, refund_event_index, payment_id, index_in_tx, amount, rule, block_number, assigned_ms) \
             VALUES ('{NET}', '{SIG2}', {index}, '{SIG}', 0, '1', '{rule}', 301, 1)"
        )
    };
    exec(&pool, &refund("memo", 0)).await;
    refused(refund("guess", 1)).await;
    refused(format!(
        "UPDATE refunds SET rule = 'guess' WHERE refund_tx_id = '{SIG2}'"
    ))
    .await;
}
on_both_stores!(vocabulary_checks, unknown_states_causes_and_rules_are_refused);

/// Migration 24 rebuilds SQLite's payments, history and refunds tables with CHECKs in
/// place of triggers: every row written before it is read back as before, the indexes
/// are there again, and the checks hold (Postgres: nothing changes).
async fn the_sqlite_check_rebuild_keeps_every_row(kind: Kind) {
    let db = TestDb::create(kind).await;
    migrate_before(&db.url, "20261205000024").await;
    let pool = pool(&db.url).await;
    exec(&pool, &payment(SIG, 0, 0, SELLER_A, 100)).await;
    exec(&pool, &payment(SIG2, 0, 0, SELLER_B, 200)).await;
    exec(
        &pool,
        &format!(
            "UPDATE payments SET memo = 'order-7', facilitator = '{FACILITATOR}', method = 'spl', \
             nonce = 'n', refunded_amount = '40', fee_amount = '3' WHERE payment_id = '{SIG}'"
        ),
    )
    .await;
    exec(&pool, &history(SIG, 0, 1)).await;
    exec(
        &pool,
        &format!(
            "INSERT INTO refunds (network, refund_tx_id, refund_event_index, payment_id, index_in_tx, amount, rule, block_number, assigned_ms) \
             VALUES ('{NET}', '{SIG2}', 3, '{SIG}', 0, '40', 'memo', 301, 1)"
        ),
    )
    .await;
    let dump = |pool: AnyPool| async move {
        let mut rows = Vec::new();
        for sql in [
            "SELECT payment_id, amount, state, memo, facilitator, method, nonce, refunded_amount, fee_amount, history_len FROM payments ORDER BY payment_id",
            "SELECT payment_id, seq, from_state, to_state, cause, event_id FROM payment_history ORDER BY payment_id, seq",
            "SELECT refund_tx_id, payment_id, amount, rule FROM refunds ORDER BY refund_tx_id",
        ] {
            for row in sqlx::query(sql).fetch_all(&pool).await.unwrap() {
                let cells: Vec<String> = (0..row.len())
                    .map(|i| {
                        row.try_get::<Option<String>, _>(i)
                            .map(|v| v.unwrap_or_else(|| "NULL".to_string()))
                            .or_else(|_| row.try_get::<Option<i64>, _>(i).map(|v| format!("{v:?}")))
                            .unwrap()
                    })
                    .collect();
                rows.push(cells.join("|"));
            }
        }
        rows
    };
    let before = dump(pool.clone()).await;
    assert_eq!(before.len(), 4, "{before:?}");
    pool.close().await;

    // Opening the store applies migration 24 (and any later one).
    let store = db.open().await;
    store.close().await;
    let pool = self::pool(&db.url).await;
    assert_eq!(dump(pool.clone()).await, before);
    if kind == Kind::Sqlite {
        let names: Vec<String> = sqlx::query(
            "SELECT name FROM sqlite_master WHERE tbl_name IN ('payments', 'payment_history', 'refunds') \
             AND type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY name",
        )
        .fetch_all(&pool)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get::<String, _>(0))
        .collect();
        assert_eq!(
            names,
            [
                "payment_history_by_event",
                "payments_by_authorization",
                "payments_by_facilitator",
                "payments_by_listing",
                "payments_by_memo",
                "payments_by_parties",
                "payments_by_pay_to_listing",
                "payments_by_payer_listing",
                "payments_by_state",
                "refunds_by_payment",
            ],
            "every index back (but payments_by_block, which migration 26 drops), no trigger left"
        );
    }
    let error = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE payments SET state = 'settled' WHERE payment_id = '{SIG}'"
    )))
    .execute(&pool)
    .await
    .expect_err("an unknown state is refused after the rebuild");
    assert!(error.to_string().contains("payments_state_known"), "{error}");
}
on_both_stores!(sqlite_check_rebuild, the_sqlite_check_rebuild_keeps_every_row);

/// Authorizations are kept only where they can name a refund's payment: a payment's own
/// (its row holds the nonce) and one whose transfer was dropped go; one that released a
/// stored transfer other than its payment's (an EIP-3009 refund's) stays. (The refund
/// rules read a payment's nonce from its row: `tests/refunds.rs`.)
async fn only_the_authorizations_a_refund_can_name_stay(kind: Kind) {
    let db = TestDb::create(kind).await;
    migrate_before(&db.url, "20261207000029").await;
    let before = pool(&db.url).await;
    let authorization = |tx: &str, index: u64, authorizer: &str, nonce: &str| {
        format!(
            "INSERT INTO authorizations (network, tx_id, event_index, block_number, block_hash, token, authorizer, nonce) \
             VALUES ('{EVM}', '{tx}', {index}, 5, 'H', '{TOKEN}', '{authorizer}', '{nonce}')"
        )
    };
    let transfer = |tx: &str, index: u64, from: &str, to: &str| {
        format!(
            "INSERT INTO transfers (network, tx_id, event_index, block_number, block_hash, block_time, token, from_address, to_address, amount) \
             VALUES ('{EVM}', '{tx}', {index}, 5, 'H', 1700000000, '{TOKEN}', '{from}', '{to}', '7')"
        )
    };
    // 0xp1: a payment by EIP-3009, its authorization and transfer.
    exec(&before, &authorization("0xp1", 0, "0xalice", "0xn1")).await;
    exec(&before, &transfer("0xp1", 1, "0xalice", "0xshop")).await;
    exec(
        &before,
        &format!(
            "INSERT INTO payments (network, payment_id, index_in_tx, event_index, block_number, block_hash, payer, pay_to, amount, asset, method, nonce, state, first_seen_ms, state_changed_ms) \
             VALUES ('{EVM}', '0xp1', 0, 1, 5, 'H', '0xalice', '0xshop', '7', '{TOKEN}', 'eip3009', '0xn1', 'paid', 1, 1)"
        ),
    )
    .await;
    // 0xo1: someone else's EIP-3009 transfer, whose transfer was dropped.
    exec(&before, &authorization("0xo1", 0, "0xpool", "0xn2")).await;
    // 0xr1: a transfer back to alice released by the shop's authorization, not a payment.
    exec(&before, &authorization("0xr1", 0, "0xshop", "0xn3")).await;
    exec(&before, &transfer("0xr1", 1, "0xshop", "0xalice")).await;
    drop(before);

    let store = db.open().await;
    let after = pool(&db.url).await;
    let kept: Vec<(String, String)> = sqlx::query("SELECT tx_id, nonce FROM authorizations ORDER BY tx_id")
        .fetch_all(&after)
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get("tx_id"), row.get("nonce")))
        .collect();
    assert_eq!(kept, [("0xr1".to_string(), "0xn3".to_string())]);
    assert_eq!(store.row_counts(EVM).await.unwrap(), (2, 1, 1));
}
on_both_stores!(
    authorizations_kept,
    only_the_authorizations_a_refund_can_name_stay
);

/// A payment's own transfer row goes when its payment row holds it fact for fact; every
/// other stays: a payment whose facts are not its transfer's (a memo), an escrowed
/// payment's (into the escrow), a dropped payment's, one two payments name, one no payment
/// moved. The kept transfers read the same before and after.
async fn payment_rows_take_their_own_transfers(kind: Kind) {
    let db = TestDb::create(kind).await;
    migrate_before(&db.url, "20261207000030").await;
    let before = pool(&db.url).await;
    let transfer = |tx: &str, from: &str, to: &str, memo: &str| {
        format!(
            "INSERT INTO transfers (network, tx_id, event_index, block_number, block_hash, block_time, token, from_address, to_address, amount, memo) \
             VALUES ('{EVM}', '{tx}', 1, 5, 'H', 1700000000, '{TOKEN}', '{from}', '{to}', '7', {memo})"
        )
    };
    let payment = |tx: &str, index_in_tx: u64, payer: &str, method: &str, state: &str, memo: &str| {
        format!(
            "INSERT INTO payments (network, payment_id, index_in_tx, event_index, block_number, block_hash, block_time, payer, pay_to, amount, asset, method, memo, state, first_seen_ms, state_changed_ms) \
             VALUES ('{EVM}', '{tx}', {index_in_tx}, 1, 5, 'H', 1700000000, '{payer}', '0xshop', '7', '{TOKEN}', '{method}', {memo}, '{state}', 1, 1)"
        )
    };
    for (tx, to, memo, payments) in [
        // Held by its payment: goes.
        ("0xp1", "0xshop", "NULL", vec![(0, "permit2", "paid", "NULL")]),
        (
            "0xp2",
            "0xshop",
            "'order 1'",
            vec![(0, "spl", "pending", "'order 1'")],
        ),
        // The payment has a memo its transfer has not.
        ("0xm1", "0xshop", "NULL", vec![(0, "spl", "paid", "'order 2'")]),
        // Escrowed: its transfer goes to the escrow.
        (
            "0xe1",
            "0xescrow",
            "NULL",
            vec![(0, "auth_capture", "held", "NULL")],
        ),
        // Dropped: its transaction left the chain.
        ("0xd1", "0xshop", "NULL", vec![(0, "eip3009", "dropped", "NULL")]),
        // Two payments name one transfer.
        (
            "0xt1",
            "0xshop",
            "NULL",
            vec![(0, "erc7710", "paid", "NULL"), (1, "erc7710", "paid", "NULL")],
        ),
        // No payment's.
        ("0xr1", "0xshop", "NULL", vec![]),
    ] {
        exec(&before, &transfer(tx, "0xalice", to, memo)).await;
        for (index_in_tx, method, state, memo) in payments {
            exec(&before, &payment(tx, index_in_tx, "0xalice", method, state, memo)).await;
        }
    }
    let kept_transfers = |pool: AnyPool, source: &'static str| async move {
        let rows: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT tx_id, event_index, block_number, block_hash, block_time, token, from_address, to_address, amount, memo \
             FROM {source} ORDER BY tx_id"
        )))
        .fetch_all(&pool)
        .await
        .unwrap()
        .iter()
        .map(|row| {
            format!(
                "{} {} {} {} {:?} {} {} {} {} {:?}",
                row.get::<String, _>("tx_id"),
                row.get::<i64, _>("event_index"),
                row.get::<i64, _>("block_number"),
                row.get::<String, _>("block_hash"),
                row.get::<Option<i64>, _>("block_time"),
                row.get::<String, _>("token"),
                row.get::<String, _>("from_address"),
                row.get::<String, _>("to_address"),
                row.get::<String, _>("amount"),
                row.get::<Option<String>, _>("memo"),
            )
        })
        .collect();
        rows
    };
    let read_before = kept_transfers(before.clone(), "transfers").await;
    drop(before);

    let store = db.open().await;
    let after = pool(&db.url).await;
    let rows: Vec<String> = sqlx::query("SELECT tx_id FROM transfers ORDER BY tx_id")
        .fetch_all(&after)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get("tx_id"))
        .collect();
    assert_eq!(rows, ["0xd1", "0xe1", "0xm1", "0xr1", "0xt1"]);
    assert_eq!(
        kept_transfers(after.clone(), "stored_transfers").await,
        read_before
    );
    assert_eq!(store.row_counts(EVM).await.unwrap(), (7, 0, 7));
}
on_both_stores!(payment_transfers_folded, payment_rows_take_their_own_transfers);

/// A history row caused by its payment's own transaction no longer stores that hash again
/// (it is the row's payment id); one caused by a refund keeps the refund's. Both read back
/// as before.
async fn history_rows_keep_only_another_transactions_hash(kind: Kind) {
    let db = TestDb::create(kind).await;
    migrate_before(&db.url, "20261207000032").await;
    let before = pool(&db.url).await;
    exec(&before, &payment(SIG, 0, 3, "0xshop", 7)).await;
    exec(&before, &history(SIG, 0, 1)).await;
    exec(
        &before,
        &format!(
            "INSERT INTO payment_history (network, payment_id, index_in_tx, seq, from_state, to_state, cause, block_number, tx_id, at_ms, event_id) \
             VALUES ('{NET}', '{SIG}', 0, 1, 'paid', 'refunded', 'refund', 301, '{SIG2}', 2, 2)"
        ),
    )
    .await;
    drop(before);

    let store = db.open().await;
    let after = pool(&db.url).await;
    let stored: Vec<Option<String>> = sqlx::query("SELECT tx_id FROM payment_history ORDER BY seq")
        .fetch_all(&after)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get("tx_id"))
        .collect();
    assert_eq!(stored, [None, Some(SIG2.to_string())]);
    let read: Vec<Option<String>> = store
        .history_of(NET, SIG, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|entry| entry.tx_id)
        .collect();
    assert_eq!(read, [Some(SIG.to_string()), Some(SIG2.to_string())]);
}
on_both_stores!(
    history_own_transaction,
    history_rows_keep_only_another_transactions_hash
);
