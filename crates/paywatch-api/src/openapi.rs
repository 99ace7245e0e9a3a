//! `GET /openapi.json`: the OpenAPI 3.1 document of the HTTP API, generated (`utoipa`) from
//! the same handlers and types the server runs, so it cannot drift from them.

use axum::Json;
use utoipa::OpenApi;

use paywatch_query::{
    AuthorizationStatus, AuthorizationView, BatchAnswer, BatchItem, BatchRequest, BatchResponse, CheckResult,
    EventView, EvidenceView, Expectation, HistoryView, IntentView, ListedPayment, ListedTransfer,
    MismatchView, NetworkHealth, PaymentHistory, PaymentPage, PaymentView, ProofView, RefundView,
    RevealRequest, ReviewPage, ReviewSubmission, ReviewView, SaltBindingView, Totals, TotalsGroup,
    TransferPage, VerifyResponse,
};

use crate::error::ErrorBody;
use crate::{authorizations, events, health, intents, payments, reconcile, reviews};

/// The document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "paywatch",
        description = "Did this x402 payment happen, is it final, and was it refunded? Every refusal is a non-2xx status with {reason, message}."
    ),
    paths(
        payments::lookup,
        payments::history,
        payments::proof,
        payments::evidence,
        payments::batch,
        authorizations::lookup,
        reconcile::list,
        reconcile::totals,
        reconcile::transfers,
        events::events,
        intents::reveal,
        reviews::verify,
        reviews::published,
        reviews::list,
        health::healthz,
        health::readyz,
        health::metrics
    ),
    components(schemas(
        ErrorBody,
        AuthorizationView,
        AuthorizationStatus,
        PaymentView,
        RefundView,
        Expectation,
        MismatchView,
        HistoryView,
        PaymentHistory,
        BatchItem,
        BatchRequest,
        BatchAnswer,
        BatchResponse,
        ListedPayment,
        PaymentPage,
        ListedTransfer,
        TransferPage,
        Totals,
        TotalsGroup,
        EventView,
        IntentView,
        RevealRequest,
        SaltBindingView,
        CheckResult,
        ReviewSubmission,
        VerifyResponse,
        ReviewView,
        ReviewPage,
        ProofView,
        EvidenceView,
        NetworkHealth
    ))
)]
pub struct ApiDoc;

/// The handler.
pub(crate) async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
