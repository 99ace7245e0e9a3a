//! `paywatch audit --repair`: one audited range made to hold what the chain holds, in one
//! write transaction (fenced like every write): made-up payments refuted, payments with
//! other facts corrected, what the store lacks inserted the way ingestion inserts it,
//! made-up transfers deleted, and the refunds of every route a change touches tied again
//! in chain order by the refund rules.

use std::collections::{BTreeMap, HashMap};

use alloy_primitives::U256;
use paywatch_core::records::{PaymentKey, RangeRepair, RefundRoute, TransferKey};
use paywatch_core::refunds::{RefundablePayment, assign_refund};
use paywatch_core::state::{HistoryCause, PaymentEvent, PaymentState, transition};
use sqlx::{AssertSqlSafe, Row};

use crate::audits::{announce_verifications, insert_finding};
use crate::batches::{drop_payments, insert_authorizations, insert_transfers};
use crate::escrow::{IS_ESCROWED, apply_escrow_events, insert_escrow};
use crate::history::{HistoryRow, illegal};
use crate::refunds::{CANDIDATE_COLUMNS, TiedRefund, candidate_of, insert_refund, set_refund_state};
use crate::rows::{index_in_tx_of, parse_amount, state_of, to_u64};
use crate::sql::bind_route;
use crate::{Backend, Store, StoreError, Tx, now_ms, to_i64};

