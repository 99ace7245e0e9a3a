//! `GET /v1/payments/{network}/{payment}`: one payment, as paywatch knows it, optionally
//! compared with what the caller expects of it (`?payer=&pay_to=&amount=&asset=`);
//! `POST /v1/payments:lookup`: up to 1,000 lookups in one call.

use alloy_primitives::U256;
use axum::Json;
use axum::extract::{Path, Query, State};
use paywatch_core::config::{NetworkConfig, TokenConfig};
use paywatch_core::expect::{ExpectedFacts, PaymentFacts, mismatches};
use paywatch_core::ids::{
    lower_hex, parse_evm_address, parse_evm_tx_hash, parse_solana_address, parse_solana_signature,
};
use paywatch_core::network::NetworkId;
use paywatch_core::state::{PaymentState, confirmations};
use paywatch_core::{Namespace, PaymentMethod, Reason};
use paywatch_store::{BoundIntent, HistoryEntry, PaymentLookup, StoredPayment, StoredRefund};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::AppState;
use crate::error::{ApiError, ErrorBody};

/// The intent fields a payer reveals; network, asset and pay_to are the payment's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IntentView {
    /// HTTP method.
    pub method: String,
    /// Resource URL (answered normalized).
    pub url: String,
    /// SHA-256 of the request body, 64 lowercase hex digits, or absent.
    #[serde(default)]
    pub body_sha256: Option<String>,
    /// The payer's resource class.
    pub class: String,
    /// The payer's cap in the asset's smallest unit, decimal string.
    pub max_atomic: String,
}

impl From<BoundIntent> for IntentView {
    fn from(b: BoundIntent) -> Self {
        Self {
            method: b.method,
            url: b.url,
            body_sha256: b.body_sha256,
            class: b.class,
            max_atomic: b.max_atomic,
        }
    }
}

/// A payment as answered by the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PaymentView {
    /// CAIP-2 network id.
    pub network: String,
    /// Transaction hash (EVM) or signature (Solana).
    pub payment: String,
    /// Its number in the transaction (0 unless it settles several; see the README on numbering).
    pub index_in_tx: u32,
    /// Who paid.
    pub payer: String,
    /// Who was paid.
    pub pay_to: String,
    /// Exact amount in the asset's smallest unit, as a decimal string.
    pub amount: String,
    /// Token contract or mint.
    pub asset: String,
    /// The asset's symbol from `chains.toml`.
    pub asset_symbol: Option<String>,
    /// The asset's decimals from `chains.toml`.
    pub asset_decimals: Option<u8>,
    /// How the money moved: `eip3009`, `permit2` (x402's exact Permit2 proxy), `upto`
    /// (x402's upto Permit2 proxy), `erc7710` or `spl` (Solana).
    #[schema(value_type = String)]
    pub method: PaymentMethod,
    /// The authorization's nonce: EIP-3009's `0x` + 64 hex, or Permit2's `uint256` in
    /// decimal; `null` on Solana and where the settling call could not be read.
    pub nonce: Option<String>,
    /// Why `nonce` is `null` on an EVM payment, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce_unavailable: Option<String>,
    /// `upto`: the maximum the payer signed; `amount` is what the facilitator settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_amount: Option<String>,
    /// The transaction's memo (Solana's SPL Memo: the seller's `extra.memo` or the
    /// client's nonce), if any.
    pub memo: Option<String>,
    /// Who settled it, in x402 the facilitator: the transaction's fee payer (Solana);
    /// `null` on EVM and for payments stored before it was recorded.
    pub facilitator: Option<String>,
    /// Block number.
    pub block_number: u64,
    /// Block hash.
    pub block_hash: String,
    /// Block time, RFC 3339 UTC.
    pub block_time: Option<String>,
    /// Blocks on top of and including the payment's block at the last recorded head
    /// (0 when dropped).
    pub confirmations: u64,
    /// `pending`, `paid`, `partially_refunded`, `refunded` or `dropped`.
    #[schema(value_type = String)]
    pub payment_state: PaymentState,
    /// Sum of the final refunds tied to it, exact integer string.
    pub refunded_amount: String,
    /// The refunds tied to it, in chain order.
    pub refunds: Vec<RefundView>,
    /// The intent its nonce commits to, once revealed and checked (`POST /v1/intents/reveal`).
    pub intent: Option<IntentView>,
    /// When paywatch first saw it, RFC 3339 UTC.
    pub observed_at: String,
    /// When its state last changed, RFC 3339 UTC.
    pub state_changed_at: String,
    /// How it compares with the facts the caller expects (only when some were given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectation: Option<Expectation>,
}

