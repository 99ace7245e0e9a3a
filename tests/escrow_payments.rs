//! x402 auth-capture payments through the commerce-payments escrow, on a real anvil node
//! with paywatch's stand-ins for the escrow and its collectors at the x402 SDK's v1.1
//! addresses, signed by the SDK's auth-capture client (`tests/sdk/auth_capture.js`): holds,
//! partial and full captures with fees, voids, reclaims, charges and refunds, read by the
//! EVM worker and answered by the HTTP API (and its events by SSE, gRPC and a webhook), on
//! SQLite and on Postgres; and a reorg that takes a capture and a refund away.

use std::time::Duration;

use alloy::primitives::{Address, B256, keccak256};
use paywatch_core::ids::lower_hex;
use paywatch_core::method::{AUTH_CAPTURE_ESCROW_V1_0, AUTH_CAPTURE_ESCROW_V1_1};
use paywatch_core::state::EventKind;
use paywatch_core::state::PaymentState;
use paywatch_evm::worker::StepOutcome;
use paywatch_grpc::proto::WatchPaymentsRequest;
use paywatch_grpc::proto::payments_client::PaymentsClient;
use paywatch_tests::chain::Chain;
use paywatch_tests::escrow::{EIP3009_COLLECTOR, ESCROW, EscrowKit, REFUND_COLLECTOR, SignedPayment, Terms};
use paywatch_tests::harness::{Indexed, LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::proxy::{Faults, RpcProxy, fault_seed};
use paywatch_tests::sink::WebhookSink;
use paywatch_tests::sse::EventClient;
use paywatch_tests::stores::{Kind, TestDb, chain_facts, dump};
use paywatch_tests::token::Token;
use paywatch_tests::tools::{node_json, repo_root};
use serde_json::Value;

const PAYER: usize = 1;
const SELLER: usize = 2;
const OPERATOR: usize = 3;
const FEES: usize = 4;

/// The escrow's and collectors' addresses paywatch and the test kit use are the x402
/// SDK's.
#[test]
fn the_escrow_sits_where_the_x402_sdk_looks_for_it() {
    let sdk = node_json(&[
        "-e",
        "const evm = require('@x402/evm'); process.stdout.write(JSON.stringify({ \
         v10: evm.AUTH_CAPTURE_ESCROW_V1_0_ADDRESS, v11: evm.AUTH_CAPTURE_ESCROW_V1_1_ADDRESS, \
         default: evm.resolveAuthCaptureDeployment() }))",
    ]);
    let address =
        |value: &Value| -> Address { value.as_str().and_then(|a| a.parse().ok()).expect("an address") };
    assert_eq!(address(&sdk["v10"]), AUTH_CAPTURE_ESCROW_V1_0);
    assert_eq!(address(&sdk["v11"]), AUTH_CAPTURE_ESCROW_V1_1);
    let default = &sdk["default"];
    assert_eq!(address(&default["escrow"]), ESCROW);
    assert_eq!(address(&default["eip3009Collector"]), EIP3009_COLLECTOR);
    assert_eq!(address(&default["operatorRefundCollector"]), REFUND_COLLECTOR);
}

/// The event signatures and the `PaymentInfo` type string of commerce-payments' source
/// (`tests/fixtures/commerce-payments/`, an excerpt with its commit and licence).
fn commerce_payments_interface() -> (Vec<String>, String) {
    let source = std::fs::read_to_string(
        repo_root().join("tests/fixtures/commerce-payments/AuthCaptureEscrow.interface.sol"),
    )
    .expect("the commerce-payments excerpt");
    let code: String = source
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join(" ");
    let struct_body = code
        .split("struct PaymentInfo {")
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .expect("struct PaymentInfo");
    let struct_types: Vec<&str> = struct_body
        .split(';')
        .filter_map(|field| field.split_whitespace().next())
        .collect();
    let tuple = format!("({})", struct_types.join(","));
    let type_string = code
        .split("keccak256(")
        .nth(1)
        .and_then(|rest| rest.split('"').nth(1))
        .expect("PAYMENT_INFO_TYPEHASH's string")
        .to_string();
    let signatures = code
        .split("event ")
        .skip(1)
        .map(|event| {
            let (name, rest) = event.split_once('(').expect("event name");
            let params = rest.split_once(')').expect("event parameters").0;
            let types: Vec<String> = params
                .split(',')
                .map(|param| {
                    let ty = param.split_whitespace().next().expect("a parameter type");
                    if ty == "PaymentInfo" {
                        tuple.clone()
                    } else {
                        ty.to_string()
                    }
                })
                .collect();
            format!("{}({})", name.trim(), types.join(","))
        })
        .filter(|signature| !signature.starts_with("TokenStoreCreated"))
        .collect();
    (signatures, type_string)
}

/// paywatch decodes the events commerce-payments' escrow emits, and the test stand-in
/// emits the same events and hashes with the same type string.
#[test]
fn the_escrow_events_are_those_of_commerce_payments() {
    let (signatures, type_string) = commerce_payments_interface();
    let mut source: Vec<B256> = signatures.iter().map(keccak256).collect();
    source.sort_unstable();
    let mut decoded = paywatch_evm::decode::escrow_topics().to_vec();
    decoded.sort_unstable();
    assert_eq!(decoded, source, "{signatures:?}");

    let artifact: Value =
        serde_json::from_str(include_str!("contracts/AuthCaptureEscrow.json")).expect("artifact");
    let abi: alloy::json_abi::JsonAbi = serde_json::from_value(artifact["abi"].clone()).expect("an ABI");
    let mut stand_in: Vec<B256> = abi
        .events()
        .filter(|event| event.name != "TokenStoreCreated")
        .map(|event| event.selector())
        .collect();
    stand_in.sort_unstable();
    assert_eq!(stand_in, source);
    let stand_in_source = include_str!("contracts/AuthCaptureEscrow.sol");
    assert!(
        stand_in_source.contains(&format!("\"{type_string}\"")),
        "{type_string}"
    );
}

/// A chain with a funded payer, the escrow installed, and the terms the operator offers.
async fn escrow_chain() -> (Chain, Token) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    token.mint(chain.account(PAYER), 1_000_000).await;
    // The operator's own money, for refunds after the seller was paid.
    token.mint(chain.account(OPERATOR), 1_000_000).await;
    (chain, token)
}

