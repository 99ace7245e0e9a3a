//! Reading ranges of blocks: each range's logs between two reads of its last header,
//! checked (cross-checked, bloom-checked) and paired into payments with what their
//! transactions called — everything of a step that asks the node and not the store — in
//! spawned tasks, several at once while the blocks are final, handed back in chain order
//! for the worker to commit.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::{Address, B256};
use alloy::rpc::types::Log;
use futures::{StreamExt, TryStreamExt};
use paywatch_chain::ChainMetrics;
use paywatch_core::PaymentMethod;
use paywatch_core::config::NetworkConfig;
use paywatch_core::escrow::{escrow_payments, is_collection};
use paywatch_core::ids::lower_hex;
use paywatch_core::matching::{
    pair_payments, pair_proxy_settlements, pair_redemptions, redemptions_that_may_pay,
};
use paywatch_core::records::{
    EventPosition, PaymentRecord, ProxySettlementRecord, RedemptionRecord, TransferRecord,
};
use tokio::task::JoinSet;

use super::{EvmWorker, StepError};
use crate::bloom::{from_receipts, recover};
use crate::decode::{BadAnswer, DecodedLogs, Watched, decode_logs, every_marker};
use crate::reads::RangeReads;
use crate::rpc::{BlockHeader, EvmRpc, RpcFault, TRANSACTIONS_PER_BATCH, TransactionCall};
use crate::settle_calls::{
    RedeemCall, SettleCall, decode_redeem_call, decode_settle_call, redeem_calls_in, settle_calls_in,
};
use crate::verify::{CrossChecked, cross_check};

/// Transactions whose settling calls are read at once.
const SETTLE_CALLS_IN_FLIGHT: usize = 16;

/// The calls of a range's transactions read so far, by transaction id: the settling-call,
/// redemption and facilitator readers share them, so no transaction is read twice.
type TransactionCalls = HashMap<String, TransactionCall>;

/// JSON-RPC batches of payment transactions read at once.
const BATCHES_IN_FLIGHT: usize = 4;

/// Ranges one step reads, per range in flight: the pipeline drains at the end of a step, so
/// a step spans several of its depths.
const RANGES_PER_STEP: usize = 8;

/// Logs held in memory by the ranges of one step, at most (as far as the density of the
/// ranges read so far predicts): a range holds no more than this many logs, and reading
/// ahead never costs more memory than one such range.
const LOGS_IN_FLIGHT: f64 = 20_000.0;

/// Blocks of the first range, read while the chain's density is unknown: on a busy token a
/// full `max_block_range` could hold a million logs in one answer.
const FIRST_RANGE_BLOCKS: u64 = 10;

/// How many times the blocks of the last range committed the next range may span: ranges
/// grow step by step, read one at a time while they grow, so a sparse stretch (a token's
/// first blocks) followed by a dense one costs one range of at most this many times the
/// last one's blocks at the new density, not a whole `max_block_range` of it.
const GROWTH: u64 = 2;

/// What the last range committed showed of the chain.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct LastRange {
    /// The blocks it spanned.
    pub blocks: u64,
    /// The logs it held per block, on average.
    pub logs_per_block: f64,
}

impl LastRange {
    /// How many blocks of this density hold at most [`LOGS_IN_FLIGHT`] logs (at least
    /// one); `None` on an empty chain, where any number does.
    fn blocks_that_fit(&self) -> Option<u64> {
        // (`as` saturates a float beyond u64.)
        (self.logs_per_block > 0.0).then(|| (LOGS_IN_FLIGHT / self.logs_per_block).floor().max(1.0) as u64)
    }
}

/// How reading one range ended.
pub(super) enum RangeRead {
    /// Read, checked and paired: ready to commit.
    Read(Box<ReadRange>),
    /// The node refused the range as too large (or timed out on it).
    Refused(RpcFault),
    /// The chain moved under the read: its last header changed, or a log's block hash is
    /// not the header's.
    ChainMoved,
}

