//! Wiring for end-to-end tests: a `chains.toml` for the local node (through the real
//! parser), a worker driven step by step, and the real HTTP and gRPC APIs on free ports.

use std::sync::Arc;
use std::time::Duration;

use alloy::primitives::Address;
use backon::ExponentialBuilder;
use paywatch_api::AppState;
use paywatch_core::config::{ChainsConfig, parse_chains};
use paywatch_evm::EvmWorker;
use paywatch_evm::rpc::EvmRpc;
use paywatch_evm::worker::StepOutcome;
use paywatch_query::{Queries, ReadReplica};
use paywatch_solana::SolanaWorker;
use paywatch_solana::rpc::SolanaRpc;
use paywatch_store::Store;

use crate::stores::{Kind, TestDb};
use crate::tools::{peak_rss_mib, process_cpu_seconds, reset_peak_rss};
use tokio_util::sync::CancellationToken;

/// Settings of the local network entry.
#[derive(Debug, Clone)]
pub struct LocalNetwork {
    /// Chain id (anvil's default is 31337).
    pub chain_id: u64,
    /// Its alias (`local` unless several networks share a file).
    pub alias: String,
    /// RPC URL (the node or a proxy in front of it).
    pub rpc_url: String,
    /// More RPC URLs after it, in failover order.
    pub more_rpc_urls: Vec<String>,
    /// Watched tokens.
    pub tokens: Vec<Address>,
    /// Confirmations for `paid`.
    pub confirmations: u64,
    /// Use the node's `finalized` or `safe` tag instead of `confirmations`.
    pub finality_tag: Option<&'static str>,
    /// Widest `eth_getLogs` range.
    pub max_block_range: u64,
    /// Ranges of final blocks read at once (`ranges_in_flight`; `None`: the default).
    pub ranges_in_flight: Option<usize>,
    /// The largest `eth_getLogs` answer read, KiB (`max_logs_answer_kib`; `None`: the default).
    pub max_logs_answer_kib: Option<usize>,
    /// RPC timeout, milliseconds.
    pub rpc_timeout_ms: u64,
    /// Pause between polls once caught up, milliseconds.
    pub poll_interval_ms: u64,
    /// The tokens' start block.
    pub start_block: u64,
    /// How much older a payment a plain transfer back may refund (`None`: the default).
    pub refund_window_secs: Option<u64>,
    /// An independent provider every range is cross-checked with (`verify_rpc_urls`).
    pub verify_rpc_url: Option<String>,
    /// The sellers' wallets (`pay_to`): only transfers into or out of them are read.
    pub pay_to: Vec<Address>,
    /// `keep_transfers` (`None`: the default, `refunds`).
    pub keep_transfers: Option<&'static str>,
    /// Read again from receipts the blocks `eth_getLogs` returned nothing for whose bloom
    /// may hold a wanted log (`bloom_check`).
    pub bloom_check: bool,
    /// The ERC-7710 delegation managers watched (`delegation_managers`; `None`: the
    /// default).
    pub delegation_managers: Option<Vec<Address>>,
    /// The facilitators' senders (`facilitators`).
    pub facilitators: Vec<Address>,
    /// Seconds between scheduled audits (`audit_interval_secs`; `None`: none).
    pub audit_interval_secs: Option<u64>,
}

impl LocalNetwork {
    /// Defaults for a local node at `rpc_url` watching `tokens`.
    pub fn new(chain_id: u64, rpc_url: &str, tokens: &[Address]) -> Self {
        Self {
            chain_id,
            alias: "local".to_string(),
            rpc_url: rpc_url.to_string(),
            more_rpc_urls: Vec::new(),
            tokens: tokens.to_vec(),
            confirmations: 2,
            finality_tag: None,
            max_block_range: 1000,
            ranges_in_flight: None,
            max_logs_answer_kib: None,
            rpc_timeout_ms: 5_000,
            poll_interval_ms: 200,
            start_block: 0,
            refund_window_secs: None,
            verify_rpc_url: None,
            pay_to: Vec::new(),
            keep_transfers: None,
            bloom_check: false,
            delegation_managers: None,
            facilitators: Vec::new(),
            audit_interval_secs: None,
        }
    }

