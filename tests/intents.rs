//! Intent-committed nonces on a real anvil node: a payer signs a nonce that commits to
//! its intent; revealing the intent and salt binds the resource URL to the payment; any
//! other intent, salt or payment is refused; the same for a Permit2 (upto) payment, whose
//! `uint256` nonce is the commitment, and for escrowed (auth-capture) payments the x402
//! SDK signs, whose `PaymentInfo` salt is (with and without the SDK's salt binding). On
//! SQLite and on Postgres.

use alloy::primitives::{Address, B256, U256};
use paywatch_core::ids::lower_hex;
use paywatch_core::intent::{Intent, intent_nonce};
use paywatch_tests::chain::Chain;
use paywatch_tests::escrow::{EscrowKit, Terms};
use paywatch_tests::harness::{ApiServer, LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::permit2::{self, Permit2Kit, send_call};
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;
use serde_json::json;

async fn reveal_binds_only_the_committed_intent(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    token.mint(chain.account(1), 1_000_000).await;
    let seller = chain.account(2);
    let intent = Intent {
        method: "GET".to_string(),
        url: "HTTPS://API.Example.com:443/premium-data?q=1#top".to_string(),
        body_sha256: None,
        resource_class: "market-data".to_string(),
        max_atomic: U256::from(20_000u64),
        network: format!("eip155:{}", chain.chain_id()).parse().unwrap(),
        asset: lower_hex(token.address),
        pay_to: lower_hex(seller),
    };
    let salt = B256::repeat_byte(0x5a);
    let nonce = intent_nonce(&intent, &salt).unwrap();
    let committed = token
        .pay(&chain.signer(1), seller, 10_000, nonce, chain.account(3))
        .await;
    let random = token
        .pay(
            &chain.signer(1),
            seller,
            10_000,
            B256::repeat_byte(0x11),
            chain.account(3),
        )
        .await;

    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]).chains();
    sync(&mut worker(&chains, &store).await).await;
    let api = ApiServer::start(&store, &chains).await;

    let request = |payment: B256, url: &str, salt: B256| {
        json!({
            "network": "local",
            "payment": lower_hex(payment),
            "intent": { "method": "get", "url": url, "class": "market-data", "max_atomic": "20000" },
            "salt": lower_hex(salt),
        })
    };
    let committed_tx = committed.transaction_hash;
    for (body, status, reason) in [
        (
            request(committed_tx, "https://evil.example.net/premium-data?q=1", salt),
            422,
            "intent_nonce_mismatch",
        ),
        (
            request(committed_tx, &intent.url, B256::repeat_byte(0x5b)),
            422,
            "intent_nonce_mismatch",
        ),
        (
            request(random.transaction_hash, &intent.url, salt),
            422,
            "intent_nonce_mismatch",
        ),
        (
            request(committed_tx, "ftp://api.example.com/", salt),
            400,
            "malformed_intent",
        ),
        (
            json!({"network": "local", "payment": lower_hex(committed_tx), "intent": {}, "salt": "0x00"}),
            400,
            "malformed_body",
        ),
        (
            {
                let mut b = request(committed_tx, &intent.url, salt);
                b["salt"] = json!("0x1234");
                b
            },
            400,
            "malformed_intent",
        ),
        (
            request(B256::repeat_byte(0xee), &intent.url, salt),
            404,
            "payment_not_found",
        ),
        // The SDK's salt binding is an escrowed payment's; an EIP-3009 nonce has none.
        (
            {
                let mut b = request(committed_tx, &intent.url, salt);
                b["salt_binding"] =
                    json!({"receiver_authorizer": lower_hex(seller), "policy": lower_hex(seller)});
                b
            },
            400,
            "malformed_intent",
        ),
        // An empty cap is no cap, not a cap of 0; nor is a signed one a cap.
        (
            {
                let mut b = request(committed_tx, &intent.url, salt);
                b["intent"]["max_atomic"] = json!("");
                b
            },
            400,
            "malformed_intent",
        ),
        (
            {
                let mut b = request(committed_tx, &intent.url, salt);
                b["intent"]["max_atomic"] = json!("+20000");
                b
            },
            400,
            "malformed_intent",
        ),
    ] {
        let (got, answer) = api.post("/v1/intents/reveal", &body).await;
        assert_eq!(
            (got, answer["reason"].as_str()),
            (status, Some(reason)),
            "{body} -> {answer}"
        );
    }
    let path = format!("/v1/payments/local/{}", lower_hex(committed_tx));
    assert!(
        api.get(&path).await.1["intent"].is_null(),
        "nothing bound by refused reveals"
    );

    let (status, answer) = api
        .post("/v1/intents/reveal", &request(committed_tx, &intent.url, salt))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["intent"]["url"],
        "https://api.example.com/premium-data?q=1"
    );
    assert_eq!(answer["intent"]["method"], "GET");
    assert_eq!(answer["intent"]["class"], "market-data");
    assert_eq!(answer["intent"]["max_atomic"], "20000");
    assert_eq!(api.get(&path).await.1["intent"], answer["intent"]);
    let (_, unbound) = api
        .get(&format!(
            "/v1/payments/local/{}",
            lower_hex(random.transaction_hash)
        ))
        .await;
    assert!(unbound["intent"].is_null(), "a random nonce stays unbound");
}
on_both_stores!(
    reveal_binds_only_the_committed_intent,
    reveal_binds_only_the_committed_intent
);

