//! A JSON-RPC proxy in front of a real node that injects faults: refused `eth_getLogs`
//! ranges (as providers do), HTTP 429 rate limits, HTTP 502 errors, stalls longer than
//! the client's timeout, answers cut off mid-JSON, and connections dropped mid-answer.
//! Everything else is forwarded untouched. Faults fall on fixed request counts, so a
//! run is repeatable.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// Which faults to inject. Counters are over all requests, so runs are repeatable.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Refuse `eth_getLogs` spanning more blocks than this (JSON-RPC error -32005).
    pub max_log_range: Option<u64>,
    /// Answer every Nth request with HTTP 429.
    pub rate_limit_every: Option<u64>,
    /// Answer every Nth request with HTTP 502.
    pub error_every: Option<u64>,
    /// Hold every Nth request this long before answering.
    pub stall_every: Option<(u64, Duration)>,
    /// Answer every Nth request with the first half of the node's answer (HTTP 200).
    pub truncate_every: Option<u64>,
    /// Drop the connection halfway through every Nth answer.
    pub reset_every: Option<u64>,
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
}

struct Shared {
    upstream: String,
    faults: Faults,
    stats: Arc<ProxyStats>,
    client: reqwest::Client,
}

/// A running proxy; stops when dropped.
pub struct RpcProxy {
    /// The proxy's URL, to give to paywatch.
    pub url: String,
    /// Counters of injected faults.
    pub stats: Arc<ProxyStats>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RpcProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RpcProxy {
    /// Starts a proxy to `upstream` on a free loopback port.
    pub async fn start(upstream: &str, faults: Faults) -> RpcProxy {
        let stats = Arc::new(ProxyStats::default());
        let shared = Arc::new(Shared {
            upstream: upstream.to_string(),
            faults,
            stats: stats.clone(),
            client: reqwest::Client::new(),
        });
        let app = Router::new().route("/", post(forward)).with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy");
        let url = format!("http://{}", listener.local_addr().expect("proxy address"));
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("proxy server");
        });
        RpcProxy { url, stats, task }
    }
}

fn every(n: Option<u64>, count: u64) -> bool {
    n.is_some_and(|n| n > 0 && count.is_multiple_of(n))
}

fn log_range(request: &Value) -> Option<u64> {
    if request.get("method")?.as_str()? != "eth_getLogs" {
        return None;
    }
    let filter = request.get("params")?.get(0)?;
    let block = |key: &str| u64::from_str_radix(filter.get(key)?.as_str()?.trim_start_matches("0x"), 16).ok();
    Some(block("toBlock")?.saturating_sub(block("fromBlock")?) + 1)
}

async fn forward(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let count = shared.stats.requests.fetch_add(1, Ordering::SeqCst) + 1;
    let faults = &shared.faults;
    if let Some((n, pause)) = faults.stall_every
        && every(Some(n), count)
    {
        shared.stats.stalled.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(pause).await;
    }
    if every(faults.rate_limit_every, count) {
        shared.stats.rate_limited.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::TOO_MANY_REQUESTS, "rate limited by the test proxy").into_response();
    }
    if every(faults.error_every, count) {
        shared.stats.errors.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::BAD_GATEWAY, "bad gateway from the test proxy").into_response();
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
    match shared
        .client
        .post(&shared.upstream)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
    {
        Ok(upstream) => {
            let status = StatusCode::from_u16(upstream.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let bytes = upstream.bytes().await.unwrap_or_default();
            let half = bytes.slice(..bytes.len() / 2);
            if every(faults.truncate_every, count) {
                shared.stats.truncated.fetch_add(1, Ordering::SeqCst);
                return (status, [("content-type", "application/json")], half).into_response();
            }
            if every(faults.reset_every, count) {
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
