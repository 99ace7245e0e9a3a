//! API errors: a status code, a reason code from core and a message.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use paywatch_core::Reason;
use serde::Serialize;

/// A refusal, answered as `{"reason", "message"}` with a non-2xx status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Machine-readable reason.
    pub reason: Reason,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// The body of every refusal.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// Machine-readable reason code.
    reason: String,
    /// What is wrong and how to fix it.
    message: String,
}

impl ApiError {
    /// A new error.
    pub fn new(status: StatusCode, reason: Reason, message: impl Into<String>) -> Self {
        ApiError {
            status,
            reason,
            message: message.into(),
        }
    }

    /// The store failed: 503, with the detail logged, not sent.
    pub fn store(error: paywatch_store::StoreError) -> Self {
        tracing::error!(%error, "store error while answering a request");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            Reason::StoreUnavailable,
            "the store could not answer; retry later",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            reason: self.reason.code().to_string(),
            message: self.message,
        };
        (self.status, Json(body)).into_response()
    }
}

impl From<axum::extract::rejection::QueryRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::QueryRejection) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            Reason::MalformedQuery,
            rejection.body_text(),
        )
    }
}

impl From<axum::extract::rejection::PathRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::PathRejection) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            Reason::MalformedPath,
            rejection.body_text(),
        )
    }
}

impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::JsonRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                Reason::PayloadTooLarge,
                format!(
                    "the body is larger than the {} bytes the API takes",
                    crate::MAX_BODY_BYTES
                ),
            );
        }
        ApiError::new(
            StatusCode::BAD_REQUEST,
            Reason::MalformedBody,
            rejection.body_text(),
        )
    }
}

/// Unknown routes: 404 with a reason like every other refusal.
pub(crate) async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        Reason::RouteNotFound,
        "no such endpoint; see GET /v1/payments/{network}/{payment}[/history], /healthz, /metrics and /openapi.json",
    )
}
