//! A network's RPC endpoints: each call bounded by a timeout, retried with exponential
//! backoff and jitter (`backon`) while its failure is retryable, failing over to the next
//! endpoint on any failure but a rate limit, and counted in the same metrics on every chain.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};
use url::Url;

use crate::metrics::ChainMetrics;

/// What the runtime needs to know of a chain's RPC failure.
pub trait RpcFailure: std::fmt::Display {
    /// The failure of a call that did not answer within `after`.
    fn timed_out(after: Duration) -> Self;
    /// A short label for the `kind` of `paywatch_rpc_errors_total`.
    fn label(&self) -> &'static str;
    /// Whether the same call may succeed if tried again.
    fn is_retryable(&self) -> bool;
    /// Whether the node asked to slow down (retried on the same endpoint, not failed over).
    fn is_rate_limit(&self) -> bool;
}

/// The retry policy of every RPC call: 100 ms doubling to 10 s, six retries, with jitter.
pub fn default_backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(10))
        .with_max_times(6)
        .with_jitter()
}

/// The retry policy of a call a request waits on (the API's chain calls): fewer, shorter
/// retries than a worker's — 100 ms doubling to 1 s, two retries, with jitter.
pub fn request_backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(1))
        .with_max_times(2)
        .with_jitter()
}

/// The endpoints of one network, each with its client `C`; one is active at a time.
#[derive(Debug)]
pub struct Endpoints<C> {
    network: String,
    metrics: ChainMetrics,
    endpoints: Vec<(Url, C)>,
    active: AtomicUsize,
    timeout: Duration,
    backoff: ExponentialBuilder,
}

impl<C: Clone> Endpoints<C> {
    /// The endpoints of `network`, in failover order; `None` when there is none.
    pub fn new(network: &str, endpoints: Vec<(Url, C)>, timeout: Duration) -> Option<Self> {
        if endpoints.is_empty() {
            return None;
        }
        Some(Self {
            network: network.to_string(),
            metrics: ChainMetrics::new(network),
            endpoints,
            active: AtomicUsize::new(0),
            timeout,
            backoff: default_backoff(),
        })
    }

    /// Replaces the retry policy (tests and benchmarks use a faster one).
    pub fn with_backoff(mut self, backoff: ExponentialBuilder) -> Self {
        self.backoff = backoff;
        self
    }

    /// The network's name, for logs and metric labels.
    pub fn network(&self) -> &str {
        &self.network
    }

    /// The active endpoint's URL and client.
    pub fn active(&self) -> (&Url, &C) {
        let (url, client) = &self.endpoints[self.active.load(Ordering::Relaxed) % self.endpoints.len()];
        (url, client)
    }

    fn fail_over(&self) {
        if self.endpoints.len() > 1 {
            let next = self.active.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::warn!(
                network = %self.network,
                url = %redact(&self.endpoints[next % self.endpoints.len()].0),
                "switching RPC endpoint"
            );
        }
    }

    /// Runs `method` on the active endpoint's client with the timeout, retries, failover
    /// and metrics (`paywatch_rpc_latency_seconds`, `paywatch_rpc_errors_total`).
    pub async fn call<T, E, F, Fut>(&self, method: &'static str, op: F) -> Result<T, E>
    where
        E: RpcFailure,
        F: Fn(C) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let attempt = || async {
            let started = Instant::now();
            let result = match tokio::time::timeout(self.timeout, op(self.active().1.clone())).await {
                Ok(result) => result,
                Err(_) => Err(E::timed_out(self.timeout)),
            };
            self.metrics.rpc_call(
                method,
                started.elapsed().as_secs_f64(),
                result.as_ref().err().map(RpcFailure::label),
            );
            result
        };
        attempt
            .retry(self.backoff)
            .when(E::is_retryable)
            .notify(|failure: &E, delay| {
                tracing::warn!(network = %self.network, method, %failure, ?delay, "RPC call failed; retrying");
                if !failure.is_rate_limit() {
                    self.fail_over();
                }
            })
            .await
    }
}

/// A URL without its path, query and credentials (API keys often live there), for logs.
pub fn redact(url: &Url) -> String {
    format!("{}://{}", url.scheme(), url.host_str().unwrap_or("?"))
}

/// At most 300 characters of a node's text (an error body), for logs and errors.
pub fn truncate(text: &str) -> String {
    const MAX: usize = 300;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use super::*;

    #[derive(Debug, PartialEq)]
    enum Failure {
        Slow,
        Limited,
        Broken,
        Missing,
    }

    impl std::fmt::Display for Failure {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{self:?}")
        }
    }

    impl RpcFailure for Failure {
        fn timed_out(_: Duration) -> Self {
            Self::Slow
        }
        fn label(&self) -> &'static str {
            "test"
        }
        fn is_retryable(&self) -> bool {
            *self != Self::Missing
        }
        fn is_rate_limit(&self) -> bool {
            *self == Self::Limited
        }
    }

    fn endpoints() -> Endpoints<&'static str> {
        let urls = ["http://a.example/key", "http://b.example/key"];
        Endpoints::new(
            "test",
            urls.iter().map(|u| (Url::parse(u).unwrap(), *u)).collect(),
            Duration::from_millis(50),
        )
        .unwrap()
        .with_backoff(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(1))
                .with_max_times(3),
        )
    }

    #[tokio::test]
    async fn fails_over_on_errors_and_stays_on_rate_limits() {
        let rpc = endpoints();
        let calls = AtomicU32::new(0);
        let answer = rpc
            .call("m", |client| {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                async move {
                    match n {
                        0 => Err(Failure::Broken),
                        1 => Err(Failure::Limited),
                        _ => Ok(client),
                    }
                }
            })
            .await;
        assert_eq!(
            answer,
            Ok("http://b.example/key"),
            "broken moves on, a rate limit stays"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn times_out_gives_up_and_does_not_retry_what_cannot_succeed() {
        let rpc = endpoints();
        let slow = rpc
            .call("m", |_| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok::<(), Failure>(())
            })
            .await;
        assert_eq!(slow, Err(Failure::Slow));
        let calls = AtomicU32::new(0);
        let missing = rpc
            .call("m", |_| {
                calls.fetch_add(1, Ordering::SeqCst);
                async { Err::<(), _>(Failure::Missing) }
            })
            .await;
        assert_eq!(missing, Err(Failure::Missing));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(Endpoints::<()>::new("none", Vec::new(), Duration::from_secs(1)).is_none());
    }

    #[test]
    fn redacts_and_truncates() {
        let url = Url::parse("https://user:pw@rpc.example/v2/SECRET?key=x").unwrap();
        assert_eq!(redact(&url), "https://rpc.example");
        assert_eq!(truncate("short"), "short");
        let long = "é".repeat(400);
        assert_eq!(truncate(&long).chars().count(), 301);
    }
}
