//! Reads: payment lookups, reconciliation listings, chain heads, cursors and remembered
//! block hashes.

use paywatch_core::PaymentMethod;
use paywatch_core::listing::{PageCursor, PaymentFilter};
use paywatch_core::records::{BlockRecord, EventPosition, PaymentKey, TransferRecord};
use paywatch_core::refunds::RefundRule;
use paywatch_core::state::{EventKind, HistoryCause, PaymentState};
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use crate::batches::TokenCursor;
use crate::rows::{index_in_tx_of, parse_amount, state_of, to_u64, word, word_of};
use crate::signed::BoundIntent;
use crate::sql::{Bindings, Param, keyset_page};
use crate::{Backend, Store, StoreError, to_i64};

/// A payment as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPayment {
    /// CAIP-2 network id.
    pub network: String,
    /// Transaction hash or signature.
    pub payment_id: String,
    /// Its number in the transaction (see `PaymentRecord::index_in_tx`).
    pub index_in_tx: u32,
    /// Log index (EVM) of the transfer that moved the money.
    pub event_index: u64,
    /// Block (slot) number.
    pub block_number: u64,
    /// Block hash.
    pub block_hash: String,
    /// Block time, Unix seconds.
    pub block_time: Option<i64>,
    /// Who paid.
    pub payer: String,
    /// Who was paid.
    pub pay_to: String,
    /// Exact amount in the asset's smallest unit, as a decimal string.
    pub amount: String,
    /// Token contract or mint.
    pub asset: String,
    /// How the money moved.
    pub method: PaymentMethod,
    /// The authorization's nonce: EIP-3009's `0x` + 64 hex or Permit2's decimal `uint256`.
    pub nonce: Option<String>,
    /// `upto`: the maximum the payer signed, exact decimal string.
    pub max_amount: Option<String>,
    /// Token-2022 transfers with a fee: the fee withheld in the seller's account; escrowed
    /// payments: the fees of its final captures, to their fee receivers.
    pub fee_amount: Option<String>,
    /// Escrowed payments: what final captures (and a charge) moved to the receiver, fees
    /// included; `amount` is what was authorized.
    pub captured_amount: Option<String>,
    /// Escrowed payments: what final voids or reclaims sent back to the payer uncaptured.
    pub released_amount: Option<String>,
    /// Escrowed payments: what is still in escrow (authorized, final, neither captured nor
    /// released).
    pub held_amount: Option<String>,
    /// The transaction's SPL Memo text (Solana).
    pub memo: Option<String>,
    /// Who paid the transaction's fee (Solana): the facilitator; `None` on EVM.
    pub facilitator: Option<String>,
    /// Current state.
    pub state: PaymentState,
    /// Sum of its final refunds, exact decimal string.
    pub refunded_amount: String,
    /// When paywatch first stored it, Unix milliseconds.
    pub first_seen_ms: i64,
    /// When its state last changed, Unix milliseconds.
    pub state_changed_ms: i64,
}

/// A payment with what a lookup shows beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentLookup {
    /// The payment.
    pub payment: StoredPayment,
    /// Its network's last recorded head block, if any.
    pub head_block: Option<u64>,
    /// The intent its nonce commits to, once revealed.
    pub intent: Option<BoundIntent>,
    /// How many refunds are tied to it.
    pub refund_count: u64,
}

/// A refund tied to a payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRefund {
    /// The transaction that moved the money back.
    pub refund_tx_id: String,
    /// Log index of its transfer.
    pub refund_event_index: u64,
    /// Amount moved back.
    pub amount: String,
    /// The rule that tied it.
    pub rule: RefundRule,
    /// Its block.
    pub block_number: u64,
    /// When paywatch tied it, Unix milliseconds.
    pub assigned_ms: i64,
}

