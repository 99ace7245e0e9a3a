//! Hostile RPC providers, through a JSON-RPC proxy in front of real anvil nodes whose
//! behaviour changes while paywatch runs: logs copied into a block the chain does not have,
//! a failover endpoint moved to another chain, a node that never answers, a syncing node
//! behind the recorded head, `removed` copies of logs, a load balancer over nodes at
//! different heads, another provider reporting a reorg below the final block, and a store
//! error retrying cannot heal. Whatever they answer, paywatch reports no payment that did
//! not happen, drops none that did, reads no other chain, and shows a stalled or stopped
//! network in `paywatch status` and `/readyz`. On SQLite and Postgres.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use alloy::primitives::B256;
use alloy::rpc::types::TransactionReceipt;
use paywatch_chain::{Progress, Seen, Stage, StepFailure, drive};
use paywatch_core::config::ChainsConfig;
use paywatch_core::ids::lower_hex;
use paywatch_core::state::{HistoryCause, PaymentState};
use paywatch_evm::EvmWorker;
use paywatch_evm::decode::BadAnswer;
use paywatch_evm::rpc::RpcFault;
use paywatch_evm::worker::{StepError, StepOutcome};
use paywatch_store::Store;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{ApiServer, LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::proxy::{Faults, LogLies, RpcProxy};
use paywatch_tests::stores::{Kind, TestDb, execute};
use paywatch_tests::token::Token;
use paywatch_tests::tools::{free_port, output_text, paywatch_on, wait_serving};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const PAYER: usize = 1;
const SELLER: usize = 2;
const FACILITATOR: usize = 3;

async fn funded_token(chain: &Chain) -> Token {
    let token = Token::deploy(chain).await;
    token.mint(chain.account(PAYER), 1_000_000_000).await;
    token
}

/// Two anvil nodes, chains 31337 and 31338, each with the test token (at the same address
/// on both) funded for the payer.
async fn two_chains() -> (Chain, Token, Chain, Token) {
    let chain = Chain::start().await;
    let other = Chain::start_as(31_338).await;
    let token = funded_token(&chain).await;
    let other_token = funded_token(&other).await;
    assert_eq!(
        token.address, other_token.address,
        "the same address on both chains"
    );
    (chain, token, other, other_token)
}

/// A store of `kind`, and a worker on it for `chain`'s network watching `token` through
/// `first` then `second` (in failover order), caught up with the head; the network's id.
async fn read_through_two(
    kind: Kind,
    chain: &Chain,
    token: &Token,
    first: &RpcProxy,
    second: &RpcProxy,
) -> (TestDb, Store, ChainsConfig, String, EvmWorker) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let mut network = LocalNetwork::new(chain.chain_id(), &first.url, &[token.address]);
    network.more_rpc_urls = vec![second.url.clone()];
    let chains = network.chains();
    let id = chains.networks[0].id.to_string();
    let mut worker = worker(&chains, &store).await;
    worker.verify_chain(&CancellationToken::new()).await.unwrap();
    sync(&mut worker).await;
    (db, store, chains, id, worker)
}

/// Three payments of 20,000 from the payer to the seller, one block each (nonces from
/// `round`).
async fn three_payments(chain: &Chain, token: &Token, round: u8) -> Vec<TransactionReceipt> {
    let mut receipts = Vec::new();
    for i in 3 * round..3 * round + 3 {
        receipts.push(
            token
                .pay(
                    &chain.signer(PAYER),
                    chain.account(SELLER),
                    20_000,
                    B256::repeat_byte(0x40 + i),
                    chain.account(FACILITATOR),
                )
                .await,
        );
    }
    receipts
}

