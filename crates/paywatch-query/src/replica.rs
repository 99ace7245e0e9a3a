//! Reads from a Postgres streaming replica: which database answers a read, and a bound on
//! how far the replica is behind the primary, from write-ahead log positions sampled on
//! both. Writes, leases and the event stream always use the primary.

use std::collections::VecDeque;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use paywatch_core::Reason;
use paywatch_store::{Backend, Store, StoreError, StoreOptions};
use tokio_util::sync::CancellationToken;

use crate::{Queries, QueryError};

/// How often the replica's freshness is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);
/// How long one sample may take before the database that did not answer is taken as
/// unreachable.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// The most primary positions kept while the replica catches up (ten minutes of
/// samples); older ones are dropped, which only makes the lag bound larger.
const MAX_SAMPLES: usize = 3_000;
/// How long a read waits for a connection to the replica before it fails (and is read
/// again on the primary): a replica that just went away must not hold reads for the
/// pool's usual 30 s.
const REPLICA_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(1);

/// What a read asks of its freshness: the `consistency` query parameter of the HTTP API,
/// the `paywatch-consistency` metadata of the gRPC API.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, strum::EnumString, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Consistency {
    /// The replica while it lags at most the configured bound, else the primary.
    #[default]
    Replica,
    /// The primary: every fact committed before the read.
    Primary,
}

impl Consistency {
    /// Reads a caller's `consistency` value.
    pub fn parse(value: &str) -> Result<Self, QueryError> {
        Self::from_str(value).map_err(|_| {
            QueryError::new(
                Reason::MalformedQuery,
                format!(
                    "consistency `{value}` is not known: use `primary` (every committed fact) or `replica` (the read replica while it lags at most paywatch's --read-max-lag; the default)"
                ),
            )
        })
    }
}

/// Which database answered a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum ReadSource {
    /// The primary, which every writer commits to.
    Primary,
    /// The streaming replica.
    Replica,
}

/// Why a read that the replica could have answered went to the primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Fallback {
    /// The replica lagged more than the configured bound.
    Lagging,
    /// The replica did not answer its last sample (or has not been sampled yet).
    Unreachable,
}

/// Where a read went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRoute {
    /// The database that answers.
    pub source: ReadSource,
    /// When a replica is configured: at most how far behind the primary it was, if known.
    pub replica_lag: Option<Duration>,
    /// Why the replica did not answer a read it could have.
    pub fallback: Option<Fallback>,
}

impl ReadRoute {
    /// A read on the primary with no replica configured.
    pub const PRIMARY: Self = Self {
        source: ReadSource::Primary,
        replica_lag: None,
        fallback: None,
    };

    /// What an answer says of where it was read: (name, value) of the HTTP headers and
    /// the gRPC metadata alike — `paywatch-read-from`, `paywatch-replica-lag-ms` (the lag
    /// bound, when known) and `paywatch-replica-fallback` (why not the replica).
    pub fn described(&self) -> Vec<(&'static str, String)> {
        let mut said = vec![("paywatch-read-from", <&str>::from(self.source).to_string())];
        if let Some(lag) = self.replica_lag {
            said.push(("paywatch-replica-lag-ms", lag.as_millis().to_string()));
        }
        if let Some(fallback) = self.fallback {
            said.push(("paywatch-replica-fallback", <&str>::from(fallback).to_string()));
        }
        said
    }

    /// This read, failed by the replica, read again on the primary.
    fn fell_back(self) -> Self {
        Self {
            source: ReadSource::Primary,
            fallback: Some(Fallback::Unreachable),
            ..self
        }
    }
}

/// Why a replica was refused at start.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// The read database is not Postgres.
    #[error(
        "--read-database-url must name a Postgres streaming replica (postgres://USER@HOST:PORT/DATABASE) of a Postgres --database-url"
    )]
    NotPostgres,
    /// The read database is not a standby.
    #[error(
        "the read database is not a hot standby (pg_is_in_recovery() is false): point --read-database-url at a streaming replica of --database-url"
    )]
    NotStandby,
    /// The read database replicates another cluster.
    #[error(
        "the read database belongs to cluster {replica}, the primary to cluster {primary}: --read-database-url must be a streaming replica of --database-url"
    )]
    OtherCluster {
        /// The primary's system identifier.
        primary: String,
        /// The replica's.
        replica: String,
    },
    /// A store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ReplicaError {
    /// Whether the replica did not answer at all (as against answering as something other
    /// than a standby of the primary): a reason to wait for it, not to refuse it.
    fn is_unreachable(&self) -> bool {
        matches!(self, Self::Store(error) if error.is_unreachable())
    }
}

