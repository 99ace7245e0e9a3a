//! A JSON-RPC proxy in front of a real node that injects faults: refused `eth_getLogs`
//! ranges (as providers do), HTTP 429 rate limits, HTTP 502 errors, stalls longer than
//! the client's timeout, answers cut off mid-JSON, and connections dropped mid-answer.
//! Everything else is forwarded untouched. Which request meets which fault is drawn at
//! random from a fixed seed: the same seed gives the same faults, in the order requests
//! arrive. The faults can be changed while the proxy runs ([`RpcProxy::set_faults`]): a
//! provider that turns bad, and good again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// Which faults to inject, and how often: each request meets at most one of the random
/// faults, drawn with the given shares (0.0 to 1.0, summing to at most 1.0).
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Seed of the random draws.
    pub seed: u64,
    /// Refuse `eth_getLogs` spanning more blocks than this (JSON-RPC error -32005), always.
    pub max_log_range: Option<u64>,
    /// Share of requests answered with HTTP 429.
    pub rate_limit: f64,
    /// Share of requests answered with HTTP 502.
    pub error: f64,
    /// Share of requests held this long before they are forwarded.
    pub stall: (f64, Duration),
    /// Share of requests answered with the first half of the node's answer (HTTP 200).
    pub truncate: f64,
    /// Share of requests whose connection drops halfway through the answer.
    pub reset: f64,
    /// Methods answered as a node that does not serve them answers (JSON-RPC -32601,
    /// geth's wording), always: `debug_traceTransaction` on most providers.
    pub unserved_methods: Vec<&'static str>,
    /// Answer `eth_getLogs` without the logs' `blockTimestamp`, as many nodes and
    /// providers do, always.
    pub strip_log_timestamps: bool,
    /// Lie in `eth_getLogs` answers (and only there: receipts stay true), always.
    pub log_lies: LogLies,
    /// Hold every request this long before forwarding it, as a distant provider answers.
    pub latency: Duration,
    /// Answer every JSON-RPC batch with one error object (-32600), as providers that
    /// serve no batches do, always.
    pub refuse_batches: bool,
    /// Answer as a node this many blocks behind the chain (syncing): `eth_blockNumber`
    /// lower by as much, and no block above that head (`null`, a tag's block the head's).
    pub behind_by: u64,
    /// Answer every other request as a node that learns each block this long after the
    /// proxy first saw it: a load balancer over two nodes, one lagging behind the other
    /// while blocks arrive, caught up once they stop.
    pub mixed_lag: Duration,
}

/// How a lying provider's `eth_getLogs` answers differ from the chain's: valid pages with
/// logs left out or made up.
#[derive(Debug, Clone, Default)]
pub struct LogLies {
    /// Leave out every log of these transactions (`0x` + lowercase hex).
    pub omit_transactions: Vec<String>,
    /// Leave out every log of these blocks.
    pub omit_blocks: Vec<u64>,
    /// For each `Transfer` log of these transactions, add a made-up one in the same block
    /// and transaction: the same amount sent back (from and to swapped), at a log index
    /// no real log has — a refund that never happened.
    pub invent_refunds_in: Vec<String>,
    /// Leave the logs of `omit_transactions` out of their receipts too
    /// (`eth_getTransactionReceipt`): a provider whose every answer hides them.
    pub in_receipts_too: bool,
    /// Double the amount of every `Transfer` log of these transactions: a payment (and its
    /// transfer) with other facts than the chain's.
    pub double_amounts_in: Vec<String>,
    /// Copy every log of the transaction (first) into the block (second), under a made-up
    /// transaction hash and with the original block's hash, which is not that block's: a
    /// payment that never happened, in a block holding no log of its own.
    pub relocate_copies: Vec<(String, u64)>,
    /// Add a copy of every log of these transactions flagged `removed: true`, at a log
    /// index no real log has.
    pub removed_copies_of: Vec<String>,
    /// Repeat every log of these transactions once more at a log index no real log has,
    /// each but the `Transfer`s with the last digit of its third topic changed (an
    /// EIP-3009 authorization's nonce): a second settlement in the transaction that never
    /// happened.
    pub invent_payments_in: Vec<String>,
}

