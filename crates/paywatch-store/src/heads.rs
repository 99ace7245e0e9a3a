//! The head and finality update: the chain head and final block recorded, pending
//! payments at or below the final block promoted to `paid`, and final refunds tied.

use paywatch_core::state::{HistoryCause, PaymentState};

use crate::escrow::{IS_ESCROWED, apply_escrow_events};
use crate::history::{HistoryRow, insert_history};
use crate::refunds::tie_refunds;
use crate::rows::block_of;
use crate::{Backend, Store, StoreError, Tx, now_ms, to_i64};
use sqlx::{AssertSqlSafe, Row};

/// The chain's head as a worker last read it, and how refunds are matched.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeadUpdate {
    /// Latest block.
    pub head: u64,
    /// Highest final block, if any.
    pub final_block: Option<u64>,
    /// How long after a payment a transfer back may be matched to it, in seconds.
    pub refund_window_secs: i64,
    /// The head block's time minus the final block's, in seconds, when the worker read
    /// both.
    pub paid_lag_secs: Option<u64>,
    /// The wallets all of whose transfers are kept, and never pruned
    /// (`keep_transfers = "pay_to"`); empty: only payments' transfers and possible refunds.
    pub kept_wallets: Vec<String>,
}

impl Store {
    /// Records the chain head and the highest final block, marks every pending payment at or
    /// below the final block `paid`, and ties the transfers that became final to the payments
    /// they refund, in one transaction. Returns how many payments became paid.
    pub async fn record_head(&self, network: &str, head: &HeadUpdate) -> Result<u64, StoreError> {
        let mut tx = self.write_tx().await?;
        let promoted = update_head(self.backend, &mut tx, network, head, now_ms()).await?;
        tx.commit().await?;
        Ok(promoted)
    }
}

/// Upserts the chain head, promotes pending payments at or below the final block (the
/// `final` edge of the state machine), and ties newly final transfers to the payments they
/// refund.
pub(crate) async fn update_head(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    head: &HeadUpdate,
    now: i64,
) -> Result<u64, StoreError> {
    let final_i64 = head.final_block.map(|b| to_i64("block number", b)).transpose()?;
    sqlx::query(
        "INSERT INTO chain_heads (network, head_block, final_block, updated_ms, paid_lag_secs) \
         VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (network) DO UPDATE SET head_block = excluded.head_block, \
         final_block = excluded.final_block, updated_ms = excluded.updated_ms, \
         paid_lag_secs = excluded.paid_lag_secs",
    )
    .bind(network.to_string())
    .bind(to_i64("block number", head.head)?)
    .bind(final_i64)
    .bind(now)
    .bind(head.paid_lag_secs.map(|s| to_i64("seconds", s)).transpose()?)
    .execute(&mut **tx)
    .await?;
    let Some(final_block) = final_i64 else {
        return Ok(0);
    };
    let promoting = sqlx::query(AssertSqlSafe(format!(
        "SELECT payment_id, index_in_tx, history_len, block_number FROM payments \
         WHERE network = $1 AND state = $3 AND block_number <= $2 AND NOT {IS_ESCROWED} \
         ORDER BY block_number, payment_id, index_in_tx"
    )))
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
    let promoted = sqlx::query(AssertSqlSafe(format!(
        "UPDATE payments SET state = $4, history_len = history_len + 1, state_changed_ms = $1 \
         WHERE network = $2 AND state = $5 AND block_number <= $3 AND NOT {IS_ESCROWED}"
    )))
    .bind(now)
    .bind(network.to_string())
    .bind(final_block)
    .bind(PaymentState::Paid.as_str())
    .bind(PaymentState::Pending.as_str())
    .execute(&mut **tx)
    .await?
    .rows_affected();
    // Only blocks that are both final and already read by every token: during a backfill
    // the final block is far ahead of the cursors.
    let read_final = final_block.min(read_to(tx, network).await?);
    apply_escrow_events(backend, tx, network, read_final, now).await?;
    tie_refunds(backend, tx, network, read_final, head.refund_window_secs, now).await?;
    Ok(promoted)
}

/// The highest block every token of `network` has read (`-1`: none yet).
pub(crate) async fn read_to(tx: &mut Tx<'_>, network: &str) -> Result<i64, StoreError> {
    let read_to: Option<i64> =
        sqlx::query("SELECT MIN(next_block) - 1 AS read_to FROM cursors WHERE network = $1")
            .bind(network.to_string())
            .fetch_one(&mut **tx)
            .await?
            .try_get("read_to")?;
    Ok(read_to.unwrap_or(-1))
}
