//! The EVM JSON-RPC side: alloy providers behind the shared endpoint set (timeouts,
//! retries, failover and metrics: `paywatch-chain`), and how alloy's errors are classified.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use alloy::eips::eip2718::Encodable2718 as _;
use alloy::eips::{BlockId, BlockNumberOrTag};
use alloy::network::TransactionBuilder;
use alloy::network::TransactionResponse as _;
use alloy::primitives::{Address, B256, Bytes};
use alloy::providers::ext::DebugApi as _;
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::pubsub::Subscription;
use alloy::rpc::client::{BatchRequest, ClientBuilder};
use alloy::rpc::json_rpc::{RpcRecv, RpcSend};
use alloy::rpc::types::trace::geth::{CallConfig, CallFrame, GethDebugTracingOptions};
use alloy::rpc::types::{Filter, Header, Log, TransactionReceipt, TransactionRequest};
use alloy::transports::utils::guess_local_url;
use alloy::transports::{RpcError, TransportErrorKind};
use backon::ExponentialBuilder;
use futures::{StreamExt as _, TryStreamExt as _};
use op_alloy_consensus::{OpReceiptEnvelope, TxDeposit};
use paywatch_chain::{Endpoints, Identity, IdentityCheck, RpcFailure, truncate};
use paywatch_core::config::{MAX_LOGS_ANSWER_KIB, NetworkConfig};
use url::Url;

use crate::transport::LimitedHttp;

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
    /// The node's head is below the head already recorded, and the blocks it has agree
    /// with the stored ones: it is syncing or lagging, and is not read until it catches up.
    #[error(
        "the node's head {head} is behind the head already recorded ({recorded}): it is syncing or lagging; not read until it catches up"
    )]
    Behind {
        /// The head it answered.
        head: u64,
        /// The head recorded before.
        recorded: u64,
    },
    /// No endpoint may be read: the active one serves another chain or could not say
    /// which it serves (the next one may).
    #[error("{0}")]
    Unusable(String),
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
            Self::Behind { .. } => "behind",
            Self::Unusable(_) => "unusable_endpoint",
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

    fn unusable(detail: String) -> Self {
        Self::Unusable(detail)
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

/// What a mined transaction called: its hash, block, sender, recipient and input, as
/// `eth_getTransactionByHash` answers them. Only these fields are decoded, so every
/// transaction type reads the same (an OP-stack deposit, type `0x7e`, included).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TransactionCall {
    /// Transaction hash.
    pub hash: B256,
    /// The block that holds it; `None` while it is pending.
    pub block_hash: Option<B256>,
    /// The sender (the facilitator that submitted a settlement).
    pub from: Address,
    /// The called contract; `None` for a contract creation.
    pub to: Option<Address>,
    /// The call's input.
    pub input: Bytes,
}

/// A transaction's receipt as nodes answer `eth_getBlockReceipts` and
/// `eth_getTransactionReceipt`, of every type the blocks of the networks paywatch ships
/// hold: Ethereum's (legacy to EIP-7702, blob transactions included) and an OP-stack
/// chain's (Base, Optimism: every block opens with a deposit, type `0x7e`, whose receipt
/// also carries its deposit nonce).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(untagged)]
pub enum BlockReceipt {
    /// One of Ethereum's receipt types.
    Ethereum(TransactionReceipt),
    /// One of an OP-stack chain's, deposits included.
    OpStack(TransactionReceipt<OpReceiptEnvelope<Log>>),
}

impl BlockReceipt {
    /// Its transaction's hash.
    pub fn transaction_hash(&self) -> B256 {
        match self {
            Self::Ethereum(r) => r.transaction_hash,
            Self::OpStack(r) => r.transaction_hash,
        }
    }

    /// The block that holds it.
    pub fn block_hash(&self) -> Option<B256> {
        match self {
            Self::Ethereum(r) => r.block_hash,
            Self::OpStack(r) => r.block_hash,
        }
    }

    /// Its logs, as `eth_getLogs` answers them.
    pub fn logs(&self) -> &[Log] {
        match self {
            Self::Ethereum(r) => r.inner.logs(),
            Self::OpStack(r) => r.inner.logs(),
        }
    }

