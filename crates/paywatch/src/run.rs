//! `paywatch run`: one worker per enabled network, the webhook senders, the scheduled
//! audits and the HTTP and gRPC APIs, until SIGINT/SIGTERM. `--role` splits them:
//! `workers` writes (and serves only `/healthz` and `/metrics`), `api` only answers. On
//! Postgres any number of processes share the store, each writing job owned by one of
//! them at a time through a lease; on SQLite one process writes, and a second writer is
//! refused at start. With `--read-database-url`, the reads a replica may answer go to a
//! Postgres streaming replica while it lags at most `--read-max-lag`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use paywatch_core::config::{ChainsConfig, NetworkConfig};
use paywatch_core::network::Namespace;
use paywatch_evm::EvmWorker;
use paywatch_evm::rpc::EvmRpc;
use paywatch_query::ReadReplica;
use paywatch_solana::SolanaWorker;
use paywatch_solana::rpc::SolanaRpc;
use paywatch_store::{Backend, Store, StoreOptions};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::{exclusive, scheduled_audit, telemetry};
use paywatch_jobs::{self as leases, LeasedJob};

/// Arguments of `paywatch run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Address the HTTP API listens on.
    #[arg(long, env = "PAYWATCH_LISTEN", default_value = "127.0.0.1:8402")]
    listen: SocketAddr,
    /// Address the gRPC API (`paywatch.v1.Payments`, health, reflection) listens on.
    #[arg(long, env = "PAYWATCH_GRPC_LISTEN", default_value = "127.0.0.1:8403")]
    grpc_listen: SocketAddr,
    /// What this process does: `all`, `workers` (ingest and webhooks; HTTP serves only
    /// /healthz and /metrics) or `api` (queries only).
    #[arg(long, env = "PAYWATCH_ROLE", value_enum, default_value_t = Role::All)]
    role: Role,
    /// How long a writing job's lease lives without renewal (Postgres): a peer takes over
    /// a dead process's jobs within this time.
    #[arg(
        long,
        env = "PAYWATCH_LEASE_TTL",
        default_value = "15",
        value_name = "SECONDS"
    )]
    lease_ttl: u64,
    /// This process's name in the lease table (default: host:pid:random). A stable name
    /// lets a restarted replica take its leases back at once instead of waiting for them
    /// to lapse; it must be unique among live processes.
    #[arg(long, env = "PAYWATCH_REPLICA_ID")]
    replica_id: Option<String>,
    /// A Postgres streaming replica (hot standby) of --database-url that answers lookups,
    /// listings, totals and published reviews while it lags at most --read-max-lag;
    /// writes, leases, the event stream and authorization lookups stay on the primary,
    /// and a read given `consistency=primary` goes there too.
    #[arg(long, env = "PAYWATCH_READ_DATABASE_URL", value_name = "POSTGRES_URL")]
    read_database_url: Option<String>,
    /// The most a read replica may lag the primary and still answer reads; beyond it,
    /// reads go to the primary until it catches up.
    #[arg(
        long,
        env = "PAYWATCH_READ_MAX_LAG",
        default_value = "5",
        value_name = "SECONDS",
        value_parser = parse_max_lag
    )]
    read_max_lag: Duration,
    /// How long to wait for workers to finish their step at shutdown.
    #[arg(long, default_value = "30", value_name = "SECONDS")]
    shutdown_grace: u64,
}

/// What a `paywatch run` process does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Role {
    /// Workers, webhooks and both APIs.
    All,
    /// Workers and webhooks; HTTP serves only /healthz and /metrics.
    Workers,
    /// The HTTP and gRPC query APIs only.
    Api,
}

