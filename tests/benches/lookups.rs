//! Query benchmark, in one run on SQLite and Postgres: N stored payments (default
//! 1,000,000; `PAYWATCH_BENCH_LOOKUP_PAYMENTS`), then, through the real HTTP API: single
//! lookups of random payments driven by `wrk` in its own process after a 3 s warm-up (per
//! second, p50 and p99 latency), batch lookups of 100 from a pool of concurrent clients in this process, and a
//! CSV export of every payment (rows per second and the process's resident memory before
//! and at the end of the download). On Postgres the same measures are taken again with
//! reads routed to a hot standby of the test server (`--read-database-url`), started on
//! this machine (skipped, saying why, when the test server is not local).
//!
//! Run: `cargo bench -p paywatch-tests --bench lookups` (needs `wrk`: `apt-get install wrk`)

use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy::primitives::Address;
use paywatch_tests::harness::{ApiServer, LocalNetwork};
use paywatch_tests::standby::Standby;
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::tools::rss_mib;
use sqlx::AssertSqlSafe;

/// The allocator of the `paywatch` binary, so the server here allocates as it does there.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Concurrent clients.
const CLIENTS: usize = 32;
/// How long each load phase runs.
const PHASE: Duration = Duration::from_secs(10);
/// The chain id the stored payments claim.
const CHAIN_ID: u64 = 8453;
/// wrk's script: a random stored payment per request; at the end, one line with the
/// request count, the duration (µs), p50 and p99 latency (µs) and the failed requests.
const WRK_SCRIPT: &str = r#"
local count = tonumber(os.getenv("PAYWATCH_WRK_PAYMENTS"))
local chain = os.getenv("PAYWATCH_WRK_CHAIN")
local threads = 0
setup = function(thread)
  threads = threads + 1
  thread:set("seed", threads)
end
init = function(args)
  math.randomseed(seed)
end
request = function()
  return wrk.format("GET", string.format("/v1/payments/eip155:%s/0x%064x", chain, math.random(1, count)))
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("wrk-result %d %d %d %d %d\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), e.connect + e.read + e.write + e.status + e.timeout))
end
"#;

/// What one wrk run measured.
struct WrkResult {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    calls: u64,
}

/// Drives single lookups of random payments among `count` at `base` with wrk (two
/// threads, `CLIENTS` connections): a 3 s warm-up, then `PHASE` measured.
fn wrk_single_lookups(base: &str, count: u64) -> WrkResult {
    let script = std::env::temp_dir().join(format!("paywatch-lookups-{}.lua", std::process::id()));
    std::fs::write(&script, WRK_SCRIPT).expect("write the wrk script");
    let run = |seconds: u64| {
        std::process::Command::new("wrk")
            .args(["-t2", &format!("-c{CLIENTS}"), &format!("-d{seconds}s"), "-s"])
            .arg(&script)
            .arg(base)
            .env("PAYWATCH_WRK_PAYMENTS", count.to_string())
            .env("PAYWATCH_WRK_CHAIN", CHAIN_ID.to_string())
            .output()
            .expect("run wrk (apt-get install wrk)")
    };
    run(3);
    let output = run(PHASE.as_secs());
    let _ = std::fs::remove_file(&script);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("wrk-result "))
        .unwrap_or_else(|| panic!("wrk printed no result: {stdout}"));
    let fields: Vec<u64> = line
        .split_whitespace()
        .map(|f| f.parse().expect("wrk number"))
        .collect();
    let [calls, duration_us, p50_us, p99_us, failed] = fields[..] else {
        panic!("unexpected wrk result line: {line}");
    };
    assert_eq!(failed, 0, "every lookup answered 200: {stdout}");
    WrkResult {
        per_second: calls as f64 / (duration_us as f64 / 1e6),
        p50_ms: p50_us as f64 / 1000.0,
        p99_ms: p99_us as f64 / 1000.0,
        calls,
    }
}

/// Fills `payments` with `count` paid payments, ids 1..=count, ten to a block.
async fn seed(db: &TestDb, kind: Kind, count: u64) {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&db.url).await.expect("connect");
    let columns = "network, payment_id, index_in_tx, event_index, block_number, block_hash, block_time, payer, pay_to, \
                   amount, asset, nonce, state, first_seen_ms, state_changed_ms";
    let sql = match kind {
        Kind::Postgres => format!(
            "INSERT INTO payments ({columns}) SELECT 'eip155:{CHAIN_ID}', '0x' || lpad(to_hex(g), 64, '0'), 0, 1, g / 10, \
             '0x' || lpad(to_hex(g / 10), 64, '0'), 1764547200 + g, '0x' || lpad(to_hex(g % 5000), 40, '0'), \
             '0x' || lpad(to_hex(g % 50), 40, '0'), (g % 100000)::text, '0x{asset}', NULL, 'paid', 0, 0 \
             FROM generate_series(1, {count}) AS g",
            asset = "11".repeat(20)
        ),
        Kind::Sqlite => format!(
            "WITH RECURSIVE seq(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM seq WHERE g < {count}) \
             INSERT INTO payments ({columns}) SELECT 'eip155:{CHAIN_ID}', printf('0x%064x', g), 0, 1, g / 10, \
             printf('0x%064x', g / 10), 1764547200 + g, printf('0x%040x', g % 5000), printf('0x%040x', g % 50), \
             CAST(g % 100000 AS TEXT), '0x{asset}', NULL, 'paid', 0, 0 FROM seq",
            asset = "11".repeat(20)
        ),
    };
    sqlx::query(AssertSqlSafe(sql))
        .execute(&pool)
        .await
        .expect("seed");
    if kind == Kind::Postgres {
        sqlx::query("ANALYZE payments")
            .execute(&pool)
            .await
            .expect("analyze");
    }
    pool.close().await;
}

