//! Backfill against a distant provider: a chain of N real EIP-3009 payments (default 6,000;
//! `PAYWATCH_BENCH_PAYMENTS`) spread over about B blocks (default 700;
//! `PAYWATCH_BENCH_BLOCKS`), read through a proxy that holds every request 50 ms
//! (`PAYWATCH_BENCH_LATENCY_MS`) and refuses `eth_getLogs` over the range limit, as real
//! providers do. Each limit (10 and 100 blocks) is backfilled one range at a time
//! (`ranges_in_flight = 1`) and reading ahead (the default, and 16), into fresh SQLite
//! files, in one run. Reports blocks per second, requests and the speed-up over one range
//! at a time, and checks that every run stores exactly what the serial run stores.
//!
//! Run: `cargo bench -p paywatch-tests --bench read_ahead`

use std::sync::atomic::Ordering;
use std::time::Duration;

use paywatch_core::config::RANGES_IN_FLIGHT;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, timed_backfill};
use paywatch_tests::proxy::{Faults, RpcProxy};
use paywatch_tests::stores::{Kind, chain_facts, dump};
use paywatch_tests::token::{FACILITATOR, Token, payment_calls};
use paywatch_tests::tools::bench_setting;

struct Run {
    limit: u64,
    ranges_in_flight: usize,
    seconds: f64,
    requests: u64,
    payments: u64,
    facts: Vec<String>,
}

async fn backfill(
    chain: &Chain,
    token: &Token,
    latency: Duration,
    limit: u64,
    ranges_in_flight: usize,
) -> Run {
    let faults = Faults {
        max_log_range: Some(limit),
        latency,
        ..Faults::default()
    };
    let proxy = RpcProxy::start(&chain.endpoint(), faults).await;
    let mut network = LocalNetwork::new(chain.chain_id(), &proxy.url, &[token.address]);
    network.max_block_range = limit;
    network.ranges_in_flight = Some(ranges_in_flight);
    network.rpc_timeout_ms = 60_000;
    let run = timed_backfill(Kind::Sqlite, &network).await;
    let (_, _, payments) = run.store.row_counts(&run.network).await.unwrap();
    run.store.close().await;
    Run {
        limit,
        ranges_in_flight,
        seconds: run.seconds,
        requests: proxy.stats.requests.load(Ordering::SeqCst),
        payments,
        facts: chain_facts(dump(&run.db.url, &run.network).await),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let count = bench_setting("PAYWATCH_BENCH_PAYMENTS", 6_000usize);
    let blocks = bench_setting("PAYWATCH_BENCH_BLOCKS", 700u64);
    let latency = Duration::from_millis(bench_setting("PAYWATCH_BENCH_LATENCY_MS", 50u64));
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    // The payments in chunks, each chunk's blocks followed by empty ones, up to `blocks`.
    let chunks = 70;
    let calls = payment_calls(&chain, &token, count).await;
    let per_chunk = calls.len().div_ceil(chunks);
    for (i, chunk) in calls.chunks(per_chunk.max(1)).enumerate() {
        chain
            .send_all(chain.account(FACILITATOR), chunk.to_vec(), 150_000)
            .await;
        let head = chain.block_number().await;
        let target = blocks * (i as u64 + 1) / chunks as u64;
        if target > head {
            chain.mine(target - head).await;
        }
    }
    let head = chain.block_number().await;
    eprintln!("chain of {count} payments in {head} blocks");

    let mut runs = Vec::new();
    for limit in [10, 100] {
        for ranges_in_flight in [1, RANGES_IN_FLIGHT, 16] {
            runs.push(backfill(&chain, &token, latency, limit, ranges_in_flight).await);
        }
    }
    println!(
        "\npaywatch read-ahead benchmark: {count} payments in {head} blocks, {} ms a request, SQLite, one process",
        latency.as_millis()
    );
    println!("| range limit | ranges in flight | seconds | blocks/s | requests | speed-up |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    for run in &runs {
        let serial = runs
            .iter()
            .find(|r| r.limit == run.limit && r.ranges_in_flight == 1)
            .expect("a serial run per limit");
        assert_eq!(run.payments, count as u64, "every payment indexed");
        assert!(
            run.facts == serial.facts,
            "limit {}: reading ahead stored what the serial run stored",
            run.limit
        );
        println!(
            "| {} | {} | {:.2} | {:.0} | {} | {:.1}× |",
            run.limit,
            run.ranges_in_flight,
            run.seconds,
            head as f64 / run.seconds,
            run.requests,
            serial.seconds / run.seconds
        );
    }
    println!("every run's store equals its limit's serial run");
}