/// The payments of `network` the listing answers: (payment, state, amount).
async fn listed(api: &ApiServer, network: &str) -> Vec<(String, String, String)> {
    let (status, page) = api
        .get(&format!("/v1/payments?network={network}&limit=100"))
        .await;
    assert_eq!(status, 200, "{page}");
    page["payments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["payment"].as_str().unwrap().to_string(),
                p["payment_state"].as_str().unwrap().to_string(),
                p["amount"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A copy of a real payment's logs under a made-up transaction hash, placed in a block
/// that holds no log, naming its original block's hash: refused every time it is answered
/// (the block's header has another hash), and never stored; once the provider stops
/// lying, the three real payments are read, and only they.
async fn a_made_up_payment_in_an_empty_block_is_refused(kind: Kind) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    let start = chain.block_number().await + 1;
    let paid = three_payments(&chain, &token, 0).await;
    chain.mine(5).await;
    let copied = lower_hex(paid[2].transaction_hash);
    let target = paid[2].block_number.unwrap() + 2;
    let proxy = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            log_lies: LogLies {
                relocate_copies: vec![(copied, target)],
                ..LogLies::default()
            },
            ..Faults::default()
        },
    )
    .await;

    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let mut network = LocalNetwork::new(chain.chain_id(), &proxy.url, &[token.address]);
    network.start_block = start;
    let chains = network.chains();
    let id = chains.networks[0].id.to_string();
    let mut worker = worker(&chains, &store).await;
    for _ in 0..3 {
        let refused = worker
            .step()
            .await
            .expect_err("a log in a block the chain does not have");
        assert!(
            matches!(&refused, StepError::BadAnswer(BadAnswer::ForeignBlock { block, .. }) if *block == target),
            "{refused}"
        );
        assert_eq!(store.row_counts(&id).await.unwrap().2, 0, "nothing stored");
    }

    proxy.set_faults(Faults::default());
    sync(&mut worker).await;
    let api = ApiServer::start(&store, &chains).await;
    let expected: Vec<(String, String, String)> = paid
        .iter()
        .map(|r| {
            (
                lower_hex(r.transaction_hash),
                "paid".to_string(),
                "20000".to_string(),
            )
        })
        .collect();
    assert_eq!(
        listed(&api, &id).await,
        expected,
        "the three real payments, no more"
    );
    let (status, totals) = api.get(&format!("/v1/totals?network={id}")).await;
    assert_eq!(status, 200, "{totals}");
    assert_eq!(totals["groups"][0]["final_amount"], "60000", "{totals}");
    assert_eq!(totals["groups"][0]["payments"], 3, "{totals}");
}
on_both_stores!(made_up_payment, a_made_up_payment_in_an_empty_block_is_refused);