/// What reading a range needs, cheap to clone into each range's task.
#[derive(Clone)]
pub(super) struct RangeReader {
    pub network: String,
    pub metrics: ChainMetrics,
    pub rpc: Arc<EvmRpc>,
    /// The independent provider every range is cross-checked with, when configured.
    pub verifier: Option<Arc<EvmRpc>>,
    pub bloom_check: bool,
    /// Read every block's logs from its receipts instead of `eth_getLogs` (audits without
    /// a verifier).
    pub from_receipts: bool,
    pub proxies: Arc<[(Address, PaymentMethod)]>,
    pub escrows: Arc<[Address]>,
    /// ERC-7710 delegation managers.
    pub managers: Arc<[Address]>,
    /// The sellers' wallets (`pay_to`): when any, only transfers into or out of them are
    /// asked for.
    pub pay_to: Arc<[Address]>,
    /// The facilitators' senders: when any, each payment transaction's sender is read and
    /// a payment sent by one of them carries it.
    pub facilitators: Arc<[Address]>,
    pub chain_id: u64,
}

impl RangeReader {
    /// The reader of `config`'s network through `rpc`, without a verifier.
    pub(super) fn new(config: &NetworkConfig, rpc: EvmRpc) -> Self {
        Self {
            network: config.id.to_string(),
            metrics: ChainMetrics::new(&config.id.to_string()),
            rpc: Arc::new(rpc),
            verifier: None,
            bloom_check: config.bloom_check,
            from_receipts: false,
            proxies: config
                .permit2_proxies
                .iter()
                .map(|p| (p.address, p.method))
                .collect(),
            escrows: config.escrows.iter().copied().collect(),
            managers: config.delegation_managers.iter().copied().collect(),
            pay_to: config.pay_to.iter().filter_map(|w| w.evm()).collect(),
            facilitators: config
                .facilitators
                .iter()
                .filter_map(|f| f.parse().ok())
                .collect(),
            chain_id: config.id.evm_chain_id().unwrap_or_default(),
        }
    }
}

/// The ranges of a step, read in spawned tasks — at most `in_flight` at once, in chain
/// order of launch — and handed back in chain order. Dropping it aborts the reads left.
pub(super) struct Pipeline {
    reader: RangeReader,
    tokens: Arc<[Address]>,
    ranges: Vec<(u64, u64)>,
    tasks: JoinSet<(usize, Result<RangeRead, StepError>)>,
    finished: BTreeMap<usize, Result<RangeRead, StepError>>,
    launched: usize,
    handed: usize,
}

impl Pipeline {
    /// Starts reading `ranges` of `tokens`, `in_flight` at a time.
    pub(super) fn start(
        reader: RangeReader,
        tokens: Arc<[Address]>,
        ranges: Vec<(u64, u64)>,
        in_flight: usize,
    ) -> Self {
        let mut pipeline = Self {
            reader,
            tokens,
            ranges,
            tasks: JoinSet::new(),
            finished: BTreeMap::new(),
            launched: 0,
            handed: 0,
        };
        // Each range handed back launches the next: `in_flight` stay in flight.
        for _ in 0..in_flight.max(1) {
            pipeline.launch();
        }
        pipeline
    }

    fn launch(&mut self) {
        let Some(&(from, to)) = self.ranges.get(self.launched) else {
            return;
        };
        let (index, reader, tokens) = (self.launched, self.reader.clone(), self.tokens.clone());
        self.tasks
            .spawn(async move { (index, reader.read_range(from, to, &tokens).await) });
        self.launched += 1;
    }

    /// The next range in chain order if it is already read and follows the block `last`
    /// (its `joins`): a range the worker can commit together with the one ending at
    /// `last`. Anything else stays for [`Pipeline::next`].
    pub(super) fn next_following(&mut self, last: &BlockHeader) -> Option<ReadRange> {
        while let Some(Ok((index, read))) = self.tasks.try_join_next() {
            self.finished.insert(index, read);
        }
        let follows = matches!(
            self.finished.get(&self.handed),
            Some(Ok(RangeRead::Read(range))) if range.joins == Some(last.hash)
        );
        if !follows {
            return None;
        }
        match self.hand_out()? {
            (_, Ok(RangeRead::Read(range))) => Some(*range),
            _ => None,
        }
    }

