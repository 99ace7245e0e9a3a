//! The worker loop of one EVM network.
//!
//! Each step reads the next range of blocks for the tokens whose cursor is furthest
//! behind, between two reads of the range's last header; then it checks that the last
//! block it remembered is still canonical. If the header changed under the read, the
//! batch is thrown away and read again; if the remembered block is no longer canonical,
//! everything above the fork point is rolled back first. Only then do the rows, the
//! cursor advance and the head update commit, in one transaction.
//!
//! While the blocks are final (a backfill), a step reads its ranges in spawned tasks, up
//! to `ranges_in_flight` at once (`worker/ranges.rs`), and commits them one by one in chain
//! order as they arrive, each in its own transaction — a range only if the block before it,
//! read with its last header, is the last block of the range committed before it.

pub mod audit;
mod ranges;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::Address;
use futures::StreamExt;
use paywatch_chain::{ChainMetrics, Progress, RowKind, Seen, Stage, ask_until_answered, drive};
use paywatch_core::config::{NetworkConfig, StartBlock};
use paywatch_core::ids::lower_hex;
use paywatch_core::records::{Batch, BlockRecord, TransferRecord};
use paywatch_core::retention::TransferTriage;
use paywatch_core::state::FinalityRule;
use paywatch_store::{HeadUpdate, Store, TokenCursor};
use tokio_util::sync::CancellationToken;

use self::ranges::{LastRange, Pipeline, RangeRead, RangeReader, ReadRange};
use crate::decode::BadAnswer;
use crate::rpc::{BlockHeader, EvmRpc, RpcFault};
use crate::tokens::{TokenMismatch, check_tokens};
use crate::verify::CrossCheckError;

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

impl From<CrossCheckError> for StepError {
    fn from(error: CrossCheckError) -> Self {
        match error {
            CrossCheckError::Rpc(fault) => Self::Rpc(fault),
            CrossCheckError::Bad(bad) => Self::BadAnswer(bad),
        }
    }
}

/// Why a worker stopped for good.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// No RPC endpoint serves the configured chain.
    #[error("{network}: no RPC endpoint serves this chain ({refused}); fix rpc_urls in chains.toml")]
    WrongChain {
        /// Configured network.
        network: String,
        /// Each endpoint and the chain it serves.
        refused: String,
    },
    /// No verifier endpoint serves the configured chain.
    #[error(
        "{network}: no verifier endpoint serves this chain ({refused}); fix verify_rpc_urls in chains.toml"
    )]
    WrongVerifierChain {
        /// Configured network.
        network: String,
        /// Each endpoint and the chain it serves.
        refused: String,
    },
    /// A configured token is not what `chains.toml` says on this chain.
    #[error("{network}: {mismatch}")]
    WrongToken {
        /// Configured network.
        network: String,
        /// What is wrong.
        mismatch: TokenMismatch,
    },
}

/// What a step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOutcome {
    /// Read and committed `from..=to`.
    Committed {
        /// First block.
        from: u64,
        /// Last block.
        to: u64,
        /// Chain head at the time.
        head: u64,
        /// Logs read in the range (transfers and authorizations).
        logs: u64,
    },
    /// Nothing new to read: the cursors are past the head.
    CaughtUp,
    /// A reorg was found and rolled back to `fork_block`.
    RolledBack {
        /// The highest block still canonical.
        fork_block: u64,
        /// Payments already reported `paid` that the reorg removed (a reorg deeper than the
        /// finality rule; logged at ERROR).
        paid_dropped: u64,
    },
    /// The chain moved under the read; nothing was committed.
    ChainMoved,
}

/// Blocks of hash history checked per round when looking for a fork point.
const FORK_SEARCH_PAGE: u32 = 64;

