//! The EVM JSON-RPC side: alloy providers behind the shared endpoint set (timeouts,
//! retries, failover and metrics: `paywatch-chain`), and how alloy's errors are classified.

use std::time::Duration;

use alloy::consensus::Transaction as _;
use alloy::eips::{BlockId, BlockNumberOrTag};
use alloy::network::TransactionBuilder;
use alloy::network::TransactionResponse as _;
use alloy::primitives::{Address, B256, Bytes};
use alloy::providers::ext::DebugApi as _;
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::pubsub::Subscription;
use alloy::rpc::types::trace::geth::{CallConfig, CallFrame, GethDebugTracingOptions};
use alloy::rpc::types::{Filter, Header, Log, TransactionReceipt, TransactionRequest};
use alloy::transports::{RpcError, TransportErrorKind};
use backon::ExponentialBuilder;
use paywatch_chain::{Endpoints, RpcFailure, truncate};
use url::Url;

/// Why an RPC call failed, as far as the worker cares.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcFault {
    /// The node refuses the block range (too many results, range limit, response too large).
    #[error("the node refused the block range: {0}")]
    RangeTooLarge(String),
    /// HTTP 429 or a JSON-RPC rate-limit error.
    #[error("rate limited: {0}")]
    RateLimited(String),
    /// No answer within the timeout.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The node does not know the block (it is behind, or the block was reorged away).
    #[error("block {0} is unknown to the node")]
    UnknownBlock(u64),
    /// The node does not serve the method (`debug_traceTransaction` on most providers).
    #[error("the node does not serve this method: {0}")]
    Unsupported(String),
    /// Anything else: connection refused or reset, 5xx, malformed JSON, node errors.
    #[error("{0}")]
    Transient(String),
}

impl RpcFailure for RpcFault {
    fn timed_out(after: Duration) -> Self {
        Self::Timeout(after)
    }

    fn label(&self) -> &'static str {
        match self {
            Self::RangeTooLarge(_) => "range_too_large",
            Self::RateLimited(_) => "rate_limited",
            Self::Timeout(_) => "timeout",
            Self::UnknownBlock(_) => "unknown_block",
            Self::Unsupported(_) => "unsupported",
            Self::Transient(_) => "transient",
        }
    }

    fn is_retryable(&self) -> bool {
        !matches!(
            self,
            Self::RangeTooLarge(_) | Self::UnknownBlock(_) | Self::Unsupported(_)
        )
    }

    fn is_rate_limit(&self) -> bool {
        matches!(self, Self::RateLimited(_))
    }
}

/// Phrases nodes and providers use when a log query spans too much.
const RANGE_PHRASES: &[&str] = &[
    "range",
    "too many",
    "limit exceeded",
    "exceed",
    "more than",
    "response size",
    "too large",
    "query returned",
];

/// Phrases nodes and providers use, beside the word "method", for a method they do not
/// serve.
const UNSUPPORTED_PHRASES: &[&str] = &[
    "not found",
    "does not exist",
    "not available",
    "not supported",
    "unsupported",
    "not whitelisted",
    "not allowed",
];

/// Classifies an alloy transport error.
pub fn classify(error: &RpcError<TransportErrorKind>) -> RpcFault {
    match error {
        RpcError::ErrorResp(payload) => {
            let message = payload.message.to_lowercase();
            if payload.code == 429 || message.contains("rate limit") || message.contains("too many requests")
            {
                RpcFault::RateLimited(payload.to_string())
            } else if payload.code == -32601
                || (message.contains("method") && UNSUPPORTED_PHRASES.iter().any(|p| message.contains(p)))
            {
                RpcFault::Unsupported(payload.to_string())
            } else if payload.code == -32005 || RANGE_PHRASES.iter().any(|p| message.contains(p)) {
                RpcFault::RangeTooLarge(payload.to_string())
            } else {
                RpcFault::Transient(payload.to_string())
            }
        }
        RpcError::Transport(TransportErrorKind::HttpError(http)) => match http.status {
            429 => RpcFault::RateLimited(format!("HTTP 429: {}", truncate(&http.body))),
            413 => RpcFault::RangeTooLarge(format!("HTTP 413: {}", truncate(&http.body))),
            status => RpcFault::Transient(format!("HTTP {status}: {}", truncate(&http.body))),
        },
        other => RpcFault::Transient(truncate(&other.to_string())),
    }
}

/// A block header, as far as paywatch reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// Number.
    pub number: u64,
    /// Hash.
    pub hash: B256,
    /// Parent hash.
    pub parent_hash: B256,
    /// Timestamp, Unix seconds.
    pub timestamp: u64,
}

impl From<&Header> for BlockHeader {
    fn from(h: &Header) -> Self {
        Self {
            number: h.number,
            hash: h.hash,
            parent_hash: h.parent_hash,
            timestamp: h.timestamp,
        }
    }
}

