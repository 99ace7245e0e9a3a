//! The bloom check, for a network read from one provider: a block for which `eth_getLogs`
//! returned nothing, but whose header's `logsBloom` says it may hold a log paywatch asks
//! for, is read again from its receipts (`eth_getBlockReceipts`). A node whose log index
//! left a whole block out is caught; a false positive of the bloom costs one receipts read.
//! A block that did return logs is not checked (a transaction left out of a block that
//! kept others is only caught by a verifier).

use alloy::eips::BlockId;
use alloy::primitives::B256;
use alloy::rpc::types::Log;
use futures::{StreamExt, TryStreamExt};

use crate::reads::RangeReads;
use crate::rpc::{EvmRpc, RpcFault};

/// Headers or receipts read at once.
const IN_FLIGHT: usize = 16;

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
pub async fn recover(rpc: &EvmRpc, blocks: &[u64], wanted: &RangeReads<'_>) -> Result<Recovered, RpcFault> {
    receipts_logs(rpc, blocks, wanted, true).await
}

/// The wanted logs of every one of `blocks`, read from the blocks' receipts alone (an
/// audit's source when no verifier is configured: the receipts are the authority).
pub async fn from_receipts(
    rpc: &EvmRpc,
    blocks: &[u64],
    wanted: &RangeReads<'_>,
) -> Result<Recovered, RpcFault> {
    receipts_logs(rpc, blocks, wanted, false).await
}

/// The wanted logs of `blocks` from their receipts; with `by_bloom`, only of the blocks
/// whose header's bloom may hold one.
async fn receipts_logs(
    rpc: &EvmRpc,
    blocks: &[u64],
    wanted: &RangeReads<'_>,
    by_bloom: bool,
) -> Result<Recovered, RpcFault> {
    let maybe: Vec<(u64, B256, u64)> = futures::stream::iter(blocks.iter().copied())
        .map(|number| async move {
            let header = rpc
                .full_header(BlockId::number(number))
                .await?
                .ok_or(RpcFault::UnknownBlock(number))?;
            Ok::<_, RpcFault>((!by_bloom || wanted.may_hold(&header.logs_bloom)).then_some((
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
                    .flat_map(|r| r.logs().iter().cloned())
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
