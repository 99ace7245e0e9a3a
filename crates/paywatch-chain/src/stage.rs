//! The loop every chain worker runs: a step at a time until shutdown, pausing when caught
//! up (until the poll interval or an earlier wake-up, such as a new head) and backing off
//! after a failed step, recording in the store what it last did (for `status` and
//! `/readyz`), and stopping the worker for good on an error retrying cannot heal, with
//! the same logs and metrics on every chain.

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

use futures::stream::{BoxStream, StreamExt};
use paywatch_store::{Store, StoreError};
use tokio_util::sync::CancellationToken;

use crate::metrics::ChainMetrics;

/// Why a step did not complete: the loop logs it and tries again. `Fault` is the chain's
/// RPC failure after retries, `Bad` an impossible answer of its node; each chain crate
/// converts its own into this with `From`.
#[derive(Debug, thiserror::Error)]
pub enum StepError<Fault, Bad> {
    /// The RPC failed after retries.
    #[error("RPC: {0}")]
    Rpc(Fault),
    /// The RPC answered something impossible.
    #[error("bad RPC answer: {0}")]
    BadAnswer(Bad),
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
}

/// A step's failure as the loop needs to know it.
pub trait StepFailure: Display + Send {
    /// Whether trying again cannot heal it: the worker stops for good.
    fn is_fatal(&self) -> bool;
}

impl<Fault: Display + Send, Bad: Display + Send> StepFailure for StepError<Fault, Bad> {
    fn is_fatal(&self) -> bool {
        matches!(self, Self::Store(error) if error.is_fatal())
    }
}

/// What a step achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// It read something: the next step goes at once.
    Advanced,
    /// Nothing new: the next step waits for the poll interval (or a wake-up).
    CaughtUp,
}

/// What a worker knows of its chain beside what it commits, for its health record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// The chain head it last saw.
    pub head: Option<u64>,
    /// The RPC endpoints it refuses because they serve another chain.
    pub refused_endpoints: Vec<String>,
}

/// A chain worker as the runtime drives it: one step reads and commits what is new.
pub trait Stage: Send {
    /// Why a step failed; the step is tried again after a backoff, unless it is fatal.
    type Error: StepFailure;

    /// The network's name, for logs and metric labels.
    fn network(&self) -> &str;

    /// The store it commits to, where its health is recorded too.
    fn store(&self) -> &Store;

    /// What it saw of the chain so far.
    fn seen(&self) -> Seen;

    /// How long to wait between steps when caught up.
    fn poll_interval(&self) -> Duration;

    /// One step; its commit is atomic, so a step abandoned at shutdown writes nothing.
    fn advance(&mut self) -> impl Future<Output = Result<Progress, Self::Error>> + Send;
}

/// The pause after `failures` failed steps in a row: 250 ms doubling, at most 30 s.
fn backoff(failures: u32) -> Duration {
    Duration::from_millis(250u64.saturating_mul(1 << failures.min(7))).min(Duration::from_secs(30))
}

/// How often a worker stepping without pause records that it did.
const STEP_RECORD_INTERVAL: Duration = Duration::from_secs(1);

/// Runs `stage` until `shutdown` is cancelled, or until a step fails in a way retrying
/// cannot heal (logged at ERROR, recorded as the worker's stop, and returned). `wake`, when
/// given, ends a caught-up pause early (a WebSocket's new heads). A step in progress at
/// shutdown is abandoned before its commit.
pub async fn drive<S: Stage>(
    stage: &mut S,
    mut wake: Option<BoxStream<'static, ()>>,
    shutdown: &CancellationToken,
) -> Option<S::Error> {
    let network = stage.network().to_string();
    let metrics = ChainMetrics::new(&network);
    let store = stage.store().clone();
    recorded(&network, "its start", store.worker_started(&network).await);
    metrics.worker_running(true);
    let mut failures: u32 = 0;
    let mut last_recorded: Option<Instant> = None;
    while !shutdown.is_cancelled() {
        let outcome = tokio::select! {
            outcome = stage.advance() => outcome,
            () = shutdown.cancelled() => break,
        };
        let pause = match outcome {
            Ok(progress) => {
                failures = 0;
                metrics.stepped();
                if last_recorded.is_none_or(|at| at.elapsed() >= STEP_RECORD_INTERVAL) {
                    let seen = stage.seen();
                    let stepped = store
                        .worker_stepped(&network, seen.head, &seen.refused_endpoints)
                        .await;
                    recorded(&network, "a step", stepped);
                    last_recorded = Some(Instant::now());
                }
                match progress {
                    Progress::Advanced => continue,
                    Progress::CaughtUp => stage.poll_interval(),
                }
            }
            Err(error) if error.is_fatal() => {
                tracing::error!(
                    network, %error,
                    "WORKER STOPPED: this error does not heal by retrying; the other networks and the API keep running. Fix what it names, then restart paywatch"
                );
                metrics.worker_error();
                metrics.worker_running(false);
                recorded(
                    &network,
                    "its stop",
                    store.worker_stopped(&network, &error.to_string()).await,
                );
                return Some(error);
            }
            Err(error) => {
                failures = failures.saturating_add(1);
                tracing::error!(network, %error, failures, "worker step failed");
                metrics.worker_error();
                let seen = stage.seen();
                let failed = store
                    .worker_failed(&network, &error.to_string(), &seen.refused_endpoints)
                    .await;
                recorded(&network, "a failed step", failed);
                backoff(failures)
            }
        };
        let woken = async {
            match wake.as_mut() {
                Some(stream) => {
                    stream.next().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = woken => {}
            () = shutdown.cancelled() => break,
        }
    }
    None
}

/// Logs a health record that did not reach the store (it is written again at the next
/// step; the store's own failure shows in the step's).
fn recorded(network: &str, what: &str, result: Result<(), StoreError>) {
    if let Err(error) = result {
        tracing::warn!(network, %error, "cannot record the worker's health ({what})");
    }
}

/// Asks `ask` until it answers, logging each failure as `what` and retrying every 5 s;
/// `None` when `shutdown` comes first. For the checks a worker makes before it starts
/// (the chain id or genesis hash the node serves).
pub async fn ask_until_answered<T, E, F, Fut>(
    network: &str,
    what: &str,
    shutdown: &CancellationToken,
    ask: F,
) -> Option<T>
where
    E: Display,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    loop {
        match ask().await {
            Ok(answer) => return Some(answer),
            Err(error) => {
                tracing::error!(network, %error, "cannot read {what}; retrying");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(5)) => {}
                    () = shutdown.cancelled() => return None,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backs_off_exponentially_up_to_thirty_seconds() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(3), Duration::from_secs(2));
        assert_eq!(backoff(40), Duration::from_secs(30));
    }

    #[tokio::test]
    async fn asks_again_until_answered_or_shut_down() {
        let shutdown = CancellationToken::new();
        assert_eq!(
            ask_until_answered("test", "x", &shutdown, || async { Ok::<_, String>(7) }).await,
            Some(7)
        );
        shutdown.cancel();
        assert_eq!(
            ask_until_answered("test", "x", &shutdown, || async { Err::<u8, _>("down") }).await,
            None
        );
    }
}
