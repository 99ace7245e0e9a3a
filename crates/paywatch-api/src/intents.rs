//! `POST /v1/intents/reveal`: checks a revealed intent and salt against the nonce of an
//! indexed payment and, on a match, binds the intent to the payment.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use paywatch_query::{PaymentView, RevealRequest, reveal_intent};

use crate::AppState;
use crate::error::{ApiError, ErrorBody};

/// The reveal handler.
#[utoipa::path(post, path = "/v1/intents/reveal", tag = "providers", request_body = RevealRequest,
    responses((status = 200, description = "The payment with its bound intent", body = PaymentView),
        (status = 404, body = ErrorBody), (status = 422, description = "The intent and salt do not hash to the nonce", body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn reveal(
    State(state): State<AppState>,
    body: Result<Json<RevealRequest>, JsonRejection>,
) -> Result<Json<PaymentView>, ApiError> {
    let Json(request) = body?;
    Ok(Json(reveal_intent(&state.queries, request).await?))
}
