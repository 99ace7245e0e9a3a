//! Review v1: `POST /v1/reviews/verify` (the six checks against paywatch's index, and the
//! recording), and the read side: `GET /v1/reviews/{network}/{payment}` and `GET
//! /v1/reviews` publish recorded reviews with the payment's state as paywatch sees it now.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use paywatch_query::{
    ListParams, ReviewPage, ReviewRules, ReviewSubmission, ReviewView, VerifyResponse, list_reviews,
    published_review, verify_review,
};
use serde::Deserialize;

use crate::AppState;
use crate::error::{ApiError, ErrorBody};
use crate::reads::{ReadParams, Reads};

/// The verify handler.
#[utoipa::path(post, path = "/v1/reviews/verify", tag = "providers", request_body = ReviewSubmission,
    responses((status = 200, description = "The six checks of review v1", body = VerifyResponse), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn verify(
    State(state): State<AppState>,
    body: Result<Json<ReviewSubmission>, JsonRejection>,
) -> Result<Json<VerifyResponse>, ApiError> {
    let Json(request) = body?;
    verify_review(
        Some(&state.queries),
        ReviewRules::of(&state.queries.chains),
        &request,
    )
    .await
    .map(Json)
    .map_err(ApiError::from)
}

/// Query parameters of one review.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ReviewQuery {
    /// Picks one payment of a transaction that settles several.
    index: Option<u32>,
    /// Add the payment's receipt proof (EVM) or its transaction's evidence (Solana);
    /// `proof_unavailable` says why not otherwise.
    #[serde(default)]
    proof: bool,
}

/// The handler publishing one review.
#[utoipa::path(get, path = "/v1/reviews/{network}/{payment}", tag = "providers",
    params(("network" = String, Path, description = "CAIP-2 id or alias"), ("payment" = String, Path, description = "Transaction hash or signature"), ReviewQuery, ReadParams),
    responses((status = 200, description = "The review as published, with the payment's state now", body = ReviewView),
        (status = 404, description = "No review recorded, payment not indexed, or network not watched", body = ErrorBody),
        (status = 409, description = "Several reviewed payments in the transaction: add ?index=", body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn published(
    Reads(queries): Reads,
    path: Result<Path<(String, String)>, PathRejection>,
    query: Result<Query<ReviewQuery>, QueryRejection>,
) -> Result<Json<ReviewView>, ApiError> {
    let Path((network, payment)) = path?;
    let Query(query) = query?;
    published_review(&queries, &network, &payment, query.index, query.proof)
        .await
        .map(Json)
        .map_err(ApiError::from)
}

/// The handler listing published reviews by their payments' filters.
#[utoipa::path(get, path = "/v1/reviews", tag = "providers", params(ListParams, ReadParams),
    responses((status = 200, description = "A page of published reviews", body = ReviewPage),
        (status = 404, body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn list(
    Reads(queries): Reads,
    query: Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<ReviewPage>, ApiError> {
    let Query(query) = query?;
    list_reviews(&queries, &query)
        .await
        .map(Json)
        .map_err(ApiError::from)
}
