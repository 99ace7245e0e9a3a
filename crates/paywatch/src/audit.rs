//! `paywatch audit --network N [--from B] [--to B] [--repair]`: reads the final blocks
//! paywatch has committed again — cross-checked with the verifier (`verify_rpc_urls`) when
//! the network names one, else from every block's receipts — and prints each difference
//! between the store and the chain as a JSON line on stdout (a payment the chain has and
//! the store lacks, one the store holds that the chain does not, a kept transfer the chain
//! does not have, or either with other facts), with what each side holds. Progress goes to
//! stderr; the audit and its findings are recorded once it ran to its end. Without
//! `--repair` it changes no payment, so it runs beside `paywatch run`; with it, each range
//! is repaired as soon as it is compared, in one transaction, under the worker's lease
//! (an interrupted repair continues from where it stopped). Exit code 0 when the store
//! agreed with the chain, 4 when it did not (also when repaired). The [`Auditor`] is
//! shared with the scheduled audits of `paywatch run`, which only report.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, anyhow, bail};
use paywatch_core::config::{ChainsConfig, NetworkConfig, Verification};
use paywatch_core::records::{AuditRecord, AuditSource};
use paywatch_evm::EvmWorker;
use paywatch_evm::worker::audit::{AuditMode, Difference, RangeAudit};
use paywatch_store::Store;
use tokio_util::sync::CancellationToken;

use crate::evm::{endpoints, evm_network};
use crate::progress::Progress;
use crate::writer_lease;

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
    /// Also make the store hold what the chain holds: missing payments and transfers
    /// inserted, made-up ones taken back, differing ones corrected, refunds tied again.
    /// Takes the network worker's lease (stop `paywatch run` on SQLite first).
    #[arg(long)]
    repair: bool,
}

/// Audits `args.network` of `chains` in `store`.
pub(crate) async fn audit(args: AuditArgs, chains: ChainsConfig, store: Store) -> anyhow::Result<ExitCode> {
    let network = evm_network(&chains, &args.network, "audit")?;
    let name = network.id.to_string();
    let from = match args.from {
        Some(from) => from,
        None => match first_start_block(&network) {
            Some(start) => start,
            None => bail!(
                "a token of {name} starts at `latest`, so where its reading began is not known: say where the audit starts with --from"
            ),
        },
    };
    // Under lagging verification the verdicts are announced: a repair announces each range
    // as it commits it, an audit that only reports when it is recorded.
    let announce = !args.repair && network.verification == Verification::Lagging;
    let interrupted = CancellationToken::new();
    let (mode, (store, lease)) = if args.repair {
        (
            AuditMode::Repair,
            writer_lease::hold(store, &name, "repair", &interrupted).await?,
        )
    } else {
        (AuditMode::Report, (store, None))
    };
    let auditor = Auditor::connect(network, store.clone(), &CancellationToken::new(), mode).await?;
    let Some(limit) = auditor.limit().await? else {
        bail!("{name}: no final block has been committed yet; audit after paywatch has read some");
    };
    let to = args.to.unwrap_or(limit);
    if to > limit {
        bail!("{name}: --to {to} is past block {limit}, the last block committed and final; audit up to it");
    }
    if from > to {
        bail!("{name}: nothing to audit from block {from} to {to}");
    }

    tracing::info!(network = %name, from, to, source = %auditor.source, repair = args.repair, "audit started");
    let on_signal = interrupted.clone();
    let _signal = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.cancel();
        }
    });
    let mut progress = Progress::new("audit", to);
    let mut findings = Vec::new();
    let mut repaired = 0u64;
    let ended = auditor
        .audit(from, to, &interrupted, |audited| {
            for difference in audited.differences {
                let finding = difference.finding();
                println!("{}", finding.difference);
                findings.push(finding);
            }
            if audited.repaired {
                repaired += audited.differences.len() as u64;
            }
            progress.advanced(&name, audited.first, audited.last, audited.logs);
            Ok(())
        })
        .await;
    progress.finish();
    let recorded = match ended {
        Ok(AuditEnd::Finished { differences }) => store
            .record_audit(
                &auditor.record(from, to, false, differences, repaired),
                &findings,
                announce,
            )
            .await
            .context("the audit ran to its end but cannot be recorded in the store")
            .map(|()| differences),
        Ok(AuditEnd::Stopped { next, .. }) => Err(anyhow!(
            "interrupted: blocks {from} to {} were audited{}; continue with --from {next}",
            next.saturating_sub(1),
            if args.repair { " and repaired" } else { "" }
        )),
        Err(error) => Err(error),
    };
    if let Some(lease) = lease {
        lease.release().await?;
    }
    let differences = recorded?;
    eprintln!(
        "{name}: audited blocks {from} to {to} against {}: {differences} difference(s){}",
        auditor.source_text(),
        if args.repair {
            format!(", {repaired} repaired")
        } else {
            String::new()
        }
    );
    Ok(if differences == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(DIFFERENCES_FOUND)
    })
}