/// The worker of one EVM network.
pub struct EvmWorker {
    config: NetworkConfig,
    network: String,
    metrics: ChainMetrics,
    store: Store,
    /// The node (and the verifier), and what a range read asks it for.
    reader: RangeReader,
    tokens: Vec<Address>,
    /// Blocks per `eth_getLogs`: `max_block_range`, halved while the node refuses it.
    range: u64,
    /// The last range committed: its blocks and density bound the next ranges.
    last_range: Option<LastRange>,
    /// The highest head taken from a node (the recorded one at start): a lower head is a
    /// reorg only if hashes prove it, else the node is behind.
    highest_head: Option<u64>,
    /// The head the primary last answered, taken or not.
    seen_head: Option<u64>,
}

impl EvmWorker {
    /// Builds a worker for `config` on `store` through `rpc`.
    pub fn new(config: NetworkConfig, store: Store, rpc: EvmRpc) -> Self {
        Self {
            tokens: config.tokens.iter().filter_map(|t| t.address.evm()).collect(),
            reader: RangeReader::new(&config, rpc),
            network: config.id.to_string(),
            metrics: ChainMetrics::new(&config.id.to_string()),
            range: config.max_block_range,
            last_range: None,
            highest_head: None,
            seen_head: None,
            config,
            store,
        }
    }

    /// Cross-checks every range with `verifier`, an independent provider of the same chain
    /// (`verify_rpc_urls`): logs one provider left out or made up are settled by receipts.
    pub fn with_verifier(mut self, verifier: EvmRpc) -> Self {
        self.reader.verifier = Some(Arc::new(verifier));
        self
    }

    /// Checks which chain every endpoint (`rpc_urls`, `verify_rpc_urls`) serves — one on
    /// another chain is never read — and that each token is a contract there with the
    /// configured decimals, retrying until the endpoints answer. Fails when no endpoint of
    /// either list serves the configured chain.
    pub async fn verify_chain(&self, shutdown: &CancellationToken) -> Result<(), WorkerError> {
        let Some(expected) = self.config.id.evm_chain_id() else {
            return Ok(());
        };
        if let Some(refused) = self
            .right_endpoints(&self.reader.rpc, "the RPC endpoints' chain", shutdown)
            .await
        {
            return Err(WorkerError::WrongChain {
                network: self.network.clone(),
                refused,
            });
        }
        let asked = ask_until_answered(&self.network, "the tokens' contracts", shutdown, || {
            check_tokens(&self.reader.rpc, expected, &self.config.tokens)
        })
        .await;
        if let Some(Some(mismatch)) = asked {
            return Err(WorkerError::WrongToken {
                network: self.network.clone(),
                mismatch,
            });
        }
        if let Some(verifier) = &self.reader.verifier
            && let Some(refused) = self
                .right_endpoints(verifier, "the verifier endpoints' chain", shutdown)
                .await
        {
            return Err(WorkerError::WrongVerifierChain {
                network: self.network.clone(),
                refused,
            });
        }
        Ok(())
    }

    /// Asks each endpoint of `rpc` which chain it serves until one serves the network's
    /// (`None`) or every one answered another (`Some`: each with what it serves); `None`
    /// at shutdown too.
    async fn right_endpoints(
        &self,
        rpc: &EvmRpc,
        what: &str,
        shutdown: &CancellationToken,
    ) -> Option<String> {
        let answered = ask_until_answered(&self.network, what, shutdown, || rpc.refused_at_start()).await;
        answered.flatten()
    }

