//! The HTTP JSON-RPC transport of the EVM worker: alloy's reqwest transport, except that an
//! `eth_getLogs` answer is read only up to a limit. A larger one — a range whose blocks hold
//! far more logs than the density rule expected — is refused as an HTTP 413 would be (the
//! node's own "response too large"), so the worker reads the range in halves: one answer
//! never holds more than the limit in memory, whatever the chain's density.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task;

use alloy::rpc::json_rpc::{RequestPacket, ResponsePacket};
use alloy::transports::http::reqwest;
use alloy::transports::{TransportError, TransportErrorKind, TransportFut, TransportResult};
use url::Url;

/// The body paywatch gives a refused answer (HTTP 413, which the worker reads as a range
/// too large).
pub const OVER_LIMIT: &str = "paywatch read no further: the eth_getLogs answer exceeds max_logs_answer_kib (raise it in chains.toml if one block holds more)";

/// One HTTP endpoint, with the largest `eth_getLogs` answer it reads (shared, so that the
/// configuration can set it once the provider is built).
#[derive(Clone)]
pub struct LimitedHttp {
    client: reqwest::Client,
    url: Url,
    max_logs_answer: Arc<AtomicUsize>,
}

impl LimitedHttp {
    /// The transport for `url`, reading `eth_getLogs` answers up to `max_logs_answer` bytes.
    pub fn new(url: Url, max_logs_answer: Arc<AtomicUsize>) -> Self {
        Self {
            client: reqwest::Client::new(),
            url,
            max_logs_answer,
        }
    }

    async fn send(self, request: RequestPacket) -> TransportResult<ResponsePacket> {
        let limit = match request.method_names().any(|method| method == "eth_getLogs") {
            true => self.max_logs_answer.load(Ordering::Relaxed),
            false => usize::MAX,
        };
        let mut answer = self
            .client
            .post(self.url)
            .json(&request)
            .headers(request.headers())
            .send()
            .await
            .map_err(TransportErrorKind::custom)?;
        let status = answer.status();
        let mut body = Vec::new();
        while let Some(chunk) = answer.chunk().await.map_err(TransportErrorKind::custom)? {
            if body.len().saturating_add(chunk.len()) > limit {
                return Err(TransportErrorKind::http_error(413, OVER_LIMIT.to_string()));
            }
            body.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            return Err(TransportErrorKind::http_error(
                status.as_u16(),
                String::from_utf8_lossy(&body).into_owned(),
            ));
        }
        serde_json::from_slice(&body)
            .map_err(|error| TransportError::deser_err(error, String::from_utf8_lossy(&body)))
    }
}

impl tower_service::Service<RequestPacket> for LimitedHttp {
    type Response = ResponsePacket;
    type Error = TransportError;
    type Future = TransportFut<'static>;

    fn poll_ready(&mut self, _: &mut task::Context<'_>) -> task::Poll<Result<(), Self::Error>> {
        task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: RequestPacket) -> Self::Future {
        Box::pin(self.clone().send(request))
    }
}