    /// The `chains.toml` text for it.
    pub fn toml(&self) -> String {
        let finality = match self.finality_tag {
            Some(tag) => format!("finality = \"{tag}\""),
            None => format!("confirmations = {}", self.confirmations),
        };
        let rpc_urls: Vec<String> = std::iter::once(&self.rpc_url)
            .chain(&self.more_rpc_urls)
            .map(|url| format!("\"{url}\""))
            .collect();
        let mut text = format!(
            "[networks.\"eip155:{}\"]\nalias = \"{}\"\nrpc_urls = [{}]\n{}\nmax_block_range = {}\npoll_interval_ms = {}\nrpc_timeout_ms = {}\n",
            self.chain_id,
            self.alias,
            rpc_urls.join(", "),
            finality,
            self.max_block_range,
            self.poll_interval_ms,
            self.rpc_timeout_ms
        );
        if let Some(window) = self.refund_window_secs {
            text.push_str(&format!("refund_window_secs = {window}\n"));
        }
        if !self.pay_to.is_empty() {
            let wallets: Vec<String> = self.pay_to.iter().map(|w| format!("\"{w}\"")).collect();
            text.push_str(&format!("pay_to = [{}]\n", wallets.join(", ")));
        }
        if let Some(keep) = self.keep_transfers {
            text.push_str(&format!("keep_transfers = \"{keep}\"\n"));
        }
        if self.bloom_check {
            text.push_str("bloom_check = true\n");
        }
        if !self.facilitators.is_empty() {
            let senders: Vec<String> = self.facilitators.iter().map(|f| format!("\"{f}\"")).collect();
            text.push_str(&format!("facilitators = [{}]\n", senders.join(", ")));
        }
        if let Some(ranges) = self.ranges_in_flight {
            text.push_str(&format!("ranges_in_flight = {ranges}\n"));
        }
        if let Some(kib) = self.max_logs_answer_kib {
            text.push_str(&format!("max_logs_answer_kib = {kib}\n"));
        }
        if let Some(managers) = &self.delegation_managers {
            let managers: Vec<String> = managers.iter().map(|m| format!("\"{m}\"")).collect();
            text.push_str(&format!("delegation_managers = [{}]\n", managers.join(", ")));
        }
        if let Some(interval) = self.audit_interval_secs {
            text.push_str(&format!("audit_interval_secs = {interval}\n"));
        }
        if let Some(verifier) = &self.verify_rpc_url {
            text.push_str(&format!("verify_rpc_urls = [\"{verifier}\"]\n"));
        }
        for token in &self.tokens {
            text.push_str(&format!(
                "\n[[networks.\"eip155:{}\".tokens]]\naddress = \"{token}\"\nsymbol = \"USDC\"\ndecimals = 6\nstart_block = {}\n",
                self.chain_id, self.start_block
            ));
        }
        text
    }

    /// Parsed with the real configuration parser.
    pub fn chains(&self) -> ChainsConfig {
        parse_chains(&self.toml(), "test chains.toml", |_| None).expect("valid test chains.toml")
    }
}

/// A worker on `store` for the single network of `chains`, retrying fast.
pub async fn worker(chains: &ChainsConfig, store: &Store) -> EvmWorker {
    let network = chains.networks[0].clone();
    let connect = |urls: Vec<url::Url>| {
        let network = &network;
        async move {
            EvmRpc::connect_network(network, &urls)
                .await
                .expect("connect RPC")
                .with_backoff(
                    ExponentialBuilder::default()
                        .with_min_delay(Duration::from_millis(10))
                        .with_max_delay(Duration::from_millis(100))
                        .with_max_times(10),
                )
        }
    };
    let rpc = connect(network.rpc_urls.clone()).await;
    let verifier = match network.verify_rpc_urls.is_empty() {
        true => None,
        false => Some(connect(network.verify_rpc_urls.clone()).await),
    };
    let worker = EvmWorker::new(network, store.clone(), rpc);
    match verifier {
        Some(verifier) => worker.with_verifier(verifier),
        None => worker,
    }
}

