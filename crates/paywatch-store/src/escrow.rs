//! Escrowed payments: their escrow's events stored with each batch, applied to the payment
//! (state, captured, released, held and refunded sums, fees) once final, in chain order,
//! each with a history row; undone when a reorg takes them away; read back for lookups.

use std::collections::{HashMap, HashSet};

use alloy_primitives::U256;
use paywatch_core::PaymentMethod;
use paywatch_core::records::{Batch, EscrowEventKind};
use paywatch_core::refunds::RefundRule;
use paywatch_core::state::{EscrowTotals, PaymentState, transition};
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use crate::history::{HistoryRow, illegal, insert_history};
use crate::rows::{parse_amount, state_of, to_u64, word_of};
use crate::sql::{Placeholders, bind_position, insert_rows, rows_per_insert};
use crate::{Backend, Store, StoreError, Tx, to_i64};

/// One stored escrow event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEscrowEvent {
    /// What happened.
    pub kind: EscrowEventKind,
    /// Its amount, exact decimal string.
    pub amount: String,
    /// Charges and captures: the fee in basis points.
    pub fee_bps: Option<u16>,
    /// Charges and captures: who received the fee.
    pub fee_receiver: Option<String>,
    /// The token collector that moved the money (authorizations, charges, refunds).
    pub token_collector: Option<String>,
    /// Its transaction.
    pub tx_id: String,
    /// Its log index.
    pub event_index: u64,
    /// Its block.
    pub block_number: u64,
    /// Its block's hash.
    pub block_hash: String,
    /// Its block time, Unix seconds.
    pub block_time: Option<i64>,
    /// Whether it is final and counted in the payment's sums.
    pub applied: bool,
}

/// An escrowed payment's terms and events, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEscrow {
    /// The escrow contract.
    pub escrow: String,
    /// Who drives the payment.
    pub operator: String,
    /// Unix seconds after which the payer's signature can no longer be used.
    pub pre_approval_expiry: u64,
    /// Unix seconds from which the hold can no longer be captured (and may be reclaimed).
    pub authorization_expiry: u64,
    /// Unix seconds from which nothing can be refunded.
    pub refund_expiry: u64,
    /// Least fee, basis points.
    pub min_fee_bps: u16,
    /// Largest fee, basis points.
    pub max_fee_bps: u16,
    /// Who must receive fees (the zero address: chosen at capture).
    pub fee_receiver: String,
    /// The salt, decimal.
    pub salt: String,
    /// Its events, in chain order.
    pub events: Vec<StoredEscrowEvent>,
}

/// `method = 'auth_capture'`, the filter of escrowed payments.
pub(crate) const IS_ESCROWED: &str = "method = 'auth_capture'";

/// A non-negative small integer column.
fn bps_of(row: &AnyRow, column: &str) -> Result<Option<u16>, StoreError> {
    let value: Option<i32> = row.try_get(column)?;
    value
        .map(|v| {
            u16::try_from(v).map_err(|_| StoreError::Corrupt {
                table: "escrow_events",
                detail: format!("{column} out of range ({v})"),
            })
        })
        .transpose()
}

/// The escrow sums a payments row holds (its authorization counted once it is no longer
/// pending).
fn totals_of(row: &AnyRow, state: PaymentState) -> Result<EscrowTotals, StoreError> {
    let amount = |column: &str| -> Result<U256, StoreError> {
        let text: Option<String> = row.try_get(column)?;
        text.map_or(Ok(U256::ZERO), |t| parse_amount("payments", &t))
    };
    Ok(EscrowTotals {
        authorized: if matches!(state, PaymentState::Pending | PaymentState::Dropped) {
            U256::ZERO
        } else {
            amount("amount")?
        },
        captured: amount("captured_amount")?,
        fees: amount("fee_amount")?,
        released: amount("released_amount")?,
        refunded: amount("refunded_amount")?,
    })
}

/// A payment's escrow state being moved event by event.
struct Moving {
    state: PaymentState,
    totals: EscrowTotals,
    history_len: i64,
    changed: bool,
}

