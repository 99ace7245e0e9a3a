//! The refund routes of stored payments among those a batch's transfers run on: what
//! decides, with core's [`TransferTriage`](paywatch_core::retention::TransferTriage),
//! which transfers are kept; and the pruning of kept transfers that can no longer refund
//! anything, with the authorizations kept for them.

use std::collections::{HashMap, HashSet};

use paywatch_core::retention::RefundRoute;
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, AssertSqlSafe, Row};

use crate::escrow::IS_ESCROWED;
use crate::heads::HeadUpdate;
use crate::rows::to_u64;
use crate::sql::Placeholders;
use crate::{Backend, Store, StoreError, Tx};

/// Senders per query when looking for sellers.
const SENDERS_PER_QUERY: usize = 200;
/// Routes per query when looking for payments on them.
const ROUTES_PER_QUERY: usize = 100;

/// The routes among `routes` on which a stored payment (not escrowed) can be refunded.
/// First the senders that are a stored payment's `pay_to` (on a busy token almost none
/// are), then the routes of those senders, each an index probe of `payments_by_parties`.
pub(crate) async fn stored_refund_routes(
    backend: Backend,
    conn: &mut AnyConnection,
    network: &str,
    routes: &[RefundRoute],
) -> Result<HashSet<RefundRoute>, StoreError> {
    let mut senders: Vec<&str> = routes.iter().map(|r| r.from.as_str()).collect();
    senders.sort_unstable();
    senders.dedup();
    let mut sellers = HashSet::new();
    for chunk in senders.chunks(SENDERS_PER_QUERY) {
        let mut p = Placeholders::after(backend, 0);
        let sql = format!(
            "SELECT DISTINCT pay_to FROM payments WHERE network = {} AND pay_to IN {}",
            p.next(),
            p.list(chunk.len())
        );
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(network.to_string());
        for sender in chunk {
            query = query.bind(sender.to_string());
        }
        for row in query.fetch_all(&mut *conn).await? {
            sellers.insert(row.try_get::<String, _>("pay_to")?);
        }
    }
    let asked: Vec<&RefundRoute> = routes.iter().filter(|r| sellers.contains(&r.from)).collect();
    let mut found = HashSet::new();
    let select = "SELECT DISTINCT pay_to, payer, asset FROM payments";
    for row in rows_on_routes(backend, conn, network, &asked, select, "").await? {
        found.insert(route_of(&row)?);
    }
    Ok(found)
}

/// The rows of `select` (a statement over `payments`) for the payments (not escrowed) on
/// `routes`, `ROUTES_PER_QUERY` routes a statement, each ended by `tail`.
async fn rows_on_routes(
    backend: Backend,
    conn: &mut AnyConnection,
    network: &str,
    routes: &[&RefundRoute],
    select: &str,
    tail: &str,
) -> Result<Vec<AnyRow>, StoreError> {
    let mut rows = Vec::new();
    for chunk in routes.chunks(ROUTES_PER_QUERY) {
        let mut p = Placeholders::after(backend, 0);
        let network_param = p.next();
        let terms: Vec<String> = chunk
            .iter()
            .map(|_| {
                format!(
                    "(pay_to = {} AND payer = {} AND asset = {})",
                    p.next(),
                    p.next(),
                    p.next()
                )
            })
            .collect();
        let sql = format!(
            "{select} WHERE network = {network_param} AND NOT {IS_ESCROWED} AND ({}){tail}",
            terms.join(" OR ")
        );
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(network.to_string());
        for route in chunk {
            query = query
                .bind(route.from.clone())
                .bind(route.to.clone())
                .bind(route.asset.clone());
        }
        rows.extend(query.fetch_all(&mut *conn).await?);
    }
    Ok(rows)
}

/// The refund route of a row with `pay_to`, `payer` and `asset`.
fn route_of(row: &AnyRow) -> Result<RefundRoute, StoreError> {
    Ok(RefundRoute {
        from: row.try_get("pay_to")?,
        to: row.try_get("payer")?,
        asset: row.try_get("asset")?,
    })
}

impl Store {
    /// The routes among `routes` on which a stored payment can be refunded: what a worker
    /// asks before it reads the block times of the transfers it will keep.
    pub async fn refund_routes_among(
        &self,
        network: &str,
        routes: &[RefundRoute],
    ) -> Result<HashSet<RefundRoute>, StoreError> {
        if routes.is_empty() {
            return Ok(HashSet::new());
        }
        let mut conn = self.pool.acquire().await?;
        stored_refund_routes(self.backend, &mut conn, network, routes).await
    }
}

