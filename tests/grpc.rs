//! The gRPC API (`paywatch.v1.Payments`) through the generated tonic client against a
//! running server, on SQLite and Postgres: `GetPayment` answers what the HTTP lookup
//! answers (with the `expect` comparison), `BatchGetPayments` answers the HTTP batch,
//! `ListPayments` pages through the same listing,
//! `GetTotals` sums as `/v1/totals` does, `GetHistory` answers the HTTP history,
//! `WatchPayments` resumes from a cursor with nothing lost or doubled, refusals carry the
//! HTTP reason codes as `ErrorInfo`; health checking, reflection and bearer tokens.

use std::time::Duration;

use alloy::primitives::{Address, B256};
use paywatch_core::config::{ApiAccess, Secret};
use paywatch_core::ids::lower_hex;
use paywatch_core::state::EventKind;
use paywatch_grpc::ERROR_DOMAIN;
use paywatch_grpc::proto::payments_client::PaymentsClient;
use paywatch_grpc::proto::{
    BatchGetPaymentsRequest, GetHistoryRequest, GetPaymentRequest, GetTotalsRequest, ListPaymentsRequest,
    PaymentEvent, PaymentLookup, WatchPaymentsRequest,
};
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{ApiServer, LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;
use tonic::transport::Channel;
use tonic::{Code, Status, Streaming};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_types::StatusExt;

/// The gRPC code and the paywatch reason code of a refusal.
fn refusal(status: &Status) -> (Code, String) {
    let info = status.get_details_error_info().expect("an ErrorInfo detail");
    assert_eq!(info.domain, ERROR_DOMAIN);
    (status.code(), info.reason)
}

async fn next_event(stream: &mut Streaming<PaymentEvent>) -> PaymentEvent {
    tokio::time::timeout(Duration::from_secs(30), stream.message())
        .await
        .expect("an event within 30 s")
        .expect("the stream stays healthy")
        .expect("the stream stays open")
}

async fn watch(client: &mut PaymentsClient<Channel>, since: u64) -> Streaming<PaymentEvent> {
    client
        .watch_payments(WatchPaymentsRequest {
            since,
            network: Some("local".into()),
            kinds: Vec::new(),
        })
        .await
        .expect("WatchPayments")
        .into_inner()
}

async fn grpc_answers_as_http_does(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let (payer, shop) = (chain.signer(1), chain.account(2));
    token.mint(payer.address(), 1_000_000).await;
    let mut paid = Vec::new();
    for nonce in 1..=5u8 {
        let receipt = token
            .pay(
                &payer,
                shop,
                1_000 * u64::from(nonce),
                B256::repeat_byte(nonce),
                chain.account(3),
            )
            .await;
        paid.push(lower_hex(receipt.transaction_hash));
    }
    chain.mine(3).await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    network.confirmations = 3;
    let chains = network.chains();
    let mut worker = worker(&chains, &store).await;
    sync(&mut worker).await;
    let api = ApiServer::start(&store, &chains).await;
    let mut client = PaymentsClient::connect(api.grpc_url.clone())
        .await
        .expect("connect");

    // GetPayment: the HTTP lookup's answer, field for field.
    let (status, http) = api.get(&format!("/v1/payments/local/{}", paid[1])).await;
    assert_eq!(status, 200, "{http}");
    let payment = client
        .get_payment(GetPaymentRequest {
            network: "local".into(),
            payment: paid[1].to_uppercase().replacen("0X", "0x", 1),
            ..Default::default()
        })
        .await
        .expect("GetPayment")
        .into_inner();
    assert_eq!(payment.network, http["network"]);
    assert_eq!(payment.payment, paid[1]);
    assert_eq!(payment.payer, http["payer"]);
    assert_eq!(payment.pay_to, http["pay_to"]);
    assert_eq!(payment.amount, "2000");
    assert_eq!(payment.payment_state, "paid");
    assert_eq!(payment.confirmations, http["confirmations"].as_u64().unwrap());
    assert_eq!(payment.block_hash, http["block_hash"]);
    assert_eq!(payment.block_time.as_deref(), http["block_time"].as_str());
    assert_eq!(payment.asset_decimals, Some(6));
    assert_eq!(payment.expectation, None);

    // The expect form: the same reason codes a review provider uses.
    let compared = client
        .get_payment(GetPaymentRequest {
            network: format!("eip155:{}", chain.chain_id()),
            payment: paid[1].clone(),
            expect_pay_to: Some(lower_hex(shop)),
            expect_amount: Some("2001".into()),
            ..Default::default()
        })
        .await
        .expect("GetPayment with expectations")
        .into_inner()
        .expectation
        .expect("an expectation");
    assert!(!compared.matches);
    assert_eq!(compared.reasons, ["v1_amount_mismatch"]);
    assert_eq!(compared.mismatches[0].chain, "2000");
    assert_eq!(compared.mismatches[0].expected, "2001");

    // Refusals: the HTTP reason codes as ErrorInfo, with fitting gRPC codes.
    for (network, payment, expected) in [
        (
            "local",
            format!("0x{}", "ab".repeat(32)),
            (Code::NotFound, "payment_not_found"),
        ),
        (
            "local",
            "0x1234".to_string(),
            (Code::InvalidArgument, "malformed_payment"),
        ),
        (
            "eip155:999",
            paid[0].clone(),
            (Code::NotFound, "network_not_watched"),
        ),
        (
            "nonsense",
            paid[0].clone(),
            (Code::InvalidArgument, "malformed_network"),
        ),
    ] {
        let status = client
            .get_payment(GetPaymentRequest {
                network: network.into(),
                payment,
                ..Default::default()
            })
            .await
            .expect_err("refused");
        let (code, reason) = refusal(&status);
        assert_eq!((code, reason.as_str()), expected, "{status:?}");
    }

    // BatchGetPayments: the HTTP batch's answers, in request order, each wrong lookup
    // answered in its place.
    let lookups = [
        (paid[0].clone(), None),
        (format!("0x{}", "ab".repeat(32)), None),
        ("0x1234".to_string(), None),
        (paid[3].clone(), Some(0)),
    ];
    let (status, http) = api
        .post(
            "/v1/payments:lookup",
            &serde_json::json!({
                "lookups": lookups
                    .iter()
                    .map(|(payment, index)| serde_json::json!({"network": "local", "payment": payment, "index": index}))
                    .collect::<Vec<_>>()
            }),
        )
        .await;
    assert_eq!(status, 200, "{http}");
    let batch = client
        .batch_get_payments(BatchGetPaymentsRequest {
            lookups: lookups
                .iter()
                .map(|(payment, index)| PaymentLookup {
                    network: "local".into(),
                    payment: payment.clone(),
                    index: *index,
                })
                .collect(),
        })
        .await
        .expect("BatchGetPayments")
        .into_inner();
    let answers: Vec<(String, Option<String>, Option<String>)> = batch
        .results
        .iter()
        .map(|r| {
            (
                r.lookup.as_ref().unwrap().payment.clone(),
                r.payment.as_ref().map(|p| p.amount.clone()),
                r.reason.clone(),
            )
        })
        .collect();
    let http_answers: Vec<(String, Option<String>, Option<String>)> = http["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["lookup"]["payment"].as_str().unwrap().to_string(),
                r["payment"]["amount"].as_str().map(str::to_string),
                r["reason"].as_str().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(answers, http_answers);
    assert_eq!(
        answers,
        [
            (paid[0].clone(), Some("1000".to_string()), None),
            (lookups[1].0.clone(), None, Some("payment_not_found".to_string())),
            (lookups[2].0.clone(), None, Some("malformed_payment".to_string())),
            (paid[3].clone(), Some("4000".to_string()), None),
        ]
    );
    assert!(batch.results[2].message.as_deref().is_some_and(|m| !m.is_empty()));
    let too_many = client
        .batch_get_payments(BatchGetPaymentsRequest {
            lookups: vec![
                PaymentLookup {
                    network: "local".into(),
                    payment: paid[0].clone(),
                    index: None,
                };
                1001
            ],
        })
        .await
        .expect_err("refused");
    assert_eq!(
        refusal(&too_many),
        (Code::InvalidArgument, "payload_too_large".to_string())
    );

    // ListPayments: pages of two through the same listing as HTTP, cursor included.
    let mut listed = Vec::new();
    let mut cursor = None;
    loop {
        let page = client
            .list_payments(ListPaymentsRequest {
                network: "local".into(),
                pay_to: Some(lower_hex(shop)),
                limit: Some(2),
                cursor: cursor.clone(),
                ..Default::default()
            })
            .await
            .expect("ListPayments")
            .into_inner();
        listed.extend(page.payments.iter().map(|p| p.payment.clone()));
        cursor = page.next_cursor;
        if !page.has_more {
            break;
        }
    }
    assert_eq!(listed, paid);
    let (_, http_page) = api.get("/v1/payments?network=local&limit=2").await;
    let first = client
        .list_payments(ListPaymentsRequest {
            network: "local".into(),
            limit: Some(2),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.next_cursor.as_deref(), http_page["next_cursor"].as_str());
    for (request, reason) in [
        (
            ListPaymentsRequest {
                network: "local".into(),
                from: Some("yesterday".into()),
                ..Default::default()
            },
            "malformed_query",
        ),
        (
            ListPaymentsRequest {
                network: "local".into(),
                limit: Some(1_000_000),
                ..Default::default()
            },
            "malformed_query",
        ),
        (ListPaymentsRequest::default(), "malformed_query"),
    ] {
        let status = client.list_payments(request).await.expect_err("refused");
        assert_eq!(refusal(&status), (Code::InvalidArgument, reason.to_string()));
    }

    // GetTotals: the sums /v1/totals answers, group for group.
    for group_by in [None, Some("pay_to"), Some("method")] {
        let query = group_by.map(|g| format!("&group_by={g}")).unwrap_or_default();
        let (status, http) = api.get(&format!("/v1/totals?network=local{query}")).await;
        assert_eq!(status, 200, "{http}");
        let totals = client
            .get_totals(GetTotalsRequest {
                network: "local".into(),
                group_by: group_by.map(str::to_string),
                ..Default::default()
            })
            .await
            .expect("GetTotals")
            .into_inner();
        assert_eq!(totals.group_by, http["group_by"]);
        let http_groups = http["groups"].as_array().unwrap();
        assert_eq!(totals.groups.len(), http_groups.len(), "{http}");
        for (group, expected) in totals.groups.iter().zip(http_groups) {
            assert_eq!(group.key, expected["key"]);
            assert_eq!(group.payments, expected["payments"].as_u64().unwrap());
            assert_eq!(group.final_amount, expected["final_amount"]);
            assert_eq!(group.pending_amount, expected["pending_amount"]);
            assert_eq!(group.refunded_amount, expected["refunded_amount"]);
            assert_eq!(group.held_amount, expected["held_amount"]);
            assert_eq!(group.fee_amount, expected["fee_amount"]);
            for (state, count) in expected["by_state"].as_object().unwrap() {
                assert_eq!(group.by_state.get(state).copied(), count.as_u64(), "{state}");
            }
            assert_eq!(
                group.by_state.len(),
                expected["by_state"].as_object().unwrap().len()
            );
        }
        if group_by == Some("pay_to") {
            assert_eq!(totals.groups.len(), 1);
            assert_eq!(totals.groups[0].key, lower_hex(shop));
            assert_eq!(totals.groups[0].payments, 5);
            assert_eq!(totals.groups[0].final_amount, "15000");
        }
    }
    let status = client
        .get_totals(GetTotalsRequest {
            network: "local".into(),
            group_by: Some("week".into()),
            ..Default::default()
        })
        .await
        .expect_err("refused");
    assert_eq!(
        refusal(&status),
        (Code::InvalidArgument, "malformed_query".to_string())
    );
    assert!(
        status.message().contains("asset") && status.message().contains("method"),
        "the refusal names what group_by takes: {}",
        status.message()
    );

    // WatchPayments: read some events, hang up, a refund and a payment happen, resume
    // from the last event: every event once, in order, none lost.
    let everything_before = store
        .events_after(0, None, &[EventKind::PaymentState], 10_000)
        .await
        .unwrap()
        .len();
    let mut stream = watch(&mut client, 0).await;
    let mut received = Vec::new();
    for _ in 0..3 {
        received.push(next_event(&mut stream).await);
    }
    drop(stream);
    token.transfer(shop, payer.address(), 500).await;
    token
        .pay(&payer, shop, 9_000, B256::repeat_byte(9), chain.account(3))
        .await;
    chain.mine(3).await;
    sync(&mut worker).await;
    let everything = store
        .events_after(0, None, &[EventKind::PaymentState], 10_000)
        .await
        .unwrap();
    assert!(everything.len() > everything_before);
    let mut stream = watch(&mut client, received.last().unwrap().event_id).await;
    while received.len() < everything.len() {
        received.push(next_event(&mut stream).await);
    }
    let ids: Vec<u64> = received.iter().map(|e| e.event_id).collect();
    assert_eq!(ids, (1..=everything.len() as u64).collect::<Vec<_>>());
    assert!(
        received.iter().any(|e| e.to_state == "partially_refunded"),
        "the refund is an event"
    );

    // GetHistory: the refunded payment's changes, as the HTTP history answers them.
    let refunded = &received
        .iter()
        .find(|e| e.to_state == "partially_refunded")
        .unwrap()
        .payment;
    let (status, http) = api.get(&format!("/v1/payments/local/{refunded}/history")).await;
    assert_eq!(status, 200, "{http}");
    let history = client
        .get_history(GetHistoryRequest {
            network: "local".into(),
            payment: refunded.clone(),
            index: None,
        })
        .await
        .expect("GetHistory")
        .into_inner();
    let payment = history.payment.expect("the payment now");
    assert_eq!(payment.payment, *refunded);
    assert_eq!(payment.payment_state, "partially_refunded");
    assert_eq!(payment.refunded_amount, "500");
    let changes: Vec<(Option<&str>, &str, &str)> = history
        .history
        .iter()
        .map(|h| (h.from_state.as_deref(), h.to_state.as_str(), h.cause.as_str()))
        .collect();
    let http_changes: Vec<(Option<&str>, &str, &str)> = http["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["from_state"].as_str(),
                h["to_state"].as_str().unwrap(),
                h["cause"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(changes, http_changes);
    assert_eq!(
        changes.last(),
        Some(&(Some("paid"), "partially_refunded", "refund"))
    );
    for (entry, expected) in history.history.iter().zip(http["history"].as_array().unwrap()) {
        assert_eq!(entry.seq, expected["seq"].as_u64().unwrap());
        assert_eq!(entry.block_number, expected["block_number"].as_u64());
        assert_eq!(entry.tx.as_deref(), expected["tx"].as_str());
        assert_eq!(entry.at, expected["at"]);
    }
    let status = client
        .get_history(GetHistoryRequest {
            network: "local".into(),
            payment: format!("0x{}", "ab".repeat(32)),
            index: None,
        })
        .await
        .expect_err("refused");
    assert_eq!(
        refusal(&status),
        (Code::NotFound, "payment_not_found".to_string())
    );
    // A stream that is caught up waits, and wakes when a new change commits.
    token
        .pay(&payer, shop, 10_000, B256::repeat_byte(10), chain.account(3))
        .await;
    sync(&mut worker).await;
    let woken = next_event(&mut stream).await;
    assert_eq!(woken.event_id, everything.len() as u64 + 1);
    assert_eq!(woken.to_state, "pending");
    assert_eq!(woken.kind, "payment_state");
    let status = client
        .watch_payments(WatchPaymentsRequest {
            since: 0,
            network: Some("eip155:999".into()),
            kinds: Vec::new(),
        })
        .await
        .expect_err("refused");
    assert_eq!(
        refusal(&status),
        (Code::NotFound, "network_not_watched".to_string())
    );

    // Health checking tracks the store; reflection lists the service.
    let channel = Channel::from_shared(api.grpc_url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel.clone());
    let mut serving = None;
    for _ in 0..50 {
        if let Ok(answer) = health
            .check(HealthCheckRequest {
                service: "paywatch.v1.Payments".into(),
            })
            .await
        {
            serving = Some(answer.into_inner().status);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(serving, Some(ServingStatus::Serving as i32));
    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut answers = reflection
        .server_reflection_info(futures::stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let Some(MessageResponse::ListServicesResponse(list)) =
        answers.message().await.unwrap().unwrap().message_response
    else {
        panic!("reflection lists services");
    };
    let services: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
    assert!(services.contains(&"paywatch.v1.Payments"), "{services:?}");
}
on_both_stores!(grpc_answers_as_http_does, grpc_answers_as_http_does);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_need_a_client_token() {
    const TOKEN: &str = "daemon-token-fedcba9876543210";
    let db = TestDb::create(Kind::Sqlite).await;
    let store = db.open().await;
    let mut chains = LocalNetwork::new(31337, "http://127.0.0.1:1", &[Address::repeat_byte(0x11)]).chains();
    chains.api = ApiAccess {
        clients: [("daemon".to_string(), Secret::new(TOKEN))].into(),
        requests_per_second: Some(2),
    };
    let api = ApiServer::start(&store, &chains).await;
    let channel = Channel::from_shared(api.grpc_url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let lookup = || GetPaymentRequest {
        network: "local".into(),
        payment: format!("0x{}", "ab".repeat(32)),
        ..Default::default()
    };

    let status = PaymentsClient::new(channel.clone())
        .get_payment(lookup())
        .await
        .expect_err("no token");
    assert_eq!(
        refusal(&status),
        (Code::Unauthenticated, "unauthorized".to_string())
    );

    let bearer: tonic::metadata::MetadataValue<_> = format!("Bearer {TOKEN}").parse().unwrap();
    let mut client = PaymentsClient::with_interceptor(channel, move |mut request: tonic::Request<()>| {
        request.metadata_mut().insert("authorization", bearer.clone());
        Ok(request)
    });
    let status = client.get_payment(lookup()).await.expect_err("not indexed");
    assert_eq!(
        refusal(&status),
        (Code::NotFound, "payment_not_found".to_string())
    );

    // Over the client's rate limit: RESOURCE_EXHAUSTED with a RetryInfo.
    let mut limited = None;
    for _ in 0..20 {
        let status = client.get_payment(lookup()).await.expect_err("refused");
        if status.code() == Code::ResourceExhausted {
            limited = Some(status);
            break;
        }
    }
    let limited = limited.expect("the burst runs into the limit");
    assert_eq!(refusal(&limited).1, "rate_limited");
    assert!(limited.get_details_retry_info().is_some());
}
