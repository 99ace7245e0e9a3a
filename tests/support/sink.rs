//! A webhook receiver for tests, fed by a real `WebhookSender`: it accepts every POST and
//! keeps each JSON body, in arrival order.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use paywatch_core::config::{Secret, WebhookConfig};
use paywatch_core::state::EventKind;
use paywatch_jobs::WebhookSender;
use paywatch_store::Store;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A running receiver and the sender delivering to it; both stop when it is dropped.
pub struct WebhookSink {
    received: Arc<Mutex<Vec<Value>>>,
    stop: CancellationToken,
}

impl Drop for WebhookSink {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl WebhookSink {
    /// Starts a receiver on a free loopback port and a sender named `name` delivering the
    /// `events` of `store` to it, from the first event.
    pub async fn deliver(store: &Store, name: &str, events: Vec<EventKind>) -> Self {
        let received: Arc<Mutex<Vec<Value>>> = Arc::default();
        let app = {
            let received = received.clone();
            axum::Router::new().route(
                "/hook",
                axum::routing::post(move |body: axum::body::Bytes| async move {
                    let value = serde_json::from_slice(&body).expect("a JSON event");
                    received.lock().expect("received bodies").push(value);
                    axum::http::StatusCode::NO_CONTENT
                }),
            )
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the sink");
        let url = format!("http://{}/hook", listener.local_addr().expect("sink address"));
        let stop = CancellationToken::new();
        let serving = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(serving.cancelled_owned())
                .await
                .expect("serve the sink")
        });
        let hook = WebhookConfig {
            name: name.to_string(),
            url: url.parse().expect("the sink's URL"),
            secret: Secret::new("a-test-webhook-secret"),
            network: None,
            max_attempts: 3,
            events,
        };
        tokio::spawn(WebhookSender::new(store.clone(), hook).run(stop.clone()));
        Self { received, stop }
    }

    /// The first `count` bodies received, waiting up to `within` for them.
    pub async fn first(&self, count: usize, within: Duration) -> Vec<Value> {
        let deadline = Instant::now() + within;
        loop {
            let received = self.received.lock().expect("received bodies").clone();
            if received.len() >= count {
                return received[..count].to_vec();
            }
            assert!(
                Instant::now() < deadline,
                "{} of {count} webhook deliveries",
                received.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
