//! Each network's health as `paywatch status` and `/readyz` answer it: the worker's state
//! under core's rule, from what the worker last recorded in the store, and why.

use paywatch_core::Reason;
use paywatch_core::config::{ChainsConfig, NetworkConfig};
use paywatch_core::health::{LastSeen, WorkerState, worker_state};
use paywatch_store::{Store, StoreError};
use serde::Serialize;

use crate::QueryError;

/// One network's health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct NetworkHealth {
    /// CAIP-2 id.
    pub network: String,
    /// What its worker is doing.
    pub worker: WorkerState,
    /// How long it may go without completing a step before it is `stalled`: three poll
    /// intervals, or the RPC timeout if longer.
    pub stall_after_secs: u64,
    /// Seconds since it last completed a step.
    pub last_step_secs_ago: Option<u64>,
    /// The chain head the node last answered (taken or not: a node behind the recorded
    /// head is not read).
    pub seen_head: Option<u64>,
    /// Blocks (slots) between the recorded head and the next block to read.
    pub lag_blocks: Option<u64>,
    /// Its last failed step, if one failed since it started: what went wrong.
    pub last_failure: Option<String>,
    /// Seconds since that failure.
    pub last_failure_secs_ago: Option<u64>,
    /// The RPC endpoints it dropped from rotation for serving another chain, each with
    /// what it serves.
    pub refused_endpoints: Vec<String>,
    /// Why it stopped for good, if it did: fix what it names, then restart paywatch.
    pub stopped: Option<String>,
}

fn seconds(ms: Option<i64>) -> Option<u64> {
    ms.map(|ms| u64::try_from(ms.max(0) / 1_000).unwrap_or_default())
}

/// The health of `network`, from what its worker last recorded on `store`.
pub async fn network_health(store: &Store, network: &NetworkConfig) -> Result<NetworkHealth, StoreError> {
    let id = network.id.to_string();
    let recorded = store.worker_health(&id).await?;
    let head = store.chain_head(&id).await?;
    let next_block = store.cursors(&id).await?.iter().map(|c| c.next_block).min();
    let lag_blocks = head
        .zip(next_block)
        .map(|(head, next)| (head.head_block + 1).saturating_sub(next));
    let seen = recorded.as_ref().map_or_else(LastSeen::default, |r| LastSeen {
        started_ago_ms: Some(r.started_ago_ms),
        stepped_ago_ms: r.stepped_ago_ms,
        stopped: r.stopped.is_some(),
        lag_blocks,
    });
    let stall_after = network.stall_after();
    Ok(NetworkHealth {
        worker: worker_state(seen, stall_after, network.lagging_blocks),
        stall_after_secs: stall_after.as_secs(),
        last_step_secs_ago: seconds(seen.stepped_ago_ms),
        seen_head: recorded.as_ref().and_then(|r| r.seen_head),
        lag_blocks,
        last_failure: recorded.as_ref().and_then(|r| r.failure.clone()),
        last_failure_secs_ago: seconds(recorded.as_ref().and_then(|r| r.failed_ago_ms)),
        refused_endpoints: recorded
            .as_ref()
            .map(|r| r.refused_endpoints.clone())
            .unwrap_or_default(),
        stopped: recorded.and_then(|r| r.stopped),
        network: id,
    })
}

/// Every network's health, for a readiness probe: ready unless one is stalled or stopped
/// (`network_stalled`, naming each and why), or the store does not answer.
pub async fn readiness(store: &Store, chains: &ChainsConfig) -> Result<Vec<NetworkHealth>, QueryError> {
    let mut networks = Vec::with_capacity(chains.networks.len());
    for network in &chains.networks {
        networks.push(network_health(store, network).await.map_err(QueryError::store)?);
    }
    let unready: Vec<String> = networks
        .iter()
        .filter(|n| n.worker.blocks_readiness())
        .map(|n| {
            let why = n
                .stopped
                .clone()
                .or_else(|| n.last_failure.clone())
                .unwrap_or_else(|| "no step completed".to_string());
            format!("{} is {}: {why}", n.network, n.worker)
        })
        .collect();
    if !unready.is_empty() {
        return Err(QueryError::new(
            Reason::NetworkStalled,
            format!("{}; paywatch status says more", unready.join("; ")),
        ));
    }
    Ok(networks)
}