/// Steps the worker until it is caught up with the head; returns the outcomes.
pub async fn sync(worker: &mut EvmWorker) -> Vec<StepOutcome> {
    let mut outcomes = Vec::new();
    for _ in 0..10_000 {
        let outcome = worker.step().await.expect("worker step");
        outcomes.push(outcome);
        if outcome == StepOutcome::CaughtUp {
            return outcomes;
        }
    }
    panic!("worker did not catch up in 10,000 steps: {:?}", outcomes.last());
}

/// A fresh store backfilled by a worker up to the node's head (benchmarks).
pub struct TimedBackfill {
    /// The database (dropped last).
    pub db: TestDb,
    /// The store, open.
    pub store: Store,
    /// The network's CAIP-2 id.
    pub network: String,
    /// Wall time of the backfill, seconds.
    pub seconds: f64,
    /// The process's peak resident memory during it, MiB.
    pub peak_mib: f64,
    /// CPU time (user + system) this process used during it, seconds: the worker and, for
    /// SQLite, the store.
    pub cpu_seconds: f64,
}

/// Creates a store of `kind` and times a worker for `network` catching up with the head,
/// measuring the process's peak resident memory meanwhile.
pub async fn timed_backfill(kind: Kind, network: &LocalNetwork) -> TimedBackfill {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = network.chains();
    reset_peak_rss();
    let cpu_before = process_cpu_seconds(std::process::id());
    let started = std::time::Instant::now();
    let mut worker = worker(&chains, &store).await;
    sync(&mut worker).await;
    TimedBackfill {
        seconds: started.elapsed().as_secs_f64(),
        peak_mib: peak_rss_mib(),
        cpu_seconds: process_cpu_seconds(std::process::id()) - cpu_before,
        network: chains.networks[0].id.to_string(),
        db,
        store,
    }
}

/// A fresh store that has indexed everything a local EVM node serves, the worker that did
/// it (to read what comes next), and the API over it.
pub struct Indexed {
    /// The database (dropped last).
    pub db: TestDb,
    /// The store.
    pub store: Store,
    /// The configuration the worker and the API ran with.
    pub chains: ChainsConfig,
    /// The API.
    pub api: ApiServer,
    /// The worker, caught up with the head.
    pub worker: EvmWorker,
}

impl Indexed {
    /// Creates a store of `kind`, lets a worker for `network` catch up with the head, and
    /// starts the API.
    pub async fn new(kind: Kind, network: &LocalNetwork) -> Self {
        let db = TestDb::create(kind).await;
        let store = db.open().await;
        let chains = network.chains();
        let mut worker = worker(&chains, &store).await;
        sync(&mut worker).await;
        let api = ApiServer::start(&store, &chains).await;
        Self {
            db,
            store,
            chains,
            api,
            worker,
        }
    }
}

/// The `chains.toml` entry of a local Solana validator.
#[derive(Debug, Clone)]
pub struct SolanaLocal {
    /// CAIP-2 id (`solana:` + the genesis hash's first 32 characters).
    pub network_id: String,
    /// RPC URL (the validator or a proxy in front of it).
    pub rpc_url: String,
    /// Watched mints with their decimals.
    pub mints: Vec<(String, u8)>,
    /// Watched pay_to wallets.
    pub pay_to: Vec<String>,
}

impl SolanaLocal {
    /// The `chains.toml` text for it.
    pub fn toml(&self) -> String {
        let net = &self.network_id;
        let wallets: Vec<String> = self.pay_to.iter().map(|w| format!("\"{w}\"")).collect();
        let mut text = format!(
            "[networks.\"{net}\"]\nalias = \"local-solana\"\nrpc_urls = [\"{}\"]\npay_to = [{}]\nstart_block = 0\npoll_interval_ms = 200\nrpc_timeout_ms = 2000\n",
            self.rpc_url,
            wallets.join(", ")
        );
        for (mint, decimals) in &self.mints {
            text.push_str(&format!(
                "\n[[networks.\"{net}\".tokens]]\naddress = \"{mint}\"\nsymbol = \"USDC\"\ndecimals = {decimals}\n"
            ));
        }
        text
    }

    /// Parsed with the real configuration parser.
    pub fn chains(&self) -> ChainsConfig {
        parse_chains(&self.toml(), "test chains.toml", |_| None).expect("valid test chains.toml")
    }
}

