//! A real HTTP client of paywatch's Server-Sent Events stream (`GET /v1/events`).

use std::time::Duration;

use serde_json::Value;

use crate::harness::ApiServer;

/// An open SSE connection and what it has delivered so far.
pub struct EventClient {
    response: reqwest::Response,
    buffer: String,
}

impl EventClient {
    /// Connects to `/v1/events{query}`, resuming after `last_event_id` when given.
    pub async fn connect(api: &ApiServer, query: &str, last_event_id: Option<u64>) -> Self {
        Self::connect_to(&api.base_url, query, last_event_id).await
    }

    /// Connects to `/v1/events{query}` of the paywatch at `base_url` (`http://host:port`),
    /// resuming after `last_event_id` when given.
    pub async fn connect_to(base_url: &str, query: &str, last_event_id: Option<u64>) -> Self {
        let mut request = reqwest::Client::new().get(format!("{base_url}/v1/events{query}"));
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id.to_string());
        }
        let response = request.send().await.expect("connect to /v1/events");
        assert_eq!(response.status(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next event's SSE type and data (keep-alive comments are skipped); checks that
    /// its SSE id is its event id and its type its `kind`.
    pub async fn next_typed(&mut self) -> (String, Value) {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let message: String = self.buffer.drain(..end + 2).collect();
                let id = message.lines().find_map(|l| l.strip_prefix("id: "));
                let data = message.lines().find_map(|l| l.strip_prefix("data: "));
                let kind = message.lines().find_map(|l| l.strip_prefix("event: "));
                if let (Some(id), Some(data), Some(kind)) = (id, data, kind) {
                    let value: Value = serde_json::from_str(data).expect("event data is JSON");
                    assert_eq!(value["event_id"].to_string(), id, "SSE id is the event id");
                    assert_eq!(value["kind"], kind, "SSE type is the event kind: {message}");
                    return (kind.to_string(), value);
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.response.chunk())
                .await
                .expect("an event within 30 s")
                .expect("read the stream")
                .expect("the stream stays open");
            self.buffer.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        }
    }

    /// The next event's data, which must be a `payment_state` event.
    pub async fn next(&mut self) -> Value {
        let (kind, value) = self.next_typed().await;
        assert_eq!(kind, "payment_state", "{value}");
        value
    }
}
