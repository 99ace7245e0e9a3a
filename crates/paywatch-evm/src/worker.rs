//! The worker loop of one EVM network.
//!
//! Each step reads the next range of blocks for the tokens whose cursor is furthest
//! behind, between two reads of the range's last header; then it checks that the last
//! block it remembered is still canonical. If the header changed under the read, the
//! batch is thrown away and read again; if the remembered block is no longer canonical,
//! everything above the fork point is rolled back first. Only then do the rows, the
//! cursor advance and the head update commit, in one transaction.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::{Address, B256, Bytes};
use alloy::rpc::types::Log;
use futures::{StreamExt, TryStreamExt};
use paywatch_chain::{ChainMetrics, Progress, RowKind, Stage, ask_until_answered, drive};
use paywatch_core::PaymentMethod;
use paywatch_core::config::{NetworkConfig, StartBlock};
use paywatch_core::escrow::{escrow_payments, is_collection};
use paywatch_core::ids::lower_hex;
use paywatch_core::matching::{
    EveryMarker, pair_payments, pair_proxy_settlements, pair_redemptions, redemptions_that_may_pay,
};
use paywatch_core::records::{
    Batch, BlockRecord, EventPosition, PaymentRecord, ProxySettlementRecord, RedemptionRecord, TransferRecord,
};
use paywatch_core::retention::TransferTriage;
use paywatch_core::state::FinalityRule;
use paywatch_store::{HeadUpdate, Store, TokenCursor};
use tokio_util::sync::CancellationToken;

