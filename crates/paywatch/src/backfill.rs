//! `paywatch backfill --network N [--from B] [--to B]`: reads one EVM network's history up
//! to a block and exits, with a progress bar on a terminal (blocks done, blocks and logs
//! per second, ETA) and a plain log line every 10 s otherwise. It writes exactly as the
//! worker of `paywatch run` does — batches commit with their cursor, so an interrupted
//! backfill resumes where it stopped — and on Postgres under the worker's lease, so it
//! never races a running replica.

use std::time::Duration;

use anyhow::{Context, bail};
use paywatch_core::config::{ChainsConfig, StartBlock};
use paywatch_evm::EvmWorker;
use paywatch_evm::worker::StepOutcome;
use paywatch_store::Store;
use tokio_util::sync::CancellationToken;

use crate::evm::{endpoints, evm_network};
use crate::progress::Progress;
use crate::writer_lease;

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

/// Runs the backfill of one network.
pub(crate) async fn backfill(args: BackfillArgs, chains: ChainsConfig, store: Store) -> anyhow::Result<()> {
    let mut network = evm_network(&chains, &args.network, "backfill")?;
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
    let (rpc, verifier) = endpoints(&network).await?;
    let target = match args.to {
        Some(to) => to,
        None => rpc.block_number().await.context("cannot read the chain head")?,
    };

    let shutdown = CancellationToken::new();
    let (store, lease) = writer_lease::hold(store, &name, "backfill", &shutdown).await?;

    let inline = network.verifies_inline();
    let mut worker = EvmWorker::new(network, store.clone(), rpc);
    if let Some(verifier) = verifier.filter(|_| inline) {
        worker = worker.with_verifier(verifier);
    }
    worker.verify_chain(&shutdown).await?;
    let mut progress = Progress::new("backfill", target);
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
                progress.advanced(&name, from, to, logs);
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
    if let Some(lease) = lease {
        lease.release().await?;
    }
    outcome?;
    let next = store.cursors(&name).await?.iter().map(|c| c.next_block).min();
    println!(
        "{name}: read up to block {}",
        next.map_or_else(|| "-".to_string(), |n| n.saturating_sub(1).to_string())
    );
    Ok(())
}