    /// Runs until `shutdown` is cancelled. A step in progress finishes (or is abandoned
    /// before its commit); a committed batch is never half-written. A WebSocket endpoint's
    /// new heads wake a caught-up worker before its poll interval.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), WorkerError> {
        self.verify_chain(&shutdown).await?;
        let heads = self
            .reader
            .rpc
            .subscribe_heads()
            .await
            .map(|s| s.into_stream().map(|_| ()).boxed());
        tracing::info!(network = %self.network, tokens = self.tokens.len(), "EVM worker started");
        match drive(&mut self, heads, &shutdown).await {
            Some(error) => tracing::error!(network = %self.network, %error, "EVM worker stopped for good"),
            None => tracing::info!(network = %self.network, "EVM worker stopped"),
        }
        Ok(())
    }

    /// Cursors of the configured tokens, creating those missing from their start block.
    async fn cursors(&self, head: u64) -> Result<Vec<TokenCursor>, StepError> {
        let stored = self.store.cursors(&self.network).await?;
        let missing: Vec<TokenCursor> = self
            .config
            .tokens
            .iter()
            .filter(|t| !stored.iter().any(|c| t.address == c.token))
            .map(|t| TokenCursor {
                token: t.address.to_string(),
                next_block: match t.start_block {
                    StartBlock::Number(n) => n,
                    StartBlock::Latest => head,
                },
            })
            .collect();
        if missing.is_empty() {
            return Ok(stored
                .into_iter()
                .filter(|c| self.config.tokens.iter().any(|t| t.address == c.token))
                .collect());
        }
        self.store.init_cursors(&self.network, &missing).await?;
        Box::pin(self.cursors(head)).await
    }

    /// One step: read, check, commit. Public so tests and the backfill command can drive it.
    pub async fn step(&mut self) -> Result<StepOutcome, StepError> {
        let mut head = self.reader.rpc.block_number().await?;
        self.seen_head = Some(head);
        let recorded = self.recorded_head().await?;
        if let Some(recorded) = recorded.filter(|recorded| head < *recorded) {
            if let Some(rolled_back) = self.check_reorg(head).await? {
                // Proven by hashes: the chain is shorter now.
                self.highest_head = Some(head);
                return Ok(rolled_back);
            }
            self.reader.rpc.fail_over("its head is behind the recorded head");
            return Err(RpcFault::Behind { head, recorded }.into());
        }
        if let Some(verifier) = &self.reader.verifier {
            // Only blocks both providers have are read: a verifier behind the primary
            // holds the worker back rather than disagreeing about blocks it lacks.
            let verified = verifier.block_number().await?;
            if let Some(recorded) = recorded.filter(|recorded| verified < *recorded) {
                verifier.fail_over("its head is behind the recorded head");
                return Err(RpcFault::Behind {
                    head: verified,
                    recorded,
                }
                .into());
            }
            head = head.min(verified);
        }
        let (final_block, final_header) = self.final_block(head).await?;
        self.metrics.head(head);

        let cursors = self.cursors(head).await?;
        let from = cursors.iter().map(|c| c.next_block).min().unwrap_or(head + 1);
        if from > head {
            if let Some(rolled_back) = self.check_reorg(head).await? {
                return Ok(rolled_back);
            }
            let paid_lag_secs = self.paid_lag_secs(head, None, final_block, final_header).await?;
            self.store
                .record_head(&self.network, &self.head_update(head, final_block, paid_lag_secs))
                .await?;
            self.took_head(head);
            self.metrics.progress(from.saturating_sub(1), head);
            return Ok(StepOutcome::CaughtUp);
        }
        // Read only the tokens that are furthest behind, and stop where the next group starts,
        // so lagging tokens (added to the config later) catch up and then move together.
        let group: Vec<String> = cursors
            .iter()
            .filter(|c| c.next_block == from)
            .map(|c| c.token.clone())
            .collect();
        let next_group = cursors.iter().map(|c| c.next_block).filter(|&b| b > from).min();
        let mut last = head;
        if let Some(next) = next_group {
            last = last.min(next - 1);
        }
        let group_addresses: Vec<Address> = self
            .tokens
            .iter()
            .copied()
            .filter(|a| group.contains(&lower_hex(a)))
            .collect();

        let (ranges, in_flight) = self.ranges_from(from, last, final_block);
        let mut pipeline = Pipeline::start(self.reader.clone(), group_addresses.into(), ranges, in_flight);
        // Ranges are committed in chain order, up to the first that was not read, or that
        // does not follow the one committed before it (the chain moved between the reads).
        let mut committed: Option<(u64, u64, u64, BlockHeader)> = None;
        while let Some(((from, to), read)) = pipeline.next().await {
            let range = match read {
                Ok(RangeRead::Read(range)) => *range,
                Ok(RangeRead::Refused(fault)) => {
                    let shrunk = self.shrink(fault, from, to);
                    if committed.is_none() {
                        shrunk?;
                        drop(pipeline);
                        return self.retry_smaller().await;
                    }
                    break;
                }
                Ok(RangeRead::ChainMoved) if committed.is_none() => {
                    if let Some(rolled_back) = self.check_reorg(head).await? {
                        return Ok(rolled_back);
                    }
                    return Ok(StepOutcome::ChainMoved);
                }
                Ok(RangeRead::ChainMoved) => break,
                // The next step reads it again (and reports it if it fails again).
                Err(error) if committed.is_some() => {
                    tracing::debug!(network = %self.network, from, to, %error, "a range read ahead failed");
                    break;
                }
                Err(error) => return Err(error),
            };
            match committed {
                None => {
                    if let Some(rolled_back) = self.check_reorg(head).await? {
                        return Ok(rolled_back);
                    }
                }
                Some((.., tip)) if range.joins != Some(tip.hash) => {
                    tracing::info!(network = %self.network, block = tip.number, "chain moved between two ranges read ahead; reading again");
                    break;
                }
                Some(_) => {}
            }
            // Ranges read meanwhile that follow it commit with it, in one transaction.
            let mut range = range;
            while let Some(next) = pipeline.next_following(&range.last) {
                range = range.followed_by(next);
            }
            let (to, last) = (range.to, range.last);
            let logs = self
                .commit(range, &group, head, final_block, final_header)
                .await?;
            committed = Some(match committed {
                None => (from, to, logs, last),
                Some((first, _, before, _)) => (first, to, before + logs, last),
            });
        }
        let Some((from, to, logs, _)) = committed else {
            // Every read task died (logged): the next step reads again.
            return Ok(StepOutcome::ChainMoved);
        };
        Ok(StepOutcome::Committed { from, to, head, logs })
    }

    /// Commits a range read, with the head update; returns the logs it read (transfers and
    /// authorizations).
    async fn commit(
        &mut self,
        range: ReadRange,
        group: &[String],
        head: u64,
        final_block: Option<u64>,
        final_header: Option<BlockHeader>,
    ) -> Result<u64, StepError> {
        let (from, to, last, read_seconds) = (range.from, range.to, range.last, range.read_seconds);
        let blocks = to - from + 1;
        self.last_range = Some(LastRange {
            blocks,
            logs_per_block: range.logs_read as f64 / blocks as f64,
        });
        let read_transfers = range.decoded.transfers.len();
        let (batch, transfers_skipped) = self.batch_of(range).await?;
        let counts = (read_transfers, batch.authorizations.len(), batch.payments.len());
        // At the head (a live step, or a backfill's last range), how far `paid` lags it.
        let paid_lag_secs = if to == head {
            self.paid_lag_secs(head, Some(last), final_block, final_header)
                .await?
        } else {
            None
        };
        let commit_started = Instant::now();
        let committed = self
            .store
            .commit_batch(
                &self.network,
                group,
                &batch,
                &self.head_update(head, final_block, paid_lag_secs),
            )
            .await?;
        self.took_head(head);
        let commit_seconds = commit_started.elapsed().as_secs_f64();
        self.metrics.batch_read(read_seconds);
        self.metrics.batch_commit(commit_seconds);
        self.metrics.rows(RowKind::Transfer, committed.transfers_kept);
        let transfers_skipped = transfers_skipped + committed.transfers_skipped;
        self.metrics.transfers_skipped(transfers_skipped);
        self.metrics.transfers_pruned(committed.transfers_pruned);
        self.metrics
            .rows(RowKind::Authorization, committed.authorizations_kept);
        self.metrics.rows(RowKind::Payment, counts.2);
        self.metrics.blocks(to - from + 1);
        self.metrics.progress(to, head);
        tracing::debug!(
            network = %self.network, from, to, transfers = counts.0,
            transfers_skipped, payments = counts.2,
            read_seconds, commit_seconds, "committed batch"
        );
        if self.range < self.config.max_block_range {
            self.range = (self.range * 2).min(self.config.max_block_range);
        }
        Ok((counts.0 + counts.1) as u64)
    }

    async fn retry_smaller(&mut self) -> Result<StepOutcome, StepError> {
        Box::pin(self.step()).await
    }

    fn head_update(&self, head: u64, final_block: Option<u64>, paid_lag_secs: Option<u64>) -> HeadUpdate {
        HeadUpdate {
            head,
            final_block,
            refund_window_secs: self.config.refund_window_secs(),
            paid_lag_secs,
            kept_wallets: self.config.kept_wallets(),
        }
    }

    /// How far `paid` lags the head in seconds: the head block's time minus the final
    /// block's, from their headers (read here unless already read: `head_header`, and the
    /// tagged block's `final_header` when it is the final block); `None` when nothing is
    /// final.
    async fn paid_lag_secs(
        &self,
        head: u64,
        head_header: Option<BlockHeader>,
        final_block: Option<u64>,
        final_header: Option<BlockHeader>,
    ) -> Result<Option<u64>, StepError> {
        let Some(final_block) = final_block else {
            return Ok(None);
        };
        let header_of = |number: u64, read: Option<BlockHeader>| async move {
            match read.filter(|header| header.number == number) {
                Some(header) => Ok(header),
                None => self.reader.rpc.header(BlockNumberOrTag::Number(number)).await,
            }
        };
        let (head, last_final) =
            tokio::try_join!(header_of(head, head_header), header_of(final_block, final_header))?;
        let lag = head.timestamp.saturating_sub(last_final.timestamp);
        self.metrics.paid_lag_seconds(lag);
        Ok(Some(lag))
    }

    /// The highest final block under the network's rule, and the tagged block's header when
    /// the rule read one.
    async fn final_block(&self, head: u64) -> Result<(Option<u64>, Option<BlockHeader>), StepError> {
        let tag = match self.config.finality {
            // (`confirmed` is Solana's: refused on EVM by chains.toml, it finalizes nothing.)
            FinalityRule::Confirmations(_) | FinalityRule::Confirmed => {
                return Ok((self.config.finality.final_block(head, None), None));
            }
            FinalityRule::Finalized => BlockNumberOrTag::Finalized,
            FinalityRule::Safe => BlockNumberOrTag::Safe,
        };
        match self.reader.rpc.header(tag).await {
            Ok(header) => Ok((
                self.config.finality.final_block(head, Some(header.number)),
                Some(header),
            )),
            Err(RpcFault::UnknownBlock(_)) => Ok((None, None)),
            Err(e) => Err(e.into()),
        }
    }

    /// Halves the range after the node refused `from..=to` as too large (or timed out on
    /// it); a refused single block is the fault itself.
    fn shrink(&mut self, fault: RpcFault, from: u64, to: u64) -> Result<(), StepError> {
        if to == from {
            return Err(fault.into());
        }
        self.range = (to - from).div_ceil(2).max(1);
        tracing::info!(network = %self.network, from, to, new_range = self.range, %fault, "shrinking eth_getLogs range");
        Ok(())
    }

    /// The batch of a range read: of its transfers, only those that moved a payment's
    /// money or can refund one, and those of the kept wallets, are kept (the store applies
    /// the same rule when it commits),
    /// with the times of their blocks where the node left them out; and the range's blocks.
    async fn batch_of(&self, range: ReadRange) -> Result<(Batch, usize), StepError> {
        let ReadRange {
            from,
            to,
            last,
            decoded,
            mut payments,
            ..
        } = range;
        let mut escrow_events = decoded.escrow_events;
        let kept_wallets = self.config.kept_wallets();
        let triage = TransferTriage::new(&decoded.transfers, &payments, &kept_wallets);
        let stored = self
            .store
            .refund_routes_among(&self.network, &triage.undecided_routes())
            .await?;
        let (kept, transfers_skipped) = triage.keep(&stored);
        let mut transfers: Vec<TransferRecord> = kept.into_iter().cloned().collect();
        // Nodes that do not put `blockTimestamp` on logs: read the headers of the blocks of
        // payments and kept transfers (the refund window compares their times).
        let untimed: BTreeSet<u64> = payments
            .iter()
            .map(|p| &p.transfer)
            .chain(escrow_events.iter().map(|e| &e.position))
            .chain(transfers.iter().map(|t| &t.position))
            .filter(|position| position.block_time.is_none())
            .map(|position| position.block_number)
            .collect();
        for number in untimed {
            let header = if number == last.number {
                last
            } else {
                self.reader.rpc.header(BlockNumberOrTag::Number(number)).await?
            };
            if Some(&header.hash) != decoded.block_hashes.get(&number) {
                return Err(StepError::BadAnswer(BadAnswer::InconsistentBlockHash(number)));
            }
            let positions = payments
                .iter_mut()
                .map(|p| &mut p.transfer)
                .chain(escrow_events.iter_mut().map(|e| &mut e.position))
                .chain(transfers.iter_mut().map(|t| &mut t.position));
            for position in positions.filter(|position| position.block_number == number) {
                position.block_time = i64::try_from(header.timestamp).ok();
            }
        }
        let mut blocks: Vec<BlockRecord> = decoded
            .block_hashes
            .iter()
            .filter(|(number, _)| **number != last.number)
            .map(|(number, hash)| BlockRecord {
                number: *number,
                hash: lower_hex(hash),
                parent_hash: None,
            })
            .collect();
        blocks.push(BlockRecord {
            number: last.number,
            hash: lower_hex(last.hash),
            parent_hash: Some(lower_hex(last.parent_hash)),
        });
        let batch = Batch {
            from_block: from,
            to_block: to,
            transfers,
            authorizations: decoded.authorizations,
            payments,
            blocks,
            vanished_payments: Vec::new(),
            escrow_events,
            escrow_terms: decoded.escrow_terms,
        };
        Ok((batch, transfers_skipped))
    }

    /// `head` was recorded: a lower one is taken only when hashes prove a reorg. (Only a
    /// recorded head counts: one a provider answered in a step that failed is not taken.)
    fn took_head(&mut self, head: u64) {
        self.highest_head = Some(self.highest_head.map_or(head, |highest| highest.max(head)));
    }

    /// The highest head recorded so far: the store's until this worker records one.
    async fn recorded_head(&mut self) -> Result<Option<u64>, StepError> {
        if self.highest_head.is_none() {
            self.highest_head = self
                .store
                .chain_head(&self.network)
                .await?
                .map(|head| head.head_block);
        }
        Ok(self.highest_head)
    }

    /// A fork below the final block is taken from the active endpoint only when it still
    /// serves the network's chain and no other provider disagrees: the verifier and every other endpoint of `rpc_urls` are asked
    /// for the block the store holds at `tip`. One that still has it means the providers
    /// disagree: nothing final changes, the set moves on from the active endpoint, and the
    /// step fails (read again). One that cannot answer leaves it undecided, so nothing
    /// final changes either. With no other provider, the active one's word is all there is.
    async fn confirm_deep_fork(&self, tip: &BlockRecord, fork_block: u64) -> Result<(), StepError> {
        // The active endpoint still serves this chain (an endpoint moved to another chain
        // reports every stored block as reorged).
        self.reader.rpc.recheck_active().await?;
        let mut witnesses = self.reader.rpc.header_from_the_others(tip.number).await;
        if let Some(verifier) = &self.reader.verifier {
            witnesses.push((
                verifier.endpoint(),
                verifier.header(BlockNumberOrTag::Number(tip.number)).await,
            ));
        }
        for (endpoint, answer) in witnesses {
            match answer {
                Ok(header) if lower_hex(header.hash) == tip.hash => {
                    let reporting = self.reader.rpc.endpoint();
                    self.metrics.rpc_disagreements("primary", 1);
                    tracing::error!(
                        network = %self.network, reporting, disagreeing = %endpoint,
                        block = tip.number, stored = %tip.hash, fork_block,
                        "one RPC provider reports a reorg below the final block that another does not: nothing final changes; leaving the reporting endpoint"
                    );
                    self.reader
                        .rpc
                        .fail_over("it reports a reorg below the final block that another provider does not");
                    return Err(BadAnswer::DisputedFork {
                        block: tip.number,
                        reporting,
                        disagreeing: endpoint,
                    }
                    .into());
                }
                Ok(_) | Err(RpcFault::UnknownBlock(_)) => {}
                Err(fault) => {
                    tracing::warn!(
                        network = %self.network, endpoint, block = tip.number, %fault,
                        "cannot ask another provider about a reorg below the final block; nothing final changes until it answers"
                    );
                    return Err(fault.into());
                }
            }
        }
        Ok(())
    }

    /// Compares the highest remembered block with the chain; on a mismatch finds the fork
    /// point and rolls back above it (below the final block, only once the other providers
    /// confirm it). Returns what it rolled back, if anything.
    async fn check_reorg(&self, head: u64) -> Result<Option<StepOutcome>, StepError> {
        let Some(tip) = self.store.blocks_descending(&self.network, head, 1).await?.pop() else {
            return Ok(None);
        };
        if self.canonical_hash(tip.number).await? == Some(tip.hash.clone()) {
            return Ok(None);
        }
        let mut below = tip.number;
        let fork_block = loop {
            let page = self
                .store
                .blocks_descending(&self.network, below, FORK_SEARCH_PAGE)
                .await?;
            let mut found = None;
            for block in &page {
                if self.canonical_hash(block.number).await? == Some(block.hash.clone()) {
                    found = Some(block.number);
                    break;
                }
            }
            match (found, page.last()) {
                (Some(number), _) => break number,
                (None, Some(lowest)) if lowest.number > 0 && page.len() as u32 == FORK_SEARCH_PAGE => {
                    below = lowest.number - 1;
                }
                (None, lowest) => break lowest.map_or(0, |b| b.number.saturating_sub(1)),
            }
        };
        let recorded_final = self
            .store
            .chain_head(&self.network)
            .await?
            .and_then(|head| head.final_block);
        if recorded_final.is_some_and(|final_block| fork_block < final_block) {
            self.confirm_deep_fork(&tip, fork_block).await?;
        }
        let depth = tip.number - fork_block;
        let summary = self.store.rollback_after(&self.network, fork_block).await?;
        self.metrics.reorg(depth, summary.paid_dropped > 0);
        if summary.paid_dropped > 0 {
            tracing::error!(
                network = %self.network, fork_block, depth, paid_dropped = summary.paid_dropped,
                "REORG DEEPER THAN THE FINALITY RULE: payments reported paid were rolled back; raise the confirmation depth"
            );
        } else {
            tracing::warn!(
                network = %self.network, fork_block, depth,
                pending_dropped = summary.pending_dropped, transfers = summary.transfers,
                "reorg: rolled back above the fork point; re-reading the canonical chain"
            );
        }
        Ok(Some(StepOutcome::RolledBack {
            fork_block,
            paid_dropped: summary.paid_dropped,
        }))
    }

    async fn canonical_hash(&self, number: u64) -> Result<Option<String>, StepError> {
        match self.reader.rpc.header(BlockNumberOrTag::Number(number)).await {
            Ok(header) => Ok(Some(lower_hex(header.hash))),
            Err(RpcFault::UnknownBlock(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

impl Stage for EvmWorker {
    type Error = StepError;

    fn network(&self) -> &str {
        &self.network
    }

    fn store(&self) -> &Store {
        &self.store
    }

    fn seen(&self) -> Seen {
        let mut refused_endpoints = self.reader.rpc.refused_endpoints();
        if let Some(verifier) = &self.reader.verifier {
            refused_endpoints.extend(verifier.refused_endpoints());
        }
        Seen {
            head: self.seen_head,
            refused_endpoints,
        }
    }

    fn poll_interval(&self) -> Duration {
        self.config.poll_interval
    }

    async fn advance(&mut self) -> Result<Progress, StepError> {
        match self.step().await {
            Ok(StepOutcome::CaughtUp) => Ok(Progress::CaughtUp),
            Ok(_) => Ok(Progress::Advanced),
            Err(error) => {
                if let StepError::BadAnswer(bad) = &error {
                    self.metrics.bad_answer(bad.into());
                }
                Err(error)
            }
        }
    }
}