/// Runs until a shutdown signal, then stops the API and lets each worker finish its step.
pub(crate) async fn run(
    args: RunArgs,
    chains: ChainsConfig,
    store: Store,
    database_url: &str,
    options: &StoreOptions,
) -> anyhow::Result<()> {
    let metrics = telemetry::init_metrics()?;
    let shutdown = CancellationToken::new();
    let replica = match &args.read_database_url {
        Some(url) => Some(connect_replica(&args, url, &store, options, &shutdown).await?),
        None => None,
    };
    let chains = Arc::new(chains);
    let writes = args.role != Role::Api;
    let _sqlite_writer = match (writes, store.backend()) {
        (true, Backend::Sqlite) => Some(exclusive::lock_sqlite_writer(database_url)?),
        _ => None,
    };
    let owner = args.replica_id.clone().unwrap_or_else(leases::owner_id);
    // Replicas share a Postgres store, so each writing job runs under its lease; SQLite
    // has one writer, locked above.
    let lease = |job: String| {
        (store.backend() == Backend::Postgres).then(|| LeasedJob {
            job,
            owner: owner.clone(),
            ttl: Duration::from_secs(args.lease_ttl.max(3)),
        })
    };

    let mut workers = JoinSet::new();
    for network in chains.networks.iter().filter(|_| writes).cloned() {
        let job = lease(leases::worker_job(&network.id));
        spawn_writer(&mut workers, job, &store, &shutdown, move |store, stop| {
            run_worker(network.clone(), store, stop)
        });
    }

    let mut webhooks = JoinSet::new();
    for hook in chains.webhooks.iter().filter(|_| writes).cloned() {
        tracing::info!(webhook = %hook.name, url = %paywatch_chain::redact(&hook.url), "delivering events to a webhook");
        let job = lease(leases::webhook_job(&hook.name));
        spawn_writer(&mut webhooks, job, &store, &shutdown, move |store, stop| {
            let sender = paywatch_jobs::WebhookSender::new(store, hook.clone());
            async move {
                sender.run(stop).await;
                Ok(())
            }
        });
    }

    // Scheduled audits: never a reason to stop paywatch (a failed one is tried again).
    let mut audits = JoinSet::new();
    for network in chains.networks.iter().filter(|_| writes) {
        let Some(interval) = network.audit_interval else {
            continue;
        };
        let job = lease(leases::audit_job(&network.id));
        let network = network.clone();
        spawn_writer(&mut audits, job, &store, &shutdown, move |store, stop| {
            let network = network.clone();
            async move {
                scheduled_audit::run(network, interval, store, stop).await;
                Ok(())
            }
        });
    }

    let queries = Arc::new(paywatch_query::Queries {
        shutdown: shutdown.clone(),
        replica,
        ..paywatch_query::Queries::new(store.clone(), chains.clone())
    });
    let state = paywatch_api::AppState {
        queries: queries.clone(),
        metrics: Some(metrics),
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}: pass --listen HOST:PORT", args.listen))?;
    // The API servers: one ending on its own (not by shutdown) stops paywatch with an
    // error, rather than leaving it ingesting with no API.
    let mut servers: JoinSet<anyhow::Result<()>> = JoinSet::new();
    if args.role != Role::Workers {
        let grpc_listener = tokio::net::TcpListener::bind(args.grpc_listen)
            .await
            .with_context(|| {
                format!(
                    "cannot listen on {} for gRPC: pass --grpc-listen HOST:PORT",
                    args.grpc_listen
                )
            })?;
        let grpc = paywatch_grpc::serve(queries, grpc_listener, shutdown.clone());
        servers.spawn(async move { grpc.await.context("the gRPC server stopped") });
    }
    tracing::info!(role = ?args.role, %owner, listen = %args.listen, grpc_listen = %args.grpc_listen, networks = chains.networks.len(), "paywatch is running");
    let app = if args.role == Role::Workers {
        paywatch_api::ops_router(state)
    } else {
        paywatch_api::router(state)
    };
    let server_shutdown = shutdown.clone();
    servers.spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { server_shutdown.cancelled().await })
            .await
            .context("the HTTP server stopped")
    });

    // A worker that stopped for good on an error retrying cannot heal has said so and
    // recorded it (`status`, `/readyz`): the other networks and the APIs keep running. One
    // refused at start (a wrong chain or token in chains.toml) stops paywatch.
    let mut failure = None;
    let mut running = if writes { workers.len() } else { 0 };
    loop {
        tokio::select! {
            () = wait_for_signal() => {
                tracing::info!("shutdown requested");
                break;
            }
            Some(joined) = workers.join_next(), if running > 0 => {
                running -= 1;
                match joined {
                    Ok(Ok(())) => {
                        tracing::error!(running, "a network's worker stopped for good; see paywatch status");
                        continue;
                    }
                    Ok(Err(error)) => failure = Some(error.context("a worker stopped")),
                    Err(error) => failure = Some(anyhow::Error::from(error).context("a worker panicked")),
                }
                break;
            }
            Some(joined) = servers.join_next() => {
                failure = Some(match joined {
                    Ok(Err(error)) => error,
                    Ok(Ok(())) => anyhow::anyhow!("an API server stopped unexpectedly"),
                    Err(error) => anyhow::Error::from(error).context("an API server panicked"),
                });
                break;
            }
        }
    }
    shutdown.cancel();
    let grace = Duration::from_secs(args.shutdown_grace);
    if tokio::time::timeout(grace, async { while workers.join_next().await.is_some() {} })
        .await
        .is_err()
    {
        tracing::warn!("workers did not stop within the grace period; their uncommitted steps are abandoned");
        workers.abort_all();
    }
    while let Some(joined) = webhooks.join_next().await {
        if let Ok(Err(error)) = joined {
            tracing::warn!(%error, "a webhook sender stopped with an error");
        }
    }
    while let Some(joined) = audits.join_next().await {
        if let Ok(Err(error)) = joined {
            tracing::warn!(%error, "a scheduled audit stopped with an error");
        }
    }
    while let Some(joined) = servers.join_next().await {
        let stopped = joined.map_err(anyhow::Error::from).and_then(|served| served);
        if let (Err(error), None) = (stopped, &failure) {
            failure = Some(error);
        }
    }
    store.close().await;
    tracing::info!("paywatch stopped");
    failure.map_or(Ok(()), Err)
}