/// Latency percentile `p` (0..=100) of sorted `samples`, in milliseconds.
fn percentile(samples: &[Duration], p: f64) -> f64 {
    let at = ((samples.len() as f64 - 1.0) * p / 100.0).round() as usize;
    samples[at].as_secs_f64() * 1000.0
}

/// Runs `CLIENTS` clients calling `request(i)` for `PHASE`; returns the calls' latencies.
async fn load<F, Fut>(request: F) -> Vec<Duration>
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let request = Arc::new(request);
    let deadline = Instant::now() + PHASE;
    let mut tasks = Vec::new();
    for client in 0..CLIENTS as u64 {
        let request = request.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut seed = client.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            while Instant::now() < deadline {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let started = Instant::now();
                request(seed).await;
                latencies.push(started.elapsed());
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("client"));
    }
    all.sort();
    all
}

#[tokio::main]
async fn main() {
    let count: u64 = std::env::var("PAYWATCH_BENCH_LOOKUP_PAYMENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let chains = LocalNetwork::new(CHAIN_ID, "http://127.0.0.1:1", &[Address::repeat_byte(0x11)]).chains();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTS)
        .build()
        .unwrap();
    println!("| store | measure | calls | per second | p50 ms | p99 ms |");
    println!("| --- | --- | ---: | ---: | ---: | ---: |");
    for kind in [Kind::Sqlite, Kind::Postgres] {
        let db = TestDb::create(kind).await;
        let store = db.open().await;
        let started = Instant::now();
        seed(&db, kind, count).await;
        eprintln!(
            "{kind:?}: seeded {count} payments in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let api = ApiServer::start(&store, &chains).await;
        measure(&format!("{kind:?}"), &api, count, &http).await;
        drop(api);
        if kind == Kind::Postgres {
            match Standby::start().await {
                Ok(standby) => {
                    standby.catch_up().await;
                    let replica = standby.url_like(&db.url);
                    let api =
                        ApiServer::start_with_replica(&store, &replica, Duration::from_secs(5), &chains)
                            .await;
                    wait_read_from_replica(&api).await;
                    measure("Postgres, reads on a hot standby", &api, count, &http).await;
                    let served = reqwest::get(format!(
                        "{}/v1/payments/eip155:{CHAIN_ID}/0x{:064x}",
                        api.base_url, 1
                    ))
                    .await
                    .expect("lookup");
                    assert_eq!(
                        served.headers()["paywatch-read-from"],
                        "replica",
                        "the standby answered to the end"
                    );
                }
                Err(why) => eprintln!("Postgres, reads on a hot standby: skipped: {why}"),
            }
        }
        store.close().await;
    }
}

/// Single lookups, batches and a CSV export of `count` payments through `api`, printed as
/// rows labelled `label`.
async fn measure(label: &str, api: &ApiServer, count: u64, http: &reqwest::Client) {
    let base = Arc::new(api.base_url.clone());

    let single = tokio::task::spawn_blocking({
        let base = base.clone();
        move || wrk_single_lookups(&base, count)
    })
    .await
    .expect("wrk");
    println!(
        "| {label} | single lookup (wrk) | {} | {:.0} | {:.2} | {:.2} |",
        single.calls, single.per_second, single.p50_ms, single.p99_ms
    );

    let (client, url) = (http.clone(), base.clone());
    let batches = load(move |r| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let lookups: Vec<serde_json::Value> = (0..100)
                .map(|i| {
                    let id = (r.wrapping_add(i * 7919)) % count + 1;
                    serde_json::json!({"network": format!("eip155:{CHAIN_ID}"), "payment": format!("0x{id:064x}")})
                })
                .collect();
            let response = client
                .post(format!("{url}/v1/payments:lookup"))
                .json(&serde_json::json!({ "lookups": lookups }))
                .send()
                .await
                .expect("batch");
            assert_eq!(response.status(), 200);
            response.bytes().await.expect("body");
        }
    })
    .await;
    println!(
        "| {label} | batch of 100 (lookups/s) | {} | {:.0} | {:.2} | {:.2} |",
        batches.len(),
        batches.len() as f64 * 100.0 / PHASE.as_secs_f64(),
        percentile(&batches, 50.0),
        percentile(&batches, 99.0)
    );

    let before = rss_mib();
    let started = Instant::now();
    let mut response = http
        .get(format!("{base}/v1/payments?network=eip155:{CHAIN_ID}"))
        .header("accept", "text/csv")
        .send()
        .await
        .expect("csv");
    let (mut rows, mut bytes, mut peak) = (0u64, 0u64, before);
    while let Some(chunk) = response.chunk().await.expect("csv chunk") {
        rows += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
        bytes += chunk.len() as u64;
        peak = peak.max(rss_mib());
    }
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(rows, count + 1, "every payment and the header");
    println!(
        "| {label} | CSV export: {} rows, {:.0} MiB in {seconds:.1} s | 1 | {:.0} rows/s | RSS {before:.0} → {peak:.0} MiB | |",
        rows - 1,
        bytes as f64 / 1_048_576.0,
        (rows - 1) as f64 / seconds
    );
}

/// Waits until `api` routes reads to its replica (its first lag samples taken).
async fn wait_read_from_replica(api: &ApiServer) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = reqwest::get(format!(
            "{}/v1/payments/eip155:{CHAIN_ID}/0x{:064x}",
            api.base_url, 1
        ))
        .await
        .expect("lookup");
        if answer
            .headers()
            .get("paywatch-read-from")
            .is_some_and(|v| v == "replica")
        {
            return;
        }
        assert!(Instant::now() < deadline, "the API never read from the standby");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
