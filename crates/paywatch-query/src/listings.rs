//! Reconciliation for finance teams: payments listed by network, payer, pay_to, asset,
//! memo, facilitator, state, method and block-time range, a page at a time with a keyset
//! cursor (or every page in turn, for CSV downloads at constant memory), and totals by day,
//! asset, pay_to, facilitator or method as exact integers, summed in the database.

use std::collections::BTreeMap;
use std::str::FromStr;

use alloy_primitives::U256;
use futures::{Stream, stream};
use paywatch_core::config::{NetworkConfig, Verification};
use paywatch_core::listing::{PageCursor, PaymentFilter, TotalsKey};
use paywatch_core::state::PaymentState;
use paywatch_core::vocabulary::spellings;
use paywatch_core::{PaymentMethod, Reason};
use paywatch_store::{Store, StoreError, StoredPayment};
use serde::Deserialize;
use strum::VariantArray;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::payments::{canonical_address, is_verified, resolve_network};
use crate::views::{ListedPayment, PaymentPage, Totals, TotalsGroup, listed};
use crate::{Queries, QueryError};

/// Most payments in one page.
const MAX_PAGE: u32 = 1000;
/// Payments in one page when `limit` is not given.
const DEFAULT_PAGE: u32 = 100;
/// Rows read per store query by [`listing_pages`] and the transfers' CSV.
pub(crate) const STREAM_PAGE: u32 = 1000;

/// The filter of a listing or of totals, as the HTTP query string and the gRPC
/// `ListPayments` and `GetTotals` requests give it.
#[derive(Debug, Clone, Default, Deserialize, utoipa::IntoParams)]
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
    #[param(value_type = Option<PaymentState>)]
    pub state: Option<String>,
    /// Only payments settled by this method.
    #[param(value_type = Option<PaymentMethod>)]
    pub method: Option<String>,
    /// Block time at or after, RFC 3339.
    pub from: Option<String>,
    /// Block time before, RFC 3339.
    pub to: Option<String>,
    /// Payments per JSON page, 1 to 1,000 (default 100).
    pub limit: Option<u32>,
    /// Continue after this cursor (a page's `next_cursor`).
    pub cursor: Option<String>,
    /// Totals only: what the groups are keyed by (`asset` when not given).
    #[param(value_type = Option<TotalsKey>)]
    pub group_by: Option<String>,
}

pub(crate) fn bad_query(message: impl Into<String>) -> QueryError {
    QueryError::new(Reason::MalformedQuery, message)
}

fn unix_seconds(name: &str, value: &str) -> Result<i64, QueryError> {
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
) -> Result<Option<T>, QueryError> {
    value
        .as_deref()
        .map(|text| {
            text.parse::<T>().map_err(|_| {
                bad_query(format!(
                    "{name}={text}: expected one of {}",
                    spellings::<T>().join(", ")
                ))
            })
        })
        .transpose()
}

/// The network a listing names (required), and its block-time range (`from`, `to`) as
/// Unix seconds.
pub(crate) fn network_and_times<'a>(
    queries: &'a Queries,
    network: Option<&str>,
    from: Option<&str>,
    to: Option<&str>,
) -> Result<(&'a NetworkConfig, Option<i64>, Option<i64>), QueryError> {
    let name = network.ok_or_else(|| bad_query("network is required, e.g. ?network=eip155:8453"))?;
    let network = resolve_network(queries, name)?;
    let from = from.map(|v| unix_seconds("from", v)).transpose()?;
    let to = to.map(|v| unix_seconds("to", v)).transpose()?;
    if let (Some(from), Some(to)) = (from, to)
        && from >= to
    {
        return Err(bad_query("from must be before to"));
    }
    Ok((network, from, to))
}

/// `value` of parameter `param` as an address in `network`'s canonical spelling.
pub(crate) fn address_param(
    network: &NetworkConfig,
    param: &str,
    value: &Option<String>,
) -> Result<Option<String>, QueryError> {
    value
        .as_deref()
        .map(|v| canonical_address(network, param, v))
        .transpose()
}

/// The filter and network a query names.
pub(crate) fn filter_of<'a>(
    queries: &'a Queries,
    query: &ListParams,
) -> Result<(PaymentFilter, &'a NetworkConfig), QueryError> {
    let (network, from, to) = network_and_times(
        queries,
        query.network.as_deref(),
        query.from.as_deref(),
        query.to.as_deref(),
    )?;
    let address = |param: &str, value: &Option<String>| address_param(network, param, value);
    let payment_state = one_of::<PaymentState>("state", &query.state)?;
    let method = one_of::<PaymentMethod>("method", &query.method)?;
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

pub(crate) fn cursor_after(payment: &StoredPayment) -> PageCursor {
    PageCursor {
        block_number: payment.block_number,
        payment_id: payment.payment_id.clone(),
        index_in_tx: payment.index_in_tx,
    }
}

/// The `cursor` parameter, parsed.
pub(crate) fn cursor_of(params: &ListParams) -> Result<Option<PageCursor>, QueryError> {
    if params.group_by.is_some() {
        return Err(bad_query("group_by belongs to /v1/totals"));
    }
    params
        .cursor
        .as_deref()
        .map(|c| c.parse::<PageCursor>().map_err(|e| bad_query(e.to_string())))
        .transpose()
}

/// The `limit` parameter: rows per page, 1 to 1,000 (default 100).
pub(crate) fn page_limit(limit: Option<u32>) -> Result<u32, QueryError> {
    let limit = limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(bad_query(format!("limit={limit}: expected 1 to {MAX_PAGE}")));
    }
    Ok(limit)
}

