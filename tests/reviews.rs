//! Review v1 verification against a real payment on anvil, signed with the payer's real
//! key: the six checks pass for an honest review and each fails with its own reason for
//! a wrong provider, payment facts, note, malleated or foreign signature, a payment that is
//! not final, a malformed message, a stale or future `issued_at`, a network paywatch does
//! not watch, and a second review of the same payment; and reviews
//! by smart-contract wallets (ERC-1271, and ERC-6492 for a wallet not yet deployed); and
//! the read side: recorded reviews published (over HTTP and gRPC), following refunds, with
//! `review_state` events.

use std::time::Duration;

use alloy::primitives::{B256, U256};
use alloy::signers::Signer;
use alloy::signers::local::PrivateKeySigner;
use paywatch_core::ids::lower_hex;
use paywatch_core::refunds::refund_nonce;
use paywatch_core::review::{DEFAULT_LAST_LINE, ReviewMessage, build_review, note_sha256};
use paywatch_core::state::EventKind;
use paywatch_grpc::proto::payments_client::PaymentsClient;
use paywatch_grpc::proto::{GetReviewRequest, ListReviewsRequest, WatchPaymentsRequest};
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{ApiServer, Indexed, LocalNetwork, issued_at, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::sink::WebhookSink;
use paywatch_tests::sse::EventClient;
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;
use paywatch_tests::wallet::WalletFactory;
use serde_json::{Value, json};
use tonic_types::StatusExt;

const NOTE: &str = "Answered in two seconds, and the data matched its description.";

async fn sign(signer: &PrivateKeySigner, message: &str) -> Vec<u8> {
    signer
        .sign_message(message.as_bytes())
        .await
        .unwrap()
        .as_bytes()
        .to_vec()
}

fn spell(bytes: &[u8]) -> String {
    format!("0x{}", alloy::hex::encode(bytes))
}

/// The failed checks of an answer, as (check, reason) pairs.
fn failures(answer: &Value) -> Vec<(String, String)> {
    answer["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == json!(false))
        .flat_map(|c| {
            c["reasons"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        c["check"].as_str().unwrap().to_string(),
                        r.as_str().unwrap().to_string(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Asserts that only the signature check failed, with `detail` in its explanation.
fn assert_signature_refused(answer: &Value, detail: &str) {
    assert_eq!(failures(answer), pairs(&[("signature", "v1_signature_invalid")]));
    let explained = answer["checks"][3]["detail"].as_str().unwrap();
    assert!(explained.contains(detail), "{answer}");
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

async fn the_six_checks(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    token.mint(chain.account(1), 1_000_000).await;
    let payer = chain.signer(1);
    let seller = chain.account(2);
    let paid = token
        .pay(&payer, seller, 10_000, B256::repeat_byte(1), chain.account(3))
        .await;
    chain.mine(3).await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]).chains();
    let mut worker = worker(&chains, &store).await;
    sync(&mut worker).await;
    let pending = token
        .pay(&payer, seller, 500, B256::repeat_byte(2), chain.account(3))
        .await;
    sync(&mut worker).await;
    let api = ApiServer::start(&store, &chains).await;

    let review = ReviewMessage {
        provider: "reviews.example".to_string(),
        network: format!("eip155:{}", chain.chain_id()).parse().unwrap(),
        payment: lower_hex(paid.transaction_hash),
        payer: lower_hex(payer.address()),
        pay_to: lower_hex(seller),
        amount: U256::from(10_000u64),
        asset: lower_hex(token.address),
        stars: 4,
        note_sha256: note_sha256(NOTE),
        issued_at: issued_at(-60),
    };
    let verify = |message: String, signature: String, note: &str, host: &str, record: bool| {
        let body = json!({ "message": message, "signature": signature, "note": note, "provider_host": host, "record": record });
        let api = &api;
        async move {
            let (status, answer) = api.post("/v1/reviews/verify", &body).await;
            assert_eq!(status, 200, "{answer}");
            answer
        }
    };
    // A message built from `fields`, signed by the payer, for the provider it names.
    let verify_signed = |fields: &ReviewMessage| {
        let text = build_review(fields, DEFAULT_LAST_LINE);
        let payer = &payer;
        let verify = &verify;
        async move {
            verify(
                text.clone(),
                spell(&sign(payer, &text).await),
                NOTE,
                "reviews.example",
                false,
            )
            .await
        }
    };
    let message = build_review(&review, DEFAULT_LAST_LINE);
    let signature = sign(&payer, &message).await;

    // Failures first (nothing recorded), then the honest review, then a second one.
    let answer = verify(message.clone(), spell(&signature), NOTE, "other.example", true).await;
    assert_eq!(failures(&answer), pairs(&[("provider", "v1_provider_mismatch")]));
    let answer = verify(
        message.clone(),
        spell(&signature),
        "a different note",
        "reviews.example",
        false,
    )
    .await;
    assert_eq!(failures(&answer), pairs(&[("note", "v1_note_mismatch")]));

    for (change, reason) in [
        (
            ReviewMessage {
                amount: U256::from(9_999u64),
                ..review.clone()
            },
            "v1_amount_mismatch",
        ),
        (
            ReviewMessage {
                pay_to: lower_hex(chain.account(4)),
                ..review.clone()
            },
            "v1_pay_to_mismatch",
        ),
        (
            ReviewMessage {
                asset: lower_hex(chain.account(5)),
                ..review.clone()
            },
            "v1_asset_mismatch",
        ),
    ] {
        let answer = verify_signed(&change).await;
        assert_eq!(failures(&answer), pairs(&[("payment", reason)]));
    }
    let not_final = ReviewMessage {
        payment: lower_hex(pending.transaction_hash),
        amount: U256::from(500u64),
        ..review.clone()
    };
    let answer = verify_signed(&not_final).await;
    assert_eq!(failures(&answer), pairs(&[("payment", "payment_not_final")]));
    assert_eq!(answer["payment_state"], "pending");

    // Signatures: another key, and three malleations of the payer's own.
    let n = U256::from_str_radix(
        "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141",
        16,
    )
    .unwrap();
    let mut high_s = signature.clone();
    high_s[32..64].copy_from_slice(&(n - U256::from_be_slice(&signature[32..64])).to_be_bytes::<32>());
    high_s[64] = 55 - signature[64];
    let mut v01 = signature.clone();
    v01[64] -= 27;
    for (bad, detail) in [
        (
            spell(&sign(&chain.signer(6), &message).await),
            "signature_wrong_signer",
        ),
        (spell(&high_s), "signature_high_s"),
        (spell(&v01), "signature_bad_v"),
        (
            format!("0x{}", alloy::hex::encode_upper(&signature)),
            "signature_uppercase_hex",
        ),
    ] {
        let answer = verify(message.clone(), bad, NOTE, "reviews.example", false).await;
        assert_signature_refused(&answer, detail);
    }

    let answer = verify(
        format!("{message}\n"),
        spell(&signature),
        NOTE,
        "reviews.example",
        false,
    )
    .await;
    assert_eq!(failures(&answer), pairs(&[("parse", "v1_malformed_message")]));
    assert!(
        answer["checks"][0]["detail"]
            .as_str()
            .unwrap()
            .starts_with("trailing_newline")
    );
    assert!(
        answer["checks"][1]["ok"].is_null(),
        "the other checks are not run"
    );

    // issued_at outside the provider's bounds (by default a day old, five minutes ahead).
    for (at, reason) in [
        (issued_at(-2 * 24 * 3600), "v1_stale_message"),
        (issued_at(3600), "v1_future_message"),
    ] {
        let answer = verify_signed(&ReviewMessage {
            issued_at: at,
            ..review.clone()
        })
        .await;
        assert_eq!(failures(&answer), pairs(&[("parse", reason)]), "{answer}");
        assert_eq!(answer["valid"], false);
    }

    // A network paywatch does not watch is refused at once, with its own reason: never a
    // retryable 503, even for a signature only a contract wallet could accept (there is
    // no RPC to ask).
    let unwatched = ReviewMessage {
        network: "eip155:1".parse().unwrap(),
        ..review.clone()
    };
    let contract_like = format!("0x{}", "ab".repeat(100));
    let answer = verify(
        build_review(&unwatched, DEFAULT_LAST_LINE),
        contract_like,
        NOTE,
        "reviews.example",
        true,
    )
    .await;
    assert_eq!(
        failures(&answer),
        pairs(&[
            ("payment", "network_not_watched"),
            ("signature", "v1_signature_invalid")
        ]),
        "{answer}"
    );

    // review v1 clients may name the software that posted (`via`): taken, not checked.
    let with_via = json!({ "message": message, "signature": spell(&signature), "note": NOTE,
        "provider_host": "reviews.example", "via": "x402-client/2.27" });
    let (status, answer) = api.post("/v1/reviews/verify", &with_via).await;
    assert_eq!((status, &answer["valid"]), (200, &json!(true)), "{answer}");

    let answer = verify(message.clone(), spell(&signature), NOTE, "Reviews.Example", true).await;
    assert_eq!(answer["valid"], true, "{answer}");
    assert_eq!(answer["not_run"], json!([]));
    assert_eq!(answer["payment_state"], "paid");
    assert_eq!(answer["checks"].as_array().unwrap().len(), 6);
    let answer = verify(message.clone(), spell(&signature), NOTE, "reviews.example", true).await;
    assert_eq!(failures(&answer), pairs(&[("unique", "v1_duplicate_review")]));
}
on_both_stores!(the_six_checks, the_six_checks);

/// A smart-contract wallet pays (its owner signs, the token asks the wallet through
/// ERC-1271) and its owner signs the review: the chain answers the signature check. A
/// wallet not yet deployed signs through ERC-6492, simulated without deploying it.
async fn smart_contract_wallets(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let factory = WalletFactory::deploy(&chain).await;
    let owner = chain.signer(7);
    let stranger = chain.signer(8);
    let wallet = factory.deploy_wallet(owner.address(), B256::repeat_byte(1)).await;
    token.mint(wallet, 1_000_000).await;
    let seller = chain.account(2);
    let paid = token
        .pay_from_wallet(
            &owner,
            wallet,
            seller,
            25_000,
            B256::repeat_byte(9),
            chain.account(3),
        )
        .await;
    chain.mine(3).await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]).chains();
    let mut worker = worker(&chains, &store).await;
    sync(&mut worker).await;
    let api = ApiServer::start(&store, &chains).await;

    let review = ReviewMessage {
        provider: "reviews.example".to_string(),
        network: format!("eip155:{}", chain.chain_id()).parse().unwrap(),
        payment: lower_hex(paid.transaction_hash),
        payer: lower_hex(wallet),
        pay_to: lower_hex(seller),
        amount: U256::from(25_000u64),
        asset: lower_hex(token.address),
        stars: 5,
        note_sha256: note_sha256(NOTE),
        issued_at: issued_at(-60),
    };
    let verify = |message: String, signature: Vec<u8>| {
        let body = json!({ "message": message, "signature": spell(&signature), "note": NOTE, "provider_host": "reviews.example" });
        let api = &api;
        async move {
            let (status, answer) = api.post("/v1/reviews/verify", &body).await;
            assert_eq!(status, 200, "{answer}");
            answer
        }
    };

    // ERC-1271: the deployed wallet accepts its owner's signature, and only its owner's.
    let message = build_review(&review, DEFAULT_LAST_LINE);
    let answer = verify(message.clone(), sign(&owner, &message).await).await;
    assert_eq!(answer["valid"], true, "{answer}");
    assert_eq!(answer["payment_state"], "paid");
    let answer = verify(message.clone(), sign(&stranger, &message).await).await;
    assert_signature_refused(&answer, "signature_contract_rejected");

    // ERC-6492: a wallet its factory has not deployed yet. The payment check fails (this
    // wallet paid nothing); the signature check passes, and nothing is deployed.
    let salt = B256::repeat_byte(2);
    let counterfactual = factory.address_of(owner.address(), salt).await;
    assert!(!factory.is_deployed(counterfactual).await);
    let unborn = ReviewMessage {
        payer: lower_hex(counterfactual),
        ..review.clone()
    };
    let message = build_review(&unborn, DEFAULT_LAST_LINE);
    let wrapped = factory.wrap_erc6492(owner.address(), salt, &sign(&owner, &message).await);
    let answer = verify(message.clone(), wrapped).await;
    assert_eq!(
        failures(&answer),
        pairs(&[("payment", "payer_mismatch")]),
        "{answer}"
    );
    assert_eq!(answer["checks"][3]["ok"], true, "{answer}");
    let forged = factory.wrap_erc6492(owner.address(), salt, &sign(&stranger, &message).await);
    let answer = verify(message.clone(), forged).await;
    assert_eq!(
        failures(&answer),
        pairs(&[
            ("payment", "payer_mismatch"),
            ("signature", "v1_signature_invalid")
        ]),
        "{answer}"
    );
    assert!(
        !factory.is_deployed(counterfactual).await,
        "eth_call deploys nothing"
    );

    // A wrapped signature for a wallet deployed since: the wallet itself is asked.
    let message = build_review(&review, DEFAULT_LAST_LINE);
    let wrapped = factory.wrap_erc6492(
        owner.address(),
        B256::repeat_byte(1),
        &sign(&owner, &message).await,
    );
    let answer = verify(message.clone(), wrapped.clone()).await;
    assert_eq!(answer["valid"], true, "{answer}");

    // Recorded, published verbatim, and re-checked from what was published: a third
    // party's check of the published signature passes (only uniqueness fails now).
    let record = json!({ "message": message, "signature": spell(&wrapped), "note": NOTE,
        "provider_host": "reviews.example", "record": true });
    let (status, answer) = api.post("/v1/reviews/verify", &record).await;
    assert_eq!((status, &answer["valid"]), (200, &json!(true)), "{answer}");
    let (status, published) = api
        .get(&format!("/v1/reviews/local/{}", lower_hex(paid.transaction_hash)))
        .await;
    assert_eq!(status, 200, "{published}");
    assert_eq!(
        (&published["wallet"], &published["signature"]),
        (&json!(lower_hex(wallet)), &json!(spell(&wrapped)))
    );
    let recheck = json!({ "message": published["message"], "signature": published["signature"],
        "note": NOTE, "provider_host": "reviews.example" });
    let (_, answer) = api.post("/v1/reviews/verify", &recheck).await;
    assert_eq!(
        failures(&answer),
        pairs(&[("unique", "v1_duplicate_review")]),
        "{answer}"
    );
}
on_both_stores!(smart_contract_wallets, smart_contract_wallets);

/// Review v1's read side: each recorded review is published with its message, signature
/// and wallet verbatim and the payment's state now. A full refund after the review moves
/// the published state to `refunded`, with one `review_state` event on the streams that
/// ask for it (a partial refund keeps `paid`, with the refunded amount beside it, and
/// writes none); the listing pages reviews by pay_to and filters them by payer; a deep
/// reorg that takes the refund out publishes `paid` again, with its event.
async fn published_reviews_follow_refunds(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let seller = chain.signer(2);
    let payers = [chain.signer(1), chain.signer(4), chain.signer(5)];
    for payer in &payers {
        token.mint(payer.address(), 1_000_000).await;
    }
    let mut paid = Vec::new();
    for (nonce, payer) in (1u8..).zip(&payers) {
        let receipt = token
            .pay(
                payer,
                seller.address(),
                10_000,
                B256::repeat_byte(nonce),
                chain.account(3),
            )
            .await;
        paid.push(receipt);
    }
    let unreviewed = token
        .pay(
            &payers[0],
            seller.address(),
            700,
            B256::repeat_byte(9),
            chain.account(3),
        )
        .await;
    chain.mine(3).await;
    let Indexed {
        db: _db,
        store,
        api,
        mut worker,
        ..
    } = Indexed::new(
        kind,
        &LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]),
    )
    .await;
    let network = format!("eip155:{}", chain.chain_id());

    let mut submitted = Vec::new();
    for (payer, receipt) in payers.iter().zip(&paid) {
        let review = ReviewMessage {
            provider: "reviews.example".to_string(),
            network: network.parse().unwrap(),
            payment: lower_hex(receipt.transaction_hash),
            payer: lower_hex(payer.address()),
            pay_to: lower_hex(seller.address()),
            amount: U256::from(10_000u64),
            asset: lower_hex(token.address),
            stars: 5,
            note_sha256: note_sha256(NOTE),
            issued_at: issued_at(-60),
        };
        let message = build_review(&review, DEFAULT_LAST_LINE);
        let signature = spell(&sign(payer, &message).await);
        let body = json!({ "message": message, "signature": signature, "note": NOTE,
            "provider_host": "reviews.example", "record": true });
        let (status, answer) = api.post("/v1/reviews/verify", &body).await;
        assert_eq!((status, &answer["valid"]), (200, &json!(true)), "{answer}");
        assert_eq!(answer["payment_state"], "paid");
        submitted.push((message, signature));
    }

    let published = |tx: alloy::primitives::TxHash| {
        let api = &api;
        async move {
            let (status, body) = api.get(&format!("/v1/reviews/local/{}", lower_hex(tx))).await;
            assert_eq!(status, 200, "{body}");
            body
        }
    };
    let first = published(paid[0].transaction_hash).await;
    assert!(first.get("proof").is_none(), "a proof only when asked for");
    let (status, with_proof) = api
        .get(&format!(
            "/v1/reviews/local/{}?proof=true",
            lower_hex(paid[0].transaction_hash)
        ))
        .await;
    assert_eq!(status, 200, "{with_proof}");
    assert_eq!(
        (
            &with_proof["proof"]["facts"]["payer"],
            &with_proof["proof"]["facts"]["amount"]
        ),
        (&json!(lower_hex(payers[0].address())), &json!("10000")),
        "the payment behind the review, provable from its block hash"
    );
    assert_eq!(first["message"], submitted[0].0, "the message, verbatim");
    assert_eq!(first["signature"], submitted[0].1, "the signature, verbatim");
    assert_eq!(first["wallet"], lower_hex(payers[0].address()));
    assert_eq!(first["network"], network);
    assert_eq!(first["payment_state"], "paid");
    assert_eq!(first["refunded_amount"], "0");
    assert_eq!(first["block_number"], paid[0].block_number.unwrap());
    assert_eq!(first["block_hash"], lower_hex(paid[0].block_hash.unwrap()));
    let transfer = alloy::primitives::keccak256("Transfer(address,address,uint256)");
    let log_index = paid[0]
        .inner
        .logs()
        .iter()
        .find(|log| log.address() == token.address && log.topics().first() == Some(&transfer))
        .and_then(|log| log.log_index)
        .unwrap();
    assert_eq!(first["log_index"], log_index, "the payment's transfer log");

    // gRPC GetReview: the same review, field for field, and its proof when asked for.
    let review_client = PaymentsClient::connect(api.grpc_url.clone())
        .await
        .expect("connect gRPC");
    let reviewed = lower_hex(paid[0].transaction_hash);
    let review = |proof: bool| {
        let (mut client, payment) = (review_client.clone(), reviewed.clone());
        async move {
            client
                .get_review(GetReviewRequest {
                    network: "local".into(),
                    payment,
                    index: None,
                    proof,
                })
                .await
                .expect("GetReview")
                .into_inner()
        }
    };
    let over_grpc = review(false).await;
    assert_eq!(
        (
            json!(over_grpc.network),
            json!(over_grpc.payment),
            json!(over_grpc.message),
            json!(over_grpc.signature),
            json!(over_grpc.wallet),
            json!(over_grpc.payment_state),
            json!(over_grpc.paywatch_state),
            json!(over_grpc.refunded_amount),
            json!(over_grpc.block_number),
            json!(over_grpc.block_hash),
            json!(over_grpc.log_index),
            json!(over_grpc.recorded_at),
        ),
        (
            first["network"].clone(),
            first["payment"].clone(),
            first["message"].clone(),
            first["signature"].clone(),
            first["wallet"].clone(),
            first["payment_state"].clone(),
            first["paywatch_state"].clone(),
            first["refunded_amount"].clone(),
            first["block_number"].clone(),
            first["block_hash"].clone(),
            first["log_index"].clone(),
            first["recorded_at"].clone(),
        )
    );
    assert!(over_grpc.proof.is_none(), "a proof only when asked for");
    let proven = review(true).await.proof.expect("the payment's proof");
    assert_eq!(
        proven.facts.as_ref().map(|f| (f.payer.clone(), f.amount.clone())),
        Some((lower_hex(payers[0].address()), "10000".to_string()))
    );
    let status = review_client
        .clone()
        .get_review(GetReviewRequest {
            network: "local".into(),
            payment: lower_hex(unreviewed.transaction_hash),
            index: None,
            proof: false,
        })
        .await
        .expect_err("no review recorded");
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert_eq!(
        status.get_error_details().error_info().map(|i| i.reason.clone()),
        Some("review_not_found".to_string())
    );
    for (path, status, reason) in [
        (
            format!("/v1/reviews/local/{}", lower_hex(unreviewed.transaction_hash)),
            404,
            "review_not_found",
        ),
        (
            format!("/v1/reviews/local/0x{}", "ab".repeat(32)),
            404,
            "payment_not_found",
        ),
        ("/v1/reviews/local/0x12".to_string(), 400, "malformed_payment"),
        (
            "/v1/reviews?network=local&limit=0".to_string(),
            400,
            "malformed_query",
        ),
    ] {
        let (got, body) = api.get(&path).await;
        assert_eq!(
            (got, body["reason"].as_str()),
            (status, Some(reason)),
            "{path}: {body}"
        );
    }

    // Streams opened now: one asks for review events too, the default one does not.
    let since = store.latest_event_id().await.unwrap();
    let mut with_reviews = EventClient::connect(&api, "?kinds=payment_state,review_state", Some(since)).await;
    let mut payments_only = EventClient::connect(&api, "", Some(since)).await;
    let mut grpc = PaymentsClient::connect(api.grpc_url.clone())
        .await
        .expect("connect gRPC")
        .watch_payments(WatchPaymentsRequest {
            since,
            network: None,
            kinds: vec!["review_state".to_string()],
        })
        .await
        .expect("WatchPayments")
        .into_inner();
    // A webhook sink for review providers.
    let sink = WebhookSink::deliver(&store, "reviews", vec![EventKind::ReviewState]).await;

    // The seller refunds the first payment in full and the second in part, each tied by
    // its nonce commitment.
    let before_refunds = chain.snapshot().await;
    for (receipt, amount) in [(&paid[0], 10_000), (&paid[1], 4_000)] {
        let payer = if std::ptr::eq(receipt, &paid[0]) {
            &payers[0]
        } else {
            &payers[1]
        };
        token
            .pay(
                &seller,
                payer.address(),
                amount,
                refund_nonce(receipt.transaction_hash),
                chain.account(3),
            )
            .await;
    }
    chain.mine(3).await;
    sync(&mut worker).await;

    let first = published(paid[0].transaction_hash).await;
    assert_eq!(
        (
            &first["payment_state"],
            &first["paywatch_state"],
            &first["refunded_amount"]
        ),
        (&json!("refunded"), &json!("refunded"), &json!("10000"))
    );
    let second = published(paid[1].transaction_hash).await;
    assert_eq!(
        (
            &second["payment_state"],
            &second["paywatch_state"],
            &second["refunded_amount"]
        ),
        (&json!("paid"), &json!("partially_refunded"), &json!("4000"))
    );

    // Two payment changes, then the one published change they caused, in commit order.
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|(kind, _): &(String, Value)| kind == "review_state")
    {
        seen.push(with_reviews.next_typed().await);
    }
    let reviews: Vec<&Value> = seen
        .iter()
        .filter(|(k, _)| k == "review_state")
        .map(|(_, v)| v)
        .collect();
    assert_eq!(reviews.len(), 1, "{seen:?}");
    let event = reviews[0];
    assert_eq!(event["payment"], lower_hex(paid[0].transaction_hash));
    assert_eq!(
        (&event["from_state"], &event["to_state"]),
        (&json!("paid"), &json!("refunded"))
    );
    assert_eq!(event["cause"], "refund");
    let ids: Vec<u64> = seen
        .iter()
        .map(|(_, v)| v["event_id"].as_u64().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    // The payment changes: the two refunds, and the refund transfers themselves (EIP-3009
    // payments from the seller); the default stream serves exactly these.
    let changes = store
        .events_after(since, None, &[EventKind::PaymentState], 100)
        .await
        .unwrap();
    assert_eq!(changes.len(), 4, "{changes:?}");
    for change in &changes {
        assert_eq!(payments_only.next().await["event_id"], change.event_id);
    }
    let both = store
        .events_after(
            since,
            None,
            &[EventKind::PaymentState, EventKind::ReviewState],
            100,
        )
        .await
        .unwrap();
    assert_eq!(both.len(), 5, "{both:?}");
    let at = both
        .iter()
        .position(|e| e.kind == EventKind::ReviewState)
        .unwrap();
    let cause = &both[at - 1];
    assert_eq!(
        (
            cause.payment_id.as_str(),
            cause.change.to_state.as_str(),
            cause.event_id + 1
        ),
        (
            lower_hex(paid[0].transaction_hash).as_str(),
            "refunded",
            both[at].event_id
        ),
        "the review event follows the change that caused it, in the one sequence"
    );
    assert_eq!(both[at].change.seq, cause.change.seq);

    // The same event on gRPC (review events only, as asked) and on the review webhook.
    let watched = tokio::time::timeout(Duration::from_secs(30), grpc.message())
        .await
        .expect("a gRPC event within 30 s")
        .expect("a healthy stream")
        .expect("an open stream");
    assert_eq!(
        (watched.kind.as_str(), watched.event_id, watched.to_state.as_str()),
        ("review_state", both[at].event_id, "refunded")
    );
    let delivered = sink.first(1, Duration::from_secs(30)).await.remove(0);
    assert_eq!(
        (&delivered["kind"], &delivered["event_id"], &delivered["to_state"]),
        (
            &json!("review_state"),
            &json!(both[at].event_id),
            &json!("refunded")
        )
    );

    // The listing: by pay_to, two a page, in chain order; by payer, one.
    let page = |query: String| {
        let api = &api;
        async move {
            let (status, body) = api.get(&format!("/v1/reviews?network=local&{query}")).await;
            assert_eq!(status, 200, "{body}");
            body
        }
    };
    let pay_to = lower_hex(seller.address());
    let one = page(format!("pay_to={pay_to}&limit=2")).await;
    assert_eq!(one["reviews"].as_array().unwrap().len(), 2);
    assert_eq!(one["has_more"], true);
    let cursor = one["next_cursor"].as_str().unwrap();
    let two = page(format!("pay_to={pay_to}&limit=2&cursor={cursor}")).await;
    assert_eq!(two["reviews"].as_array().unwrap().len(), 1);
    assert_eq!(two["has_more"], false);
    let listed: Vec<&Value> = one["reviews"]
        .as_array()
        .unwrap()
        .iter()
        .chain(two["reviews"].as_array().unwrap())
        .map(|r| &r["payment"])
        .collect();
    let expected: Vec<Value> = paid
        .iter()
        .map(|r| json!(lower_hex(r.transaction_hash)))
        .collect();
    assert_eq!(listed, expected.iter().collect::<Vec<_>>());
    assert_eq!(one["reviews"][0]["payment_state"], "refunded");
    let by_payer = page(format!("payer={}", lower_hex(payers[2].address()))).await;
    assert_eq!(by_payer["reviews"].as_array().unwrap().len(), 1);
    assert_eq!(by_payer["reviews"][0]["wallet"], lower_hex(payers[2].address()));
    // gRPC ListReviews: the same pages, cursor included.
    let mut grpc_listed = Vec::new();
    let mut cursor = None;
    loop {
        let page = review_client
            .clone()
            .list_reviews(ListReviewsRequest {
                network: "local".into(),
                pay_to: Some(pay_to.clone()),
                limit: Some(2),
                cursor: cursor.clone(),
                ..Default::default()
            })
            .await
            .expect("ListReviews")
            .into_inner();
        grpc_listed.extend(page.reviews.iter().map(|r| json!(r.payment)));
        cursor = page.next_cursor;
        if !page.has_more {
            break;
        }
    }
    assert_eq!(grpc_listed, expected);
    let first_page = review_client
        .clone()
        .list_reviews(ListReviewsRequest {
            network: "local".into(),
            pay_to: Some(pay_to.clone()),
            limit: Some(2),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first_page.next_cursor.as_deref(), one["next_cursor"].as_str());
    assert_eq!(first_page.reviews[0].payment_state, "refunded");

    // A reorg deeper than the finality depth takes the refunds out: the published state
    // goes back to `paid`, with its own `review_state` event.
    chain.revert(&before_refunds).await;
    chain.mine(6).await;
    sync(&mut worker).await;
    let first = published(paid[0].transaction_hash).await;
    assert_eq!(
        (&first["payment_state"], &first["refunded_amount"]),
        (&json!("paid"), &json!("0"))
    );
    let back = loop {
        let (kind, event) = with_reviews.next_typed().await;
        if kind == "review_state" {
            break event;
        }
    };
    assert_eq!(back["payment"], lower_hex(paid[0].transaction_hash));
    assert_eq!(
        (&back["from_state"], &back["to_state"], &back["cause"]),
        (&json!("refunded"), &json!("paid"), &json!("refund_reorged"))
    );
}
on_both_stores!(published_reviews, published_reviews_follow_refunds);
