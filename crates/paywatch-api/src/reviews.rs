//! `POST /v1/reviews/verify`: the six checks of review v1 against paywatch's index.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use paywatch_query::{ReviewRules, ReviewSubmission, VerifyResponse, verify_review};

use crate::AppState;
use crate::error::{ApiError, ErrorBody};

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
