//! A network's RPC endpoints: each call bounded by a timeout, retried with exponential
//! backoff and jitter (`backon`) while its failure is retryable, failing over to the next
//! endpoint on any failure but a rate limit, and counted in the same metrics on every chain.
//! With an identity check (the chain id an EVM node serves, a Solana cluster's genesis
//! hash), no endpoint is read before it answered it right: at first use, and again each
//! time the set switches to it; one that serves another chain is dropped from rotation
//! for good.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};
use futures::future::BoxFuture;
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
    /// The failure of a call that found no endpoint it may read: the active one could not
    /// say which chain it serves, or serves another (retryable: the next endpoint may).
    fn unusable(detail: String) -> Self;
}

/// What an endpoint answered when asked which chain it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// The network's own.
    Expected,
    /// Another: what it serves and what was expected, in words (`chain id 1, not 8453`).
    Other(String),
}

/// Asks an endpoint's client which chain it serves; `Err` with the reason when it cannot
/// tell (no answer).
pub type IdentityCheck<C> = Arc<dyn Fn(C) -> BoxFuture<'static, Result<Identity, String>> + Send + Sync>;

/// Whether an endpoint was checked to serve the network's chain.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Checked {
    /// Not since the set last switched to it (or ever): checked before its next use.
    No,
    /// It answered the expected identity since the set last switched to it.
    Yes,
    /// It serves another chain (what it answered): never read again.
    Refused(String),
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
pub struct Endpoints<C> {
    network: String,
    metrics: ChainMetrics,
    endpoints: Vec<(Url, C)>,
    checked: Mutex<Vec<Checked>>,
    identity: Option<IdentityCheck<C>>,
    active: AtomicUsize,
    timeout: Duration,
    backoff: ExponentialBuilder,
}

