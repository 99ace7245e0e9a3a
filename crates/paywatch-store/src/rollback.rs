//! The rollback after a reorg: everything above the fork block forgotten in one
//! transaction, payments dropped (with history), refunds undone, cursors moved back.

use paywatch_core::state::{HistoryCause, PaymentState};
use sqlx::{AssertSqlSafe, Row};

use crate::escrow::roll_back_escrow;
use crate::history::{HistoryRow, insert_history};
use crate::rows::{state_of, to_u64};
use crate::sql::quoted_list;
use crate::{Store, StoreError, now_ms, to_i64};

/// The states a payment is in once its block (an escrowed payment's authorization) is
/// final: a reorg that drops one went deeper than the finality rule.
const AFTER_FINALITY: [PaymentState; 5] = [
    PaymentState::Paid,
    PaymentState::PartiallyRefunded,
    PaymentState::Refunded,
    PaymentState::Held,
    PaymentState::Released,
];

/// What a rollback removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollbackSummary {
    /// Kept transfers forgotten: rows deleted and those held by the payments dropped.
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

impl Store {
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
        let mut tx = self.write_tx().await?;
        let refunds_removed = self.roll_back_refunds(&mut tx, network, fork, now).await?;
        roll_back_escrow(self.backend, &mut tx, network, fork, now).await?;
        // Counted before the payments holding some of them are dropped below.
        let transfers: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM stored_transfers WHERE network = $1 AND block_number > $2",
        )
        .bind(net.clone())
        .bind(fork)
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
        sqlx::query("DELETE FROM transfers WHERE network = $1 AND block_number > $2")
            .bind(net.clone())
            .bind(fork)
            .execute(&mut *tx)
            .await?;
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
            quoted_list(&AFTER_FINALITY),
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
                 captured_amount = CASE WHEN captured_amount IS NULL THEN NULL ELSE '0' END, \
                 released_amount = CASE WHEN released_amount IS NULL THEN NULL ELSE '0' END, \
                 held_amount = CASE WHEN held_amount IS NULL THEN NULL ELSE '0' END, \
                 fee_amount = CASE WHEN method = 'auth_capture' THEN '0' ELSE fee_amount END, \
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
        .bind(net.clone())
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE chain_heads SET transfers_pruned_block = $1 WHERE network = $2 AND transfers_pruned_block > $1",
        )
        .bind(fork)
        .bind(net)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(RollbackSummary {
            transfers: to_u64("stored_transfers", "count", transfers)?,
            authorizations,
            pending_dropped: dropped[0],
            paid_dropped: dropped[1],
            refunds_removed,
        })
    }
}