/// Cuts `rows` (read with one row past the page, which tells whether another page exists:
/// an exactly full last page has none) to `limit`; whether more matched.
pub(crate) fn cut_page<T>(rows: &mut Vec<T>, limit: u32) -> bool {
    let has_more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    has_more
}

/// One page of a listing: what the JSON listing and the gRPC `ListPayments` answer.
pub async fn list_page(queries: &Queries, params: &ListParams) -> Result<PaymentPage, QueryError> {
    let (filter, network) = filter_of(queries, params)?;
    let after = cursor_of(params)?;
    let limit = page_limit(params.limit)?;
    let mut page = queries
        .store
        .list_payments(&filter, after.as_ref(), limit + 1)
        .await
        .map_err(QueryError::store)?;
    let has_more = cut_page(&mut page, limit);
    let next_cursor = page.last().map(cursor_after).or(after).map(|c| c.to_string());
    let mut payments: Vec<ListedPayment> = page.into_iter().map(|p| listed(network, p)).collect();
    mark_verified(&queries.store, network, &mut payments)
        .await
        .map_err(QueryError::store)?;
    Ok(PaymentPage {
        payments,
        next_cursor,
        has_more,
    })
}

/// Under `verification = "lagging"`, sets each row's `verified` as a lookup answers it.
async fn mark_verified(
    store: &Store,
    network: &NetworkConfig,
    rows: &mut [ListedPayment],
) -> Result<(), StoreError> {
    if network.verification != Verification::Lagging || rows.is_empty() {
        return Ok(());
    }
    let name = network.id.to_string();
    let audited_to = store.audited_to(&name).await?;
    let keys: Vec<(String, u32)> = rows.iter().map(|r| (r.payment.clone(), r.index_in_tx)).collect();
    let coverage = store.audit_coverage(&name, &keys).await?;
    for (row, key) in rows.iter_mut().zip(&keys) {
        let (last_block, found) = coverage.get(key).copied().unwrap_or((row.block_number, false));
        row.verified = Some(is_verified(audited_to, last_block, found));
    }
    Ok(())
}

/// Every payment a listing matches, a store page at a time (from its `cursor` on; `limit`
/// is ignored): what the CSV download streams. A store failure ends the stream with it.
pub fn listing_pages(
    queries: &Queries,
    params: &ListParams,
) -> Result<impl Stream<Item = Result<Vec<ListedPayment>, QueryError>> + Send + use<>, QueryError> {
    let (filter, network) = filter_of(queries, params)?;
    let after = cursor_of(params)?;
    let (store, network) = (queries.store.clone(), network.clone());
    Ok(stream::unfold(Some(after), move |next| {
        let (store, filter, network) = (store.clone(), filter.clone(), network.clone());
        async move {
            let after = next?;
            let page = match store.list_payments(&filter, after.as_ref(), STREAM_PAGE).await {
                Ok(page) => page,
                Err(error) => return Some((Err(QueryError::store(error)), None)),
            };
            let following = (page.len() == STREAM_PAGE as usize).then(|| page.last().map(cursor_after));
            let mut rows: Vec<ListedPayment> = page.into_iter().map(|p| listed(&network, p)).collect();
            if let Err(error) = mark_verified(&store, &network, &mut rows).await {
                return Some((Err(QueryError::store(error)), None));
            }
            Some((Ok(rows), following))
        }
    }))
}

/// Running sums of one group.
#[derive(Default)]
struct Sums {
    payments: u64,
    by_state: BTreeMap<String, u64>,
    final_amount: U256,
    pending_amount: U256,
    refunded_amount: U256,
    held_amount: U256,
    fee_amount: U256,
}

/// Exact sums of every payment a listing matches, per group (`group_by`, by default
/// `asset`) and state.
pub async fn totals(queries: &Queries, query: &ListParams) -> Result<Totals, QueryError> {
    if query.limit.is_some() || query.cursor.is_some() {
        return Err(bad_query(
            "totals cover every matching payment: drop limit and cursor",
        ));
    }
    let key = one_of("group_by", &query.group_by)?.unwrap_or(TotalsKey::Asset);
    let (filter, _) = filter_of(queries, query)?;
    let mut groups: BTreeMap<String, Sums> = BTreeMap::new();
    for totals in queries
        .store
        .totals(&filter, key)
        .await
        .map_err(QueryError::store)?
    {
        let sums = groups
            .entry(totals.key.unwrap_or_else(|| "unknown".to_string()))
            .or_default();
        sums.payments += totals.payments;
        *sums.by_state.entry(totals.state.to_string()).or_default() += totals.payments;
        if totals.state.is_final() {
            sums.final_amount += totals.amount;
            sums.fee_amount += totals.fee_amount;
        } else if totals.state == PaymentState::Pending {
            sums.pending_amount += totals.amount;
        }
        sums.refunded_amount += totals.refunded_amount;
        sums.held_amount += totals.held_amount;
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
            held_amount: sums.held_amount.to_string(),
            fee_amount: sums.fee_amount.to_string(),
        })
        .collect();
    Ok(Totals {
        group_by: key,
        groups,
    })
}
