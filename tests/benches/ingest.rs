//! Ingest benchmark: sends N real EIP-3009 payments (default 10,000; `PAYWATCH_BENCH_PAYMENTS`)
//! to a local anvil node, and N payments in equal shares of EIP-3009, Permit2 exact and
//! Permit2 upto to another, then times a backfill of each by the EVM worker into a fresh
//! SQLite file and a fresh Postgres database, in one run. Reports payments and logs per
//! second, the process's peak resident memory during each backfill, the mixed run's
//! logs/s against the EIP-3009-only run's, and the EIP-3009 backfill cross-checked with a
//! verifier (`verify_rpc_urls`, the same node) against the unverified one. Each run also
//! reports the CPU time this process (the worker, and SQLite) and the anvil node spent
//! during it, and for SQLite — whose store runs inside this process — the least wall time
//! that CPU time allows on this machine's cores: what bounds the mixed run from below.
//!
//! Run: `cargo bench -p paywatch-tests --bench ingest`

use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, timed_backfill};
use paywatch_tests::permit2::{Permit2Kit, send_mixed_payments};
use paywatch_tests::stores::Kind;
use paywatch_tests::token::{Token, send_payments};
use paywatch_tests::tools::process_tree_cpu_seconds;

struct Figures {
    seconds: f64,
    payments: u64,
    logs: u64,
    peak_mib: f64,
    /// CPU seconds of this process during the backfill.
    cpu: f64,
    /// CPU seconds of the node during the backfill.
    node_cpu: f64,
}

impl Figures {
    /// `amount` (of this run) per log read.
    fn per_log(&self, amount: f64) -> f64 {
        amount / self.logs as f64
    }
}

async fn backfill(kind: Kind, network: &LocalNetwork, node: &Chain) -> Figures {
    let node_before = process_tree_cpu_seconds(node.pid());
    let run = timed_backfill(kind, network).await;
    let node_cpu = process_tree_cpu_seconds(node.pid()) - node_before;
    // Every payment has one settlement log (an authorization or a proxy's Settled) beside
    // its transfer.
    let (transfers, _authorizations, payments) = run.store.row_counts(&run.network).await.unwrap();
    run.store.close().await;
    Figures {
        seconds: run.seconds,
        payments,
        logs: transfers + payments,
        peak_mib: run.peak_mib,
        cpu: run.cpu_seconds,
        node_cpu,
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
    let mixed_chain = Chain::start().await;
    let mixed_token = Token::deploy(&mixed_chain).await;
    let kit = Permit2Kit::install(&mixed_chain).await;
    send_mixed_payments(&mixed_chain, &mixed_token, &kit, count).await;

    let settings = |chain: &Chain, token: &Token| {
        let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
        network.max_block_range = 2_000;
        network.rpc_timeout_ms = 60_000;
        network
    };
    let (network, mixed) = (settings(&chain, &token), settings(&mixed_chain, &mixed_token));
    let sqlite = backfill(Kind::Sqlite, &network, &chain).await;
    let postgres = backfill(Kind::Postgres, &network, &chain).await;
    let mixed_sqlite = backfill(Kind::Sqlite, &mixed, &mixed_chain).await;
    let mixed_postgres = backfill(Kind::Postgres, &mixed, &mixed_chain).await;
    let mut verified = network.clone();
    verified.verify_rpc_url = Some(chain.endpoint());
    let verified_sqlite = backfill(Kind::Sqlite, &verified, &chain).await;
    let verified_postgres = backfill(Kind::Postgres, &verified, &chain).await;

    println!("\npaywatch ingest benchmark: {count} x402 payments per run on local anvil nodes, one process");
    println!(
        "| payments | store | payments | logs | seconds | payments/s | logs/s | peak RSS (MiB) | CPU s, paywatch | CPU s, node |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (run, name, f) in [
        ("EIP-3009", "SQLite", &sqlite),
        ("EIP-3009", "Postgres", &postgres),
        ("mixed", "SQLite", &mixed_sqlite),
        ("mixed", "Postgres", &mixed_postgres),
        ("EIP-3009, verified", "SQLite", &verified_sqlite),
        ("EIP-3009, verified", "Postgres", &verified_postgres),
    ] {
        assert_eq!(f.payments, count as u64, "{run} {name}: every payment indexed");
        println!(
            "| {run} | {name} | {} | {} | {:.2} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} |",
            f.payments,
            f.logs,
            f.seconds,
            f.payments as f64 / f.seconds,
            f.logs as f64 / f.seconds,
            f.peak_mib,
            f.cpu,
            f.node_cpu
        );
    }
    println!(
        "Postgres backfill time / SQLite backfill time (EIP-3009): {:.2}",
        postgres.seconds / sqlite.seconds
    );
    let rate = |f: &Figures| f.logs as f64 / f.seconds;
    println!(
        "mixed logs/s / EIP-3009 logs/s: SQLite {:.2}, Postgres {:.2}",
        rate(&mixed_sqlite) / rate(&sqlite),
        rate(&mixed_postgres) / rate(&postgres)
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let total_cpu = |f: &Figures| f.cpu + f.node_cpu;
    println!(
        "SQLite, CPU seconds of paywatch and the node over {cores} cores: EIP-3009 {:.2} s (least wall time {:.2} s), mixed {:.2} s (least wall time {:.2} s = {:.2} x the EIP-3009 run's wall time)",
        total_cpu(&sqlite),
        total_cpu(&sqlite) / cores,
        total_cpu(&mixed_sqlite),
        total_cpu(&mixed_sqlite) / cores,
        total_cpu(&mixed_sqlite) / cores / sqlite.seconds
    );
    println!(
        "paywatch's own CPU per log, mixed / EIP-3009: SQLite {:.2}, Postgres {:.2} (the node's: SQLite {:.2}, Postgres {:.2})",
        mixed_sqlite.per_log(mixed_sqlite.cpu) / sqlite.per_log(sqlite.cpu),
        mixed_postgres.per_log(mixed_postgres.cpu) / postgres.per_log(postgres.cpu),
        mixed_sqlite.per_log(mixed_sqlite.node_cpu) / sqlite.per_log(sqlite.node_cpu),
        mixed_postgres.per_log(mixed_postgres.node_cpu) / postgres.per_log(postgres.node_cpu)
    );
    println!(
        "verified backfill time / unverified (EIP-3009): SQLite {:.2}, Postgres {:.2}",
        verified_sqlite.seconds / sqlite.seconds,
        verified_postgres.seconds / postgres.seconds
    );
}