/// Why a Permit2 payment has no nonce: its settling call was not read.
fn nonce_unavailable(method: PaymentMethod, has_nonce: bool) -> Option<String> {
    match method {
        PaymentMethod::Permit2 | PaymentMethod::Upto if !has_nonce => Some(
            "the proxy was called through another contract and the node served no call trace \
             (debug_traceTransaction with the callTracer), so the settle call's nonce could not be read"
                .to_string(),
        ),
        _ => None,
    }
}

/// The answer of the `expect` form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Expectation {
    /// Every expected fact matches the chain and the payment is final.
    pub matches: bool,
    /// Reason codes: `payer_mismatch`, `v1_pay_to_mismatch`, `v1_amount_mismatch`,
    /// `v1_asset_mismatch`, `payment_not_final`.
    pub reasons: Vec<String>,
    /// The facts that differ, with both values.
    pub mismatches: Vec<MismatchView>,
}

/// One fact that differs from what the caller expects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MismatchView {
    /// `payer`, `pay_to`, `amount` or `asset`.
    pub fact: String,
    /// What the chain says.
    pub chain: String,
    /// What the caller expected.
    pub expected: String,
}

/// A refund as answered by the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RefundView {
    /// The transaction that moved the money back.
    pub tx: String,
    /// Log index of its transfer.
    pub event_index: u64,
    /// Amount moved back, exact integer string.
    pub amount: String,
    /// The rule that tied it: `nonce_commitment` or `matching`.
    pub rule: String,
    /// Its block.
    pub block_number: u64,
}

/// One state change, as answered by the history endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HistoryView {
    /// Position in the history, from 0.
    pub seq: u64,
    /// State before (absent for the first).
    pub from_state: Option<String>,
    /// State after.
    pub to_state: String,
    /// `seen`, `seen_final`, `final`, `reorged`, `reincluded`, `refund` or `refund_reorged`.
    pub cause: String,
    /// The block that caused it (the fork block for reorgs).
    pub block_number: Option<u64>,
    /// The transaction that caused it (the refund's, for refunds).
    pub tx: Option<String>,
    /// When paywatch recorded it, RFC 3339 UTC.
    pub at: String,
}

impl From<HistoryEntry> for HistoryView {
    fn from(h: HistoryEntry) -> Self {
        Self {
            seq: h.seq,
            from_state: h.from_state,
            to_state: h.to_state,
            cause: h.cause,
            block_number: h.block_number,
            tx: h.tx_id,
            at: rfc3339_ms(h.at_ms),
        }
    }
}

/// The history endpoint's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PaymentHistory {
    /// The payment now.
    pub payment: PaymentView,
    /// Every state change, oldest first.
    pub history: Vec<HistoryView>,
}

/// Query parameters of the lookup.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct LookupQuery {
    /// Picks one payment of a transaction that settles several.
    index: Option<u32>,
    /// Expected payer.
    payer: Option<String>,
    /// Expected pay_to.
    pay_to: Option<String>,
    /// Expected amount, an exact integer in the asset's smallest unit.
    amount: Option<String>,
    /// Expected asset.
    asset: Option<String>,
}

/// A block time (Unix seconds) in RFC 3339 UTC.
pub(crate) fn rfc3339_seconds(seconds: i64) -> Option<String> {
    OffsetDateTime::from_unix_timestamp(seconds)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
}

/// The configured token a payment's asset is, for its symbol and decimals.
pub(crate) fn token_of<'a>(network: &'a NetworkConfig, asset: &str) -> Option<&'a TokenConfig> {
    network.tokens.iter().find(|t| t.address == asset)
}

pub(crate) fn rfc3339_ms(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

/// Resolves the `{network}` path segment against the configuration.
pub(crate) fn resolve_network<'a>(state: &'a AppState, name: &str) -> Result<&'a NetworkConfig, ApiError> {
    if let Some(network) = state.chains.network(name) {
        return Ok(network);
    }
    match NetworkId::parse_or_alias(name) {
        Ok(id) => Err(ApiError::new(
            Reason::NetworkNotWatched,
            format!("network {id} is not in this paywatch's chains.toml"),
        )),
        Err(e) => Err(ApiError::new(Reason::MalformedNetwork, e.to_string())),
    }
}

