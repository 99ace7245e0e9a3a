//! The memory of a backfill in its own process: `paywatch backfill`, the release binary a
//! user runs, reads a busy token's chain — N real EIP-3009 payments (default 4,000;
//! `PAYWATCH_BENCH_PAYMENTS`), each amid M unrelated transfers that router-like contracts
//! spray to fresh addresses (default 50; `PAYWATCH_BENCH_NOISE`) — into a fresh SQLite
//! file and a fresh Postgres database, with several `max_block_range` settings, and the
//! same payments without the noise. Reports each process's peak resident set (the kernel's
//! high-water mark of the child, `VmHWM`), its wall time and logs read per second. The bench
//! process's own memory (the chains' set-up) is not in these figures, unlike
//! `busy_token`'s.
//!
//! Run: `cargo bench -p paywatch --bench backfill_memory`

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use paywatch_tests::batch::busy_and_quiet_chains;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::LocalNetwork;
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;
use paywatch_tests::tools::{bench_setting, output_text, paywatch_on, process_peak_rss_mib};

/// What one `paywatch backfill` process took.
struct Run {
    seconds: f64,
    peak_mib: f64,
    payments: u64,
}

/// Runs `paywatch backfill` for `network` into a fresh store of `kind` and waits for it,
/// measuring its peak resident set ([`run_measured`]).
async fn backfill(kind: Kind, network: &LocalNetwork) -> Run {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("chains.toml"), network.toml()).expect("write chains.toml");
    let db = TestDb::create(kind).await;
    let started = Instant::now();
    let (status, peak_mib, output) = run_measured(dir.path(), &db.url).await;
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(status, Some(0), "paywatch backfill failed: {output}");
    let store = paywatch_store::Store::open(&db.url, &Default::default())
        .await
        .expect("open the store the backfill wrote");
    let (_, _, payments) = store
        .row_counts(&format!("eip155:{}", network.chain_id))
        .await
        .expect("count rows");
    store.close().await;
    Run {
        seconds,
        peak_mib,
        payments,
    }
}

/// Runs the backfill to the head and returns its exit code, its peak resident set in MiB
/// and what it logged (for a failure's message). The peak is the kernel's high-water mark
/// (`VmHWM`), read every 10 ms while the process runs: the last reading before it exits is
/// the process's peak unless its memory grew in its last 10 ms.
async fn run_measured(dir: &Path, database_url: &str) -> (Option<i32>, f64, String) {
    let mut command = paywatch_on(
        env!("CARGO_BIN_EXE_paywatch"),
        dir,
        database_url,
        &["backfill", "--network", "local"],
    );
    let log = dir.join("backfill.log");
    let log_file = std::fs::File::create(&log).expect("create the log file");
    command
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log_file);
    let mut child = command.spawn().expect("start paywatch backfill");
    let mut peak_mib = 0.0_f64;
    let status = loop {
        let reading = process_peak_rss_mib(child.id());
        if reading.is_finite() {
            peak_mib = peak_mib.max(reading);
        }
        if let Some(status) = child.try_wait().expect("poll paywatch backfill") {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    (status.code(), peak_mib, output)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let count = bench_setting("PAYWATCH_BENCH_PAYMENTS", 4_000);
    let noise = bench_setting("PAYWATCH_BENCH_NOISE", 50);
    // `paywatch` itself is checked to run at all before the long set-up.
    let version = Command::new(env!("CARGO_BIN_EXE_paywatch"))
        .arg("--version")
        .output()
        .expect("run paywatch --version");
    assert!(version.status.success(), "{}", output_text(&version));

    let ((busy, busy_token), (quiet, quiet_token)) = busy_and_quiet_chains(count, noise).await;
    let busy_blocks = busy.block_number().await + 1;

    let settings = |chain: &Chain, token: &Token, max_block_range: u64| {
        let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
        network.max_block_range = max_block_range;
        network.rpc_timeout_ms = 120_000;
        network
    };
    println!(
        "\npaywatch backfill-memory benchmark: {count} x402 payments, {noise} unrelated transfers each on the busy chain ({busy_blocks} blocks); each row one `paywatch backfill` process"
    );
    println!(
        "| chain | max_block_range | store | payments | logs read | seconds | logs/s | peak RSS (MiB) |"
    );
    println!("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |");
    let runs = [
        ("busy", &busy, &busy_token, 100),
        ("busy", &busy, &busy_token, 2_000),
        ("busy", &busy, &busy_token, 10_000),
        ("quiet", &quiet, &quiet_token, 2_000),
    ];
    for (name, chain, token, max_block_range) in runs {
        let network = settings(chain, token, max_block_range);
        // Each payment is an AuthorizationUsed and a Transfer; the noise is Transfers.
        let logs = (count * 2 + if name == "busy" { count * noise } else { 0 }) as f64;
        for (kind, store) in [(Kind::Sqlite, "SQLite"), (Kind::Postgres, "Postgres")] {
            let run = backfill(kind, &network).await;
            assert_eq!(
                run.payments, count as u64,
                "{name} {store}: every payment indexed"
            );
            println!(
                "| {name} | {max_block_range} | {store} | {} | {logs:.0} | {:.2} | {:.0} | {:.0} |",
                run.payments,
                run.seconds,
                logs / run.seconds,
                run.peak_mib
            );
        }
    }
}
