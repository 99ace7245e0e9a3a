//! Reconciliation for finance teams: `GET /v1/payments` lists payments by network, payer,
//! pay_to, asset, state and block-time range, a page at a time with a keyset cursor, and
//! `GET /v1/totals` sums them by day, asset, pay_to or facilitator as exact integers, in the
//! database (no payment row is read into the process). Both answer CSV
//! instead of JSON to `Accept: text/csv`; the CSV listing streams every matching payment
//! page by page, so a month of payments downloads at constant memory.

use std::collections::BTreeMap;
use std::str::FromStr;

use alloy_primitives::U256;
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::stream;
use paywatch_core::config::NetworkConfig;
use paywatch_core::listing::{PageCursor, PaymentFilter, TotalsKey};
use paywatch_core::state::PaymentState;
use paywatch_core::{PaymentMethod, Reason};
use paywatch_store::StoredPayment;
use serde::{Deserialize, Serialize};
use strum::VariantArray;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::AppState;
use crate::error::{ApiError, ErrorBody};
use crate::payments::{canonical_address, resolve_network, rfc3339_seconds, token_of};

/// Most payments in one JSON page.
pub(crate) const MAX_PAGE: u32 = 1000;
/// Payments in one JSON page when `limit` is not given.
const DEFAULT_PAGE: u32 = 100;
/// Payments read per store query while streaming CSV.
const STREAM_PAGE: u32 = 1000;

/// The filter parameters both endpoints take (and the gRPC `ListPayments`).
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Network: CAIP-2 id or alias (required).
    pub network: Option<String>,
    /// Only payments by this payer.
    pub payer: Option<String>,
    /// Only payments to this pay_to.
    pub pay_to: Option<String>,
    /// Only payments of this asset.
    pub asset: Option<String>,
    /// Only payments whose transaction's memo is exactly this (Solana).
    pub memo: Option<String>,
    /// Only payments this facilitator settled (paid the transaction's fee; Solana).
    pub facilitator: Option<String>,
    /// Only payments in this state.
    pub state: Option<String>,
    /// Only payments settled by this method: `eip3009`, `permit2`, `upto`, `erc7710` or `spl`.
    pub method: Option<String>,
    /// Block time at or after, RFC 3339.
    pub from: Option<String>,
    /// Block time before, RFC 3339.
    pub to: Option<String>,
    /// Payments per JSON page, 1 to 1,000 (default 100).
    pub limit: Option<u32>,
    /// Continue after this cursor (a page's `next_cursor`).
    pub cursor: Option<String>,
    /// Totals only: `day`, `asset`, `pay_to`, `facilitator` or `method`.
    pub group_by: Option<String>,
}

/// One payment of a listing (and one CSV row, in this column order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ListedPayment {
    /// CAIP-2 network id.
    pub network: String,
    /// Transaction hash (EVM) or signature (Solana).
    pub payment: String,
    /// Its number in the transaction.
    pub index_in_tx: u32,
    /// Block (slot) number.
    pub block_number: u64,
    /// Block time, RFC 3339 UTC.
    pub block_time: Option<String>,
    /// Who paid.
    pub payer: String,
    /// Who was paid.
    pub pay_to: String,
    /// Token contract or mint.
    pub asset: String,
    /// The asset's symbol from `chains.toml`.
    pub asset_symbol: Option<String>,
    /// The asset's decimals from `chains.toml`.
    pub asset_decimals: Option<u8>,
    /// Exact amount in the asset's smallest unit.
    pub amount: String,
    /// Sum of its final refunds, exact integer.
    pub refunded_amount: String,
    /// `pending`, `paid`, `partially_refunded`, `refunded` or `dropped`.
    #[schema(value_type = String)]
    pub payment_state: PaymentState,
    /// The transaction's memo (Solana's SPL Memo), if any.
    pub memo: Option<String>,
    /// Who settled it (paid the transaction's fee; Solana), when recorded.
    pub facilitator: Option<String>,
    /// How the money moved: `eip3009`, `permit2`, `upto`, `erc7710` or `spl`.
    #[schema(value_type = String)]
    pub method: PaymentMethod,
}

/// A JSON page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PaymentPage {
    /// The payments, in chain order.
    pub payments: Vec<ListedPayment>,
    /// Where this page ends: pass it as `cursor` for the next page, or later to get only
    /// payments listed after it (absent when nothing has been listed yet).
    pub next_cursor: Option<String>,
    /// Whether more payments matched than this page holds.
    pub has_more: bool,
}

/// Sums of one group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TotalsGroup {
    /// The day (`YYYY-MM-DD`, UTC), asset, pay_to, facilitator (`unknown` when not
    /// recorded) or method.
    pub key: String,
    /// Payments in the group, any state.
    pub payments: u64,
    /// Payments per state.
    pub by_state: BTreeMap<String, u64>,
    /// Sum of final payments (paid, partially refunded, refunded), exact integer.
    pub final_amount: String,
    /// Sum of pending payments, exact integer.
    pub pending_amount: String,
    /// Sum of final refunds, exact integer.
    pub refunded_amount: String,
}

