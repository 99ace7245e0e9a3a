//! Cross-checked reads: each range's logs, read from the primary provider, are read again
//! from an independent verifier (`verify_rpc_urls`) and compared as sets of (block hash,
//! transaction, log index, address, topics, data). A log one side lacks is settled by the
//! transaction's receipt, asked of both providers and checked against the log's block
//! hash: a log both receipts hold is kept (the other side left it out), a log neither
//! holds is refused (the other side made it up), and receipts that disagree stop the
//! commit — two providers that contradict each other cannot be told apart, so paywatch
//! waits rather than guess.

use std::collections::{BTreeMap, HashSet};

use alloy::primitives::{Address, B256, Bytes};
use alloy::rpc::types::Log;
use futures::{StreamExt, TryStreamExt};

use crate::decode::BadAnswer;
use crate::rpc::{BlockReceipt, EvmRpc, RpcFault};

/// Receipts asked for at once while settling a range's differences.
const RECEIPTS_IN_FLIGHT: usize = 8;

/// A log as the comparison sees it: where it is and what it says.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct LogKey {
    block_hash: B256,
    tx: B256,
    log_index: u64,
    address: Address,
    topics: Vec<B256>,
    data: Bytes,
}

fn key_of(log: &Log) -> Result<LogKey, BadAnswer> {
    Ok(LogKey {
        block_hash: log.block_hash.ok_or(BadAnswer::MissingField("blockHash"))?,
        tx: log
            .transaction_hash
            .ok_or(BadAnswer::MissingField("transactionHash"))?,
        log_index: log.log_index.ok_or(BadAnswer::MissingField("logIndex"))?,
        address: log.address(),
        topics: log.topics().to_vec(),
        data: log.data().data.clone(),
    })
}

/// Whether a receipt (its block hash and logs) holds the log `key`.
fn receipt_holds(receipt: &Option<(Option<B256>, Vec<Log>)>, key: &LogKey) -> bool {
    receipt.as_ref().is_some_and(|(block_hash, logs)| {
        *block_hash == Some(key.block_hash)
            && logs.iter().any(|log| {
                // A receipt's logs may come without their block fields; what they say and
                // their index are what must match.
                log.log_index == Some(key.log_index)
                    && log.address() == key.address
                    && log.topics() == key.topics.as_slice()
                    && log.data().data == key.data
            })
    })
}

/// A transaction's receipt puts it in another block than the log says: the two providers
/// are on different forks (or the chain moved between the reads).
fn in_other_block(receipt: &Option<(Option<B256>, Vec<Log>)>, key: &LogKey) -> bool {
    receipt
        .as_ref()
        .is_some_and(|(block_hash, _)| block_hash.is_some_and(|hash| hash != key.block_hash))
}

/// What cross-checking one answer found.
#[derive(Debug, Default)]
pub struct CrossChecked {
    /// The logs to use: those both providers returned, and those the receipts confirmed,
    /// in chain order.
    pub logs: Vec<Log>,
    /// Real logs the primary left out (kept from the verifier's answer).
    pub primary_omitted: usize,
    /// Logs the primary made up (refused).
    pub primary_invented: usize,
    /// Real logs the verifier left out.
    pub verifier_omitted: usize,
    /// Logs the verifier made up (refused).
    pub verifier_invented: usize,
    /// The providers are on different forks: read the range again.
    pub chain_moved: bool,
}

impl CrossChecked {
    /// Logs the primary got wrong.
    pub fn primary_wrong(&self) -> usize {
        self.primary_omitted + self.primary_invented
    }

    /// Logs the verifier got wrong.
    pub fn verifier_wrong(&self) -> usize {
        self.verifier_omitted + self.verifier_invented
    }
}