impl LogLies {
    /// Whether this tells any lie.
    fn any(&self) -> bool {
        !(self.omit_transactions.is_empty()
            && self.omit_blocks.is_empty()
            && self.invent_refunds_in.is_empty()
            && self.double_amounts_in.is_empty()
            && self.invent_payments_in.is_empty()
            && self.relocate_copies.is_empty()
            && self.removed_copies_of.is_empty())
    }

    /// `logs`, the answer to `filter`'s range, as this liar answers them.
    fn apply(&self, logs: &mut Vec<Value>, range: Option<(u64, u64)>) {
        let text = |log: &Value, key: &str| {
            log.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let number =
            |log: &Value, key: &str| u64::from_str_radix(text(log, key).trim_start_matches("0x"), 16).ok();
        logs.retain(|log| {
            !self.omit_transactions.contains(&text(log, "transactionHash"))
                && !number(log, "blockNumber").is_some_and(|b| self.omit_blocks.contains(&b))
        });
        let transfer = format!(
            "{:#x}",
            alloy::primitives::keccak256("Transfer(address,address,uint256)")
        );
        let invented: Vec<Value> = logs
            .iter()
            .filter(|log| self.invent_refunds_in.contains(&text(log, "transactionHash")))
            .filter(|log| log["topics"][0].as_str() == Some(transfer.as_str()))
            .map(|log| {
                let mut fake = log.clone();
                let (from, to) = (log["topics"][1].clone(), log["topics"][2].clone());
                fake["topics"][1] = to;
                fake["topics"][2] = from;
                let index = number(log, "logIndex").unwrap_or_default() + 0x40;
                fake["logIndex"] = Value::String(format!("{index:#x}"));
                fake
            })
            .collect();
        logs.extend(invented);
        for log in logs.iter_mut() {
            if self.double_amounts_in.contains(&text(log, "transactionHash"))
                && log["topics"][0].as_str() == Some(transfer.as_str())
            {
                let amount =
                    alloy::primitives::U256::from_str_radix(text(log, "data").trim_start_matches("0x"), 16)
                        .unwrap_or_default();
                log["data"] = Value::String(format!("0x{:064x}", amount * alloy::primitives::U256::from(2)));
            }
        }
        let repeated: Vec<Value> = logs
            .iter()
            .filter(|log| self.invent_payments_in.contains(&text(log, "transactionHash")))
            .map(|log| {
                let mut fake = log.clone();
                let authorization = log["topics"][0].as_str() != Some(transfer.as_str());
                if let Some(topic) = log["topics"][2].as_str().filter(|_| authorization) {
                    let flipped = if topic.ends_with('0') { '1' } else { '0' };
                    fake["topics"][2] = Value::String(format!("{}{flipped}", &topic[..topic.len() - 1]));
                }
                let index = number(log, "logIndex").unwrap_or_default() + 0x80;
                fake["logIndex"] = Value::String(format!("{index:#x}"));
                fake
            })
            .collect();
        logs.extend(repeated);
        for (tx, block) in &self.relocate_copies {
            if range.is_some_and(|(from, to)| *block < from || *block > to) {
                continue;
            }
            let made_up = format!("{:#x}", alloy::primitives::keccak256(format!("made up {tx}")));
            let copies: Vec<Value> = logs
                .iter()
                .filter(|log| text(log, "transactionHash") == *tx)
                .map(|log| {
                    let mut copy = log.clone();
                    copy["transactionHash"] = Value::String(made_up.clone());
                    copy["blockNumber"] = Value::String(format!("{block:#x}"));
                    copy
                })
                .collect();
            logs.extend(copies);
        }
        let removed: Vec<Value> = logs
            .iter()
            .filter(|log| self.removed_copies_of.contains(&text(log, "transactionHash")))
            .map(|log| {
                let mut copy = log.clone();
                copy["removed"] = Value::Bool(true);
                let index = number(log, "logIndex").unwrap_or_default() + 0xc0;
                copy["logIndex"] = Value::String(format!("{index:#x}"));
                copy
            })
            .collect();
        logs.extend(removed);
        if !(self.relocate_copies.is_empty() && self.removed_copies_of.is_empty()) {
            logs.sort_by_key(|log| (number(log, "blockNumber"), number(log, "logIndex")));
        }
    }
}

impl Faults {
    /// Every random fault, each on `share` of the requests, drawn from `seed`; stalls
    /// last `stall`.
    pub fn all(seed: u64, share: f64, stall: Duration) -> Self {
        Self {
            seed,
            max_log_range: None,
            rate_limit: share,
            error: share,
            stall: (share, stall),
            truncate: share,
            reset: share,
            ..Self::default()
        }
    }

