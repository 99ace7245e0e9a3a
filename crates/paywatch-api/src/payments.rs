//! `GET /v1/payments/{network}/{payment}` (one payment, optionally compared with what the
//! caller expects of it: `?payer=&pay_to=&amount=&asset=`), its `/history`, its `/proof`
//! (EVM) or `/evidence` (Solana), and `POST /v1/payments:lookup` (up to 1,000 lookups in
//! one call).

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query};
use paywatch_query::{
    BatchRequest, BatchResponse, EvidenceView, ExpectedParams, PaymentHistory, PaymentView, ProofView,
    lookup_batch, lookup_expected, payment_evidence, payment_history, payment_proof,
};
use serde::Deserialize;

use crate::error::{ApiError, ErrorBody};
use crate::reads::{ReadParams, Reads};

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

/// The history handler.
#[utoipa::path(get, path = "/v1/payments/{network}/{payment}/history", tag = "providers",
    params(("network" = String, Path), ("payment" = String, Path), LookupQuery, ReadParams),
    responses((status = 200, body = PaymentHistory), (status = 404, body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn history(
    Reads(queries): Reads,
    path: Result<Path<(String, String)>, PathRejection>,
    query: Result<Query<LookupQuery>, QueryRejection>,
) -> Result<Json<PaymentHistory>, ApiError> {
    let Path((network, payment)) = path?;
    let Query(query) = query?;
    payment_history(&queries, &network, &payment, query.index)
        .await
        .map(Json)
        .map_err(ApiError::from)
}

/// Query parameters of a proof.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ProofQuery {
    /// Picks one payment of a transaction that settles several.
    index: Option<u32>,
}

/// The proof handler.
#[utoipa::path(get, path = "/v1/payments/{network}/{payment}/proof", tag = "providers",
    params(("network" = String, Path), ("payment" = String, Path), ProofQuery, ReadParams),
    responses((status = 200, description = "The payment's receipt proof, checked by paywatch", body = ProofView),
        (status = 404, body = ErrorBody), (status = 409, description = "Not final, a method without proofs yet, a Solana payment (see /evidence), or several payments: add ?index=", body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store or the node did not answer", body = ErrorBody)))]
pub(crate) async fn proof(
    Reads(queries): Reads,
    path: Result<Path<(String, String)>, PathRejection>,
    query: Result<Query<ProofQuery>, QueryRejection>,
) -> Result<Json<ProofView>, ApiError> {
    let Path((network, payment)) = path?;
    let Query(query) = query?;
    payment_proof(&queries, &network, &payment, query.index)
        .await
        .map(Json)
        .map_err(ApiError::from)
}

/// The evidence handler.
#[utoipa::path(get, path = "/v1/payments/{network}/{payment}/evidence", tag = "providers",
    params(("network" = String, Path), ("payment" = String, Path), ProofQuery, ReadParams),
    responses((status = 200, description = "A Solana payment's transaction as the node serves it at `finalized`, checked by paywatch: evidence, not a proof", body = EvidenceView),
        (status = 404, body = ErrorBody), (status = 409, description = "Not final, an EVM payment (it has a proof), the node has no finalized transaction, or several payments: add ?index=", body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store or the node did not answer", body = ErrorBody)))]
pub(crate) async fn evidence(
    Reads(queries): Reads,
    path: Result<Path<(String, String)>, PathRejection>,
    query: Result<Query<ProofQuery>, QueryRejection>,
) -> Result<Json<EvidenceView>, ApiError> {
    let Path((network, payment)) = path?;
    let Query(query) = query?;
    payment_evidence(&queries, &network, &payment, query.index)
        .await
        .map(Json)
        .map_err(ApiError::from)
}

/// The lookup handler.
#[utoipa::path(get, path = "/v1/payments/{network}/{payment}", tag = "providers",
    params(("network" = String, Path, description = "CAIP-2 id or alias"), ("payment" = String, Path, description = "Transaction hash or signature"), LookupQuery, ReadParams),
    responses((status = 200, description = "The payment, with `expectation` when facts were given", body = PaymentView),
        (status = 404, description = "Not indexed, or network not watched", body = ErrorBody),
        (status = 409, description = "Several payments in the transaction: add ?index=", body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn lookup(
    Reads(queries): Reads,
    path: Result<Path<(String, String)>, PathRejection>,
    query: Result<Query<LookupQuery>, QueryRejection>,
) -> Result<Json<PaymentView>, ApiError> {
    let Path((network, payment)) = path?;
    let Query(query) = query?;
    let expected = ExpectedParams {
        payer: query.payer,
        pay_to: query.pay_to,
        amount: query.amount,
        asset: query.asset,
    };
    let view = lookup_expected(&queries, &network, &payment, query.index, &expected).await?;
    Ok(Json(view))
}

/// The batch handler: each lookup answered as the single lookup would, in request order;
/// a store failure fails the whole batch (503) rather than answering part of it.
#[utoipa::path(post, path = "/v1/payments:lookup", tag = "providers", request_body = BatchRequest, params(ReadParams),
    responses((status = 200, description = "One answer per lookup, in request order", body = BatchResponse),
        (status = 413, description = "More than 1,000 lookups or a body over 1 MiB", body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn batch(
    Reads(queries): Reads,
    body: Result<Json<BatchRequest>, JsonRejection>,
) -> Result<Json<BatchResponse>, ApiError> {
    let Json(request) = body?;
    let results = lookup_batch(&queries, request.lookups).await?;
    Ok(Json(BatchResponse { results }))
}
