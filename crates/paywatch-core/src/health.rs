//! A network worker's health as operators read it (`paywatch status`, `/readyz`): whether
//! it is running, catching up, lagging, stalled or stopped, from what it last recorded.

use std::time::Duration;

/// What a network's worker is doing, as `status` and `/readyz` name it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum WorkerState {
    /// No worker has recorded a step on this store yet (none runs, or it is starting).
    NotStarted,
    /// Stepping, and within `lagging_blocks` of the head.
    Running,
    /// Stepping, but more than `lagging_blocks` behind the head (a backfill, or a node
    /// faster than paywatch reads).
    Lagging,
    /// No step completed for longer than [`stall_after`]: the node does not answer, answers
    /// what paywatch refuses, or the store does not take the commits.
    Stalled,
    /// Stopped for good by an error retrying cannot heal (its reason says what to do), or
    /// at shutdown.
    Stopped,
}

impl WorkerState {
    /// Whether a network in this state keeps a readiness probe from answering 200: it
    /// stalled or stopped, so its answers grow stale. (Not started and lagging are ready:
    /// a backfill answers what it has read, and says how far it is.)
    pub fn blocks_readiness(self) -> bool {
        matches!(self, Self::Stalled | Self::Stopped)
    }
}

/// How long a worker may go without completing a step before it counts as stalled: three
/// poll intervals, or the RPC timeout if that is longer (one slow call is not a stall).
pub fn stall_after(poll_interval: Duration, rpc_timeout: Duration) -> Duration {
    (poll_interval * 3).max(rpc_timeout)
}

/// What a worker last recorded, as the rule needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LastSeen {
    /// Milliseconds since the worker (re)started, if one did.
    pub started_ago_ms: Option<i64>,
    /// Milliseconds since it last completed a step, if it did since it started.
    pub stepped_ago_ms: Option<i64>,
    /// Whether it stopped for good.
    pub stopped: bool,
    /// Blocks between the head it last saw and the next block it reads.
    pub lag_blocks: Option<u64>,
}

/// The state of a worker that last recorded `seen`, under the network's `stall_after` and
/// `lagging_blocks`.
pub fn worker_state(seen: LastSeen, stall_after: Duration, lagging_blocks: u64) -> WorkerState {
    let stall_ms = i64::try_from(stall_after.as_millis()).unwrap_or(i64::MAX);
    if seen.stopped {
        return WorkerState::Stopped;
    }
    let quiet_ms = match (seen.stepped_ago_ms, seen.started_ago_ms) {
        (Some(stepped), _) => stepped,
        (None, Some(started)) => started,
        (None, None) => return WorkerState::NotStarted,
    };
    if quiet_ms > stall_ms {
        return WorkerState::Stalled;
    }
    match seen.lag_blocks {
        Some(lag) if lag > lagging_blocks => WorkerState::Lagging,
        _ => WorkerState::Running,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_stalled_after_three_polls_or_the_rpc_timeout() {
        assert_eq!(
            stall_after(Duration::from_secs(2), Duration::from_secs(20)),
            Duration::from_secs(20)
        );
        assert_eq!(
            stall_after(Duration::from_secs(12), Duration::from_secs(20)),
            Duration::from_secs(36)
        );
    }

    #[test]
    fn states_follow_what_the_worker_last_recorded() {
        let stall = Duration::from_secs(20);
        let seen = |started, stepped, lag| LastSeen {
            started_ago_ms: started,
            stepped_ago_ms: stepped,
            stopped: false,
            lag_blocks: lag,
        };
        assert_eq!(
            worker_state(LastSeen::default(), stall, 100),
            WorkerState::NotStarted
        );
        assert_eq!(
            worker_state(seen(Some(1_000), None, None), stall, 100),
            WorkerState::Running,
            "starting"
        );
        assert_eq!(
            worker_state(seen(Some(21_000), None, None), stall, 100),
            WorkerState::Stalled,
            "started, never stepped"
        );
        assert_eq!(
            worker_state(seen(Some(99_000), Some(500), Some(3)), stall, 100),
            WorkerState::Running
        );
        assert_eq!(
            worker_state(seen(Some(99_000), Some(500), Some(101)), stall, 100),
            WorkerState::Lagging
        );
        assert_eq!(
            worker_state(seen(Some(99_000), Some(20_001), Some(0)), stall, 100),
            WorkerState::Stalled
        );
        let stopped = LastSeen {
            stopped: true,
            ..seen(Some(1), Some(1), Some(0))
        };
        assert_eq!(worker_state(stopped, stall, 100), WorkerState::Stopped);
        assert!(WorkerState::Stalled.blocks_readiness() && WorkerState::Stopped.blocks_readiness());
        assert!(!WorkerState::Lagging.blocks_readiness() && !WorkerState::NotStarted.blocks_readiness());
    }
}