    /// The next range in chain order and how reading it ended; `None` when every range
    /// was handed back (or a read task died: the step ends there and the next reads on).
    pub(super) async fn next(&mut self) -> Option<((u64, u64), Result<RangeRead, StepError>)> {
        loop {
            if let Some(handed) = self.hand_out() {
                return Some(handed);
            }
            match self.tasks.join_next().await? {
                Ok((index, read)) => {
                    self.finished.insert(index, read);
                }
                Err(error) => {
                    tracing::error!(network = %self.reader.network, %error, "a range read task failed");
                    return None;
                }
            }
        }
    }

    /// The next range in chain order, if its read has finished, launching the next read.
    fn hand_out(&mut self) -> Option<((u64, u64), Result<RangeRead, StepError>)> {
        let read = self.finished.remove(&self.handed)?;
        let range = self.ranges[self.handed];
        self.handed += 1;
        self.launch();
        Some((range, read))
    }
}

/// One range read from the node and paired, waiting for its commit.
pub(super) struct ReadRange {
    /// First block.
    pub from: u64,
    /// Last block.
    pub to: u64,
    /// The last block's header, read after the logs.
    pub last: BlockHeader,
    /// The hash of the block before `from`, read with `last`: the range follows the one
    /// before it only if that one's last block is this.
    pub joins: Option<B256>,
    /// The decoded logs; their redemptions are paired into `payments`.
    pub decoded: DecodedLogs,
    /// The payments of the range, by every method, in chain order.
    pub payments: Vec<PaymentRecord>,
    /// Logs the node returned (for the density that bounds the next step's ranges).
    pub logs_read: usize,
    /// How long the read took.
    pub read_seconds: f64,
}

impl ReadRange {
    /// This range and `next`, which follows it, as one range (committed at once): their
    /// logs and payments in chain order, this range's last block kept among the blocks.
    pub(super) fn followed_by(mut self, next: Self) -> Self {
        let (decoded, more) = (&mut self.decoded, next.decoded);
        decoded.block_hashes.insert(self.last.number, self.last.hash);
        decoded.block_hashes.extend(more.block_hashes);
        decoded.transfers.extend(more.transfers);
        decoded.authorizations.extend(more.authorizations);
        decoded.settlements.extend(more.settlements);
        decoded.escrow_events.extend(more.escrow_events);
        decoded.escrow_terms.extend(more.escrow_terms);
        decoded.redemptions.extend(more.redemptions);
        self.payments.extend(next.payments);
        Self {
            to: next.to,
            last: next.last,
            logs_read: self.logs_read + next.logs_read,
            read_seconds: self.read_seconds.max(next.read_seconds),
            ..self
        }
    }
}

impl EvmWorker {
    /// The ranges of one step from `from` up to `last` ([`plan`]), each of as many blocks
    /// as the density of the last range committed allows, and how many to read at once.
    pub(super) fn ranges_from(
        &self,
        from: u64,
        last: u64,
        final_block: Option<u64>,
    ) -> (Vec<(u64, u64)>, usize) {
        let blocks = blocks_per_range(self.last_range, self.range);
        let at_once = ranges_at_once(self.last_range, blocks, self.config.ranges_in_flight);
        // Until a range shows how dense the chain is, a step reads that one range.
        let count = match self.last_range {
            Some(_) => at_once * RANGES_PER_STEP,
            None => 1,
        };
        let ranges = plan(from, last, final_block, blocks, count);
        (ranges, at_once)
    }
}

