//! The worker loop of one Solana network.
//!
//! Each step reads the paid slot first (the slot at the finality rule's commitment:
//! `finalized`, or `confirmed`), then lists, for every watched address (each pay_to wallet
//! and its token accounts of the watched mints), the signatures at the read commitment
//! (`confirmed`, or `finalized`) from the address's cursor slot up to the newest, page by
//! page backwards. It then settles the pending payments at or below the paid slot from
//! their signature statuses (final → `paid`; gone → `dropped`), and reads the new
//! transactions oldest first, in chunks that end on a slot boundary, each chunk committed
//! with the cursors in one transaction. Cursors never pass the paid slot, so every step
//! lists the not-yet-final slots again: a transaction that vanishes from them is noticed,
//! and a restart neither skips nor double-counts a signature.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::str::FromStr;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use paywatch_chain::{ChainMetrics, Progress, RowKind, Seen, Stage, ask_until_answered, drive};
use paywatch_core::config::{Commitment, NetworkConfig, StartBlock};
use paywatch_core::records::{Batch, PaymentKey};
use paywatch_core::state::FinalityRule;
use paywatch_store::{HeadUpdate, Store, StoreError, TokenCursor};
use solana_commitment_config::CommitmentConfig;
use solana_signature::Signature;
use solana_transaction_status_client_types::EncodedConfirmedTransactionWithStatusMeta;
use tokio_util::sync::CancellationToken;

use crate::decode::{BadAnswer, Watched, decode_transaction};
use crate::finality::{Verdict, verdict};
use crate::rpc::{RpcFault, SolanaRpc, parse_address};

/// Transactions fetched at once.
const FETCH_CONCURRENCY: usize = 8;
/// Signatures per committed chunk (a chunk may run over to finish its slot).
const CHUNK: usize = 200;

/// Why a step did not complete (the runtime's step error over this chain's faults); the
/// loop logs it and tries again.
pub type StepError = paywatch_chain::ChainStepError<RpcFault, BadAnswer>;

impl From<RpcFault> for StepError {
    fn from(fault: RpcFault) -> Self {
        Self::Rpc(fault)
    }
}

impl From<BadAnswer> for StepError {
    fn from(bad: BadAnswer) -> Self {
        Self::BadAnswer(bad)
    }
}

/// Why a worker stopped for good.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// No RPC endpoint serves the configured cluster.
    #[error("{network}: no RPC endpoint serves this cluster ({refused}); fix rpc_urls in chains.toml")]
    WrongCluster {
        /// Configured network.
        network: String,
        /// Each endpoint and the genesis hash it serves.
        refused: String,
    },
}

/// What a step did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepReport {
    /// Confirmed slot when the step began.
    pub head: u64,
    /// The slot at the finality rule's commitment (`finalized` unless the network is
    /// `confirmed`) when the step began: payments at or below it may be `paid`.
    pub paid_slot: u64,
    /// New signatures read.
    pub transactions: usize,
    /// Payments among them.
    pub payments: usize,
    /// Pending payments whose transactions vanished.
    pub vanished: usize,
}

/// A confirmed signature listed for a watched address.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Listed {
    slot: u64,
    failed: bool,
}

/// The worker of one Solana network.
pub struct SolanaWorker {
    config: NetworkConfig,
    network: String,
    metrics: ChainMetrics,
    /// The slot everything is read up to, as of the last step (`None` before the first).
    indexed_to: Option<u64>,
    /// The slot the node last answered as its head.
    seen_head: Option<u64>,
    store: Store,
    rpc: SolanaRpc,
    watched: Watched,
}

impl SolanaWorker {
    /// Builds a worker for `config` on `store` through `rpc`.
    pub fn new(config: NetworkConfig, store: Store, rpc: SolanaRpc) -> Self {
        let watched = Watched {
            mints: config
                .tokens
                .iter()
                .map(|t| {
                    let from = match t.start_block {
                        StartBlock::Number(slot) => slot,
                        StartBlock::Latest => 0,
                    };
                    (t.address.to_string(), from)
                })
                .collect(),
            pay_to: config.pay_to.iter().map(ToString::to_string).collect(),
            facilitators: config.facilitators.iter().cloned().collect(),
        };
        let read_at = config.commitment;
        Self {
            network: config.id.to_string(),
            metrics: ChainMetrics::new(&config.id.to_string()),
            indexed_to: None,
            seen_head: None,
            config,
            store,
            rpc: rpc.reading_at(read_commitment(read_at)),
            watched,
        }
    }