    /// Maps a uniform draw in [0, 1) to a fault, by the shares.
    fn pick(&self, roll: f64) -> Option<Fault> {
        let mut bound = 0.0;
        [
            (self.rate_limit, Fault::RateLimit),
            (self.error, Fault::Error),
            (self.stall.0, Fault::Stall),
            (self.truncate, Fault::Truncate),
            (self.reset, Fault::Reset),
        ]
        .into_iter()
        .find_map(|(share, fault)| {
            bound += share;
            (roll < bound).then_some(fault)
        })
    }
}

/// The seed the fault tests draw from: `PAYWATCH_FAULT_SEED` when set (to replay or vary a
/// run), otherwise a fixed one; printed so a failing run can be replayed.
pub fn fault_seed() -> u64 {
    let seed = std::env::var("PAYWATCH_FAULT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(402_402);
    eprintln!("fault seed: {seed} (set PAYWATCH_FAULT_SEED to change it)");
    seed
}

/// The random fault a request meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    RateLimit,
    Error,
    Stall,
    Truncate,
    Reset,
}

/// What the proxy did.
#[derive(Debug, Default)]
pub struct ProxyStats {
    /// Requests received.
    pub requests: AtomicU64,
    /// `eth_getLogs` ranges refused.
    pub refused_ranges: AtomicU64,
    /// 429s answered.
    pub rate_limited: AtomicU64,
    /// 502s answered.
    pub errors: AtomicU64,
    /// Requests stalled.
    pub stalled: AtomicU64,
    /// Answers cut off.
    pub truncated: AtomicU64,
    /// Connections dropped mid-answer.
    pub reset: AtomicU64,
    /// Logs served in `eth_getLogs` answers.
    pub logs_served: AtomicU64,
    /// Logs a lie left out of `eth_getLogs` answers (net of those made up).
    logs_left_out: AtomicU64,
    /// Requests being answered now.
    in_flight: AtomicU64,
    /// The most requests ever answered at once.
    pub most_in_flight: AtomicU64,
    /// JSON-RPC batches received (each counts once in `requests`, its calls in
    /// `calls_of`).
    pub batches: AtomicU64,
    /// Calls per JSON-RPC method, those inside batches included.
    methods: Mutex<std::collections::BTreeMap<String, u64>>,
    /// JSON-RPC batches per method they carried.
    batches_by_method: Mutex<std::collections::BTreeMap<String, u64>>,
}

impl ProxyStats {
    /// How many calls of JSON-RPC `method` the proxy received, alone or in batches.
    pub fn calls_of(&self, method: &str) -> u64 {
        self.methods
            .lock()
            .expect("proxy method counts")
            .get(method)
            .copied()
            .unwrap_or_default()
    }

    /// How many JSON-RPC batches carried calls of `method`.
    pub fn batches_of(&self, method: &str) -> u64 {
        self.batches_by_method
            .lock()
            .expect("proxy batch counts")
            .get(method)
            .copied()
            .unwrap_or_default()
    }

    /// Logs a lie left out of `eth_getLogs` answers so far (net of those made up).
    pub fn logs_left_out(&self) -> u64 {
        self.logs_left_out.load(Ordering::SeqCst)
    }

    /// The random faults that no request has met yet.
    pub fn faults_not_injected(&self) -> Vec<&'static str> {
        [
            ("429s", &self.rate_limited),
            ("502s", &self.errors),
            ("stalls", &self.stalled),
            ("truncated answers", &self.truncated),
            ("dropped connections", &self.reset),
        ]
        .into_iter()
        .filter(|(_, counter)| counter.load(Ordering::SeqCst) == 0)
        .map(|(what, _)| what)
        .collect()
    }
}

struct Shared {
    upstream: Mutex<String>,
    /// When the proxy first saw each head (for `mixed_lag`).
    heads_seen: Mutex<std::collections::BTreeMap<u64, std::time::Instant>>,
    faults: Mutex<Faults>,
    draws: Mutex<StdRng>,
    stats: Arc<ProxyStats>,
    client: reqwest::Client,
}