/// A bound on the replica's staleness: the primary's log positions as sampled over time,
/// and the newest instant whose position the replica has replayed.
#[derive(Debug, Default)]
struct Freshness {
    /// Primary log positions and when they were read, oldest first; none older than the
    /// newest one the replica has replayed.
    primary: VecDeque<(Instant, u64)>,
    /// The replica holds every fact the primary had committed at this instant.
    current_as_of: Option<Instant>,
    /// The replica answered its last sample as a standby.
    reachable: bool,
    /// The replica has been checked to be a standby of the primary's cluster.
    checked: bool,
}

impl Freshness {
    /// The primary's log had reached `written` at `at`.
    fn primary_at(&mut self, at: Instant, written: u64) {
        self.primary.push_back((at, written));
        if self.primary.len() > MAX_SAMPLES {
            self.primary.pop_front();
        }
    }

    /// The replica has replayed the log up to `replayed` (read after every primary sample
    /// so far).
    fn replica_replayed(&mut self, replayed: u64) {
        self.reachable = true;
        let Some(newest) = self.primary.iter().rposition(|&(_, written)| written <= replayed) else {
            return;
        };
        let (at, _) = self.primary[newest];
        self.current_as_of = Some(self.current_as_of.map_or(at, |known| known.max(at)));
        self.primary.drain(..newest);
    }

    /// The replica did not answer as a standby.
    fn unreachable(&mut self) {
        self.reachable = false;
    }

    /// At most how far behind the primary the replica is at `now`, if any sample bounds it.
    fn lag(&self, now: Instant) -> Option<Duration> {
        self.current_as_of.map(|at| now.saturating_duration_since(at))
    }
}

/// What checking that the replica is a standby of the primary found.
enum Check {
    /// It is (now or before).
    Passed,
    /// It did not answer: checked again at the next sample.
    NotAnswering,
    /// It answers as something else: it is never read.
    Refused,
}

/// A streaming replica that answers reads while it lags at most `max_lag`.
#[derive(Clone)]
pub struct ReadReplica {
    store: Store,
    max_lag: Duration,
    freshness: Arc<Mutex<Freshness>>,
}

impl ReadReplica {
    /// The replica at `url` (a pool of `options`, failing reads fast when the replica goes
    /// away), checked to be a hot standby of `primary`'s cluster. A replica that does not
    /// answer now (restarting, say) is not a reason to refuse: reads go to the primary
    /// until it answers [`ReadReplica::watch`]'s samples, and it is checked then. One that
    /// answers as something else — not a standby, another cluster's, a database or user it
    /// does not know — is refused.
    pub async fn connect(
        primary: &Store,
        url: &str,
        options: &StoreOptions,
        max_lag: Duration,
    ) -> Result<Self, ReplicaError> {
        if primary.backend() != Backend::Postgres || !url.starts_with("postgres") {
            return Err(ReplicaError::NotPostgres);
        }
        let options = StoreOptions {
            acquire_timeout: REPLICA_ACQUIRE_TIMEOUT,
            ..options.clone()
        };
        let replica = Self {
            store: Store::connect_lazy(url, &options)?,
            max_lag,
            freshness: Arc::default(),
        };
        match replica.check(primary).await {
            Ok(()) => {}
            Err(error) if error.is_unreachable() => tracing::warn!(
                %error,
                "the read replica does not answer: reads go to the primary until it does (it is checked to be a standby of the primary then)"
            ),
            Err(refused) => return Err(refused),
        }
        Ok(replica)
    }

    /// Checks that the replica is a hot standby of `primary`'s cluster, once it answers.
    async fn check(&self, primary: &Store) -> Result<(), ReplicaError> {
        if !self.store.standby_position().await?.in_recovery {
            return Err(ReplicaError::NotStandby);
        }
        match (
            primary.cluster_identifier().await?,
            self.store.cluster_identifier().await?,
        ) {
            (Some(primary), Some(replica)) if primary != replica => {
                return Err(ReplicaError::OtherCluster { primary, replica });
            }
            (Some(_), Some(_)) => {}
            _ => tracing::warn!(
                "cannot read the clusters' system identifiers (pg_control_system() needs pg_monitor): not checked that the read database replicates the primary"
            ),
        }
        self.freshness().checked = true;
        Ok(())
    }

