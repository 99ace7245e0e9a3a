//! Writes from the workers: a batch of rows with its cursor advance in one transaction,
//! the head and finality update (which also ties final refunds to payments), and the
//! rollback after a reorg. Every payment state change writes a history row.

use std::collections::HashMap;

use alloy_primitives::U256;
use paywatch_core::records::{Batch, EventPosition, PaymentKey};
use paywatch_core::refunds::{RefundCandidate, RefundLink, RefundablePayment, assign_refund};
use paywatch_core::state::{HistoryCause, PaymentEvent, PaymentState, transition};
use sqlx::any::{AnyArguments, AnyRow};
use sqlx::query::Query;
use sqlx::{Any, AssertSqlSafe, Row};

use crate::rows::index_in_tx_of;
use crate::sql::{quoted_list, rows_per_insert, values_placeholders};
use crate::{Backend, Store, StoreError, now_ms, to_i64};

type Tx<'c> = sqlx::Transaction<'c, Any>;

/// A token's read position: the next block to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenCursor {
    /// Token contract or mint.
    pub token: String,
    /// Next block to read.
    pub next_block: u64,
}

/// What a rollback removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollbackSummary {
    /// Transfers deleted.
    pub transfers: u64,
    /// Authorizations deleted.
    pub authorizations: u64,
    /// Payments marked dropped that were pending.
    pub pending_dropped: u64,
    /// Payments marked dropped that were already final: a reorg deeper than the finality rule.
    pub paid_dropped: u64,
    /// Final refunds removed: also deeper than the finality rule.
    pub refunds_removed: u64,
}

/// The chain's head as a worker last read it, and how refunds are matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadUpdate {
    /// Latest block.
    pub head: u64,
    /// Highest final block, if any.
    pub final_block: Option<u64>,
    /// How long after a payment a transfer back may be matched to it, in seconds.
    pub refund_window_secs: i64,
}

/// One row of `payment_history`.
struct HistoryRow {
    payment_id: String,
    index_in_tx: u32,
    seq: i64,
    from: Option<PaymentState>,
    to: PaymentState,
    cause: HistoryCause,
    block_number: u64,
    tx_id: String,
}