impl RangeReader {
    /// Reads `from..=to` for the watched `tokens` (the step's group): the logs between two
    /// reads of the last header, cross-checked with the verifier and bloom-checked when
    /// configured, decoded and paired with what their transactions called.
    pub(super) async fn read_range(
        &self,
        from: u64,
        to: u64,
        tokens: &[Address],
    ) -> Result<RangeRead, StepError> {
        let started = Instant::now();
        let before = self.rpc.header(BlockNumberOrTag::Number(to)).await?;
        let reads = RangeReads {
            tokens,
            escrows: &self.escrows,
            pay_to: &self.pay_to,
        };
        let verifier_reads = async {
            match &self.verifier {
                Some(verifier) => Some(reads.read(verifier, from, to).await),
                None => None,
            }
        };
        let primary_reads = async {
            if !self.from_receipts {
                return reads.read(&self.rpc, from, to).await;
            }
            let blocks: Vec<u64> = (from..=to).collect();
            match from_receipts(&self.rpc, &blocks, &reads).await {
                Ok(found) => (Ok(found.watched), Ok(found.settlements)),
                Err(fault) => (Err(fault.clone()), Err(fault)),
            }
        };
        let ((read, read_every), verifier_read) = tokio::join!(primary_reads, verifier_reads);
        // Settlement logs (authorizations, the Permit2 proxies' `Settled`) are read by topic
        // alone, of every contract: a payment's number counts every settlement log of its
        // transaction, watched contract or not.
        let mut answers = vec![read, read_every];
        answers.extend(
            verifier_read
                .into_iter()
                .flat_map(|(verified, every)| [verified, every]),
        );
        let mut answers = match accepted(answers)? {
            Ok(answers) => answers.into_iter(),
            Err(fault) => return Ok(RangeRead::Refused(fault)),
        };
        let (mut logs, mut every_logs) = (
            answers.next().unwrap_or_default(),
            answers.next().unwrap_or_default(),
        );
        if let (Some(verified), Some(verified_every)) = (answers.next(), answers.next()) {
            let Some(checked) = self.cross_checked(from, to, logs, verified).await? else {
                return Ok(RangeRead::ChainMoved);
            };
            logs = checked;
            let Some(checked) = self.cross_checked(from, to, every_logs, verified_every).await? else {
                return Ok(RangeRead::ChainMoved);
            };
            every_logs = checked;
        }
        if self.bloom_check {
            self.recover_silent_blocks(from, to, &reads, &mut logs, &mut every_logs)
                .await?;
        }
        let logs_read = logs.len() + every_logs.len();
        logs.extend(
            every_logs
                .iter()
                .filter(|log| {
                    tokens.contains(&log.address())
                        || self.proxies.iter().any(|(proxy, _)| *proxy == log.address())
                        || self.managers.contains(&log.address())
                })
                .cloned(),
        );
        let joins = async {
            match from.checked_sub(1) {
                Some(parent) => self
                    .rpc
                    .header(BlockNumberOrTag::Number(parent))
                    .await
                    .map(|h| Some(h.hash)),
                None => Ok(None),
            }
        };
        let (last, joins) = tokio::try_join!(self.rpc.header(BlockNumberOrTag::Number(to)), joins)?;
        if before.hash != last.hash {
            tracing::info!(network = %self.network, block = to, "chain moved during the read; reading again");
            return Ok(RangeRead::ChainMoved);
        }
        let watched = Watched {
            tokens,
            proxies: &self.proxies,
            escrows: &self.escrows,
            managers: &self.managers,
            chain_id: self.chain_id,
        };
        let mut decoded = decode_logs(&logs, from, to, &watched)?;
        if decoded.block_hashes.get(&to).is_some_and(|h| *h != last.hash) {
            return Ok(RangeRead::ChainMoved);
        }
        self.check_log_blocks(&decoded.block_hashes, &every_logs, &last)
            .await?;
        let payments = self.pair(&mut decoded, &every_logs, from, to).await?;
        Ok(RangeRead::Read(Box::new(ReadRange {
            from,
            to,
            last,
            joins,
            decoded,
            payments,
            logs_read,
            read_seconds: started.elapsed().as_secs_f64(),
        })))
    }