/// One state change of a payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// Position in the payment's history, from 0.
    pub seq: u64,
    /// State before (`None` for the first).
    pub from_state: Option<PaymentState>,
    /// State after.
    pub to_state: PaymentState,
    /// Why it changed.
    pub cause: HistoryCause,
    /// The block that caused it (the fork block for reorgs).
    pub block_number: Option<u64>,
    /// The transaction that caused it (the refund's for refunds).
    pub tx_id: Option<String>,
    /// When, Unix milliseconds.
    pub at_ms: i64,
}

/// One state change in the global event sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentEvent {
    /// Its position in the sequence: from 1, gap-free, in commit order.
    pub event_id: u64,
    /// CAIP-2 network id.
    pub network: String,
    /// Transaction hash or signature.
    pub payment_id: String,
    /// Its number in the transaction.
    pub index_in_tx: u32,
    /// The payment's memo (Solana), for a consumer that ties payments to orders by it.
    pub memo: Option<String>,
    /// How the payment's money moved.
    pub method: PaymentMethod,
    /// `payment_state` (a row of the payment's history) or `review_state` (the published
    /// state of its review changed: `change` holds the published states, and the cause,
    /// `seq`, block and transaction of the history row that changed it).
    pub kind: EventKind,
    /// The change (a `verification` event: the payment's last one, whose state the
    /// verdict is on).
    pub change: HistoryEntry,
    /// A `verification` event's verdict: whether the audit found the payment's state as
    /// the chain has it (false: an unrepaired finding is about it).
    pub verified: Option<bool>,
}

fn history_from_row(row: &AnyRow) -> Result<HistoryEntry, StoreError> {
    let block: Option<i64> = row.try_get("block_number")?;
    Ok(HistoryEntry {
        seq: to_u64("payment_history", "seq", row.try_get("seq")?)?,
        from_state: row
            .try_get::<Option<String>, _>("from_state")?
            .map(|state| word("payment_history", "from_state", &state))
            .transpose()?,
        to_state: word_of("payment_history", row, "to_state")?,
        cause: word_of("payment_history", row, "cause")?,
        block_number: block
            .map(|b| to_u64("payment_history", "block_number", b))
            .transpose()?,
        tx_id: row.try_get("tx_id")?,
        at_ms: row.try_get("at_ms")?,
    })
}

/// The head and final block last recorded for a network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainHead {
    /// Latest block seen.
    pub head_block: u64,
    /// Highest final block, if any.
    pub final_block: Option<u64>,
    /// When it was recorded, Unix milliseconds.
    pub updated_ms: i64,
    /// The head block's time minus the final block's, in seconds, when recorded.
    pub paid_lag_secs: Option<u64>,
}

/// `select` with the `WHERE` clause of `filter`, and its bound values.
pub(crate) fn filtered(backend: Backend, select: &str, filter: &PaymentFilter) -> (String, Bindings) {
    let mut bindings = Bindings::new(backend);
    let mut sql = format!(
        "{select} WHERE network = {}",
        bindings.push(Param::Text(filter.network.to_string()))
    );
    let mut and = |sql: &mut String, column: &str, op: &str, param: Param| {
        sql.push_str(&format!(" AND {column} {op} {}", bindings.push(param)));
    };
    for (column, value) in [
        ("payer", &filter.payer),
        ("pay_to", &filter.pay_to),
        ("asset", &filter.asset),
        ("memo", &filter.memo),
        ("facilitator", &filter.facilitator),
    ] {
        if let Some(value) = value {
            and(&mut sql, column, "=", Param::Text(value.clone()));
        }
    }
    if let Some(state) = filter.state {
        and(&mut sql, "state", "=", Param::Text(state.to_string()));
    }
    if let Some(method) = filter.method {
        and(&mut sql, "method", "=", Param::Text(method.to_string()));
    }
    if let Some(from) = filter.from {
        and(&mut sql, "block_time", ">=", Param::Int(from));
    }
    if let Some(to) = filter.to {
        and(&mut sql, "block_time", "<", Param::Int(to));
    }
    (sql, bindings)
}

