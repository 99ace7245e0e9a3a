//! Replica benchmark, in one run: N real payments (default 20,000;
//! `PAYWATCH_BENCH_REPLICA_PAYMENTS`) on a local anvil node, then a backfill of all of
//! them by one, two and three `paywatch run` processes on one fresh Postgres database each
//! (the worker's lease puts the ingest in one of them; the others stand by and must not
//! slow it down), and the take-over time after the owner is killed with SIGKILL (the lease
//! lapses) or stopped with SIGTERM (the lease is released).
//!
//! Run: `cargo bench -p paywatch --bench replicas`

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use paywatch_store::Store;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::LocalNetwork;
use paywatch_tests::stores::{Kind, TestDb, lease_owner_pid};
use paywatch_tests::token::{Token, send_payments};
use paywatch_tests::tools::free_port;

/// Lease time to live of the take-over runs, seconds.
const LEASE_TTL: u64 = 15;

fn spawn(dir: &Path, url: &str) -> Child {
    let listen = format!("127.0.0.1:{}", free_port());
    Command::new(env!("CARGO_BIN_EXE_paywatch"))
        .current_dir(dir)
        .args(["--database-url", url, "run", "--listen", &listen])
        .args(["--lease-ttl", &LEASE_TTL.to_string()])
        .env("RUST_LOG", "error")
        .env("PAYWATCH_GRPC_LISTEN", "127.0.0.1:0")
        .env_remove("PAYWATCH_DATABASE_URL")
        .env_remove("PAYWATCH_CHAINS")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start paywatch")
}

fn stop(mut children: Vec<Child>) {
    for child in &mut children {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Seconds for `replicas` processes to read every block up to `head`; the processes are
/// left running for the caller.
async fn backfill(dir: &Path, replicas: usize, net: &str, head: u64) -> (f64, Vec<Child>, TestDb) {
    let db = TestDb::create(Kind::Postgres).await;
    let store = db.open().await;
    let started = Instant::now();
    let children: Vec<Child> = (0..replicas).map(|_| spawn(dir, &db.url)).collect();
    loop {
        let cursor = store
            .cursors(net)
            .await
            .ok()
            .and_then(|c| c.first().map(|c| c.next_block));
        if cursor == Some(head + 1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    store.close().await;
    (seconds, children, db)
}

/// Seconds from stopping the lease owner (`signal`) until another process holds the lease.
async fn take_over(children: &mut [Child], db: &TestDb, job: &str, signal: &str) -> f64 {
    let store = Store::connect(&db.url, &Default::default()).await.unwrap();
    let pids: Vec<u32> = children.iter().map(Child::id).collect();
    let first = loop {
        if let Some(pid) = lease_owner_pid(&store, job).await.filter(|p| pids.contains(p)) {
            break pid;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let started = Instant::now();
    Command::new("kill")
        .args([signal, &first.to_string()])
        .status()
        .unwrap();
    loop {
        if let Some(pid) = lease_owner_pid(&store, job).await
            && pid != first
            && pids.contains(&pid)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    store.close().await;
    seconds
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let count: usize = std::env::var("PAYWATCH_BENCH_REPLICA_PAYMENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    send_payments(&chain, &token, count).await;
    let head = chain.block_number().await;
    let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    network.max_block_range = 1;
    network.rpc_timeout_ms = 60_000;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();
    let net = format!("eip155:{}", chain.chain_id());
    let job = format!("worker:{net}");

    println!(
        "\npaywatch replica benchmark: {count} x402 payments in {head} blocks, one block per step, one run"
    );
    println!("| replicas | seconds | blocks/s | payments/s | vs one replica |");
    println!("| ---: | ---: | ---: | ---: | ---: |");
    let mut single = None;
    let mut three = None;
    for replicas in 1..=3 {
        let (seconds, children, db) = backfill(dir.path(), replicas, &net, head).await;
        let base = *single.get_or_insert(seconds);
        println!(
            "| {replicas} | {seconds:.2} | {:.0} | {:.0} | {:.2} |",
            head as f64 / seconds,
            count as f64 / seconds,
            seconds / base
        );
        if replicas == 3 {
            three = Some((children, db));
        } else {
            stop(children);
        }
    }
    let (mut children, db) = three.expect("the three-replica run");
    let killed = take_over(&mut children, &db, &job, "-KILL").await;
    let released = take_over(&mut children, &db, &job, "-TERM").await;
    stop(children);
    println!(
        "\ntake-over with a {LEASE_TTL} s lease: {killed:.2} s after SIGKILL (the lease lapses), {released:.2} s after SIGTERM (released)"
    );
}
