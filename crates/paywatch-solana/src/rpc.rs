//! The Solana JSON-RPC side, through `solana-rpc-client`'s nonblocking `RpcClient` (the
//! client `solana-client` re-exports) behind the shared endpoint set (timeouts, retries,
//! failover and metrics: `paywatch-chain`), and how the client's errors are classified.

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use backon::ExponentialBuilder;
use paywatch_chain::{Endpoints, Identity, IdentityCheck, RpcFailure, truncate};
use paywatch_core::config::NetworkConfig;
use solana_commitment_config::CommitmentConfig;
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_rpc_client::rpc_client::GetConfirmedSignaturesForAddress2Config;
use solana_rpc_client_api::client_error::{Error as ClientError, ErrorKind};
use solana_rpc_client_api::config::{RpcBlockConfig, RpcTransactionConfig};
use solana_rpc_client_api::request::{RpcError, RpcRequest, TokenAccountsFilter};
use solana_rpc_client_api::response::RpcConfirmedTransactionStatusWithSignature;
use solana_signature::Signature;
use solana_transaction_status_client_types::{
    EncodedConfirmedTransactionWithStatusMeta, TransactionDetails, TransactionStatus, UiTransactionEncoding,
};
use url::Url;

/// Signatures `getSignaturesForAddress` returns per page at most.
const SIGNATURES_PAGE: usize = 1_000;
/// Signatures `getSignatureStatuses` takes per call at most.
pub const STATUSES_PAGE: usize = 256;

/// Why an RPC call failed, as far as the worker cares.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcFault {
    /// HTTP 429 or a JSON-RPC rate-limit error.
    #[error("rate limited: {0}")]
    RateLimited(String),
    /// No answer within the timeout.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The node does not have what was asked (yet): a transaction or block not found.
    #[error("not found: {0}")]
    NotFound(String),
    /// Anything else: connection refused or reset, 5xx, malformed JSON, node errors.
    #[error("{0}")]
    Transient(String),
    /// An answer no correct node gives (a malformed address, say); the step is retried.
    #[error("impossible answer: {0}")]
    BadAnswer(String),
    /// No endpoint may be read: the active one serves another cluster or could not say
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
            Self::RateLimited(_) => "rate_limited",
            Self::Timeout(_) => "timeout",
            Self::NotFound(_) => "not_found",
            Self::Transient(_) => "transient",
            Self::BadAnswer(_) => "bad_answer",
            Self::Unusable(_) => "unusable_endpoint",
        }
    }

    fn is_retryable(&self) -> bool {
        !matches!(self, Self::NotFound(_))
    }

    fn is_rate_limit(&self) -> bool {
        matches!(self, Self::RateLimited(_))
    }

    fn unusable(detail: String) -> Self {
        Self::Unusable(detail)
    }
}

/// Classifies a `solana-rpc-client` error.
pub fn classify(error: &ClientError) -> RpcFault {
    let text = truncate(&error.to_string());
    match error.kind.as_ref() {
        ErrorKind::Reqwest(e) if e.status().map(|s| s.as_u16()) == Some(429) => RpcFault::RateLimited(text),
        ErrorKind::Reqwest(e) if e.is_timeout() => RpcFault::Transient(text),
        ErrorKind::RpcError(RpcError::RpcResponseError { code, message, .. }) => {
            let lower = message.to_lowercase();
            if *code == 429 || lower.contains("rate limit") || lower.contains("too many requests") {
                RpcFault::RateLimited(text)
            } else if lower.contains("not available") || lower.contains("was skipped") {
                // -32004 block not available, -32007 slot skipped, -32009 missing in long-term storage.
                RpcFault::NotFound(text)
            } else {
                RpcFault::Transient(text)
            }
        }
        _ => RpcFault::Transient(text),
    }
}

/// The RPC endpoints of one Solana network.
pub struct SolanaRpc {
    endpoints: Endpoints<Arc<RpcClient>>,
    page: usize,
    /// What signatures, transactions and blocks are read at.
    commitment: CommitmentConfig,
}

