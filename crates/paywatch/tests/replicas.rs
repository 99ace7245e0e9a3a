//! Several `paywatch run` processes on one real Postgres while payments flow on anvil:
//! one holds the worker's lease, the others stand by and serve queries; the owner is
//! killed with SIGKILL (twice, of three), a peer takes over within the lease's time to
//! live and resumes from the committed cursor, and the final store holds every payment
//! exactly once (EIP-3009, Permit2, upto and ERC-7710), identical to a single clean run. The same again with every replica's
//! node behind an RPC proxy that injects faults at random under a fixed seed and its
//! Postgres behind a proxy that cuts every connection now and then. On SQLite, a second
//! writer is refused and a `--role api` process may share the file.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use paywatch_core::ids::lower_hex;
use paywatch_core::state::PaymentState;
use paywatch_store::Store;
use paywatch_tests::chain::Chain;
use paywatch_tests::delegation::pay_by_every_other_method;
use paywatch_tests::harness::{LocalNetwork, sync, worker};
use paywatch_tests::proxy::{Faults, LogLies, RpcProxy, fault_seed};
use paywatch_tests::stores::{Kind, TEST_TIMEOUT, TestDb, chain_facts, dump, lease_owner_pid};
use paywatch_tests::tcp_proxy::TcpProxy;
use paywatch_tests::token::{Token, pay_in_turn};
use paywatch_tests::tools::{free_port, wait_serving};

/// Seconds a lease lives without renewal in these tests.
const LEASE_TTL: u64 = 3;

/// A running `paywatch run`, its HTTP address and the file its log goes to.
struct Replica {
    child: Child,
    listen: String,
    log: std::path::PathBuf,
}

impl Replica {
    fn start(dir: &Path, database_url: &str, extra: &[&str]) -> Self {
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
        let log = dir.join(format!("replica-{}.log", listen.replace(':', "-")));
        let child = Command::new(env!("CARGO_BIN_EXE_paywatch"))
            .current_dir(dir)
            .args(&args)
            .env("RUST_LOG", "warn")
            .env("PAYWATCH_GRPC_LISTEN", "127.0.0.1:0")
            .env_remove("PAYWATCH_DATABASE_URL")
            .env_remove("PAYWATCH_CHAINS")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Self { child, listen, log }
    }