/// Parses the `{payment}` path segment in the network's spelling.
fn parse_payment_id(network: &NetworkConfig, payment: &str) -> Result<String, ApiError> {
    match network.id.namespace() {
        Namespace::Eip155 => parse_evm_tx_hash(payment)
            .map(lower_hex)
            .map_err(|e| ApiError::new(Reason::MalformedPayment, e.to_string())),
        Namespace::Solana => parse_solana_signature(payment)
            .map(|_| payment.to_string())
            .map_err(|e| ApiError::new(Reason::MalformedPayment, e.to_string())),
    }
}

/// Builds the API view of a stored payment.
fn view(
    network: &NetworkConfig,
    payment: StoredPayment,
    refunds: Vec<StoredRefund>,
    intent: Option<BoundIntent>,
    head: Option<u64>,
) -> PaymentView {
    let token = token_of(network, &payment.asset);
    let confirmations = match (payment.state, head) {
        (PaymentState::Dropped, _) | (_, None) => 0,
        (_, Some(head)) => confirmations(payment.block_number, head),
    };
    PaymentView {
        network: payment.network,
        payment: payment.payment_id,
        index_in_tx: payment.index_in_tx,
        payer: payment.payer,
        pay_to: payment.pay_to,
        amount: payment.amount,
        asset: payment.asset,
        asset_symbol: token.map(|t| t.symbol.clone()),
        asset_decimals: token.map(|t| t.decimals),
        nonce_unavailable: nonce_unavailable(payment.method, payment.nonce.is_some()),
        method: payment.method,
        nonce: payment.nonce,
        max_amount: payment.max_amount,
        memo: payment.memo,
        facilitator: payment.facilitator,
        block_number: payment.block_number,
        block_hash: payment.block_hash,
        block_time: payment.block_time.and_then(rfc3339_seconds),
        confirmations,
        payment_state: payment.state,
        refunded_amount: payment.refunded_amount,
        refunds: refunds
            .into_iter()
            .map(|r| RefundView {
                tx: r.refund_tx_id,
                event_index: r.refund_event_index,
                amount: r.amount,
                rule: r.rule,
                block_number: r.block_number,
            })
            .collect(),
        intent: intent.map(IntentView::from),
        observed_at: rfc3339_ms(payment.first_seen_ms),
        state_changed_at: rfc3339_ms(payment.state_changed_ms),
        expectation: None,
    }
}

/// An address or asset in the network's canonical spelling, or 400 `malformed_query`
/// naming the parameter.
pub(crate) fn canonical_address(
    network: &NetworkConfig,
    name: &str,
    value: &str,
) -> Result<String, ApiError> {
    let refused =
        |e: paywatch_core::ids::IdError| ApiError::new(Reason::MalformedQuery, format!("{name}: {e}"));
    match network.id.namespace() {
        Namespace::Eip155 => parse_evm_address(value).map(lower_hex).map_err(refused),
        Namespace::Solana => parse_solana_address(value)
            .map(|_| value.to_string())
            .map_err(refused),
    }
}

/// The facts a caller expects of a payment (each optional).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpectedParams {
    /// Expected payer.
    pub payer: Option<String>,
    /// Expected pay_to.
    pub pay_to: Option<String>,
    /// Expected amount, an exact integer in the asset's smallest unit.
    pub amount: Option<String>,
    /// Expected asset.
    pub asset: Option<String>,
}