/// A running proxy; stops when dropped.
pub struct RpcProxy {
    /// The proxy's URL, to give to paywatch.
    pub url: String,
    /// Counters of injected faults.
    pub stats: Arc<ProxyStats>,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RpcProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RpcProxy {
    /// Calls `step` (which sends requests through the proxy) until every random fault has
    /// been injected at least once, so a run covers each whatever the seed; panics after
    /// two minutes.
    pub async fn drive_until_every_fault(&self, mut step: impl AsyncFnMut()) {
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while !self.stats.faults_not_injected().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "faults still not injected: {:?}",
                self.stats.faults_not_injected()
            );
            step().await;
        }
    }

    /// Forwards to `upstream` from the next request on: a provider that moves its
    /// endpoint to another node (or chain).
    pub fn set_upstream(&self, upstream: &str) {
        *self.shared.upstream.lock().expect("proxy upstream") = upstream.to_string();
    }

    /// Changes the faults from the next request on.
    pub fn set_faults(&self, faults: Faults) {
        *self.shared.faults.lock().expect("proxy faults") = faults;
    }

    /// Starts a proxy to `upstream` on a free loopback port.
    pub async fn start(upstream: &str, faults: Faults) -> Self {
        let stats = Arc::new(ProxyStats::default());
        let shared = Arc::new(Shared {
            upstream: Mutex::new(upstream.to_string()),
            heads_seen: Mutex::default(),
            draws: Mutex::new(StdRng::seed_from_u64(faults.seed)),
            faults: Mutex::new(faults),
            stats: stats.clone(),
            client: reqwest::Client::new(),
        });
        let app = Router::new().route("/", post(forward)).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy");
        let url = format!("http://{}", listener.local_addr().expect("proxy address"));
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("proxy server");
        });
        Self {
            url,
            stats,
            shared,
            task,
        }
    }
}

/// The blocks an `eth_getLogs` request asks for, when it names both by number.
fn log_blocks(request: &Value) -> Option<(u64, u64)> {
    if request.get("method")?.as_str()? != "eth_getLogs" {
        return None;
    }
    let filter = request.get("params")?.get(0)?;
    let block = |key: &str| quantity(filter.get(key)?);
    Some((block("fromBlock")?, block("toBlock")?))
}

fn log_range(request: &Value) -> Option<u64> {
    let (from, to) = log_blocks(request)?;
    Some(to.saturating_sub(from) + 1)
}

/// A JSON-RPC quantity (`0x…`) as a number.
fn quantity(value: &Value) -> Option<u64> {
    u64::from_str_radix(value.as_str()?.strip_prefix("0x")?, 16).ok()
}

/// The `result` of one JSON-RPC call of `method` with `params` to `upstream`.
async fn ask_upstream(shared: &Shared, upstream: &str, method: &str, params: Value) -> Option<Value> {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let answer: Value = shared
        .client
        .post(upstream)
        .json(&body)
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    answer.get("result").cloned()
}

/// How many blocks behind `upstream`'s head a node is that learns each block `lag` after
/// the proxy first saw it.
async fn lagging_by(shared: &Shared, upstream: &str, lag: Duration) -> u64 {
    let Some(head) = ask_upstream(shared, upstream, "eth_blockNumber", json!([]))
        .await
        .as_ref()
        .and_then(quantity)
    else {
        return 0;
    };
    let now = std::time::Instant::now();
    let mut seen = shared.heads_seen.lock().expect("heads seen");
    seen.entry(head).or_insert(now);
    let known = seen
        .iter()
        .rev()
        .find(|(_, first)| now.duration_since(**first) >= lag)
        .map_or(0, |(number, _)| *number);
    head.saturating_sub(known.min(head))
}

