//! `GET /openapi.json`: the OpenAPI 3.1 document of the HTTP API, generated (`utoipa`) from
//! the same handlers and types the server runs, so it cannot drift from them.

use axum::Json;
use utoipa::OpenApi;

use crate::authorizations::{self, AuthorizationStatus, AuthorizationView};
use crate::error::ErrorBody;
use crate::events::{self, EventView};
use crate::health;
use crate::intents::{self, RevealRequest};
use crate::payments::{
    self, BatchAnswer, BatchItem, BatchRequest, BatchResponse, Expectation, HistoryView, IntentView,
    MismatchView, PaymentHistory, PaymentView, RefundView,
};
use crate::reconcile::{self, ListedPayment, PaymentPage, Totals, TotalsGroup};
use crate::reviews::{self, CheckResult, ReviewSubmission, VerifyResponse};

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
        payments::batch,
        authorizations::lookup,
        reconcile::list,
        reconcile::totals,
        events::events,
        intents::reveal,
        reviews::verify,
        health::healthz,
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
        Totals,
        TotalsGroup,
        EventView,
        IntentView,
        RevealRequest,
        CheckResult,
        ReviewSubmission,
        VerifyResponse
    ))
)]
pub struct ApiDoc;

/// The handler.
pub(crate) async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