    /// Its EIP-2718 encoding, as the block's receipts trie holds it.
    pub fn encoded_2718(&self) -> Vec<u8> {
        match self {
            Self::Ethereum(r) => r.inner.clone().into_primitives_receipt().encoded_2718(),
            Self::OpStack(r) => r.inner.clone().map_logs(|log| log.inner).encoded_2718(),
        }
    }
}

/// A block's transaction as `eth_getBlockByHash` answers it with full transactions: one
/// of Ethereum's types, or an OP-stack deposit (`0x7e`).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(untagged)]
enum BlockTransaction {
    /// One of Ethereum's transaction types.
    Ethereum(Box<alloy::rpc::types::Transaction>),
    /// An OP-stack deposit, with the hash the node gives it.
    Deposit {
        hash: B256,
        #[serde(flatten)]
        deposit: TxDeposit,
    },
}

impl BlockTransaction {
    /// Its hash and EIP-2718 encoding (as the block's transactions trie holds it).
    fn encoded(self) -> (B256, Vec<u8>) {
        match self {
            Self::Ethereum(tx) => (tx.tx_hash(), tx.inner.inner().encoded_2718()),
            Self::Deposit { hash, deposit } => (hash, deposit.encoded_2718()),
        }
    }
}

/// A block with its full transactions, as far as paywatch reads it.
#[derive(Debug, serde::Deserialize)]
struct BlockWithTransactions {
    transactions: Vec<BlockTransaction>,
}

/// Transactions asked for in one JSON-RPC batch. Providers cap batches (at 100 or 1,000
/// calls, commonly); 50 stays below every cap we know of.
pub const TRANSACTIONS_PER_BATCH: usize = 50;

/// Single calls in flight for one batch's worth, on a node that refuses batches.
const CALLS_IN_FLIGHT_WITHOUT_BATCHES: usize = 8;

/// The RPC endpoints of one network.
pub struct EvmRpc {
    endpoints: Endpoints<DynProvider>,
    /// Set once a node answered a JSON-RPC batch without its calls' answers (it serves no
    /// batches): transactions are then read one call each.
    batches_refused: AtomicBool,
    /// The largest `eth_getLogs` answer read over HTTP, in bytes, shared with every
    /// endpoint's transport.
    max_logs_answer: Arc<AtomicUsize>,
}

impl EvmRpc {
    /// Connects to every URL (HTTP or WebSocket). Fails only if none connects. Over HTTP,
    /// `eth_getLogs` answers are read up to [`MAX_LOGS_ANSWER_KIB`] unless
    /// [`Self::limit_logs_answers`] says otherwise.
    pub async fn connect(network: &str, urls: &[Url], timeout: Duration) -> Result<Self, RpcFault> {
        let max_logs_answer = Arc::new(AtomicUsize::new(MAX_LOGS_ANSWER_KIB * 1024));
        let mut endpoints = Vec::new();
        let mut last_error = None;
        for url in urls {
            if matches!(url.scheme(), "http" | "https") {
                let transport = LimitedHttp::new(url.clone(), Arc::clone(&max_logs_answer));
                let client = ClientBuilder::default().transport(transport, guess_local_url(url.as_str()));
                endpoints.push((
                    url.clone(),
                    ProviderBuilder::new().connect_client(client).erased(),
                ));
                continue;
            }
            match tokio::time::timeout(timeout, ProviderBuilder::new().connect(url.as_str())).await {
                Ok(Ok(provider)) => endpoints.push((url.clone(), provider.erased())),
                Ok(Err(e)) => last_error = Some(classify(&e)),
                Err(_) => last_error = Some(RpcFault::Timeout(timeout)),
            }
        }
        match Endpoints::new(network, endpoints, timeout) {
            Some(endpoints) => Ok(Self {
                endpoints,
                batches_refused: AtomicBool::new(false),
                max_logs_answer,
            }),
            None => Err(last_error.unwrap_or_else(|| RpcFault::Transient("no RPC URL".to_string()))),
        }
    }