    async fn wait_serving(&self) {
        wait_serving(&self.listen, Duration::from_secs(60)).await;
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits for the process; whether it exited cleanly.
    fn stop(&mut self) -> bool {
        Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        self.child.wait().unwrap().success()
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

/// Kills the live replica that holds `job`'s lease with SIGKILL, after letting it ingest
/// for a moment; returns when it died.
async fn kill_owner(replicas: &mut [Option<Replica>], store: &Store, job: &str) -> Instant {
    let live: Vec<u32> = replicas.iter().flatten().map(Replica::pid).collect();
    let owner = wait_owner(store, job, &live).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let slot = replicas
        .iter()
        .position(|r| r.as_ref().is_some_and(|r| r.pid() == owner))
        .unwrap();
    let mut killed = replicas[slot].take().unwrap();
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    Instant::now()
}

/// Waits until the worker has read through block `head` and every payment of `paid` is
/// stored once and `paid`.
async fn wait_caught_up(store: &Store, net: &str, head: u64, paid: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let cursor = store.cursors(net).await.unwrap().first().map(|c| c.next_block);
        let mut all_paid = true;
        for id in paid {
            let found = store.payments_by_id(net, id).await.unwrap();
            all_paid &= found.len() == 1 && found[0].state == PaymentState::Paid;
        }
        if all_paid && cursor == Some(head + 1) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the replicas did not catch up (cursor {cursor:?}, head {head})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The store at `url` holds every payment of `paid` (transactions of one payment each) and
/// `batched` more exactly once, each entered the history once, and its chain facts equal
/// those of one clean run over `network`.
async fn assert_exactly_once_as_in_a_clean_run(
    url: &str,
    network: &LocalNetwork,
    paid: &[String],
    batched: usize,
) {
    let net = format!("eip155:{}", network.chain_id);
    let replicated = dump(url, &net).await;
    let first_sightings = replicated
        .iter()
        .filter(|l| l.starts_with("payment_history ") && l.split(' ').nth(4) == Some(""))
        .count();
    assert_eq!(
        first_sightings,
        paid.len() + batched,
        "each payment entered the history once"
    );
    let clean_db = TestDb::create(Kind::Postgres).await;
    let clean_store = clean_db.open().await;
    sync(&mut worker(&network.chains(), &clean_store).await).await;
    clean_store.close().await;
    let clean = chain_facts(dump(&clean_db.url, &net).await);
    assert_eq!(
        clean.iter().filter(|l| l.starts_with("payments ")).count(),
        paid.len() + batched
    );
    assert_eq!(chain_facts(replicated), clean);
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
        let killed_at = kill_owner(&mut replicas, &store, &job).await;
        // Payments keep coming while nobody holds the lease.
        pay(100 + round).await;
        let survivors: Vec<u32> = replicas.iter().flatten().map(Replica::pid).collect();
        wait_owner(&store, &job, &survivors).await;
        takeovers.push(killed_at.elapsed());
    }
    for i in 12..16u8 {
        pay(i).await;
    }
    // Permit2 exact and upto, and ERC-7710 redemptions: one payment in each of the first
    // three transactions, two in the last.
    let others = pay_by_every_other_method(&chain, &token, (4, 5, 0)).await;
    paid.extend(others[..3].iter().map(lower_hex));
    chain.mine(3).await;
    let head = chain.block_number().await;

    wait_caught_up(&store, &net, head, &paid).await;
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
    assert!(survivor.stop(), "the survivor stops cleanly on SIGTERM");
    store.close().await;

    assert_exactly_once_as_in_a_clean_run(&db.url, &network, &paid, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_postgres_take_over_from_killed_owners() {
    tokio::time::timeout(TEST_TIMEOUT, replicas_take_over_from_killed_owners())
        .await
        .expect("test timed out");
}

/// Three replicas whose node sits behind an RPC proxy that answers at random (fixed seed)
/// with 429s, 502s, stalls past the timeout, answers cut mid-JSON and dropped connections,
/// and refuses wide log ranges, cross-checked with a verifier that has faults of its own and
/// leaves logs out; and whose Postgres sits behind a proxy that cuts every
/// connection now and then, once for longer than the lease lives. The owner is also
/// killed with SIGKILL. The store still ends with every payment exactly once, equal to a
/// clean run.
async fn replicas_under_rpc_and_postgres_faults() {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    for payer in 1..=3 {
        token.mint(chain.account(payer), 1_000_000_000).await;
    }
    let rpc_proxy = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            max_log_range: Some(4),
            ..Faults::all(fault_seed(), 0.04, Duration::from_millis(1500))
        },
    )
    .await;
    // Every range is cross-checked with a verifier that has faults of its own (another
    // seed) and leaves out the logs of one block in five.
    let verifier = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            log_lies: LogLies {
                omit_blocks: (1..400).step_by(5).collect(),
                ..LogLies::default()
            },
            ..Faults::all(fault_seed().wrapping_add(1), 0.04, Duration::from_millis(1500))
        },
    )
    .await;
    let mut faulty = LocalNetwork::new(chain.chain_id(), &rpc_proxy.url, &[token.address]);
    faulty.rpc_timeout_ms = 1000;
    faulty.max_block_range = 5;
    faulty.verify_rpc_url = Some(verifier.url.clone());
    let net = format!("eip155:{}", chain.chain_id());
    let job = format!("worker:{net}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("chains.toml"), faulty.toml()).unwrap();
    let db = TestDb::create(Kind::Postgres).await;
    let store = db.open().await;
    let (postgres, through) = TcpProxy::in_front_of(&db.url).await;

    let mut replicas: Vec<Option<Replica>> = (0..3)
        .map(|_| Some(Replica::start(dir.path(), &through, &[])))
        .collect();
    for replica in replicas.iter().flatten() {
        replica.wait_serving().await;
    }
    let mut paid = Vec::new();
    // Postgres outages after each round of payments; the second outlives the lease.
    let outages = [200, 1000 * LEASE_TTL + 1000, 500, 0];
    for (round, outage_ms) in (0u8..).zip(outages) {
        for i in round * 5..round * 5 + 5 {
            let receipt = pay_in_turn(&chain, &token, i, 3).await;
            paid.push(lower_hex(receipt.transaction_hash));
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
        postgres.restart(Duration::from_millis(outage_ms));
        if round == 2 {
            kill_owner(&mut replicas, &store, &job).await;
        }
    }
    // New blocks keep the replicas reading until each kind of RPC fault has struck.
    rpc_proxy
        .drive_until_every_fault(async || {
            chain.mine(1).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        })
        .await;
    chain.mine(3).await;
    let head = chain.block_number().await;
    wait_caught_up(&store, &net, head, &paid).await;
    for replica in replicas.iter_mut().flatten() {
        assert!(replica.stop(), "the survivors stop cleanly on SIGTERM");
    }
    store.close().await;
    let clean = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    assert_exactly_once_as_in_a_clean_run(&db.url, &clean, &paid, 0).await;
    assert!(
        verifier.stats.logs_left_out() > 0,
        "the verifier's lies were read"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_postgres_survive_rpc_and_postgres_faults() {
    tokio::time::timeout(TEST_TIMEOUT, replicas_under_rpc_and_postgres_faults())
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
    let stderr = std::fs::read_to_string(&second.log).unwrap();
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
