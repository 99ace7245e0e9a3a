//! Payment lookups, coalesced: lookups that arrive while the readers are busy wait in one
//! queue, and each reader that comes free answers every lookup waiting (up to
//! [`MAX_COALESCED`]) with one statement. Under load one round trip to the database then
//! serves many lookups instead of one; on an idle store a lone lookup goes at once.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::any::AnyRow;
use sqlx::{AnyPool, AssertSqlSafe, Row};
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::query::{PaymentLookup, payment_from_row};
use crate::rows::{index_in_tx_of, to_u64};
use crate::signed::BoundIntent;
use crate::sql::Placeholders;
use crate::{Backend, Store, StoreError};

/// Most lookups one statement answers.
pub const MAX_COALESCED: usize = 64;

/// Lookups that may wait for a reader before callers wait to enqueue.
const QUEUE_DEPTH: usize = 4096;

/// What a reader answers one waiting lookup: its payments, or the statement's failure,
/// shared by every lookup the statement answered.
type Answer = Result<Vec<PaymentLookup>, Arc<StoreError>>;

/// One lookup waiting for a reader.
struct Waiting {
    network: String,
    payment_id: String,
    reply: oneshot::Sender<Answer>,
}

/// The queue of lookups and its readers; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct LookupQueue {
    sender: mpsc::Sender<Waiting>,
}

impl LookupQueue {
    /// Starts `readers` readers on `pool` (on the current Tokio runtime). They stop when
    /// every clone of the queue is dropped.
    pub(crate) fn start(pool: AnyPool, backend: Backend, readers: usize) -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE_DEPTH);
        let receiver = Arc::new(Mutex::new(receiver));
        for _ in 0..readers.max(1) {
            tokio::spawn(read_loop(pool.clone(), backend, receiver.clone()));
        }
        Self { sender }
    }

    /// The payments of transaction `payment_id` on `network`, as [`PaymentLookup`]s in
    /// their order within it.
    pub(crate) async fn lookup(
        &self,
        network: &str,
        payment_id: &str,
    ) -> Result<Vec<PaymentLookup>, StoreError> {
        let (reply, answer) = oneshot::channel();
        let waiting = Waiting {
            network: network.to_string(),
            payment_id: payment_id.to_string(),
            reply,
        };
        self.sender
            .send(waiting)
            .await
            .map_err(|_| StoreError::ReadersStopped)?;
        match answer.await {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(shared)) => Err(StoreError::Shared(shared)),
            Err(_) => Err(StoreError::ReadersStopped),
        }
    }
}

/// One reader: takes whatever is waiting (at least one lookup), answers it, repeats.
async fn read_loop(pool: AnyPool, backend: Backend, receiver: Arc<Mutex<mpsc::Receiver<Waiting>>>) {
    let mut batch = Vec::with_capacity(MAX_COALESCED);
    loop {
        let taken = receiver.lock().await.recv_many(&mut batch, MAX_COALESCED).await;
        if taken == 0 {
            return;
        }
        let mut by_network: HashMap<String, Vec<Waiting>> = HashMap::new();
        for waiting in batch.drain(..) {
            by_network
                .entry(waiting.network.clone())
                .or_default()
                .push(waiting);
        }
        for (network, waiting) in by_network {
            answer(&pool, backend, &network, waiting).await;
        }
    }
}