/// Answers `request` (not a batch) as a node `behind` blocks behind `upstream` would:
/// `None` to forward it as it is.
async fn behind_answer(shared: &Shared, upstream: &str, request: &Value, behind: u64) -> Option<Value> {
    let method = request.get("method")?.as_str()?;
    if !matches!(method, "eth_blockNumber" | "eth_getBlockByNumber") {
        return None;
    }
    let ask = |method: &'static str, params: Value| ask_upstream(shared, upstream, method, params);
    let head = quantity(&ask("eth_blockNumber", json!([])).await?)?.saturating_sub(behind);
    let result = match method {
        "eth_blockNumber" => json!(format!("{head:#x}")),
        _ => {
            let params = request.get("params")?;
            let full = params.get(1).cloned().unwrap_or(Value::Bool(false));
            let asked = params.get(0)?;
            match quantity(asked) {
                Some(number) if number > head => Value::Null,
                Some(_) => return None,
                None => {
                    let tagged = ask("eth_getBlockByNumber", json!([asked, full])).await?;
                    match tagged.get("number").and_then(quantity) {
                        Some(number) if number > head => {
                            ask("eth_getBlockByNumber", json!([format!("{head:#x}"), full])).await?
                        }
                        _ => tagged,
                    }
                }
            }
        }
    };
    Some(
        json!({ "jsonrpc": "2.0", "id": request.get("id").cloned().unwrap_or(Value::Null), "result": result }),
    )
}

/// Counts a request in flight while it lives.
struct InFlight<'a>(&'a ProxyStats);

