//! API errors: a query's refusal answered as `{"reason", "message"}` with the HTTP status
//! of its reason's kind, in one `IntoResponse`; what failed inside paywatch is logged by the
//! [`log_failures`] middleware, never sent.

use axum::Json;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use paywatch_core::{Reason, ReasonKind};
use paywatch_query::QueryError;
use serde::Serialize;

/// A refusal, answered with the non-2xx status of its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError(pub QueryError);

/// The body of every refusal.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// Machine-readable reason code.
    #[schema(value_type = Reason)]
    reason: String,
    /// What is wrong and how to fix it.
    message: String,
}

/// What failed inside paywatch, carried by a refusal's response to [`log_failures`].
#[derive(Debug, Clone)]
struct InternalFailure(String);

/// The HTTP status of each kind of refusal.
fn http_status(kind: ReasonKind) -> StatusCode {
    match kind {
        ReasonKind::BadInput => StatusCode::BAD_REQUEST,
        ReasonKind::NotFound => StatusCode::NOT_FOUND,
        ReasonKind::Conflict => StatusCode::CONFLICT,
        ReasonKind::Rejected | ReasonKind::Verdict => StatusCode::UNPROCESSABLE_ENTITY,
        ReasonKind::Unauthorized => StatusCode::UNAUTHORIZED,
        ReasonKind::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        ReasonKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ReasonKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
    }
}

impl ApiError {
    /// A new refusal.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self(QueryError::new(reason, message))
    }

    /// The HTTP status it is answered with.
    pub fn status(&self) -> StatusCode {
        http_status(self.0.kind())
    }
}

impl From<QueryError> for ApiError {
    fn from(error: QueryError) -> Self {
        Self(error)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let QueryError {
            reason,
            message,
            internal,
        } = self.0;
        let body = ErrorBody {
            reason: reason.code().to_string(),
            message,
        };
        let mut response = (status, Json(body)).into_response();
        // For the middlewares: the read routing retries a read the replica failed.
        response.extensions_mut().insert(reason);
        if let Some(internal) = internal {
            response.extensions_mut().insert(InternalFailure(internal));
        }
        response
    }
}

/// The middleware that logs each refusal caused by a failure inside paywatch (the store),
/// with what failed; the caller gets only the reason and message.
pub(crate) async fn log_failures(request: Request, next: Next) -> Response {
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let response = next.run(request).await;
    if let Some(InternalFailure(error)) = response.extensions().get::<InternalFailure>() {
        tracing::error!(%method, %path, status = response.status().as_u16(), %error, "a request failed inside paywatch");
    }
    response
}

impl From<axum::extract::rejection::QueryRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::QueryRejection) -> Self {
        Self::new(Reason::MalformedQuery, rejection.body_text())
    }
}

impl From<axum::extract::rejection::PathRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::PathRejection) -> Self {
        Self::new(Reason::MalformedPath, rejection.body_text())
    }
}

impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::JsonRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            return Self::new(
                Reason::PayloadTooLarge,
                format!(
                    "the body is larger than the {} bytes the API takes",
                    crate::MAX_BODY_BYTES
                ),
            );
        }
        Self::new(Reason::MalformedBody, rejection.body_text())
    }
}

/// Unknown routes: 404 with a reason like every other refusal.
pub(crate) async fn not_found() -> ApiError {
    ApiError::new(
        Reason::RouteNotFound,
        "no such endpoint; see GET /v1/payments/{network}/{payment}[/history], /healthz, /metrics and /openapi.json",
    )
}

#[cfg(test)]
mod tests {
    use strum::VariantArray;

    use super::*;

    #[test]
    fn each_refusal_keeps_its_documented_status() {
        let status = |reason: Reason| ApiError::new(reason, "").status().as_u16();
        for (reason, expected) in [
            (Reason::MalformedNetwork, 400),
            (Reason::MalformedPayment, 400),
            (Reason::MalformedQuery, 400),
            (Reason::MalformedPath, 400),
            (Reason::MalformedBody, 400),
            (Reason::MalformedIntent, 400),
            (Reason::NetworkNotWatched, 404),
            (Reason::PaymentNotFound, 404),
            (Reason::RouteNotFound, 404),
            (Reason::AmbiguousPayment, 409),
            (Reason::IntentNonceMismatch, 422),
            (Reason::Unauthorized, 401),
            (Reason::RateLimited, 429),
            (Reason::PayloadTooLarge, 413),
            (Reason::StoreUnavailable, 503),
            (Reason::RpcUnavailable, 503),
            (Reason::MalformedAuthorization, 400),
            (Reason::AssetNotWatched, 404),
            (Reason::NetworkNotSynced, 503),
            (Reason::ReviewNotFound, 404),
            (Reason::ProofUnavailable, 409),
        ] {
            assert_eq!(status(reason), expected, "{reason}");
        }
        assert!(
            Reason::VARIANTS
                .iter()
                .all(|r| !status(*r).to_string().starts_with('2'))
        );
    }
}