use crate::bloom::recover;
use crate::decode::{BadAnswer, DecodedLogs, Watched, decode_logs, every_marker};
use crate::reads::RangeReads;
use crate::rpc::{BlockHeader, EvmRpc, RpcFault};
use crate::settle_calls::{
    RedeemCall, SettleCall, decode_redeem_call, decode_settle_call, redeem_calls_in, settle_calls_in,
};
use crate::verify::{CrossCheckError, CrossChecked, cross_check};

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
    /// The verifier serves another chain than the configured one.
    #[error(
        "{network}: the verifier endpoint serves chain id {actual}, not {expected}; fix verify_rpc_urls in chains.toml"
    )]
    WrongVerifierChain {
        /// Configured network.
        network: String,
        /// Chain id from the network id.
        expected: u64,
        /// Chain id the verifier answered.
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

/// Transactions whose settling calls are read at once.
const SETTLE_CALLS_IN_FLIGHT: usize = 16;

/// Payment transactions in one block from which the block's transactions are read whole.
const BLOCK_READ_FROM: usize = 4;

/// Blocks of hash history checked per round when looking for a fork point.
const FORK_SEARCH_PAGE: u32 = 64;

/// The worker of one EVM network.
pub struct EvmWorker {
    config: NetworkConfig,
    network: String,
    metrics: ChainMetrics,
    store: Store,
    rpc: EvmRpc,
    /// The independent provider every range is cross-checked with, when configured.
    verifier: Option<EvmRpc>,
    tokens: Vec<Address>,
    proxies: Vec<(Address, PaymentMethod)>,
    escrows: Vec<Address>,
    /// ERC-7710 delegation managers.
    managers: Vec<Address>,
    /// The sellers' wallets (`pay_to`): when any, only transfers into or out of them are
    /// asked for.
    pay_to: Vec<Address>,
    chain_id: u64,
    range: u64,
}

impl EvmWorker {
    /// Builds a worker for `config` on `store` through `rpc`.
    pub fn new(config: NetworkConfig, store: Store, rpc: EvmRpc) -> Self {
        let tokens = config.tokens.iter().filter_map(|t| t.address.evm()).collect();
        let proxies = config
            .permit2_proxies
            .iter()
            .map(|p| (p.address, p.method))
            .collect();
        Self {
            proxies,
            escrows: config.escrows.clone(),
            managers: config.delegation_managers.clone(),
            pay_to: config.pay_to.iter().filter_map(|w| w.evm()).collect(),
            chain_id: config.id.evm_chain_id().unwrap_or_default(),
            network: config.id.to_string(),
            metrics: ChainMetrics::new(&config.id.to_string()),
            range: config.max_block_range,
            config,
            store,
            rpc,
            verifier: None,
            tokens,
        }
    }

    /// Cross-checks every range with `verifier`, an independent provider of the same chain
    /// (`verify_rpc_urls`): logs one provider left out or made up are settled by receipts.
    pub fn with_verifier(mut self, verifier: EvmRpc) -> Self {
        self.verifier = Some(verifier);
        self
    }

    /// Checks that the RPC serves the configured chain, retrying until it answers.
    pub async fn verify_chain(&self, shutdown: &CancellationToken) -> Result<(), WorkerError> {
        let Some(expected) = self.config.id.evm_chain_id() else {
            return Ok(());
        };
        let asked = ask_until_answered(&self.network, "the chain id", shutdown, || self.rpc.chain_id()).await;
        if let Some(actual) = asked
            && actual != expected
        {
            return Err(WorkerError::WrongChain {
                network: self.network.clone(),
                expected,
                actual,
            });
        }
        if let Some(verifier) = &self.verifier {
            let asked = ask_until_answered(&self.network, "the verifier's chain id", shutdown, || {
                verifier.chain_id()
            })
            .await;
            if let Some(actual) = asked
                && actual != expected
            {
                return Err(WorkerError::WrongVerifierChain {
                    network: self.network.clone(),
                    expected,
                    actual,
                });
            }
        }
        Ok(())
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
        let mut head = self.rpc.block_number().await?;
        if let Some(verifier) = &self.verifier {
            // Only blocks both providers have are read: a verifier behind the primary
            // holds the worker back rather than disagreeing about blocks it lacks.
            head = head.min(verifier.block_number().await?);
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
        // (The reads borrow copies: a refused range shrinks `self.range` below.)
        let (escrows, pay_to) = (self.escrows.clone(), self.pay_to.clone());
        let reads = RangeReads {
            tokens: &group_addresses,
            escrows: &escrows,
            pay_to: &pay_to,
        };
        let verifier_reads = async {
            match &self.verifier {
                Some(verifier) => Some(reads.read(verifier, from, to).await),
                None => None,
            }
        };
        let ((read, read_every), verifier_read) =
            tokio::join!(reads.read(&self.rpc, from, to), verifier_reads);
        let Some(mut logs) = self.shrink_on_refusal(read, from, to)? else {
            return self.retry_smaller().await;
        };
        // Settlement logs (authorizations, the Permit2 proxies' `Settled`) are read by topic
        // alone, of every contract: a payment's number counts every settlement log of its
        // transaction, watched contract or not.
        let Some(mut every_logs) = self.shrink_on_refusal(read_every, from, to)? else {
            return self.retry_smaller().await;
        };
        if let Some((verified, verified_every)) = verifier_read {
            let Some(verified) = self.shrink_on_refusal(verified, from, to)? else {
                return self.retry_smaller().await;
            };
            let Some(verified_every) = self.shrink_on_refusal(verified_every, from, to)? else {
                return self.retry_smaller().await;
            };
            let Some(checked) = self.cross_checked(from, to, logs, verified).await? else {
                return Ok(StepOutcome::ChainMoved);
            };
            logs = checked;
            let Some(checked) = self.cross_checked(from, to, every_logs, verified_every).await? else {
                return Ok(StepOutcome::ChainMoved);
            };
            every_logs = checked;
        }
        if self.config.bloom_check {
            self.recover_silent_blocks(from, to, &reads, &mut logs, &mut every_logs)
                .await?;
        }
        logs.extend(
            every_logs
                .iter()
                .filter(|log| {
                    group_addresses.contains(&log.address())
                        || self.proxies.iter().any(|(proxy, _)| *proxy == log.address())
                        || self.managers.contains(&log.address())
                })
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
        let watched = Watched {
            tokens: &group_addresses,
            proxies: &self.proxies,
            escrows: &self.escrows,
            managers: &self.managers,
            chain_id: self.chain_id,
        };
        let decoded = decode_logs(&logs, from, to, &watched)?;
        if decoded.block_hashes.get(&to).is_some_and(|h| *h != after.hash) {
            return Ok(StepOutcome::ChainMoved);
        }

        let every = every_marker(&every_logs, from, to, &decoded.block_hashes)?;
        let read_transfers = decoded.transfers.len();
        let (batch, transfers_skipped) = self.build_batch(from, to, decoded, &every, after).await?;
        let read_seconds = read_started.elapsed().as_secs_f64();
        let counts = (read_transfers, batch.authorizations.len(), batch.payments.len());
        // At the head (a live step, or a backfill's last range), how far `paid` lags it.
        let paid_lag_secs = if to == head {
            self.paid_lag_secs(head, Some(after), final_block, final_header)
                .await?
        } else {
            None
        };
        let commit_started = Instant::now();
        let committed = self
            .store
            .commit_batch(
                &self.network,
                &group,
                &batch,
                &self.head_update(head, final_block, paid_lag_secs),
            )
            .await?;
        let commit_seconds = commit_started.elapsed().as_secs_f64();
        self.metrics.batch_read(read_seconds);
        self.metrics.batch_commit(commit_seconds);
        self.metrics.rows(RowKind::Transfer, committed.transfers_kept);
        let transfers_skipped = transfers_skipped + committed.transfers_skipped;
        self.metrics.transfers_skipped(transfers_skipped);
        self.metrics.transfers_pruned(committed.transfers_pruned);
        self.metrics.rows(RowKind::Authorization, counts.1);
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
        Ok(StepOutcome::Committed {
            from,
            to,
            head,
            logs: (counts.0 + counts.1) as u64,
        })
    }

    /// The bloom check: the blocks of `from..=to` that neither read returned a log for,
    /// whose headers' blooms say they may hold one, are read again from their receipts;
    /// what the node left out is added to `logs` and `every_logs`, in chain order.
    async fn recover_silent_blocks(
        &self,
        from: u64,
        to: u64,
        reads: &RangeReads<'_>,
        logs: &mut Vec<Log>,
        every_logs: &mut Vec<Log>,
    ) -> Result<(), StepError> {
        let returned: HashSet<u64> = logs
            .iter()
            .chain(every_logs.iter())
            .filter_map(|l| l.block_number)
            .collect();
        let silent: Vec<u64> = (from..=to).filter(|b| !returned.contains(b)).collect();
        let found = recover(&self.rpc, &silent, reads).await?;
        self.metrics.bloom_receipt_reads(found.receipts_read);
        let left_out = found.watched.len() + found.settlements.len();
        if left_out > 0 {
            self.metrics.rpc_disagreements("primary", left_out);
            tracing::warn!(
                network = %self.network, from, to, left_out, endpoint = self.rpc.endpoint(),
                "the RPC provider's eth_getLogs left out logs its blocks' receipts hold (bloom check); taken from the receipts"
            );
            logs.extend(found.watched);
            every_logs.extend(found.settlements);
            logs.sort_by_key(|log| (log.block_number, log.log_index));
            every_logs.sort_by_key(|log| (log.block_number, log.log_index));
        }
        Ok(())
    }

    /// The logs of one query after cross-checking the primary's answer with the
    /// verifier's; `None` when the two are on different forks (read again).
    async fn cross_checked(
        &self,
        from: u64,
        to: u64,
        primary: Vec<Log>,
        verified: Vec<Log>,
    ) -> Result<Option<Vec<Log>>, StepError> {
        let Some(verifier) = &self.verifier else {
            return Ok(Some(primary));
        };
        let checked: CrossChecked = cross_check(&self.rpc, verifier, primary, verified).await?;
        if checked.chain_moved {
            tracing::info!(network = %self.network, from, to, "the providers are on different forks; reading again");
            return Ok(None);
        }
        for (role, endpoint, omitted, invented) in [
            (
                "primary",
                self.rpc.endpoint(),
                checked.primary_omitted,
                checked.primary_invented,
            ),
            (
                "verifier",
                verifier.endpoint(),
                checked.verifier_omitted,
                checked.verifier_invented,
            ),
        ] {
            if omitted + invented > 0 {
                self.metrics.rpc_disagreements(role, omitted + invented);
                tracing::warn!(
                    network = %self.network, from, to, role, endpoint, omitted, invented,
                    "an RPC provider left logs out of eth_getLogs or made some up; settled by receipts"
                );
            }
        }
        Ok(Some(checked.logs))
    }

    async fn retry_smaller(&mut self) -> Result<StepOutcome, StepError> {
        Box::pin(self.step()).await
    }

    fn head_update(&self, head: u64, final_block: Option<u64>, paid_lag_secs: Option<u64>) -> HeadUpdate {
        HeadUpdate {
            head,
            final_block,
            refund_window_secs: i64::try_from(self.config.refund_window.as_secs()).unwrap_or(i64::MAX),
            paid_lag_secs,
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
                None => self.rpc.header(BlockNumberOrTag::Number(number)).await,
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
            FinalityRule::Confirmations(_) => {
                return Ok((self.config.finality.final_block(head, None), None));
            }
            FinalityRule::Finalized => BlockNumberOrTag::Finalized,
            FinalityRule::Safe => BlockNumberOrTag::Safe,
        };
        match self.rpc.header(tag).await {
            Ok(header) => Ok((
                self.config.finality.final_block(head, Some(header.number)),
                Some(header),
            )),
            Err(RpcFault::UnknownBlock(_)) => Ok((None, None)),
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
        decoded: DecodedLogs,
        every: &EveryMarker,
        last: BlockHeader,
    ) -> Result<(Batch, usize), StepError> {
        let mut payments = pair_payments(&decoded.authorizations, &decoded.transfers, &every.authorizations)
            .map_err(BadAnswer::from)?;
        let mut through_proxies = pair_proxy_settlements(
            &decoded.settlements,
            &decoded.transfers,
            &payments,
            &every.authorizations,
            &every.settlements,
        )
        .map_err(BadAnswer::from)?;
        self.read_settle_calls(&mut through_proxies, &decoded.settlements)
            .await?;
        payments.extend(through_proxies);
        let mut redemptions = decoded.redemptions;
        self.read_executions(&mut redemptions, &decoded.transfers, &payments)
            .await?;
        let delegated =
            pair_redemptions(&redemptions, &decoded.transfers, &payments, every).map_err(BadAnswer::from)?;
        payments.extend(delegated);
        payments.retain(|p| !is_collection(p, &decoded.escrow_events, &decoded.escrow_terms));
        payments.extend(escrow_payments(
            &decoded.escrow_events,
            &decoded.escrow_terms,
            &decoded.authorizations,
        ));
        payments.sort_by_key(|p| (p.transfer.block_number, p.transfer.event_index));
        let mut escrow_events = decoded.escrow_events;
        // Of the transfers read, only those that moved a payment's money or can refund one
        // are kept (the store applies the same rule when it commits).
        let triage = TransferTriage::new(&decoded.transfers, &payments);
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
                self.rpc.header(BlockNumberOrTag::Number(number)).await?
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

    /// Fills in each proxy payment's nonce (and upto's signed maximum) from its settling
    /// call, checked against what the logs say; where the call cannot be read (the proxy
    /// was called through another contract and the node serves no traces) they stay `None`.
    async fn read_settle_calls(
        &self,
        payments: &mut [PaymentRecord],
        settlements: &[ProxySettlementRecord],
    ) -> Result<(), StepError> {
        let mut payments_of: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, payment) in payments.iter().enumerate() {
            payments_of.entry(payment.payment_id.clone()).or_default().push(i);
        }
        let inputs = self
            .transaction_inputs(payments.iter().map(|p| &p.transfer))
            .await?;
        // A direct call to a proxy is its own input; a call through another contract needs
        // the transaction's trace: several in flight.
        let read: Vec<(String, Option<Vec<SettleCall>>)> = futures::stream::iter(inputs)
            .map(|(tx, hash, to, input)| async move {
                let calls = self.settle_calls_of(hash, to, &input).await?;
                Ok::<_, StepError>((tx, calls))
            })
            .buffered(SETTLE_CALLS_IN_FLIGHT)
            .try_collect()
            .await?;
        let mut settlements_of: HashMap<&str, Vec<&ProxySettlementRecord>> = HashMap::new();
        for settlement in settlements {
            settlements_of
                .entry(settlement.position.tx_id.as_str())
                .or_default()
                .push(settlement);
        }
        for (tx, calls) in read {
            let mismatch = |detail: String| BadAnswer::SettleCallMismatch {
                tx: tx.clone(),
                detail,
            };
            let Some(calls) = calls else {
                continue;
            };
            let mut of_tx = settlements_of.remove(tx.as_str()).unwrap_or_default();
            of_tx.sort_by_key(|s| s.position.event_index);
            for (proxy, _) in &self.proxies {
                let proxy_hex = lower_hex(proxy);
                let logs = of_tx.iter().filter(|s| s.proxy == proxy_hex).count();
                let called = calls.iter().filter(|c| c.proxy == *proxy).count();
                if logs != called {
                    return Err(mismatch(format!(
                        "proxy {proxy_hex} logged {logs} settlements but {called} settling calls took effect"
                    ))
                    .into());
                }
            }
            for &i in payments_of.get(&tx).into_iter().flatten() {
                let payment = &mut payments[i];
                let log_index = payment.transfer.event_index + 1;
                let settlement = of_tx
                    .iter()
                    .find(|s| s.position.event_index == log_index)
                    .ok_or_else(|| mismatch(format!("no settlement log at index {log_index}")))?;
                let nth = of_tx
                    .iter()
                    .filter(|s| s.proxy == settlement.proxy && s.position.event_index < log_index)
                    .count();
                let call = calls
                    .iter()
                    .filter(|c| lower_hex(c.proxy) == settlement.proxy)
                    .nth(nth)
                    .ok_or_else(|| mismatch(format!("no settling call for the log at index {log_index}")))?;
                check_call(call, payment).map_err(mismatch)?;
                payment.nonce = Some(call.nonce.to_string());
                payment.max_amount = call.max_amount;
            }
        }
        Ok(())
    }

    /// The id, hash, recipient and input of each transaction of `events`: read block by
    /// block (`eth_getBlockByNumber` with full transactions) where a block holds at least
    /// [`BLOCK_READ_FROM`] of them, one by one (`eth_getTransactionByHash`) elsewhere, so a
    /// busy block costs one call and a lone payment no block body.
    async fn transaction_inputs(
        &self,
        events: impl Iterator<Item = &EventPosition>,
    ) -> Result<Vec<(String, B256, Option<Address>, Bytes)>, StepError> {
        let mut by_block: BTreeMap<u64, (String, BTreeSet<B256>)> = BTreeMap::new();
        for event in events {
            let hash: B256 = event.tx_id.parse().map_err(|_| BadAnswer::SettleCallMismatch {
                tx: event.tx_id.clone(),
                detail: "the transaction id is not a hash".to_string(),
            })?;
            by_block
                .entry(event.block_number)
                .or_insert_with(|| (event.block_hash.clone(), BTreeSet::new()))
                .1
                .insert(hash);
        }
        let (whole, single): (Vec<_>, Vec<_>) = by_block
            .into_iter()
            .partition(|(_, (_, txs))| txs.len() >= BLOCK_READ_FROM);
        let blocks: Vec<Vec<_>> = futures::stream::iter(whole)
            .map(|(number, (block_hash, wanted))| async move {
                let (hash, calls) = self.rpc.block_calls(number).await?;
                if lower_hex(hash) != block_hash {
                    return Err(BadAnswer::InconsistentBlockHash(number).into());
                }
                let found: Vec<_> = calls
                    .into_iter()
                    .filter(|(tx, _, _)| wanted.contains(tx))
                    .map(|(tx, to, input)| (lower_hex(tx), tx, to, input))
                    .collect();
                if found.len() != wanted.len() {
                    let missing = wanted.iter().find(|tx| !found.iter().any(|f| f.1 == **tx));
                    return Err(
                        BadAnswer::UnknownTransaction(missing.map(lower_hex).unwrap_or_default()).into(),
                    );
                }
                Ok::<_, StepError>(found)
            })
            .buffered(SETTLE_CALLS_IN_FLIGHT)
            .try_collect()
            .await?;
        let mut inputs: Vec<_> = blocks.into_iter().flatten().collect();
        let hashes: Vec<B256> = single.into_iter().flat_map(|(_, (_, txs))| txs).collect();
        let one_by_one: Vec<_> = futures::stream::iter(hashes)
            .map(|hash| async move {
                let (to, input) = self
                    .rpc
                    .transaction_call(hash)
                    .await?
                    .ok_or_else(|| BadAnswer::UnknownTransaction(lower_hex(hash)))?;
                Ok::<_, StepError>((lower_hex(hash), hash, to, input))
            })
            .buffered(SETTLE_CALLS_IN_FLIGHT)
            .try_collect()
            .await?;
        inputs.extend(one_by_one);
        Ok(inputs)
    }

    /// The settling calls of proxies in transaction `hash`: its input when it calls a
    /// proxy, otherwise its call trace; `None` when the node serves no traces.
    async fn settle_calls_of(
        &self,
        hash: B256,
        to: Option<Address>,
        input: &[u8],
    ) -> Result<Option<Vec<SettleCall>>, StepError> {
        if let Some((proxy, method)) = self.proxies.iter().find(|(proxy, _)| Some(*proxy) == to)
            && let Some(call) = decode_settle_call(*proxy, *method, input)
        {
            return Ok(Some(vec![call]));
        }
        match self.rpc.call_trace(hash).await {
            Ok(trace) => Ok(Some(settle_calls_in(&trace, &self.proxies))),
            Err(RpcFault::Unsupported(reason)) => {
                tracing::info!(
                    network = %self.network, tx = %lower_hex(hash), %reason,
                    "a Permit2 proxy was called through another contract and the node serves no call traces: the payment is stored without its nonce"
                );
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Fills in what each redemption executed, from the redeeming calls of its transaction,
    /// checked against its logs (as many redemptions of each manager, by the same
    /// delegators). Only transactions where a redemption can pay are read: a watched-token
    /// transfer out of its delegator, before its logs, that no other rule paired. Where the
    /// calls cannot be read (a manager called through another contract, a node without
    /// traces) the redemptions stay `Unread` and the logs alone decide.
    async fn read_executions(
        &self,
        redemptions: &mut [RedemptionRecord],
        transfers: &[TransferRecord],
        taken: &[PaymentRecord],
    ) -> Result<(), StepError> {
        let mut positions: BTreeMap<&str, &EventPosition> = BTreeMap::new();
        for redemption in redemptions_that_may_pay(redemptions, transfers, taken) {
            positions.insert(&redemption.position.tx_id, &redemption.position);
        }
        if positions.is_empty() {
            return Ok(());
        }
        let inputs = self.transaction_inputs(positions.into_values()).await?;
        let read: Vec<(String, Option<Vec<RedeemCall>>)> = futures::stream::iter(inputs)
            .map(|(tx, hash, to, input)| async move {
                let calls = self.redeem_calls_of(hash, to, &input).await?;
                Ok::<_, StepError>((tx, calls))
            })
            .buffered(SETTLE_CALLS_IN_FLIGHT)
            .try_collect()
            .await?;
        for (tx, calls) in read {
            let Some(calls) = calls else {
                continue;
            };
            let mismatch = |detail: String| BadAnswer::SettleCallMismatch {
                tx: tx.clone(),
                detail,
            };
            for manager in &self.managers {
                let manager_hex = lower_hex(manager);
                let executed: Vec<_> = calls
                    .iter()
                    .filter(|c| c.manager == *manager)
                    .flat_map(|c| c.redemptions.iter())
                    .collect();
                let mut of_tx: Vec<&mut RedemptionRecord> = redemptions
                    .iter_mut()
                    .filter(|r| r.position.tx_id == tx && r.manager == manager_hex)
                    .collect();
                of_tx.sort_by_key(|r| r.position.event_index);
                if of_tx.len() != executed.len() {
                    return Err(mismatch(format!(
                        "manager {manager_hex} logged {} redemptions but {} redeeming executions took effect",
                        of_tx.len(),
                        executed.len()
                    ))
                    .into());
                }
                for (redemption, (delegator, execution)) in of_tx.into_iter().zip(executed) {
                    if lower_hex(delegator) != redemption.delegator {
                        return Err(mismatch(format!(
                            "the call redeems for {}, the log at index {} for {}",
                            lower_hex(delegator),
                            redemption.position.event_index,
                            redemption.delegator
                        ))
                        .into());
                    }
                    redemption.execution = execution.clone();
                }
            }
        }
        Ok(())
    }

    /// The redeeming calls of delegation managers in transaction `hash`: its input when it
    /// calls a manager, otherwise its call trace; `None` when the node serves no traces.
    async fn redeem_calls_of(
        &self,
        hash: B256,
        to: Option<Address>,
        input: &[u8],
    ) -> Result<Option<Vec<RedeemCall>>, StepError> {
        if let Some(manager) = to.filter(|to| self.managers.contains(to))
            && let Some(call) = decode_redeem_call(manager, input)
        {
            return Ok(Some(vec![call]));
        }
        match self.rpc.call_trace(hash).await {
            Ok(trace) => Ok(Some(redeem_calls_in(&trace, &self.managers))),
            Err(RpcFault::Unsupported(reason)) => {
                tracing::info!(
                    network = %self.network, tx = %lower_hex(hash), %reason,
                    "a delegation manager was called through another contract and the node serves no call traces: its redemptions are paired by their logs alone"
                );
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
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

/// Whether a settling call says what the payment's logs say; if not, what differs.
fn check_call(call: &SettleCall, payment: &PaymentRecord) -> Result<(), String> {
    let facts = [
        ("token", lower_hex(call.token), &payment.asset),
        ("owner", lower_hex(call.owner), &payment.payer),
        ("recipient", lower_hex(call.to), &payment.pay_to),
        ("amount", call.amount.to_string(), &payment.amount.to_string()),
    ];
    match facts.iter().find(|(_, called, logged)| called != *logged) {
        Some((fact, called, logged)) => Err(format!("the call's {fact} is {called}, the logs' {logged}")),
        None => Ok(()),
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