/// Compares `payment` with the facts `query` expects, if it expects any: what the
/// `expect` form of the HTTP lookup and the gRPC `GetPayment` answer.
pub fn check_expectation(
    state: &AppState,
    payment: &PaymentView,
    query: &ExpectedParams,
) -> Result<Option<Expectation>, ApiError> {
    if query.payer.is_none() && query.pay_to.is_none() && query.amount.is_none() && query.asset.is_none() {
        return Ok(None);
    }
    let network = resolve_network(state, &payment.network)?;
    let address = |name: &str, value: &Option<String>| {
        value
            .as_deref()
            .map(|v| canonical_address(network, name, v))
            .transpose()
    };
    let (payer, pay_to, asset) = (
        address("payer", &query.payer)?,
        address("pay_to", &query.pay_to)?,
        address("asset", &query.asset)?,
    );
    let amount = query
        .amount
        .as_deref()
        .map(|v| {
            U256::from_str_radix(v, 10)
                .ok()
                .filter(|n| n.to_string() == v)
                .map(|n| n.to_string())
                .ok_or_else(|| {
                    ApiError::new(Reason::MalformedQuery,
                        format!("amount={v}: expected an integer in the asset's smallest unit, without sign, point or leading zeros"),
                    )
                })
        })
        .transpose()?;
    let chain = PaymentFacts {
        payer: &payment.payer,
        pay_to: &payment.pay_to,
        amount: &payment.amount,
        asset: &payment.asset,
    };
    let expected = ExpectedFacts {
        payer: payer.as_deref(),
        pay_to: pay_to.as_deref(),
        amount: amount.as_deref(),
        asset: asset.as_deref(),
    };
    let found = mismatches(&chain, &expected);
    let mut reasons: Vec<String> = found.iter().map(|m| m.reason.code().to_string()).collect();
    if !payment.payment_state.is_final() {
        reasons.push(Reason::PaymentNotFinal.code().to_string());
    }
    Ok(Some(Expectation {
        matches: reasons.is_empty(),
        reasons,
        mismatches: found
            .into_iter()
            .map(|m| MismatchView {
                fact: m.fact.to_string(),
                chain: m.chain,
                expected: m.expected,
            })
            .collect(),
    }))
}

/// Looks up one payment: what the HTTP handler answers and `paywatch lookup` prints.
pub async fn lookup_payment(
    state: &AppState,
    network: &str,
    payment: &str,
    index: Option<u32>,
) -> Result<PaymentView, ApiError> {
    let (network, payment_id, mut found) = stored_payments_of(state, network, payment).await?;
    let net = network.id.to_string();
    let chosen = match (index, found.len()) {
        (_, 0) => None,
        (None, 1) => found.pop(),
        (None, n) => {
            let indexes: Vec<String> = found.iter().map(|p| p.payment.index_in_tx.to_string()).collect();
            return Err(ApiError::new(
                Reason::AmbiguousPayment,
                format!(
                    "transaction {payment_id} settles {n} payments; add ?index= one of {} to pick one",
                    indexes.join(", ")
                ),
            ));
        }
        (Some(index), _) => found.into_iter().find(|p| p.payment.index_in_tx == index),
    };
    let Some(found) = chosen else {
        return Err(ApiError::new(
            Reason::PaymentNotFound,
            format!(
                "no x402 payment {payment_id} is indexed on {net} (not yet seen, not a payment, or not on a watched token)"
            ),
        ));
    };
    full_view(state, network, found).await
}

/// The network named, the payment id in its canonical spelling, and every stored
/// payment of that transaction.
async fn stored_payments_of<'a>(
    state: &'a AppState,
    network: &str,
    payment: &str,
) -> Result<(&'a NetworkConfig, String, Vec<PaymentLookup>), ApiError> {
    let network = resolve_network(state, network)?;
    let payment_id = parse_payment_id(network, payment)?;
    let found = state
        .store
        .lookup_payments(&network.id.to_string(), &payment_id)
        .await
        .map_err(ApiError::store)?;
    Ok((network, payment_id, found))
}

/// The view of a looked-up payment, with its refunds read when it has any.
async fn full_view(
    state: &AppState,
    network: &NetworkConfig,
    found: PaymentLookup,
) -> Result<PaymentView, ApiError> {
    let refunds = if found.refund_count == 0 {
        Vec::new()
    } else {
        state
            .store
            .refunds_of(
                &found.payment.network,
                &found.payment.payment_id,
                found.payment.index_in_tx,
            )
            .await
            .map_err(ApiError::store)?
    };
    Ok(view(
        network,
        found.payment,
        refunds,
        found.intent,
        found.head_block,
    ))
}

/// Every payment a transaction settles, in `index_in_tx` order (empty when none is
/// indexed).
pub(crate) async fn payments_of_transaction(
    state: &AppState,
    network: &str,
    payment: &str,
) -> Result<Vec<PaymentView>, ApiError> {
    let (network, _, found) = stored_payments_of(state, network, payment).await?;
    let mut views = Vec::with_capacity(found.len());
    for found in found {
        views.push(full_view(state, network, found).await?);
    }
    views.sort_by_key(|v| v.index_in_tx);
    Ok(views)
}

/// A payment with every state change it went through.
pub async fn payment_history(
    state: &AppState,
    network: &str,
    payment: &str,
    index: Option<u32>,
) -> Result<PaymentHistory, ApiError> {
    let payment = lookup_payment(state, network, payment, index).await?;
    let history = state
        .store
        .history_of(&payment.network, &payment.payment, payment.index_in_tx)
        .await
        .map_err(ApiError::store)?
        .into_iter()
        .map(HistoryView::from)
        .collect();
    Ok(PaymentHistory { payment, history })
}