impl SolanaRpc {
    /// A client per URL (HTTP(S) only: Solana's WebSocket API is a separate endpoint);
    /// `None` without any URL.
    pub fn new(network: &str, urls: &[Url], timeout: Duration) -> Option<Self> {
        let endpoints = urls
            .iter()
            .map(|url| {
                let client = RpcClient::new_with_timeout_and_commitment(
                    url.to_string(),
                    timeout,
                    CommitmentConfig::confirmed(),
                );
                (url.clone(), Arc::new(client))
            })
            .collect();
        Some(Self {
            endpoints: Endpoints::new(network, endpoints, timeout)?,
            page: SIGNATURES_PAGE,
            commitment: CommitmentConfig::confirmed(),
        })
    }

    /// The endpoints of `network` (its `rpc_urls`), none read before it answered
    /// `getGenesisHash` with the cluster the network's CAIP-2 id names (at its first use,
    /// and again after each failure that moved the set on from it); `None` without any URL.
    pub fn for_network(network: &NetworkConfig) -> Option<Self> {
        let rpc = Self::new(&network.id.to_string(), &network.rpc_urls, network.rpc_timeout)?;
        let expected = network.id.reference().to_string();
        let check: IdentityCheck<Arc<RpcClient>> = Arc::new(move |client: Arc<RpcClient>| {
            let expected = expected.clone();
            Box::pin(async move {
                match client.get_genesis_hash().await {
                    Ok(hash) if hash.to_string().starts_with(&expected) => Ok(Identity::Expected),
                    Ok(hash) => Ok(Identity::Other(format!(
                        "the cluster with genesis hash {hash}, not solana:{expected}"
                    ))),
                    Err(e) => Err(classify(&e).to_string()),
                }
            })
        });
        Some(Self {
            endpoints: rpc.endpoints.with_identity(check),
            ..rpc
        })
    }

    /// The check at start ([`Endpoints::refused_at_start`]): `Ok(None)` when an endpoint
    /// serves the network's chain, `Ok(Some(…))` when every one serves another (each with
    /// what it serves), `Err` when none serves it and one could not tell.
    pub async fn refused_at_start(&self) -> Result<Option<String>, String> {
        self.endpoints.refused_at_start().await
    }

    /// The endpoints dropped from rotation because they serve another cluster.
    pub fn refused_endpoints(&self) -> Vec<String> {
        self.endpoints.refused()
    }

    /// Reads signatures, transactions and blocks at `commitment` (`confirmed` unless told).
    pub fn reading_at(mut self, commitment: CommitmentConfig) -> Self {
        self.commitment = commitment;
        self
    }

    /// Lists signatures `page` at a time (at most 1,000, the RPC's limit), for providers
    /// that allow fewer per call.
    pub fn with_signatures_page(mut self, page: usize) -> Self {
        self.page = page.clamp(1, SIGNATURES_PAGE);
        self
    }

    /// Signatures asked for per `getSignaturesForAddress` page.
    pub fn signatures_page_size(&self) -> usize {
        self.page
    }

    /// Replaces the retry policy (tests use a faster one).
    pub fn with_backoff(mut self, backoff: ExponentialBuilder) -> Self {
        self.endpoints = self.endpoints.with_backoff(backoff);
        self
    }