impl Store {
    /// Applies `repair` to `network` in one transaction; `refund_window_secs` is the
    /// network's refund window (the refund rules' matching bound). With `announce` (a
    /// network under `verification = "lagging"`), the same transaction writes the
    /// `verification` events of the payments of the repaired range that the scheduled
    /// audits have covered.
    pub async fn repair_range(
        &self,
        network: &str,
        repair: &RangeRepair,
        refund_window_secs: i64,
        announce: bool,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let backend = self.backend;
        let mut tx = self.write_tx().await?;
        let head =
            sqlx::query("SELECT final_block, refund_scanned_block FROM chain_heads WHERE network = $1")
                .bind(network.to_string())
                .fetch_optional(&mut *tx)
                .await?;
        let (final_block, scanned) = match &head {
            Some(row) => (
                row.try_get::<Option<i64>, _>("final_block")?,
                row.try_get::<Option<i64>, _>("refund_scanned_block")?,
            ),
            None => (None, None),
        };
        // Refuted payments' refunds are untied below, on their routes.
        drop_payments(
            backend,
            &mut tx,
            network,
            &repair.refuted,
            HistoryCause::Refuted,
            |state| state != PaymentState::Dropped,
            now,
        )
        .await?;
        for key in &repair.deleted_transfers {
            delete_transfer(&mut tx, network, key).await?;
        }
        let transfers: Vec<_> = repair.chain.transfers.iter().collect();
        insert_transfers(backend, &mut tx, network, &transfers, &repair.chain.payments).await?;
        insert_authorizations(
            backend,
            &mut tx,
            network,
            &repair.chain.authorizations,
            &transfers,
            &repair.chain.payments,
        )
        .await?;
        let final_block_u64 = final_block
            .map(|b| to_u64("chain_heads", "final_block", b))
            .transpose()?;
        self.upsert_payments(
            &mut tx,
            network,
            &repair.chain.payments,
            final_block_u64,
            &repair.corrected,
            now,
        )
        .await?;
        insert_escrow(backend, &mut tx, network, &repair.chain).await?;
        if let Some(final_block) = final_block {
            apply_escrow_events(backend, &mut tx, network, final_block, now).await?;
        }
        if let Some(scanned) = scanned {
            let mut routes: BTreeMap<&RefundRoute, u64> = BTreeMap::new();
            for (route, from) in &repair.routes {
                let first = routes.entry(route).or_insert(*from);
                *first = (*first).min(*from);
            }
            for (route, from) in routes {
                let window = RouteWindow {
                    from: to_i64("block number", from)?,
                    scanned,
                    refund_window_secs,
                };
                tie_route_again(backend, &mut tx, network, route, &window, now).await?;
            }
        }
        for finding in &repair.findings {
            insert_finding(&mut tx, network, finding, now, Some(now)).await?;
        }
        if announce {
            let (first, last) = (repair.chain.from_block, repair.chain.to_block);
            announce_verifications(backend, &mut tx, network, first, last, now).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

async fn delete_transfer(tx: &mut Tx<'_>, network: &str, key: &TransferKey) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM transfers WHERE network = $1 AND tx_id = $2 AND event_index = $3")
        .bind(network.to_string())
        .bind(key.tx_id.clone())
        .bind(to_i64("event index", key.event_index)?)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Which blocks of a route are tied again: from `from` up to `scanned` (the refund rules'
/// last scan; later transfers are tied when they become final, as always).
struct RouteWindow {
    from: i64,
    scanned: i64,
    refund_window_secs: i64,
}

/// A payment on a route, as the refunds are tied again.
struct RoutePayment {
    key: PaymentKey,
    block: i64,
    event_index: i64,
    state: PaymentState,
    amount: U256,
    stored_refunded: U256,
    refunded: U256,
    block_time: Option<i64>,
    history_len: i64,
}

/// Unties the refunds on `route` from `window.from` on and ties its stored transfers of
/// those blocks again in chain order, as the refund rules tie them at ingestion (each
/// only to payments before it); every payment whose refunded sum changes gets its new
/// state with a history row — `refund` when more was refunded, `refuted` when less —
/// numbered at the window's first block.
async fn tie_route_again(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    route: &RefundRoute,
    window: &RouteWindow,
    now: i64,
) -> Result<(), StoreError> {
    if window.from > window.scanned {
        return Ok(());
    }
    let payments_sql = format!(
        "SELECT payment_id, index_in_tx, block_number, event_index, state, amount, refunded_amount, block_time, history_len \
         FROM payments WHERE network = $1 AND pay_to = $2 AND payer = $3 AND asset = $4 AND NOT {IS_ESCROWED} \
         ORDER BY block_number, event_index"
    );
    let rows = bind_route(sqlx::query(AssertSqlSafe(payments_sql)), network, route)
        .fetch_all(&mut **tx)
        .await?;
    let mut payments = Vec::with_capacity(rows.len());
    let mut place: HashMap<PaymentKey, usize> = HashMap::new();
    for row in &rows {
        let key = PaymentKey {
            payment_id: row.try_get("payment_id")?,
            index_in_tx: index_in_tx_of("payments", row)?,
        };
        place.insert(key.clone(), payments.len());
        let refunded = parse_amount("payments", &row.try_get::<String, _>("refunded_amount")?)?;
        payments.push(RoutePayment {
            key,
            block: row.try_get("block_number")?,
            event_index: row.try_get("event_index")?,
            state: state_of(row)?,
            amount: parse_amount("payments", &row.try_get::<String, _>("amount")?)?,
            stored_refunded: refunded,
            refunded: U256::ZERO,
            block_time: row.try_get("block_time")?,
            history_len: row.try_get("history_len")?,
        });
    }
    // The refunds before the window stay; those in it are untied.
    let refunds_sql = format!(
        "SELECT r.refund_tx_id, r.refund_event_index, r.payment_id, r.index_in_tx, r.amount, r.block_number FROM refunds r \
         JOIN payments p ON p.network = r.network AND p.payment_id = r.payment_id AND p.index_in_tx = r.index_in_tx \
         WHERE r.network = $1 AND p.pay_to = $2 AND p.payer = $3 AND p.asset = $4 AND NOT p.{IS_ESCROWED}"
    );
    let refunds = bind_route(sqlx::query(AssertSqlSafe(refunds_sql)), network, route)
        .fetch_all(&mut **tx)
        .await?;
    for refund in &refunds {
        let key = PaymentKey {
            payment_id: refund.try_get("payment_id")?,
            index_in_tx: index_in_tx_of("refunds", refund)?,
        };
        let block: i64 = refund.try_get("block_number")?;
        if block < window.from {
            if let Some(&i) = place.get(&key) {
                payments[i].refunded += parse_amount("refunds", &refund.try_get::<String, _>("amount")?)?;
            }
            continue;
        }
        sqlx::query(
            "DELETE FROM refunds WHERE network = $1 AND refund_tx_id = $2 AND refund_event_index = $3",
        )
        .bind(network.to_string())
        .bind(refund.try_get::<String, _>("refund_tx_id")?)
        .bind(refund.try_get::<i64, _>("refund_event_index")?)
        .execute(&mut **tx)
        .await?;
    }
    let transfers_sql = format!(
        "SELECT {CANDIDATE_COLUMNS} FROM stored_transfers t WHERE t.network = $1 AND t.from_address = $2 \
         AND t.to_address = $3 AND t.token = $4 AND t.block_number >= $5 AND t.block_number <= $6 \
         ORDER BY t.block_number, t.event_index"
    );
    let transfers = bind_route(sqlx::query(AssertSqlSafe(transfers_sql)), network, route)
        .bind(window.from)
        .bind(window.scanned)
        .fetch_all(&mut **tx)
        .await?;
    for transfer in &transfers {
        let block: i64 = transfer.try_get("block_number")?;
        let event_index: i64 = transfer.try_get("event_index")?;
        let candidate = candidate_of(transfer)?;
        // The final payments before the transfer, in chain order.
        let before: Vec<usize> = (0..payments.len())
            .filter(|&i| {
                let p = &payments[i];
                PaymentState::FINAL.contains(&p.state)
                    && (p.block < block || (p.block == block && p.event_index < event_index))
            })
            .collect();
        let refundable: Vec<RefundablePayment> = before
            .iter()
            .map(|&i| RefundablePayment {
                payment_id: payments[i].key.payment_id.clone(),
                index_in_tx: payments[i].key.index_in_tx,
                amount: payments[i].amount,
                refunded: payments[i].refunded,
                block_time: payments[i].block_time,
            })
            .collect();
        let Some((chosen, rule)) = assign_refund(&candidate, &refundable, window.refund_window_secs) else {
            continue;
        };
        let payment = &mut payments[before[chosen]];
        payment.refunded += candidate.value;
        let refund_tx: String = transfer.try_get("tx_id")?;
        let tied = TiedRefund {
            refund_tx: &refund_tx,
            event_index,
            payment: &payment.key.payment_id,
            index_in_tx: payment.key.index_in_tx,
            amount: candidate.value,
            rule,
            block,
        };
        insert_refund(tx, network, &tied, now).await?;
    }
    for payment in &payments {
        if payment.refunded == payment.stored_refunded || !PaymentState::FINAL.contains(&payment.state) {
            continue;
        }
        let to = transition(
            Some(payment.state),
            PaymentEvent::Refunded {
                refunded: payment.refunded,
                amount: payment.amount,
            },
        )
        .map_err(illegal)?;
        let cause = if payment.refunded > payment.stored_refunded {
            HistoryCause::Refund
        } else {
            HistoryCause::Refuted
        };
        let history = HistoryRow {
            payment_id: payment.key.payment_id.clone(),
            index_in_tx: payment.key.index_in_tx,
            seq: payment.history_len,
            from: Some(payment.state),
            to,
            cause,
            block_number: window.from as u64,
            tx_id: payment.key.payment_id.clone(),
        };
        set_refund_state(backend, tx, network, &history, payment.refunded, now).await?;
    }
    Ok(())
}