/// A transfers row (`tx_id`, `event_index`, `block_number`, `block_hash`, `block_time`,
/// `token`, `from_address`, `to_address`, `amount`, `memo`) as a [`TransferRecord`].
pub(crate) fn transfer_from_row(row: &AnyRow) -> Result<TransferRecord, StoreError> {
    Ok(TransferRecord {
        position: EventPosition {
            tx_id: row.try_get("tx_id")?,
            event_index: to_u64("transfers", "event_index", row.try_get("event_index")?)?,
            block_number: to_u64("transfers", "block_number", row.try_get("block_number")?)?,
            block_hash: row.try_get("block_hash")?,
            block_time: row.try_get("block_time")?,
        },
        token: row.try_get("token")?,
        from: row.try_get("from_address")?,
        to: row.try_get("to_address")?,
        value: parse_amount("transfers", &row.try_get::<String, _>("amount")?)?,
        memo: row.try_get("memo")?,
    })
}

/// A stored method spelling as a [`PaymentMethod`]; `None` where a history row has lost
/// its payment.
fn method_of(table: &'static str, method: Option<String>) -> Result<PaymentMethod, StoreError> {
    let method = method.ok_or_else(|| StoreError::Corrupt {
        table,
        detail: "a payment without its method".to_string(),
    })?;
    word(table, "method", &method)
}

/// A payments row as a [`StoredPayment`].
pub(crate) fn payment_from_row(row: &AnyRow) -> Result<StoredPayment, StoreError> {
    let state = state_of(row)?;
    Ok(StoredPayment {
        network: row.try_get("network")?,
        payment_id: row.try_get("payment_id")?,
        index_in_tx: index_in_tx_of("payments", row)?,
        event_index: to_u64("payments", "event_index", row.try_get("event_index")?)?,
        block_number: to_u64("payments", "block_number", row.try_get("block_number")?)?,
        block_hash: row.try_get("block_hash")?,
        block_time: row.try_get("block_time")?,
        payer: row.try_get("payer")?,
        pay_to: row.try_get("pay_to")?,
        amount: row.try_get("amount")?,
        asset: row.try_get("asset")?,
        method: method_of("payments", row.try_get("method")?)?,
        nonce: row.try_get("nonce")?,
        max_amount: row.try_get("max_amount")?,
        memo: row.try_get("memo")?,
        facilitator: row.try_get("facilitator")?,
        fee_amount: row.try_get("fee_amount")?,
        captured_amount: row.try_get("captured_amount")?,
        released_amount: row.try_get("released_amount")?,
        held_amount: row.try_get("held_amount")?,
        state,
        refunded_amount: row.try_get("refunded_amount")?,
        first_seen_ms: row.try_get("first_seen_ms")?,
        state_changed_ms: row.try_get("state_changed_ms")?,
    })
}

/// The `SELECT` list of a stored payment's columns, as [`payment_from_row`] reads them.
macro_rules! select_payments {
    () => {
        "SELECT network, payment_id, index_in_tx, event_index, block_number, block_hash, block_time, \
         payer, pay_to, amount, asset, method, nonce, max_amount, memo, facilitator, fee_amount, captured_amount, released_amount, held_amount, state, refunded_amount, first_seen_ms, state_changed_ms"
    };
}

/// The `SELECT` list of a stored payment's columns.
pub(crate) const SELECT_PAYMENTS: &str = select_payments!();

/// `sql` (a filtered `SELECT` of payments) continued after `after` in chain order, and
/// cut to `limit` rows.
pub(crate) fn page_after(
    mut sql: String,
    mut bindings: Bindings,
    after: Option<&PageCursor>,
    limit: u32,
) -> Result<(String, Bindings), StoreError> {
    let after = after
        .map(|c| {
            Ok::<_, StoreError>((
                to_i64("cursor block", c.block_number)?,
                c.payment_id.clone(),
                i64::from(c.index_in_tx),
            ))
        })
        .transpose()?;
    keyset_page(
        &mut sql,
        &mut bindings,
        ["block_number", "payment_id", "index_in_tx"],
        after,
        limit,
    );
    Ok((sql, bindings))
}