/// A Solana worker on `store` for the single network of `chains`, retrying fast, listing
/// signatures `page` at a time.
pub fn solana_worker(chains: &ChainsConfig, store: &Store, page: usize) -> SolanaWorker {
    let network = chains.networks[0].clone();
    let rpc = SolanaRpc::for_network(&network)
        .expect("the test network has an RPC URL")
        .with_backoff(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(10))
                .with_max_delay(Duration::from_millis(100))
                .with_max_times(10),
        )
        .with_signatures_page(page);
    SolanaWorker::new(network, store.clone(), rpc)
}

/// The real HTTP and gRPC APIs, each on a free loopback port, over one state; they stop
/// when dropped.
pub struct ApiServer {
    /// `http://127.0.0.1:PORT` of the HTTP API.
    pub base_url: String,
    /// `http://127.0.0.1:PORT` of the gRPC API.
    pub grpc_url: String,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
        self.task.abort();
    }
}

impl ApiServer {
    /// Serves both APIs for `chains` on `store`.
    pub async fn start(store: &Store, chains: &ChainsConfig) -> Self {
        Self::serve(AppState::new(store.clone(), Arc::new(chains.clone()), None)).await
    }

    /// Serves both APIs for `chains` on the primary `store`, with reads routed to the
    /// streaming replica at `replica_url` while it lags at most `max_lag`, as `paywatch
    /// run --read-database-url` does.
    pub async fn start_with_replica(
        store: &Store,
        replica_url: &str,
        max_lag: Duration,
        chains: &ChainsConfig,
    ) -> Self {
        let queries = Queries::new(store.clone(), Arc::new(chains.clone()));
        let replica = ReadReplica::connect(store, replica_url, &Default::default(), max_lag)
            .await
            .expect("a hot standby of the primary");
        tokio::spawn(replica.clone().watch(store.clone(), queries.shutdown.clone()));
        let queries = Queries {
            replica: Some(replica),
            ..queries
        };
        Self::serve(AppState {
            queries: Arc::new(queries),
            metrics: None,
        })
        .await
    }

    async fn serve(state: AppState) -> Self {
        let shutdown = state.queries.shutdown.clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind API");
        let grpc_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind gRPC API");
        let base_url = format!("http://{}", listener.local_addr().expect("API address"));
        let grpc_url = format!("http://{}", grpc_listener.local_addr().expect("gRPC address"));
        tokio::spawn(paywatch_grpc::serve(
            state.queries.clone(),
            grpc_listener,
            shutdown.clone(),
        ));
        let app = paywatch_api::router(state);
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("API server");
        });
        Self {
            base_url,
            grpc_url,
            shutdown,
            task,
        }
    }

    /// POSTs `body` as JSON to `path` and returns the status and JSON body.
    pub async fn post(&self, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
        let response = reqwest::Client::new()
            .post(format!("{}{path}", self.base_url))
            .json(body)
            .send()
            .await
            .expect("POST");
        let status = response.status().as_u16();
        let body = response.json().await.expect("JSON body");
        (status, body)
    }

    /// GETs `path` as CSV (`Accept: text/csv`) and returns the status and the text.
    pub async fn get_csv(&self, path: &str) -> (u16, String) {
        let response = reqwest::Client::new()
            .get(format!("{}{path}", self.base_url))
            .header("accept", "text/csv")
            .send()
            .await
            .expect("GET csv");
        let status = response.status().as_u16();
        (status, response.text().await.expect("csv body"))
    }

    /// GETs `path` and returns the status and JSON body.
    pub async fn get(&self, path: &str) -> (u16, serde_json::Value) {
        let response = reqwest::get(format!("{}{path}", self.base_url))
            .await
            .expect("GET");
        let status = response.status().as_u16();
        let body = response.json().await.expect("JSON body");
        (status, body)
    }
}

/// A review's `issued_at` for `offset_secs` from now (negative: in the past).
pub fn issued_at(offset_secs: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs();
    let at = i64::try_from(now).expect("seconds fit i64") + offset_secs;
    paywatch_core::review::issued_at_of(at).expect("a date of years 0000–9999")
}