/// Stores a batch's escrow events and terms: the events of payments the batch opens or
/// that are stored already (an event of a payment in an unwatched token is not kept).
pub(crate) async fn insert_escrow(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    batch: &Batch,
) -> Result<(), StoreError> {
    if batch.escrow_events.is_empty() {
        return Ok(());
    }
    let mut kept: HashSet<&str> = batch
        .escrow_terms
        .iter()
        .map(|t| t.payment_info_hash.as_str())
        .collect();
    let asked: Vec<&str> = batch
        .escrow_events
        .iter()
        .map(|e| e.payment_info_hash.as_str())
        .filter(|hash| !kept.contains(hash))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    for chunk in asked.chunks(rows_per_insert(backend)) {
        let sql = format!(
            "SELECT payment_id FROM payments WHERE network = $1 AND {IS_ESCROWED} AND payment_id IN {}",
            Placeholders::after(backend, 1).list(chunk.len())
        );
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(network.to_string());
        for id in chunk {
            query = query.bind(id.to_string());
        }
        for row in query.persistent(false).fetch_all(&mut **tx).await? {
            let id: String = row.try_get("payment_id")?;
            if let Some(hash) = chunk.iter().find(|h| **h == id) {
                kept.insert(hash);
            }
        }
    }
    let events: Vec<_> = batch
        .escrow_events
        .iter()
        .filter(|e| kept.contains(e.payment_info_hash.as_str()))
        .collect();
    insert_rows(
        backend,
        tx,
        "INSERT INTO escrow_events (network, tx_id, event_index, block_number, block_hash, block_time, escrow, payment_id, kind, amount, fee_bps, fee_receiver, token_collector)",
        "ON CONFLICT (network, tx_id, event_index) DO NOTHING",
        13,
        &events,
        |q, e| {
            Ok(bind_position(q, network, &e.position)?
                .bind(e.position.block_time)
                .bind(e.escrow.clone())
                .bind(e.payment_info_hash.clone())
                .bind(e.kind.as_str())
                .bind(e.amount.to_string())
                .bind(e.fee_bps.map(i32::from))
                .bind(e.fee_receiver.clone())
                .bind(e.token_collector.clone()))
        },
    )
    .await?;
    insert_rows(
        backend,
        tx,
        "INSERT INTO escrow_terms (network, payment_id, escrow, operator, pre_approval_expiry, authorization_expiry, refund_expiry, min_fee_bps, max_fee_bps, fee_receiver, salt)",
        "ON CONFLICT (network, payment_id) DO NOTHING",
        11,
        &batch.escrow_terms,
        |q, t| {
            Ok(q.bind(network.to_string())
                .bind(t.payment_info_hash.clone())
                .bind(t.escrow.clone())
                .bind(t.operator.clone())
                .bind(to_i64("expiry", t.pre_approval_expiry)?)
                .bind(to_i64("expiry", t.authorization_expiry)?)
                .bind(to_i64("expiry", t.refund_expiry)?)
                .bind(i32::from(t.min_fee_bps))
                .bind(i32::from(t.max_fee_bps))
                .bind(t.fee_receiver.clone())
                .bind(t.salt.clone()))
        },
    )
    .await
}

/// Reads the escrowed payments of `ids` as they stand, for moving them.
async fn moving_payments(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    ids: &[String],
) -> Result<HashMap<String, Moving>, StoreError> {
    let mut found = HashMap::new();
    for chunk in ids.chunks(rows_per_insert(backend)) {
        let sql = format!(
            "SELECT payment_id, state, history_len, amount, captured_amount, released_amount, refunded_amount, fee_amount \
             FROM payments WHERE network = $1 AND index_in_tx = 0 AND {IS_ESCROWED} AND payment_id IN {}",
            Placeholders::after(backend, 1).list(chunk.len())
        );
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(network.to_string());
        for id in chunk {
            query = query.bind(id.clone());
        }
        for row in query.persistent(false).fetch_all(&mut **tx).await? {
            let state = state_of(&row)?;
            found.insert(
                row.try_get("payment_id")?,
                Moving {
                    state,
                    totals: totals_of(&row, state)?,
                    history_len: row.try_get("history_len")?,
                    changed: false,
                },
            );
        }
    }
    Ok(found)
}

