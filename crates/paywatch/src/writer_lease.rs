//! The worker's lease of a network, held by a command that writes the network's payments
//! (`backfill`, `audit --repair`) so that it never races a running replica: on Postgres
//! taken at once (refused while another process holds it), renewed in the background and
//! released at the end; SQLite has one writer per file and no leases.

use std::time::Duration;

use anyhow::bail;
use paywatch_jobs::{self as leases, LeasedJob};
use paywatch_store::{Backend, Store};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The lease a command holds, with its renewal.
pub(crate) struct WriterLease {
    lease: LeasedJob,
    renewing: JoinHandle<()>,
    store: Store,
}

/// Takes the worker's lease of `network` on Postgres (refused when another process holds
/// it: `command` names what this process is about to do) and answers the store fenced by
/// it; `lost` is cancelled when a renewal finds the lease lost. On SQLite: the store as it
/// is, and no lease.
pub(crate) async fn hold(
    store: Store,
    network: &str,
    command: &str,
    lost: &CancellationToken,
) -> anyhow::Result<(Store, Option<WriterLease>)> {
    if store.backend() != Backend::Postgres {
        return Ok((store, None));
    }
    let lease = LeasedJob {
        job: leases::worker_job(&network),
        owner: leases::owner_id(),
        ttl: Duration::from_secs(15),
    };
    if !store.acquire_lease(&lease.job, &lease.owner, lease.ttl).await? {
        bail!(
            "another paywatch process holds the lease on {} (see paywatch status): its worker is writing {network} already; stop it before the {command}, or let it read",
            lease.job
        );
    }
    let fenced = store.fenced(&lease.job, &lease.owner);
    let (renewer, lost, renewed) = (store.clone(), lost.clone(), lease.clone());
    let command = command.to_string();
    let renewing = tokio::spawn(async move {
        renewed.keep_renewing(&renewer).await;
        tracing::error!(job = %renewed.job, "{command} lost its lease; stopping");
        lost.cancel();
    });
    Ok((
        fenced,
        Some(WriterLease {
            lease,
            renewing,
            store,
        }),
    ))
}

impl WriterLease {
    /// Stops renewing, then releases the lease (so no renewal can take it back after).
    pub(crate) async fn release(self) -> anyhow::Result<()> {
        self.renewing.abort();
        let _ = self.renewing.await;
        self.store
            .release_lease(&self.lease.job, &self.lease.owner)
            .await?;
        Ok(())
    }
}