    /// Samples the primary's and the replica's log positions until `shutdown`, keeping the
    /// lag bound and the `paywatch_replica_*` metrics current.
    pub async fn watch(self, primary: Store, shutdown: CancellationToken) {
        let mut ticks = tokio::time::interval(SAMPLE_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut was = None;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = ticks.tick() => {}
            }
            match self.checked(&primary).await {
                Check::Passed => self.sample(&primary).await,
                Check::NotAnswering => self.freshness().unreachable(),
                Check::Refused => {
                    metrics::gauge!("paywatch_replica_up").set(0.0);
                    return;
                }
            }
            let route = self.route(Consistency::Replica);
            metrics::gauge!("paywatch_replica_up")
                .set(f64::from(u8::from(route.fallback != Some(Fallback::Unreachable))));
            if let Some(lag) = route.replica_lag {
                metrics::gauge!("paywatch_replica_lag_seconds").set(lag.as_secs_f64());
            }
            if was != Some(route.fallback) {
                match route.fallback {
                    None => tracing::info!(
                        lag_ms = route.replica_lag.map(|l| l.as_millis() as u64),
                        "the read replica answers reads"
                    ),
                    Some(fallback) => tracing::warn!(
                        reason = <&str>::from(fallback),
                        lag_ms = route.replica_lag.map(|l| l.as_millis() as u64),
                        max_lag_ms = self.max_lag.as_millis() as u64,
                        "reads go to the primary until the read replica catches up"
                    ),
                }
                was = Some(route.fallback);
            }
        }
    }

    /// Whether the replica has been checked to be a standby of the primary, checking it if
    /// not yet; a refusal is logged.
    async fn checked(&self, primary: &Store) -> Check {
        if self.freshness().checked {
            return Check::Passed;
        }
        match tokio::time::timeout(PROBE_TIMEOUT, self.check(primary)).await {
            Ok(Ok(())) => Check::Passed,
            Ok(Err(error)) if error.is_unreachable() => Check::NotAnswering,
            Err(_) => Check::NotAnswering,
            Ok(Err(refused)) => {
                tracing::error!(
                    error = %refused,
                    "the read replica answers, but is refused: reads stay on the primary until paywatch restarts with a --read-database-url that names a streaming replica of --database-url"
                );
                Check::Refused
            }
        }
    }

    /// One sample: the primary's position first, then how far the replica has replayed.
    async fn sample(&self, primary: &Store) {
        let read_at = Instant::now();
        if let Ok(Ok(written)) = tokio::time::timeout(PROBE_TIMEOUT, primary.wal_written()).await {
            self.freshness().primary_at(read_at, written);
        }
        match tokio::time::timeout(PROBE_TIMEOUT, self.store.standby_position()).await {
            Ok(Ok(position)) if position.in_recovery => match position.replayed {
                Some(replayed) => self.freshness().replica_replayed(replayed),
                None => self.freshness().unreachable(),
            },
            Ok(Ok(_)) => {
                tracing::warn!(
                    "the read database is no longer a standby (promoted?): reads go to the primary"
                );
                self.freshness().unreachable();
            }
            Ok(Err(error)) => {
                tracing::debug!(%error, "the read replica did not answer");
                self.freshness().unreachable();
            }
            Err(_) => self.freshness().unreachable(),
        }
    }

    /// Where a read asking `consistency` goes now.
    fn route(&self, consistency: Consistency) -> ReadRoute {
        let (reachable, replica_lag) = {
            let freshness = self.freshness();
            (freshness.reachable, freshness.lag(Instant::now()))
        };
        let fallback = match (reachable, replica_lag) {
            (false, _) => Some(Fallback::Unreachable),
            // Answering, but behind every primary position kept: far behind.
            (true, None) => Some(Fallback::Lagging),
            (true, Some(lag)) if lag > self.max_lag => Some(Fallback::Lagging),
            (true, Some(_)) => None,
        };
        let source = match (consistency, fallback) {
            (Consistency::Replica, None) => ReadSource::Replica,
            _ => ReadSource::Primary,
        };
        ReadRoute {
            source,
            replica_lag,
            fallback: fallback.filter(|_| consistency == Consistency::Replica),
        }
    }

    /// The replica failed a read: reads go to the primary until its next good sample.
    fn failed(&self) {
        self.freshness().unreachable();
    }

    fn freshness(&self) -> std::sync::MutexGuard<'_, Freshness> {
        self.freshness.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Queries {
    /// The queries a read runs with, and where it goes: on the read replica when one is
    /// configured, `consistency` allows it and the replica is fresh enough; else on the
    /// primary (these same queries, shared: a read clones no store or configuration).
    fn reads(self: &Arc<Self>, consistency: Consistency) -> (Arc<Self>, ReadRoute) {
        let Some(replica) = &self.replica else {
            return (Arc::clone(self), ReadRoute::PRIMARY);
        };
        let route = replica.route(consistency);
        metrics::counter!("paywatch_reads_total", "source" => <&str>::from(route.source)).increment(1);
        if let Some(fallback) = route.fallback {
            metrics::counter!("paywatch_replica_fallbacks_total", "reason" => <&str>::from(fallback))
                .increment(1);
        }
        let queries = match route.source {
            ReadSource::Replica => Arc::new(Self {
                store: replica.store.clone(),
                replica: None,
                ..Self::clone(self)
            }),
            ReadSource::Primary => Arc::clone(self),
        };
        (queries, route)
    }

    /// `op` read where `consistency` routes it, and read again on the primary when the
    /// replica fails it (`store_unavailable`); with where it was answered.
    pub async fn read<T, Fut>(
        self: &Arc<Self>,
        consistency: Consistency,
        op: impl Fn(Arc<Self>) -> Fut,
    ) -> (Result<T, QueryError>, ReadRoute)
    where
        Fut: Future<Output = Result<T, QueryError>>,
    {
        self.read_answer(
            consistency,
            op,
            |answer| matches!(answer, Err(failed) if failed.reason == Reason::StoreUnavailable),
        )
        .await
    }

    /// [`Queries::read`] for an answer already rendered (an HTTP response):
    /// `store_unavailable` says whether an answer is the store's failure.
    pub async fn read_answer<A, Fut>(
        self: &Arc<Self>,
        consistency: Consistency,
        op: impl Fn(Arc<Self>) -> Fut,
        store_unavailable: impl Fn(&A) -> bool,
    ) -> (A, ReadRoute)
    where
        Fut: Future<Output = A>,
    {
        let (queries, route) = self.reads(consistency);
        let answer = op(queries).await;
        if route.source == ReadSource::Replica && store_unavailable(&answer) {
            let route = self.replica_failed(route);
            return (op(Arc::clone(self)).await, route);
        }
        (answer, route)
    }

    /// The replica failed the read routed by `route` (`store_unavailable`): reads go to the
    /// primary until the replica answers its next sample. The route of the read again on
    /// the primary.
    fn replica_failed(&self, route: ReadRoute) -> ReadRoute {
        if let Some(replica) = &self.replica {
            tracing::warn!("the read replica failed a read: read again on the primary");
            replica.failed();
            metrics::counter!("paywatch_replica_fallbacks_total", "reason" => <&str>::from(Fallback::Unreachable))
                .increment(1);
        }
        route.fell_back()
    }
}

