//! `paywatch status`: per network, what its worker is doing (running, lagging, stalled,
//! stopped, and why: its last failure, the endpoints it refused, its stop), its finality
//! rule, the recorded head and final block (and how far `paid` lags the head, in blocks
//! and seconds), the ingest cursor, the lag between them, the verifier every range is
//! cross-checked with, how far audits reached and what the last one found, and which
//! process holds the worker's lease; then the other leases (scheduled audits, webhook
//! sinks). Read from the store, so it works against any replica's store.

use std::collections::HashMap;

use paywatch_core::config::{ChainsConfig, Verification};
use paywatch_core::health::WorkerState;
use paywatch_core::records::{AuditRecord, AuditSource};
use paywatch_store::{AuditKind, Lease, Store};
use serde::Serialize;

use paywatch_jobs::worker_job;
use paywatch_query::{NetworkHealth, network_health};

/// One network's line.
#[derive(Debug, Serialize)]
struct NetworkStatus {
    /// The network, what its worker is doing, and why (`/readyz` answers the same).
    #[serde(flatten)]
    health: NetworkHealth,
    /// When a payment is `paid`: `confirmations=N`, `finalized` or `safe`.
    finality: String,
    head_block: Option<u64>,
    final_block: Option<u64>,
    /// Blocks between the head and the final block: how far `paid` lags the head.
    paid_lag_blocks: Option<u64>,
    /// The same in seconds: the head block's time minus the final block's (recorded once
    /// the worker has caught up).
    paid_lag_secs: Option<u64>,
    /// The verifier each range is cross-checked with (`verify_rpc_urls`, its host), if any.
    verifier: Option<String>,
    /// When it checks (with a verifier): `inline`, so every block below `next_block` was
    /// checked before it committed, or `lagging`, so up to `audited_to`.
    verification: Option<Verification>,
    /// The lowest next block to read over the network's tokens.
    next_block: Option<u64>,
    /// The last block the scheduled audit (`audit_interval_secs`) read again: every
    /// block from where the schedule started up to it was compared with the chain.
    audited_to: Option<u64>,
    /// The audit that reached furthest, scheduled or by `paywatch audit`.
    last_audit: Option<AuditStatus>,
    lease_owner: Option<String>,
    lease_expired: Option<bool>,
}

/// An audit as `status` shows it.
#[derive(Debug, Serialize)]
struct AuditStatus {
    first_block: u64,
    last_block: u64,
    /// `verifier` or `receipts`.
    source: AuditSource,
    scheduled: bool,
    /// Differences found between the store and the chain.
    differences: u64,
    /// Of those, the ones `paywatch audit --repair` repaired.
    repaired: u64,
    finished_ms: i64,
}

impl From<AuditRecord> for AuditStatus {
    fn from(audit: AuditRecord) -> Self {
        Self {
            first_block: audit.first_block,
            last_block: audit.last_block,
            source: audit.source,
            scheduled: audit.scheduled,
            differences: audit.differences,
            repaired: audit.repaired,
            finished_ms: audit.finished_ms,
        }
    }
}

/// Everything `status` prints.
#[derive(Debug, Serialize)]
struct Status {
    networks: Vec<NetworkStatus>,
    other_leases: Vec<LeaseStatus>,
}

#[derive(Debug, Serialize)]
struct LeaseStatus {
    job: String,
    owner: String,
    expired: bool,
}