impl HistoryRow {
    /// The change of the payment in `row` (its `payment_id`, `index_in_tx` and
    /// `history_len` columns) from `from` to `to`, caused by its own transaction.
    fn of_payment(
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

/// Runs a multi-row `INSERT … VALUES … <suffix>` over `rows` in chunks, binding each row with `bind`.
async fn insert_rows<T>(
    backend: Backend,
    tx: &mut Tx<'_>,
    head: &str,
    suffix: &str,
    columns: usize,
    rows: &[T],
    bind: impl for<'q> Fn(Query<'q, Any, AnyArguments>, &T) -> Result<Query<'q, Any, AnyArguments>, StoreError>,
) -> Result<(), StoreError> {
    for chunk in rows.chunks(rows_per_insert(backend)) {
        let sql = format!(
            "{head} VALUES {} {suffix}",
            values_placeholders(backend, chunk.len(), columns)
        );
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for row in chunk {
            query = bind(query, row)?;
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

fn bind_position<'q>(
    query: Query<'q, Any, AnyArguments>,
    network: &str,
    position: &EventPosition,
) -> Result<Query<'q, Any, AnyArguments>, StoreError> {
    Ok(query
        .bind(network.to_string())
        .bind(position.tx_id.clone())
        .bind(to_i64("event index", position.event_index)?)
        .bind(to_i64("block number", position.block_number)?)
        .bind(position.block_hash.clone()))
}

pub(crate) fn parse_amount(table: &'static str, text: &str) -> Result<U256, StoreError> {
    U256::from_str_radix(text, 10).map_err(|_| StoreError::Corrupt {
        table,
        detail: format!("amount `{text}` is not a decimal integer"),
    })
}

/// The `block_number` column of a payments row.
fn block_of(row: &AnyRow) -> Result<u64, StoreError> {
    let block: i64 = row.try_get("block_number")?;
    u64::try_from(block).map_err(|_| StoreError::Corrupt {
        table: "payments",
        detail: format!("block_number is negative ({block})"),
    })
}

/// A payment's facts as one comparable text: `payer → pay_to amount asset`.
fn payment_facts(payer: &str, pay_to: &str, amount: &str, asset: &str) -> String {
    format!("{payer} → {pay_to} {amount} {asset}")
}

fn state_of(row: &AnyRow) -> Result<PaymentState, StoreError> {
    let text: String = row.try_get("state")?;
    text.parse().map_err(|_| StoreError::Corrupt {
        table: "payments",
        detail: format!("unknown payment state `{text}`"),
    })
}

fn illegal(e: paywatch_core::state::IllegalTransition) -> StoreError {
    StoreError::Corrupt {
        table: "payments",
        detail: e.to_string(),
    }
}

impl Store {
    /// Commits one batch, moves the cursors of `tokens` to `batch.to_block + 1` and records the
    /// head (promoting what became final, tying final refunds), in one transaction: either
    /// all of it is stored, or none of it and the cursors stay.
    pub async fn commit_batch(
        &self,
        network: &str,
        tokens: &[String],
        batch: &Batch,
        head: &HeadUpdate,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let backend = self.backend;
        let mut tx = self.pool.begin().await?;
        self.check_fence(&mut tx).await?;
        insert_rows(
            backend,
            &mut tx,
            "INSERT INTO transfers (network, tx_id, event_index, block_number, block_hash, block_time, token, from_address, to_address, amount, memo)",
            "ON CONFLICT (network, tx_id, event_index) DO NOTHING",
            11,
            &batch.transfers,
            |q, t| {
                Ok(bind_position(q, network, &t.position)?
                    .bind(t.position.block_time)
                    .bind(t.token.clone())
                    .bind(t.from.clone())
                    .bind(t.to.clone())
                    .bind(t.value.to_string())
                    .bind(t.memo.clone()))
            },
        )
        .await?;
        insert_rows(
            backend,
            &mut tx,
            "INSERT INTO authorizations (network, tx_id, event_index, block_number, block_hash, token, authorizer, nonce)",
            "ON CONFLICT (network, tx_id, event_index) DO NOTHING",
            8,
            &batch.authorizations,
            |q, a| {
                Ok(bind_position(q, network, &a.position)?
                    .bind(a.token.clone())
                    .bind(a.authorizer.clone())
                    .bind(a.nonce.clone()))
            },
        )
        .await?;
        self.upsert_payments(&mut tx, network, batch, head.final_block, now)
            .await?;
        drop_vanished(backend, &mut tx, network, &batch.vanished_payments, now).await?;
        insert_rows(
            backend,
            &mut tx,
            "INSERT INTO blocks (network, number, hash, parent_hash)",
            "ON CONFLICT (network, number) DO UPDATE SET hash = excluded.hash, parent_hash = excluded.parent_hash",
            4,
            &batch.blocks,
            |q, b| {
                Ok(q.bind(network.to_string())
                    .bind(to_i64("block number", b.number)?)
                    .bind(b.hash.clone())
                    .bind(b.parent_hash.clone()))
            },
        )
        .await?;
        let next_block = to_i64("block number", batch.to_block.saturating_add(1))?;
        insert_rows(
            backend,
            &mut tx,
            "INSERT INTO cursors (network, token, next_block, updated_ms)",
            "ON CONFLICT (network, token) DO UPDATE SET next_block = excluded.next_block, updated_ms = excluded.updated_ms",
            4,
            tokens,
            |q, token| Ok(q.bind(network.to_string()).bind(token.clone()).bind(next_block).bind(now)),
        )
        .await?;
        update_head(backend, &mut tx, network, head, now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Inserts new payments and updates re-read ones, with their state transitions: a new
    /// payment is `pending` (`paid` at once when its block is already final); a dropped
    /// one mined again is `pending` again; one moved to another block keeps its state.
    async fn upsert_payments(
        &self,
        tx: &mut Tx<'_>,
        network: &str,
        batch: &Batch,
        final_block: Option<u64>,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut existing: HashMap<(String, u32), (PaymentState, i64, String)> = HashMap::new();
        let ids: Vec<&String> = batch.payments.iter().map(|p| &p.payment_id).collect();
        for chunk in ids.chunks(rows_per_insert(self.backend)) {
            let sql = format!(
                "SELECT payment_id, index_in_tx, state, history_len, payer, pay_to, amount, asset FROM payments WHERE network = $1 AND payment_id IN {}",
                in_list(self.backend, 2, chunk.len())
            );
            let mut query = sqlx::query(AssertSqlSafe(sql)).bind(network.to_string());
            for id in chunk {
                query = query.bind((*id).clone());
            }
            for row in query.fetch_all(&mut **tx).await? {
                let index: i64 = row.try_get("index_in_tx")?;
                let facts = payment_facts(
                    &row.try_get::<String, _>("payer")?,
                    &row.try_get::<String, _>("pay_to")?,
                    &row.try_get::<String, _>("amount")?,
                    &row.try_get::<String, _>("asset")?,
                );
                existing.insert(
                    (row.try_get("payment_id")?, index as u32),
                    (state_of(&row)?, row.try_get("history_len")?, facts),
                );
            }
        }

        let mut history = Vec::new();
        let mut rows = Vec::with_capacity(batch.payments.len());
        for payment in &batch.payments {
            let key = (payment.payment_id.clone(), payment.index_in_tx);
            let (mut state, mut history_len) = match existing.get(&key) {
                Some((state, len, stored)) => {
                    let answered = payment_facts(
                        &payment.payer,
                        &payment.pay_to,
                        &payment.amount.to_string(),
                        &payment.asset,
                    );
                    // Facts of a payment that is not final may change with a reorg (the same
                    // transaction executed on another fork); a final payment's never do.
                    if *stored != answered && state.is_final() {
                        return Err(StoreError::ConflictingPayment {
                            network: network.to_string(),
                            payment_id: payment.payment_id.clone(),
                            index_in_tx: payment.index_in_tx,
                            stored: stored.clone(),
                            answered,
                        });
                    }
                    (Some(*state), *len)
                }
                None => (None, 0),
            };
            let block = payment.transfer.block_number;
            let mut events = vec![PaymentEvent::Seen];
            if final_block.is_some_and(|f| block <= f) {
                events.push(PaymentEvent::Finalized);
            }
            let mut steps = Vec::new();
            for event in events {
                let next = transition(state, event).map_err(illegal)?;
                if Some(next) != state {
                    steps.push((state, next, event.cause(state)));
                    state = Some(next);
                }
            }
            // First seen in a block that is already final (a backfill): one row, (none) -> paid.
            if let [(None, _, _), (_, paid, _)] = steps[..] {
                steps = vec![(None, paid, HistoryCause::SeenFinal)];
            }
            for (from, to, cause) in steps {
                history.push(HistoryRow {
                    payment_id: payment.payment_id.clone(),
                    index_in_tx: payment.index_in_tx,
                    seq: history_len,
                    from,
                    to,
                    cause,
                    block_number: block,
                    tx_id: payment.payment_id.clone(),
                });
                history_len += 1;
            }
            rows.push((payment, state.unwrap_or(PaymentState::Pending), history_len));
        }

        insert_rows(
            self.backend,
            tx,
            "INSERT INTO payments (network, payment_id, index_in_tx, event_index, block_number, block_hash, block_time, payer, pay_to, amount, asset, method, nonce, max_amount, memo, facilitator, state, history_len, first_seen_ms, state_changed_ms)",
            "ON CONFLICT (network, payment_id, index_in_tx) DO UPDATE SET \
             event_index = excluded.event_index, block_number = excluded.block_number, \
             payer = excluded.payer, pay_to = excluded.pay_to, amount = excluded.amount, asset = excluded.asset, \
             method = excluded.method, nonce = COALESCE(excluded.nonce, payments.nonce), \
             max_amount = COALESCE(excluded.max_amount, payments.max_amount), memo = excluded.memo, facilitator = excluded.facilitator, block_hash = excluded.block_hash, block_time = excluded.block_time, \
             state_changed_ms = CASE WHEN payments.state = excluded.state THEN payments.state_changed_ms ELSE excluded.state_changed_ms END, \
             state = excluded.state, history_len = excluded.history_len",
            20,
            &rows,
            |q, (p, state, history_len)| {
                Ok(q.bind(network.to_string())
                    .bind(p.payment_id.clone())
                    .bind(i64::from(p.index_in_tx))
                    .bind(to_i64("event index", p.transfer.event_index)?)
                    .bind(to_i64("block number", p.transfer.block_number)?)
                    .bind(p.transfer.block_hash.clone())
                    .bind(p.transfer.block_time)
                    .bind(p.payer.clone())
                    .bind(p.pay_to.clone())
                    .bind(p.amount.to_string())
                    .bind(p.asset.clone())
                    .bind(p.method.as_str())
                    .bind(p.nonce.clone())
                    .bind(p.max_amount.map(|m| m.to_string()))
                    .bind(p.memo.clone())
                    .bind(p.facilitator.clone())
                    .bind(state.as_str())
                    .bind(*history_len)
                    .bind(now)
                    .bind(now))
            },
        )
        .await?;
        insert_history(self.backend, tx, network, &history, now).await
    }

    /// Sets the cursor of tokens that have none yet (first start); existing cursors are kept.
    pub async fn init_cursors(&self, network: &str, cursors: &[TokenCursor]) -> Result<(), StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        self.check_fence(&mut tx).await?;
        insert_rows(
            self.backend,
            &mut tx,
            "INSERT INTO cursors (network, token, next_block, updated_ms)",
            "ON CONFLICT (network, token) DO NOTHING",
            4,
            cursors,
            |q, c| {
                Ok(q.bind(network.to_string())
                    .bind(c.token.clone())
                    .bind(to_i64("block number", c.next_block)?)
                    .bind(now))
            },
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records the chain head and the highest final block, marks every pending payment at or
    /// below the final block `paid`, and ties the transfers that became final to the payments
    /// they refund, in one transaction. Returns how many payments became paid.
    pub async fn record_head(&self, network: &str, head: &HeadUpdate) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin().await?;
        self.check_fence(&mut tx).await?;
        let promoted = update_head(self.backend, &mut tx, network, head, now_ms()).await?;
        tx.commit().await?;
        Ok(promoted)
    }

    /// Forgets everything above `fork_block` after a reorg, in one transaction: transfers,
    /// authorizations, refunds and block hashes are deleted, payments are marked `dropped`
    /// (a payment that is re-read from the canonical chain becomes pending again), payments
    /// whose refunds vanished get their state back, and cursors move back to `fork_block + 1`.
    pub async fn rollback_after(
        &self,
        network: &str,
        fork_block: u64,
    ) -> Result<RollbackSummary, StoreError> {
        let now = now_ms();
        let fork = to_i64("block number", fork_block)?;
        let net = network.to_string();
        let mut tx = self.pool.begin().await?;
        self.check_fence(&mut tx).await?;
        let refunds_removed = self.roll_back_refunds(&mut tx, network, fork, now).await?;
        let transfers = sqlx::query("DELETE FROM transfers WHERE network = $1 AND block_number > $2")
            .bind(net.clone())
            .bind(fork)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        let authorizations =
            sqlx::query("DELETE FROM authorizations WHERE network = $1 AND block_number > $2")
                .bind(net.clone())
                .bind(fork)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        // Pending -> dropped and final -> dropped (the edges `reorged` of the state machine).
        let mut dropped = [0u64; 2];
        for (slot, states) in dropped.iter_mut().zip([
            quoted_list(&[PaymentState::Pending]),
            quoted_list(&PaymentState::FINAL),
        ]) {
            let filter = format!("network = $1 AND block_number > $2 AND state IN {states}");
            let rows = sqlx::query(AssertSqlSafe(format!(
                "SELECT payment_id, index_in_tx, history_len, state FROM payments WHERE {filter} \
                 ORDER BY block_number, payment_id, index_in_tx"
            )))
            .bind(net.clone())
            .bind(fork)
            .fetch_all(&mut *tx)
            .await?;
            let history = rows
                .iter()
                .map(|row| {
                    HistoryRow::of_payment(
                        row,
                        state_of(row)?,
                        PaymentState::Dropped,
                        HistoryCause::Reorged,
                        fork_block,
                    )
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            insert_history(self.backend, &mut tx, network, &history, now).await?;
            *slot = sqlx::query(AssertSqlSafe(format!(
                "UPDATE payments SET state = $4, refunded_amount = '0', history_len = history_len + 1, \
                 state_changed_ms = $3 WHERE {filter}"
            )))
            .bind(net.clone())
            .bind(fork)
            .bind(now)
            .bind(PaymentState::Dropped.as_str())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        sqlx::query("DELETE FROM blocks WHERE network = $1 AND number > $2")
            .bind(net.clone())
            .bind(fork)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE cursors SET next_block = $1, updated_ms = $2 WHERE network = $3 AND next_block > $1",
        )
        .bind(fork + 1)
        .bind(now)
        .bind(net.clone())
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE chain_heads SET refund_scanned_block = $1 WHERE network = $2 AND refund_scanned_block > $1",
        )
        .bind(fork)
        .bind(net)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(RollbackSummary {
            transfers,
            authorizations,
            pending_dropped: dropped[0],
            paid_dropped: dropped[1],
            refunds_removed,
        })
    }

    /// Deletes refunds above the fork and gives the payments they were tied to (when those
    /// stay on the chain) their refunded sum and state back.
    async fn roll_back_refunds(
        &self,
        tx: &mut Tx<'_>,
        network: &str,
        fork: i64,
        now: i64,
    ) -> Result<u64, StoreError> {
        let removed = sqlx::query(
            "SELECT DISTINCT r.payment_id, r.index_in_tx FROM refunds r JOIN payments p \
             ON p.network = r.network AND p.payment_id = r.payment_id AND p.index_in_tx = r.index_in_tx \
             WHERE r.network = $1 AND r.block_number > $2 AND p.block_number <= $2",
        )
        .bind(network.to_string())
        .bind(fork)
        .fetch_all(&mut **tx)
        .await?;
        let count = sqlx::query("DELETE FROM refunds WHERE network = $1 AND block_number > $2")
            .bind(network.to_string())
            .bind(fork)
            .execute(&mut **tx)
            .await?
            .rows_affected();
        for row in removed {
            let payment_id: String = row.try_get("payment_id")?;
            let index_in_tx: i64 = row.try_get("index_in_tx")?;
            let left = sqlx::query(
                "SELECT amount FROM refunds WHERE network = $1 AND payment_id = $2 AND index_in_tx = $3",
            )
            .bind(network.to_string())
            .bind(payment_id.clone())
            .bind(index_in_tx)
            .fetch_all(&mut **tx)
            .await?;
            let mut refunded = U256::ZERO;
            for r in &left {
                refunded += parse_amount("refunds", &r.try_get::<String, _>("amount")?)?;
            }
            let payment = sqlx::query(
                "SELECT state, amount, history_len FROM payments WHERE network = $1 AND payment_id = $2 AND index_in_tx = $3",
            )
            .bind(network.to_string())
            .bind(payment_id.clone())
            .bind(index_in_tx)
            .fetch_one(&mut **tx)
            .await?;
            let from = state_of(&payment)?;
            let amount = parse_amount("payments", &payment.try_get::<String, _>("amount")?)?;
            let to = transition(Some(from), PaymentEvent::Refunded { refunded, amount }).map_err(illegal)?;
            let history = HistoryRow {
                payment_id: payment_id.clone(),
                index_in_tx: index_in_tx as u32,
                seq: payment.try_get("history_len")?,
                from: Some(from),
                to,
                cause: HistoryCause::RefundReorged,
                block_number: fork as u64,
                tx_id: payment_id,
            };
            set_refund_state(self.backend, tx, network, &history, refunded, now).await?;
        }
        Ok(count)
    }
}

/// `($2,$3,…)` or `(?,?,…)` for an `IN` list of `count` values whose first parameter is `$first`.
fn in_list(backend: Backend, first: usize, count: usize) -> String {
    let items: Vec<String> = (0..count)
        .map(|i| match backend {
            Backend::Postgres => format!("${}", first + i),
            Backend::Sqlite => format!("?{}", first + i),
        })
        .collect();
    format!("({})", items.join(","))
}

/// Reserves `count` ids of the global event sequence; the counter row stays locked (on
/// Postgres) until this transaction ends, so ids become visible in commit order.
async fn reserve_event_ids(tx: &mut Tx<'_>, count: usize) -> Result<i64, StoreError> {
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

async fn insert_history(
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
    insert_rows(
        backend,
        tx,
        "INSERT INTO payment_history (network, payment_id, index_in_tx, seq, from_state, to_state, cause, block_number, tx_id, at_ms, event_id)",
        "",
        11,
        &numbered,
        |q, (event_id, h)| {
            Ok(q.bind(network.to_string())
                .bind(h.payment_id.clone())
                .bind(i64::from(h.index_in_tx))
                .bind(h.seq)
                .bind(h.from.map(PaymentState::as_str))
                .bind(h.to.as_str())
                .bind(h.cause.as_str())
                .bind(to_i64("block number", h.block_number)?)
                .bind(h.tx_id.clone())
                .bind(now)
                .bind(*event_id))
        },
    )
    .await
}

/// Marks pending payments whose transactions left the chain before becoming final
/// `dropped` (the `reorged` edge of the state machine), with a `vanished` history row.
async fn drop_vanished(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    vanished: &[PaymentKey],
    now: i64,
) -> Result<(), StoreError> {
    for key in vanished {
        let row = sqlx::query(
            "SELECT state, history_len, block_number FROM payments WHERE network = $1 AND payment_id = $2 AND index_in_tx = $3",
        )
        .bind(network.to_string())
        .bind(key.payment_id.clone())
        .bind(i64::from(key.index_in_tx))
        .fetch_optional(&mut **tx)
        .await?;
        let Some(row) = row else { continue };
        let from = state_of(&row)?;
        if from != PaymentState::Pending {
            continue;
        }
        let to = transition(Some(from), PaymentEvent::Reorged).map_err(illegal)?;
        sqlx::query(
            "UPDATE payments SET state = $1, history_len = history_len + 1, state_changed_ms = $2 \
             WHERE network = $3 AND payment_id = $4 AND index_in_tx = $5",
        )
        .bind(to.as_str())
        .bind(now)
        .bind(network.to_string())
        .bind(key.payment_id.clone())
        .bind(i64::from(key.index_in_tx))
        .execute(&mut **tx)
        .await?;
        let history = HistoryRow {
            payment_id: key.payment_id.clone(),
            index_in_tx: key.index_in_tx,
            seq: row.try_get("history_len")?,
            from: Some(from),
            to,
            cause: HistoryCause::Vanished,
            block_number: row.try_get::<i64, _>("block_number")? as u64,
            tx_id: key.payment_id.clone(),
        };
        insert_history(backend, tx, network, std::slice::from_ref(&history), now).await?;
    }
    Ok(())
}

/// Writes a payment's new refunded sum and state with its history row.
async fn set_refund_state(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    history: &HistoryRow,
    refunded: U256,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE payments SET refunded_amount = $1, state = $2, history_len = history_len + 1, state_changed_ms = $3 \
         WHERE network = $4 AND payment_id = $5 AND index_in_tx = $6",
    )
    .bind(refunded.to_string())
    .bind(history.to.as_str())
    .bind(now)
    .bind(network.to_string())
    .bind(history.payment_id.clone())
    .bind(i64::from(history.index_in_tx))
    .execute(&mut **tx)
    .await?;
    insert_history(backend, tx, network, std::slice::from_ref(history), now).await
}

/// Upserts the chain head, promotes pending payments at or below the final block (the
/// `final` edge of the state machine), and ties newly final transfers to the payments they
/// refund.
async fn update_head(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    head: &HeadUpdate,
    now: i64,
) -> Result<u64, StoreError> {
    let final_i64 = head.final_block.map(|b| to_i64("block number", b)).transpose()?;
    sqlx::query(
        "INSERT INTO chain_heads (network, head_block, final_block, updated_ms) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (network) DO UPDATE SET head_block = excluded.head_block, \
         final_block = excluded.final_block, updated_ms = excluded.updated_ms",
    )
    .bind(network.to_string())
    .bind(to_i64("block number", head.head)?)
    .bind(final_i64)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    let Some(final_block) = final_i64 else {
        return Ok(0);
    };
    let promoting = sqlx::query(
        "SELECT payment_id, index_in_tx, history_len, block_number FROM payments \
         WHERE network = $1 AND state = $3 AND block_number <= $2 \
         ORDER BY block_number, payment_id, index_in_tx",
    )
    .bind(network.to_string())
    .bind(final_block)
    .bind(PaymentState::Pending.as_str())
    .fetch_all(&mut **tx)
    .await?;
    let history = promoting
        .iter()
        .map(|row| {
            HistoryRow::of_payment(
                row,
                PaymentState::Pending,
                PaymentState::Paid,
                HistoryCause::Final,
                block_of(row)?,
            )
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    insert_history(backend, tx, network, &history, now).await?;
    let promoted = sqlx::query(
        "UPDATE payments SET state = $4, history_len = history_len + 1, state_changed_ms = $1 \
         WHERE network = $2 AND state = $5 AND block_number <= $3",
    )
    .bind(now)
    .bind(network.to_string())
    .bind(final_block)
    .bind(PaymentState::Paid.as_str())
    .bind(PaymentState::Pending.as_str())
    .execute(&mut **tx)
    .await?
    .rows_affected();
    tie_refunds(backend, tx, network, final_block, head.refund_window_secs, now).await?;
    Ok(promoted)
}

/// Examines the transfers that became final since the last scan, in chain order, and ties
/// each one the refund rules accept to its payment.
async fn tie_refunds(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    final_block: i64,
    window_secs: i64,
    now: i64,
) -> Result<(), StoreError> {
    let scanned: Option<i64> = sqlx::query("SELECT refund_scanned_block FROM chain_heads WHERE network = $1")
        .bind(network.to_string())
        .fetch_one(&mut **tx)
        .await?
        .try_get("refund_scanned_block")?;
    let scanned = scanned.unwrap_or(-1);
    // Only blocks that are both final and already read: during a backfill the final block
    // is far ahead of the cursors, and a transfer is examined once only.
    let read_to: Option<i64> =
        sqlx::query("SELECT MIN(next_block) - 1 AS read_to FROM cursors WHERE network = $1")
            .bind(network.to_string())
            .fetch_one(&mut **tx)
            .await?
            .try_get("read_to")?;
    let final_block = final_block.min(read_to.unwrap_or(-1));
    if scanned >= final_block {
        return Ok(());
    }
    let candidates = sqlx::query(AssertSqlSafe(format!(
        "SELECT t.tx_id, t.event_index, t.block_number, t.block_time, t.token, t.from_address, t.to_address, t.amount, t.memo, \
         (SELECT a.nonce FROM authorizations a WHERE a.network = t.network AND a.tx_id = t.tx_id \
          AND a.token = t.token AND a.authorizer = t.from_address AND a.event_index < t.event_index \
          ORDER BY a.event_index DESC LIMIT 1) AS nonce \
         FROM transfers t WHERE t.network = $1 AND t.block_number > $2 AND t.block_number <= $3 \
         AND EXISTS (SELECT 1 FROM payments p WHERE p.network = t.network AND p.pay_to = t.from_address \
             AND p.payer = t.to_address AND p.asset = t.token AND p.state IN {final_states}) \
         AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.network = t.network AND r.refund_tx_id = t.tx_id \
             AND r.refund_event_index = t.event_index) \
         ORDER BY t.block_number, t.event_index",
        final_states = quoted_list(&PaymentState::FINAL),
    )))
    // Planned afresh for each range: a cached generic plan, made while the tables were
    // small, joined every payment ever stored on each step (quadratic over a backfill).
    .persistent(false)
    .bind(network.to_string())
    .bind(scanned)
    .bind(final_block)
    .fetch_all(&mut **tx)
    .await?;
    for transfer in candidates {
        let block: i64 = transfer.try_get("block_number")?;
        let event_index: i64 = transfer.try_get("event_index")?;
        let refund_tx: String = transfer.try_get("tx_id")?;
        let nonce: Option<String> = transfer.try_get("nonce")?;
        let memo: Option<String> = transfer.try_get("memo")?;
        let link = match (nonce.and_then(|n| n.parse().ok()), memo) {
            (Some(nonce), _) => Some(RefundLink::Nonce(nonce)),
            (None, Some(memo)) => Some(RefundLink::Memo(memo)),
            (None, None) => None,
        };
        let candidate = RefundCandidate {
            value: parse_amount("transfers", &transfer.try_get::<String, _>("amount")?)?,
            block_time: transfer.try_get("block_time")?,
            link,
        };
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT payment_id, index_in_tx, amount, refunded_amount, block_time, state, history_len FROM payments \
             WHERE network = $1 AND pay_to = $2 AND payer = $3 AND asset = $4 \
             AND state IN {final_states} \
             AND (block_number < $5 OR (block_number = $5 AND event_index < $6)) \
             ORDER BY block_number, event_index",
            final_states = quoted_list(&PaymentState::FINAL),
        )))
        .bind(network.to_string())
        .bind(transfer.try_get::<String, _>("from_address")?)
        .bind(transfer.try_get::<String, _>("to_address")?)
        .bind(transfer.try_get::<String, _>("token")?)
        .bind(block)
        .bind(event_index)
        .fetch_all(&mut **tx)
        .await?;
        let mut payments = Vec::with_capacity(rows.len());
        for row in &rows {
            payments.push(RefundablePayment {
                payment_id: row.try_get("payment_id")?,
                index_in_tx: row.try_get::<i64, _>("index_in_tx")? as u32,
                amount: parse_amount("payments", &row.try_get::<String, _>("amount")?)?,
                refunded: parse_amount("payments", &row.try_get::<String, _>("refunded_amount")?)?,
                block_time: row.try_get("block_time")?,
            });
        }
        let Some((i, rule)) = assign_refund(&candidate, &payments, window_secs) else {
            continue;
        };
        let payment = &payments[i];
        let refunded = payment.refunded + candidate.value;
        let from = state_of(&rows[i])?;
        let to = transition(
            Some(from),
            PaymentEvent::Refunded {
                refunded,
                amount: payment.amount,
            },
        )
        .map_err(illegal)?;
        let payment_id: String = rows[i].try_get("payment_id")?;
        sqlx::query(
            "INSERT INTO refunds (network, refund_tx_id, refund_event_index, payment_id, index_in_tx, amount, rule, block_number, assigned_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(network.to_string())
        .bind(refund_tx.clone())
        .bind(event_index)
        .bind(payment_id.clone())
        .bind(i64::from(payment.index_in_tx))
        .bind(candidate.value.to_string())
        .bind(rule.as_str())
        .bind(block)
        .bind(now)
        .execute(&mut **tx)
        .await?;
        let history = HistoryRow {
            payment_id,
            index_in_tx: payment.index_in_tx,
            seq: rows[i].try_get("history_len")?,
            from: Some(from),
            to,
            cause: HistoryCause::Refund,
            block_number: block as u64,
            tx_id: refund_tx,
        };
        set_refund_state(backend, tx, network, &history, refunded, now).await?;
    }
    sqlx::query("UPDATE chain_heads SET refund_scanned_block = $1 WHERE network = $2")
        .bind(final_block)
        .bind(network.to_string())
        .execute(&mut **tx)
        .await?;
    Ok(())
}