/// Writes a moved payment's state and sums.
async fn write_moved(
    tx: &mut Tx<'_>,
    network: &str,
    payment_id: &str,
    moved: &Moving,
    now: i64,
) -> Result<(), StoreError> {
    let t = &moved.totals;
    sqlx::query(
        "UPDATE payments SET state = $1, captured_amount = $2, released_amount = $3, held_amount = $4, \
         refunded_amount = $5, fee_amount = $6, history_len = $7, \
         state_changed_ms = CASE WHEN state = $1 THEN state_changed_ms ELSE $8 END \
         WHERE network = $9 AND payment_id = $10 AND index_in_tx = 0",
    )
    .bind(moved.state.as_str())
    .bind(t.captured.to_string())
    .bind(t.released.to_string())
    .bind(t.held().to_string())
    .bind(t.refunded.to_string())
    .bind(t.fees.to_string())
    .bind(moved.history_len)
    .bind(now)
    .bind(network.to_string())
    .bind(payment_id.to_string())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Applies, in chain order, the escrow events that are final (at or below `final_block`)
/// and not applied yet: each moves its payment's sums and state with a history row; a
/// final refund is also recorded as the payment's refund, rule `escrow`.
pub(crate) async fn apply_escrow_events(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    final_block: i64,
    now: i64,
) -> Result<(), StoreError> {
    let events = sqlx::query(
        "SELECT tx_id, event_index, block_number, payment_id, kind, amount, fee_bps FROM escrow_events \
         WHERE network = $1 AND applied = 0 AND block_number <= $2 ORDER BY block_number, event_index",
    )
    .bind(network.to_string())
    .bind(final_block)
    .fetch_all(&mut **tx)
    .await?;
    if events.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = events
        .iter()
        .map(|e| e.try_get("payment_id"))
        .collect::<Result<HashSet<String>, _>>()?
        .into_iter()
        .collect();
    let mut payments = moving_payments(backend, tx, network, &ids).await?;
    let mut history = Vec::new();
    for event in &events {
        let payment_id: String = event.try_get("payment_id")?;
        let kind = kind_of(event)?;
        let tx_id: String = event.try_get("tx_id")?;
        let event_index: i64 = event.try_get("event_index")?;
        let Some(payment) = payments.get_mut(&payment_id) else {
            continue;
        };
        // A payment dropped by a reorg takes no event; one whose opening is not applied
        // yet takes none before it (an opening always comes first on chain).
        if payment.state == PaymentState::Dropped || (payment.state == PaymentState::Pending && !kind.opens())
        {
            continue;
        }
        let amount = parse_amount("escrow_events", &event.try_get::<String, _>("amount")?)?;
        let before = payment.totals;
        let after = before.with(kind, amount, bps_of(event, "fee_bps")?);
        let change = before.change_to(after);
        let to = transition(Some(payment.state), change).map_err(illegal)?;
        let block_number: i64 = event.try_get("block_number")?;
        history.push(HistoryRow {
            payment_id: payment_id.clone(),
            index_in_tx: 0,
            seq: payment.history_len,
            from: Some(payment.state),
            to,
            cause: change.cause(Some(payment.state)),
            block_number: to_u64("escrow_events", "block_number", block_number)?,
            tx_id: tx_id.clone(),
        });
        payment.history_len += 1;
        payment.state = to;
        payment.totals = after;
        payment.changed = true;
        if kind == EscrowEventKind::Refunded {
            sqlx::query(
                "INSERT INTO refunds (network, refund_tx_id, refund_event_index, payment_id, index_in_tx, amount, rule, block_number, assigned_ms) \
                 VALUES ($1, $2, $3, $4, 0, $5, $6, $7, $8)",
            )
            .bind(network.to_string())
            .bind(tx_id.clone())
            .bind(event_index)
            .bind(payment_id.clone())
            .bind(amount.to_string())
            .bind(RefundRule::Escrow.as_str())
            .bind(block_number)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        }
        sqlx::query(
            "UPDATE escrow_events SET applied = 1 WHERE network = $1 AND tx_id = $2 AND event_index = $3",
        )
        .bind(network.to_string())
        .bind(tx_id)
        .bind(event_index)
        .execute(&mut **tx)
        .await?;
    }
    for (payment_id, moved) in payments.iter().filter(|(_, m)| m.changed) {
        write_moved(tx, network, payment_id, moved, now).await?;
    }
    insert_history(backend, tx, network, &history, now).await
}

/// After a reorg to `fork`: deletes the escrow events above it and gives every escrowed
/// payment that stays on the chain but had final events above it (a reorg deeper than
/// the finality rule) its sums and state back, with a history row.
pub(crate) async fn roll_back_escrow(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    fork: i64,
    now: i64,
) -> Result<(), StoreError> {
    let touched: Vec<String> = sqlx::query(
        "SELECT DISTINCT e.payment_id FROM escrow_events e JOIN payments p \
         ON p.network = e.network AND p.payment_id = e.payment_id AND p.index_in_tx = 0 \
         WHERE e.network = $1 AND e.block_number > $2 AND e.applied = 1 AND p.block_number <= $2",
    )
    .bind(network.to_string())
    .bind(fork)
    .fetch_all(&mut **tx)
    .await?
    .iter()
    .map(|row| row.try_get("payment_id"))
    .collect::<Result<_, _>>()?;
    sqlx::query("DELETE FROM escrow_events WHERE network = $1 AND block_number > $2")
        .bind(network.to_string())
        .bind(fork)
        .execute(&mut **tx)
        .await?;
    if touched.is_empty() {
        return Ok(());
    }
    let mut payments = moving_payments(backend, tx, network, &touched).await?;
    let mut history = Vec::new();
    for (payment_id, payment) in &mut payments {
        let remaining = sqlx::query(
            "SELECT kind, amount, fee_bps FROM escrow_events \
             WHERE network = $1 AND payment_id = $2 AND applied = 1 ORDER BY block_number, event_index",
        )
        .bind(network.to_string())
        .bind(payment_id.clone())
        .fetch_all(&mut **tx)
        .await?;
        let mut after = EscrowTotals::default();
        for event in &remaining {
            let amount = parse_amount("escrow_events", &event.try_get::<String, _>("amount")?)?;
            after = after.with(kind_of(event)?, amount, bps_of(event, "fee_bps")?);
        }
        let change = payment.totals.change_to(after);
        let to = transition(Some(payment.state), change).map_err(illegal)?;
        history.push(HistoryRow {
            payment_id: payment_id.clone(),
            index_in_tx: 0,
            seq: payment.history_len,
            from: Some(payment.state),
            to,
            cause: change.cause(Some(payment.state)),
            block_number: u64::try_from(fork).unwrap_or_default(),
            tx_id: payment_id.clone(),
        });
        payment.history_len += 1;
        payment.state = to;
        payment.totals = after;
        write_moved(tx, network, payment_id, payment, now).await?;
    }
    insert_history(backend, tx, network, &history, now).await
}

fn kind_of(row: &AnyRow) -> Result<EscrowEventKind, StoreError> {
    word_of("escrow_events", row, "kind")
}

impl Store {
    /// An escrowed payment's terms and events; `None` when `payment_id` is not one.
    pub async fn escrow(&self, network: &str, payment_id: &str) -> Result<Option<StoredEscrow>, StoreError> {
        let Some(terms) = sqlx::query(
            "SELECT escrow, operator, pre_approval_expiry, authorization_expiry, refund_expiry, min_fee_bps, \
             max_fee_bps, fee_receiver, salt FROM escrow_terms WHERE network = $1 AND payment_id = $2",
        )
        .bind(network.to_string())
        .bind(payment_id.to_string())
        .fetch_optional(&self.pool)
        .await?
        else {
            return Ok(None);
        };
        let rows = sqlx::query(
            "SELECT kind, amount, fee_bps, fee_receiver, token_collector, tx_id, event_index, block_number, block_hash, block_time, applied \
             FROM escrow_events WHERE network = $1 AND payment_id = $2 ORDER BY block_number, event_index",
        )
        .bind(network.to_string())
        .bind(payment_id.to_string())
        .fetch_all(&self.pool)
        .await?;
        let events = rows
            .iter()
            .map(|row| {
                Ok(StoredEscrowEvent {
                    kind: kind_of(row)?,
                    amount: row.try_get("amount")?,
                    fee_bps: bps_of(row, "fee_bps")?,
                    fee_receiver: row.try_get("fee_receiver")?,
                    token_collector: row.try_get("token_collector")?,
                    tx_id: row.try_get("tx_id")?,
                    event_index: to_u64("escrow_events", "event_index", row.try_get("event_index")?)?,
                    block_number: to_u64("escrow_events", "block_number", row.try_get("block_number")?)?,
                    block_hash: row.try_get("block_hash")?,
                    block_time: row.try_get("block_time")?,
                    applied: row.try_get::<i32, _>("applied")? != 0,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let expiry = |column: &str| -> Result<u64, StoreError> {
            to_u64("escrow_terms", column, terms.try_get(column)?)
        };
        let bps = |column: &str| -> Result<u16, StoreError> {
            bps_of(&terms, column)?.ok_or_else(|| StoreError::Corrupt {
                table: "escrow_terms",
                detail: format!("{column} is missing"),
            })
        };
        Ok(Some(StoredEscrow {
            escrow: terms.try_get("escrow")?,
            operator: terms.try_get("operator")?,
            pre_approval_expiry: expiry("pre_approval_expiry")?,
            authorization_expiry: expiry("authorization_expiry")?,
            refund_expiry: expiry("refund_expiry")?,
            min_fee_bps: bps("min_fee_bps")?,
            max_fee_bps: bps("max_fee_bps")?,
            fee_receiver: terms.try_get("fee_receiver")?,
            salt: terms.try_get("salt")?,
            events,
        }))
    }

    /// The escrowed payment whose authorization or charge is in transaction `tx_id`, if
    /// any (its id is its `paymentInfoHash`, not the transaction's hash).
    pub async fn escrow_opened_in(&self, network: &str, tx_id: &str) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT payment_id FROM escrow_events WHERE network = $1 AND tx_id = $2 AND kind IN ('authorized', 'charged') \
             ORDER BY event_index",
        )
        .bind(network.to_string())
        .bind(tx_id.to_string())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|row| Ok(row.try_get("payment_id")?)).collect()
    }
}

/// Whether `method` is escrowed.
pub(crate) fn is_escrowed(method: PaymentMethod) -> bool {
    method == PaymentMethod::AuthCapture
}