/// The lowest start block of `network`'s tokens; `None` when a token starts at `latest`
/// (where its reading began is not configured).
pub(crate) fn first_start_block(network: &NetworkConfig) -> Option<u64> {
    network
        .tokens
        .iter()
        .map(|t| t.start_block.number())
        .collect::<Option<Vec<u64>>>()
        .map(|starts| starts.into_iter().min().unwrap_or(0))
}

/// One range audited: its blocks, the differences in it and the logs read.
pub(crate) struct AuditedRange<'a> {
    /// First block.
    pub(crate) first: u64,
    /// Last block.
    pub(crate) last: u64,
    /// What the store and the chain disagree on in it.
    pub(crate) differences: &'a [Difference],
    /// Logs read from the chain.
    pub(crate) logs: u64,
    /// Whether the differences were repaired.
    pub(crate) repaired: bool,
}

/// How an audit of a span of blocks ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuditEnd {
    /// Every block was audited.
    Finished {
        /// Differences found.
        differences: u64,
    },
    /// Stopped before `next`; the blocks before it were audited.
    Stopped {
        /// The first block not audited.
        next: u64,
        /// Differences found in the blocks audited.
        differences: u64,
    },
}

/// Audits final blocks of one EVM network: reads them again (from the verifier, or every
/// block's receipts) range by range and compares them with the store.
pub(crate) struct Auditor {
    worker: EvmWorker,
    name: String,
    source: AuditSource,
    /// The tokens' numeric start blocks: a range never crosses one.
    starts: Vec<u64>,
    max_range: u64,
    mode: AuditMode,
}

impl Auditor {
    /// Connects to the network's endpoints (its verifier's when it names one) and checks
    /// that they serve its chain and tokens; `mode` says whether it repairs what it finds
    /// (in `store`, which the caller has fenced by the worker's lease).
    pub(crate) async fn connect(
        network: NetworkConfig,
        store: Store,
        shutdown: &CancellationToken,
        mode: AuditMode,
    ) -> anyhow::Result<Self> {
        let name = network.id.to_string();
        let starts = network
            .tokens
            .iter()
            .filter_map(|t| t.start_block.number())
            .collect();
        let max_range = network.max_block_range;
        let (rpc, verifier) = endpoints(&network).await?;
        let worker = EvmWorker::new(network, store, rpc);
        let (worker, source) = match verifier {
            Some(verifier) => (worker.with_verifier(verifier), AuditSource::Verifier),
            None => (worker.reading_receipts(), AuditSource::Receipts),
        };
        worker.verify_chain(shutdown).await?;
        Ok(Self {
            worker,
            name,
            source,
            starts,
            max_range,
            mode,
        })
    }

    /// Where the chain's side is read.
    pub(crate) fn source(&self) -> AuditSource {
        self.source
    }

    /// Where the chain's side is read, in words.
    pub(crate) fn source_text(&self) -> &'static str {
        match self.source {
            AuditSource::Verifier => "the verifier (verify_rpc_urls), differences settled by receipts",
            AuditSource::Receipts => "every block's receipts",
        }
    }

    /// The last block an audit may read: committed for every token and final.
    pub(crate) async fn limit(&self) -> anyhow::Result<Option<u64>> {
        self.worker
            .audit_limit()
            .await
            .context("cannot read the chain head or the store")
    }

    /// The record of an audit of `first..=last` by this auditor that found `differences`
    /// and repaired `repaired` of them.
    pub(crate) fn record(
        &self,
        first: u64,
        last: u64,
        scheduled: bool,
        differences: u64,
        repaired: u64,
    ) -> AuditRecord {
        AuditRecord {
            network: self.name.clone(),
            first_block: first,
            last_block: last,
            source: self.source,
            scheduled,
            differences,
            repaired,
            finished_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
        }
    }

    /// Audits `from..=to` range by range (halving a range the node refuses, reading again
    /// one that failed or moved), handing each audited range to `audited` in chain order,
    /// until done or `stop`.
    pub(crate) async fn audit(
        &self,
        from: u64,
        to: u64,
        stop: &CancellationToken,
        mut audited: impl FnMut(AuditedRange<'_>) -> anyhow::Result<()>,
    ) -> anyhow::Result<AuditEnd> {
        let name = &self.name;
        let mut differences = 0u64;
        let mut range = self.max_range;
        let mut next = from;
        let mut failures = 0u32;
        while next <= to {
            let last = range_end(next, to, range, &self.starts);
            let read = tokio::select! {
                read = self.worker.audit_range(next, last, self.mode) => read,
                () = stop.cancelled() => return Ok(AuditEnd::Stopped { next, differences }),
            };
            match read {
                Ok(RangeAudit::Compared {
                    differences: found,
                    logs,
                    repaired,
                }) => {
                    failures = 0;
                    audited(AuditedRange {
                        first: next,
                        last,
                        differences: &found,
                        logs,
                        repaired,
                    })?;
                    differences += found.len() as u64;
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
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(250u64 << failures.min(5))) => {}
                        () = stop.cancelled() => return Ok(AuditEnd::Stopped { next, differences }),
                    }
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
        Ok(AuditEnd::Finished { differences })
    }
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
