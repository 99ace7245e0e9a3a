//! Ingest benchmark: sends N real EIP-3009 payments (default 10,000; `PAYWATCH_BENCH_PAYMENTS`)
//! to a local anvil node, then times a backfill of all of them by the EVM worker into a
//! fresh SQLite file and a fresh Postgres database, in one run. Reports payments and logs
//! per second and the process's peak resident memory during each backfill.
//!
//! Run: `cargo bench -p paywatch-tests --bench ingest`

use std::time::Instant;

use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, sync, worker};
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::{Token, send_payments};

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