    /// Holds the block hash every log read names to its block's header: a log in a block
    /// the chain does not have (a provider's made-up copy of another block's logs) is
    /// refused, and the step reads the range again after its backoff. The range's last
    /// block is held to `last`, read around the logs; the others' headers are read in
    /// JSON-RPC batches.
    async fn check_log_blocks(
        &self,
        watched: &HashMap<u64, B256>,
        every_logs: &[Log],
        last: &BlockHeader,
    ) -> Result<(), StepError> {
        let mut named: BTreeMap<u64, B256> = watched.iter().map(|(n, h)| (*n, *h)).collect();
        for log in every_logs {
            if let (Some(number), Some(hash)) = (log.block_number, log.block_hash)
                && *named.entry(number).or_insert(hash) != hash
            {
                return Err(BadAnswer::InconsistentBlockHash(number).into());
            }
        }
        let unread: Vec<u64> = named.keys().copied().filter(|n| *n != last.number).collect();
        let read: Vec<Vec<BlockHeader>> =
            futures::stream::iter(unread.chunks(TRANSACTIONS_PER_BATCH).map(<[_]>::to_vec))
                .map(|numbers| async move { self.rpc.headers(&numbers).await })
                .buffered(BATCHES_IN_FLIGHT)
                .try_collect()
                .await?;
        let headers = unread
            .iter()
            .zip(read.iter().flatten())
            .chain(std::iter::once((&last.number, last)));
        for (number, header) in headers {
            let Some(named) = named.get(number) else {
                continue;
            };
            if header.number != *number || header.hash != *named {
                tracing::warn!(
                    network = %self.network, endpoint = %self.rpc.endpoint(), block = number,
                    log_block_hash = %named, header_block_hash = %header.hash,
                    "the RPC provider returned logs naming a block hash its block's header does not have; refused, reading again"
                );
                return Err(BadAnswer::ForeignBlock {
                    block: *number,
                    named: lower_hex(named),
                    header: lower_hex(header.hash),
                }
                .into());
            }
        }
        Ok(())
    }

    /// The payments of a range's decoded logs, by every method, in chain order: the
    /// Permit2 proxies' settlements completed from their settling calls, the redemptions
    /// from what they executed (moved out of `decoded`), and escrowed payments in place of
    /// the collections that moved their money.
    async fn pair(
        &self,
        decoded: &mut DecodedLogs,
        every_logs: &[Log],
        from: u64,
        to: u64,
    ) -> Result<Vec<PaymentRecord>, StepError> {
        let every = every_marker(every_logs, from, to, &decoded.block_hashes)?;
        let mut calls = TransactionCalls::default();
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
        self.read_settle_calls(&mut through_proxies, &decoded.settlements, &mut calls)
            .await?;
        payments.extend(through_proxies);
        let mut redemptions = std::mem::take(&mut decoded.redemptions);
        self.read_executions(&mut redemptions, &decoded.transfers, &payments, &mut calls)
            .await?;
        let delegated =
            pair_redemptions(&redemptions, &decoded.transfers, &payments, &every).map_err(BadAnswer::from)?;
        payments.extend(delegated);
        payments.retain(|p| !is_collection(p, &decoded.escrow_events, &decoded.escrow_terms));
        payments.extend(escrow_payments(
            &decoded.escrow_events,
            &decoded.escrow_terms,
            &decoded.authorizations,
        ));
        payments.sort_by_key(|p| (p.transfer.block_number, p.transfer.event_index));
        self.name_facilitators(&mut payments, &mut calls).await?;
        Ok(payments)
    }