impl<C> std::fmt::Debug for Endpoints<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoints")
            .field("network", &self.network)
            .field(
                "urls",
                &self
                    .endpoints
                    .iter()
                    .map(|(url, _)| redact(url))
                    .collect::<Vec<_>>(),
            )
            .field("active", &self.active)
            .finish_non_exhaustive()
    }
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
            checked: Mutex::new(vec![Checked::No; endpoints.len()]),
            endpoints,
            identity: None,
            active: AtomicUsize::new(0),
            timeout,
            backoff: default_backoff(),
        })
    }

    /// Reads no endpoint before `check` says it serves the network's chain.
    pub fn with_identity(mut self, check: IdentityCheck<C>) -> Self {
        self.identity = Some(check);
        self
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
        let (url, client) = &self.endpoints[self.active_index()];
        (url, client)
    }

    fn active_index(&self) -> usize {
        self.active.load(Ordering::Relaxed) % self.endpoints.len()
    }

    fn checked(&self) -> std::sync::MutexGuard<'_, Vec<Checked>> {
        self.checked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The endpoints dropped from rotation because they serve another chain, each as
    /// `scheme://host:port: what it serves`.
    pub fn refused(&self) -> Vec<String> {
        self.checked()
            .iter()
            .zip(&self.endpoints)
            .filter_map(|(checked, (url, _))| match checked {
                Checked::Refused(serves) => Some(format!("{}: serves {serves}", redact(url))),
                _ => None,
            })
            .collect()
    }

    /// Moves on from the active endpoint to the next one not refused, which is checked
    /// again before it is read (`why` is logged): a standby may have been moved to another
    /// chain while it was not read.
    pub fn fail_over(&self, why: &str) {
        let mut checked = self.checked();
        let current = self.active_index();
        let count = self.endpoints.len();
        let next = (1..=count)
            .map(|step| (current + step) % count)
            .find(|i| !matches!(checked[*i], Checked::Refused(_)));
        if let Some(next) = next.filter(|next| *next != current) {
            if checked[next] == Checked::Yes {
                checked[next] = Checked::No;
            }
            self.active.store(next, Ordering::Relaxed);
            tracing::warn!(
                network = %self.network,
                from = %redact(&self.endpoints[current].0),
                to = %redact(&self.endpoints[next].0),
                why,
                "switching RPC endpoint"
            );
        }
    }

    /// Asks endpoint `index` which chain it serves, unless it answered right since it last
    /// failed: refuses it for good (an ERROR naming it) when it serves another chain.
    async fn check(&self, index: usize) -> Result<(), String> {
        let Some(identity) = &self.identity else {
            return Ok(());
        };
        match self.checked()[index].clone() {
            Checked::Yes => return Ok(()),
            Checked::Refused(serves) => return Err(self.refusal(index, &serves)),
            Checked::No => {}
        }
        let asked = tokio::time::timeout(self.timeout, identity(self.endpoints[index].1.clone())).await;
        match asked {
            Ok(Ok(Identity::Expected)) => {
                self.checked()[index] = Checked::Yes;
                Ok(())
            }
            Ok(Ok(Identity::Other(serves))) => {
                let refusal = self.refusal(index, &serves);
                tracing::error!(network = %self.network, endpoint = %redact(&self.endpoints[index].0), serves, "{refusal}");
                self.metrics.endpoint_refused(&redact(&self.endpoints[index].0));
                self.checked()[index] = Checked::Refused(serves);
                Err(refusal)
            }
            Ok(Err(reason)) => Err(format!(
                "{} could not say which chain it serves: {reason}",
                redact(&self.endpoints[index].0)
            )),
            Err(_) => Err(format!(
                "{} did not say which chain it serves within {:?}",
                redact(&self.endpoints[index].0),
                self.timeout
            )),
        }
    }

    fn refusal(&self, index: usize, serves: &str) -> String {
        format!(
            "the RPC endpoint {} serves {serves}: dropped from rotation, never read; fix rpc_urls or verify_rpc_urls in chains.toml",
            redact(&self.endpoints[index].0)
        )
    }

    /// How many endpoints the set has (refused ones included).
    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// Whether the set is empty (never: [`Self::new`] refuses that).
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// Runs `method` once on endpoint `index`, checked first (which chain it serves) and
    /// bounded by the timeout, counted in the metrics.
    async fn call_on<T, E, F, Fut>(&self, index: usize, method: &'static str, op: &F) -> Result<T, E>
    where
        E: RpcFailure,
        F: Fn(C) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.check(index).await.map_err(E::unusable)?;
        let started = Instant::now();
        let result = match tokio::time::timeout(self.timeout, op(self.endpoints[index].1.clone())).await {
            Ok(result) => result,
            Err(_) => Err(E::timed_out(self.timeout)),
        };
        self.metrics.rpc_call(
            method,
            started.elapsed().as_secs_f64(),
            result.as_ref().err().map(RpcFailure::label),
        );
        result
    }

    /// Runs `method` once on every endpoint but the active one and those refused, each
    /// checked first and bounded by the timeout, without retries or failover: what each
    /// answered, by its redacted URL. For a second opinion on what the active one says.
    pub async fn ask_the_others<T, E, F, Fut>(
        &self,
        method: &'static str,
        op: F,
    ) -> Vec<(String, Result<T, E>)>
    where
        E: RpcFailure,
        F: Fn(C) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let active = self.active_index();
        let mut answers = Vec::new();
        for index in (0..self.endpoints.len()).filter(|i| *i != active) {
            if matches!(self.checked()[index], Checked::Refused(_)) {
                continue;
            }
            answers.push((
                redact(&self.endpoints[index].0),
                self.call_on(index, method, &op).await,
            ));
        }
        answers
    }

    /// Asks the active endpoint which chain it serves again now, before its word changes
    /// something that cannot be taken back; `Err` (it is refused, or could not tell) when
    /// its word is not to be taken.
    pub async fn recheck_active(&self) -> Result<(), String> {
        let index = self.active_index();
        {
            let mut checked = self.checked();
            if checked[index] == Checked::Yes {
                checked[index] = Checked::No;
            }
        }
        self.check(index).await
    }

    /// The check at start: every endpoint is asked which chain it serves now. `Ok(None)`
    /// when one serves the network's; `Ok(Some(…))` when every one serves another (each
    /// with what it serves: the configuration is wrong); `Err` when none serves it and one
    /// could not tell (ask again later).
    pub async fn refused_at_start(&self) -> Result<Option<String>, String> {
        let answers = self.check_all().await;
        if answers.iter().any(|answer| answer == &Ok(true)) {
            return Ok(None);
        }
        match answers.into_iter().find_map(Result::err) {
            Some(reason) => Err(reason),
            None => Ok(Some(self.refused().join("; "))),
        }
    }

    /// Checks every endpoint's identity now: the answer of each, in order, as
    /// [`Self::refused`] and [`Self::call`] will see them. `Ok(true)` for an endpoint that
    /// serves the network's chain, `Ok(false)` for one refused, `Err` for one that could not
    /// tell (it is checked again at its first use).
    async fn check_all(&self) -> Vec<Result<bool, String>> {
        let mut answers = Vec::with_capacity(self.endpoints.len());
        for index in 0..self.endpoints.len() {
            answers.push(match self.check(index).await {
                Ok(()) => Ok(true),
                Err(_) if matches!(self.checked()[index], Checked::Refused(_)) => Ok(false),
                Err(reason) => Err(reason),
            });
        }
        if matches!(self.checked()[self.active_index()], Checked::Refused(_)) {
            self.fail_over("it serves another chain");
        }
        answers
    }

    /// Runs `method` on the active endpoint's client with the timeout, retries, failover
    /// and metrics (`paywatch_rpc_latency_seconds`, `paywatch_rpc_errors_total`).
    pub async fn call<T, E, F, Fut>(&self, method: &'static str, op: F) -> Result<T, E>
    where
        E: RpcFailure,
        F: Fn(C) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let attempt = || self.call_on(self.active_index(), method, &op);
        attempt
            .retry(self.backoff)
            .when(E::is_retryable)
            .notify(|failure: &E, delay| {
                tracing::warn!(
                    network = %self.network, method, %failure, ?delay,
                    endpoint = %redact(self.active().0), "RPC call failed; retrying"
                );
                if !failure.is_rate_limit() {
                    self.fail_over("a call failed");
                }
            })
            .await
    }
}