/// What a mined transaction called: its hash, sender, recipient and input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionCall {
    /// Transaction hash.
    pub hash: B256,
    /// The sender (the facilitator that submitted a settlement).
    pub from: Address,
    /// The called contract; `None` for a contract creation.
    pub to: Option<Address>,
    /// The call's input.
    pub input: Bytes,
}

impl TransactionCall {
    fn of(tx: &alloy::rpc::types::Transaction) -> Self {
        use alloy::network::TransactionResponse;
        Self {
            hash: tx.tx_hash(),
            from: tx.from(),
            to: tx.inner.to(),
            input: tx.inner.input().clone(),
        }
    }
}

/// The RPC endpoints of one network.
pub struct EvmRpc {
    endpoints: Endpoints<DynProvider>,
}

impl EvmRpc {
    /// Connects to every URL (HTTP or WebSocket). Fails only if none connects.
    pub async fn connect(network: &str, urls: &[Url], timeout: Duration) -> Result<Self, RpcFault> {
        let mut endpoints = Vec::new();
        let mut last_error = None;
        for url in urls {
            match tokio::time::timeout(timeout, ProviderBuilder::new().connect(url.as_str())).await {
                Ok(Ok(provider)) => endpoints.push((url.clone(), provider.erased())),
                Ok(Err(e)) => last_error = Some(classify(&e)),
                Err(_) => last_error = Some(RpcFault::Timeout(timeout)),
            }
        }
        match Endpoints::new(network, endpoints, timeout) {
            Some(endpoints) => Ok(Self { endpoints }),
            None => Err(last_error.unwrap_or_else(|| RpcFault::Transient("no RPC URL".to_string()))),
        }
    }

    /// Replaces the retry policy (tests and benchmarks use a faster one).
    pub fn with_backoff(mut self, backoff: ExponentialBuilder) -> Self {
        self.endpoints = self.endpoints.with_backoff(backoff);
        self
    }

    /// `eth_chainId`.
    pub async fn chain_id(&self) -> Result<u64, RpcFault> {
        self.endpoints
            .call("eth_chainId", |p| async move {
                p.get_chain_id().await.map_err(|e| classify(&e))
            })
            .await
    }

    /// `eth_blockNumber`.
    pub async fn block_number(&self) -> Result<u64, RpcFault> {
        self.endpoints
            .call("eth_blockNumber", |p| async move {
                p.get_block_number().await.map_err(|e| classify(&e))
            })
            .await
    }

    /// The header of a block by number or tag; `UnknownBlock` when the node has none.
    pub async fn header(&self, block: BlockNumberOrTag) -> Result<BlockHeader, RpcFault> {
        self.endpoints
            .call("eth_getBlockByNumber", |p| async move {
                match p.get_block_by_number(block).await.map_err(|e| classify(&e))? {
                    Some(b) => Ok(BlockHeader::from(&b.header)),
                    None => Err(RpcFault::UnknownBlock(block.as_number().unwrap_or_default())),
                }
            })
            .await
    }

    /// `eth_getLogs` for `topics` of `tokens` over `from..=to`.
    pub async fn logs(
        &self,
        tokens: &[Address],
        topics: &[B256],
        from: u64,
        to: u64,
    ) -> Result<Vec<Log>, RpcFault> {
        let filter = Filter::new()
            .address(tokens.to_vec())
            .event_signature(topics.to_vec())
            .from_block(from)
            .to_block(to);
        self.get_logs(filter).await
    }

    /// `eth_getLogs` for `topic` of `tokens` over `from..=to` whose first indexed argument
    /// (a transfer's sender) is one of `senders` and second (its recipient) one of
    /// `recipients`, each when given.
    pub async fn logs_between(
        &self,
        tokens: &[Address],
        topic: B256,
        senders: Option<&[Address]>,
        recipients: Option<&[Address]>,
        from: u64,
        to: u64,
    ) -> Result<Vec<Log>, RpcFault> {
        let words = |wallets: &[Address]| wallets.iter().map(|a| a.into_word()).collect::<Vec<B256>>();
        let mut filter = Filter::new()
            .address(tokens.to_vec())
            .event_signature(topic)
            .from_block(from)
            .to_block(to);
        if let Some(senders) = senders {
            filter = filter.topic1(words(senders));
        }
        if let Some(recipients) = recipients {
            filter = filter.topic2(words(recipients));
        }
        self.get_logs(filter).await
    }

    /// `eth_getLogs` for `topics` (any of them) of any contract over `from..=to`.
    pub async fn logs_of_any_contract(
        &self,
        topics: &[B256],
        from: u64,
        to: u64,
    ) -> Result<Vec<Log>, RpcFault> {
        let filter = Filter::new()
            .event_signature(topics.to_vec())
            .from_block(from)
            .to_block(to);
        self.get_logs(filter).await
    }

