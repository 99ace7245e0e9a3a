//! `/healthz` (the store answers) and `/metrics` (Prometheus text format).

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

use paywatch_query::QueryError;

use crate::AppState;
use crate::error::{ApiError, ErrorBody};

/// 200 when the store answers, 503 otherwise.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The store answers", body = String), (status = 503, body = ErrorBody)))]
pub(crate) async fn healthz(State(state): State<AppState>) -> Result<&'static str, ApiError> {
    state
        .queries
        .store
        .ping()
        .await
        .map_err(|e| ApiError::from(QueryError::store(e)))?;
    Ok("ok\n")
}

/// The Prometheus exposition.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", body = String, content_type = "text/plain")))]
pub(crate) async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    match state.metrics {
        Some(handle) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            handle.render(),
        ),
        None => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain")],
            "metrics recorder not installed\n".to_string(),
        ),
    }
}
