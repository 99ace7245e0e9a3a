//! The loop every chain worker runs: a step at a time until shutdown, pausing when caught
//! up (until the poll interval or an earlier wake-up, such as a new head) and backing off
//! after a failed step, with the same logs and metrics on every chain.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};
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
    Store(#[from] paywatch_store::StoreError),
}

/// What a step achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// It read something: the next step goes at once.
    Advanced,
    /// Nothing new: the next step waits for the poll interval (or a wake-up).
    CaughtUp,
}

/// A chain worker as the runtime drives it: one step reads and commits what is new.
pub trait Stage: Send {
    /// Why a step failed; the step is tried again after a backoff.
    type Error: Display + Send;

    /// The network's name, for logs and metric labels.
    fn network(&self) -> &str;

    /// How long to wait between steps when caught up.
    fn poll_interval(&self) -> Duration;

    /// One step; its commit is atomic, so a step abandoned at shutdown writes nothing.
    fn advance(&mut self) -> impl Future<Output = Result<Progress, Self::Error>> + Send;
}

/// The pause after `failures` failed steps in a row: 250 ms doubling, at most 30 s.
fn backoff(failures: u32) -> Duration {
    Duration::from_millis(250u64.saturating_mul(1 << failures.min(7))).min(Duration::from_secs(30))
}

/// Runs `stage` until `shutdown` is cancelled. `wake`, when given, ends a caught-up pause
/// early (a WebSocket's new heads). A step in progress at shutdown is abandoned before
/// its commit.
pub async fn drive<S: Stage>(
    stage: &mut S,
    mut wake: Option<BoxStream<'static, ()>>,
    shutdown: &CancellationToken,
) {
    let metrics = ChainMetrics::new(stage.network());
    let mut failures: u32 = 0;
    while !shutdown.is_cancelled() {
        let outcome = tokio::select! {
            outcome = stage.advance() => outcome,
            () = shutdown.cancelled() => break,
        };
        let pause = match outcome {
            Ok(Progress::Advanced) => {
                failures = 0;
                continue;
            }
            Ok(Progress::CaughtUp) => {
                failures = 0;
                stage.poll_interval()
            }
            Err(error) => {
                failures = failures.saturating_add(1);
                tracing::error!(network = %stage.network(), %error, failures, "worker step failed");
                metrics.worker_error();
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

    /// Fails twice, advances twice, then is caught up; cancels shutdown after `steps`.
    struct Scripted {
        steps: u32,
        shutdown: CancellationToken,
    }

    impl Stage for Scripted {
        type Error = String;

        fn network(&self) -> &str {
            "test"
        }

        fn poll_interval(&self) -> Duration {
            Duration::from_millis(1)
        }

        async fn advance(&mut self) -> Result<Progress, String> {
            self.steps += 1;
            if self.steps == 6 {
                self.shutdown.cancel();
            }
            match self.steps {
                1 | 2 => Err("node down".to_string()),
                3 | 4 => Ok(Progress::Advanced),
                _ => Ok(Progress::CaughtUp),
            }
        }
    }

    #[tokio::test]
    async fn steps_until_shutdown_through_failures() {
        let shutdown = CancellationToken::new();
        let mut stage = Scripted {
            steps: 0,
            shutdown: shutdown.clone(),
        };
        drive(&mut stage, None, &shutdown).await;
        assert_eq!(stage.steps, 6);
    }

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