impl Store {
    /// The payments of one transaction on one network, in their order within it
    /// (almost always exactly one, or none).
    pub async fn payments_by_id(
        &self,
        network: &str,
        payment_id: &str,
    ) -> Result<Vec<StoredPayment>, StoreError> {
        let rows = sqlx::query(concat!(
            select_payments!(),
            " FROM payments WHERE network = $1 AND payment_id = $2 ORDER BY index_in_tx"
        ))
        .bind(network.to_string())
        .bind(payment_id.to_string())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(payment_from_row).collect()
    }

    /// The payments that used one authorization: `payer`'s `nonce` on `asset` (all
    /// spelled as stored). Almost always one; a payment a reorg dropped and the same
    /// authorization settled again in another transaction are two. Chain order. Found by
    /// the nonce (`payments_by_authorization`), the payer and asset checked on its rows.
    pub async fn payments_by_authorization(
        &self,
        network: &str,
        asset: &str,
        payer: &str,
        nonce: &str,
    ) -> Result<Vec<StoredPayment>, StoreError> {
        let rows = sqlx::query(concat!(
            select_payments!(),
            " FROM payments WHERE network = $1 AND payer = $2 AND nonce = $3 AND asset = $4 \
             ORDER BY block_number, payment_id, index_in_tx"
        ))
        .bind(network.to_string())
        .bind(payer.to_string())
        .bind(nonce.to_string())
        .bind(asset.to_string())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(payment_from_row).collect()
    }

    /// One page of a reconciliation listing: up to `limit` payments matching `filter`, in
    /// chain order (block, payment id, index), after `after` when given.
    pub async fn list_payments(
        &self,
        filter: &PaymentFilter,
        after: Option<&PageCursor>,
        limit: u32,
    ) -> Result<Vec<StoredPayment>, StoreError> {
        let (sql, bindings) = filtered(
            self.backend,
            concat!(select_payments!(), " FROM payments"),
            filter,
        );
        let (sql, bindings) = page_after(sql, bindings, after, limit)?;
        let rows = bindings.query(sql).fetch_all(&self.pool).await?;
        rows.iter().map(payment_from_row).collect()
    }

