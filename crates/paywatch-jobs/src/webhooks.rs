//! Webhook sinks (`[[webhooks]]`): every payment state change POSTed, in event order, to
//! each configured URL as the same JSON the event stream sends, signed with
//! HMAC-SHA256. Delivery is at least once: an event is retried with exponential backoff
//! (`backon`) until the receiver answers 2xx, and after `max_attempts` it goes to the
//! dead-letter table so the sink moves on; the sink's cursor commits with each outcome, so
//! a restart resumes where it stopped.

use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use hmac::{Hmac, Mac};
use paywatch_core::config::WebhookConfig;
use paywatch_store::{PaymentEvent, Store};
use sha2::Sha256;
use tokio_util::sync::CancellationToken;

use paywatch_query::EventView;

/// Header carrying `sha256=<hex HMAC-SHA256 of the body>`.
pub const SIGNATURE_HEADER: &str = "x-paywatch-signature";
/// Header carrying the event id.
pub const EVENT_ID_HEADER: &str = "x-paywatch-event-id";
/// How long an idle sink waits before asking the store again.
const POLL: Duration = Duration::from_millis(500);

/// `sha256=` + the hex HMAC-SHA256 of `body` under `secret`: what a receiver recomputes.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(body);
    format!(
        "sha256={}",
        alloy_primitives::hex::encode(mac.finalize().into_bytes())
    )
}

/// One sink's delivery loop.
pub struct WebhookSender {
    store: Store,
    hook: WebhookConfig,
    client: reqwest::Client,
    backoff: ExponentialBuilder,
}

impl WebhookSender {
    /// A sender for `hook` over `store`.
    pub fn new(store: Store, hook: WebhookConfig) -> Self {
        Self {
            store,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("an HTTP client"),
            backoff: ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(500))
                .with_max_delay(Duration::from_secs(60))
                .with_max_times(hook.max_attempts.saturating_sub(1) as usize)
                .with_jitter(),
            hook,
        }
    }

    /// Replaces the retry delays (tests use shorter ones); the attempt count stays the sink's.
    pub fn with_delays(mut self, min: Duration, max: Duration) -> Self {
        self.backoff = self.backoff.with_min_delay(min).with_max_delay(max);
        self
    }

    /// Delivers events until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let network = self.hook.network.as_ref().map(ToString::to_string);
        loop {
            let batch = match self.store.webhook_cursor(&self.hook.name).await {
                Ok(cursor) => {
                    self.store
                        .events_after(cursor, network.as_deref(), &self.hook.events, 100)
                        .await
                }
                Err(e) => Err(e),
            };
            let events = match batch {
                Ok(events) => events,
                Err(error) => {
                    tracing::warn!(webhook = %self.hook.name, %error, "webhook: store error; retrying");
                    Vec::new()
                }
            };
            if events.is_empty() {
                tokio::select! {
                    () = tokio::time::sleep(POLL) => continue,
                    () = shutdown.cancelled() => return,
                }
            }
            for event in events {
                tokio::select! {
                    done = self.deliver(event) => {
                        if let Err(error) = done {
                            tracing::warn!(webhook = %self.hook.name, %error, "webhook: cannot record a delivery; retrying");
                            break;
                        }
                    }
                    () = shutdown.cancelled() => return,
                }
            }
        }
    }

    /// POSTs one event until it is accepted or its attempts run out, then records which.
    async fn deliver(&self, event: PaymentEvent) -> Result<(), paywatch_store::StoreError> {
        let event_id = event.event_id;
        let body = serde_json::to_vec(&EventView::from(event)).expect("an event serializes");
        let signed = signature(self.hook.secret.expose(), &body);
        let mut attempts = 0u32;
        let post = || {
            attempts += 1;
            let request = self
                .client
                .post(self.hook.url.clone())
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .header(SIGNATURE_HEADER, &signed)
                .header(EVENT_ID_HEADER, event_id.to_string())
                .body(body.clone());
            async move {
                let response = request.send().await.map_err(|e| e.to_string())?;
                if response.status().is_success() {
                    Ok(())
                } else {
                    Err(format!("the receiver answered {}", response.status()))
                }
            }
        };
        let outcome = post
            .retry(self.backoff)
            .notify(|error, delay| {
                metrics::counter!("paywatch_webhook_failures_total", "webhook" => self.hook.name.clone()).increment(1);
                tracing::warn!(webhook = %self.hook.name, event_id, %error, ?delay, "webhook delivery failed; retrying");
            })
            .await;
        match outcome {
            Ok(()) => {
                metrics::counter!("paywatch_webhook_deliveries_total", "webhook" => self.hook.name.clone())
                    .increment(1);
                self.store.advance_webhook(&self.hook.name, event_id, None).await
            }
            Err(error) => {
                metrics::counter!("paywatch_webhook_dead_letters_total", "webhook" => self.hook.name.clone())
                    .increment(1);
                tracing::error!(webhook = %self.hook.name, event_id, %error, "webhook gave up on an event: dead-lettered");
                self.store
                    .advance_webhook(&self.hook.name, event_id, Some((attempts, &error)))
                    .await
            }
        }
    }
}
