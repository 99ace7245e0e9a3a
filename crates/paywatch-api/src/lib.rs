//! paywatch's HTTP API (axum): payment lookups by `(network, payment)` (single, batch and
//! `expect` forms), reconciliation listings and totals (JSON or CSV), the payment event
//! stream (SSE), authorization lookups for settlements that timed out, intent reveals,
//! review v1 verification, health and Prometheus metrics. Every refusal is a non-2xx
//! status with a JSON body `{"reason": "<code>", "message": "<what is wrong and how to
//! fix it>"}`.

mod access;
mod authorizations;
mod error;
mod events;
mod health;
mod intents;
mod openapi;
mod payments;
mod reconcile;
mod reviews;
mod webhooks;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};
use metrics_exporter_prometheus::PrometheusHandle;
use paywatch_core::config::ChainsConfig;
use paywatch_evm::ChainCalls;
use paywatch_store::Store;
use tokio_util::sync::CancellationToken;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

pub use access::AccessControl;
pub use authorizations::{AuthorizationStatus, AuthorizationView, lookup_authorization};
pub use error::{ApiError, ErrorBody};
pub use events::{EventFeed, EventView, event_stream};
pub use openapi::ApiDoc;
pub use payments::{
    BatchAnswer, BatchItem, BatchRequest, BatchResponse, Expectation, ExpectedParams, HistoryView,
    IntentView, MismatchView, PaymentHistory, PaymentView, RefundView, check_expectation, lookup_payment,
    payment_history,
};
pub use reconcile::{ListParams, ListedPayment, PaymentPage, Totals, TotalsGroup, list_page};
pub use reviews::{CheckResult, ReviewRules, ReviewSubmission, VerifyResponse, verify_review};
pub use webhooks::{EVENT_ID_HEADER, SIGNATURE_HEADER, WebhookSender, signature};

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    /// The store.
    pub store: Store,
    /// The watched networks.
    pub chains: Arc<ChainsConfig>,
    /// Renders the Prometheus metrics; `None` when no recorder is installed.
    pub metrics: Option<PrometheusHandle>,
    /// Asks the EVM networks by `eth_call`: contract-wallet signatures, authorization states.
    pub chain_calls: ChainCalls,
    /// Cancelled when paywatch stops: long-lived responses (the event stream) end with it.
    pub shutdown: CancellationToken,
    /// Bearer tokens and rate limits (`[api]`).
    pub access: AccessControl,
    /// Wakes the event streams when events are committed.
    pub events: EventFeed,
}

/// The largest request body the API reads.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

impl AppState {
    /// The state for `chains` on `store`, with RPCs for contract-wallet checks connected
    /// on first use.
    pub fn new(store: Store, chains: Arc<ChainsConfig>, metrics: Option<PrometheusHandle>) -> Self {
        Self {
            chain_calls: ChainCalls::new(&chains),
            access: AccessControl::new(&chains.api),
            store,
            chains,
            metrics,
            shutdown: CancellationToken::new(),
            events: EventFeed::default(),
        }
    }
}

/// Only `/healthz` and `/metrics`: what a `--role workers` process serves, for probes and
/// scraping (every other path is 404 `route_not_found`).
pub fn ops_router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/metrics", get(health::metrics))
        .fallback(error::not_found)
        .layer(middleware::from_fn_with_state(state.clone(), access::guard))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// The API's routes.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/payments", get(reconcile::list))
        .route("/v1/payments:lookup", post(payments::batch))
        .route("/v1/totals", get(reconcile::totals))
        .route("/v1/events", get(events::events))
        .route("/v1/payments/{network}/{payment}", get(payments::lookup))
        .route("/v1/payments/{network}/{payment}/history", get(payments::history))
        .route(
            "/v1/authorizations/{network}/{asset}/{payer}/{nonce}",
            get(authorizations::lookup),
        )
        .route("/v1/intents/reveal", post(intents::reveal))
        .route("/v1/reviews/verify", post(reviews::verify))
        .route("/healthz", get(health::healthz))
        .route("/metrics", get(health::metrics))
        .route("/openapi.json", get(openapi::openapi))
        .fallback(error::not_found)
        .layer(middleware::from_fn_with_state(state.clone(), access::guard))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            Duration::from_secs(30),
        ))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
