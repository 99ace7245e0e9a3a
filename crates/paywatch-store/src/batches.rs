//! Batches from the workers: the rows one read produced (transfers, authorizations,
//! payments, block hashes) with the cursor advance and the head update, in one
//! transaction; new payments and re-read ones, and payments that vanished from a re-read.

use std::collections::HashMap;

use paywatch_core::records::{AuthorizationRecord, Batch, PaymentKey, PaymentRecord, TransferRecord};
use paywatch_core::retention::{TransferTriage, authorizations_to_keep, transfers_to_write};
use paywatch_core::state::{HistoryCause, PaymentEvent, PaymentState, transition};
use sqlx::{AssertSqlSafe, Row};

use crate::escrow::{insert_escrow, is_escrowed};
use crate::heads::{HeadUpdate, update_head};
use crate::history::{HistoryRow, illegal, insert_history};
use crate::retention::{prune_examined_transfers, stored_refund_routes};
use crate::rows::{block_of, state_of};
use crate::sql::{Placeholders, bind_position, insert_rows, rows_per_insert};
use crate::{Backend, Store, StoreError, Tx, now_ms, to_i64};

/// A token's read position: the next block to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenCursor {
    /// Token contract or mint.
    pub token: String,
    /// Next block to read.
    pub next_block: u64,
}

/// What a committed batch kept of its transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// Transfers kept: payments' and possible refunds'.
    pub transfers_kept: usize,
    /// Transfers that were neither, not written.
    pub transfers_skipped: usize,
    /// Authorizations kept: those that released a kept transfer other than their
    /// payment's.
    pub authorizations_kept: usize,
    /// Transfers kept before as possible refunds, examined by the refund rules and now
    /// older than the refund window, deleted.
    pub transfers_pruned: u64,
}

