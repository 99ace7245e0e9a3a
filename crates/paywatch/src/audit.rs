//! `paywatch audit --network N [--from B] [--to B]`: reads the final blocks paywatch has
//! committed again — cross-checked with the verifier (`verify_rpc_urls`) when the network
//! names one, else from every block's receipts — and prints each difference between the
//! store and the chain as a JSON line on stdout (a payment the chain has and the store
//! lacks, one the store holds that the chain does not, a kept transfer the chain does not
//! have, or either with other facts), with what each side holds. Progress goes to stderr;
//! it only reads, so it runs beside `paywatch run`. Exit code 0 when the store agrees with
//! the chain, 4 when it does not.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use paywatch_core::config::{ChainsConfig, StartBlock};
use paywatch_evm::EvmWorker;
use paywatch_evm::worker::audit::RangeAudit;
use paywatch_store::Store;
use tokio_util::sync::CancellationToken;

use crate::evm::{endpoints, evm_network};
use crate::progress::Progress;

/// Exit code of an audit that found differences.
const DIFFERENCES_FOUND: u8 = 4;

/// Times a range is read again when the chain moved under its read or the node failed.
const RETRIES: u32 = 8;

/// Arguments of `paywatch audit`.
#[derive(Debug, clap::Args)]
pub(crate) struct AuditArgs {
    /// Network: CAIP-2 id or alias (EVM networks).
    #[arg(long)]
    network: String,
    /// First block (default: the lowest start_block of the network's tokens; each token
    /// is audited from its own start block).
    #[arg(long)]
    from: Option<u64>,
    /// Last block (default, and at most: the last block committed for every token that
    /// is final by the network's rule).
    #[arg(long)]
    to: Option<u64>,
}

/// Audits `args.network` of `chains` in `store`.
pub(crate) async fn audit(args: AuditArgs, chains: ChainsConfig, store: Store) -> anyhow::Result<ExitCode> {
    let network = evm_network(&chains, &args.network, "audit")?;
    let name = network.id.to_string();
    // The tokens' numeric start blocks: where the default audit starts, and where ranges cut.
    let starts: Vec<u64> = network
        .tokens
        .iter()
        .filter_map(|t| match t.start_block {
            StartBlock::Number(n) => Some(n),
            StartBlock::Latest => None,
        })
        .collect();
    let from = match args.from {
        Some(from) => from,
        None => {
            if network.tokens.iter().any(|t| t.start_block == StartBlock::Latest) {
                bail!(
                    "a token of {name} starts at `latest`, so where its reading began is not known: say where the audit starts with --from"
                );
            }
            starts.iter().copied().min().unwrap_or(0)
        }
    };
    let max_range = network.max_block_range;
    let (rpc, verifier) = endpoints(&network).await?;
    let source = if verifier.is_some() {
        "the verifier (verify_rpc_urls), differences settled by receipts"
    } else {
        "every block's receipts"
    };
    let mut worker = EvmWorker::new(network, store, rpc);
    worker = match verifier {
        Some(verifier) => worker.with_verifier(verifier),
        None => worker.reading_receipts(),
    };
    worker.verify_chain(&CancellationToken::new()).await?;
    let Some(limit) = worker
        .audit_limit()
        .await
        .context("cannot read the chain head or the store")?
    else {
        bail!("{name}: no final block has been committed yet; audit after paywatch has read some");
    };
    let to = args.to.unwrap_or(limit);
    if to > limit {
        bail!("{name}: --to {to} is past block {limit}, the last block committed and final; audit up to it");
    }
    if from > to {
        bail!("{name}: nothing to audit from block {from} to {to}");
    }

    tracing::info!(network = %name, from, to, source, "audit started");
    let mut progress = Progress::new("audit", to);
    let mut differences = 0u64;
    let mut range = max_range;
    let mut next = from;
    let mut failures = 0u32;
    while next <= to {
        let last = range_end(next, to, range, &starts);
        let audited = tokio::select! {
            audited = worker.audit_range(next, last) => audited,
            _ = tokio::signal::ctrl_c() => {
                progress.finish();
                bail!("interrupted: blocks {from} to {} were audited; continue with --from {next}", next.saturating_sub(1));
            }
        };
        match audited {
            Ok(RangeAudit::Compared {
                differences: found,
                logs,
            }) => {
                failures = 0;
                for difference in &found {
                    println!("{}", serde_json::to_string(difference)?);
                }
                differences += found.len() as u64;
                progress.advanced(&name, next, last, logs);
                next = last + 1;
            }
            Ok(RangeAudit::Refused(fault)) if range > 1 => {
                range = (range / 2).max(1);
                tracing::info!(network = %name, %fault, range, "the node refused the range; auditing smaller ranges");
            }
            Ok(RangeAudit::Refused(fault)) => {
                bail!("{name}: the node refuses even one block {next}: {fault}")
            }
            Ok(RangeAudit::ChainMoved) | Err(_) if failures < RETRIES => {
                failures += 1;
                tracing::warn!(network = %name, block = next, failures, "audit read failed or the chain moved; reading again");
                tokio::time::sleep(Duration::from_millis(250u64 << failures.min(5))).await;
            }
            Ok(RangeAudit::ChainMoved) => bail!(
                "{name}: blocks {next} to {last} kept changing while read, below the final block: is the finality rule right for this chain?"
            ),
            Err(error) => {
                return Err(anyhow::Error::new(error)
                    .context(format!("{name}: cannot audit blocks {next} to {last}")));
            }
        }
    }
    progress.finish();
    eprintln!("{name}: audited blocks {from} to {to} against {source}: {differences} difference(s)");
    Ok(if differences == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(DIFFERENCES_FOUND)
    })
}

/// The last block of the range starting at `next`: at most `range` blocks, not past `to`,
/// and not across a token's start block (`starts`: a range reads the tokens started at its
/// first block).
fn range_end(next: u64, to: u64, range: u64, starts: &[u64]) -> u64 {
    starts
        .iter()
        .filter(|&&start| start > next)
        .map(|start| start - 1)
        .chain([to, next.saturating_add(range - 1)])
        .min()
        .unwrap_or(to)
}