impl Store {
    /// The first block of a stored payment (not escrowed, in any state) on each of
    /// `routes` that has one: a transfer on such a route in a later block was kept.
    pub async fn first_payments_on_routes(
        &self,
        network: &str,
        routes: &[RefundRoute],
    ) -> Result<HashMap<RefundRoute, u64>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let routes: Vec<&RefundRoute> = routes.iter().collect();
        let select = "SELECT pay_to, payer, asset, MIN(block_number) AS first_block FROM payments";
        let grouped = " GROUP BY pay_to, payer, asset";
        let mut first = HashMap::new();
        for row in rows_on_routes(self.backend, &mut conn, network, &routes, select, grouped).await? {
            let block = to_u64("payments", "block_number", row.try_get("first_block")?)?;
            first.insert(route_of(&row)?, block);
        }
        Ok(first)
    }

    /// The last block up to which transfers kept only as possible refunds may have been
    /// pruned; `None` before any pruning.
    pub async fn transfers_pruned_to(&self, network: &str) -> Result<Option<u64>, StoreError> {
        let pruned: Option<Option<i64>> =
            sqlx::query("SELECT transfers_pruned_block FROM chain_heads WHERE network = $1")
                .bind(network.to_string())
                .fetch_optional(&self.pool)
                .await?
                .map(|row| row.try_get("transfers_pruned_block"))
                .transpose()?;
        pruned
            .flatten()
            .map(|block| to_u64("chain_heads", "transfers_pruned_block", block))
            .transpose()
    }
}

/// Deletes the transfers kept only as possible refunds that the refund rules examined
/// (at or below the refund scan) and that are older than the refund window at `now_ms`:
/// neither a payment's transfer, nor a tied refund, nor one of `head.kept_wallets`. Each
/// call goes on from where the last stopped (`chain_heads.transfers_pruned_block`), up to
/// the first block still holding a transfer too young to prune. Returns how many were
/// deleted.
pub(crate) async fn prune_examined_transfers(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    head: &HeadUpdate,
    now_ms: i64,
) -> Result<u64, StoreError> {
    let window_secs = head.refund_window_secs;
    let row = sqlx::query(
        "SELECT refund_scanned_block, transfers_pruned_block FROM chain_heads WHERE network = $1",
    )
    .bind(network.to_string())
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else { return Ok(0) };
    let Some(scanned) = row.try_get::<Option<i64>, _>("refund_scanned_block")? else {
        return Ok(0);
    };
    let pruned = row
        .try_get::<Option<i64>, _>("transfers_pruned_block")?
        .unwrap_or(-1);
    if pruned >= scanned {
        return Ok(0);
    }
    let cutoff = (now_ms / 1_000).saturating_sub(window_secs);
    let wallets = &head.kept_wallets;
    let not_of_wallets = if wallets.is_empty() {
        String::new()
    } else {
        let mut p = Placeholders::after(backend, 4);
        let from = p.list(wallets.len());
        let to = p.list(wallets.len());
        format!(" AND from_address NOT IN {from} AND to_address NOT IN {to}")
    };
    let sql = format!(
        "DELETE FROM transfers WHERE network = $1 AND block_number > $2 AND block_number <= $3 \
         AND (block_time IS NULL OR block_time < $4){not_of_wallets} \
         AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.network = transfers.network \
             AND p.payment_id = transfers.tx_id AND p.event_index = transfers.event_index) \
         AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.network = transfers.network \
             AND r.refund_tx_id = transfers.tx_id AND r.refund_event_index = transfers.event_index)"
    );
    let mut delete = sqlx::query(AssertSqlSafe(sql))
        .bind(network.to_string())
        .bind(pruned)
        .bind(scanned)
        .bind(cutoff);
    for wallet in wallets.iter().chain(wallets) {
        delete = delete.bind(wallet.clone());
    }
    let deleted = delete.execute(&mut **tx).await?.rows_affected();
    // The authorizations kept for the transfers just deleted: each is kept only while a
    // transfer its authorizer sent after it in its transaction is stored.
    sqlx::query(
        "DELETE FROM authorizations WHERE network = $1 AND block_number > $2 AND block_number <= $3 \
         AND NOT EXISTS (SELECT 1 FROM stored_transfers t WHERE t.network = authorizations.network \
             AND t.tx_id = authorizations.tx_id AND t.token = authorizations.token \
             AND t.from_address = authorizations.authorizer AND t.event_index > authorizations.event_index)",
    )
    .bind(network.to_string())
    .bind(pruned)
    .bind(scanned)
    .execute(&mut **tx)
    .await?;
    // Stop below the first block whose transfers are still too young.
    let young: Option<i64> = sqlx::query(
        "SELECT MIN(block_number) AS young FROM transfers WHERE network = $1 AND block_number > $2 \
         AND block_number <= $3 AND block_time >= $4",
    )
    .bind(network.to_string())
    .bind(pruned)
    .bind(scanned)
    .bind(cutoff)
    .fetch_one(&mut **tx)
    .await?
    .try_get("young")?;
    let reached = young.map_or(scanned, |block| block - 1);
    if reached > pruned {
        sqlx::query("UPDATE chain_heads SET transfers_pruned_block = $1 WHERE network = $2")
            .bind(reached)
            .bind(network.to_string())
            .execute(&mut **tx)
            .await?;
    }
    Ok(deleted)
}