fn terms(chain: &Chain, max_amount: u64) -> Terms {
    Terms::usual(
        chain.account(OPERATOR),
        chain.account(SELLER),
        chain.account(FEES),
        max_amount,
    )
}

fn path(chain: &Chain, id: impl AsRef<[u8]>) -> String {
    format!("/v1/payments/eip155:{}/{}", chain.chain_id(), lower_hex(id))
}

/// The amounts and state of a looked-up escrowed payment.
fn amounts(body: &Value) -> [&str; 7] {
    let field = |key: &str| body[key].as_str().unwrap_or("-");
    [
        field("payment_state"),
        field("amount"),
        field("captured_amount"),
        field("held_amount"),
        field("released_amount"),
        field("refunded_amount"),
        field("fee_amount"),
    ]
}

async fn escrow_lifecycles_are_payments(kind: Kind) {
    let (chain, token) = escrow_chain().await;
    let kit = EscrowKit::install(&chain, &token).await;
    let seller = chain.account(SELLER);

    // Held, then captured in two parts with a 1 % fee: paid in full.
    let captured = kit.sign(PAYER, terms(&chain, 1_000)).await;
    assert_eq!(
        paywatch_evm::decode::payment_info_hash(chain.chain_id(), ESCROW, &{
            let mut agnostic = captured.decoded();
            agnostic.payer = Address::ZERO;
            agnostic
        }),
        captured.nonce,
        "the SDK's nonce is the escrow's hash with the payer zeroed"
    );
    assert_eq!(
        kit.hash_on_chain(&captured).await,
        captured.hash(chain.chain_id())
    );
    let opened = kit.authorize(&captured, 1_000).await;
    kit.capture(&captured, 600, 100).await;
    kit.capture(&captured, 400, 100).await;
    // A plain transfer from the seller back to the payer is not a refund of it.
    token.transfer(seller, chain.account(PAYER), 50).await;

    // Held, part captured: paid for what was captured, the rest still held.
    let partial = kit.sign(PAYER, terms(&chain, 900)).await;
    kit.authorize(&partial, 800).await;
    kit.capture(&partial, 300, 0).await;

    // Held, then voided by the operator.
    let voided = kit.sign(PAYER, terms(&chain, 700)).await;
    kit.authorize(&voided, 700).await;
    kit.void(&voided).await;

    // Charged (authorized and captured at once), then refunded in two parts.
    let charged = kit.sign(PAYER, terms(&chain, 500)).await;
    let charge = kit.charge(&charged, 500, 0).await;
    kit.refund(&charged, 200).await;
    let charged_part = kit.sign(PAYER, terms(&chain, 400)).await;
    kit.charge(&charged_part, 400, 0).await;
    kit.refund(&charged_part, 100).await;
    kit.refund(&charged, 300).await;

    // Held and nothing more: still in escrow.
    let held = kit.sign(PAYER, terms(&chain, 150)).await;
    kit.authorize(&held, 150).await;

    // Held, and reclaimed by the payer once the capture deadline passed (the SDK's
    // signature is good for 300 s, which the deadline cannot precede).
    let reclaimed = kit
        .sign(
            PAYER,
            Terms {
                capture_within: 400,
                ..terms(&chain, 250)
            },
        )
        .await;
    kit.authorize(&reclaimed, 250).await;
    chain.travel(401).await;
    kit.reclaim(&reclaimed).await;
    chain.mine(3).await;

    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    let indexed = Indexed::new(kind, &network).await;
    let api = &indexed.api;
    let id = |signed: &SignedPayment| signed.hash(chain.chain_id());

    let (status, body) = api.get(&path(&chain, id(&captured))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["method"], "auth_capture");
    assert_eq!(body["payer"], lower_hex(chain.account(PAYER)));
    assert_eq!(body["pay_to"], lower_hex(seller));
    assert_eq!(body["asset"], lower_hex(token.address));
    assert_eq!(body["max_amount"], "1000");
    assert_eq!(body["nonce"], lower_hex(captured.nonce));
    assert_eq!(body["facilitator"], lower_hex(chain.account(OPERATOR)));
    assert_eq!(amounts(&body), ["paid", "1000", "1000", "0", "0", "0", "10"]);
    let escrow = &body["escrow"];
    assert_eq!(escrow["escrow"], lower_hex(ESCROW));
    assert_eq!(escrow["operator"], lower_hex(chain.account(OPERATOR)));
    assert_eq!(escrow["fee_receiver"], lower_hex(chain.account(FEES)));
    assert_eq!(escrow["salt"], captured.info.salt.to_string());
    let events: Vec<(&str, &str, bool)> = escrow["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap(),
                e["amount"].as_str().unwrap(),
                e["is_final"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("authorized", "1000", true),
            ("captured", "600", true),
            ("captured", "400", true)
        ]
    );
    assert_eq!(
        escrow["events"][0]["token_collector"],
        lower_hex(EIP3009_COLLECTOR)
    );
    assert_eq!(escrow["events"][1]["fee_bps"], 100);

    // The authorization's transaction finds the payment too.
    let (status, by_tx) = api.get(&path(&chain, opened.transaction_hash)).await;
    assert_eq!(status, 200, "{by_tx}");
    assert_eq!(by_tx["payment"], body["payment"]);

    let state_of = |signed: &SignedPayment| {
        let path = path(&chain, id(signed));
        async move {
            let (status, body) = api.get(&path).await;
            assert_eq!(status, 200, "{body}");
            body
        }
    };
    assert_eq!(
        amounts(&state_of(&partial).await),
        ["paid", "800", "300", "500", "0", "0", "0"]
    );
    assert_eq!(
        amounts(&state_of(&voided).await),
        ["released", "700", "0", "0", "700", "0", "0"]
    );
    let refunded = state_of(&charged).await;
    assert_eq!(
        amounts(&refunded),
        ["refunded", "500", "500", "0", "0", "500", "0"]
    );
    let refunds: Vec<(&str, &str)> = refunded["refunds"]
        .as_array()
        .expect("refunds")
        .iter()
        .map(|r| (r["amount"].as_str().unwrap(), r["rule"].as_str().unwrap()))
        .collect();
    assert_eq!(refunds, [("200", "escrow"), ("300", "escrow")]);
    let (_, by_charge) = api.get(&path(&chain, charge.transaction_hash)).await;
    assert_eq!(by_charge["payment"], refunded["payment"]);
    assert_eq!(
        amounts(&state_of(&charged_part).await),
        ["partially_refunded", "400", "400", "0", "0", "100", "0"]
    );
    assert_eq!(
        amounts(&state_of(&reclaimed).await),
        ["released", "250", "0", "0", "250", "0", "0"]
    );
    assert_eq!(
        amounts(&state_of(&held).await),
        ["held", "150", "0", "150", "0", "0", "0"]
    );

    // A seller who expects an amount is held to what the captures paid: a hold alone pays
    // nothing.
    let expectation = |signed: &SignedPayment, amount: u64| {
        let path = format!("{}?amount={amount}", path(&chain, id(signed)));
        async move {
            let (status, body) = api.get(&path).await;
            assert_eq!(status, 200, "{body}");
            body["expectation"]["reasons"].clone()
        }
    };
    assert_eq!(expectation(&partial, 300).await, serde_json::json!([]));
    assert_eq!(
        expectation(&partial, 800).await,
        serde_json::json!(["v1_amount_mismatch"])
    );
    assert_eq!(
        expectation(&held, 150).await,
        serde_json::json!(["v1_amount_mismatch", "payment_not_captured"])
    );

    // The collector's ERC-3009 pull of each payment is not an exact payment of its own,
    // and the plain transfer back is no payment.
    let (status, page) = api.get("/v1/payments?network=local&method=eip3009").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["payments"], serde_json::json!([]), "{page}");
    let (status, page) = api.get("/v1/payments?network=local&method=auth_capture").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["payments"].as_array().map(Vec::len), Some(7), "{page}");

    // Finance: held money is not revenue; what final captures paid is, with the refunds
    // and the fees beside it.
    let (status, totals) = api.get("/v1/totals?network=local&group_by=method").await;
    assert_eq!(status, 200, "{totals}");
    assert_eq!(totals["groups"].as_array().map(Vec::len), Some(1), "{totals}");
    let group = &totals["groups"][0];
    assert_eq!(group["key"], "auth_capture");
    assert_eq!(group["payments"], 7);
    assert_eq!(
        group["by_state"],
        serde_json::json!({"held": 1, "paid": 2, "partially_refunded": 1, "refunded": 1, "released": 2})
    );
    let sums: Vec<&str> = [
        "final_amount",
        "pending_amount",
        "refunded_amount",
        "held_amount",
        "fee_amount",
    ]
    .iter()
    .map(|key| group[key].as_str().unwrap_or("-"))
    .collect();
    assert_eq!(sums, ["2200", "0", "600", "650", "10"]);
    let (status, csv) = api
        .get_csv("/v1/payments?network=local&method=auth_capture")
        .await;
    assert_eq!(status, 200, "{csv}");
    let header = csv.lines().next().expect("a header");
    for column in ["captured_amount", "held_amount", "released_amount"] {
        assert!(header.split(',').any(|c| c == column), "{header}");
    }

    // Refund daemons: every move of the escrow is an event in the stream, with its cause.
    let events = indexed
        .store
        .events_after(0, None, &[EventKind::PaymentState], 1_000)
        .await
        .unwrap();
    let causes_of = |signed: &SignedPayment| -> Vec<String> {
        let id = lower_hex(id(signed));
        events
            .iter()
            .filter(|e| e.payment_id == id)
            .map(|e| format!("{}:{}", e.change.cause, e.change.to_state))
            .collect()
    };
    assert_eq!(
        causes_of(&captured),
        ["seen:pending", "final:held", "captured:paid", "captured:paid"],
        "each capture is an event of its own"
    );
    assert_eq!(
        causes_of(&voided),
        ["seen:pending", "final:held", "released:released"]
    );
    assert_eq!(
        causes_of(&charged),
        [
            "seen:pending",
            "final:paid",
            "refund:partially_refunded",
            "refund:refunded"
        ]
    );

    // The same events, in the same order, through SSE, gRPC and a webhook.
    let expected: Vec<(u64, String, String)> = events
        .iter()
        .map(|e| {
            (
                e.event_id,
                e.change.cause.to_string(),
                e.change.to_state.to_string(),
            )
        })
        .collect();
    let mut sse = EventClient::connect(&indexed.api, "", Some(0)).await;
    let mut grpc = PaymentsClient::connect(indexed.api.grpc_url.clone())
        .await
        .expect("connect gRPC")
        .watch_payments(WatchPaymentsRequest {
            since: 0,
            network: None,
            kinds: Vec::new(),
        })
        .await
        .expect("WatchPayments")
        .into_inner();
    let sink = WebhookSink::deliver(&indexed.store, "escrow", vec![EventKind::PaymentState]).await;
    let triple = |v: &Value| {
        (
            v["event_id"].as_u64().unwrap(),
            v["cause"].as_str().unwrap().to_string(),
            v["to_state"].as_str().unwrap().to_string(),
        )
    };
    let mut over_sse = Vec::new();
    let mut over_grpc = Vec::new();
    for _ in &expected {
        over_sse.push(triple(&sse.next().await));
        let event = tokio::time::timeout(Duration::from_secs(30), grpc.message())
            .await
            .expect("a gRPC event within 30 s")
            .expect("a healthy stream")
            .expect("an open stream");
        over_grpc.push((event.event_id, event.cause, event.to_state));
    }
    assert_eq!(over_sse, expected, "SSE");
    assert_eq!(over_grpc, expected, "gRPC");
    let over_webhook: Vec<(u64, String, String)> = sink
        .first(expected.len(), Duration::from_secs(60))
        .await
        .iter()
        .map(triple)
        .collect();
    assert_eq!(over_webhook, expected, "webhook");
}
on_both_stores!(escrow_lifecycles, escrow_lifecycles_are_payments);

