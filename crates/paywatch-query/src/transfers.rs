//! The transfers a network kept, for finance teams: a seller's incoming and outgoing money
//! with `keep_transfers = "pay_to"`, else the payments' transfers and possible refunds —
//! each with the payment it moved or refunds — a page at a time with a keyset cursor, or
//! every page in turn for CSV downloads at constant memory.

use futures::{Stream, stream};
use paywatch_core::config::NetworkConfig;
use paywatch_core::listing::{TransferCursor, TransferFilter};
use paywatch_store::{Store, StoredTransfer};
use serde::Deserialize;

use crate::listings::{STREAM_PAGE, address_param, bad_query, cut_page, network_and_times, page_limit};
use crate::views::{ListedTransfer, TransferPage, listed_transfer};
use crate::{Queries, QueryError};

/// The filter of a transfer listing, as the HTTP query string and the gRPC
/// `ListTransfers` request give it.
#[derive(Debug, Clone, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TransferParams {
    /// Network: CAIP-2 id or alias (required).
    pub network: Option<String>,
    /// Only transfers from or to this address.
    pub address: Option<String>,
    /// Only transfers from this address.
    pub from_address: Option<String>,
    /// Only transfers to this address.
    pub to_address: Option<String>,
    /// Only transfers of this asset.
    pub asset: Option<String>,
    /// Block time at or after, RFC 3339.
    pub from: Option<String>,
    /// Block time before, RFC 3339.
    pub to: Option<String>,
    /// Transfers per JSON page, 1 to 1,000 (default 100).
    pub limit: Option<u32>,
    /// Continue after this cursor (a page's `next_cursor`).
    pub cursor: Option<String>,
}

/// The filter, cursor and network a transfer query names.
fn filter_of<'a>(
    queries: &'a Queries,
    params: &TransferParams,
) -> Result<(TransferFilter, Option<TransferCursor>, &'a NetworkConfig), QueryError> {
    let (network, from, to) = network_and_times(
        queries,
        params.network.as_deref(),
        params.from.as_deref(),
        params.to.as_deref(),
    )?;
    let address = |param: &str, value: &Option<String>| address_param(network, param, value);
    let cursor = params
        .cursor
        .as_deref()
        .map(|c| c.parse::<TransferCursor>().map_err(|e| bad_query(e.to_string())))
        .transpose()?;
    let filter = TransferFilter {
        network: network.id.clone(),
        address: address("address", &params.address)?,
        from_address: address("from_address", &params.from_address)?,
        to_address: address("to_address", &params.to_address)?,
        asset: address("asset", &params.asset)?,
        from,
        to,
    };
    Ok((filter, cursor, network))
}

fn cursor_after(listed: &StoredTransfer) -> TransferCursor {
    let position = &listed.transfer.position;
    TransferCursor {
        block_number: position.block_number,
        tx_id: position.tx_id.clone(),
        event_index: position.event_index,
    }
}

/// `page` as listed rows, each final when at or below the network's final block.
async fn listed(
    store: &Store,
    network: &NetworkConfig,
    page: Vec<StoredTransfer>,
) -> Result<Vec<ListedTransfer>, QueryError> {
    let head = store
        .chain_head(&network.id.to_string())
        .await
        .map_err(QueryError::store)?;
    let final_block = head.and_then(|h| h.final_block);
    Ok(page
        .into_iter()
        .map(|t| listed_transfer(network, final_block, t))
        .collect())
}

/// One page of kept transfers: what the JSON listing and the gRPC `ListTransfers` answer.
pub async fn transfer_page(queries: &Queries, params: &TransferParams) -> Result<TransferPage, QueryError> {
    let (filter, after, network) = filter_of(queries, params)?;
    let limit = page_limit(params.limit)?;
    let mut page = queries
        .store
        .list_transfers(&filter, after.as_ref(), limit + 1)
        .await
        .map_err(QueryError::store)?;
    let has_more = cut_page(&mut page, limit);
    let next_cursor = page.last().map(cursor_after).or(after).map(|c| c.to_string());
    Ok(TransferPage {
        transfers: listed(&queries.store, network, page).await?,
        next_cursor,
        has_more,
    })
}

/// Every kept transfer a listing matches, a store page at a time (from its `cursor` on;
/// `limit` is ignored): what the CSV download streams. A store failure ends the stream.
pub fn transfer_pages(
    queries: &Queries,
    params: &TransferParams,
) -> Result<impl Stream<Item = Result<Vec<ListedTransfer>, QueryError>> + Send + use<>, QueryError> {
    let (filter, after, network) = filter_of(queries, params)?;
    let (store, network) = (queries.store.clone(), network.clone());
    Ok(stream::unfold(Some(after), move |next| {
        let (store, filter, network) = (store.clone(), filter.clone(), network.clone());
        async move {
            let after = next?;
            let page = match store.list_transfers(&filter, after.as_ref(), STREAM_PAGE).await {
                Ok(page) => page,
                Err(error) => return Some((Err(QueryError::store(error)), None)),
            };
            let following = (page.len() == STREAM_PAGE as usize).then(|| page.last().map(cursor_after));
            Some((listed(&store, &network, page).await, following))
        }
    }))
}