/// Compares the primary's and the verifier's answers to the same `eth_getLogs` and
/// settles each difference by both providers' receipts of its transaction.
pub async fn cross_check(
    primary: &EvmRpc,
    verifier: &EvmRpc,
    primary_logs: Vec<Log>,
    verifier_logs: Vec<Log>,
) -> Result<CrossChecked, CrossCheckError> {
    // Two honest providers answer the same logs in the same order: compared in place,
    // with nothing copied (the decoder refuses a log without its block fields later).
    let same = |a: &Log, b: &Log| {
        a.block_hash == b.block_hash
            && a.transaction_hash == b.transaction_hash
            && a.log_index == b.log_index
            && a.address() == b.address()
            && a.topics() == b.topics()
            && a.data().data == b.data().data
    };
    if primary_logs.len() == verifier_logs.len()
        && primary_logs.iter().zip(&verifier_logs).all(|(a, b)| same(a, b))
    {
        return Ok(CrossChecked {
            logs: primary_logs,
            ..CrossChecked::default()
        });
    }
    let mut primary_keyed = BTreeMap::new();
    for log in primary_logs {
        primary_keyed.insert(key_of(&log)?, log);
    }
    let mut verifier_keyed = BTreeMap::new();
    for log in verifier_logs {
        verifier_keyed.insert(key_of(&log)?, log);
    }
    let mut checked = CrossChecked::default();
    // What both returned is kept; each difference is (key, log, whether the primary
    // returned it).
    let mut kept: Vec<Log> = Vec::with_capacity(primary_keyed.len());
    let mut differing: Vec<(LogKey, Log, bool)> = Vec::new();
    let primary_keys: HashSet<LogKey> = primary_keyed.keys().cloned().collect();
    for (key, log) in primary_keyed {
        if verifier_keyed.contains_key(&key) {
            kept.push(log);
        } else {
            differing.push((key, log, true));
        }
    }
    for (key, log) in verifier_keyed {
        if !primary_keys.contains(&key) {
            differing.push((key, log, false));
        }
    }
    if !differing.is_empty() {
        let txs: Vec<B256> = differing
            .iter()
            .map(|(key, _, _)| key.tx)
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let receipts: BTreeMap<B256, _> = futures::stream::iter(txs)
            .map(|tx| async move {
                let (p, v) =
                    tokio::try_join!(primary.transaction_receipt(tx), verifier.transaction_receipt(tx))?;
                let found =
                    |receipt: Option<BlockReceipt>| receipt.map(|r| (r.block_hash(), r.logs().to_vec()));
                let (p, v) = (found(p), found(v));
                Ok::<_, RpcFault>((tx, (p, v)))
            })
            .buffer_unordered(RECEIPTS_IN_FLIGHT)
            .try_collect()
            .await?;
        for (key, log, from_primary) in differing {
            let (p, v) = &receipts[&key.tx];
            if in_other_block(p, &key) || in_other_block(v, &key) {
                checked.chain_moved = true;
                continue;
            }
            let holds = |receipt| if receipt { "holds it" } else { "lacks it" };
            match (receipt_holds(p, &key), receipt_holds(v, &key)) {
                (true, true) => {
                    if from_primary {
                        checked.verifier_omitted += 1;
                    } else {
                        checked.primary_omitted += 1;
                    }
                    kept.push(log);
                }
                (false, false) => {
                    if from_primary {
                        checked.primary_invented += 1;
                    } else {
                        checked.verifier_invented += 1;
                    }
                }
                (in_primary, in_verifier) => {
                    return Err(CrossCheckError::Bad(BadAnswer::UnsettledDisagreement {
                        tx: format!("{:#x}", key.tx),
                        block: log.block_number.unwrap_or_default(),
                        log_index: key.log_index,
                        primary: holds(in_primary),
                        verifier: holds(in_verifier),
                    }));
                }
            }
        }
    }
    kept.sort_by_key(|log| (log.block_number, log.log_index));
    checked.logs = kept;
    Ok(checked)
}

/// Why a cross-check could not finish.
#[derive(Debug, thiserror::Error)]
pub enum CrossCheckError {
    /// A provider failed after retries.
    #[error(transparent)]
    Rpc(#[from] RpcFault),
    /// An answer was impossible, or the providers contradict each other.
    #[error(transparent)]
    Bad(#[from] BadAnswer),
}