impl<'a> InFlight<'a> {
    fn enter(stats: &'a ProxyStats) -> Self {
        let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        stats.most_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(stats)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn forward(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    shared.stats.requests.fetch_add(1, Ordering::SeqCst);
    let _in_flight = InFlight::enter(&shared.stats);
    let faults = shared.faults.lock().expect("proxy faults").clone();
    let upstream = shared.upstream.lock().expect("proxy upstream").clone();
    let behind_by = match shared.stats.requests.load(Ordering::SeqCst) % 2 {
        0 if !faults.mixed_lag.is_zero() => lagging_by(&shared, &upstream, faults.mixed_lag).await,
        _ => faults.behind_by,
    };
    if !faults.latency.is_zero() {
        tokio::time::sleep(faults.latency).await;
    }
    if let Ok(request) = serde_json::from_slice::<Value>(&body) {
        let batch = request.as_array();
        if batch.is_some() {
            shared.stats.batches.fetch_add(1, Ordering::SeqCst);
        }
        let mut methods = shared.stats.methods.lock().expect("proxy method counts");
        for call in batch.map_or(std::slice::from_ref(&request), Vec::as_slice) {
            if let Some(method) = call.get("method").and_then(Value::as_str) {
                *methods.entry(method.to_string()).or_default() += 1;
            }
        }
        drop(methods);
        if let Some(calls) = batch {
            let carried: std::collections::BTreeSet<&str> = calls
                .iter()
                .filter_map(|call| call.get("method").and_then(Value::as_str))
                .collect();
            let mut batches = shared.stats.batches_by_method.lock().expect("proxy batch counts");
            for method in carried {
                *batches.entry(method.to_string()).or_default() += 1;
            }
        }
        if batch.is_some() && faults.refuse_batches {
            let answer = json!({
                "jsonrpc": "2.0",
                "id": Value::Null,
                "error": { "code": -32600, "message": "batch requests are not supported" },
            });
            return axum::Json(answer).into_response();
        }
    }
    let roll = shared.draws.lock().expect("proxy draws").random::<f64>();
    let fault = faults.pick(roll);
    match fault {
        Some(Fault::Stall) => {
            shared.stats.stalled.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(faults.stall.1).await;
        }
        Some(Fault::RateLimit) => {
            shared.stats.rate_limited.fetch_add(1, Ordering::SeqCst);
            return (StatusCode::TOO_MANY_REQUESTS, "rate limited by the test proxy").into_response();
        }
        Some(Fault::Error) => {
            shared.stats.errors.fetch_add(1, Ordering::SeqCst);
            return (StatusCode::BAD_GATEWAY, "bad gateway from the test proxy").into_response();
        }
        _ => {}
    }
    if let Ok(request) = serde_json::from_slice::<Value>(&body)
        && let Some(method) = request.get("method").and_then(Value::as_str)
        && faults.unserved_methods.contains(&method)
    {
        let answer = json!({
            "jsonrpc": "2.0",
            "id": request.get("id").cloned().unwrap_or(Value::Null),
            "error": { "code": -32601, "message": format!("the method {method} does not exist/is not available") },
        });
        return axum::Json(answer).into_response();
    }
    if let Ok(request) = serde_json::from_slice::<Value>(&body)
        && let (Some(range), Some(max)) = (log_range(&request), faults.max_log_range)
        && range > max
    {
        shared.stats.refused_ranges.fetch_add(1, Ordering::SeqCst);
        let answer = json!({
            "jsonrpc": "2.0",
            "id": request.get("id").cloned().unwrap_or(Value::Null),
            "error": { "code": -32005, "message": format!("query exceeds max block range {max}") },
        });
        return axum::Json(answer).into_response();
    }
    if behind_by > 0
        && let Ok(request) = serde_json::from_slice::<Value>(&body)
        && let Some(answer) = behind_answer(&shared, &upstream, &request, behind_by).await
    {
        return axum::Json(answer).into_response();
    }
    let asked_blocks = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|request| log_blocks(&request));
    let method_is = |name: &str| {
        serde_json::from_slice::<Value>(&body)
            .is_ok_and(|request| request.get("method").and_then(Value::as_str) == Some(name))
    };
    let get_logs = method_is("eth_getLogs");
    let strip_timestamps = faults.strip_log_timestamps && get_logs;
    let lie = faults.log_lies.any() && get_logs;
    let lie_in_receipt = faults.log_lies.in_receipts_too && method_is("eth_getTransactionReceipt");
    match shared
        .client
        .post(&upstream)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
    {
        Ok(upstream) => {
            let status = StatusCode::from_u16(upstream.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let mut bytes = upstream.bytes().await.unwrap_or_default();
            if (strip_timestamps || lie)
                && let Ok(mut answer) = serde_json::from_slice::<Value>(&bytes)
            {
                if let Some(logs) = answer.get_mut("result").and_then(Value::as_array_mut) {
                    if strip_timestamps {
                        for log in logs.iter_mut().filter_map(Value::as_object_mut) {
                            log.remove("blockTimestamp");
                        }
                    }
                    if lie {
                        let before = logs.len();
                        faults.log_lies.apply(logs, asked_blocks);
                        let left_out = before.saturating_sub(logs.len());
                        shared
                            .stats
                            .logs_left_out
                            .fetch_add(left_out as u64, Ordering::SeqCst);
                    }
                }
                bytes = serde_json::to_vec(&answer).unwrap_or_default().into();
            }
            if lie_in_receipt && let Ok(mut answer) = serde_json::from_slice::<Value>(&bytes) {
                if let Some(logs) = answer
                    .get_mut("result")
                    .and_then(|receipt| receipt.get_mut("logs"))
                    .and_then(Value::as_array_mut)
                {
                    faults.log_lies.apply(logs, None);
                }
                bytes = serde_json::to_vec(&answer).unwrap_or_default().into();
            }
            if get_logs && let Ok(answer) = serde_json::from_slice::<Value>(&bytes) {
                let served = answer.get("result").and_then(Value::as_array).map_or(0, Vec::len);
                shared
                    .stats
                    .logs_served
                    .fetch_add(served as u64, Ordering::SeqCst);
            }
            let half = bytes.slice(..bytes.len() / 2);
            if fault == Some(Fault::Truncate) {
                shared.stats.truncated.fetch_add(1, Ordering::SeqCst);
                return (status, [("content-type", "application/json")], half).into_response();
            }
            if fault == Some(Fault::Reset) {
                shared.stats.reset.fetch_add(1, Ordering::SeqCst);
                let broken = futures::stream::iter([
                    Ok(half),
                    Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "the test proxy drops the connection",
                    )),
                ]);
                return (
                    status,
                    [("content-type", "application/json")],
                    axum::body::Body::from_stream(broken),
                )
                    .into_response();
            }
            (status, [("content-type", "application/json")], bytes).into_response()
        }
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_map_to_faults_by_their_shares() {
        let faults = Faults::all(7, 0.1, Duration::from_millis(1));
        assert_eq!(faults.pick(0.05), Some(Fault::RateLimit));
        assert_eq!(faults.pick(0.15), Some(Fault::Error));
        assert_eq!(faults.pick(0.25), Some(Fault::Stall));
        assert_eq!(faults.pick(0.35), Some(Fault::Truncate));
        assert_eq!(faults.pick(0.45), Some(Fault::Reset));
        assert_eq!(faults.pick(0.55), None);
        assert_eq!(Faults::default().pick(0.0), None);
    }
}
