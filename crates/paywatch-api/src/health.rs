//! `/healthz` (the store answers: for liveness probes), `/readyz` (no network's worker is
//! stalled or stopped: for readiness probes) and `/metrics` (Prometheus text format).

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

use paywatch_query::{NetworkHealth, QueryError};

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

/// 200 with each network's health while none is stalled or stopped; 503
/// `network_stalled` naming each that is, and why (`store_unavailable` when the store does
/// not answer). Lagging (a backfill) is ready: answers say how far it is.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Every network's worker steps", body = Vec<NetworkHealth>),
        (status = 503, description = "A network's worker is stalled or stopped, or the store does not answer", body = ErrorBody)
    ))]
pub(crate) async fn readyz(State(state): State<AppState>) -> Result<Json<Vec<NetworkHealth>>, ApiError> {
    let networks = paywatch_query::readiness(&state.queries.store, &state.queries.chains).await?;
    Ok(Json(networks))
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