/// Two endpoints on the right chain at start; then the second is moved to another chain
/// (its own payments at the same token address) and the first answers 503: the set
/// switches to the second, finds it on chain 31338, refuses it for good (named with its
/// port and both chain ids) and never reads it — no final payment dropped, no foreign one
/// served — and once the first answers again, a new payment is read from it. An endpoint
/// on another chain from the start is refused at start and never read.
async fn an_endpoint_on_another_chain_is_never_read(kind: Kind) {
    let (chain, token, foreign, foreign_token) = two_chains().await;
    let paid = three_payments(&chain, &token, 0).await;
    let foreign_paid = three_payments(&foreign, &foreign_token, 0).await;
    chain.mine(3).await;
    foreign.mine(30).await;
    let first = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
    let second = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
    let (_db, store, chains, id, mut worker) = read_through_two(kind, &chain, &token, &first, &second).await;
    let api = ApiServer::start(&store, &chains).await;
    let all_paid = |listing: Vec<(String, String, String)>| {
        listing.iter().all(|(_, state, _)| state == "paid") && listing.len() == 3
    };
    assert!(all_paid(listed(&api, &id).await));

    second.set_upstream(&foreign.endpoint());
    first.set_faults(Faults {
        error: 1.0,
        ..Faults::default()
    });
    let logs_before = second.stats.calls_of("eth_getLogs");
    let failed = worker.step().await.expect_err("no endpoint of the chain answers");
    assert!(matches!(failed, StepError::Rpc(_)), "{failed}");
    let port = second.url.rsplit(':').next().unwrap();
    assert_eq!(
        worker.seen().refused_endpoints,
        [format!(
            "http://127.0.0.1:{port}: serves chain id 31338, not 31337"
        )]
    );
    assert_eq!(second.stats.calls_of("eth_getLogs"), logs_before, "never read");
    assert_eq!(second.stats.calls_of("eth_blockNumber"), 0, "never read");
    let listing = listed(&api, &id).await;
    assert!(all_paid(listing.clone()), "nothing final dropped: {listing:?}");
    for foreign in &foreign_paid {
        let (status, body) = api
            .get(&format!(
                "/v1/payments/{id}/{}",
                lower_hex(foreign.transaction_hash)
            ))
            .await;
        assert_eq!(status, 404, "another chain's payment: {body}");
    }

    first.set_faults(Faults::default());
    let late = token
        .pay(
            &chain.signer(PAYER),
            chain.account(SELLER),
            7,
            B256::repeat_byte(0x77),
            chain.account(FACILITATOR),
        )
        .await;
    chain.mine(2).await;
    sync(&mut worker).await;
    let listing = listed(&api, &id).await;
    assert_eq!(listing.len(), 4, "{listing:?}");
    assert_eq!(listing[3].0, lower_hex(late.transaction_hash));
    assert!(listing.iter().all(|(_, state, _)| state == "paid"), "{listing:?}");
    assert_eq!(
        listing
            .iter()
            .map(|(p, ..)| p.clone())
            .take(3)
            .collect::<Vec<_>>(),
        paid.iter()
            .map(|r| lower_hex(r.transaction_hash))
            .collect::<Vec<_>>()
    );

    // On another chain from the start: refused at start, never read.
    let foreign_proxy = RpcProxy::start(&foreign.endpoint(), Faults::default()).await;
    let fresh = TestDb::create(kind).await;
    let fresh_store = fresh.open().await;
    let mut network = LocalNetwork::new(chain.chain_id(), &first.url, &[token.address]);
    network.more_rpc_urls = vec![foreign_proxy.url.clone()];
    let mut fresh_worker = paywatch_tests::harness::worker(&network.chains(), &fresh_store).await;
    fresh_worker
        .verify_chain(&CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(fresh_worker.seen().refused_endpoints.len(), 1);
    sync(&mut fresh_worker).await;
    assert_eq!(fresh_store.row_counts(&id).await.unwrap().2, 4);
    assert_eq!(foreign_proxy.stats.calls_of("eth_chainId"), 1);
    assert_eq!(
        foreign_proxy
            .stats
            .requests
            .load(std::sync::atomic::Ordering::SeqCst),
        1
    );
}
on_both_stores!(another_chain, an_endpoint_on_another_chain_is_never_read);

/// A syncing node, 20 blocks behind the head already recorded: it is not read (the step
/// fails naming both heads), the recorded head and final block do not move back, and a
/// paid payment keeps its confirmations; once it catches up, reading goes on.
async fn a_syncing_node_moves_no_head_back(kind: Kind) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    let paid = three_payments(&chain, &token, 0).await;
    chain.mine(25).await;
    let proxy = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = LocalNetwork::new(chain.chain_id(), &proxy.url, &[token.address]).chains();
    let id = chains.networks[0].id.to_string();
    let mut worker = worker(&chains, &store).await;
    sync(&mut worker).await;
    let api = ApiServer::start(&store, &chains).await;
    let path = format!("/v1/payments/{id}/{}", lower_hex(paid[0].transaction_hash));
    let (_, before) = api.get(&path).await;
    let confirmations = before["confirmations"].as_u64().unwrap();
    assert!(confirmations > 20, "{before}");
    let recorded = store.chain_head(&id).await.unwrap().unwrap();

    proxy.set_faults(Faults {
        behind_by: 20,
        ..Faults::default()
    });
    for _ in 0..3 {
        let failed = worker.step().await.expect_err("a node behind the recorded head");
        assert!(
            matches!(
                failed,
                StepError::Rpc(RpcFault::Behind { head, recorded: at })
                    if at == recorded.head_block && head + 20 == at
            ),
            "{failed}"
        );
    }
    let now = store.chain_head(&id).await.unwrap().unwrap();
    assert_eq!(
        (now.head_block, now.final_block),
        (recorded.head_block, recorded.final_block),
        "no head moved back"
    );
    let (_, during) = api.get(&path).await;
    assert_eq!(during["confirmations"], confirmations, "{during}");
    assert_eq!(during["payment_state"], "paid", "{during}");

    proxy.set_faults(Faults::default());
    chain.mine(1).await;
    let outcomes = sync(&mut worker).await;
    assert!(
        !outcomes
            .iter()
            .any(|o| matches!(o, StepOutcome::RolledBack { .. })),
        "no reorg: {outcomes:?}"
    );
    let (_, after) = api.get(&path).await;
    assert_eq!(after["confirmations"], confirmations + 1, "{after}");
}
on_both_stores!(syncing_node, a_syncing_node_moves_no_head_back);