/// Answers the lookups of one network with one statement.
async fn answer(pool: &AnyPool, backend: Backend, network: &str, waiting: Vec<Waiting>) {
    let mut ids: Vec<&str> = waiting.iter().map(|w| w.payment_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let found = lookup_many(pool, backend, network, &ids).await;
    match found {
        Ok(found) => {
            for w in waiting {
                let payments = found.get(&w.payment_id).cloned().unwrap_or_default();
                let _ = w.reply.send(Ok(payments));
            }
        }
        Err(error) => {
            let shared = Arc::new(error);
            for w in waiting {
                let _ = w.reply.send(Err(shared.clone()));
            }
        }
    }
}

/// The statement's list of ids is padded (with the last id again) to the next of these
/// sizes, so a connection prepares a handful of statements rather than one per count.
fn padded_len(len: usize) -> usize {
    len.next_power_of_two().clamp(1, MAX_COALESCED)
}

/// Everything a lookup answers about the payments of `ids` on `network`, keyed by id:
/// each payment with its network's recorded head, its revealed intent and how many
/// refunds are tied to it. Every part is read by key (correlated subqueries, not joins), so
/// the plan cannot turn into a scan however the tables grow; intents, which few payments
/// have, are read in a second statement only when some are there.
async fn lookup_many(
    pool: &AnyPool,
    backend: Backend,
    network: &str,
    ids: &[&str],
) -> Result<HashMap<String, Vec<PaymentLookup>>, StoreError> {
    let slots = padded_len(ids.len());
    let sql = format!(
        "SELECT p.network, p.payment_id, p.index_in_tx, p.event_index, p.block_number, p.block_hash, \
         p.block_time, p.payer, p.pay_to, p.amount, p.asset, p.method, p.nonce, p.max_amount, p.memo, p.facilitator, p.fee_amount, \
         p.captured_amount, p.released_amount, p.held_amount, p.state, p.refunded_amount, \
         p.first_seen_ms, p.state_changed_ms, \
         (SELECT h.head_block FROM chain_heads h WHERE h.network = p.network) AS head_block, \
         (SELECT COUNT(*) FROM refunds r WHERE r.network = p.network AND r.payment_id = p.payment_id \
          AND r.index_in_tx = p.index_in_tx) AS refund_count, \
         (SELECT COUNT(*) FROM intents i WHERE i.network = p.network AND i.payment_id = p.payment_id \
          AND i.index_in_tx = p.index_in_tx) AS intent_count \
         FROM payments p WHERE p.network = $1 AND p.payment_id IN {} ORDER BY p.payment_id, p.index_in_tx",
        Placeholders::after(backend, 1).list(slots)
    );
    let mut query = sqlx::query(AssertSqlSafe(sql)).bind(network.to_string());
    for slot in 0..slots {
        query = query.bind(ids[slot.min(ids.len() - 1)].to_string());
    }
    let rows = query.fetch_all(pool).await?;
    let mut with_intent = Vec::new();
    let mut found: HashMap<String, Vec<PaymentLookup>> = HashMap::new();
    for row in &rows {
        let payment = payment_from_row(row)?;
        let head: Option<i64> = row.try_get("head_block")?;
        if row.try_get::<i64, _>("intent_count")? > 0 {
            with_intent.push(payment.payment_id.clone());
        }
        found
            .entry(payment.payment_id.clone())
            .or_default()
            .push(PaymentLookup {
                head_block: head.map(|h| to_u64("chain_heads", "head_block", h)).transpose()?,
                intent: None,
                refund_count: to_u64("refunds", "count", row.try_get("refund_count")?)?,
                payment,
            });
    }
    if !with_intent.is_empty() {
        for (payment_id, index_in_tx, intent) in intents_of(pool, backend, network, &with_intent).await? {
            if let Some(lookup) = found
                .get_mut(&payment_id)
                .and_then(|l| l.iter_mut().find(|l| l.payment.index_in_tx == index_in_tx))
            {
                lookup.intent = Some(intent);
            }
        }
    }
    Ok(found)
}

/// The revealed intents of the payments of `ids` on `network`, with their payment's id and
/// index.
async fn intents_of(
    pool: &AnyPool,
    backend: Backend,
    network: &str,
    ids: &[String],
) -> Result<Vec<(String, u32, BoundIntent)>, StoreError> {
    let sql = format!(
        "SELECT payment_id, index_in_tx, method, url, body_sha256, class, max_atomic, salt \
         FROM intents WHERE network = $1 AND payment_id IN {}",
        Placeholders::after(backend, 1).list(ids.len())
    );
    let mut query = sqlx::query(AssertSqlSafe(sql)).bind(network.to_string());
    for id in ids {
        query = query.bind(id.clone());
    }
    let rows = query.persistent(false).fetch_all(pool).await?;
    rows.iter()
        .map(|row: &AnyRow| {
            let index_in_tx = index_in_tx_of("intents", row)?;
            let intent = BoundIntent {
                method: row.try_get("method")?,
                url: row.try_get("url")?,
                body_sha256: row.try_get("body_sha256")?,
                class: row.try_get("class")?,
                max_atomic: row.try_get("max_atomic")?,
                salt: row.try_get("salt")?,
            };
            Ok((row.try_get("payment_id")?, index_in_tx, intent))
        })
        .collect()
}

impl Store {
    /// Everything a lookup answers about the payments of one transaction, in one round
    /// trip: each payment with its network's recorded head, its revealed intent and how
    /// many refunds are tied to it (their rows are read only when there are some).
    /// Concurrent lookups share statements (see [`LookupQueue`]).
    pub async fn lookup_payments(
        &self,
        network: &str,
        payment_id: &str,
    ) -> Result<Vec<PaymentLookup>, StoreError> {
        self.lookups.lookup(network, payment_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_lists_are_padded_to_few_sizes() {
        let sizes: Vec<usize> = (1..=MAX_COALESCED).map(padded_len).collect();
        assert_eq!(sizes[0], 1);
        assert_eq!(sizes[2], 4);
        assert_eq!(sizes[4], 8);
        assert_eq!(sizes[MAX_COALESCED - 1], MAX_COALESCED);
        let mut distinct = sizes.clone();
        distinct.dedup();
        assert_eq!(distinct, vec![1, 2, 4, 8, 16, 32, 64]);
        assert!(sizes.iter().enumerate().all(|(i, &s)| s > i));
    }
}