/// Connects the read replica at `url`, checked to be a hot standby of `primary`, and
/// starts sampling how far it lags.
async fn connect_replica(
    args: &RunArgs,
    url: &str,
    primary: &Store,
    options: &StoreOptions,
    shutdown: &CancellationToken,
) -> anyhow::Result<ReadReplica> {
    anyhow::ensure!(
        args.role != Role::Workers,
        "--read-database-url serves reads, and a --role workers process serves none: give it to the --role api (or all) processes"
    );
    let replica = ReadReplica::connect(primary, url, options, args.read_max_lag)
        .await
        .context("cannot serve reads from the replica given by --read-database-url")?;
    tokio::spawn(replica.clone().watch(primary.clone(), shutdown.clone()));
    tracing::info!(
        max_lag_ms = args.read_max_lag.as_millis() as u64,
        "reads go to the read replica while it lags at most --read-max-lag"
    );
    Ok(replica)
}

/// Reads `--read-max-lag`: seconds, more than zero (fractions allowed).
fn parse_max_lag(value: &str) -> Result<Duration, String> {
    value
        .parse::<f64>()
        .ok()
        .filter(|seconds| *seconds > 0.0)
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
        .ok_or_else(|| format!("`{value}` is not a number of seconds above zero (e.g. 5 or 0.5)"))
}

/// Spawns a writing job into `set`: `start(store, stop)` under the lease `job` when there
/// is one (replicas sharing a Postgres store), else once, as is.
fn spawn_writer<F, Fut>(
    set: &mut JoinSet<anyhow::Result<()>>,
    job: Option<LeasedJob>,
    store: &Store,
    shutdown: &CancellationToken,
    mut start: F,
) where
    F: FnMut(Store, CancellationToken) -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let (store, shutdown) = (store.clone(), shutdown.clone());
    match job {
        Some(job) => set.spawn(job.run(store, shutdown, start)),
        None => set.spawn(start(store, shutdown)),
    };
}

/// Runs the worker of one network until shutdown; an error is a reason to stop paywatch.
async fn run_worker(network: NetworkConfig, store: Store, shutdown: CancellationToken) -> anyhow::Result<()> {
    let name = network.id.to_string();
    if network.id.namespace() == Namespace::Solana {
        let rpc = SolanaRpc::for_network(&network)
            .with_context(|| format!("{name} has no RPC URL: set rpc_urls or rpc_url_env in chains.toml"))?;
        return Ok(SolanaWorker::new(network, store, rpc).run(shutdown).await?);
    }
    let Some(rpc) = connect_evm(&network, false, &shutdown).await else {
        return Ok(());
    };
    let mut worker = EvmWorker::new(network.clone(), store, rpc);
    if network.verifies_inline() {
        let Some(verifier) = connect_evm(&network, true, &shutdown).await else {
            return Ok(());
        };
        worker = worker.with_verifier(verifier);
    }
    Ok(worker.run(shutdown).await?)
}

/// Connects to one of `network`'s RPC endpoints (its verifier's, with `verifier`),
/// retrying every 5 s until one answers; `None` at shutdown.
async fn connect_evm(
    network: &NetworkConfig,
    verifier: bool,
    shutdown: &CancellationToken,
) -> Option<EvmRpc> {
    let name = network.id.to_string();
    let (urls, what) = match verifier {
        true => (&network.verify_rpc_urls, "verifier"),
        false => (&network.rpc_urls, "RPC"),
    };
    loop {
        match EvmRpc::connect_network(network, urls).await {
            Ok(rpc) => return Some(rpc),
            Err(error) => {
                tracing::error!(network = %name, %error, "cannot reach any {what} endpoint; retrying in 5 s");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(5)) => {}
                    () = shutdown.cancelled() => return None,
                }
            }
        }
    }
}

async fn wait_for_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