/// A load balancer over two nodes answering in turn, one learning each block 400 ms after
/// the other: steps fail while they disagree, but no reorg is reported, no head moves
/// back, and every payment is read once.
async fn a_mixed_provider_reads_every_payment_once(kind: Kind) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    let proxy = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            mixed_lag: Duration::from_millis(400),
            ..Faults::default()
        },
    )
    .await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = LocalNetwork::new(chain.chain_id(), &proxy.url, &[token.address]).chains();
    let id = chains.networks[0].id.to_string();
    let mut worker = worker(&chains, &store).await;
    let (mut highest, mut disagreements) = (0, 0);
    let mut paid = Vec::new();
    for round in 0..3u8 {
        paid.extend(three_payments(&chain, &token, round).await);
        chain.mine(3).await;
        let target = chain.block_number().await - 1;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "round {round} did not catch up");
            match worker.step().await {
                Ok(StepOutcome::RolledBack { .. }) => panic!("a reorg from a mixed provider"),
                Ok(_) => {}
                // A node that lacks the other's newest block, or is behind it: read again.
                Err(StepError::Rpc(_) | StepError::BadAnswer(_)) => disagreements += 1,
                Err(store) => panic!("{store}"),
            }
            let head = store.chain_head(&id).await.unwrap().map_or(0, |h| h.head_block);
            assert!(head >= highest, "the head moved back from {highest} to {head}");
            highest = head;
            let next = store.cursors(&id).await.unwrap()[0].next_block;
            if next > target {
                break;
            }
        }
    }
    assert!(disagreements > 0, "the two nodes never disagreed");
    let api = ApiServer::start(&store, &chains).await;
    let listing = listed(&api, &id).await;
    assert_eq!(
        listing.iter().map(|(p, ..)| p.clone()).collect::<Vec<_>>(),
        paid.iter()
            .map(|r| lower_hex(r.transaction_hash))
            .collect::<Vec<_>>(),
        "every payment once"
    );
}
on_both_stores!(mixed_provider, a_mixed_provider_reads_every_payment_once);

/// Copies of a payment's logs flagged `removed: true`: the answer is refused each time,
/// nothing is stored from it, and once the provider stops, each payment is read once.
async fn removed_logs_are_refused(kind: Kind) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    let paid = three_payments(&chain, &token, 0).await;
    chain.mine(3).await;
    let proxy = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            log_lies: LogLies {
                removed_copies_of: vec![lower_hex(paid[1].transaction_hash)],
                ..LogLies::default()
            },
            ..Faults::default()
        },
    )
    .await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let mut network = LocalNetwork::new(chain.chain_id(), &proxy.url, &[token.address]);
    network.start_block = paid[0].block_number.unwrap();
    let chains = network.chains();
    let id = chains.networks[0].id.to_string();
    let mut worker = worker(&chains, &store).await;
    let refused = worker.step().await.expect_err("a removed log");
    assert!(
        matches!(refused, StepError::BadAnswer(BadAnswer::Removed(_))),
        "{refused}"
    );
    assert_eq!(store.row_counts(&id).await.unwrap().2, 0);
    proxy.set_faults(Faults::default());
    sync(&mut worker).await;
    let api = ApiServer::start(&store, &chains).await;
    assert_eq!(listed(&api, &id).await.len(), 3);
}
on_both_stores!(removed_logs, removed_logs_are_refused);

