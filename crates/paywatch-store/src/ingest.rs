//! Writes from the workers: a batch of rows with its cursor advance in one transaction,
//! the head and finality update, and the rollback after a reorg.

use paywatch_core::records::{Batch, EventPosition};
use paywatch_core::state::PaymentState;
use sqlx::any::AnyArguments;
use sqlx::query::Query;
use sqlx::{Any, AssertSqlSafe};

use crate::sql::{rows_per_insert, values_placeholders};
use crate::{Backend, Store, StoreError, now_ms, to_i64};

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
    /// Payments marked dropped that were already paid: a reorg deeper than the finality rule.
    pub paid_dropped: u64,
}

/// Runs a multi-row `INSERT … VALUES … <suffix>` over `rows` in chunks, binding each row with `bind`.
async fn insert_rows<'c, T>(
    backend: Backend,
    tx: &mut sqlx::Transaction<'c, Any>,
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

impl Store {
    /// Commits one batch, moves the cursors of `tokens` to `batch.to_block + 1` and records the
    /// head (promoting what became final), in one transaction: either all of it is stored, or
    /// none of it and the cursors stay.
    pub async fn commit_batch(
        &self,
        network: &str,
        tokens: &[String],
        batch: &Batch,
        head: u64,
        final_block: Option<u64>,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        insert_rows(
            self.backend,
            &mut tx,
            "INSERT INTO transfers (network, tx_id, event_index, block_number, block_hash, block_time, token, from_address, to_address, amount)",
            "ON CONFLICT (network, tx_id, event_index) DO NOTHING",
            10,
            &batch.transfers,
            |q, t| {
                Ok(bind_position(q, network, &t.position)?
                    .bind(t.position.block_time)
                    .bind(t.token.clone())
                    .bind(t.from.clone())
                    .bind(t.to.clone())
                    .bind(t.value.to_string()))
            },
        )
        .await?;
        insert_rows(
            self.backend,
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
        // A payment seen again (re-read, or moved to another block by a reorg) keeps its row;
        // one that was dropped and reappears is pending again.
        insert_rows(
            self.backend,
            &mut tx,
            "INSERT INTO payments (network, payment_id, index_in_tx, event_index, block_number, block_hash, block_time, payer, pay_to, amount, asset, nonce, state, first_seen_ms, state_changed_ms)",
            "ON CONFLICT (network, payment_id, index_in_tx) DO UPDATE SET \
             event_index = excluded.event_index, block_number = excluded.block_number, \
             block_hash = excluded.block_hash, block_time = excluded.block_time, \
             state_changed_ms = CASE WHEN payments.state = 'dropped' THEN excluded.state_changed_ms ELSE payments.state_changed_ms END, \
             state = CASE WHEN payments.state = 'dropped' THEN 'pending' ELSE payments.state END",
            15,
            &batch.payments,
            |q, p| {
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
                    .bind(p.nonce.clone())
                    .bind(PaymentState::Pending.as_str())
                    .bind(now)
                    .bind(now))
            },
        )
        .await?;
        insert_rows(
            self.backend,
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
            self.backend,
            &mut tx,
            "INSERT INTO cursors (network, token, next_block, updated_ms)",
            "ON CONFLICT (network, token) DO UPDATE SET next_block = excluded.next_block, updated_ms = excluded.updated_ms",
            4,
            tokens,
            |q, token| Ok(q.bind(network.to_string()).bind(token.clone()).bind(next_block).bind(now)),
        )
        .await?;
        update_head(&mut tx, network, head, final_block, now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Sets the cursor of tokens that have none yet (first start); existing cursors are kept.
    pub async fn init_cursors(&self, network: &str, cursors: &[TokenCursor]) -> Result<(), StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
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

    /// Records the chain head and the highest final block, and marks every pending payment
    /// at or below the final block `paid`, in one transaction. Returns how many became paid.
    pub async fn record_head(
        &self,
        network: &str,
        head: u64,
        final_block: Option<u64>,
    ) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin().await?;
        let promoted = update_head(&mut tx, network, head, final_block, now_ms()).await?;
        tx.commit().await?;
        Ok(promoted)
    }

    /// Forgets everything above `fork_block` after a reorg, in one transaction: transfers,
    /// authorizations and block hashes are deleted, payments are marked `dropped` (a payment
    /// that is re-read from the canonical chain becomes pending again), and cursors move back
    /// to `fork_block + 1`.
    pub async fn rollback_after(
        &self,
        network: &str,
        fork_block: u64,
    ) -> Result<RollbackSummary, StoreError> {
        let now = now_ms();
        let fork = to_i64("block number", fork_block)?;
        let net = network.to_string();
        let mut tx = self.pool.begin().await?;
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
        let mut dropped = [0u64; 2];
        for (slot, from_state) in dropped.iter_mut().zip(["pending", "paid"]) {
            *slot = sqlx::query(
                "UPDATE payments SET state = 'dropped', state_changed_ms = $1 \
                 WHERE network = $2 AND block_number > $3 AND state = $4",
            )
            .bind(now)
            .bind(net.clone())
            .bind(fork)
            .bind(from_state)
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
        .bind(net)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(RollbackSummary {
            transfers,
            authorizations,
            pending_dropped: dropped[0],
            paid_dropped: dropped[1],
        })
    }
}

/// Upserts the chain head and promotes pending payments at or below the final block.
async fn update_head(
    tx: &mut sqlx::Transaction<'_, Any>,
    network: &str,
    head: u64,
    final_block: Option<u64>,
    now: i64,
) -> Result<u64, StoreError> {
    let final_i64 = final_block.map(|b| to_i64("block number", b)).transpose()?;
    sqlx::query(
        "INSERT INTO chain_heads (network, head_block, final_block, updated_ms) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (network) DO UPDATE SET head_block = excluded.head_block, \
         final_block = excluded.final_block, updated_ms = excluded.updated_ms",
    )
    .bind(network.to_string())
    .bind(to_i64("block number", head)?)
    .bind(final_i64)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    let Some(final_block) = final_i64 else {
        return Ok(0);
    };
    let promoted = sqlx::query(
        "UPDATE payments SET state = 'paid', state_changed_ms = $1 \
         WHERE network = $2 AND state = 'pending' AND block_number <= $3",
    )
    .bind(now)
    .bind(network.to_string())
    .bind(final_block)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(promoted)
}
