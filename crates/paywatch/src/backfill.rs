//! `paywatch backfill --network N [--from B] [--to B]`: reads one EVM network's history up
//! to a block and exits, with a progress bar on a terminal (blocks done, blocks and logs
//! per second, ETA) and a plain log line every 10 s otherwise. It writes exactly as the
//! worker of `paywatch run` does — batches commit with their cursor, so an interrupted
//! backfill resumes where it stopped — and on Postgres under the worker's lease, so it
//! never races a running replica.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use paywatch_core::config::{ChainsConfig, StartBlock};
use paywatch_core::network::Namespace;
use paywatch_evm::EvmWorker;
use paywatch_evm::rpc::EvmRpc;
use paywatch_evm::worker::StepOutcome;
use paywatch_store::{Backend, Store};
use tokio_util::sync::CancellationToken;

use paywatch_jobs::{self as leases, LeasedJob};

/// Arguments of `paywatch backfill`.
#[derive(Debug, clap::Args)]
pub(crate) struct BackfillArgs {
    /// Network: CAIP-2 id or alias (EVM networks).
    #[arg(long)]
    network: String,
    /// First block, for a network paywatch has not read yet (default: each token's
    /// start_block). A network already read continues from its cursor.
    #[arg(long)]
    from: Option<u64>,
    /// Last block to read (default: the head when the backfill starts).
    #[arg(long)]
    to: Option<u64>,
}

/// How a backfill reports progress: a bar on a terminal, log lines elsewhere.
struct Progress {
    bar: Option<ProgressBar>,
    start_block: Option<u64>,
    target: u64,
    started: Instant,
    last_line: Instant,
    logs: u64,
}

impl Progress {
    fn new(target: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} {prefix} [{bar:40}] {pos}/{len} blocks  {per_sec}  {msg}  ETA {eta}",
                )
                .expect("a valid progress template")
                .progress_chars("=> "),
            );
            bar
        });
        Self {
            bar,
            start_block: None,
            target,
            started: Instant::now(),
            last_line: Instant::now(),
            logs: 0,
        }
    }

    /// Records a committed range `from..=to` holding `logs` logs.
    fn committed(&mut self, network: &str, from: u64, to: u64, logs: u64) {
        let start = *self.start_block.get_or_insert(from);
        self.logs += logs;
        let done = to.saturating_add(1).saturating_sub(start);
        let total = self.target.saturating_add(1).saturating_sub(start);
        let logs_per_sec = self.logs as f64 / self.started.elapsed().as_secs_f64().max(0.001);
        match &self.bar {
            Some(bar) => {
                bar.set_prefix(network.to_string());
                bar.set_length(total);
                bar.set_position(done.min(total));
                bar.set_message(format!("{logs_per_sec:.0} logs/s"));
            }
            None if self.last_line.elapsed() >= Duration::from_secs(10) => {
                self.last_line = Instant::now();
                tracing::info!(
                    network,
                    block = to,
                    target = self.target,
                    done,
                    total,
                    logs = self.logs,
                    logs_per_sec = logs_per_sec as u64,
                    "backfill progress"
                );
            }
            None => {}
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}

/// Runs the backfill of one network.
pub(crate) async fn backfill(args: BackfillArgs, chains: ChainsConfig, store: Store) -> anyhow::Result<()> {
    let Some(network) = chains.network(&args.network) else {
        bail!(
            "network {} is not in chains.toml: name one of its networks by CAIP-2 id or alias",
            args.network
        );
    };
    let mut network = network.clone();
    if network.id.namespace() != Namespace::Eip155 {
        bail!(
            "backfill reads EVM block ranges; {} is a Solana network, whose history paywatch run reads by signature pages",
            network.id
        );
    }
    let name = network.id.to_string();
    let cursors = store.cursors(&name).await?;
    if let Some(from) = args.from {
        if let Some(cursor) = cursors.iter().map(|c| c.next_block).min() {
            bail!(
                "{name} is already read up to block {}: a backfill continues from the cursor, so drop --from (or use a fresh store to read from block {from})",
                cursor.saturating_sub(1)
            );
        }
        for token in &mut network.tokens {
            token.start_block = StartBlock::Number(from);
        }
    }
    let rpc = EvmRpc::connect(&name, &network.rpc_urls, network.rpc_timeout)
        .await
        .with_context(|| format!("cannot reach an RPC endpoint of {name}"))?;
    let target = match args.to {
        Some(to) => to,
        None => rpc.block_number().await.context("cannot read the chain head")?,
    };

    let shutdown = CancellationToken::new();
    let lease = LeasedJob {
        job: leases::worker_job(&name),
        owner: leases::owner_id(),
        ttl: Duration::from_secs(15),
    };
    let (store, renewing) = if store.backend() == Backend::Postgres {
        if !store.acquire_lease(&lease.job, &lease.owner, lease.ttl).await? {
            bail!(
                "another paywatch process holds the lease on {} (see paywatch status): its worker is reading {name} already; stop it first or let it read",
                lease.job
            );
        }
        let fenced = store.fenced(&lease.job, &lease.owner);
        let (renewer, lost, lease) = (store.clone(), shutdown.clone(), lease.clone());
        let renewing = tokio::spawn(async move {
            lease.keep_renewing(&renewer).await;
            tracing::error!(job = %lease.job, "backfill lost its lease; stopping");
            lost.cancel();
        });
        (fenced, Some(renewing))
    } else {
        (store, None)
    };

    let verifier = if network.verify_rpc_urls.is_empty() {
        None
    } else {
        Some(
            EvmRpc::connect(&name, &network.verify_rpc_urls, network.rpc_timeout)
                .await
                .with_context(|| format!("cannot reach a verifier endpoint of {name} (verify_rpc_urls)"))?,
        )
    };
    let mut worker = EvmWorker::new(network, store.clone(), rpc);
    if let Some(verifier) = verifier {
        worker = worker.with_verifier(verifier);
    }
    worker.verify_chain(&shutdown).await?;
    let mut progress = Progress::new(target);
    let mut failures = 0u32;
    tracing::info!(network = %name, to = target, "backfill started");
    let outcome = loop {
        let step = tokio::select! {
            step = worker.step() => step,
            _ = tokio::signal::ctrl_c() => break Err(anyhow::anyhow!("interrupted; the committed part stays, and a new backfill continues from it")),
            () = shutdown.cancelled() => break Err(anyhow::anyhow!("the worker's lease was lost")),
        };
        match step {
            Ok(StepOutcome::Committed { from, to, logs, .. }) => {
                failures = 0;
                progress.committed(&name, from, to, logs);
                if to >= target {
                    break Ok(());
                }
            }
            Ok(StepOutcome::CaughtUp) => break Ok(()),
            Ok(_) => failures = 0,
            Err(error) => {
                failures += 1;
                tracing::warn!(network = %name, %error, failures, "backfill step failed; retrying");
                tokio::time::sleep(Duration::from_millis(250u64 << failures.min(7))).await;
            }
        }
    };
    progress.finish();
    if let Some(renewing) = renewing {
        // Stopped first, so no renewal can take the lease back after its release.
        renewing.abort();
        let _ = renewing.await;
        store.release_lease(&lease.job, &lease.owner).await?;
    }
    outcome?;
    let next = store.cursors(&name).await?.iter().map(|c| c.next_block).min();
    println!(
        "{name}: read up to block {}",
        next.map_or_else(|| "-".to_string(), |n| n.saturating_sub(1).to_string())
    );
    Ok(())
}