    /// Runs one call of the client with timeout, retries and metrics.
    async fn call<T, F, Fut>(&self, method: &'static str, op: F) -> Result<T, RpcFault>
    where
        F: Fn(Arc<RpcClient>) -> Fut,
        Fut: Future<Output = Result<T, ClientError>>,
    {
        self.endpoints
            .call(method, |client| {
                let answer = op(client);
                async move { answer.await.map_err(|e| classify(&e)) }
            })
            .await
    }

    /// `getSlot` at `commitment`.
    pub async fn slot(&self, commitment: CommitmentConfig) -> Result<u64, RpcFault> {
        self.call("getSlot", |c| async move {
            c.get_slot_with_commitment(commitment).await
        })
        .await
    }

    /// `getBlockTime`: the Unix time the cluster gives the block at `slot`.
    pub async fn block_time(&self, slot: u64) -> Result<i64, RpcFault> {
        self.call("getBlockTime", |c| async move { c.get_block_time(slot).await })
            .await
    }

    /// `getTokenAccountsByOwner` for one mint, at `confirmed`: the addresses.
    pub async fn token_accounts(&self, owner: &Pubkey, mint: &Pubkey) -> Result<Vec<String>, RpcFault> {
        let accounts = self
            .call("getTokenAccountsByOwner", |c| async move {
                c.get_token_accounts_by_owner(owner, TokenAccountsFilter::Mint(*mint))
                    .await
            })
            .await?;
        accounts
            .into_iter()
            .map(|account| match parse_address(&account.pubkey) {
                Ok(_) => Ok(account.pubkey),
                Err(_) => Err(RpcFault::BadAnswer(format!(
                    "getTokenAccountsByOwner({owner}, mint {mint}) named token account `{}`, which is not a base58 address",
                    account.pubkey
                ))),
            })
            .collect()
    }

    /// One page of `getSignaturesForAddress` at the read commitment, newest first, before `before`.
    pub async fn signatures_page(
        &self,
        address: &Pubkey,
        before: Option<Signature>,
    ) -> Result<Vec<RpcConfirmedTransactionStatusWithSignature>, RpcFault> {
        self.call("getSignaturesForAddress", |c| async move {
            c.get_signatures_for_address_with_config(
                address,
                GetConfirmedSignaturesForAddress2Config {
                    before,
                    until: None,
                    limit: Some(self.page),
                    commitment: Some(self.commitment),
                },
            )
            .await
        })
        .await
    }

    /// `getTransaction` in `jsonParsed`, versioned transactions included, at the read
    /// commitment.
    pub async fn transaction(
        &self,
        signature: &Signature,
    ) -> Result<EncodedConfirmedTransactionWithStatusMeta, RpcFault> {
        self.call("getTransaction", |c| async move {
            c.get_transaction_with_config(
                signature,
                RpcTransactionConfig {
                    encoding: Some(UiTransactionEncoding::JsonParsed),
                    commitment: Some(self.commitment),
                    max_supported_transaction_version: Some(0),
                },
            )
            .await
        })
        .await
    }

    /// `getTransaction` at `finalized` in `base64` (the transaction exactly as signed), as
    /// the node answered it: the JSON-RPC `result`, `null` when the node has no such
    /// finalized transaction.
    pub async fn finalized_transaction_answer(
        &self,
        signature: &Signature,
    ) -> Result<serde_json::Value, RpcFault> {
        let params = serde_json::json!([
            signature.to_string(),
            {"encoding": "base64", "commitment": "finalized", "maxSupportedTransactionVersion": 0}
        ]);
        self.call("getTransaction", |c| {
            let params = params.clone();
            async move { c.send(RpcRequest::GetTransaction, params).await }
        })
        .await
    }

    /// The block hash of `slot`, from `getBlock` without transactions or rewards.
    pub async fn block_hash(&self, slot: u64) -> Result<String, RpcFault> {
        self.call("getBlock", |c| async move {
            c.get_block_with_config(
                slot,
                RpcBlockConfig {
                    encoding: None,
                    transaction_details: Some(TransactionDetails::None),
                    rewards: Some(false),
                    commitment: Some(self.commitment),
                    max_supported_transaction_version: Some(0),
                },
            )
            .await
        })
        .await
        .map(|block| block.blockhash)
    }

    /// `getSignatureStatuses` with `searchTransactionHistory`, one answer per signature
    /// (`None`: the node knows no such transaction).
    pub async fn statuses(
        &self,
        signatures: &[Signature],
    ) -> Result<Vec<Option<TransactionStatus>>, RpcFault> {
        let mut out = Vec::with_capacity(signatures.len());
        for chunk in signatures.chunks(STATUSES_PAGE) {
            let answer = self
                .call("getSignatureStatuses", |c| async move {
                    c.get_signature_statuses_with_history(chunk).await
                })
                .await?;
            if answer.value.len() != chunk.len() {
                return Err(RpcFault::Transient(format!(
                    "getSignatureStatuses answered {} statuses for {} signatures",
                    answer.value.len(),
                    chunk.len()
                )));
            }
            out.extend(answer.value);
        }
        Ok(out)
    }
}

/// Parses a base58 address (from the configuration, the store or a node's answer).
pub fn parse_address(address: &str) -> Result<Pubkey, RpcFault> {
    Pubkey::from_str(address).map_err(|_| RpcFault::BadAnswer(format!("`{address}` is not a base58 address")))
}