    /// `eth_getLogs` of `filter`.
    async fn get_logs(&self, filter: Filter) -> Result<Vec<Log>, RpcFault> {
        self.endpoints
            .call("eth_getLogs", |p| {
                let filter = filter.clone();
                async move { p.get_logs(&filter).await.map_err(|e| classify(&e)) }
            })
            .await
    }

    /// The receipt of transaction `hash` (`eth_getTransactionReceipt`), with its block's
    /// hash and its logs as `eth_getLogs` answers them; `None` when the node does not know it.
    pub async fn transaction_receipt(&self, hash: B256) -> Result<Option<TransactionReceipt>, RpcFault> {
        self.endpoints
            .call("eth_getTransactionReceipt", |p| async move {
                p.get_transaction_receipt(hash).await.map_err(|e| classify(&e))
            })
            .await
    }

    /// The receipts of block `hash` in block order (`eth_getBlockReceipts`); `None` when
    /// the node does not know the block.
    pub async fn block_receipts(&self, hash: B256) -> Result<Option<Vec<TransactionReceipt>>, RpcFault> {
        self.endpoints
            .call("eth_getBlockReceipts", |p| async move {
                p.get_block_receipts(BlockId::hash(hash))
                    .await
                    .map_err(|e| classify(&e))
            })
            .await
    }

    /// The full header of `block` (by number or hash); `None` when the node does not know
    /// it.
    pub async fn full_header(&self, block: BlockId) -> Result<Option<alloy::consensus::Header>, RpcFault> {
        let method = match block {
            BlockId::Hash(_) => "eth_getBlockByHash",
            BlockId::Number(_) => "eth_getBlockByNumber",
        };
        self.endpoints
            .call(method, |p| async move {
                let found = p.get_block(block).await.map_err(|e| classify(&e))?;
                Ok(found.map(|b| b.header.inner))
            })
            .await
    }

    /// The transactions of block `hash` in block order, each with its hash and
    /// EIP-2718-encoded (as the transactions trie holds them); `None` when the node does not
    /// know the block.
    pub async fn block_transactions(&self, hash: B256) -> Result<Option<Vec<(B256, Vec<u8>)>>, RpcFault> {
        use alloy::eips::eip2718::Encodable2718;
        self.endpoints
            .call("eth_getBlockByHash", |p| async move {
                let block = p.get_block_by_hash(hash).full().await.map_err(|e| classify(&e))?;
                Ok(block.map(|b| {
                    b.transactions
                        .into_transactions()
                        .map(|tx| (tx.tx_hash(), tx.inner.inner().encoded_2718()))
                        .collect()
                }))
            })
            .await
    }

    /// The active endpoint's URL without credentials, path or query, for logs.
    pub fn endpoint(&self) -> String {
        paywatch_chain::redact(self.endpoints.active().0)
    }

    /// The sender, recipient and input of mined transaction `hash`
    /// (`eth_getTransactionByHash`); `None` when the node does not know it.
    pub async fn transaction_call(&self, hash: B256) -> Result<Option<TransactionCall>, RpcFault> {
        self.endpoints
            .call("eth_getTransactionByHash", |p| async move {
                let found = p.get_transaction_by_hash(hash).await.map_err(|e| classify(&e))?;
                Ok(found.map(|tx| TransactionCall::of(&tx)))
            })
            .await
    }

    /// The hash of block `number` and the hash, sender, recipient and input of each of its
    /// transactions (`eth_getBlockByNumber` with full transactions); `UnknownBlock` when
    /// the node has no such block.
    pub async fn block_calls(&self, number: u64) -> Result<(B256, Vec<TransactionCall>), RpcFault> {
        self.endpoints
            .call("eth_getBlockByNumber", |p| async move {
                let block = p
                    .get_block_by_number(BlockNumberOrTag::Number(number))
                    .full()
                    .await
                    .map_err(|e| classify(&e))?
                    .ok_or(RpcFault::UnknownBlock(number))?;
                let calls = block.transactions.txns().map(TransactionCall::of).collect();
                Ok((block.header.hash, calls))
            })
            .await
    }

    /// The call tree of a mined transaction (`debug_traceTransaction` with the
    /// `callTracer`); `Unsupported` where the node serves no traces.
    pub async fn call_trace(&self, hash: B256) -> Result<CallFrame, RpcFault> {
        let options = GethDebugTracingOptions::call_tracer(CallConfig::default());
        self.endpoints
            .call("debug_traceTransaction", |p| {
                let options = options.clone();
                async move {
                    p.debug_trace_transaction_as::<CallFrame>(hash, options)
                        .await
                        .map_err(|e| classify(&e))
                }
            })
            .await
    }

