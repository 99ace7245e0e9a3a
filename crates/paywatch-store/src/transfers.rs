//! Kept transfers listed for reconciliation, in chain order with a keyset cursor, each
//! with the payment it moved or the payment it refunds, when it did either.

use paywatch_core::listing::{TransferCursor, TransferFilter};
use paywatch_core::records::TransferRecord;
use paywatch_core::refunds::RefundRule;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::query::transfer_from_row;
use crate::sql::{Bindings, Param, keyset_page};
use crate::{Backend, Store, StoreError, to_i64};

/// A kept transfer and what paywatch made of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTransfer {
    /// The transfer as ingestion recorded it.
    pub transfer: TransferRecord,
    /// The payment (transaction, index in it) whose money this transfer moved.
    pub paid: Option<(String, u32)>,
    /// The payment (transaction, index in it) this transfer refunds, and by which rule.
    pub refunded: Option<(String, u32, RefundRule)>,
}

/// One page of a transfer listing: the transfers `filter` selects, after `after`, in chain
/// order, cut to `limit`, read from each source of kept transfers — the transfers rows and
/// those payment rows hold (`payment_transfers`) — a page of each, merged and cut again, so
/// that both are read from their listing index up to the page, never sorted whole; then
/// each with the payment it moved and the refund it is.
fn listing_sql(
    backend: Backend,
    filter: &TransferFilter,
    after: Option<&TransferCursor>,
    limit: u32,
) -> Result<(String, Bindings), StoreError> {
    let mut bindings = Bindings::new(backend);
    let kept_rows = source_page(&mut bindings, "transfers", filter, after, limit)?;
    let held_rows = source_page(&mut bindings, "payment_transfers", filter, after, limit)?;
    let sql = format!(
        "SELECT t.tx_id, t.event_index, t.block_number, t.block_hash, t.block_time, t.token, \
         t.from_address, t.to_address, t.amount, t.memo, \
         p.payment_id AS paid_payment, p.index_in_tx AS paid_index, \
         r.payment_id AS refunded_payment, r.index_in_tx AS refunded_index, r.rule AS refund_rule \
         FROM (SELECT * FROM ({kept_rows}) kept_rows UNION ALL SELECT * FROM ({held_rows}) held_rows) t \
         LEFT JOIN payments p ON p.network = t.network AND p.payment_id = t.tx_id AND p.event_index = t.event_index \
         LEFT JOIN refunds r ON r.network = t.network AND r.refund_tx_id = t.tx_id AND r.refund_event_index = t.event_index \
         ORDER BY t.block_number, t.tx_id, t.event_index LIMIT {}",
        limit.max(1)
    );
    Ok((sql, bindings))
}

/// The `SELECT` of one listing page from `source` (a table or view of kept transfers'
/// columns), its values pushed onto `bindings`.
fn source_page(
    bindings: &mut Bindings,
    source: &str,
    filter: &TransferFilter,
    after: Option<&TransferCursor>,
    limit: u32,
) -> Result<String, StoreError> {
    let mut sql = format!(
        "SELECT t.network, t.tx_id, t.event_index, t.block_number, t.block_hash, t.block_time, t.token, \
         t.from_address, t.to_address, t.amount, t.memo FROM {source} t WHERE t.network = {}",
        bindings.push(Param::Text(filter.network.to_string()))
    );
    if let Some(address) = &filter.address {
        let from = bindings.push(Param::Text(address.clone()));
        let to = bindings.push(Param::Text(address.clone()));
        sql.push_str(&format!(" AND (t.from_address = {from} OR t.to_address = {to})"));
    }
    for (column, value) in [
        ("t.from_address", &filter.from_address),
        ("t.to_address", &filter.to_address),
        ("t.token", &filter.asset),
    ] {
        if let Some(value) = value {
            sql.push_str(&format!(
                " AND {column} = {}",
                bindings.push(Param::Text(value.clone()))
            ));
        }
    }
    if let Some(from) = filter.from {
        sql.push_str(&format!(
            " AND t.block_time >= {}",
            bindings.push(Param::Int(from))
        ));
    }
    if let Some(to) = filter.to {
        sql.push_str(&format!(" AND t.block_time < {}", bindings.push(Param::Int(to))));
    }
    let after = after
        .map(|c| {
            Ok::<_, StoreError>((
                to_i64("cursor block", c.block_number)?,
                c.tx_id.clone(),
                to_i64("cursor event index", c.event_index)?,
            ))
        })
        .transpose()?;
    keyset_page(
        &mut sql,
        bindings,
        ["t.block_number", "t.tx_id", "t.event_index"],
        after,
        limit,
    );
    Ok(sql)
}

/// A payment's key from a joined row's `payment` and `index` columns, when it joined.
fn joined_payment(row: &AnyRow, payment: &str, index: &str) -> Result<Option<(String, u32)>, StoreError> {
    let Some(payment_id) = row.try_get::<Option<String>, _>(payment)? else {
        return Ok(None);
    };
    let index: Option<i64> = row.try_get(index)?;
    let index = index
        .and_then(|i| u32::try_from(i).ok())
        .ok_or_else(|| StoreError::Corrupt {
            table: "payments",
            detail: format!("index_in_tx out of range ({index:?})"),
        })?;
    Ok(Some((payment_id, index)))
}

fn listed_from_row(row: &AnyRow) -> Result<StoredTransfer, StoreError> {
    let refunded = match joined_payment(row, "refunded_payment", "refunded_index")? {
        None => None,
        Some((payment, index)) => {
            let rule: String = row.try_get("refund_rule")?;
            let rule = rule.parse::<RefundRule>().map_err(|_| StoreError::Corrupt {
                table: "refunds",
                detail: format!("unknown refund rule `{rule}`"),
            })?;
            Some((payment, index, rule))
        }
    };
    Ok(StoredTransfer {
        transfer: transfer_from_row(row)?,
        paid: joined_payment(row, "paid_payment", "paid_index")?,
        refunded,
    })
}

impl Store {
    /// Up to `limit` kept transfers `filter` selects, after `after`, in chain order (block,
    /// transaction, event index). The network's transfers rows are read in block order
    /// (`transfers_by_block`) and filtered: they are few — possible refunds — or, with
    /// `keep_transfers = "pay_to"`, almost all the sellers' own; payments' transfers are
    /// read from their rows in block order (`payments_by_listing`).
    pub async fn list_transfers(
        &self,
        filter: &TransferFilter,
        after: Option<&TransferCursor>,
        limit: u32,
    ) -> Result<Vec<StoredTransfer>, StoreError> {
        let (sql, bindings) = listing_sql(self.backend, filter, after, limit)?;
        let rows = bindings.query(sql).fetch_all(&self.pool).await?;
        rows.iter().map(listed_from_row).collect()
    }
}