/// A URL without its path, query and credentials (API keys often live there), for logs:
/// its scheme, host and port.
pub fn redact(url: &Url) -> String {
    match url.port() {
        Some(port) => format!("{}://{}:{port}", url.scheme(), url.host_str().unwrap_or("?")),
        None => format!("{}://{}", url.scheme(), url.host_str().unwrap_or("?")),
    }
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
        fn unusable(_: String) -> Self {
            Self::Broken
        }
    }

    /// Endpoints at `urls` (each its own client), with a 50 ms timeout and `retries` fast
    /// retries.
    fn endpoints_at(urls: &[&'static str], retries: usize) -> Endpoints<&'static str> {
        Endpoints::new(
            "test",
            urls.iter().map(|u| (Url::parse(u).unwrap(), *u)).collect(),
            Duration::from_millis(50),
        )
        .unwrap()
        .with_backoff(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(1))
                .with_max_times(retries),
        )
    }

    fn endpoints() -> Endpoints<&'static str> {
        endpoints_at(&["http://a.example/key", "http://b.example/key"], 3)
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

    /// Endpoints `a`, `b`, `c` where `b` serves another chain, and whose identity checks
    /// are counted.
    fn checked_endpoints(asked: Arc<AtomicU32>) -> Endpoints<&'static str> {
        let urls = [
            "http://a.example:1/key",
            "http://b.example:2/key",
            "http://c.example:3/key",
        ];
        endpoints_at(&urls, 5).with_identity(Arc::new(move |client: &'static str| {
            asked.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                Ok(match client.contains("b.example") {
                    true => Identity::Other("chain id 1, not 8453".to_string()),
                    false => Identity::Expected,
                })
            })
        }))
    }

    /// A call that fails on the first endpoint it reaches and answers with the next one's
    /// client: the answer, and how many times it ran.
    async fn failing_once(rpc: &Endpoints<&'static str>) -> (Result<&'static str, Failure>, u32) {
        let calls = AtomicU32::new(0);
        let answer = rpc
            .call("m", |client| {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                async move {
                    match n {
                        0 => Err(Failure::Broken),
                        _ => Ok(client),
                    }
                }
            })
            .await;
        (answer, calls.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn never_reads_an_endpoint_on_another_chain() {
        let asked = Arc::new(AtomicU32::new(0));
        let rpc = checked_endpoints(asked.clone());
        // `a` fails once: the set moves on to `b`, finds it on another chain, refuses it
        // for good and moves on to `c`.
        assert_eq!(
            failing_once(&rpc).await,
            (Ok("http://c.example:3/key"), 2),
            "b never read"
        );
        assert_eq!(rpc.refused(), ["http://b.example:2: serves chain id 1, not 8453"]);
        assert_eq!(asked.load(Ordering::SeqCst), 3, "a, b and c each checked once");
        // `c` fails: the set switches to `a`, which is checked again; `b` is skipped.
        assert_eq!(failing_once(&rpc).await, (Ok("http://a.example:1/key"), 2));
        assert_eq!(asked.load(Ordering::SeqCst), 4, "a checked again, b not asked");
        // At start, every endpoint is checked: the refused one stays refused.
        let fresh = checked_endpoints(Arc::new(AtomicU32::new(0)));
        assert_eq!(
            fresh.refused_at_start().await,
            Ok(None),
            "a and c serve the chain"
        );
        assert_eq!(
            fresh.check_all().await,
            [Ok(true), Ok(false), Ok(true)],
            "b is on another chain"
        );
    }

    #[test]
    fn redacts_and_truncates() {
        let url = Url::parse("https://user:pw@rpc.example/v2/SECRET?key=x").unwrap();
        assert_eq!(redact(&url), "https://rpc.example");
        let local = Url::parse("http://127.0.0.1:8545/key").unwrap();
        assert_eq!(redact(&local), "http://127.0.0.1:8545");
        assert_eq!(truncate("short"), "short");
        let long = "é".repeat(400);
        assert_eq!(truncate(&long).chars().count(), 301);
    }
}
