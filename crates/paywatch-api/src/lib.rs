//! paywatch's HTTP API (axum): payment lookups by `(network, payment)` (single, batch and
//! `expect` forms), reconciliation listings and totals (JSON or CSV), the payment event
//! stream (SSE), authorization lookups for settlements that timed out, intent reveals,
//! review v1 verification, health and Prometheus metrics. Every refusal is a non-2xx
//! status with a JSON body `{"reason": "<code>", "message": "<what is wrong and how to
//! fix it>"}`. The handlers only parse requests and render answers: what they answer is
//! `paywatch-query`'s, which the gRPC API serves too.

mod access;
mod authorizations;
mod error;
mod events;
mod health;
mod intents;
mod openapi;
mod payments;
mod reads;
mod reconcile;
mod reviews;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};
use metrics_exporter_prometheus::PrometheusHandle;
use paywatch_core::config::ChainsConfig;
use paywatch_query::Queries;
use paywatch_store::Store;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

pub use error::{ApiError, ErrorBody};
pub use openapi::ApiDoc;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    /// The query operations (and the store, chains and access rules they use), shared by
    /// every request: the middleware clones the state for each one.
    pub queries: Arc<Queries>,
    /// Renders the Prometheus metrics; `None` when no recorder is installed.
    pub metrics: Option<PrometheusHandle>,
}

/// The largest request body the API reads.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

impl AppState {
    /// The state for `chains` on `store`, with RPCs for chain calls connected on first use.
    pub fn new(store: Store, chains: Arc<ChainsConfig>, metrics: Option<PrometheusHandle>) -> Self {
        Self {
            queries: Arc::new(Queries::new(store, chains)),
            metrics,
        }
    }
}

/// Only `/healthz`, `/readyz` and `/metrics`: what a `--role workers` process serves, for
/// probes and scraping (every other path is 404 `route_not_found`).
pub fn ops_router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .fallback(error::not_found)
        .layer(middleware::from_fn_with_state(state.clone(), access::guard))
        .layer(middleware::from_fn(error::log_failures))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// The API's routes. The reads that a replica may answer are routed by `reads::route`;
/// the event stream, authorization lookups (which compare the chain with the freshest
/// store) and the requests that write use the primary.
pub fn router(state: AppState) -> Router {
    let reads = Router::new()
        .route("/v1/payments", get(reconcile::list))
        .route("/v1/payments:lookup", post(payments::batch))
        .route("/v1/totals", get(reconcile::totals))
        .route("/v1/transfers", get(reconcile::transfers))
        .route("/v1/payments/{network}/{payment}", get(payments::lookup))
        .route("/v1/payments/{network}/{payment}/history", get(payments::history))
        .route("/v1/payments/{network}/{payment}/proof", get(payments::proof))
        .route(
            "/v1/payments/{network}/{payment}/evidence",
            get(payments::evidence),
        )
        .route("/v1/reviews", get(reviews::list))
        .route("/v1/reviews/{network}/{payment}", get(reviews::published))
        .route_layer(middleware::from_fn_with_state(state.clone(), reads::route));
    Router::new()
        .merge(reads)
        .route("/v1/events", get(events::events))
        .route(
            "/v1/authorizations/{network}/{asset}/{payer}/{nonce}",
            get(authorizations::lookup),
        )
        .route("/v1/intents/reveal", post(intents::reveal))
        .route("/v1/reviews/verify", post(reviews::verify))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .route("/openapi.json", get(openapi::openapi))
        .fallback(error::not_found)
        .layer(middleware::from_fn_with_state(state.clone(), access::guard))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            Duration::from_secs(30),
        ))
        .layer(middleware::from_fn(error::log_failures))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
