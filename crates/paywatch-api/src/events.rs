//! `GET /v1/events`: every payment state change (`pending`, `paid`, `partially_refunded`,
//! `refunded`, `dropped`) as Server-Sent Events, for refund daemons. Events come in the
//! store's global event order (gap-free, commit order), so each payment's changes arrive
//! in order; an event's SSE `id` is its event id, and a client that reconnects with
//! `Last-Event-ID` (or `?since=ID`) gets every event after it: nothing twice, nothing lost.
//! Streams end when paywatch shuts down, so they never hold up a graceful stop.
//!
//! Idle streams do not poll the store each: one [`EventFeed`] per process watches the
//! last committed event id and wakes the streams waiting for more.

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt, stream};
use paywatch_core::{PaymentMethod, Reason};
use paywatch_store::{PaymentEvent, Store};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::AppState;
use crate::error::{ApiError, ErrorBody};
use crate::payments::{HistoryView, resolve_network};

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

/// Every event after `since` (of `network` only, when given), in order, as they commit;
/// the stream ends when paywatch shuts down. The HTTP and gRPC streams both serve it.
pub fn event_stream(
    state: &AppState,
    since: u64,
    network: Option<&str>,
) -> Result<impl Stream<Item = EventView> + Send + use<>, ApiError> {
    let network = network
        .map(|name| resolve_network(state, name).map(|n| n.id.to_string()))
        .transpose()?;
    let committed = state.events.subscribe(&state.store, &state.shutdown);
    let store = state.store.clone();
    let batches = stream::unfold((since, committed), move |(cursor, mut committed)| {
        let (store, network) = (store.clone(), network.clone());
        async move {
            loop {
                committed.borrow_and_update();
                match store.events_after(cursor, network.as_deref(), BATCH).await {
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
        .take_until(state.shutdown.clone().cancelled_owned()))
}

/// Where a stream starts and what it carries.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct EventsQuery {
    /// Deliver events after this id (`Last-Event-ID` wins when both are given).
    since: Option<u64>,
    /// Only this network's events (CAIP-2 id or alias).
    network: Option<String>,
}

/// One event, as the `data` of an SSE message of type `payment_state`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EventView {
    /// Position in the global sequence; also the SSE `id`.
    pub event_id: u64,
    /// CAIP-2 network id.
    pub network: String,
    /// Transaction hash or signature.
    pub payment: String,
    /// Its number in the transaction.
    pub index_in_tx: u32,
    /// The payment's memo (Solana's SPL Memo), if any.
    pub memo: Option<String>,
    /// How the payment's money moved: `eip3009`, `permit2`, `upto`, `erc7710` or `spl`.
    #[schema(value_type = String)]
    pub method: PaymentMethod,
    /// The change itself, as the history endpoint shows it.
    #[serde(flatten)]
    pub change: HistoryView,
}

impl From<PaymentEvent> for EventView {
    fn from(event: PaymentEvent) -> Self {
        Self {
            event_id: event.event_id,
            network: event.network,
            payment: event.payment_id,
            index_in_tx: event.index_in_tx,
            memo: event.memo,
            method: event.method,
            change: HistoryView::from(event.change),
        }
    }
}

fn sse_event(view: &EventView) -> Event {
    Event::default()
        .id(view.event_id.to_string())
        .event("payment_state")
        .json_data(view)
        .unwrap_or_else(|_| Event::default().comment("unserializable event"))
}

/// The events handler.
#[utoipa::path(get, path = "/v1/events", tag = "refund daemons", params(EventsQuery,
        ("Last-Event-ID" = Option<u64>, Header, description = "Resume after this event")),
    responses((status = 200, description = "Server-Sent Events of type `payment_state`, one EventView each", body = EventView, content_type = "text/event-stream"),
        (status = 404, body = ErrorBody), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Query(query) = query?;
    let last_event_id = headers
        .get("last-event-id")
        .map(|value| {
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    ApiError::new(
                        Reason::MalformedQuery,
                        "Last-Event-ID must be the id of an event paywatch sent",
                    )
                })
        })
        .transpose()?;
    let since = last_event_id.or(query.since).unwrap_or(0);
    let events = event_stream(&state, since, query.network.as_deref())?.map(|view| Ok(sse_event(&view)));
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}