/// Inserts the `kept` token transfers, read with `payments`, that no payment's row holds
/// ([`transfers_to_write`]: the `stored_transfers` view reads those from their payments);
/// one already stored is left as it is.
pub(crate) async fn insert_transfers(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    kept: &[&TransferRecord],
    payments: &[PaymentRecord],
) -> Result<(), StoreError> {
    let transfers = transfers_to_write(kept, payments);
    insert_rows(
        backend,
        tx,
        "INSERT INTO transfers (network, tx_id, event_index, block_number, block_hash, block_time, token, from_address, to_address, amount, memo)",
        "ON CONFLICT (network, tx_id, event_index) DO NOTHING",
        11,
        &transfers,
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
    .await
}

/// Inserts the EIP-3009 authorizations the store keeps of `authorizations`, read with the
/// `kept` transfers and `payments` ([`authorizations_to_keep`]); one already stored is left
/// as it is. Returns how many it kept.
pub(crate) async fn insert_authorizations(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    authorizations: &[AuthorizationRecord],
    kept: &[&TransferRecord],
    payments: &[PaymentRecord],
) -> Result<usize, StoreError> {
    let authorizations = authorizations_to_keep(authorizations, kept, payments);
    insert_rows(
        backend,
        tx,
        "INSERT INTO authorizations (network, tx_id, event_index, block_number, block_hash, token, authorizer, nonce)",
        "ON CONFLICT (network, tx_id, event_index) DO NOTHING",
        8,
        &authorizations,
        |q, a| {
            Ok(bind_position(q, network, &a.position)?
                .bind(a.token.clone())
                .bind(a.authorizer.clone())
                .bind(a.nonce.clone()))
        },
    )
    .await?;
    Ok(authorizations.len())
}

/// A payment's facts as one comparable text: `payer → pay_to amount asset`.
fn payment_facts(payer: &str, pay_to: &str, amount: &str, asset: &str) -> String {
    format!("{payer} → {pay_to} {amount} {asset}")
}

impl Store {
    /// Commits one batch, moves the cursors of `tokens` to `batch.to_block + 1` and records the
    /// head (promoting what became final, tying final refunds), in one transaction: either
    /// all of it is stored, or none of it and the cursors stay. Of the batch's transfers
    /// only those that moved a payment's money or can refund a payment, and those of
    /// `head.kept_wallets`, are kept ([`TransferTriage`]); of its authorizations, those that
    /// released a kept transfer other than their payment's ([`authorizations_to_keep`]).
    pub async fn commit_batch(
        &self,
        network: &str,
        tokens: &[String],
        batch: &Batch,
        head: &HeadUpdate,
    ) -> Result<Committed, StoreError> {
        let now = now_ms();
        let backend = self.backend;
        let mut tx = self.write_tx().await?;
        let triage = TransferTriage::of(batch, &head.kept_wallets);
        let stored = stored_refund_routes(backend, &mut tx, network, &triage.undecided_routes()).await?;
        let (transfers, transfers_skipped) = triage.keep(&stored);
        insert_transfers(backend, &mut tx, network, &transfers, &batch.payments).await?;
        let authorizations_kept = insert_authorizations(
            backend,
            &mut tx,
            network,
            &batch.authorizations,
            &transfers,
            &batch.payments,
        )
        .await?;
        self.upsert_payments(&mut tx, network, &batch.payments, head.final_block, &[], now)
            .await?;
        insert_escrow(backend, &mut tx, network, batch).await?;
        drop_payments(
            backend,
            &mut tx,
            network,
            &batch.vanished_payments,
            HistoryCause::Vanished,
            |state| state == PaymentState::Pending,
            now,
        )
        .await?;
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
        let transfers_pruned = prune_examined_transfers(backend, &mut tx, network, head, now).await?;
        tx.commit().await?;
        Ok(Committed {
            transfers_kept: transfers.len(),
            transfers_skipped,
            authorizations_kept,
            transfers_pruned,
        })
    }

    /// Inserts new payments and updates re-read ones, with their state transitions: a new
    /// payment is `pending` (`paid` at once when its block is already final); a dropped
    /// one mined again is `pending` again; one moved to another block keeps its state.
    /// A final payment's facts never change, except for the `corrected` ones (an audit's
    /// repair), which take the answered facts with a `corrected` history row.
    pub(crate) async fn upsert_payments(
        &self,
        tx: &mut Tx<'_>,
        network: &str,
        payments: &[PaymentRecord],
        final_block: Option<u64>,
        corrected: &[PaymentKey],
        now: i64,
    ) -> Result<(), StoreError> {
        let mut existing: HashMap<(String, u32), (PaymentState, i64, String)> = HashMap::new();
        let ids: Vec<&String> = payments.iter().map(|p| &p.payment_id).collect();
        for chunk in ids.chunks(rows_per_insert(self.backend)) {
            let sql = format!(
                "SELECT payment_id, index_in_tx, state, history_len, payer, pay_to, amount, asset FROM payments WHERE network = $1 AND payment_id IN {}",
                Placeholders::after(self.backend, 1).list(chunk.len())
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
        let mut rows = Vec::with_capacity(payments.len());
        for payment in payments {
            let key = (payment.payment_id.clone(), payment.index_in_tx);
            let (mut state, mut history_len) = match existing.get(&key) {
                Some((state, len, _))
                    if corrected
                        .iter()
                        .any(|c| c.payment_id == key.0 && c.index_in_tx == key.1) =>
                {
                    history.push(HistoryRow {
                        payment_id: payment.payment_id.clone(),
                        index_in_tx: payment.index_in_tx,
                        seq: *len,
                        from: Some(*state),
                        to: *state,
                        cause: HistoryCause::Corrected,
                        block_number: payment.transfer.block_number,
                        tx_id: payment.payment_id.clone(),
                    });
                    (Some(*state), *len + 1)
                }
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
            // An escrowed payment's authorization or charge becoming final is one of its
            // escrow events, applied with the others (crate::escrow).
            if !is_escrowed(payment.method) && final_block.is_some_and(|f| block <= f) {
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
            "INSERT INTO payments (network, payment_id, index_in_tx, event_index, block_number, block_hash, block_time, payer, pay_to, amount, asset, method, nonce, max_amount, memo, facilitator, fee_amount, captured_amount, released_amount, held_amount, state, history_len, first_seen_ms, state_changed_ms)",
            "ON CONFLICT (network, payment_id, index_in_tx) DO UPDATE SET \
             event_index = excluded.event_index, block_number = excluded.block_number, \
             payer = excluded.payer, pay_to = excluded.pay_to, amount = excluded.amount, asset = excluded.asset, \
             method = excluded.method, nonce = COALESCE(excluded.nonce, payments.nonce), \
             max_amount = COALESCE(excluded.max_amount, payments.max_amount), memo = excluded.memo, facilitator = excluded.facilitator, \
             fee_amount = CASE WHEN payments.method = 'auth_capture' THEN payments.fee_amount ELSE excluded.fee_amount END, block_hash = excluded.block_hash, block_time = excluded.block_time, \
             state_changed_ms = CASE WHEN payments.state = excluded.state THEN payments.state_changed_ms ELSE excluded.state_changed_ms END, \
             state = excluded.state, history_len = excluded.history_len",
            24,
            &rows,
            |q, (p, state, history_len)| {
                // An escrowed payment's sums start at zero; other payments have none.
                let escrow_sum = is_escrowed(p.method).then(|| "0".to_string());
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
                    .bind(p.fee_amount.map(|f| f.to_string()))
                    .bind(escrow_sum.clone())
                    .bind(escrow_sum.clone())
                    .bind(escrow_sum)
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
        let mut tx = self.write_tx().await?;
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
}

/// Marks each stored payment of `keys` whose state `droppable` accepts `dropped` (the
/// `reorged` edge of the state machine; what was refunded of it no longer counts), each
/// with a history row of `cause`: pending payments whose transactions left the chain before
/// becoming final (`vanished`), or payments an audit found made up (`refuted`).
pub(crate) async fn drop_payments(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    keys: &[PaymentKey],
    cause: HistoryCause,
    droppable: fn(PaymentState) -> bool,
    now: i64,
) -> Result<(), StoreError> {
    let mut history = Vec::new();
    for key in keys {
        let row = sqlx::query(
            "SELECT payment_id, index_in_tx, state, history_len, block_number FROM payments \
             WHERE network = $1 AND payment_id = $2 AND index_in_tx = $3",
        )
        .bind(network.to_string())
        .bind(key.payment_id.clone())
        .bind(i64::from(key.index_in_tx))
        .fetch_optional(&mut **tx)
        .await?;
        let Some(row) = row else { continue };
        let from = state_of(&row)?;
        if !droppable(from) {
            continue;
        }
        let to = transition(Some(from), PaymentEvent::Reorged).map_err(illegal)?;
        sqlx::query(
            "UPDATE payments SET state = $1, refunded_amount = '0', history_len = history_len + 1, state_changed_ms = $2 \
             WHERE network = $3 AND payment_id = $4 AND index_in_tx = $5",
        )
        .bind(to.as_str())
        .bind(now)
        .bind(network.to_string())
        .bind(key.payment_id.clone())
        .bind(i64::from(key.index_in_tx))
        .execute(&mut **tx)
        .await?;
        history.push(HistoryRow::of_payment(&row, from, to, cause, block_of(&row)?)?);
    }
    insert_history(backend, tx, network, &history, now).await
}