/// The history handler.
#[utoipa::path(get, path = "/v1/payments/{network}/{payment}/history", tag = "providers",
    params(("network" = String, Path), ("payment" = String, Path), LookupQuery),
    responses((status = 200, body = PaymentHistory), (status = 404, body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn history(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, axum::extract::rejection::PathRejection>,
    query: Result<Query<LookupQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<PaymentHistory>, ApiError> {
    let Path((network, payment)) = path?;
    let Query(query) = query?;
    payment_history(&state, &network, &payment, query.index)
        .await
        .map(Json)
}

/// The lookup handler.
#[utoipa::path(get, path = "/v1/payments/{network}/{payment}", tag = "providers",
    params(("network" = String, Path, description = "CAIP-2 id or alias"), ("payment" = String, Path, description = "Transaction hash or signature"), LookupQuery),
    responses((status = 200, description = "The payment, with `expectation` when facts were given", body = PaymentView),
        (status = 404, description = "Not indexed, or network not watched", body = ErrorBody),
        (status = 409, description = "Several payments in the transaction: add ?index=", body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn lookup(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, axum::extract::rejection::PathRejection>,
    query: Result<Query<LookupQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<PaymentView>, ApiError> {
    let Path((network, payment)) = path?;
    let Query(query) = query?;
    let mut view = lookup_payment(&state, &network, &payment, query.index).await?;
    let expected = ExpectedParams {
        payer: query.payer,
        pay_to: query.pay_to,
        amount: query.amount,
        asset: query.asset,
    };
    view.expectation = check_expectation(&state, &view, &expected)?;
    Ok(Json(view))
}

/// Most lookups in one batch.
pub(crate) const MAX_BATCH: usize = 1000;

/// One lookup of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchItem {
    /// Network: CAIP-2 id or alias.
    pub network: String,
    /// Transaction hash or signature.
    pub payment: String,
    /// Picks one payment of a transaction that settles several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
}

/// The batch request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// Up to 1,000 lookups.
    pub lookups: Vec<BatchItem>,
}

/// One answer of a batch: the payment, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BatchAnswer {
    /// The lookup, as asked.
    pub lookup: BatchItem,
    /// The payment, when found.
    pub payment: Option<PaymentView>,
    /// The reason code when not (`payment_not_found`, `malformed_payment`, …).
    pub reason: Option<String>,
    /// What is wrong, when not found.
    pub message: Option<String>,
}

/// The batch answer, in request order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BatchResponse {
    /// One answer per lookup.
    pub results: Vec<BatchAnswer>,
}

/// The batch handler: each lookup answered as the single lookup would, in request order;
/// a store failure fails the whole batch (503) rather than answering part of it.
#[utoipa::path(post, path = "/v1/payments:lookup", tag = "providers", request_body = BatchRequest,
    responses((status = 200, description = "One answer per lookup, in request order", body = BatchResponse),
        (status = 413, description = "More than 1,000 lookups or a body over 1 MiB", body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn batch(
    State(state): State<AppState>,
    body: Result<Json<BatchRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<BatchResponse>, ApiError> {
    let Json(request) = body?;
    if request.lookups.len() > MAX_BATCH {
        return Err(ApiError::new(
            Reason::PayloadTooLarge,
            format!(
                "{} lookups in one batch; at most {MAX_BATCH}",
                request.lookups.len()
            ),
        ));
    }
    // All at once: the store answers concurrent lookups with shared statements.
    let answers = futures::future::join_all(
        request
            .lookups
            .iter()
            .map(|lookup| lookup_payment(&state, &lookup.network, &lookup.payment, lookup.index)),
    )
    .await;
    let mut results = Vec::with_capacity(answers.len());
    for (lookup, answer) in request.lookups.into_iter().zip(answers) {
        let answer = match answer {
            Ok(view) => BatchAnswer {
                lookup,
                payment: Some(view),
                reason: None,
                message: None,
            },
            Err(e) if e.status().is_server_error() => return Err(e),
            Err(e) => BatchAnswer {
                lookup,
                payment: None,
                reason: Some(e.reason.code().to_string()),
                message: Some(e.message),
            },
        };
        results.push(answer);
    }
    Ok(Json(BatchResponse { results }))
}
