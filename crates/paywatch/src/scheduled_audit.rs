//! The scheduled audit of `paywatch run` (`audit_interval_secs`): every interval, the final
//! blocks committed since the last scheduled audit are read again and compared with the
//! store, as `paywatch audit` does; each difference is a WARN log line with its evidence
//! and counts in `paywatch_audit_differences_total`, and each audited span is recorded with
//! its findings (what `verified` answers under `verification = "lagging"`), so
//! the schedule continues after it across restarts and replicas (`paywatch status` shows
//! how far it reached). On Postgres one replica at a time audits a network, under its lease.

use std::time::Duration;

use paywatch_chain::ChainMetrics;
use paywatch_core::config::{NetworkConfig, Verification};
use paywatch_evm::worker::audit::AuditMode;
use paywatch_store::Store;
use tokio_util::sync::CancellationToken;

use crate::audit::{AuditEnd, Auditor, first_start_block};

/// Most ranges (of `max_block_range` blocks) one recorded span holds: a long first audit
/// of a network's history is recorded, and so resumable, every this many ranges.
const RANGES_PER_SPAN: u64 = 64;

/// Audits `network` every `interval` until `stop`. The endpoints are connected (and the
/// chain and tokens checked) once, and again only after a failed audit. A failed audit is
/// logged and tried again at the next interval: it never stops paywatch.
pub(crate) async fn run(network: NetworkConfig, interval: Duration, store: Store, stop: CancellationToken) {
    let name = network.id.to_string();
    let metrics = ChainMetrics::new(&name);
    tracing::info!(network = %name, interval_secs = interval.as_secs(), "scheduled audits enabled");
    let mut connected: Option<Auditor> = None;
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = stop.cancelled() => return,
        }
        let audited = audit_pending(&network, &mut connected, &store, &metrics, &stop).await;
        if let Err(error) = audited {
            connected = None;
            tracing::warn!(network = %name, error = format!("{error:#}"), "scheduled audit failed; trying again at the next interval");
        }
    }
}

/// Audits the final blocks committed since the last scheduled audit, recording each span,
/// with the `connected` auditor (connected first when there is none).
async fn audit_pending(
    network: &NetworkConfig,
    connected: &mut Option<Auditor>,
    store: &Store,
    metrics: &ChainMetrics,
    stop: &CancellationToken,
) -> anyhow::Result<()> {
    if connected.is_none() {
        *connected = Some(Auditor::connect(network.clone(), store.clone(), stop, AuditMode::Report).await?);
    }
    let Some(auditor) = connected.as_ref() else {
        return Ok(());
    };
    let name = network.id.to_string();
    let Some(limit) = auditor.limit().await? else {
        return Ok(());
    };
    let mut from = match store.audited_to(&name).await? {
        Some(last) => last + 1,
        None => match first_start_block(network) {
            Some(start) => start,
            // A token starting at `latest`: the schedule starts where reading is when it
            // first runs (earlier blocks are audited by hand, `paywatch audit --from`).
            None => limit,
        },
    };
    let span = RANGES_PER_SPAN.saturating_mul(network.max_block_range);
    while from <= limit && !stop.is_cancelled() {
        let to = limit.min(from.saturating_add(span - 1));
        let mut findings = Vec::new();
        let ended = auditor
            .audit(from, to, stop, |audited| {
                for difference in audited.differences {
                    let finding = difference.finding();
                    tracing::warn!(
                        network = %name,
                        difference = %finding.difference,
                        "audit: the store and the chain disagree; see `paywatch audit` in docs/src/hostile-providers.md for the remedy"
                    );
                    findings.push(finding);
                }
                metrics.audited(audited.last, audited.differences.len());
                Ok(())
            })
            .await?;
        let (last, differences) = match ended {
            AuditEnd::Finished { differences } => (to, differences),
            AuditEnd::Stopped { next, differences } if next > from => (next - 1, differences),
            AuditEnd::Stopped { .. } => return Ok(()),
        };
        store
            .record_audit(
                &auditor.record(from, last, true, differences, 0),
                &findings,
                network.verification == Verification::Lagging,
            )
            .await?;
        tracing::info!(network = %name, from, to = last, differences, source = %auditor.source(), "scheduled audit recorded");
        from = last + 1;
    }
    Ok(())
}
