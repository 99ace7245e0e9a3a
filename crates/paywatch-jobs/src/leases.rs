//! Runs a writing job (a network's worker, a webhook sink) only while this process holds
//! its lease, for several `paywatch run` processes on one Postgres: wait for the lease,
//! run the job on a store fenced by it, renew it every third of its time to live, and stop
//! the job as soon as a renewal finds it lost (or renewals fail for a whole time to live);
//! then wait for it again. At shutdown the lease is released, so a peer takes it at its
//! next try instead of waiting for it to lapse.

use std::future::Future;
use std::time::{Duration, Instant};

use paywatch_store::Store;
use tokio_util::sync::CancellationToken;

/// This process's name in the lease table: host, process id and a random part.
pub fn owner_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string());
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{host}:{}:{nonce:08x}", std::process::id())
}

/// The lease name of a network's worker.
pub fn worker_job(network: &impl std::fmt::Display) -> String {
    format!("worker:{network}")
}

/// The lease name of a network's scheduled audit.
pub fn audit_job(network: &impl std::fmt::Display) -> String {
    format!("audit:{network}")
}

/// The lease name of a webhook sink's sender.
pub fn webhook_job(name: &str) -> String {
    format!("webhook:{name}")
}

/// One leased job.
#[derive(Debug, Clone)]
pub struct LeasedJob {
    /// `worker:<network>`, `audit:<network>` or `webhook:<name>`.
    pub job: String,
    /// This process.
    pub owner: String,
    /// How long a lease lives without renewal.
    pub ttl: Duration,
}

impl LeasedJob {
    /// Runs `start(fenced_store, stop)` whenever this process holds the lease, until
    /// `shutdown`; the job must end soon after `stop` is cancelled.
    pub async fn run<F, Fut>(
        self,
        store: Store,
        shutdown: CancellationToken,
        mut start: F,
    ) -> anyhow::Result<()>
    where
        F: FnMut(Store, CancellationToken) -> Fut,
        Fut: Future<Output = anyhow::Result<()>>,
    {
        loop {
            if !self.wait_for_lease(&store, &shutdown).await {
                return Ok(());
            }
            tracing::info!(job = %self.job, owner = %self.owner, "lease acquired; running the job");
            metrics::counter!("paywatch_lease_changes_total", "job" => self.job.clone(), "change" => "acquired")
                .increment(1);
            metrics::gauge!("paywatch_lease_held", "job" => self.job.clone()).set(1.0);
            let stop = shutdown.child_token();
            let job = start(store.fenced(&self.job, &self.owner), stop.clone());
            tokio::pin!(job);
            let outcome = tokio::select! {
                result = &mut job => Some(result),
                () = self.keep_renewing(&store) => None,
            };
            metrics::gauge!("paywatch_lease_held", "job" => self.job.clone()).set(0.0);
            match outcome {
                Some(result) => {
                    if let Err(error) = store.release_lease(&self.job, &self.owner).await {
                        tracing::warn!(job = %self.job, %error, "cannot release the lease; it will lapse");
                    }
                    return result;
                }
                None => {
                    tracing::warn!(job = %self.job, owner = %self.owner, "lease lost; stopping the job and waiting to take it again");
                    metrics::counter!("paywatch_lease_changes_total", "job" => self.job.clone(), "change" => "lost")
                        .increment(1);
                    stop.cancel();
                    if let Err(error) = job.await {
                        tracing::warn!(job = %self.job, %error, "the job ended with an error after losing its lease");
                    }
                }
            }
        }
    }

    /// How often the lease is tried for and renewed: a third of its time to live.
    fn beat(&self) -> Duration {
        self.ttl / 3
    }

    /// Tries for the lease every beat until it is taken (true) or shutdown (false).
    async fn wait_for_lease(&self, store: &Store, shutdown: &CancellationToken) -> bool {
        let mut announced = false;
        loop {
            match store.acquire_lease(&self.job, &self.owner, self.ttl).await {
                Ok(true) => return true,
                Ok(false) if !announced => {
                    tracing::info!(job = %self.job, "another process holds the lease; standing by");
                    announced = true;
                }
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(job = %self.job, %error, "cannot reach the lease table; retrying")
                }
            }
            tokio::select! {
                () = tokio::time::sleep(self.beat()) => {}
                () = shutdown.cancelled() => return false,
            }
        }
    }

    /// Renews the held lease every beat; returns when it is lost, or when no renewal
    /// succeeded for a whole time to live (it has lapsed by then).
    pub async fn keep_renewing(&self, store: &Store) {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(self.beat()).await;
            match store.acquire_lease(&self.job, &self.owner, self.ttl).await {
                Ok(true) => renewed = Instant::now(),
                Ok(false) => return,
                Err(error) => {
                    tracing::warn!(job = %self.job, %error, "cannot renew the lease");
                    if renewed.elapsed() >= self.ttl {
                        return;
                    }
                }
            }
        }
    }
}
