//! The worker loop of one EVM network.
//!
//! Each step reads the next range of blocks for the tokens whose cursor is furthest
//! behind, between two reads of the range's last header; then it checks that the last
//! block it remembered is still canonical. If the header changed under the read, the
//! batch is thrown away and read again; if the remembered block is no longer canonical,
//! everything above the fork point is rolled back first. Only then do the rows, the
//! cursor advance and the head update commit, in one transaction.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::Address;
use alloy::rpc::types::Log;
use futures::StreamExt;
use paywatch_chain::{ChainMetrics, Progress, RowKind, Stage, ask_until_answered, drive};
use paywatch_core::config::{NetworkConfig, StartBlock};
use paywatch_core::ids::{lower_hex, parse_evm_address};
use paywatch_core::matching::{TxAuthorizations, pair_payments};
use paywatch_core::records::{Batch, BlockRecord};
use paywatch_core::state::FinalityRule;
use paywatch_store::{HeadUpdate, Store, StoreError, TokenCursor};
use tokio_util::sync::CancellationToken;

use crate::decode::{BadAnswer, authorization_topic, decode_logs, every_authorization, transfer_topic};
use crate::rpc::{BlockHeader, EvmRpc, RpcFault};

/// Why a step did not complete; the loop logs it and tries again.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The RPC failed after retries.
    #[error("RPC: {0}")]
    Rpc(#[from] RpcFault),
    /// The RPC answered something impossible.
    #[error("bad RPC answer: {0}")]
    BadAnswer(#[from] BadAnswer),
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
}

/// Why a worker stopped for good.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The RPC serves another chain than the configured one.
    #[error(
        "{network}: the RPC endpoint serves chain id {actual}, not {expected}; fix rpc_urls in chains.toml"
    )]
    WrongChain {
        /// Configured network.
        network: String,
        /// Chain id from the network id.
        expected: u64,
        /// Chain id the RPC answered.
        actual: u64,
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
    rpc: EvmRpc,
    tokens: Vec<Address>,
    range: u64,
}

impl EvmWorker {
    /// Builds a worker for `config` on `store` through `rpc`.
    pub fn new(config: NetworkConfig, store: Store, rpc: EvmRpc) -> Self {
        let tokens = config
            .tokens
            .iter()
            .map(|t| {
                parse_evm_address(&t.address).expect("token addresses are validated by the config parser")
            })
            .collect();
        Self {
            network: config.id.to_string(),
            metrics: ChainMetrics::new(&config.id.to_string()),
            range: config.max_block_range,
            config,
            store,
            rpc,
            tokens,
        }
    }

    /// Checks that the RPC serves the configured chain, retrying until it answers.
    pub async fn verify_chain(&self, shutdown: &CancellationToken) -> Result<(), WorkerError> {
        let Some(expected) = self.config.id.evm_chain_id() else {
            return Ok(());
        };
        let asked = ask_until_answered(&self.network, "the chain id", shutdown, || self.rpc.chain_id()).await;
        match asked {
            Some(actual) if actual != expected => Err(WorkerError::WrongChain {
                network: self.network.clone(),
                expected,
                actual,
            }),
            _ => Ok(()),
        }
    }

