//! paywatch's leased writing jobs: a network's worker, its scheduled audit and a webhook
//! sink's sender each run in one process at a time, under a lease in the store
//! ([`LeasedJob`]); the webhook sender ([`WebhookSender`]) delivers every payment event to
//! its sink.

mod leases;
mod webhooks;

pub use leases::{LeasedJob, audit_job, owner_id, webhook_job, worker_job};
pub use webhooks::{EVENT_ID_HEADER, SIGNATURE_HEADER, WebhookSender, signature};
