//! The bloom check, for a network read from one provider: a block for which `eth_getLogs`
//! returned nothing, but whose header's `logsBloom` says it may hold a log paywatch asks
//! for, is read again from its receipts (`eth_getBlockReceipts`). A node whose log index
//! left a whole block out is caught; a false positive of the bloom costs one receipts read.
//! A block that did return logs is not checked (a transaction left out of a block that
//! kept others is only caught by a verifier).

use alloy::eips::BlockId;
use alloy::primitives::{Address, B256, Bloom, BloomInput};
use alloy::rpc::types::Log;
use futures::{StreamExt, TryStreamExt};

use crate::rpc::{EvmRpc, RpcFault};

/// Headers or receipts read at once.
const IN_FLIGHT: usize = 16;

/// What the range's reads ask the node for, as predicates on one log: the same sets as
/// the `eth_getLogs` filters.
pub struct Wanted<'a> {
    /// The watched tokens.
    pub tokens: &'a [Address],
    /// The watched escrows.
    pub escrows: &'a [Address],
    /// `Transfer`'s topic.
    pub transfer: B256,
    /// The escrows' event topics.
    pub escrow_topics: &'a [B256],
    /// The sellers' wallets, when transfers are read only into or out of them.
    pub pay_to: &'a [Address],
    /// The settlement topics, read from every contract.
    pub settlements: &'a [B256],
}

impl Wanted<'_> {
    /// Whether `log` is one of the watched contracts' logs the first read asks for.
    pub fn watched(&self, log: &Log) -> bool {
        let topics = log.topics();
        let Some(topic) = topics.first() else {
            return false;
        };
        if self.escrows.contains(&log.address()) && self.escrow_topics.contains(topic) {
            return true;
        }
        if !self.tokens.contains(&log.address()) || *topic != self.transfer {
            return false;
        }
        if self.pay_to.is_empty() {
            return true;
        }
        let touches = |i: usize| {
            topics
                .get(i)
                .is_some_and(|t| self.pay_to.iter().any(|w| w.into_word() == *t))
        };
        touches(1) || touches(2)
    }

    /// Whether `log` is a settlement log (read by topic, from every contract).
    pub fn settlement(&self, log: &Log) -> bool {
        log.topics().first().is_some_and(|t| self.settlements.contains(t))
    }

    /// Whether a block with `bloom` may hold a log either read asks for.
    fn may_hold(&self, bloom: &Bloom) -> bool {
        let has = |bytes: &[u8]| bloom.contains_input(BloomInput::Raw(bytes));
        let transfers = has(self.transfer.as_slice()) && self.tokens.iter().any(|t| has(t.as_slice()));
        let escrow = self.escrows.iter().any(|e| has(e.as_slice()))
            && self.escrow_topics.iter().any(|t| has(t.as_slice()));
        let settlements = self.settlements.iter().any(|t| has(t.as_slice()));
        transfers || escrow || settlements
    }
}

/// What the check found in the blocks `eth_getLogs` returned nothing for.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Logs of the watched contracts the node's `eth_getLogs` left out.
    pub watched: Vec<Log>,
    /// Settlement logs it left out.
    pub settlements: Vec<Log>,
    /// Blocks whose receipts were read (their bloom said "maybe").
    pub receipts_read: usize,
}

/// Checks `blocks` (numbers of blocks `eth_getLogs` returned nothing for) against their
/// headers' blooms, and reads the receipts of those that may hold a wanted log.
pub async fn recover(rpc: &EvmRpc, blocks: &[u64], wanted: &Wanted<'_>) -> Result<Recovered, RpcFault> {
    let maybe: Vec<(u64, B256, u64)> = futures::stream::iter(blocks.iter().copied())
        .map(|number| async move {
            let header = rpc
                .full_header(BlockId::number(number))
                .await?
                .ok_or(RpcFault::UnknownBlock(number))?;
            Ok::<_, RpcFault>(wanted.may_hold(&header.logs_bloom).then_some((
                number,
                header.hash_slow(),
                header.timestamp,
            )))
        })
        .buffered(IN_FLIGHT)
        .try_filter_map(|found| async move { Ok(found) })
        .try_collect()
        .await?;
    let mut recovered = Recovered {
        receipts_read: maybe.len(),
        ..Recovered::default()
    };
    let blocks: Vec<Vec<Log>> = futures::stream::iter(maybe)
        .map(|(number, hash, timestamp)| async move {
            let receipts = rpc
                .block_receipts(hash)
                .await?
                .ok_or(RpcFault::UnknownBlock(number))?;
            // The receipts' logs as `eth_getLogs` answers them, with the block's time.
            Ok::<_, RpcFault>(
                receipts
                    .iter()
                    .flat_map(|r| r.inner.logs().iter().cloned())
                    .map(|mut log| {
                        log.block_timestamp = log.block_timestamp.or(Some(timestamp));
                        log
                    })
                    .collect(),
            )
        })
        .buffered(IN_FLIGHT)
        .try_collect()
        .await?;
    for log in blocks.into_iter().flatten() {
        if wanted.watched(&log) {
            recovered.watched.push(log);
        } else if wanted.settlement(&log) {
            recovered.settlements.push(log);
        }
    }
    Ok(recovered)
}
