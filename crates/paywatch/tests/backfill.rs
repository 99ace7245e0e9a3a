//! `paywatch backfill` and `paywatch status` against a real anvil node: the backfill reads
//! up to the requested block in many steps and exits, drawing a progress bar on a
//! terminal (a pseudo-terminal from `script`) and logging plainly otherwise; it refuses
//! `--from` on a network already read, and on Postgres refuses to race the replica that
//! holds the network's lease. `status` reports the cursor it left.

use std::path::Path;
use std::process::Command;

use alloy::primitives::B256;
use alloy::providers::Provider;
use paywatch_store::Store;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::LocalNetwork;
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;
use paywatch_tests::tools::{output_text, paywatch_on};

fn paywatch(dir: &Path, database_url: &str, args: &[&str]) -> Command {
    paywatch_on(env!("CARGO_BIN_EXE_paywatch"), dir, database_url, args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_reads_to_a_block_with_progress_and_exits() {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    token.mint(chain.account(1), 1_000_000).await;
    let mut blocks = Vec::new();
    for i in 0..12u8 {
        let receipt = token
            .pay(
                &chain.signer(1),
                chain.account(2),
                10 + u64::from(i),
                B256::repeat_byte(i + 1),
                chain.account(3),
            )
            .await;
        blocks.push(receipt.block_number.unwrap());
        chain.mine(3).await;
    }
    let target = blocks[7] + 1;
    let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    network.max_block_range = 4;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();
    let db = TestDb::create(Kind::Sqlite).await;
    let net = format!("eip155:{}", chain.chain_id());

    // On a pseudo-terminal: a progress bar, then the summary.
    let command = format!(
        "{} --database-url {} backfill --network local --to {target}",
        env!("CARGO_BIN_EXE_paywatch"),
        db.url
    );
    let output = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(dir.path())
        .env("RUST_LOG", "warn")
        .env_remove("PAYWATCH_DATABASE_URL")
        .env_remove("PAYWATCH_CHAINS")
        .output()
        .unwrap();
    let shown = output_text(&output);
    assert!(output.status.success(), "{shown}");
    assert!(shown.contains("blocks"), "a progress bar: {shown}");
    assert!(shown.contains("logs/s"), "{shown}");
    assert!(shown.contains(&format!("{net}: read up to block")), "{shown}");

    let store = Store::open(&db.url, &Default::default()).await.unwrap();
    let next = store.cursors(&net).await.unwrap()[0].next_block;
    assert!(next > target, "read at least to {target}, cursor {next}");
    let (_, _, payments) = store.row_counts(&net).await.unwrap();
    let expected = blocks.iter().filter(|b| **b < next).count() as u64;
    assert_eq!(payments, expected, "every payment below the cursor, once");
    store.close().await;

    // Without a terminal: plain log lines; it continues from the cursor to the head.
    let output = paywatch(dir.path(), &db.url, &["backfill", "--network", "local"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    assert!(
        output_text(&output).contains("backfill started"),
        "{}",
        output_text(&output)
    );
    let store = Store::open(&db.url, &Default::default()).await.unwrap();
    assert_eq!(store.row_counts(&net).await.unwrap().2, 12);
    store.close().await;

    // `--from` on a network already read is refused, saying why.
    let output = paywatch(
        dir.path(),
        &db.url,
        &["backfill", "--network", "local", "--from", "0"],
    )
    .output()
    .unwrap();
    assert!(!output.status.success());
    assert!(
        output_text(&output).contains("is already read up to block"),
        "{}",
        output_text(&output)
    );
    let output = paywatch(dir.path(), &db.url, &["backfill", "--network", "eip155:999"])
        .output()
        .unwrap();
    assert!(
        output_text(&output).contains("is not in chains.toml"),
        "{}",
        output_text(&output)
    );

    // `status` shows the cursor the backfill left.
    let output = paywatch(dir.path(), &db.url, &["status", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    let status: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let local = &status["networks"][0];
    assert_eq!(local["network"], net);
    assert_eq!(local["next_block"], chain.block_number().await + 1);
    assert_eq!(local["lag_blocks"], 0);
    assert_eq!(local["finality"], "confirmations=2");
    assert_eq!(
        local["paid_lag_blocks"], 1,
        "two confirmations: the head's parent is final"
    );
    // And in seconds: the head block's time minus its parent's, as the node reports them.
    let head = chain.block_number().await;
    let time = |number: u64| {
        let chain = &chain;
        async move {
            chain
                .provider
                .get_block_by_number(number.into())
                .await
                .unwrap()
                .expect("a block")
                .header
                .timestamp
        }
    };
    assert_eq!(local["paid_lag_secs"], time(head).await - time(head - 1).await);
    assert_eq!(local["verifier"], serde_json::Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_does_not_race_the_lease_owner() {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();
    let db = TestDb::create(Kind::Postgres).await;
    let store = db.open().await;
    let job = format!("worker:eip155:{}", chain.chain_id());
    assert!(
        store
            .acquire_lease(&job, "replica-a", std::time::Duration::from_secs(60))
            .await
            .unwrap()
    );
    let output = paywatch(dir.path(), &db.url, &["backfill", "--network", "local"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        output_text(&output).contains("another paywatch process holds the lease"),
        "{}",
        output_text(&output)
    );
    let output = paywatch(dir.path(), &db.url, &["status"]).output().unwrap();
    assert!(
        output_text(&output).contains("replica-a"),
        "{}",
        output_text(&output)
    );
}