/// The totals answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Totals {
    /// `day`, `asset`, `pay_to`, `facilitator` or `method`.
    pub group_by: String,
    /// One entry per key, in key order.
    pub groups: Vec<TotalsGroup>,
}

fn bad_query(message: impl Into<String>) -> ApiError {
    ApiError::new(Reason::MalformedQuery, message)
}

fn unix_seconds(name: &str, value: &str) -> Result<i64, ApiError> {
    OffsetDateTime::parse(value, &Rfc3339)
        .map(OffsetDateTime::unix_timestamp)
        .map_err(|e| {
            bad_query(format!(
                "{name}={value}: {e}; expected RFC 3339, e.g. 2026-12-01T00:00:00Z"
            ))
        })
}

/// The value of parameter `name`, one of the spellings of `T` (a strum enum), if given.
fn one_of<T: FromStr + VariantArray + Into<&'static str> + Copy>(
    name: &str,
    value: &Option<String>,
) -> Result<Option<T>, ApiError> {
    value
        .as_deref()
        .map(|text| {
            text.parse::<T>().map_err(|_| {
                let spellings: Vec<&str> = T::VARIANTS.iter().map(|v| (*v).into()).collect();
                bad_query(format!("{name}={text}: expected one of {}", spellings.join(", ")))
            })
        })
        .transpose()
}

/// The filter and network a query names.
fn filter_of<'a>(
    state: &'a AppState,
    query: &ListParams,
) -> Result<(PaymentFilter, &'a NetworkConfig), ApiError> {
    let name = query
        .network
        .as_deref()
        .ok_or_else(|| bad_query("network is required, e.g. ?network=eip155:8453"))?;
    let network = resolve_network(state, name)?;
    let address = |param: &str, value: &Option<String>| {
        value
            .as_deref()
            .map(|v| canonical_address(network, param, v))
            .transpose()
    };
    let payment_state = one_of::<PaymentState>("state", &query.state)?;
    let method = one_of::<PaymentMethod>("method", &query.method)?;
    let from = query
        .from
        .as_deref()
        .map(|v| unix_seconds("from", v))
        .transpose()?;
    let to = query.to.as_deref().map(|v| unix_seconds("to", v)).transpose()?;
    if let (Some(from), Some(to)) = (from, to)
        && from >= to
    {
        return Err(bad_query("from must be before to"));
    }
    Ok((
        PaymentFilter {
            network: network.id.clone(),
            payer: address("payer", &query.payer)?,
            pay_to: address("pay_to", &query.pay_to)?,
            asset: address("asset", &query.asset)?,
            memo: query.memo.clone(),
            facilitator: address("facilitator", &query.facilitator)?,
            state: payment_state,
            method,
            from,
            to,
        },
        network,
    ))
}

fn listed(network: &NetworkConfig, payment: StoredPayment) -> ListedPayment {
    let token = token_of(network, &payment.asset);
    ListedPayment {
        network: payment.network,
        payment: payment.payment_id,
        index_in_tx: payment.index_in_tx,
        block_number: payment.block_number,
        block_time: payment.block_time.and_then(rfc3339_seconds),
        payer: payment.payer,
        pay_to: payment.pay_to,
        asset: payment.asset,
        asset_symbol: token.map(|t| t.symbol.clone()),
        asset_decimals: token.map(|t| t.decimals),
        amount: payment.amount,
        refunded_amount: payment.refunded_amount,
        payment_state: payment.state,
        memo: payment.memo,
        facilitator: payment.facilitator,
        method: payment.method,
    }
}

fn cursor_after(payment: &StoredPayment) -> PageCursor {
    PageCursor {
        block_number: payment.block_number,
        payment_id: payment.payment_id.clone(),
        index_in_tx: payment.index_in_tx,
    }
}

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

