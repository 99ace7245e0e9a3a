//! Lookups by authorization, for a settlement that timed out: on a real anvil node with
//! the EIP-3009 token, on SQLite and Postgres, over HTTP and gRPC. An authorization used
//! by an indexed payment answers the payment; one used before the token's start block is
//! `used_unindexed` (the token's own `authorizationState` says so at the final block);
//! one used after the last read is `used_not_final`; one never used is `unused`; bad
//! input and unwatched assets are refused with reasons. Permit2 nonces (decimal) answer
//! the same way from Permit2's `nonceBitmap`.

use alloy::primitives::{B256, U256};
use paywatch_core::ids::lower_hex;
use paywatch_grpc::proto::GetAuthorizationRequest;
use paywatch_grpc::proto::payments_client::PaymentsClient;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{ApiServer, LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::permit2::{self, Permit2Kit, send_call};
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;

const PAYER: usize = 1;
const SELLER: usize = 2;
const FACILITATOR: usize = 3;

async fn authorizations_answer_what_became_of_them(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    token.mint(chain.account(PAYER), 1_000_000).await;
    let payer = chain.signer(PAYER);
    let (before_start, indexed, after_read, never) = (
        B256::repeat_byte(0x01),
        B256::repeat_byte(0x02),
        B256::repeat_byte(0x03),
        B256::repeat_byte(0x04),
    );
    let pay = |nonce| {
        token.pay(
            &payer,
            chain.account(SELLER),
            1_000,
            nonce,
            chain.account(FACILITATOR),
        )
    };
    pay(before_start).await;
    let start_block = chain.block_number().await + 1;
    let receipt = pay(indexed).await;
    chain.mine(3).await;

    // The token is watched from the second payment's block on.
    let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    network.start_block = start_block;
    let chains = network.chains();
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let api = ApiServer::start(&store, &chains).await;
    let path = |nonce: &str| {
        format!(
            "/v1/authorizations/local/{}/{}/{nonce}",
            lower_hex(token.address),
            lower_hex(payer.address())
        )
    };

    // Nothing read yet: no final block to check at.
    let (status, body) = api.get(&path(&lower_hex(never))).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (503, Some("network_not_synced")),
        "{body}"
    );

    let mut worker = worker(&chains, &store).await;
    sync(&mut worker).await;
    pay(after_read).await;
    let final_block = store
        .chain_head(&format!("eip155:{}", chain.chain_id()))
        .await
        .expect("chain head")
        .and_then(|h| h.final_block)
        .expect("a final block");

    let (status, body) = api.get(&path(&lower_hex(indexed))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "indexed");
    assert_eq!(body["payment"]["payment"], lower_hex(receipt.transaction_hash));
    assert_eq!(body["payment"]["nonce"], lower_hex(indexed));
    assert_eq!(body["payment"]["payment_state"], "paid");
    assert_eq!(body["nonce"], lower_hex(indexed));

    let (status, body) = api.get(&path(&lower_hex(before_start))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "used_unindexed");
    assert_eq!(body["checked_at_block"], final_block);
    assert!(body["payment"].is_null(), "{body}");

    let (status, body) = api.get(&path(&lower_hex(after_read))).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("used_not_final")),
        "{body}"
    );

    // Upper-case hex is the same nonce.
    let upper = format!("0x{}", alloy::hex::encode_upper(never));
    let (status, body) = api.get(&path(&upper)).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("unused")), "{body}");
    assert_eq!(body["checked_at_block"], final_block);
    assert_eq!(body["nonce"], lower_hex(never));

    // Refusals name what is wrong.
    let too_large = "1".repeat(80);
    for (nonce, needle) in [
        ("0x1234", "64 hex"),
        ("12ab", "Permit2 nonce a decimal uint256"),
        (too_large.as_str(), "larger than a uint256"),
    ] {
        let (status, body) = api.get(&path(nonce)).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (400, Some("malformed_authorization")),
            "{body}"
        );
        assert!(body["message"].as_str().unwrap().contains(needle), "{body}");
    }
    let other_asset = format!(
        "/v1/authorizations/local/{}/{}/{}",
        lower_hex(chain.account(SELLER)),
        lower_hex(payer.address()),
        lower_hex(never)
    );
    let (status, body) = api.get(&other_asset).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (404, Some("asset_not_watched")),
        "{body}"
    );
    let bad_payer = format!(
        "/v1/authorizations/local/{}/0xnot-an-address/{}",
        lower_hex(token.address),
        lower_hex(never)
    );
    let (status, body) = api.get(&bad_payer).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("malformed_authorization")),
        "{body}"
    );

    // gRPC answers the same.
    let mut client = PaymentsClient::connect(api.grpc_url.clone())
        .await
        .expect("connect");
    let answer = client
        .get_authorization(GetAuthorizationRequest {
            network: "local".into(),
            asset: lower_hex(token.address),
            payer: lower_hex(payer.address()),
            nonce: lower_hex(indexed),
        })
        .await
        .expect("GetAuthorization")
        .into_inner();
    assert_eq!(answer.status, "indexed");
    assert_eq!(
        answer.payment.expect("the payment").payment,
        lower_hex(receipt.transaction_hash)
    );
    let refused = client
        .get_authorization(GetAuthorizationRequest {
            network: "local".into(),
            asset: lower_hex(token.address),
            payer: lower_hex(payer.address()),
            nonce: "0x12".into(),
        })
        .await
        .expect_err("a short nonce is refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
}
on_both_stores!(
    authorizations_answer_what_became_of_them,
    authorizations_answer_what_became_of_them
);