/// Prints the status of every configured network, as a table or as JSON; whether every
/// one is ready (none stalled or stopped).
pub(crate) async fn print(chains: &ChainsConfig, store: &Store, json: bool) -> anyhow::Result<bool> {
    let mut leases: HashMap<String, Lease> = store
        .leases()
        .await?
        .into_iter()
        .map(|l| (l.job.clone(), l))
        .collect();
    let mut networks = Vec::new();
    for network in &chains.networks {
        let id = network.id.to_string();
        let head = store.chain_head(&id).await?;
        let health = network_health(store, network).await?;
        let next_block = store.cursors(&id).await?.iter().map(|c| c.next_block).min();
        let lease = leases.remove(&worker_job(&id));
        let audited_to = store.audited_to(&id).await?;
        let last_audit = store
            .last_audit(&id, AuditKind::Any)
            .await?
            .map(AuditStatus::from);
        networks.push(NetworkStatus {
            finality: network.finality.to_string(),
            head_block: head.map(|h| h.head_block),
            final_block: head.and_then(|h| h.final_block),
            paid_lag_blocks: head.and_then(|h| h.final_block.map(|f| h.head_block.saturating_sub(f))),
            paid_lag_secs: head.and_then(|h| h.paid_lag_secs),
            verifier: network
                .verify_rpc_urls
                .first()
                .map(|url| url.host_str().unwrap_or("?").to_string()),
            verification: (!network.verify_rpc_urls.is_empty()).then_some(network.verification),
            next_block,
            health,
            audited_to,
            last_audit,
            lease_owner: lease.as_ref().map(|l| l.owner.clone()),
            lease_expired: lease.map(|l| l.expired),
        });
    }
    let mut other_leases: Vec<LeaseStatus> = leases
        .into_values()
        .map(|l| LeaseStatus {
            job: l.job,
            owner: l.owner,
            expired: l.expired,
        })
        .collect();
    other_leases.sort_by(|a, b| a.job.cmp(&b.job));
    let status = Status {
        networks,
        other_leases,
    };
    let ready = status
        .networks
        .iter()
        .all(|n| !n.health.worker.blocks_readiness());
    if json {
        println!("{}", serde_json::to_string_pretty(&status)?);
        return Ok(ready);
    }
    let dash = || "-".to_string();
    let number = |n: Option<u64>| n.map_or_else(dash, |n| n.to_string());
    println!(
        "{:<44} {:<11} {:<16} {:>12} {:>12} {:>8} {:>10} {:>12} {:>8}  {:<20} {:>12} {:>11}  lease owner",
        "network",
        "worker",
        "finality",
        "head",
        "final",
        "paid lag",
        "paid lag s",
        "next block",
        "lag",
        "verifier",
        "audited to",
        "audit diffs"
    );
    for n in &status.networks {
        let owner = match (&n.lease_owner, n.lease_expired) {
            (Some(owner), Some(true)) => format!("{owner} (lapsed)"),
            (Some(owner), _) => owner.clone(),
            (None, _) => dash(),
        };
        println!(
            "{:<44} {:<11} {:<16} {:>12} {:>12} {:>8} {:>10} {:>12} {:>8}  {:<20} {:>12} {:>11}  {owner}",
            n.health.network,
            n.health.worker.to_string(),
            n.finality,
            number(n.head_block),
            number(n.final_block),
            number(n.paid_lag_blocks),
            number(n.paid_lag_secs),
            number(n.next_block),
            number(n.health.lag_blocks),
            n.verifier
                .as_ref()
                .map_or_else(dash, |host| match n.verification {
                    Some(Verification::Lagging) => format!("{host} (lagging)"),
                    _ => host.clone(),
                }),
            number(n.audited_to),
            number(n.last_audit.as_ref().map(|a| a.differences))
        );
    }
    for n in &status.networks {
        let health = &n.health;
        if let Some(stopped) = &health.stopped {
            println!("  {}: STOPPED: {stopped}", n.health.network);
        }
        if health.worker == WorkerState::Stalled {
            println!(
                "  {}: STALLED: no step completed for {}s (more than {}s); seen head {}",
                n.health.network,
                health.last_step_secs_ago.map_or_else(dash, |s| s.to_string()),
                health.stall_after_secs,
                number(health.seen_head)
            );
        }
        for refused in &health.refused_endpoints {
            println!("  {}: refused endpoint {refused}", n.health.network);
        }
        if let (Some(failure), Some(ago)) = (&health.last_failure, health.last_failure_secs_ago)
            && health.stopped.is_none()
        {
            println!("  {}: last failure {ago}s ago: {failure}", n.health.network);
        }
    }
    for l in &status.other_leases {
        let lapsed = if l.expired { " (lapsed)" } else { "" };
        println!("{:<44} lease owner {}{lapsed}", l.job, l.owner);
    }
    Ok(ready)
}
