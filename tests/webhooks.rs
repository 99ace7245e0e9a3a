//! Webhook sinks against real HTTP receivers, on SQLite and Postgres: a receiver that
//! fails twice then succeeds gets every event once accepted, in order, each with a valid
//! HMAC-SHA256 signature; a receiver that is down gets each event `max_attempts` times and
//! the events land in the dead-letter table; a restarted sender resumes without resending.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy::primitives::{Address, B256};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use paywatch_core::config::{Secret, WebhookConfig};
use paywatch_core::state::EventKind;
use paywatch_jobs::{EVENT_ID_HEADER, SIGNATURE_HEADER, WebhookSender, signature};
use paywatch_store::Store;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;
use tokio_util::sync::CancellationToken;

const SECRET: &str = "webhook-secret-0123456789";

/// What a receiver saw: every request, and the accepted ones.
#[derive(Default)]
struct Received {
    requests: usize,
    accepted: Vec<(u64, String, Bytes)>,
}

/// A receiver that refuses its first `refuse_first` requests (all of them: `usize::MAX`).
async fn receiver(refuse_first: usize) -> (String, Arc<Mutex<Received>>) {
    let seen = Arc::new(Mutex::new(Received::default()));
    let app = Router::new()
        .route(
            "/hook",
            post(
                |State((seen, refuse)): State<(Arc<Mutex<Received>>, usize)>,
                 headers: HeaderMap,
                 body: Bytes| async move {
                    let mut seen = seen.lock().unwrap();
                    seen.requests += 1;
                    if seen.requests <= refuse {
                        return StatusCode::SERVICE_UNAVAILABLE;
                    }
                    let id = headers[EVENT_ID_HEADER].to_str().unwrap().parse().unwrap();
                    let signed = headers[SIGNATURE_HEADER].to_str().unwrap().to_string();
                    seen.accepted.push((id, signed, body));
                    StatusCode::NO_CONTENT
                },
            ),
        )
        .with_state((seen.clone(), refuse_first));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

fn hook(name: &str, url: &str, max_attempts: u32) -> WebhookConfig {
    WebhookConfig {
        name: name.to_string(),
        url: url.parse().unwrap(),
        secret: Secret::new(SECRET),
        network: None,
        max_attempts,
        events: vec![EventKind::PaymentState],
    }
}

/// Runs a sender for `hook` until its cursor reaches `last_event`, then stops it.
async fn deliver_up_to(store: &Store, hook: WebhookConfig, last_event: u64) {
    let name = hook.name.clone();
    let shutdown = CancellationToken::new();
    let sender = WebhookSender::new(store.clone(), hook)
        .with_delays(Duration::from_millis(10), Duration::from_millis(40));
    let task = tokio::spawn(sender.run(shutdown.clone()));
    let deadline = Instant::now() + Duration::from_secs(60);
    while store.webhook_cursor(&name).await.unwrap() < last_event {
        assert!(
            Instant::now() < deadline,
            "{name} did not reach event {last_event}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    shutdown.cancel();
    task.await.unwrap();
}

async fn flaky_and_dead_receivers(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let payer = chain.signer(1);
    token.mint(payer.address(), 1_000_000).await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]).chains();
    let mut worker = worker(&chains, &store).await;
    let pay = |n: u8, to: Address| {
        let (token, payer) = (&token, &payer);
        let facilitator = chain.account(3);
        async move {
            token
                .pay(payer, to, 1_000, B256::repeat_byte(n), facilitator)
                .await
        }
    };
    pay(1, chain.account(2)).await;
    pay(2, chain.account(2)).await;
    chain.mine(3).await;
    sync(&mut worker).await;
    let events = store
        .events_after(0, None, &[EventKind::PaymentState], 1000)
        .await
        .unwrap();
    let n = events.len() as u64;
    assert!(n >= 2, "events: {events:?}");

    let (flaky_url, flaky) = receiver(2).await;
    let (down_url, down) = receiver(usize::MAX).await;
    deliver_up_to(&store, hook("flaky", &flaky_url, 5), n).await;
    deliver_up_to(&store, hook("down", &down_url, 2), n).await;

    {
        let flaky = flaky.lock().unwrap();
        assert_eq!(flaky.requests as u64, n + 2, "two refusals, then each event once");
        let ids: Vec<u64> = flaky.accepted.iter().map(|(id, _, _)| *id).collect();
        assert_eq!(ids, (1..=n).collect::<Vec<_>>(), "in order, none twice");
        for (id, signed, body) in &flaky.accepted {
            assert_eq!(signed, &signature(SECRET, body), "HMAC of event {id}");
            let event: serde_json::Value = serde_json::from_slice(body).unwrap();
            assert_eq!(event["event_id"], *id);
        }
    }
    assert!(store.dead_letters("flaky").await.unwrap().is_empty());
    let dead = store.dead_letters("down").await.unwrap();
    assert_eq!(
        dead.iter().map(|d| d.event_id).collect::<Vec<_>>(),
        (1..=n).collect::<Vec<_>>()
    );
    assert!(
        dead.iter().all(|d| d.attempts == 2 && d.error.contains("503")),
        "{dead:?}"
    );
    assert_eq!(down.lock().unwrap().requests as u64, 2 * n);

    // New events after a restart: only they are sent.
    pay(3, chain.account(2)).await;
    chain.mine(3).await;
    sync(&mut worker).await;
    let total = store
        .events_after(0, None, &[EventKind::PaymentState], 1000)
        .await
        .unwrap()
        .len() as u64;
    assert!(total > n);
    deliver_up_to(&store, hook("flaky", &flaky_url, 5), total).await;
    let ids: Vec<u64> = flaky
        .lock()
        .unwrap()
        .accepted
        .iter()
        .map(|(id, _, _)| *id)
        .collect();
    assert_eq!(ids, (1..=total).collect::<Vec<_>>(), "resumed at its cursor");
}
on_both_stores!(flaky_and_dead_receivers, flaky_and_dead_receivers);