    /// Runs until `shutdown` is cancelled. A step in progress finishes (or is abandoned
    /// before its commit); a committed batch is never half-written. A WebSocket endpoint's
    /// new heads wake a caught-up worker before its poll interval.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), WorkerError> {
        self.verify_chain(&shutdown).await?;
        let heads = self
            .rpc
            .subscribe_heads()
            .await
            .map(|s| s.into_stream().map(|_| ()).boxed());
        tracing::info!(network = %self.network, tokens = self.tokens.len(), "EVM worker started");
        drive(&mut self, heads, &shutdown).await;
        tracing::info!(network = %self.network, "EVM worker stopped");
        Ok(())
    }

    /// Cursors of the configured tokens, creating those missing from their start block.
    async fn cursors(&self, head: u64) -> Result<Vec<TokenCursor>, StepError> {
        let stored = self.store.cursors(&self.network).await?;
        let missing: Vec<TokenCursor> = self
            .config
            .tokens
            .iter()
            .filter(|t| !stored.iter().any(|c| c.token == t.address))
            .map(|t| TokenCursor {
                token: t.address.clone(),
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
        let head = self.rpc.block_number().await?;
        let final_block = self.final_block(head).await?;
        self.metrics.head(head);

        let cursors = self.cursors(head).await?;
        let from = cursors.iter().map(|c| c.next_block).min().unwrap_or(head + 1);
        if from > head {
            if let Some(rolled_back) = self.check_reorg(head).await? {
                return Ok(rolled_back);
            }
            self.store
                .record_head(&self.network, &self.head_update(head, final_block))
                .await?;
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
        let mut to = head.min(from.saturating_add(self.range - 1));
        if let Some(next) = next_group {
            to = to.min(next - 1);
        }
        let group_addresses: Vec<Address> = self
            .tokens
            .iter()
            .copied()
            .filter(|a| group.contains(&lower_hex(a)))
            .collect();

        let read_started = Instant::now();
        let before = self.rpc.header(BlockNumberOrTag::Number(to)).await?;
        let read = self
            .rpc
            .logs(&group_addresses, &[transfer_topic()], from, to)
            .await;
        let Some(mut logs) = self.shrink_on_refusal(read, from, to)? else {
            return self.retry_smaller().await;
        };
        // Authorizations are read by topic alone, of every contract: a payment's number
        // counts every authorization of its transaction, watched token or not.
        let read = self
            .rpc
            .logs_of_any_contract(authorization_topic(), from, to)
            .await;
        let Some(every_logs) = self.shrink_on_refusal(read, from, to)? else {
            return self.retry_smaller().await;
        };
        logs.extend(
            every_logs
                .iter()
                .filter(|log| group_addresses.contains(&log.address()))
                .cloned(),
        );
        let after = self.rpc.header(BlockNumberOrTag::Number(to)).await?;
        if let Some(rolled_back) = self.check_reorg(head).await? {
            return Ok(rolled_back);
        }
        if before.hash != after.hash {
            tracing::info!(network = %self.network, block = to, "chain moved during the read; reading again");
            return Ok(StepOutcome::ChainMoved);
        }
        let decoded = decode_logs(&logs, from, to, &group_addresses)?;
        if decoded.block_hashes.get(&to).is_some_and(|h| *h != after.hash) {
            return Ok(StepOutcome::ChainMoved);
        }

        let every = every_authorization(&every_logs, from, to, &decoded.block_hashes)?;
        let batch = self.build_batch(from, to, decoded, &every, after).await?;
        let read_seconds = read_started.elapsed().as_secs_f64();
        let counts = (
            batch.transfers.len(),
            batch.authorizations.len(),
            batch.payments.len(),
        );
        let commit_started = Instant::now();
        self.store
            .commit_batch(
                &self.network,
                &group,
                &batch,
                &self.head_update(head, final_block),
            )
            .await?;
        let commit_seconds = commit_started.elapsed().as_secs_f64();
        self.metrics.batch_read(read_seconds);
        self.metrics.batch_commit(commit_seconds);
        self.metrics.rows(RowKind::Transfer, counts.0);
        self.metrics.rows(RowKind::Authorization, counts.1);
        self.metrics.rows(RowKind::Payment, counts.2);
        self.metrics.blocks(to - from + 1);
        self.metrics.progress(to, head);
        tracing::debug!(
            network = %self.network, from, to, transfers = counts.0, payments = counts.2,
            read_seconds, commit_seconds, "committed batch"
        );
        if self.range < self.config.max_block_range {
            self.range = (self.range * 2).min(self.config.max_block_range);
        }
        Ok(StepOutcome::Committed {
            from,
            to,
            head,
            logs: (counts.0 + counts.1) as u64,
        })
    }

    async fn retry_smaller(&mut self) -> Result<StepOutcome, StepError> {
        Box::pin(self.step()).await
    }

    fn head_update(&self, head: u64, final_block: Option<u64>) -> HeadUpdate {
        HeadUpdate {
            head,
            final_block,
            refund_window_secs: i64::try_from(self.config.refund_window.as_secs()).unwrap_or(i64::MAX),
        }
    }

    async fn final_block(&self, head: u64) -> Result<Option<u64>, StepError> {
        let tag = match self.config.finality {
            FinalityRule::Confirmations(_) => return Ok(self.config.finality.final_block(head, None)),
            FinalityRule::Finalized => BlockNumberOrTag::Finalized,
            FinalityRule::Safe => BlockNumberOrTag::Safe,
        };
        match self.rpc.header(tag).await {
            Ok(header) => Ok(self.config.finality.final_block(head, Some(header.number))),
            Err(RpcFault::UnknownBlock(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// An `eth_getLogs` answer for `from..=to`; `None` when the node refused the range as
    /// too large (or timed out) and the range was halved for the retry.
    fn shrink_on_refusal(
        &mut self,
        read: Result<Vec<Log>, RpcFault>,
        from: u64,
        to: u64,
    ) -> Result<Option<Vec<Log>>, StepError> {
        match read {
            Ok(logs) => Ok(Some(logs)),
            Err(fault @ (RpcFault::RangeTooLarge(_) | RpcFault::Timeout(_))) if to > from => {
                self.range = (to - from).div_ceil(2).max(1);
                tracing::info!(network = %self.network, from, to, new_range = self.range, %fault, "shrinking eth_getLogs range");
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn build_batch(
        &self,
        from: u64,
        to: u64,
        decoded: crate::decode::DecodedLogs,
        every: &TxAuthorizations,
        last: BlockHeader,
    ) -> Result<Batch, StepError> {
        let mut payments =
            pair_payments(&decoded.authorizations, &decoded.transfers, every).map_err(BadAnswer::from)?;
        // Nodes that do not put `blockTimestamp` on logs: read the headers of payment blocks.
        let untimed: BTreeSet<u64> = payments
            .iter()
            .filter(|p| p.transfer.block_time.is_none())
            .map(|p| p.transfer.block_number)
            .collect();
        for number in untimed {
            let header = if number == last.number {
                last
            } else {
                self.rpc.header(BlockNumberOrTag::Number(number)).await?
            };
            if Some(&header.hash) != decoded.block_hashes.get(&number) {
                return Err(StepError::BadAnswer(BadAnswer::InconsistentBlockHash(number)));
            }
            for p in payments.iter_mut().filter(|p| p.transfer.block_number == number) {
                p.transfer.block_time = i64::try_from(header.timestamp).ok();
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
        Ok(Batch {
            from_block: from,
            to_block: to,
            transfers: decoded.transfers,
            authorizations: decoded.authorizations,
            payments,
            blocks,
            vanished_payments: Vec::new(),
        })
    }

    /// Compares the highest remembered block with the chain; on a mismatch finds the fork
    /// point and rolls back above it. Returns what it rolled back, if anything.
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
        match self.rpc.header(BlockNumberOrTag::Number(number)).await {
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

    fn poll_interval(&self) -> Duration {
        self.config.poll_interval
    }

    async fn advance(&mut self) -> Result<Progress, StepError> {
        Ok(match self.step().await? {
            StepOutcome::CaughtUp => Progress::CaughtUp,
            _ => Progress::Advanced,
        })
    }
}
