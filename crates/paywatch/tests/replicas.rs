//! Several `paywatch run` processes on one real Postgres while payments flow on anvil:
//! one holds the worker's lease, the others stand by and serve queries; the owner is
//! killed with SIGKILL (twice, of three), a peer takes over within the lease's time to
//! live and resumes from the committed cursor, and the final store holds every payment
//! exactly once, identical to a single clean run. On SQLite, a second writer is refused
//! and a `--role api` process may share the file.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use paywatch_core::ids::lower_hex;
use paywatch_core::state::PaymentState;
use paywatch_store::Store;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, sync, worker};
use paywatch_tests::stores::{Kind, TEST_TIMEOUT, TestDb, chain_facts, dump, lease_owner_pid};
use paywatch_tests::token::{Token, pay_in_turn};
use paywatch_tests::tools::free_port;

/// Seconds a lease lives without renewal in these tests.
const LEASE_TTL: u64 = 3;

/// A running `paywatch run` and its HTTP address.
struct Replica {
    child: Child,
    listen: String,
}

impl Replica {
    fn start(dir: &Path, database_url: &str, extra: &[&str]) -> Replica {
        let listen = format!("127.0.0.1:{}", free_port());
        let lease_ttl = LEASE_TTL.to_string();
        let mut args = vec![
            "--database-url",
            database_url,
            "run",
            "--listen",
            &listen,
            "--lease-ttl",
            &lease_ttl,
        ];
        args.extend_from_slice(extra);
        let child = Command::new(env!("CARGO_BIN_EXE_paywatch"))
            .current_dir(dir)
            .args(&args)
            .env("RUST_LOG", "warn")
            .env("PAYWATCH_GRPC_LISTEN", "127.0.0.1:0")
            .env_remove("PAYWATCH_DATABASE_URL")
            .env_remove("PAYWATCH_CHAINS")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Replica { child, listen }
    }

    async fn wait_serving(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while reqwest::get(format!("http://{}/healthz", self.listen))
            .await
            .map(|r| r.status().as_u16())
            .ok()
            != Some(200)
        {
            assert!(Instant::now() < deadline, "paywatch did not start serving");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until the worker's lease is held by one of `candidates`, returning its pid.
async fn wait_owner(store: &Store, job: &str, candidates: &[u32]) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(pid) = lease_owner_pid(store, job).await
            && candidates.contains(&pid)
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no live replica took the lease");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn replicas_take_over_from_killed_owners() {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    for payer in 1..=3 {
        token.mint(chain.account(payer), 1_000_000_000).await;
    }
    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    let net = format!("eip155:{}", chain.chain_id());
    let job = format!("worker:{net}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();
    let db = TestDb::create(Kind::Postgres).await;
    let store = db.open().await;

    let mut replicas: Vec<Option<Replica>> = (0..3)
        .map(|_| Some(Replica::start(dir.path(), &db.url, &[])))
        .collect();
    for replica in replicas.iter().flatten() {
        replica.wait_serving().await;
    }
    let mut paid = Vec::new();
    let mut pay = async |i: u8| {
        let receipt = pay_in_turn(&chain, &token, i, 3).await;
        paid.push(lower_hex(receipt.transaction_hash));
    };

    let mut takeovers = Vec::new();
    for (round, payments) in [(0u8, 0..6u8), (1, 6..12)] {
        for i in payments {
            pay(i).await;
        }
        let live: Vec<u32> = replicas.iter().flatten().map(Replica::pid).collect();
        let owner = wait_owner(&store, &job, &live).await;
        // Let the owner ingest some of what just happened, then kill it mid-stream.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let slot = replicas
            .iter()
            .position(|r| r.as_ref().is_some_and(|r| r.pid() == owner))
            .unwrap();
        let mut killed = replicas[slot].take().unwrap();
        killed.child.kill().unwrap();
        killed.child.wait().unwrap();
        let killed_at = Instant::now();
        // Payments keep coming while nobody holds the lease.
        pay(100 + round).await;
        let survivors: Vec<u32> = replicas.iter().flatten().map(Replica::pid).collect();
        wait_owner(&store, &job, &survivors).await;
        takeovers.push(killed_at.elapsed());
    }
    for i in 12..16u8 {
        pay(i).await;
    }
    chain.mine(3).await;
    let head = chain.block_number().await;

    // The last replica catches up with every payment paid.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let cursor = store.cursors(&net).await.unwrap().first().map(|c| c.next_block);
        let mut all_paid = true;
        for id in &paid {
            let found = store.payments_by_id(&net, id).await.unwrap();
            all_paid &= found.len() == 1 && found[0].state == PaymentState::Paid;
        }
        if cursor == Some(head + 1) && all_paid {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the surviving replica did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let survivor = replicas.iter_mut().flatten().next().unwrap();
    for id in &paid {
        let body: serde_json::Value =
            reqwest::get(format!("http://{}/v1/payments/local/{id}", survivor.listen))
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
        assert_eq!(body["payment_state"], "paid", "{body}");
    }
    for taken in &takeovers {
        assert!(
            *taken < Duration::from_secs(2 * LEASE_TTL + 3),
            "take-over took {taken:?} with a {LEASE_TTL} s lease"
        );
    }
    Command::new("kill")
        .args(["-TERM", &survivor.pid().to_string()])
        .status()
        .unwrap();
    let mut survivor = replicas.into_iter().flatten().next().unwrap();
    let status = survivor.child.wait().unwrap();
    assert!(status.success(), "the survivor stops cleanly on SIGTERM");
    store.close().await;

    // Every payment exactly once, each first seen once, identical to one clean run.
    let replicated = dump(&db.url, &net).await;
    let first_sightings = replicated
        .iter()
        .filter(|l| l.starts_with("payment_history ") && l.split(' ').nth(4) == Some(""))
        .count();
    assert_eq!(
        first_sightings,
        paid.len(),
        "each payment entered the history once"
    );
    let clean_db = TestDb::create(Kind::Postgres).await;
    let clean_store = clean_db.open().await;
    sync(&mut worker(&network.chains(), &clean_store).await).await;
    clean_store.close().await;
    let clean = chain_facts(dump(&clean_db.url, &net).await);
    assert_eq!(
        clean.iter().filter(|l| l.starts_with("payments ")).count(),
        paid.len()
    );
    assert_eq!(chain_facts(replicated), clean);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_postgres_take_over_from_killed_owners() {
    tokio::time::timeout(TEST_TIMEOUT, replicas_take_over_from_killed_owners())
        .await
        .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sqlite_writer_is_refused() {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();
    let url = format!("sqlite://{}", dir.path().join("paywatch.db").display());

    let first = Replica::start(dir.path(), &url, &[]);
    first.wait_serving().await;
    let mut second = Replica::start(dir.path(), &url, &[]);
    let status = second.child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(second.child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "a second writer must not run");
    assert!(
        stderr.contains("another paywatch process is already writing to"),
        "{stderr}"
    );
    // A query-only process shares the file.
    let reader = Replica::start(dir.path(), &url, &["--role", "api"]);
    reader.wait_serving().await;
    let lookup = format!("http://{}/v1/payments/local/0x{}", reader.listen, "ab".repeat(32));
    let status = reqwest::get(lookup).await.unwrap().status();
    assert_eq!(status, 404, "the api role answers lookups");
}