    /// Connects to `urls` of `network` (its `rpc_urls` or `verify_rpc_urls`) as its
    /// configuration says: `eth_getLogs` answers read up to `max_logs_answer_kib`, and no
    /// endpoint read before it answered `eth_chainId` with the network's chain id (at its
    /// first use, and again after each failure that moved the set on from it).
    pub async fn connect_network(network: &NetworkConfig, urls: &[Url]) -> Result<Self, RpcFault> {
        // (Boxed: connecting a WebSocket nests deep futures, and the API's futures nest
        // this one past the compiler's depth limit.)
        let rpc = Box::pin(Self::connect(&network.id.to_string(), urls, network.rpc_timeout))
            .await?
            .limit_logs_answers(network.max_logs_answer_kib);
        Ok(match network.id.evm_chain_id() {
            Some(chain_id) => rpc.expecting_chain(chain_id),
            None => rpc,
        })
    }

    /// Reads no endpoint before it answered `eth_chainId` with `expected`.
    pub fn expecting_chain(mut self, expected: u64) -> Self {
        let check: IdentityCheck<DynProvider> = Arc::new(move |provider: DynProvider| {
            Box::pin(async move {
                match provider.get_chain_id().await {
                    Ok(actual) if actual == expected => Ok(Identity::Expected),
                    Ok(actual) => Ok(Identity::Other(format!("chain id {actual}, not {expected}"))),
                    Err(e) => Err(classify(&e).to_string()),
                }
            })
        });
        self.endpoints = self.endpoints.with_identity(check);
        self
    }

    /// The check at start ([`Endpoints::refused_at_start`]): `Ok(None)` when an endpoint
    /// serves the network's chain, `Ok(Some(…))` when every one serves another (each with
    /// what it serves), `Err` when none serves it and one could not tell.
    pub async fn refused_at_start(&self) -> Result<Option<String>, String> {
        self.endpoints.refused_at_start().await
    }

    /// The endpoints dropped from rotation because they serve another chain, each as
    /// `scheme://host:port: serves chain id A, not B`.
    pub fn refused_endpoints(&self) -> Vec<String> {
        self.endpoints.refused()
    }

    /// The header of block `number` as every endpoint but the active one (and those
    /// refused) answers it, once each, by endpoint: a second opinion on the active one's.
    pub async fn header_from_the_others(&self, number: u64) -> Vec<(String, Result<BlockHeader, RpcFault>)> {
        self.endpoints
            .ask_the_others("eth_getBlockByNumber", |p| async move {
                match p
                    .get_block_by_number(BlockNumberOrTag::Number(number))
                    .await
                    .map_err(|e| classify(&e))?
                {
                    Some(block) => Ok(BlockHeader::from(&block.header)),
                    None => Err(RpcFault::UnknownBlock(number)),
                }
            })
            .await
    }

    /// Asks the active endpoint which chain it serves again now (see
    /// [`Endpoints::recheck_active`]).
    pub async fn recheck_active(&self) -> Result<(), RpcFault> {
        self.endpoints.recheck_active().await.map_err(RpcFault::Unusable)
    }

    /// Moves on from the active endpoint (`why` is logged): its answers are not to be
    /// taken now.
    pub fn fail_over(&self, why: &str) {
        self.endpoints.fail_over(why);
    }

    /// Reads `eth_getLogs` answers over HTTP up to `kib` KiB (`max_logs_answer_kib`): a
    /// larger one is refused as too large ([`RpcFault::RangeTooLarge`]), and the worker
    /// reads its range in halves. (A WebSocket endpoint reads whole answers.)
    pub fn limit_logs_answers(self, kib: usize) -> Self {
        self.max_logs_answer
            .store(kib.saturating_mul(1024), Ordering::Relaxed);
        self
    }

