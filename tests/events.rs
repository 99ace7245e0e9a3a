//! The refund-daemon stream, `GET /v1/events` (Server-Sent Events), through a real HTTP
//! client on SQLite and Postgres: a client reads some events, disconnects, state changes
//! happen meanwhile (a refund, a new payment), and it resumes with `Last-Event-ID`,
//! ending with every event exactly once, in order.

use std::time::Duration;

use alloy::primitives::B256;
use paywatch_core::state::EventKind;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{ApiServer, LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::sse::EventClient;
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;
use serde_json::Value;

async fn a_client_resumes_without_gaps_or_duplicates(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let (payer, seller) = (chain.signer(1), chain.account(2));
    token.mint(payer.address(), 1_000_000).await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    network.confirmations = 3;
    let chains = network.chains();
    let mut worker = worker(&chains, &store).await;
    let api = ApiServer::start(&store, &chains).await;

    for nonce in 1..=3u8 {
        token
            .pay(
                &payer,
                seller,
                1_000 * u64::from(nonce),
                B256::repeat_byte(nonce),
                chain.account(3),
            )
            .await;
    }
    sync(&mut worker).await;
    chain.mine(3).await;
    sync(&mut worker).await;

    // Read four events, then hang up.
    let mut client = EventClient::connect(&api, "", None).await;
    let mut received = Vec::new();
    for _ in 0..4 {
        received.push(client.next().await);
    }
    drop(client);
    let last = received.last().unwrap()["event_id"].as_u64().unwrap();

    // Meanwhile: a partial refund of the second payment and a new payment, both final.
    token.transfer(seller, payer.address(), 1_500).await;
    token
        .pay(&payer, seller, 7_000, B256::repeat_byte(9), chain.account(3))
        .await;
    sync(&mut worker).await;
    chain.mine(3).await;
    sync(&mut worker).await;

    // Resume after the last event received, until everything the store holds has arrived.
    let everything = store
        .events_after(0, None, &[EventKind::PaymentState], 10_000)
        .await
        .unwrap();
    let mut client = EventClient::connect(&api, "", Some(last)).await;
    while received.len() < everything.len() {
        received.push(client.next().await);
    }
    let ids: Vec<u64> = received.iter().map(|e| e["event_id"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (1..=everything.len() as u64).collect();
    assert_eq!(ids, expected, "every event once, in order, no gap");
    let changes: Vec<(String, String)> = received
        .iter()
        .map(|e| {
            (
                e["payment"].as_str().unwrap().to_string(),
                e["to_state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        changes.iter().any(|(_, state)| state == "partially_refunded"),
        "the refund is an event: {changes:?}"
    );
    assert_eq!(
        changes.iter().filter(|(_, state)| state == "paid").count(),
        4,
        "four payments became paid: {changes:?}"
    );
    // Per payment, its changes arrive in its own history order.
    for event in &received {
        let same: Vec<u64> = received
            .iter()
            .filter(|e| e["payment"] == event["payment"])
            .map(|e| e["seq"].as_u64().unwrap())
            .collect();
        assert!(same.windows(2).all(|w| w[0] + 1 == w[1]), "{same:?}");
    }

    // `?since=` works like the header, filtered by network; nothing more is pending.
    let mut client =
        EventClient::connect(&api, &format!("?since={}&network=local", ids.len() - 1), None).await;
    assert_eq!(client.next().await["event_id"], ids.len() as u64);
    let nothing_new = tokio::time::timeout(Duration::from_millis(800), client.next()).await;
    assert!(nothing_new.is_err(), "no event beyond the last one");

    for (query, header, status, reason) in [
        ("?since=abc", None, 400, "malformed_query"),
        ("?network=eip155:999", None, 404, "network_not_watched"),
        ("?cursor=1", None, 400, "malformed_query"),
        ("?kinds=payment_state,refund_state", None, 400, "malformed_query"),
        ("", Some("not-a-number"), 400, "malformed_query"),
    ] {
        let mut request = reqwest::Client::new().get(format!("{}/v1/events{query}", api.base_url));
        if let Some(header) = header {
            request = request.header("Last-Event-ID", header);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{query}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["reason"], reason, "{query}: {body}");
    }
}
on_both_stores!(a_client_resumes, a_client_resumes_without_gaps_or_duplicates);