/// Describes the read replica's metrics for `/metrics`.
pub fn describe_metrics() {
    metrics::describe_gauge!(
        "paywatch_replica_lag_seconds",
        "At most how far the read replica is behind the primary"
    );
    metrics::describe_gauge!(
        "paywatch_replica_up",
        "1 while the read replica answers its samples as a standby"
    );
    metrics::describe_counter!(
        "paywatch_reads_total",
        "Reads routed, by the database that answered"
    );
    metrics::describe_counter!(
        "paywatch_replica_fallbacks_total",
        "Reads the replica could have answered that went to the primary, by reason"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn a_replica_is_current_as_of_the_newest_primary_position_it_has_replayed() {
        let base = Instant::now();
        let mut freshness = Freshness::default();
        assert_eq!(freshness.lag(base), None, "no sample bounds the lag yet");
        freshness.primary_at(at(base, 0), 100);
        freshness.primary_at(at(base, 200), 150);
        freshness.primary_at(at(base, 400), 300);
        // Replayed past the second sample, not the third: current as of 200 ms.
        freshness.replica_replayed(160);
        assert_eq!(freshness.lag(at(base, 1_000)), Some(Duration::from_millis(800)));
        assert_eq!(freshness.primary.len(), 2, "older samples are no longer needed");
        // Catching up moves the bound; a quiet primary keeps the replica current.
        freshness.primary_at(at(base, 600), 300);
        freshness.replica_replayed(300);
        assert_eq!(freshness.lag(at(base, 700)), Some(Duration::from_millis(100)));
    }

    #[test]
    fn a_stalled_replica_lags_more_every_moment() {
        let base = Instant::now();
        let mut freshness = Freshness::default();
        freshness.primary_at(base, 10);
        freshness.replica_replayed(10);
        for ms in (200..=2_000).step_by(200) {
            freshness.primary_at(at(base, ms), 10 + ms);
            freshness.replica_replayed(10);
        }
        assert_eq!(freshness.lag(at(base, 2_000)), Some(Duration::from_secs(2)));
        // A replayed position older than every sample kept never moves the bound back.
        freshness.replica_replayed(5);
        assert_eq!(freshness.lag(at(base, 2_000)), Some(Duration::from_secs(2)));
    }

    #[test]
    fn samples_beyond_the_cap_only_make_the_bound_larger() {
        let base = Instant::now();
        let mut freshness = Freshness::default();
        for i in 0..(MAX_SAMPLES as u64 + 10) {
            freshness.primary_at(at(base, i), i);
        }
        // The replica replayed position 5, whose sample was dropped: nothing bounds it.
        freshness.replica_replayed(5);
        assert_eq!(freshness.lag(at(base, 10_000)), None);
        freshness.replica_replayed(20);
        assert_eq!(
            freshness.lag(at(base, 10_000)),
            Some(Duration::from_millis(10_000 - 20))
        );
    }

    #[test]
    fn consistency_names_what_it_accepts() {
        assert_eq!(Consistency::parse("primary").unwrap(), Consistency::Primary);
        assert_eq!(Consistency::parse("replica").unwrap(), Consistency::Replica);
        let refusal = Consistency::parse("fresh").unwrap_err();
        assert_eq!(refusal.reason, Reason::MalformedQuery);
        assert!(refusal.message.contains("`primary`"), "{}", refusal.message);
    }

    async fn unreachable_replica(max_lag: Duration) -> ReadReplica {
        let store = Store::connect("sqlite::memory:", &Default::default())
            .await
            .unwrap();
        ReadReplica {
            store,
            max_lag,
            freshness: Arc::default(),
        }
    }

    #[tokio::test]
    async fn reads_go_to_the_replica_only_while_it_is_fresh_enough() {
        let replica = unreachable_replica(Duration::from_secs(1)).await;
        let route = replica.route(Consistency::Replica);
        assert_eq!(route.source, ReadSource::Primary, "not sampled yet");
        assert_eq!(route.fallback, Some(Fallback::Unreachable));
        {
            let mut freshness = replica.freshness();
            freshness.primary_at(Instant::now(), 9);
            freshness.replica_replayed(3);
        }
        assert_eq!(
            replica.route(Consistency::Replica).fallback,
            Some(Fallback::Lagging),
            "answering, but behind every position sampled"
        );

        let now = Instant::now();
        {
            let mut freshness = replica.freshness();
            freshness.primary_at(now, 9);
            freshness.replica_replayed(9);
        }
        let route = replica.route(Consistency::Replica);
        assert_eq!((route.source, route.fallback), (ReadSource::Replica, None));
        assert!(route.replica_lag.unwrap() < Duration::from_secs(1));
        let route = replica.route(Consistency::Primary);
        assert_eq!(
            (route.source, route.fallback),
            (ReadSource::Primary, None),
            "asked of the primary, not a fallback"
        );

        replica.freshness().current_as_of = now.checked_sub(Duration::from_secs(5));
        let route = replica.route(Consistency::Replica);
        assert_eq!(
            (route.source, route.fallback),
            (ReadSource::Primary, Some(Fallback::Lagging))
        );
        replica.freshness().unreachable();
        assert_eq!(
            replica.route(Consistency::Replica).fallback,
            Some(Fallback::Unreachable)
        );
    }
}
