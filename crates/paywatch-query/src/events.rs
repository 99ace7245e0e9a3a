//! The payment event stream, for refund daemons: every payment state change (`pending`,
//! `paid`, `partially_refunded`, `refunded`, `dropped`), served as Server-Sent Events and as
//! gRPC `WatchPayments`; and, to streams that ask for them, review providers' `review_state`
//! events (a reviewed payment's published state changed) and, under lagging verification,
//! `verification` events (an audit's verdict on a payment's state). Events come in the
//! store's global event order (gap-free, commit order), so each payment's changes arrive
//! in order; a client that resumes after an event id gets every event after it: nothing
//! twice, nothing lost.
//! Streams end when paywatch shuts down, so they never hold up a graceful stop.
//!
//! Idle streams do not poll the store each: one [`EventFeed`] per process watches the
//! last committed event id and wakes the streams waiting for more.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::{Stream, StreamExt, stream};
use paywatch_core::Reason;
use paywatch_core::state::EventKind;
use paywatch_core::vocabulary::spellings;
use paywatch_store::Store;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::payments::resolve_network;
use crate::views::EventView;
use crate::{Queries, QueryError};

/// How often the feed reads the last committed event id while streams are open.
const POLL: Duration = Duration::from_millis(250);
/// Most events read per store query.
const BATCH: u32 = 500;

/// The last committed event id, watched by one task per process for every open stream.
#[derive(Clone)]
pub struct EventFeed {
    latest: Arc<watch::Sender<u64>>,
    watcher: Arc<OnceLock<()>>,
}

impl Default for EventFeed {
    fn default() -> Self {
        Self {
            latest: Arc::new(watch::Sender::new(0)),
            watcher: Arc::new(OnceLock::new()),
        }
    }
}

impl EventFeed {
    /// A receiver that changes when events are committed; the first call starts the task
    /// that watches `store` (it reads only while some stream is open, and ends at
    /// `shutdown`).
    fn subscribe(&self, store: &Store, shutdown: &CancellationToken) -> watch::Receiver<u64> {
        let receiver = self.latest.subscribe();
        self.watcher.get_or_init(|| {
            let (latest, store, shutdown) = (self.latest.clone(), store.clone(), shutdown.clone());
            tokio::spawn(async move {
                let watch = async {
                    loop {
                        if latest.receiver_count() > 0 {
                            match store.latest_event_id().await {
                                Ok(id) => {
                                    latest.send_if_modified(|last| std::mem::replace(last, id) != id);
                                }
                                Err(error) => tracing::warn!(%error, "event feed: store error; retrying"),
                            }
                        }
                        tokio::time::sleep(POLL).await;
                    }
                };
                tokio::select! {
                    () = watch => {}
                    () = shutdown.cancelled() => {}
                }
            });
        });
        receiver
    }
}

/// The event kinds a stream asks for by name; none named: `payment_state` only, so a
/// refund daemon never takes a review's published state for a payment change.
pub fn event_kinds<S: AsRef<str>>(names: &[S]) -> Result<Vec<EventKind>, QueryError> {
    if names.is_empty() {
        return Ok(vec![EventKind::PaymentState]);
    }
    let mut kinds = Vec::new();
    for name in names {
        let name = name.as_ref().trim();
        let kind = name.parse::<EventKind>().map_err(|_| {
            QueryError::new(
                Reason::MalformedQuery,
                format!(
                    "kinds: `{name}` is not an event kind; expected one of {}",
                    spellings::<EventKind>().join(", ")
                ),
            )
        })?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok(kinds)
}

/// Every event of `kinds` after `since` (of `network` only, when given), in order, as they
/// commit; the stream ends when paywatch shuts down. The HTTP and gRPC streams both serve it.
pub fn event_stream(
    queries: &Queries,
    since: u64,
    network: Option<&str>,
    kinds: Vec<EventKind>,
) -> Result<impl Stream<Item = EventView> + Send + use<>, QueryError> {
    let network = network
        .map(|name| resolve_network(queries, name).map(|n| n.id.to_string()))
        .transpose()?;
    let committed = queries.events.subscribe(&queries.store, &queries.shutdown);
    let store = queries.store.clone();
    let batches = stream::unfold((since, committed), move |(cursor, mut committed)| {
        let (store, network, kinds) = (store.clone(), network.clone(), kinds.clone());
        async move {
            loop {
                committed.borrow_and_update();
                match store
                    .events_after(cursor, network.as_deref(), &kinds, BATCH)
                    .await
                {
                    Ok(batch) if !batch.is_empty() => {
                        let next = batch.last().map_or(cursor, |e| e.event_id);
                        let views: Vec<EventView> = batch.into_iter().map(EventView::from).collect();
                        return Some((views, (next, committed)));
                    }
                    Ok(_) => {
                        if committed.changed().await.is_err() {
                            return None;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "event stream: store error; retrying");
                        tokio::time::sleep(POLL).await;
                    }
                }
            }
        }
    });
    Ok(batches
        .flat_map(stream::iter)
        .take_until(queries.shutdown.clone().cancelled_owned()))
}