/// A Permit2 payment commits the same way: its `uint256` nonce is the hash's 32 bytes.
async fn a_permit2_nonce_commits_to_its_intent(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    token.mint(chain.account(1), 1_000_000).await;
    token.approve(chain.account(1), permit2::PERMIT2, U256::MAX).await;
    let kit = Permit2Kit::install(&chain).await;
    let seller = chain.account(2);
    let intent = Intent {
        method: "POST".to_string(),
        url: "https://api.example.com/generate".to_string(),
        body_sha256: None,
        resource_class: "inference".to_string(),
        max_atomic: U256::from(5_000u64),
        network: format!("eip155:{}", chain.chain_id()).parse().unwrap(),
        asset: lower_hex(token.address),
        pay_to: lower_hex(seller),
    };
    let salt = B256::repeat_byte(0x77);
    let nonce = U256::from_be_bytes(intent_nonce(&intent, &salt).unwrap().0);
    let signed = kit
        .sign_upto(
            &chain.signer(1),
            token.address,
            seller,
            chain.account(3),
            5_000,
            nonce,
        )
        .await;
    let settled = send_call(&chain, chain.account(3), kit.upto_settle(&signed, 4_200)).await;

    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]).chains();
    sync(&mut worker(&chains, &store).await).await;
    let api = ApiServer::start(&store, &chains).await;
    let request = |salt: B256| {
        json!({
            "network": "local",
            "payment": lower_hex(settled.transaction_hash),
            "intent": { "method": "post", "url": intent.url, "class": "inference", "max_atomic": "5000" },
            "salt": lower_hex(salt),
        })
    };
    let (status, answer) = api
        .post("/v1/intents/reveal", &request(B256::repeat_byte(0x78)))
        .await;
    assert_eq!(
        (status, answer["reason"].as_str()),
        (422, Some("intent_nonce_mismatch")),
        "{answer}"
    );
    let (status, answer) = api.post("/v1/intents/reveal", &request(salt)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["method"], "upto");
    assert_eq!(answer["nonce"], nonce.to_string());
    assert_eq!(answer["intent"]["url"], "https://api.example.com/generate");
}
on_both_stores!(permit2_intents, a_permit2_nonce_commits_to_its_intent);

