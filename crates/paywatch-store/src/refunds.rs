//! Refunds: final transfers back tied to the payments they refund (by the refund rules of
//! core), the refunded state they lead to, and their removal when a reorg takes them away.

use alloy_primitives::U256;
use paywatch_core::refunds::{RefundCandidate, RefundLink, RefundRule, RefundablePayment, assign_refund};
use paywatch_core::state::{HistoryCause, PaymentEvent, PaymentState, transition};
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use crate::escrow::IS_ESCROWED;
use crate::history::{HistoryRow, illegal, insert_history};
use crate::rows::{parse_amount, state_of};
use crate::sql::quoted_list;
use crate::{Backend, Store, StoreError, Tx};

impl Store {
    /// Deletes refunds above the fork and gives the payments they were tied to (when those
    /// stay on the chain) their refunded sum and state back.
    pub(crate) async fn roll_back_refunds(
        &self,
        tx: &mut Tx<'_>,
        network: &str,
        fork: i64,
        now: i64,
    ) -> Result<u64, StoreError> {
        let removed = sqlx::query(AssertSqlSafe(format!(
            "SELECT DISTINCT r.payment_id, r.index_in_tx FROM refunds r JOIN payments p \
             ON p.network = r.network AND p.payment_id = r.payment_id AND p.index_in_tx = r.index_in_tx \
             WHERE r.network = $1 AND r.block_number > $2 AND p.block_number <= $2 AND NOT p.{IS_ESCROWED}"
        )))
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

/// Writes a payment's new refunded sum and state with its history row.
pub(crate) async fn set_refund_state(
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

/// A transfer back tied to the payment it refunds: one row of `refunds`.
pub(crate) struct TiedRefund<'a> {
    pub(crate) refund_tx: &'a str,
    pub(crate) event_index: i64,
    pub(crate) payment: &'a str,
    pub(crate) index_in_tx: u32,
    pub(crate) amount: U256,
    pub(crate) rule: RefundRule,
    pub(crate) block: i64,
}

/// Writes `refund`, tied at `now`.
pub(crate) async fn insert_refund(
    tx: &mut Tx<'_>,
    network: &str,
    refund: &TiedRefund<'_>,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO refunds (network, refund_tx_id, refund_event_index, payment_id, index_in_tx, amount, rule, block_number, assigned_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(network.to_string())
    .bind(refund.refund_tx.to_string())
    .bind(refund.event_index)
    .bind(refund.payment.to_string())
    .bind(i64::from(refund.index_in_tx))
    .bind(refund.amount.to_string())
    .bind(refund.rule.as_str())
    .bind(refund.block)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The columns of a `stored_transfers` row `t` that [`candidate_of`] reads: the transfer, and the
/// nonce of the authorization its sender signed before it in its transaction — the nonce
/// of its payment when it is an EIP-3009 payment's own transfer (the store keeps no
/// separate row of a payment's authorization), else of the last stored authorization.
pub(crate) const CANDIDATE_COLUMNS: &str = "t.tx_id, t.event_index, t.block_number, t.block_time, t.token, \
    t.from_address, t.to_address, t.amount, t.memo, \
    COALESCE(\
     (SELECT p.nonce FROM payments p WHERE p.network = t.network AND p.payment_id = t.tx_id \
      AND p.event_index = t.event_index AND p.method = 'eip3009' AND p.payer = t.from_address \
      AND p.asset = t.token), \
     (SELECT a.nonce FROM authorizations a WHERE a.network = t.network AND a.tx_id = t.tx_id \
      AND a.token = t.token AND a.authorizer = t.from_address AND a.event_index < t.event_index \
      ORDER BY a.event_index DESC LIMIT 1)) AS nonce";

/// A transfer back as the refund rules see it, from a row of [`CANDIDATE_COLUMNS`]: its
/// value, time and what may name its payment (the nonce, else the memo).
pub(crate) fn candidate_of(transfer: &AnyRow) -> Result<RefundCandidate, StoreError> {
    let nonce: Option<String> = transfer.try_get("nonce")?;
    let memo: Option<String> = transfer.try_get("memo")?;
    let link = match (nonce.and_then(|n| n.parse().ok()), memo) {
        (Some(nonce), _) => Some(RefundLink::Nonce(nonce)),
        (None, Some(memo)) => Some(RefundLink::Memo(memo)),
        (None, None) => None,
    };
    Ok(RefundCandidate {
        value: parse_amount("transfers", &transfer.try_get::<String, _>("amount")?)?,
        block_time: transfer.try_get("block_time")?,
        link,
    })
}

/// Examines the transfers that became final since the last scan, in chain order, and ties
/// each one the refund rules accept to its payment.
pub(crate) async fn tie_refunds(
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
    if scanned >= final_block {
        return Ok(());
    }
    let candidates = sqlx::query(AssertSqlSafe(format!(
        "SELECT {CANDIDATE_COLUMNS} FROM stored_transfers t WHERE t.network = $1 AND t.block_number > $2 AND t.block_number <= $3 \
         AND EXISTS (SELECT 1 FROM payments p WHERE p.network = t.network AND p.pay_to = t.from_address \
             AND p.payer = t.to_address AND p.asset = t.token AND p.state IN {final_states} AND NOT p.{IS_ESCROWED}) \
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
        let candidate = candidate_of(&transfer)?;
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT payment_id, index_in_tx, amount, refunded_amount, block_time, state, history_len FROM payments \
             WHERE network = $1 AND pay_to = $2 AND payer = $3 AND asset = $4 \
             AND state IN {final_states} AND NOT {IS_ESCROWED} \
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
        let tied = TiedRefund {
            refund_tx: &refund_tx,
            event_index,
            payment: &payment_id,
            index_in_tx: payment.index_in_tx,
            amount: candidate.value,
            rule,
            block,
        };
        insert_refund(tx, network, &tied, now).await?;
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

#[cfg(test)]
mod tests {
    use paywatch_core::PaymentMethod;

    use super::CANDIDATE_COLUMNS;
    use crate::escrow::IS_ESCROWED;

    #[test]
    fn the_methods_spelled_in_sql_are_cores() {
        assert_eq!(
            IS_ESCROWED,
            format!("method = '{}'", PaymentMethod::AuthCapture.as_str())
        );
        let eip3009 = format!("p.method = '{}'", PaymentMethod::Eip3009.as_str());
        assert!(CANDIDATE_COLUMNS.contains(&eip3009), "{CANDIDATE_COLUMNS}");
    }
}