    /// The refunds tied to one payment, in chain order.
    pub async fn refunds_of(
        &self,
        network: &str,
        payment_id: &str,
        index_in_tx: u32,
    ) -> Result<Vec<StoredRefund>, StoreError> {
        let rows = sqlx::query(
            "SELECT refund_tx_id, refund_event_index, amount, rule, block_number, assigned_ms FROM refunds \
             WHERE network = $1 AND payment_id = $2 AND index_in_tx = $3 ORDER BY block_number, refund_event_index",
        )
        .bind(network.to_string())
        .bind(payment_id.to_string())
        .bind(i64::from(index_in_tx))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(StoredRefund {
                    refund_tx_id: row.try_get("refund_tx_id")?,
                    refund_event_index: to_u64(
                        "refunds",
                        "refund_event_index",
                        row.try_get("refund_event_index")?,
                    )?,
                    amount: row.try_get("amount")?,
                    rule: word_of("refunds", row, "rule")?,
                    block_number: to_u64("refunds", "block_number", row.try_get("block_number")?)?,
                    assigned_ms: row.try_get("assigned_ms")?,
                })
            })
            .collect()
    }

    /// Every state change of one payment, oldest first.
    pub async fn history_of(
        &self,
        network: &str,
        payment_id: &str,
        index_in_tx: u32,
    ) -> Result<Vec<HistoryEntry>, StoreError> {
        let rows = sqlx::query(
            "SELECT seq, from_state, to_state, cause, block_number, COALESCE(tx_id, payment_id) AS tx_id, at_ms \
             FROM payment_history \
             WHERE network = $1 AND payment_id = $2 AND index_in_tx = $3 ORDER BY seq",
        )
        .bind(network.to_string())
        .bind(payment_id.to_string())
        .bind(i64::from(index_in_tx))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(history_from_row).collect()
    }

    /// Up to `limit` events of the `kinds` asked for after event `after` in the global
    /// event sequence, in order, optionally of one network only.
    pub async fn events_after(
        &self,
        after: u64,
        network: Option<&str>,
        kinds: &[EventKind],
        limit: u32,
    ) -> Result<Vec<PaymentEvent>, StoreError> {
        let limit = limit.max(1);
        let of_network = if network.is_some() { "AND network = $2" } else { "" };
        let branches: Vec<String> = kinds
            .iter()
            .map(|kind| {
                let (table, verified) = match kind {
                    EventKind::PaymentState => ("payment_history", "CAST(NULL AS BIGINT)"),
                    EventKind::ReviewState => ("review_events", "CAST(NULL AS BIGINT)"),
                    EventKind::Verification => ("verification_events", "verified"),
                };
                format!(
                    "SELECT * FROM (SELECT event_id, network, payment_id, index_in_tx, seq, from_state, to_state, \
                     cause, block_number, COALESCE(tx_id, payment_id) AS tx_id, at_ms, '{}' AS kind, \
                     {verified} AS verified FROM {table} \
                     WHERE event_id > $1 {of_network} ORDER BY event_id LIMIT {limit}) AS {table}",
                    kind.as_str()
                )
            })
            .collect();
        if branches.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT h.*, (SELECT p.memo FROM payments p WHERE p.network = h.network \
             AND p.payment_id = h.payment_id AND p.index_in_tx = h.index_in_tx) AS memo, \
             (SELECT p.method FROM payments p WHERE p.network = h.network \
             AND p.payment_id = h.payment_id AND p.index_in_tx = h.index_in_tx) AS method \
             FROM ({}) AS h ORDER BY event_id LIMIT {limit}",
            branches.join(" UNION ALL ")
        );
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(to_i64("event id", after)?);
        if let Some(network) = network {
            query = query.bind(network.to_string());
        }
        let rows = query.fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| {
                Ok(PaymentEvent {
                    event_id: to_u64("payment_history", "event_id", row.try_get("event_id")?)?,
                    network: row.try_get("network")?,
                    payment_id: row.try_get("payment_id")?,
                    index_in_tx: index_in_tx_of("payment_history", row)?,
                    memo: row.try_get("memo")?,
                    method: method_of("payment_history", row.try_get("method")?)?,
                    kind: word_of("payment_history", row, "kind")?,
                    change: history_from_row(row)?,
                    verified: row.try_get::<Option<i64>, _>("verified")?.map(|v| v != 0),
                })
            })
            .collect()
    }

    /// The id of the last committed event (0 before the first).
    pub async fn latest_event_id(&self) -> Result<u64, StoreError> {
        let last: i64 = sqlx::query_scalar("SELECT last_event FROM event_counter WHERE id = 1")
            .fetch_one(&self.pool)
            .await?;
        to_u64("event_counter", "last_event", last)
    }

    /// The head and final block last recorded for `network`.
    pub async fn chain_head(&self, network: &str) -> Result<Option<ChainHead>, StoreError> {
        let row = sqlx::query(
            "SELECT head_block, final_block, updated_ms, paid_lag_secs FROM chain_heads WHERE network = $1",
        )
        .bind(network.to_string())
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            let final_block: Option<i64> = row.try_get("final_block")?;
            Ok(ChainHead {
                head_block: to_u64("chain_heads", "head_block", row.try_get("head_block")?)?,
                final_block: final_block
                    .map(|b| to_u64("chain_heads", "final_block", b))
                    .transpose()?,
                updated_ms: row.try_get("updated_ms")?,
                paid_lag_secs: row
                    .try_get::<Option<i64>, _>("paid_lag_secs")?
                    .map(|s| to_u64("chain_heads", "paid_lag_secs", s))
                    .transpose()?,
            })
        })
        .transpose()
    }

    /// The cursors of every token of `network`.
    pub async fn cursors(&self, network: &str) -> Result<Vec<TokenCursor>, StoreError> {
        let rows = sqlx::query("SELECT token, next_block FROM cursors WHERE network = $1 ORDER BY token")
            .bind(network.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(TokenCursor {
                    token: row.try_get("token")?,
                    next_block: to_u64("cursors", "next_block", row.try_get("next_block")?)?,
                })
            })
            .collect()
    }

    /// Pending payments of `network` at or below block (slot) `at_or_below`, with their
    /// block, in chain order: the ones a Solana worker checks before calling them final.
    pub async fn pending_payments(
        &self,
        network: &str,
        at_or_below: u64,
    ) -> Result<Vec<(PaymentKey, u64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT payment_id, index_in_tx, block_number FROM payments \
             WHERE network = $1 AND state = $3 AND block_number <= $2 ORDER BY block_number, payment_id",
        )
        .bind(network.to_string())
        .bind(to_i64("block number", at_or_below)?)
        .bind(PaymentState::Pending.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    PaymentKey {
                        payment_id: row.try_get("payment_id")?,
                        index_in_tx: to_u64("payments", "index_in_tx", row.try_get("index_in_tx")?)? as u32,
                    },
                    to_u64("payments", "block_number", row.try_get("block_number")?)?,
                ))
            })
            .collect()
    }

    /// Remembered blocks of `network` at or below `at_or_below`, highest first, at most `limit`.
    pub async fn blocks_descending(
        &self,
        network: &str,
        at_or_below: u64,
        limit: u32,
    ) -> Result<Vec<BlockRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT number, hash, parent_hash FROM blocks WHERE network = $1 AND number <= $2 \
             ORDER BY number DESC LIMIT $3",
        )
        .bind(network.to_string())
        .bind(to_i64("block number", at_or_below)?)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(BlockRecord {
                    number: to_u64("blocks", "number", row.try_get("number")?)?,
                    hash: row.try_get("hash")?,
                    parent_hash: row.try_get("parent_hash")?,
                })
            })
            .collect()
    }

    /// The payments of `network` in blocks `from..=to`, in chain order, whatever their
    /// state: what an audit compares with the chain.
    pub async fn payments_in_blocks(
        &self,
        network: &str,
        from: u64,
        to: u64,
    ) -> Result<Vec<StoredPayment>, StoreError> {
        let rows = sqlx::query(concat!(
            select_payments!(),
            " FROM payments WHERE network = $1 AND block_number >= $2 AND block_number <= $3 \
             ORDER BY block_number, payment_id, index_in_tx"
        ))
        .bind(network.to_string())
        .bind(to_i64("block number", from)?)
        .bind(to_i64("block number", to)?)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(payment_from_row).collect()
    }

    /// The token transfers kept for `network` in blocks `from..=to` (those that moved a
    /// payment's money or may refund one), in chain order.
    pub async fn transfers_in_blocks(
        &self,
        network: &str,
        from: u64,
        to: u64,
    ) -> Result<Vec<TransferRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT tx_id, event_index, block_number, block_hash, block_time, token, from_address, to_address, amount, memo \
             FROM stored_transfers WHERE network = $1 AND block_number >= $2 AND block_number <= $3 \
             ORDER BY block_number, event_index",
        )
        .bind(network.to_string())
        .bind(to_i64("block number", from)?)
        .bind(to_i64("block number", to)?)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(transfer_from_row).collect()
    }

    /// Counts what is stored for `network`: (kept transfers, whether a row of their own or
    /// held by their payment's row; authorizations; payments).
    pub async fn row_counts(&self, network: &str) -> Result<(u64, u64, u64), StoreError> {
        let mut counts = [0u64; 3];
        for (slot, table) in counts
            .iter_mut()
            .zip(["stored_transfers", "authorizations", "payments"])
        {
            let sql = format!("SELECT COUNT(*) AS n FROM {table} WHERE network = $1");
            let row = sqlx::query(AssertSqlSafe(sql))
                .bind(network.to_string())
                .fetch_one(&self.pool)
                .await?;
            *slot = to_u64("counts", table, row.try_get("n")?)?;
        }
        Ok((counts[0], counts[1], counts[2]))
    }
}
