//! `GET /v1/events`: the payment event stream as Server-Sent Events of type
//! `payment_state` (and `review_state` and `verification`, to streams that ask for them,
//! e.g. `?kinds=payment_state,verification`). An
//! event's SSE `id` is its event id; a client that reconnects with `Last-Event-ID` (or
//! `?since=ID`) gets every event after it.

use std::convert::Infallible;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use paywatch_core::Reason;
use paywatch_query::{EventView, event_kinds, event_stream};
use serde::Deserialize;

use crate::AppState;
use crate::error::{ApiError, ErrorBody};

/// Where a stream starts and what it carries.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct EventsQuery {
    /// Deliver events after this id (`Last-Event-ID` wins when both are given).
    since: Option<u64>,
    /// Only this network's events (CAIP-2 id or alias).
    network: Option<String>,
    /// The kinds of events, comma-separated: `payment_state`, `review_state`,
    /// `verification` (default
    /// `payment_state` only).
    kinds: Option<String>,
}

fn sse_event(view: &EventView) -> Event {
    Event::default()
        .id(view.event_id.to_string())
        .event(view.kind.as_str())
        .json_data(view)
        .unwrap_or_else(|_| Event::default().comment("unserializable event"))
}

/// The events handler.
#[utoipa::path(get, path = "/v1/events", tag = "refund daemons", params(EventsQuery,
        ("Last-Event-ID" = Option<u64>, Header, description = "Resume after this event")),
    responses((status = 200, description = "Server-Sent Events typed by their `kind` (`payment_state`, or `review_state` and `verification` when asked for), one EventView each", body = EventView, content_type = "text/event-stream"),
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
    let names: Vec<&str> = query
        .kinds
        .as_deref()
        .map(|k| k.split(',').collect())
        .unwrap_or_default();
    let kinds = event_kinds(&names)?;
    let events = event_stream(&state.queries, since, query.network.as_deref(), kinds)?
        .map(|view| Ok(sse_event(&view)));
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}
