//! The access middleware: every route but the probes (`/healthz`, `/readyz`) is
//! authenticated by its bearer token
//! and counted against its client's rate limit (`paywatch_query::AccessControl`); refusals
//! are 401 `unauthorized` with `WWW-Authenticate` and 429 `rate_limited` with `Retry-After`.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::error::ApiError;

/// The middleware: authenticates, then counts the request against its client's bucket.
pub(crate) async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if matches!(request.uri().path(), "/healthz" | "/readyz") {
        return next.run(request).await;
    }
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let client = match state.queries.access.authenticate(authorization) {
        Ok(client) => client,
        Err(refusal) => {
            let mut response = ApiError::from(refusal).into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    };
    if let Err((refusal, seconds)) = state.queries.access.count_request(&client) {
        let mut response = ApiError::from(refusal).into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        return response;
    }
    next.run(request).await
}
