//! Reconciliation for finance teams: `GET /v1/payments` and `GET /v1/transfers` (a JSON
//! page, or every matching row as CSV streamed page by page, at constant memory) and
//! `GET /v1/totals` (exact sums per group, JSON or CSV), each answering CSV to
//! `Accept: text/csv`.

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use paywatch_core::Reason;
use paywatch_query::{
    ListParams, PaymentPage, QueryError, Totals, TotalsGroup, TransferPage, TransferParams, list_page,
    listing_pages, totals as sum_totals, transfer_page, transfer_pages,
};
use serde::Serialize;

use crate::error::{ApiError, ErrorBody};
use crate::reads::{ReadParams, Reads};

fn wants_csv(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/csv"))
}

/// CSV text of `rows` (with the header row first when `header` is set).
fn csv_bytes<T: Serialize>(rows: &[T], header: bool) -> Result<Bytes, csv::Error> {
    let mut writer = csv::WriterBuilder::new()
        .has_headers(header)
        .from_writer(Vec::new());
    for row in rows {
        writer.serialize(row)?;
    }
    writer.flush()?;
    Ok(Bytes::from(writer.into_inner().map_err(|e| e.into_error())?))
}

fn csv_response(body: Body) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/csv; charset=utf-8"),
        )],
        body,
    )
        .into_response()
}

/// The CSV header of a listing with no rows.
const CSV_HEADER: &str = "network,payment,index_in_tx,block_number,block_time,payer,pay_to,asset,asset_symbol,asset_decimals,amount,refunded_amount,payment_state,memo,facilitator,method,fee_amount,captured_amount,held_amount,released_amount\n";

/// The listing handler: a JSON page, or every matching payment as streamed CSV.
#[utoipa::path(get, path = "/v1/payments", tag = "finance", params(ListParams, ReadParams),
    responses((status = 200, description = "A page (JSON), or every matching payment as CSV to `Accept: text/csv`", content((PaymentPage = "application/json"), (String = "text/csv"))),
        (status = 404, body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn list(
    Reads(queries): Reads,
    headers: HeaderMap,
    query: Result<Query<ListParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query?;
    if !wants_csv(&headers) {
        let page = list_page(&queries, &query).await?;
        return Ok(Json(page).into_response());
    }
    Ok(csv_download(listing_pages(&queries, &query)?, CSV_HEADER))
}

/// The CSV header of a transfer listing with no rows.
const TRANSFERS_CSV_HEADER: &str = "network,transaction,event_index,block_number,block_time,from,to,asset,asset_symbol,asset_decimals,amount,memo,final,role,payment,index_in_tx,refund_rule\n";

/// The transfer listing handler: a JSON page, or every matching kept transfer as
/// streamed CSV.
#[utoipa::path(get, path = "/v1/transfers", tag = "finance", params(TransferParams, ReadParams),
    responses((status = 200, description = "A page of kept transfers (JSON), or every matching one as CSV to `Accept: text/csv`", content((TransferPage = "application/json"), (String = "text/csv"))),
        (status = 404, body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn transfers(
    Reads(queries): Reads,
    headers: HeaderMap,
    query: Result<Query<TransferParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query?;
    if !wants_csv(&headers) {
        let page = transfer_page(&queries, &query).await?;
        return Ok(Json(page).into_response());
    }
    Ok(csv_download(
        transfer_pages(&queries, &query)?,
        TRANSFERS_CSV_HEADER,
    ))
}

/// Every page of `pages` as one CSV body, the header row first (`empty_header` when no
/// row matched). A store failure after the status is sent ends the download short.
fn csv_download<T: Serialize>(
    pages: impl Stream<Item = Result<Vec<T>, QueryError>> + Send + 'static,
    empty_header: &'static str,
) -> Response {
    let mut first = true;
    let chunks = pages.map(move |page| {
        let header = std::mem::replace(&mut first, false);
        match page {
            Ok(rows) if rows.is_empty() => Ok(Bytes::from_static(if header {
                empty_header.as_bytes()
            } else {
                b""
            })),
            Ok(rows) => csv_bytes(&rows, header).map_err(std::io::Error::other),
            Err(error) => {
                // The status is sent already: the download ends short, and the log says why.
                tracing::error!(
                    error = error.internal.as_deref().unwrap_or(&error.message),
                    "store error while streaming CSV"
                );
                Err(std::io::Error::other("the store failed mid-stream"))
            }
        }
    });
    csv_response(Body::from_stream(chunks))
}

/// The totals handler.
#[utoipa::path(get, path = "/v1/totals", tag = "finance", params(ListParams, ReadParams),
    responses((status = 200, description = "Exact sums per group (JSON, or CSV to `Accept: text/csv`)", content((Totals = "application/json"), (String = "text/csv"))),
        (status = 404, body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn totals(
    Reads(queries): Reads,
    headers: HeaderMap,
    query: Result<Query<ListParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query?;
    let totals = sum_totals(&queries, &query).await?;
    if wants_csv(&headers) {
        let rows: Vec<TotalsCsvRow> = totals.groups.iter().map(TotalsCsvRow::from).collect();
        let body = if rows.is_empty() {
            Bytes::from_static(TOTALS_CSV_HEADER.as_bytes())
        } else {
            csv_bytes(&rows, true).map_err(|e| ApiError::new(Reason::StoreUnavailable, e.to_string()))?
        };
        return Ok(csv_response(Body::from(body)));
    }
    Ok(Json(totals).into_response())
}

/// The CSV header of totals with no rows.
const TOTALS_CSV_HEADER: &str = "key,payments,pending,paid,partially_refunded,refunded,dropped,final_amount,pending_amount,refunded_amount,held,released,held_amount,fee_amount\n";

/// One CSV row of totals: the per-state counts as columns.
#[derive(Serialize)]
struct TotalsCsvRow {
    key: String,
    payments: u64,
    pending: u64,
    paid: u64,
    partially_refunded: u64,
    refunded: u64,
    dropped: u64,
    final_amount: String,
    pending_amount: String,
    refunded_amount: String,
    held: u64,
    released: u64,
    held_amount: String,
    fee_amount: String,
}

impl From<&TotalsGroup> for TotalsCsvRow {
    fn from(group: &TotalsGroup) -> Self {
        let count = |state: &str| group.by_state.get(state).copied().unwrap_or(0);
        Self {
            key: group.key.clone(),
            payments: group.payments,
            pending: count("pending"),
            paid: count("paid"),
            partially_refunded: count("partially_refunded"),
            refunded: count("refunded"),
            dropped: count("dropped"),
            final_amount: group.final_amount.clone(),
            pending_amount: group.pending_amount.clone(),
            refunded_amount: group.refunded_amount.clone(),
            held: count("held"),
            released: count("released"),
            held_amount: group.held_amount.clone(),
            fee_amount: group.fee_amount.clone(),
        }
    }
}