    /// With facilitators configured, reads the sender of each payment's transaction (unless
    /// `calls` holds it already) and names it as the payment's `facilitator` when it is one
    /// of them.
    async fn name_facilitators(
        &self,
        payments: &mut [PaymentRecord],
        calls: &mut TransactionCalls,
    ) -> Result<(), StepError> {
        if self.facilitators.is_empty() || payments.is_empty() {
            return Ok(());
        }
        let mut transactions: BTreeMap<String, &EventPosition> = BTreeMap::new();
        for payment in payments.iter() {
            transactions
                .entry(payment.transfer.tx_id.clone())
                .or_insert(&payment.transfer);
        }
        let senders: HashMap<String, Address> = self
            .transaction_inputs(transactions.into_values(), calls)
            .await?
            .into_iter()
            .map(|(tx, call)| (tx, call.from))
            .collect();
        for payment in payments.iter_mut() {
            payment.facilitator = senders
                .get(&payment.transfer.tx_id)
                .filter(|sender| self.facilitators.contains(sender))
                .map(lower_hex);
        }
        Ok(())
    }

    /// Fills in each proxy payment's nonce (and upto's signed maximum) from its settling
    /// call, checked against what the logs say; where the call cannot be read (the proxy
    /// was called through another contract and the node serves no traces) they stay `None`.
    async fn read_settle_calls(
        &self,
        payments: &mut [PaymentRecord],
        settlements: &[ProxySettlementRecord],
        calls: &mut TransactionCalls,
    ) -> Result<(), StepError> {
        let mut payments_of: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, payment) in payments.iter().enumerate() {
            payments_of.entry(payment.payment_id.clone()).or_default().push(i);
        }
        let inputs = self
            .transaction_inputs(payments.iter().map(|p| &p.transfer), calls)
            .await?;
        // A direct call to a proxy is its own input; a call through another contract needs
        // the transaction's trace: several in flight.
        let read: Vec<(String, Option<Vec<SettleCall>>)> = futures::stream::iter(inputs)
            .map(|(tx, call)| async move {
                let calls = self.settle_calls_of(call.hash, call.to, &call.input).await?;
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
            for (proxy, _) in self.proxies.iter() {
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

    /// The id and call (hash, sender, recipient, input) of each transaction of `events`,
    /// once each: from `calls` where a reader of the range read it already, else in
    /// JSON-RPC batches of `eth_getTransactionByHash` ([`TRANSACTIONS_PER_BATCH`] each,
    /// [`BATCHES_IN_FLIGHT`] at once), each checked to be in the event's block. A
    /// transaction costs the same whatever else its block holds: no block body is read.
    async fn transaction_inputs(
        &self,
        events: impl Iterator<Item = &EventPosition>,
        calls: &mut TransactionCalls,
    ) -> Result<Vec<(String, TransactionCall)>, StepError> {
        let mut wanted: BTreeSet<String> = BTreeSet::new();
        // Each unread transaction with the block its event is in: (hash, id, number, hash).
        let mut unread: Vec<(B256, String, u64, String)> = Vec::new();
        for event in events {
            if !wanted.insert(event.tx_id.clone()) || calls.contains_key(&event.tx_id) {
                continue;
            }
            let hash: B256 = event.tx_id.parse().map_err(|_| BadAnswer::SettleCallMismatch {
                tx: event.tx_id.clone(),
                detail: "the transaction id is not a hash".to_string(),
            })?;
            unread.push((
                hash,
                event.tx_id.clone(),
                event.block_number,
                event.block_hash.clone(),
            ));
        }
        let batches: Vec<Vec<(String, TransactionCall)>> =
            futures::stream::iter(unread.chunks(TRANSACTIONS_PER_BATCH).map(<[_]>::to_vec))
                .map(|batch| async move {
                    let hashes: Vec<B256> = batch.iter().map(|(hash, ..)| *hash).collect();
                    let found = self.rpc.transaction_calls(&hashes).await?;
                    batch
                        .into_iter()
                        .zip(found)
                        .map(|((hash, tx, block_number, block_hash), call)| {
                            let call = call.ok_or_else(|| BadAnswer::UnknownTransaction(tx.clone()))?;
                            if call.hash != hash || call.block_hash.map(lower_hex) != Some(block_hash) {
                                return Err(BadAnswer::InconsistentBlockHash(block_number).into());
                            }
                            Ok((tx, call))
                        })
                        .collect::<Result<Vec<_>, StepError>>()
                })
                .buffered(BATCHES_IN_FLIGHT)
                .try_collect()
                .await?;
        calls.extend(batches.into_iter().flatten());
        Ok(wanted
            .into_iter()
            .filter_map(|tx| calls.get(&tx).map(|call| (tx, call.clone())))
            .collect())
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
        calls: &mut TransactionCalls,
    ) -> Result<(), StepError> {
        let mut positions: BTreeMap<&str, &EventPosition> = BTreeMap::new();
        for redemption in redemptions_that_may_pay(redemptions, transfers, taken) {
            positions.insert(&redemption.position.tx_id, &redemption.position);
        }
        if positions.is_empty() {
            return Ok(());
        }
        let inputs = self.transaction_inputs(positions.into_values(), calls).await?;
        let read: Vec<(String, Option<Vec<RedeemCall>>)> = futures::stream::iter(inputs)
            .map(|(tx, call)| async move {
                let calls = self.redeem_calls_of(call.hash, call.to, &call.input).await?;
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
            for manager in self.managers.iter() {
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
}

/// Blocks per range: `range` (`max_block_range`, halved while the node refuses it), fewer
/// when the chain's density (logs per block of the last range committed) says a range
/// would hold more than [`LOGS_IN_FLIGHT`] logs, and at most [`GROWTH`] times the last
/// range's blocks; at most [`FIRST_RANGE_BLOCKS`] while the density is unknown.
fn blocks_per_range(last: Option<LastRange>, range: u64) -> u64 {
    let Some(last) = last else {
        return range.min(FIRST_RANGE_BLOCKS);
    };
    let grown = last.blocks.saturating_mul(GROWTH).max(FIRST_RANGE_BLOCKS);
    range.min(grown).min(last.blocks_that_fit().unwrap_or(u64::MAX))
}

/// How many ranges of `blocks` blocks to read at once: `ranges_in_flight`, fewer when the
/// chain's density (logs per block of the last range committed) says they would hold more
/// than [`LOGS_IN_FLIGHT`] logs; one while the density is unknown or the ranges are
/// larger than the last one (the density ahead is then a guess).
fn ranges_at_once(last: Option<LastRange>, blocks: u64, ranges_in_flight: usize) -> usize {
    let Some(last) = last.filter(|last| blocks <= last.blocks) else {
        return 1;
    };
    match last.blocks_that_fit() {
        None => ranges_in_flight,
        Some(fit) => {
            let ranges = usize::try_from(fit / blocks.max(1)).unwrap_or(usize::MAX);
            ranges_in_flight.min(ranges.max(1))
        }
    }
}

/// Up to `count` consecutive ranges of `range` blocks from `from`, none past `last`: the
/// first always, the others only when final (`final_block`): a final range cannot reorg
/// under a later one's commit.
fn plan(from: u64, last: u64, final_block: Option<u64>, range: u64, count: usize) -> Vec<(u64, u64)> {
    let end_of = |start: u64| last.min(start.saturating_add(range - 1));
    let mut ranges = vec![(from, end_of(from))];
    while ranges.len() < count {
        let start = ranges[ranges.len() - 1].1 + 1;
        let end = end_of(start);
        if start > last || final_block.is_none_or(|f| end > f) {
            break;
        }
        ranges.push((start, end));
    }
    ranges
}

/// `eth_getLogs` answers, in order; the first refusal of the range as too large (or a
/// timeout on it) apart: the step shrinks the range and reads again.
fn accepted(answers: Vec<Result<Vec<Log>, RpcFault>>) -> Result<Result<Vec<Vec<Log>>, RpcFault>, StepError> {
    let mut accepted = Vec::with_capacity(answers.len());
    for answer in answers {
        match answer {
            Ok(logs) => accepted.push(logs),
            Err(fault @ (RpcFault::RangeTooLarge(_) | RpcFault::Timeout(_))) => return Ok(Err(fault)),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Ok(accepted))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The last range committed: `blocks` blocks of `logs_per_block` logs each.
    fn last(blocks: u64, logs_per_block: f64) -> Option<LastRange> {
        Some(LastRange {
            blocks,
            logs_per_block,
        })
    }

    #[test]
    fn reads_one_range_until_the_chain_density_is_known_then_as_many_as_fit() {
        assert_eq!(ranges_at_once(None, 10, 8), 1);
        assert_eq!(ranges_at_once(last(10, 0.0), 10, 8), 8, "an empty chain");
        assert_eq!(
            ranges_at_once(last(10, 20.0), 10, 8),
            8,
            "200 logs a range: 8 fit"
        );
        assert_eq!(
            ranges_at_once(last(2_000, 30.0), 2_000, 8),
            1,
            "60,000 logs a range: one at a time"
        );
        assert_eq!(
            ranges_at_once(last(2_000, 2.0), 2_000, 8),
            5,
            "4,000 logs a range: 5 fit"
        );
        assert_eq!(
            ranges_at_once(last(10, 0.0), 20, 8),
            1,
            "ranges larger than the last: one at a time while they grow"
        );
    }

    #[test]
    fn a_range_holds_no_more_logs_than_fit_whatever_the_block_range() {
        assert_eq!(
            blocks_per_range(None, 1_000),
            10,
            "the density unknown: a short first range"
        );
        assert_eq!(blocks_per_range(None, 4), 4);
        assert_eq!(blocks_per_range(last(1_000, 0.0), 1_000), 1_000, "an empty chain");
        assert_eq!(
            blocks_per_range(last(1_000, 2.0), 1_000),
            1_000,
            "2,000 logs: the whole range"
        );
        assert_eq!(
            blocks_per_range(last(1_000, 960.0), 1_000),
            20,
            "a busy token, 960 logs a block: 20 blocks, 19,200 logs"
        );
        assert_eq!(
            blocks_per_range(last(1_000, 50_000.0), 1_000),
            1,
            "never less than a block"
        );
    }

    #[test]
    fn ranges_grow_step_by_step_after_a_sparse_stretch() {
        // A token's first blocks hold its deployment and a few mints: 10 blocks of 5 logs
        // would allow 4,000 blocks, which on a busy stretch after them would be one answer
        // of millions of logs. The next range is twice the last instead.
        assert_eq!(blocks_per_range(last(10, 5.0), 10_000), 20);
        assert_eq!(blocks_per_range(last(20, 5.0), 10_000), 40);
        assert_eq!(blocks_per_range(last(20, 960.0), 10_000), 20, "dense: by density");
        assert_eq!(
            blocks_per_range(last(3, 0.0), 10_000),
            10,
            "never below the first range"
        );
        assert_eq!(blocks_per_range(last(8_000, 0.0), 10_000), 10_000);
    }

    #[test]
    fn reads_ahead_only_over_final_blocks() {
        assert_eq!(
            plan(100, 1_000, Some(140), 10, 8),
            [(100, 109), (110, 119), (120, 129), (130, 139)],
            "(140..=149 is not final)"
        );
        assert_eq!(plan(100, 1_000, None, 10, 8), [(100, 109)], "nothing final");
        assert_eq!(
            plan(100, 1_000, Some(90), 10, 8),
            [(100, 109)],
            "the first range is read as before, final or not"
        );
        assert_eq!(
            plan(100, 125, Some(1_000), 10, 8),
            [(100, 109), (110, 119), (120, 125)],
            "none past the last block of the step"
        );
        assert_eq!(plan(100, 1_000, Some(1_000), 10, 2), [(100, 109), (110, 119)]);
        assert_eq!(plan(5, 5, Some(5), 10, 8), [(5, 5)]);
    }
}