/// A capture and a refund that leave the chain move the payment back: the capture's
/// removal from `paid` to `held` (cause `capture_reorged`), a refund's removal back to
/// `paid` (`refund_reorged`).
async fn captures_and_refunds_reorged_out_move_back(kind: Kind) {
    let (chain, token) = escrow_chain().await;
    let kit = EscrowKit::install(&chain, &token).await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    let mut worker = worker(&network.chains(), &store).await;
    let net = format!("eip155:{}", chain.chain_id());
    let state = |signed: &SignedPayment| {
        let id = lower_hex(signed.hash(chain.chain_id()));
        let store = &store;
        let net = &net;
        async move { store.payments_by_id(net, &id).await.unwrap()[0].clone() }
    };

    let held = kit.sign(PAYER, terms(&chain, 1_000)).await;
    kit.authorize(&held, 1_000).await;
    sync(&mut worker).await;
    assert_eq!(state(&held).await.state, PaymentState::Pending, "not final yet");
    let charged = kit.sign(PAYER, terms(&chain, 600)).await;
    kit.charge(&charged, 600, 0).await;
    chain.mine(2).await;
    sync(&mut worker).await;
    assert_eq!(state(&held).await.state, PaymentState::Held);
    assert_eq!(state(&charged).await.state, PaymentState::Paid);

    let before = chain.snapshot().await;
    kit.capture(&held, 700, 0).await;
    kit.refund(&charged, 600).await;
    chain.mine(3).await;
    sync(&mut worker).await;
    let paid = state(&held).await;
    assert_eq!(
        (
            paid.state,
            paid.captured_amount.as_deref(),
            paid.held_amount.as_deref()
        ),
        (PaymentState::Paid, Some("700"), Some("300"))
    );
    assert_eq!(state(&charged).await.state, PaymentState::Refunded);

    // The capture's and the refund's blocks are replaced by empty ones, deeper than
    // finality: reported, and both payments move back.
    chain.revert(&before).await;
    chain.mine(6).await;
    let outcomes = sync(&mut worker).await;
    assert!(
        outcomes
            .iter()
            .any(|o| matches!(o, StepOutcome::RolledBack { .. })),
        "{outcomes:?}"
    );
    let back = state(&held).await;
    assert_eq!(
        (
            back.state,
            back.captured_amount.as_deref(),
            back.held_amount.as_deref()
        ),
        (PaymentState::Held, Some("0"), Some("1000"))
    );
    let unrefunded = state(&charged).await;
    assert_eq!(
        (unrefunded.state, unrefunded.refunded_amount.as_str()),
        (PaymentState::Paid, "0")
    );
    let causes = |signed: &SignedPayment| {
        let id = lower_hex(signed.hash(chain.chain_id()));
        let store = &store;
        let net = &net;
        async move {
            store
                .history_of(net, &id, 0)
                .await
                .unwrap()
                .into_iter()
                .map(|h| h.cause.as_str())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        causes(&held).await,
        ["seen", "final", "captured", "capture_reorged"]
    );
    assert_eq!(
        causes(&charged).await,
        ["seen", "final", "refund", "refund_reorged"]
    );
}
on_both_stores!(
    captures_and_refunds_reorged_out,
    captures_and_refunds_reorged_out_move_back
);

/// Escrow events read through a proxy that rate-limits, fails, stalls, truncates and drops
/// connections, in small ranges, until every fault has struck: the store equals a clean
/// run's, escrow events and amounts included.
async fn faults_lose_no_escrow_event(kind: Kind) {
    let (chain, token) = escrow_chain().await;
    let kit = EscrowKit::install(&chain, &token).await;
    let captured = kit.sign(PAYER, terms(&chain, 1_000)).await;
    kit.authorize(&captured, 1_000).await;
    kit.capture(&captured, 600, 100).await;
    let voided = kit.sign(PAYER, terms(&chain, 700)).await;
    kit.authorize(&voided, 700).await;
    kit.void(&voided).await;
    let charged = kit.sign(PAYER, terms(&chain, 500)).await;
    kit.charge(&charged, 500, 0).await;
    kit.refund(&charged, 200).await;
    kit.capture(&captured, 400, 100).await;
    chain.mine(3).await;

    let proxy = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            max_log_range: Some(4),
            ..Faults::all(fault_seed(), 0.07, Duration::from_millis(1500))
        },
    )
    .await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let mut network = LocalNetwork::new(chain.chain_id(), &proxy.url, &[token.address]);
    network.rpc_timeout_ms = 1000;
    network.max_block_range = 3;
    let chains = network.chains();
    let mut reader = worker(&chains, &store).await;
    sync(&mut reader).await;
    proxy
        .drive_until_every_fault(async || {
            chain.mine(1).await;
            let _ = reader.step().await;
        })
        .await;
    sync(&mut reader).await;
    store.close().await;

    let clean = TestDb::create(kind).await;
    let clean_store = clean.open().await;
    let clean_chains = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]).chains();
    sync(&mut worker(&clean_chains, &clean_store).await).await;
    clean_store.close().await;
    let net = chains.networks[0].id.to_string();
    let faulty = chain_facts(dump(&db.url, &net).await);
    assert!(
        faulty
            .iter()
            .filter(|line| line.starts_with("escrow_events "))
            .count()
            >= 7,
        "{faulty:?}"
    );
    assert_eq!(faulty, chain_facts(dump(&clean.url, &net).await));
}
on_both_stores!(escrow_faults, faults_lose_no_escrow_event);