/// An escrowed payment commits through its `PaymentInfo` salt: the x402 SDK's client signs
/// with the committed salt nonce (binding off: the salt is the commitment; binding on,
/// with a `receiverAuthorizer` in the requirements: the salt is derived from it), and the
/// reveal binds only that intent, with the binding's addresses when there is one.
async fn an_escrowed_payment_commits_through_its_salt(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    token.mint(chain.account(1), 1_000_000).await;
    let kit = EscrowKit::install(&chain, &token).await;
    let (seller, operator, authorizer) = (chain.account(2), chain.account(3), chain.account(5));
    let intent = Intent {
        method: "POST".to_string(),
        url: "https://api.example.com/render".to_string(),
        body_sha256: Some("ab".repeat(32)),
        resource_class: "rendering".to_string(),
        max_atomic: U256::from(9_000u64),
        network: format!("eip155:{}", chain.chain_id()).parse().unwrap(),
        asset: lower_hex(token.address),
        pay_to: lower_hex(seller),
    };
    let salt = B256::repeat_byte(0x3c);
    let commitment = intent_nonce(&intent, &salt).unwrap();
    let terms = Terms {
        operator,
        receiver: seller,
        fee_receiver: chain.account(4),
        max_amount: 9_000,
        capture_within: 3_600,
        refund_within: 7_200,
        fee_bps: (0, 100),
        salt_nonce: Some(commitment),
        salt_binding: None,
    };
    let plain = kit.sign(1, terms).await;
    assert_eq!(
        plain.info.salt,
        U256::from_be_bytes(commitment.0),
        "without a binding the SDK's salt is the salt nonce"
    );
    kit.authorize(&plain, 9_000).await;
    kit.capture(&plain, 9_000, 0).await;
    let bound = kit
        .sign(
            1,
            Terms {
                salt_binding: Some((authorizer, Address::ZERO)),
                ..terms
            },
        )
        .await;
    assert_ne!(bound.info.salt, U256::from_be_bytes(commitment.0));
    kit.charge(&bound, 8_000, 0).await;
    chain.mine(3).await;

    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]).chains();
    sync(&mut worker(&chains, &store).await).await;
    let api = ApiServer::start(&store, &chains).await;
    let request = |payment: B256, salt: B256, binding: Option<Address>| {
        let mut body = json!({
            "network": "local",
            "payment": lower_hex(payment),
            "intent": {
                "method": "post",
                "url": intent.url,
                "body_sha256": intent.body_sha256,
                "class": "rendering",
                "max_atomic": "9000",
            },
            "salt": lower_hex(salt),
        });
        if let Some(authorizer) = binding {
            body["salt_binding"] = json!({
                "receiver_authorizer": lower_hex(authorizer),
                "policy": lower_hex(Address::ZERO),
            });
        }
        body
    };
    let (plain_id, bound_id) = (plain.hash(chain.chain_id()), bound.hash(chain.chain_id()));
    for (body, status, reason) in [
        (
            request(plain_id, B256::repeat_byte(0x3d), None),
            422,
            "intent_nonce_mismatch",
        ),
        (
            request(plain_id, salt, Some(authorizer)),
            422,
            "intent_nonce_mismatch",
        ),
        (request(bound_id, salt, None), 422, "intent_nonce_mismatch"),
        (
            request(bound_id, salt, Some(seller)),
            422,
            "intent_nonce_mismatch",
        ),
        (
            {
                let mut b = request(bound_id, salt, Some(authorizer));
                b["salt_binding"]["policy"] = json!("0x12");
                b
            },
            400,
            "malformed_intent",
        ),
    ] {
        let (got, answer) = api.post("/v1/intents/reveal", &body).await;
        assert_eq!(
            (got, answer["reason"].as_str()),
            (status, Some(reason)),
            "{body} -> {answer}"
        );
    }
    for (id, binding) in [(plain_id, None), (bound_id, Some(authorizer))] {
        let (status, answer) = api.post("/v1/intents/reveal", &request(id, salt, binding)).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["method"], "auth_capture");
        assert_eq!(answer["payment_state"], "paid");
        assert_eq!(answer["intent"]["url"], "https://api.example.com/render");
        assert_eq!(answer["intent"]["class"], "rendering");
        let (_, looked_up) = api.get(&format!("/v1/payments/local/{}", lower_hex(id))).await;
        assert_eq!(looked_up["intent"], answer["intent"]);
    }
}
on_both_stores!(escrow_intents, an_escrowed_payment_commits_through_its_salt);