/// The listing handler: a JSON page, or every matching payment as streamed CSV.
#[utoipa::path(get, path = "/v1/payments", tag = "finance", params(ListParams),
    responses((status = 200, description = "A page (JSON), or every matching payment as CSV to `Accept: text/csv`", content((PaymentPage = "application/json"), (String = "text/csv"))),
        (status = 404, body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<ListParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query?;
    if !wants_csv(&headers) {
        return list_page(&state, &query)
            .await
            .map(|page| Json(page).into_response());
    }
    let (filter, network) = filter_of(&state, &query)?;
    let after = cursor_of(&query)?;
    let network = network.clone();
    let pages = stream::unfold(Some((after, true)), move |next| {
        let (state, filter, network) = (state.clone(), filter.clone(), network.clone());
        async move {
            let (after, first) = next?;
            let page = match state
                .store
                .list_payments(&filter, after.as_ref(), STREAM_PAGE)
                .await
            {
                Ok(page) => page,
                Err(error) => {
                    tracing::error!(%error, "store error while streaming CSV");
                    return Some((Err(std::io::Error::other("the store failed mid-stream")), None));
                }
            };
            let following =
                (page.len() == STREAM_PAGE as usize).then(|| (page.last().map(cursor_after), false));
            let rows: Vec<ListedPayment> = page.into_iter().map(|p| listed(&network, p)).collect();
            if rows.is_empty() && !first {
                return None;
            }
            let bytes = if rows.is_empty() {
                Ok(Bytes::from(CSV_HEADER))
            } else {
                csv_bytes(&rows, first).map_err(std::io::Error::other)
            };
            Some((bytes, following))
        }
    });
    Ok(csv_response(Body::from_stream(pages)))
}

/// The `cursor` parameter, parsed.
fn cursor_of(params: &ListParams) -> Result<Option<PageCursor>, ApiError> {
    if params.group_by.is_some() {
        return Err(bad_query("group_by belongs to /v1/totals"));
    }
    params
        .cursor
        .as_deref()
        .map(|c| c.parse::<PageCursor>().map_err(|e| bad_query(e.to_string())))
        .transpose()
}

/// One page of a listing: what the JSON listing and the gRPC `ListPayments` answer.
pub async fn list_page(state: &AppState, params: &ListParams) -> Result<PaymentPage, ApiError> {
    let (filter, network) = filter_of(state, params)?;
    let after = cursor_of(params)?;
    let limit = params.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(bad_query(format!("limit={limit}: expected 1 to {MAX_PAGE}")));
    }
    // One row past the page tells whether another page exists (an exactly full last page
    // has none).
    let mut page = state
        .store
        .list_payments(&filter, after.as_ref(), limit + 1)
        .await
        .map_err(ApiError::store)?;
    let has_more = page.len() > limit as usize;
    page.truncate(limit as usize);
    let next_cursor = page.last().map(cursor_after).or(after).map(|c| c.to_string());
    Ok(PaymentPage {
        payments: page.into_iter().map(|p| listed(network, p)).collect(),
        next_cursor,
        has_more,
    })
}

/// The CSV header of a listing with no rows.
const CSV_HEADER: &str = "network,payment,index_in_tx,block_number,block_time,payer,pay_to,asset,asset_symbol,asset_decimals,amount,refunded_amount,payment_state,memo,facilitator,method\n";

/// Running sums of one group.
#[derive(Default)]
struct Sums {
    payments: u64,
    by_state: BTreeMap<String, u64>,
    final_amount: U256,
    pending_amount: U256,
    refunded_amount: U256,
}

/// The totals handler.
#[utoipa::path(get, path = "/v1/totals", tag = "finance", params(ListParams),
    responses((status = 200, description = "Exact sums per group (JSON, or CSV to `Accept: text/csv`)", content((Totals = "application/json"), (String = "text/csv"))),
        (status = 404, body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn totals(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<ListParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query?;
    if query.limit.is_some() || query.cursor.is_some() {
        return Err(bad_query(
            "totals cover every matching payment: drop limit and cursor",
        ));
    }
    let group_by = query.group_by.clone().unwrap_or_else(|| "asset".to_string());
    let key: TotalsKey = group_by.parse().map_err(|_| {
        bad_query(format!(
            "group_by={group_by}: expected day, asset, pay_to, facilitator or method"
        ))
    })?;
    let (filter, _) = filter_of(&state, &query)?;
    let mut groups: BTreeMap<String, Sums> = BTreeMap::new();
    for totals in state.store.totals(&filter, key).await.map_err(ApiError::store)? {
        let sums = groups
            .entry(totals.key.unwrap_or_else(|| "unknown".to_string()))
            .or_default();
        sums.payments += totals.payments;
        *sums.by_state.entry(totals.state.to_string()).or_default() += totals.payments;
        if totals.state.is_final() {
            sums.final_amount += totals.amount;
        } else if totals.state == PaymentState::Pending {
            sums.pending_amount += totals.amount;
        }
        sums.refunded_amount += totals.refunded_amount;
    }
    let groups: Vec<TotalsGroup> = groups
        .into_iter()
        .map(|(key, sums)| TotalsGroup {
            key,
            payments: sums.payments,
            by_state: sums.by_state,
            final_amount: sums.final_amount.to_string(),
            pending_amount: sums.pending_amount.to_string(),
            refunded_amount: sums.refunded_amount.to_string(),
        })
        .collect();
    if wants_csv(&headers) {
        let rows: Vec<TotalsCsvRow> = groups.iter().map(TotalsCsvRow::from).collect();
        let body = if rows.is_empty() {
            Bytes::from_static(TOTALS_CSV_HEADER.as_bytes())
        } else {
            csv_bytes(&rows, true).map_err(|e| ApiError::new(Reason::StoreUnavailable, e.to_string()))?
        };
        return Ok(csv_response(Body::from(body)));
    }
    Ok(Json(Totals { group_by, groups }).into_response())
}

/// The CSV header of totals with no rows.
const TOTALS_CSV_HEADER: &str = "key,payments,pending,paid,partially_refunded,refunded,dropped,final_amount,pending_amount,refunded_amount\n";

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
        }
    }
}