/// The same for Permit2 nonces (x402's `permit2` and `upto`): the decimal `uint256` the
/// payer signed, answered from the index or from Permit2's `nonceBitmap`.
async fn permit2_nonces_answer_what_became_of_them(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    token.mint(chain.account(PAYER), 1_000_000).await;
    token
        .approve(chain.account(PAYER), permit2::PERMIT2, U256::MAX)
        .await;
    let kit = Permit2Kit::install(&chain).await;
    let payer = chain.signer(PAYER);
    // Two nonces in one bitmap word (word 1), one far away, one never used in that word.
    let (before_start, indexed, after_read, never) = (
        U256::from(256 + 3),
        U256::from(256 + 4),
        (U256::from(1u64) << 255) + U256::from(9u64),
        U256::from(256 + 5),
    );
    let pay = |nonce: U256| {
        let (kit, token, payer, chain) = (&kit, &token, &payer, &chain);
        async move {
            let signed = kit
                .sign_exact(payer, token.address, chain.account(SELLER), 1_000, nonce)
                .await;
            send_call(chain, chain.account(FACILITATOR), kit.exact_settle(&signed)).await
        }
    };
    pay(before_start).await;
    let start_block = chain.block_number().await + 1;
    let receipt = pay(indexed).await;
    chain.mine(3).await;

    let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    network.start_block = start_block;
    let chains = network.chains();
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let api = ApiServer::start(&store, &chains).await;
    let mut worker = worker(&chains, &store).await;
    sync(&mut worker).await;
    pay(after_read).await;
    let path = |nonce: U256| {
        format!(
            "/v1/authorizations/local/{}/{}/{nonce}",
            lower_hex(token.address),
            lower_hex(payer.address())
        )
    };

    let (status, body) = api.get(&path(indexed)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["status"].as_str(), body["kind"].as_str()),
        (Some("indexed"), Some("permit2"))
    );
    assert_eq!(body["nonce"], indexed.to_string());
    assert_eq!(body["payment"]["payment"], lower_hex(receipt.transaction_hash));
    assert_eq!(body["payment"]["method"], "permit2");
    for (nonce, status) in [
        (before_start, "used_unindexed"),
        (after_read, "used_not_final"),
        (never, "unused"),
    ] {
        let (code, body) = api.get(&path(nonce)).await;
        assert_eq!(
            (code, body["status"].as_str()),
            (200, Some(status)),
            "{nonce}: {body}"
        );
    }
    let (_, body) = api.get(&path(never)).await;
    assert!(body["message"].as_str().unwrap().contains("deadline"), "{body}");
}
on_both_stores!(permit2_nonces, permit2_nonces_answer_what_became_of_them);