    /// Replaces the retry policy (tests and benchmarks use a faster one).
    pub fn with_backoff(mut self, backoff: ExponentialBuilder) -> Self {
        self.endpoints = self.endpoints.with_backoff(backoff);
        self
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
    pub async fn transaction_receipt(&self, hash: B256) -> Result<Option<BlockReceipt>, RpcFault> {
        self.endpoints
            .call("eth_getTransactionReceipt", |p| async move {
                p.raw_request("eth_getTransactionReceipt".into(), (hash,))
                    .await
                    .map_err(|e| classify(&e))
            })
            .await
    }

    /// The receipts of block `hash` in block order (`eth_getBlockReceipts`); `None` when
    /// the node does not know the block.
    pub async fn block_receipts(&self, hash: B256) -> Result<Option<Vec<BlockReceipt>>, RpcFault> {
        self.endpoints
            .call("eth_getBlockReceipts", |p| async move {
                p.raw_request("eth_getBlockReceipts".into(), (BlockId::hash(hash),))
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
        self.endpoints
            .call("eth_getBlockByHash", |p| async move {
                let block: Option<BlockWithTransactions> = p
                    .raw_request("eth_getBlockByHash".into(), (hash, true))
                    .await
                    .map_err(|e| classify(&e))?;
                Ok(block.map(|b| {
                    b.transactions
                        .into_iter()
                        .map(BlockTransaction::encoded)
                        .collect()
                }))
            })
            .await
    }

    /// The active endpoint's URL without credentials, path or query, for logs.
    pub fn endpoint(&self) -> String {
        paywatch_chain::redact(self.endpoints.active().0)
    }

    /// The calls of transactions `hashes` (at most [`TRANSACTIONS_PER_BATCH`]), in their
    /// order, each `None` when the node does not know it: one JSON-RPC batch of
    /// `eth_getTransactionByHash`, so a range's payments cost a round trip per fifty
    /// transactions and no block body.
    pub async fn transaction_calls(&self, hashes: &[B256]) -> Result<Vec<Option<TransactionCall>>, RpcFault> {
        let params: Vec<(B256,)> = hashes.iter().map(|hash| (*hash,)).collect();
        self.batched("eth_getTransactionByHash", &params).await
    }

    /// The headers of blocks `numbers` (at most [`TRANSACTIONS_PER_BATCH`]), in their
    /// order: one JSON-RPC batch of `eth_getBlockByNumber` without transactions. A block
    /// the node does not know is [`RpcFault::UnknownBlock`].
    pub async fn headers(&self, numbers: &[u64]) -> Result<Vec<BlockHeader>, RpcFault> {
        let params: Vec<(BlockNumberOrTag, bool)> = numbers
            .iter()
            .map(|number| (BlockNumberOrTag::Number(*number), false))
            .collect();
        let found: Vec<Option<Header>> = self.batched("eth_getBlockByNumber", &params).await?;
        numbers
            .iter()
            .zip(found)
            .map(|(number, header)| match header {
                Some(header) => Ok(BlockHeader::from(&header)),
                None => Err(RpcFault::UnknownBlock(*number)),
            })
            .collect()
    }

    /// `method` called once for each of `params`, answers in their order: one JSON-RPC
    /// batch, or, from a node that answers a batch without its calls' answers (it serves
    /// no batches), one call each from then on (a WARN says so once).
    async fn batched<P, T>(&self, method: &'static str, params: &[P]) -> Result<Vec<T>, RpcFault>
    where
        P: RpcSend + Clone,
        T: RpcRecv,
    {
        if params.len() > 1 && !self.batches_refused.load(Ordering::Relaxed) {
            let batch = self
                .endpoints
                .call(method, |p| async move {
                    let mut batch = BatchRequest::new(p.client());
                    let waiters = params
                        .iter()
                        .map(|param| batch.add_call::<_, T>(method, param))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| classify(&e))?;
                    batch.send().await.map_err(|e| classify(&e))?;
                    let mut found = Vec::with_capacity(waiters.len());
                    for waiter in waiters {
                        found.push(waiter.await.map_err(|e| {
                            match e {
                                RpcError::Transport(TransportErrorKind::MissingBatchResponse(_)) => {
                                    RpcFault::Unsupported(
                                        "the node answered a JSON-RPC batch without its calls' answers"
                                            .to_string(),
                                    )
                                }
                                other => classify(&other),
                            }
                        })?);
                    }
                    Ok(found)
                })
                .await;
            match batch {
                Err(RpcFault::Unsupported(reason)) => {
                    tracing::warn!(
                        url = %self.endpoint(), %reason,
                        "the node serves no JSON-RPC batches: calls are sent one each from now on"
                    );
                    self.batches_refused.store(true, Ordering::Relaxed);
                }
                answered => return answered,
            }
        }
        futures::stream::iter(params.iter().cloned())
            .map(|param| {
                self.endpoints.call(method, move |p| {
                    let param = param.clone();
                    async move {
                        p.raw_request(method.into(), param)
                            .await
                            .map_err(|e| classify(&e))
                    }
                })
            })
            .buffered(CALLS_IN_FLIGHT_WITHOUT_BATCHES)
            .try_collect()
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
