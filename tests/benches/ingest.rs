//! Ingest benchmark: sends N real EIP-3009 payments (default 10,000; `PAYWATCH_BENCH_PAYMENTS`)
//! to a local anvil node, then times a backfill of all of them by the EVM worker into a
//! fresh SQLite file and a fresh Postgres database, in one run. Reports payments and logs
//! per second and the process's peak resident memory during each backfill.
//!
//! Run: `cargo bench -p paywatch-tests --bench ingest`

use std::time::Instant;

use alloy::primitives::{B256, keccak256};
use alloy::providers::Provider;
use futures::StreamExt;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, sync, worker};
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;

const PAYERS: std::ops::Range<usize> = 1..9;
const SELLER: usize = 9;
const FACILITATOR: usize = 0;

/// Peak resident set size of this process since the last reset, in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Resets the peak resident set size to the current one (Linux `clear_refs` 5).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

async fn send_payments(chain: &Chain, token: &Token, count: usize) {
    for payer in PAYERS {
        token.mint(chain.account(payer), u64::MAX / 16).await;
    }
    let started = Instant::now();
    let mut auths = Vec::with_capacity(count);
    for i in 0..count {
        let payer = chain.signer(PAYERS.start + i % PAYERS.len());
        let nonce: B256 = keccak256(format!("bench payment {i}"));
        auths.push(
            token
                .authorize(&payer, chain.account(SELLER), 1_000 + i as u64, nonce)
                .await,
        );
    }
    chain.set_automine(false).await;
    let facilitator = chain.account(FACILITATOR);
    let first_nonce = chain.provider.get_transaction_count(facilitator).await.unwrap();
    let max_fee = 100_000_000_000u128;
    futures::stream::iter(auths.iter().enumerate())
        .map(|(i, auth)| token.submit_prefilled(auth, facilitator, first_nonce + i as u64, max_fee))
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    let target = first_nonce + count as u64;
    while chain.provider.get_transaction_count(facilitator).await.unwrap() < target {
        chain.mine(1).await;
    }
    chain.set_automine(true).await;
    chain.mine(2).await;
    eprintln!(
        "sent {count} payments in {:.1} s, chain head {}",
        started.elapsed().as_secs_f64(),
        chain.block_number().await
    );
}

struct Figures {
    seconds: f64,
    payments: u64,
    logs: u64,
    peak_mib: f64,
}

async fn backfill(kind: Kind, network: &LocalNetwork) -> Figures {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = network.chains();
    let net = chains.networks[0].id.to_string();
    reset_peak_rss();
    let started = Instant::now();
    let mut worker = worker(&chains, &store).await;
    sync(&mut worker).await;
    let seconds = started.elapsed().as_secs_f64();
    let peak_mib = peak_rss_mib();
    let (transfers, authorizations, payments) = store.row_counts(&net).await.unwrap();
    store.close().await;
    Figures {
        seconds,
        payments,
        logs: transfers + authorizations,
        peak_mib,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let count: usize = std::env::var("PAYWATCH_BENCH_PAYMENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    send_payments(&chain, &token, count).await;

    let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    network.max_block_range = 2_000;
    network.rpc_timeout_ms = 60_000;
    let sqlite = backfill(Kind::Sqlite, &network).await;
    let postgres = backfill(Kind::Postgres, &network).await;

    println!("\npaywatch ingest benchmark: {count} x402 payments on a local anvil node, one run");
    println!("| store | payments | logs | seconds | payments/s | logs/s | peak RSS (MiB) |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (name, f) in [("SQLite", &sqlite), ("Postgres", &postgres)] {
        assert_eq!(f.payments, count as u64, "{name}: every payment indexed");
        println!(
            "| {name} | {} | {} | {:.2} | {:.0} | {:.0} | {:.0} |",
            f.payments,
            f.logs,
            f.seconds,
            f.payments as f64 / f.seconds,
            f.logs as f64 / f.seconds,
            f.peak_mib
        );
    }
    println!(
        "Postgres backfill time / SQLite backfill time: {:.2}",
        postgres.seconds / sqlite.seconds
    );
}