/// Two endpoints of chain 31337 on different histories: the worker reads the first; when
/// it fails, the second (same chain id, another history: every stored block differs)
/// reports a reorg below the final block. The first, asked, still has the stored blocks:
/// nothing final changes, the set moves back to the first, and no payment is ever dropped.
async fn a_deep_reorg_one_provider_reports_is_not_applied(kind: Kind) {
    let chain = Chain::start().await;
    let other = Chain::start().await;
    assert_eq!(chain.chain_id(), other.chain_id());
    let token = funded_token(&chain).await;
    let paid = three_payments(&chain, &token, 0).await;
    chain.mine(3).await;
    other.mine(40).await;
    let first = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
    let second = RpcProxy::start(&other.endpoint(), Faults::default()).await;
    let (_db, store, _, id, mut worker) = read_through_two(kind, &chain, &token, &first, &second).await;
    let final_payments = || async {
        let mut states = Vec::new();
        for receipt in &paid {
            let stored = store
                .payments_by_id(&id, &lower_hex(receipt.transaction_hash))
                .await
                .unwrap();
            states.push(stored[0].state);
        }
        states
    };
    assert_eq!(final_payments().await, [PaymentState::Paid; 3]);

    // The first fails: the second answers alone; the first, asked, cannot confirm.
    first.set_faults(Faults {
        error: 1.0,
        ..Faults::default()
    });
    for _ in 0..2 {
        let outcome = worker.step().await;
        assert!(
            !matches!(outcome, Ok(StepOutcome::RolledBack { .. })),
            "a reorg on one provider's word: {outcome:?}"
        );
        assert_eq!(final_payments().await, [PaymentState::Paid; 3]);
    }
    // The first answers again: it has the stored blocks, so the providers disagree.
    first.set_faults(Faults::default());
    let mut disputed = false;
    for _ in 0..10 {
        match worker.step().await {
            Err(StepError::BadAnswer(BadAnswer::DisputedFork { .. })) => disputed = true,
            Ok(StepOutcome::RolledBack { .. }) => panic!("a reorg on one provider's word"),
            _ => {}
        }
        assert_eq!(final_payments().await, [PaymentState::Paid; 3]);
    }
    assert!(disputed, "the second's fork was disputed");
    chain.mine(2).await;
    sync(&mut worker).await;
    assert_eq!(final_payments().await, [PaymentState::Paid; 3]);
    let history = store
        .history_of(&id, &lower_hex(paid[0].transaction_hash), 0)
        .await
        .unwrap();
    assert_eq!(
        history.iter().map(|h| h.cause).collect::<Vec<_>>(),
        [HistoryCause::SeenFinal],
        "read final once, never rolled back: {history:?}"
    );
}
on_both_stores!(disputed_reorg, a_deep_reorg_one_provider_reports_is_not_applied);

/// A stage that steps as scripted: `Ok(true)` advances, `Ok(false)` is caught up, `Err`
/// fails (fatally when its flag says so).
struct Scripted {
    store: Store,
    script: Vec<Result<bool, (&'static str, bool)>>,
    steps: usize,
}

/// A scripted step's failure.
#[derive(Debug)]
struct Failure(&'static str, bool);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl StepFailure for Failure {
    fn is_fatal(&self) -> bool {
        self.1
    }
}

impl Stage for Scripted {
    type Error = Failure;

    fn network(&self) -> &str {
        "eip155:1"
    }

    fn store(&self) -> &Store {
        &self.store
    }

    fn seen(&self) -> Seen {
        Seen {
            head: Some(100 + self.steps as u64),
            refused_endpoints: vec!["http://127.0.0.1:1: serves chain id 2, not 1".to_string()],
        }
    }

    fn poll_interval(&self) -> Duration {
        Duration::from_millis(1)
    }

    async fn advance(&mut self) -> Result<Progress, Failure> {
        let step = self.script.get(self.steps).copied().unwrap_or(Ok(false));
        self.steps += 1;
        match step {
            Ok(true) => Ok(Progress::Advanced),
            Ok(false) => Ok(Progress::CaughtUp),
            Err((what, fatal)) => Err(Failure(what, fatal)),
        }
    }
}

/// The runtime records what each worker does (start, steps, failures, refused endpoints)
/// and stops a worker for good on a fatal failure, recording why; a shutdown is no stop.
async fn the_runtime_records_each_workers_health(kind: Kind) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let shutdown = CancellationToken::new();
    let mut stage = Scripted {
        store: store.clone(),
        script: vec![Err(("node down", false)), Ok(true), Ok(false)],
        steps: 0,
    };
    let stopper = shutdown.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(600)).await;
        stopper.cancel();
    });
    assert!(drive(&mut stage, None, &shutdown).await.is_none());
    let health = store.worker_health("eip155:1").await.unwrap().unwrap();
    assert_eq!(
        health.seen_head,
        Some(102),
        "the first step after the failure recorded"
    );
    assert!(health.stepped_ago_ms.is_some_and(|ms| ms < 60_000), "{health:?}");
    assert_eq!(health.failure.as_deref(), Some("node down"));
    assert_eq!(
        health.refused_endpoints,
        ["http://127.0.0.1:1: serves chain id 2, not 1"]
    );
    assert_eq!(health.stopped, None, "a shutdown is no stop");

    let mut stage = Scripted {
        store: store.clone(),
        script: vec![Ok(true), Err(("the store is corrupt", true)), Ok(true)],
        steps: 0,
    };
    let stopped = drive(&mut stage, None, &CancellationToken::new()).await;
    assert_eq!(stopped.map(|f| f.0), Some("the store is corrupt"));
    assert_eq!(stage.steps, 2, "no step after a fatal failure");
    let health = store.worker_health("eip155:1").await.unwrap().unwrap();
    assert_eq!(health.stopped.as_deref(), Some("the store is corrupt"));
    assert_eq!(health.failure, None, "a restart forgets the last run's failure");
}
on_both_stores!(worker_health, the_runtime_records_each_workers_health);

