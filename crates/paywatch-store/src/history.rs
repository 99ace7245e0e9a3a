//! Payment history: one row per state change, numbered per payment, each with an id of
//! the global event sequence (gap-free, in commit order) that the event stream serves;
//! and the `review_state` events those changes cause for reviewed payments.

use paywatch_core::state::{HistoryCause, PaymentState};
use std::collections::HashSet;

use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use crate::rows::index_in_tx_of;
use crate::sql::{Placeholders, insert_rows, rows_per_insert};
use crate::{Backend, StoreError, Tx, to_i64};

/// One row of `payment_history`.
pub(crate) struct HistoryRow {
    pub(crate) payment_id: String,
    pub(crate) index_in_tx: u32,
    pub(crate) seq: i64,
    pub(crate) from: Option<PaymentState>,
    pub(crate) to: PaymentState,
    pub(crate) cause: HistoryCause,
    pub(crate) block_number: u64,
    pub(crate) tx_id: String,
}

impl HistoryRow {
    /// Whether the change was caused by a transaction other than the payment's own (a
    /// refund's): only then is `tx_id` stored, readers take the payment's id for an
    /// empty one (`payment_history.tx_id`, migration `…000032`).
    fn caused_by_another_transaction(&self) -> bool {
        self.tx_id != self.payment_id
    }

    /// The change of the payment in `row` (its `payment_id`, `index_in_tx` and
    /// `history_len` columns) from `from` to `to`, caused by its own transaction.
    pub(crate) fn of_payment(
        row: &AnyRow,
        from: PaymentState,
        to: PaymentState,
        cause: HistoryCause,
        block_number: u64,
    ) -> Result<Self, StoreError> {
        let payment_id: String = row.try_get("payment_id")?;
        Ok(Self {
            tx_id: payment_id.clone(),
            payment_id,
            index_in_tx: index_in_tx_of("payments", row)?,
            seq: row.try_get("history_len")?,
            from: Some(from),
            to,
            cause,
            block_number,
        })
    }
}

pub(crate) fn illegal(e: paywatch_core::state::IllegalTransition) -> StoreError {
    StoreError::Corrupt {
        table: "payments",
        detail: e.to_string(),
    }
}

/// Reserves `count` ids of the global event sequence; the counter row stays locked (on
/// Postgres) until this transaction ends, so ids become visible in commit order.
pub(crate) async fn reserve_event_ids(tx: &mut Tx<'_>, count: usize) -> Result<i64, StoreError> {
    let count = i64::try_from(count).map_err(|_| StoreError::OutOfRange {
        what: "history rows in one commit",
        value: count as u64,
    })?;
    let last: i64 = sqlx::query_scalar(
        "UPDATE event_counter SET last_event = last_event + $1 WHERE id = 1 RETURNING last_event",
    )
    .bind(count)
    .fetch_one(&mut **tx)
    .await?;
    Ok(last - count + 1)
}

pub(crate) async fn insert_history(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    rows: &[HistoryRow],
    now: i64,
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let first = reserve_event_ids(tx, rows.len()).await?;
    let numbered: Vec<(i64, &HistoryRow)> = (first..).zip(rows).collect();
    insert_history_rows(backend, tx, network, &numbered, now).await?;
    insert_review_events(backend, tx, network, rows, now).await
}

async fn insert_history_rows(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    numbered: &[(i64, &HistoryRow)],
    now: i64,
) -> Result<(), StoreError> {
    insert_rows(
        backend,
        tx,
        "INSERT INTO payment_history (network, payment_id, index_in_tx, seq, from_state, to_state, cause, block_number, tx_id, at_ms, event_id)",
        "",
        11,
        numbered,
        |q, (event_id, h)| {
            Ok(q.bind(network.to_string())
                .bind(h.payment_id.clone())
                .bind(i64::from(h.index_in_tx))
                .bind(h.seq)
                .bind(h.from.map(PaymentState::as_str))
                .bind(h.to.as_str())
                .bind(h.cause.as_str())
                .bind(to_i64("block number", h.block_number)?)
                .bind(h.caused_by_another_transaction().then(|| h.tx_id.clone()))
                .bind(now)
                .bind(*event_id))
        },
    )
    .await
}

/// The changes among `rows` that change a recorded review's published state
/// ([`PaymentState::published`]), each written as a `review_state` event numbered after
/// the history rows of the same commit.
async fn insert_review_events(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    rows: &[HistoryRow],
    now: i64,
) -> Result<(), StoreError> {
    // A payment's first row has no earlier state and no review yet.
    let changed: Vec<&HistoryRow> = rows
        .iter()
        .filter(|h| h.from.is_some_and(|from| from.published() != h.to.published()))
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    let mut reviewed: HashSet<(String, u32)> = HashSet::new();
    for chunk in changed.chunks(rows_per_insert(backend)) {
        let ids: HashSet<&str> = chunk.iter().map(|h| h.payment_id.as_str()).collect();
        let sql = format!(
            "SELECT payment_id, index_in_tx FROM reviews WHERE network = $1 AND payment_id IN {}",
            Placeholders::after(backend, 1).list(ids.len())
        );
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(network.to_string());
        for id in ids {
            query = query.bind(id.to_string());
        }
        for row in query.fetch_all(&mut **tx).await? {
            reviewed.insert((row.try_get("payment_id")?, index_in_tx_of("reviews", &row)?));
        }
    }
    let events: Vec<&HistoryRow> = changed
        .into_iter()
        .filter(|h| reviewed.contains(&(h.payment_id.clone(), h.index_in_tx)))
        .collect();
    if events.is_empty() {
        return Ok(());
    }
    let first = reserve_event_ids(tx, events.len()).await?;
    let numbered: Vec<(i64, &HistoryRow)> = (first..).zip(events).collect();
    insert_rows(
        backend,
        tx,
        "INSERT INTO review_events (event_id, network, payment_id, index_in_tx, seq, cause, from_state, to_state, block_number, tx_id, at_ms)",
        "",
        11,
        &numbered,
        |q, (event_id, h)| {
            Ok(q.bind(*event_id)
                .bind(network.to_string())
                .bind(h.payment_id.clone())
                .bind(i64::from(h.index_in_tx))
                .bind(h.seq)
                .bind(h.cause.as_str())
                .bind(h.from.map(|from| from.published().as_str()))
                .bind(h.to.published().as_str())
                .bind(to_i64("block number", h.block_number)?)
                .bind(h.tx_id.clone())
                .bind(now))
        },
    )
    .await
}