    /// Asks every endpoint which cluster it serves (CAIP-2: the genesis hash's first 32
    /// characters) until one serves the configured one — one on another cluster is never
    /// read — retrying until they answer; fails when every one serves another.
    async fn verify_cluster(&self, shutdown: &CancellationToken) -> Result<(), WorkerError> {
        let answered = ask_until_answered(&self.network, "the genesis hash", shutdown, || {
            self.rpc.refused_at_start()
        })
        .await;
        match answered.flatten() {
            Some(refused) => Err(WorkerError::WrongCluster {
                network: self.network.clone(),
                refused,
            }),
            None => Ok(()),
        }
    }

    /// Runs until `shutdown` is cancelled. A step in progress finishes its chunk or is
    /// abandoned before its commit; a committed chunk is never half-written.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), WorkerError> {
        self.verify_cluster(&shutdown).await?;
        tracing::info!(network = %self.network, wallets = self.config.pay_to.len(), "Solana worker started");
        match drive(&mut self, None, &shutdown).await {
            Some(error) => tracing::error!(network = %self.network, %error, "Solana worker stopped for good"),
            None => tracing::info!(network = %self.network, "Solana worker stopped"),
        }
        Ok(())
    }

    /// The watched addresses with their cursors, creating the missing ones: a wallet seen
    /// for the first time, and its token accounts, start at the configured start slot
    /// (`latest`: just past the paid slot); a token account that appears later
    /// (opened after the first start) is read from its beginning.
    async fn cursors(&self, paid_slot: u64) -> Result<BTreeMap<String, u64>, StepError> {
        let stored: HashMap<String, u64> = self
            .store
            .cursors(&self.network)
            .await?
            .into_iter()
            .map(|c| (c.token, c.next_block))
            .collect();
        let start_of = |start: StartBlock| match start {
            StartBlock::Number(slot) => slot,
            StartBlock::Latest => paid_slot + 1,
        };
        // A wallet is read from the earliest start of its tokens; each token's own start
        // also bounds what counts (`Watched::mints`).
        let wallet_start = self
            .config
            .tokens
            .iter()
            .map(|t| start_of(t.start_block))
            .min()
            .unwrap_or(paid_slot + 1);
        let mut cursors = BTreeMap::new();
        let mut missing = Vec::new();
        for owner in self.config.pay_to.iter().map(ToString::to_string) {
            let owner_is_new = !stored.contains_key(&owner);
            let mut addresses = vec![(owner.clone(), wallet_start)];
            for token in &self.config.tokens {
                // A token account that appears after its wallet was first read was opened
                // since: read from its beginning, or from its token's explicit start.
                let first = match (owner_is_new, token.start_block) {
                    (true, start) => start_of(start),
                    (false, StartBlock::Number(slot)) => slot,
                    (false, StartBlock::Latest) => 0,
                };
                for account in self
                    .rpc
                    .token_accounts(
                        &parse_address(&owner)?,
                        &parse_address(&token.address.to_string())?,
                    )
                    .await?
                {
                    addresses.push((account, first));
                }
            }
            for (address, first) in addresses {
                let next = match stored.get(&address) {
                    Some(next) => *next,
                    None => {
                        missing.push(TokenCursor {
                            token: address.clone(),
                            next_block: first,
                        });
                        first
                    }
                };
                cursors.insert(address, next);
            }
        }
        // A facilitator's fee payer signs every settlement it sends: its own signature
        // list holds them all.
        for fee_payer in &self.config.facilitators {
            let next = match stored.get(fee_payer) {
                Some(next) => *next,
                None => {
                    missing.push(TokenCursor {
                        token: fee_payer.clone(),
                        next_block: wallet_start,
                    });
                    wallet_start
                }
            };
            cursors.insert(fee_payer.clone(), next);
        }
        if !missing.is_empty() {
            self.store.init_cursors(&self.network, &missing).await?;
        }
        Ok(cursors)
    }

    /// Lists the confirmed signatures of `address` at slots `from` and above, newest first.
    async fn list(
        &self,
        address: &str,
        from: u64,
        into: &mut BTreeMap<String, Listed>,
    ) -> Result<(), StepError> {
        let key = parse_address(address)?;
        let mut before = None;
        loop {
            let page = self.rpc.signatures_page(&key, before).await?;
            let Some(last) = page.last() else { return Ok(()) };
            before = Some(Signature::from_str(&last.signature).map_err(|_| BadAnswer {
                signature: last.signature.clone(),
                detail: "getSignaturesForAddress answered a malformed signature".to_string(),
            })?);
            let exhausted = page.len() < self.rpc.signatures_page_size() || last.slot < from;
            for entry in page.into_iter().filter(|e| e.slot >= from) {
                into.insert(
                    entry.signature,
                    Listed {
                        slot: entry.slot,
                        failed: entry.err.is_some(),
                    },
                );
            }
            if exhausted {
                return Ok(());
            }
        }
    }

    /// Verdicts on `payments` (pending, at or below `paid_slot`): returns the highest slot
    /// that may be called final and the payments that vanished.
    async fn settle(
        &self,
        payments: &[(PaymentKey, u64)],
        paid_slot: u64,
        listed: &BTreeMap<String, Listed>,
    ) -> Result<(u64, Vec<PaymentKey>), StepError> {
        let mut final_slot = paid_slot;
        let mut vanished = Vec::new();
        let unique: BTreeSet<&str> = payments.iter().map(|(k, _)| k.payment_id.as_str()).collect();
        let signatures = unique
            .iter()
            .map(|s| {
                Signature::from_str(s).map_err(|_| StoreError::Corrupt {
                    table: "payments",
                    detail: format!("payment id `{s}` is not a Solana signature"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let statuses: HashMap<&str, _> = unique
            .iter()
            .copied()
            .zip(self.rpc.statuses(&signatures).await?)
            .collect();
        for (key, slot) in payments {
            let status = statuses.get(key.payment_id.as_str()).and_then(Option::as_ref);
            let listed = listed.contains_key(&key.payment_id);
            match verdict(status, *slot, paid_slot, listed, self.config.finality) {
                Verdict::Final => {}
                Verdict::NotYet => final_slot = final_slot.min(slot.saturating_sub(1)),
                Verdict::Vanished => vanished.push(key.clone()),
            }
        }
        Ok((final_slot, vanished))
    }

    /// One step: list, settle, read, commit. Public so tests can drive it.
    pub async fn step(&mut self) -> Result<StepReport, StepError> {
        let paid_slot = self.rpc.slot(paid_commitment(self.config.finality)).await?;
        let head = self
            .rpc
            .slot(read_commitment(self.config.commitment))
            .await?
            .max(paid_slot);
        self.seen_head = Some(head);
        self.metrics.head(head);
        // How far `paid` lags the head in seconds: the two slots' block times. A status
        // figure: a node that will not give them costs the figure, not the step.
        let paid_lag_secs = match tokio::join!(self.rpc.block_time(head), self.rpc.block_time(paid_slot)) {
            (Ok(head_time), Ok(final_time)) => {
                let lag = u64::try_from(head_time.saturating_sub(final_time)).unwrap_or(0);
                self.metrics.paid_lag_seconds(lag);
                Some(lag)
            }
            (Err(fault), _) | (_, Err(fault)) => {
                tracing::debug!(network = %self.network, %fault, "no block time for the paid lag");
                None
            }
        };
        let refund_window_secs = self.config.refund_window_secs();
        let mut report = StepReport {
            head,
            paid_slot,
            ..StepReport::default()
        };

        let started = Instant::now();
        let mut cursors = self.cursors(paid_slot).await?;
        let mut listed = BTreeMap::new();
        for (address, from) in &cursors {
            self.list(address, *from, &mut listed).await?;
        }

        let pending = self.store.pending_payments(&self.network, paid_slot).await?;
        let (final_slot, vanished) = self.settle(&pending, paid_slot, &listed).await?;
        report.vanished = vanished.len();
        for key in &vanished {
            tracing::warn!(network = %self.network, payment = %key.payment_id, "pending payment vanished before it was final: dropped");
        }
        let settled = Batch {
            vanished_payments: vanished,
            ..Batch::default()
        };
        let kept_wallets = self.config.kept_wallets();
        let head_update = |final_block: u64| HeadUpdate {
            head,
            final_block: Some(final_block),
            refund_window_secs,
            paid_lag_secs,
            kept_wallets: kept_wallets.clone(),
        };
        let committed = self
            .store
            .commit_batch(&self.network, &[], &settled, &head_update(final_slot))
            .await?;
        self.metrics.transfers_pruned(committed.transfers_pruned);

        // New transactions, oldest first, in chunks that end on a slot boundary.
        let todo = to_read(&listed, paid_slot, self.config.commitment);
        let mut rest = &todo[..];
        while !rest.is_empty() {
            let mut end = rest.len().min(CHUNK);
            while end < rest.len() && rest[end].0 == rest[end - 1].0 {
                end += 1;
            }
            let (chunk, tail) = rest.split_at(end);
            rest = tail;
            let last_slot = chunk[chunk.len() - 1].0;
            let batch = self.read_chunk(chunk).await?;
            report.transactions += chunk.len();
            report.payments += batch.payments.len();
            // Final only what the statuses confirm, among this chunk's payments too.
            let at_or_below: Vec<(PaymentKey, u64)> = batch
                .payments
                .iter()
                .filter(|p| p.transfer.block_number <= final_slot)
                .map(|p| {
                    (
                        PaymentKey {
                            payment_id: p.payment_id.clone(),
                            index_in_tx: p.index_in_tx,
                        },
                        p.transfer.block_number,
                    )
                })
                .collect();
            let (chunk_final, _) = self.settle(&at_or_below, final_slot, &listed).await?;
            let next = (last_slot + 1).min(paid_slot + 1);
            let advance = advanced(&mut cursors, next);
            let batch = Batch {
                to_block: next - 1,
                ..batch
            };
            let committed = self
                .store
                .commit_batch(&self.network, &advance, &batch, &head_update(chunk_final))
                .await?;
            self.metrics.rows(RowKind::Transfer, committed.transfers_kept);
            self.metrics.transfers_skipped(committed.transfers_skipped);
            self.metrics.transfers_pruned(committed.transfers_pruned);
            self.metrics.rows(RowKind::Payment, batch.payments.len());
        }
        // Everything up to the paid slot is now read.
        let advance = advanced(&mut cursors, paid_slot + 1);
        if !advance.is_empty() {
            let batch = Batch {
                to_block: paid_slot,
                ..Batch::default()
            };
            let committed = self
                .store
                .commit_batch(&self.network, &advance, &batch, &head_update(final_slot))
                .await?;
            self.metrics.transfers_pruned(committed.transfers_pruned);
        }
        let lowest = cursors.values().copied().min().unwrap_or(paid_slot + 1);
        let indexed_to = lowest.saturating_sub(1);
        // Slots are read per watched address: the network has read every slot below its
        // lowest cursor, and counts the slots that lowest cursor moved past.
        if let Some(before) = self.indexed_to.replace(indexed_to) {
            self.metrics.blocks(indexed_to.saturating_sub(before));
        }
        self.metrics.progress(indexed_to, head);
        self.metrics.batch_read(started.elapsed().as_secs_f64());
        Ok(report)
    }

    /// Fetches and decodes one chunk of signatures, with their slots' block hashes.
    async fn read_chunk(&self, chunk: &[(u64, String)]) -> Result<Batch, StepError> {
        let fetches: Vec<_> = chunk.iter().map(|(_, signature)| self.fetch(signature)).collect();
        let transactions: Vec<_> = futures::stream::iter(fetches)
            .buffered(FETCH_CONCURRENCY)
            .try_collect()
            .await?;
        let slots: BTreeSet<u64> = transactions.iter().map(|(_, tx)| tx.slot).collect();
        let lookups: Vec<_> = slots.into_iter().map(|slot| self.block_hash(slot)).collect();
        let hashes: HashMap<u64, String> = futures::stream::iter(lookups)
            .buffered(FETCH_CONCURRENCY)
            .try_collect()
            .await?;
        let mut batch = Batch::default();
        for (signature, tx) in transactions {
            let decoded = decode_transaction(&signature, &tx, &hashes[&tx.slot], &self.watched)?;
            if decoded.failed {
                continue;
            }
            batch.transfers.extend(decoded.transfers);
            batch.payments.extend(decoded.payments);
        }
        Ok(batch)
    }
}

impl SolanaWorker {
    /// `getTransaction` of one listed signature.
    async fn fetch(
        &self,
        signature: &str,
    ) -> Result<(String, EncodedConfirmedTransactionWithStatusMeta), StepError> {
        let parsed = Signature::from_str(signature).map_err(|_| BadAnswer {
            signature: signature.to_string(),
            detail: "getSignaturesForAddress answered a malformed signature".to_string(),
        })?;
        Ok((signature.to_string(), self.rpc.transaction(&parsed).await?))
    }

    /// The block hash of one slot.
    async fn block_hash(&self, slot: u64) -> Result<(u64, String), StepError> {
        Ok((slot, self.rpc.block_hash(slot).await?))
    }
}

/// The listed transactions to read, oldest first: those that succeeded, and, read at
/// `finalized`, only those at or below `paid_slot`. The cluster may finalize more slots
/// between the paid slot's read and the listing; a transaction in one of them is read at
/// the next step (its cursor stops at `paid_slot + 1`), so that a payment read at
/// `finalized` is never seen `pending`.
fn to_read(listed: &BTreeMap<String, Listed>, paid_slot: u64, commitment: Commitment) -> Vec<(u64, String)> {
    let mut todo: Vec<(u64, String)> = listed
        .iter()
        .filter(|(_, l)| !l.failed)
        .filter(|(_, l)| commitment == Commitment::Confirmed || l.slot <= paid_slot)
        .map(|(s, l)| (l.slot, s.clone()))
        .collect();
    todo.sort();
    todo
}

/// The commitment of `paid`: `confirmed` under the `confirmed` rule, `finalized` otherwise.
fn paid_commitment(rule: FinalityRule) -> CommitmentConfig {
    match rule {
        FinalityRule::Confirmed => CommitmentConfig::confirmed(),
        _ => CommitmentConfig::finalized(),
    }
}

/// The commitment signatures, transactions and blocks are read at.
fn read_commitment(commitment: Commitment) -> CommitmentConfig {
    match commitment {
        Commitment::Confirmed => CommitmentConfig::confirmed(),
        Commitment::Finalized => CommitmentConfig::finalized(),
    }
}

/// Moves every cursor below `next` up to it and returns the addresses it moved.
fn advanced(cursors: &mut BTreeMap<String, u64>, next: u64) -> Vec<String> {
    let mut moved = Vec::new();
    for (address, cursor) in cursors.iter_mut() {
        if *cursor < next {
            *cursor = next;
            moved.push(address.clone());
        }
    }
    moved
}

impl Stage for SolanaWorker {
    type Error = StepError;

    fn network(&self) -> &str {
        &self.network
    }

    fn store(&self) -> &Store {
        &self.store
    }

    fn seen(&self) -> Seen {
        Seen {
            head: self.seen_head,
            refused_endpoints: self.rpc.refused_endpoints(),
        }
    }

    fn poll_interval(&self) -> Duration {
        self.config.poll_interval
    }

    async fn advance(&mut self) -> Result<Progress, StepError> {
        let report = self.step().await?;
        Ok(if report.transactions == 0 {
            Progress::CaughtUp
        } else {
            Progress::Advanced
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing() -> BTreeMap<String, Listed> {
        [
            ("c", 12, false),
            ("a", 10, false),
            ("b", 11, true),
            ("d", 13, false),
        ]
        .into_iter()
        .map(|(signature, slot, failed)| (signature.to_string(), Listed { slot, failed }))
        .collect()
    }

    #[test]
    fn read_at_finalized_stops_at_the_paid_slot() {
        let todo = to_read(&listing(), 12, Commitment::Finalized);
        assert_eq!(todo, [(10, "a".to_string()), (12, "c".to_string())]);
    }

    #[test]
    fn read_at_confirmed_reads_past_the_paid_slot_as_pending() {
        let todo = to_read(&listing(), 12, Commitment::Confirmed);
        assert_eq!(
            todo,
            [
                (10, "a".to_string()),
                (12, "c".to_string()),
                (13, "d".to_string())
            ]
        );
    }
}