/// A running `paywatch run`; killed when dropped.
struct Running {
    child: Child,
    listen: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    async fn start(dir: &Path, database_url: &str) -> Self {
        let listen = format!("127.0.0.1:{}", free_port());
        let grpc = format!("127.0.0.1:{}", free_port());
        let child = paywatch_on(
            env!("CARGO_BIN_EXE_paywatch"),
            dir,
            database_url,
            &["run", "--listen", &listen, "--grpc-listen", &grpc],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
        wait_serving(&listen, Duration::from_secs(60)).await;
        Self { child, listen }
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let response = reqwest::get(format!("http://{}{path}", self.listen))
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Waits until `path` answers `status`, polling; its body then.
    async fn wait_for(&self, path: &str, status: u16, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let (got, body) = self.get(path).await;
            if got == status {
                return body;
            }
            assert!(
                Instant::now() < deadline,
                "{path} answered {got}, not {status}: {body}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until the payment at `path` is paid.
    async fn wait_paid(&self, path: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.get(path).await.1["payment_state"] != "paid" {
            assert!(Instant::now() < deadline, "{path} is not paid");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// `paywatch status --json` (and `--ready`'s exit code) on `database_url`.
fn status(dir: &Path, database_url: &str) -> (Value, i32) {
    let output = paywatch_on(
        env!("CARGO_BIN_EXE_paywatch"),
        dir,
        database_url,
        &["status", "--json", "--ready"],
    )
    .output()
    .unwrap();
    let json = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| panic!("{}", output_text(&output)));
    (json, output.status.code().unwrap())
}

/// A provider that accepts connections and never answers: with one URL, `/readyz` turns
/// 503 `network_stalled` and `status` says `stalled` (exit code 1 with `--ready`) within
/// seconds, and both recover once it answers again; with a second URL, paywatch fails over
/// and a payment made meanwhile is read.
async fn a_silent_stall_shows_in_status_and_readiness(kind: Kind) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    let proxy = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
    let standby = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
    let db = TestDb::create(kind).await;
    let dir = tempfile::tempdir().unwrap();
    let mut network = LocalNetwork::new(chain.chain_id(), &proxy.url, &[token.address]);
    network.rpc_timeout_ms = 1_000;
    network.poll_interval_ms = 200;
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();
    let running = Running::start(dir.path(), &db.url).await;
    let id = format!("eip155:{}", chain.chain_id());
    let paid = three_payments(&chain, &token, 0).await;
    chain.mine(2).await;
    running
        .wait_paid(&format!(
            "/v1/payments/{id}/{}",
            lower_hex(paid[2].transaction_hash)
        ))
        .await;
    let ready = running.wait_for("/readyz", 200, Duration::from_secs(30)).await;
    assert_eq!(ready[0]["worker"], "running", "{ready}");
    let (report, code) = status(dir.path(), &db.url);
    assert_eq!(
        (report["networks"][0]["worker"].as_str(), code),
        (Some("running"), 0),
        "{report}"
    );

    proxy.set_faults(Faults {
        stall: (1.0, Duration::from_secs(3_600)),
        ..Faults::default()
    });
    chain.mine(1).await;
    let stalled = running.wait_for("/readyz", 503, Duration::from_secs(30)).await;
    assert_eq!(stalled["reason"], "network_stalled", "{stalled}");
    assert!(
        stalled["message"]
            .as_str()
            .unwrap()
            .contains(&format!("{id} is stalled")),
        "{stalled}"
    );
    let (report, code) = status(dir.path(), &db.url);
    assert_eq!(
        (report["networks"][0]["worker"].as_str(), code),
        (Some("stalled"), 1),
        "{report}"
    );
    assert_eq!(report["networks"][0]["stall_after_secs"], 1, "{report}");
    let metrics = reqwest::get(format!("http://{}/metrics", running.listen))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!(
            "paywatch_worker_last_step_timestamp_seconds{{network=\"{id}\"}}"
        )),
        "{metrics}"
    );

    proxy.set_faults(Faults::default());
    running.wait_for("/readyz", 200, Duration::from_secs(90)).await;
    let (report, code) = status(dir.path(), &db.url);
    assert_eq!(
        (report["networks"][0]["worker"].as_str(), code),
        (Some("running"), 0),
        "{report}"
    );
    drop(running);

    // With a standby URL the stall is failed over.
    network.more_rpc_urls = vec![standby.url.clone()];
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();
    let running = Running::start(dir.path(), &db.url).await;
    running.wait_for("/readyz", 200, Duration::from_secs(30)).await;
    proxy.set_faults(Faults {
        stall: (1.0, Duration::from_secs(3_600)),
        ..Faults::default()
    });
    let late = token
        .pay(
            &chain.signer(PAYER),
            chain.account(SELLER),
            5,
            B256::repeat_byte(0x55),
            chain.account(FACILITATOR),
        )
        .await;
    chain.mine(2).await;
    running
        .wait_paid(&format!("/v1/payments/{id}/{}", lower_hex(late.transaction_hash)))
        .await;
    running.wait_for("/readyz", 200, Duration::from_secs(30)).await;
    assert!(standby.stats.calls_of("eth_getLogs") > 0, "read from the standby");
}
on_both_stores!(silent_stall, a_silent_stall_shows_in_status_and_readiness);

/// A store error retrying cannot heal (a final payment edited by hand, then read again
/// from the chain: the node's answer conflicts with it) stops that network's worker for
/// good: an ERROR, `stopped` with the reason in `status`, `/readyz` 503 naming it; the
/// other network goes on reading, the API goes on answering, and SIGTERM stops paywatch
/// cleanly.
async fn a_fatal_store_error_stops_only_its_network(kind: Kind) {
    let (chain, token, other, other_token) = two_chains().await;
    let paid = three_payments(&chain, &token, 0).await;
    chain.mine(2).await;
    let db = TestDb::create(kind).await;
    let dir = tempfile::tempdir().unwrap();
    let mut first = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    first.poll_interval_ms = 200;
    let mut second = LocalNetwork::new(other.chain_id(), &other.endpoint(), &[other_token.address]);
    second.alias = "other".to_string();
    second.poll_interval_ms = 200;
    std::fs::write(
        dir.path().join("chains.toml"),
        format!("{}\n{}", first.toml(), second.toml()),
    )
    .unwrap();
    let running = Running::start(dir.path(), &db.url).await;
    let id = format!("eip155:{}", chain.chain_id());
    let other_id = format!("eip155:{}", other.chain_id());
    let path = format!("/v1/payments/{id}/{}", lower_hex(paid[0].transaction_hash));
    running.wait_paid(&path).await;

    execute(&db, "UPDATE payments SET amount = '1' WHERE network = $1", &id).await;
    let block = paid[0].block_number.unwrap();
    execute(
        &db,
        &format!("UPDATE cursors SET next_block = {block} WHERE network = $1"),
        &id,
    )
    .await;
    let stopped = running.wait_for("/readyz", 503, Duration::from_secs(60)).await;
    assert_eq!(stopped["reason"], "network_stalled", "{stopped}");
    let message = stopped["message"].as_str().unwrap();
    assert!(message.contains(&format!("{id} is stopped")), "{message}");
    assert!(message.contains("check the RPC endpoint"), "{message}");
    let (report, code) = status(dir.path(), &db.url);
    assert_eq!(code, 1);
    let networks = report["networks"].as_array().unwrap();
    let of = |network: &str| networks.iter().find(|n| n["network"] == network).unwrap().clone();
    assert_eq!(of(&id)["worker"], "stopped", "{report}");
    assert!(
        of(&id)["stopped"]
            .as_str()
            .unwrap()
            .contains("nothing was overwritten"),
        "{report}"
    );
    assert_eq!(of(&other_id)["worker"], "running", "{report}");

    // The other network reads on, and the API answers.
    let later = three_payments(&other, &other_token, 0).await;
    other.mine(2).await;
    running
        .wait_paid(&format!(
            "/v1/payments/{other_id}/{}",
            lower_hex(later[2].transaction_hash)
        ))
        .await;
    assert_eq!(running.get(&path).await.0, 200);
    let mut running = running;
    Command::new("kill")
        .args(["-TERM", &running.child.id().to_string()])
        .status()
        .unwrap();
    let exited = running.child.wait().unwrap();
    assert!(exited.success(), "SIGTERM stops paywatch cleanly: {exited:?}");
}
on_both_stores!(fatal_store_error, a_fatal_store_error_stops_only_its_network);