    /// Whether `address` holds code at the latest block (`eth_getCode`).
    pub async fn has_code(&self, address: Address) -> Result<bool, RpcFault> {
        self.endpoints
            .call("eth_getCode", |p| async move {
                p.get_code_at(address)
                    .await
                    .map(|code| !code.is_empty())
                    .map_err(|e| classify(&e))
            })
            .await
    }

    /// Runs `creation_code` as a contract creation with `eth_call` at the latest block
    /// (nothing is sent) and returns what its constructor returns; `None` if it reverts.
    pub async fn simulate_creation(&self, creation_code: Bytes) -> Result<Option<Bytes>, RpcFault> {
        let request = TransactionRequest::default().with_deploy_code(creation_code);
        self.eth_call(request, BlockNumberOrTag::Latest).await
    }

    /// `eth_call` of `data` on `to` at `block` (nothing is sent); `None` if it reverts.
    pub async fn call_at(
        &self,
        to: Address,
        data: Bytes,
        block: BlockNumberOrTag,
    ) -> Result<Option<Bytes>, RpcFault> {
        let request = TransactionRequest::default().to(to).input(data.into());
        self.eth_call(request, block).await
    }

    /// `eth_call` of `request` at `block`: its return data, or `None` if it reverts.
    async fn eth_call(
        &self,
        request: TransactionRequest,
        block: BlockNumberOrTag,
    ) -> Result<Option<Bytes>, RpcFault> {
        self.endpoints
            .call("eth_call", |p| {
                let request = request.clone();
                async move {
                    match p.call(request).block(block.into()).await {
                        Ok(answer) => Ok(Some(answer)),
                        Err(RpcError::ErrorResp(payload))
                            if payload.code == 3 || payload.message.to_lowercase().contains("revert") =>
                        {
                            Ok(None)
                        }
                        Err(e) => Err(classify(&e)),
                    }
                }
            })
            .await
    }

    /// A new-heads subscription when the active endpoint is a WebSocket, to wake the worker
    /// as soon as a block arrives instead of at the next poll.
    pub async fn subscribe_heads(&self) -> Option<Subscription<Header>> {
        let (url, provider) = self.endpoints.active();
        if !matches!(url.scheme(), "ws" | "wss") {
            return None;
        }
        match provider.subscribe_blocks().await {
            Ok(subscription) => Some(subscription),
            Err(e) => {
                tracing::warn!(network = %self.endpoints.network(), error = %e, "newHeads subscription failed; polling instead");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::rpc::json_rpc::ErrorPayload;
    use alloy::transports::HttpError;

    fn error_resp(code: i64, message: &str) -> RpcError<TransportErrorKind> {
        RpcError::ErrorResp(ErrorPayload {
            code,
            message: message.to_string().into(),
            data: None,
        })
    }

    #[test]
    fn classifies_range_errors_of_common_providers() {
        for (code, message) in [
            (-32005, "query returned more than 10000 results"),
            (-32602, "eth_getLogs is limited to a 10,000 range"),
            (-32000, "block range too large"),
            (
                -32000,
                "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range",
            ),
        ] {
            assert!(
                matches!(classify(&error_resp(code, message)), RpcFault::RangeTooLarge(_)),
                "{message}"
            );
        }
    }

    #[test]
    fn classifies_rate_limits_and_transients() {
        let http = |status: u16| {
            RpcError::Transport(TransportErrorKind::HttpError(HttpError {
                status,
                body: "slow down".to_string(),
            }))
        };
        assert!(matches!(classify(&http(429)), RpcFault::RateLimited(_)));
        assert!(matches!(classify(&http(413)), RpcFault::RangeTooLarge(_)));
        assert!(matches!(classify(&http(502)), RpcFault::Transient(_)));
        assert!(matches!(
            classify(&error_resp(-32016, "rate limit reached")),
            RpcFault::RateLimited(_)
        ));
        assert!(matches!(
            classify(&error_resp(-32000, "header not found")),
            RpcFault::Transient(_)
        ));
        for (code, message) in [
            (-32601, "Method not found"),
            (
                -32000,
                "the method debug_traceTransaction does not exist/is not available",
            ),
            (-32000, "Unsupported method: debug_traceTransaction"),
        ] {
            let fault = classify(&error_resp(code, message));
            assert!(matches!(fault, RpcFault::Unsupported(_)), "{message}");
            assert!(!fault.is_retryable());
        }
        assert!(matches!(
            classify(&error_resp(-32000, "transaction does not exist")),
            RpcFault::Transient(_)
        ));
        assert!(RpcFault::Timeout(Duration::from_secs(1)).is_retryable());
        assert!(!RpcFault::RangeTooLarge(String::new()).is_retryable());
    }
}
