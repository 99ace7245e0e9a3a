//! x402 payments settled through Permit2 — x402's exact and upto proxies — on a real anvil
//! node with stand-ins for Permit2 and the proxies (same ABI, events and behaviour, checked
//! against the x402 SDK's ABIs) at their canonical addresses, read by the EVM
//! worker and answered by the HTTP API, on SQLite and on Postgres; and payments the real
//! x402 SDK creates and settles (`tests/sdk/settle.js`).

use alloy::primitives::{B256, U256};
use paywatch_core::ids::lower_hex;
use paywatch_core::method::{EXACT_PERMIT2_PROXY, PERMIT2, UPTO_PERMIT2_PROXY};
use paywatch_tests::batch::Batcher;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{Indexed, LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::permit2::{self, Permit2Kit, send_call};
use paywatch_tests::proxy::{Faults, RpcProxy};
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;
use paywatch_tests::tools::{node_json, repo_root};

const PAYER: usize = 1;
const SELLER: usize = 2;
const FACILITATOR: usize = 3;

/// A funded token whose payer has approved Permit2, and the Permit2 kit.
async fn permit2_chain(chain: &Chain) -> (Token, Permit2Kit) {
    let token = Token::deploy(chain).await;
    token.mint(chain.account(PAYER), 1_000_000_000).await;
    token
        .approve(chain.account(PAYER), permit2::PERMIT2, U256::MAX)
        .await;
    (token, Permit2Kit::install(chain).await)
}

fn path(chain_id: u64, tx: impl AsRef<[u8]>) -> String {
    format!("/v1/payments/eip155:{chain_id}/{}", lower_hex(tx))
}

/// What the installed x402 SDK (`@x402/evm`) names Permit2 and its proxies.
fn sdk_addresses() -> serde_json::Value {
    node_json(&[
        "-e",
        "const evm = require('@x402/evm'); process.stdout.write(JSON.stringify({ \
         permit2: evm.PERMIT2_ADDRESS, exact: evm.x402ExactPermit2ProxyAddress, \
         upto: evm.x402UptoPermit2ProxyAddress }))",
    ])
}

/// paywatch's canonical addresses are the SDK's, and the test kit places the stand-ins
/// there.
#[tokio::test]
async fn the_contracts_sit_where_the_x402_sdk_looks_for_them() {
    let sdk = sdk_addresses();
    let lower = |key: &str| sdk[key].as_str().expect(key).to_lowercase();
    assert_eq!(lower("permit2"), lower_hex(PERMIT2));
    assert_eq!(lower("exact"), lower_hex(EXACT_PERMIT2_PROXY));
    assert_eq!(lower("upto"), lower_hex(UPTO_PERMIT2_PROXY));
    let chain = Chain::start().await;
    let kit = Permit2Kit::install(&chain).await;
    assert_eq!(kit.exact, EXACT_PERMIT2_PROXY);
    assert_eq!(kit.upto, UPTO_PERMIT2_PROXY);
}

/// The proxies' settling functions and events paywatch decodes are those of the ABIs the
/// x402 SDK ships (`x402ExactPermit2ProxyABI`, `x402UptoPermit2ProxyABI`), and the test
/// stand-ins (`contracts/Permit2Settlement.sol`) have them too.
#[test]
fn the_proxy_calls_and_events_are_those_of_the_x402_sdk() {
    use alloy::json_abi::JsonAbi;
    use alloy::sol_types::SolCall;
    use paywatch_evm::settle_calls::{ExactProxy, UptoProxy};
    let abis = node_json(&[
        "-e",
        "const evm = require('@x402/evm'); process.stdout.write(JSON.stringify({ \
         exact: evm.x402ExactPermit2ProxyABI, upto: evm.x402UptoPermit2ProxyABI }))",
    ]);
    let abi =
        |value: &serde_json::Value| -> JsonAbi { serde_json::from_value(value.clone()).expect("an ABI") };
    let selectors = |abi: &JsonAbi| -> Vec<[u8; 4]> {
        let mut found: Vec<[u8; 4]> = abi
            .functions()
            .filter(|f| f.name.starts_with("settle"))
            .map(|f| f.selector().0)
            .collect();
        found.sort_unstable();
        found
    };
    let compiled = |artifact: &str| -> JsonAbi {
        let artifact: serde_json::Value = serde_json::from_str(artifact).expect("artifact");
        serde_json::from_value(artifact["abi"].clone()).expect("an ABI")
    };
    for (sdk, ours, stand_in) in [
        (
            abi(&abis["exact"]),
            [
                ExactProxy::settleCall::SELECTOR,
                ExactProxy::settleWithPermitCall::SELECTOR,
            ],
            compiled(include_str!("contracts/X402ExactPermit2Proxy.json")),
        ),
        (
            abi(&abis["upto"]),
            [
                UptoProxy::settleCall::SELECTOR,
                UptoProxy::settleWithPermitCall::SELECTOR,
            ],
            compiled(include_str!("contracts/X402UptoPermit2Proxy.json")),
        ),
    ] {
        let mut ours = ours.to_vec();
        ours.sort_unstable();
        assert_eq!(selectors(&sdk), ours);
        assert_eq!(selectors(&stand_in), ours);
        let events: Vec<_> = sdk
            .events()
            .filter(|e| e.name.starts_with("Settled"))
            .map(|e| e.selector())
            .collect();
        let decoded = paywatch_evm::decode::settlement_topics();
        assert_eq!(events.len(), 2, "Settled and SettledWithPermit");
        assert!(
            events.iter().all(|topic| decoded[1..].contains(topic)),
            "{events:?}"
        );
    }
}

async fn exact_and_upto_settlements_are_payments(kind: Kind) {
    let chain = Chain::start().await;
    let (token, kit) = permit2_chain(&chain).await;
    let payer = chain.signer(PAYER);
    let (seller, facilitator) = (chain.account(SELLER), chain.account(FACILITATOR));
    let exact_nonce = (U256::from(1u64) << 200) + U256::from(5u64);
    let exact = kit
        .sign_exact(&payer, token.address, seller, 10_000, exact_nonce)
        .await;
    let exact_receipt = send_call(&chain, facilitator, kit.exact_settle(&exact)).await;
    let upto = kit
        .sign_upto(
            &payer,
            token.address,
            seller,
            facilitator,
            50_000,
            U256::from(7u64),
        )
        .await;
    let upto_receipt = send_call(&chain, facilitator, kit.upto_settle(&upto, 12_345)).await;
    let eip3009 = token
        .pay(&payer, seller, 2_000, B256::repeat_byte(9), facilitator)
        .await;
    let plain = token.transfer(chain.account(PAYER), seller, 777).await;
    chain.mine(2).await;

    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    let indexed = Indexed::new(kind, &network).await;
    let api = &indexed.api;

    let (status, body) = api
        .get(&path(chain.chain_id(), exact_receipt.transaction_hash))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["method"], "permit2");
    assert_eq!(body["payer"], lower_hex(chain.account(PAYER)));
    assert_eq!(body["pay_to"], lower_hex(seller));
    assert_eq!(body["amount"], "10000");
    assert_eq!(body["asset"], lower_hex(token.address));
    assert_eq!(body["nonce"], exact_nonce.to_string());
    assert_eq!(body["payment_state"], "paid");
    assert!(
        body.get("max_amount").is_none() && body.get("nonce_unavailable").is_none(),
        "{body}"
    );

    let (status, body) = api
        .get(&path(chain.chain_id(), upto_receipt.transaction_hash))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (
            body["method"].as_str(),
            body["amount"].as_str(),
            body["max_amount"].as_str(),
            body["nonce"].as_str()
        ),
        (Some("upto"), Some("12345"), Some("50000"), Some("7")),
        "{body}"
    );

    let (_, body) = api.get(&path(chain.chain_id(), eip3009.transaction_hash)).await;
    assert_eq!(
        (body["method"].as_str(), body["nonce"].as_str()),
        (Some("eip3009"), Some(lower_hex(B256::repeat_byte(9)).as_str()))
    );
    let (status, body) = api.get(&path(chain.chain_id(), plain.transaction_hash)).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (404, Some("payment_not_found"))
    );

    // Finance lists and sums by method.
    let (status, page) = api.get("/v1/payments?network=local&method=upto").await;
    assert_eq!(status, 200, "{page}");
    let listed: Vec<(&str, &str)> = page["payments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["method"].as_str().unwrap(), p["amount"].as_str().unwrap()))
        .collect();
    assert_eq!(listed, [("upto", "12345")]);
    let (status, body) = api.get("/v1/payments?network=local&method=permit3").await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("malformed_query")),
        "{body}"
    );
    let (status, totals) = api.get("/v1/totals?network=local&group_by=method").await;
    assert_eq!(status, 200, "{totals}");
    let sums: Vec<(&str, &str)> = totals["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["key"].as_str().unwrap(), g["final_amount"].as_str().unwrap()))
        .collect();
    assert_eq!(
        sums,
        [("eip3009", "2000"), ("permit2", "10000"), ("upto", "12345")]
    );
}
on_both_stores!(exact_and_upto, exact_and_upto_settlements_are_payments);

/// A facilitator's batch: an EIP-3009 settlement, two exact and one upto Permit2
/// settlement of the watched token and one of another token, in one transaction sent to a
/// batching contract (not to a proxy): the nonces come from the call trace.
async fn batched_settlements_are_read_from_the_call_trace(kind: Kind) {
    let chain = Chain::start().await;
    let (token, kit) = permit2_chain(&chain).await;
    let other = Token::deploy(&chain).await;
    other.mint(chain.account(PAYER), 1_000_000).await;
    other
        .approve(chain.account(PAYER), permit2::PERMIT2, U256::MAX)
        .await;
    let batcher = Batcher::deploy(&chain).await;
    let payer = chain.signer(PAYER);
    let (seller, facilitator) = (chain.account(SELLER), chain.account(FACILITATOR));

    let auth = token.authorize(&payer, seller, 100, B256::repeat_byte(1)).await;
    let first = kit
        .sign_exact(&payer, token.address, seller, 200, U256::from(11u64))
        .await;
    let elsewhere = kit
        .sign_exact(&payer, other.address, seller, 300, U256::from(12u64))
        .await;
    let second = kit
        .sign_exact(&payer, token.address, seller, 400, U256::from(13u64))
        .await;
    // The batching contract calls the upto proxy, so it is the facilitator the payer names.
    let upto = kit
        .sign_upto(
            &payer,
            token.address,
            seller,
            batcher.address(),
            900,
            U256::from(14u64),
        )
        .await;
    let receipt = batcher
        .settle_calls(
            vec![
                (token.address, token.settle_calldata(&auth)),
                kit.exact_settle(&first),
                kit.exact_settle(&elsewhere),
                kit.exact_settle(&second),
                kit.upto_settle(&upto, 500),
            ],
            facilitator,
        )
        .await;
    chain.mine(2).await;

    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    let indexed = Indexed::new(kind, &network).await;
    let api = &indexed.api;

    let lookup = path(chain.chain_id(), receipt.transaction_hash);
    let (status, body) = api.get(&lookup).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (409, Some("ambiguous_payment")),
        "{body}"
    );
    // Numbered by the transaction's settlement logs: the authorization (0), then the
    // proxies' Settled logs (1 to 4), the other token's (2) included.
    let mut found = Vec::new();
    for index in 0..6 {
        let (status, body) = api.get(&format!("{lookup}?index={index}")).await;
        if status == 200 {
            found.push((
                index,
                body["method"].as_str().unwrap().to_string(),
                body["amount"].as_str().unwrap().to_string(),
                body["nonce"].as_str().unwrap().to_string(),
                body["max_amount"].as_str().map(str::to_string),
            ));
        } else {
            assert_eq!(body["reason"], "payment_not_found", "{body}");
        }
    }
    let text = |s: &str| s.to_string();
    assert_eq!(
        found,
        [
            (
                0,
                text("eip3009"),
                text("100"),
                lower_hex(B256::repeat_byte(1)),
                None
            ),
            (1, text("permit2"), text("200"), text("11"), None),
            (3, text("permit2"), text("400"), text("13"), None),
            (4, text("upto"), text("500"), text("14"), Some(text("900"))),
        ]
    );
}
on_both_stores!(batched, batched_settlements_are_read_from_the_call_trace);

/// Behind a node that serves no call traces, a batched settlement is stored without its
/// nonce and the answer says why; a direct call to the proxy still gives it.
async fn without_call_traces_the_nonce_is_missing_and_said_why(kind: Kind) {
    let chain = Chain::start().await;
    let (token, kit) = permit2_chain(&chain).await;
    let batcher = Batcher::deploy(&chain).await;
    let payer = chain.signer(PAYER);
    let (seller, facilitator) = (chain.account(SELLER), chain.account(FACILITATOR));
    let batched = kit
        .sign_exact(&payer, token.address, seller, 200, U256::from(21u64))
        .await;
    let batched = batcher
        .settle_calls(vec![kit.exact_settle(&batched)], facilitator)
        .await;
    let direct = kit
        .sign_exact(&payer, token.address, seller, 300, U256::from(22u64))
        .await;
    let direct = send_call(&chain, facilitator, kit.exact_settle(&direct)).await;
    chain.mine(2).await;
    let proxy = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            unserved_methods: vec!["debug_traceTransaction"],
            ..Faults::default()
        },
    )
    .await;

    let network = LocalNetwork::new(chain.chain_id(), &proxy.url, &[token.address]);
    let indexed = Indexed::new(kind, &network).await;
    let api = &indexed.api;

    let (status, body) = api.get(&path(chain.chain_id(), batched.transaction_hash)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["method"].as_str(), body["amount"].as_str()),
        (Some("permit2"), Some("200"))
    );
    assert!(body["nonce"].is_null(), "{body}");
    assert!(
        body["nonce_unavailable"]
            .as_str()
            .is_some_and(|why| why.contains("debug_traceTransaction")),
        "{body}"
    );
    let (_, body) = api.get(&path(chain.chain_id(), direct.transaction_hash)).await;
    assert_eq!(body["nonce"], "22", "{body}");
}
on_both_stores!(
    without_traces,
    without_call_traces_the_nonce_is_missing_and_said_why
);

/// With facilitators configured, a Permit2 payment's transaction is read once: the call
/// read for its nonce also names its sender (the facilitator).
async fn the_settling_call_read_also_names_the_facilitator(kind: Kind) {
    let chain = Chain::start().await;
    let (token, kit) = permit2_chain(&chain).await;
    let payer = chain.signer(PAYER);
    let (seller, facilitator) = (chain.account(SELLER), chain.account(FACILITATOR));
    let mut settled = Vec::new();
    for nonce in [31u64, 32] {
        let signed = kit
            .sign_exact(&payer, token.address, seller, 100 * nonce, U256::from(nonce))
            .await;
        settled.push(send_call(&chain, facilitator, kit.exact_settle(&signed)).await);
    }
    chain.mine(2).await;
    let proxy = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
    let mut network = LocalNetwork::new(chain.chain_id(), &proxy.url, &[token.address]);
    network.facilitators = vec![facilitator];
    let indexed = Indexed::new(kind, &network).await;
    for (receipt, nonce) in settled.iter().zip([31, 32]) {
        let (status, body) = indexed
            .api
            .get(&path(chain.chain_id(), receipt.transaction_hash))
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["nonce"], nonce.to_string(), "{body}");
        assert_eq!(body["facilitator"], lower_hex(facilitator), "{body}");
    }
    assert_eq!(
        proxy.stats.calls_of("eth_getTransactionByHash"),
        2,
        "one read per payment transaction"
    );
    assert_eq!(
        proxy.stats.batches_of("eth_getTransactionByHash"),
        1,
        "both in one batch"
    );
}
on_both_stores!(
    one_read_per_transaction,
    the_settling_call_read_also_names_the_facilitator
);

/// Settles one `exact` payment with the real x402 SDK (`tests/sdk/settle.js`): its client
/// signs, its facilitator verifies and settles on the chain; returns the settle response.
fn sdk_settle(chain: &Chain, token: &Token, amount: u64, method: &str) -> serde_json::Value {
    let key = |i: usize| alloy::hex::encode_prefixed(chain.signer(i).to_bytes());
    node_json(&[
        repo_root().join("tests/sdk/settle.js").display().to_string(),
        chain.endpoint(),
        chain.chain_id().to_string(),
        lower_hex(token.address),
        key(PAYER),
        key(FACILITATOR),
        lower_hex(chain.account(SELLER)),
        amount.to_string(),
        method.to_string(),
    ])
}

/// What real users run: the x402 SDK settles an EIP-3009 and a Permit2 payment, and
/// paywatch reports each with the facts the facilitator's settle response gives.
async fn payments_settled_by_the_x402_sdk_are_reported_as_settled(kind: Kind) {
    let chain = Chain::start().await;
    let (token, _kit) = permit2_chain(&chain).await;
    let eip3009 = sdk_settle(&chain, &token, 1_500, "eip3009");
    let permit2 = sdk_settle(&chain, &token, 2_500, "permit2");
    chain.mine(2).await;

    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    let indexed = Indexed::new(kind, &network).await;
    let api = &indexed.api;
    for (settled, method, amount) in [(eip3009, "eip3009", "1500"), (permit2, "permit2", "2500")] {
        assert_eq!(settled["success"], true, "{settled}");
        let tx = settled["transaction"].as_str().expect("a transaction hash");
        let (status, body) = api.get(&format!("/v1/payments/local/{tx}")).await;
        assert_eq!(status, 200, "{method}: {body}");
        assert_eq!(body["method"], method, "{body}");
        assert_eq!(body["payment"], tx.to_lowercase());
        assert_eq!(body["network"], settled["network"], "{body}");
        assert_eq!(
            body["payer"].as_str(),
            settled["payer"].as_str().map(str::to_lowercase).as_deref(),
            "{body}"
        );
        assert_eq!(body["pay_to"], lower_hex(chain.account(SELLER)));
        assert_eq!(body["amount"], amount);
        assert_eq!(body["payment_state"], "paid");
        assert!(body["nonce"].is_string(), "{body}");
    }
}
on_both_stores!(
    sdk_settlements,
    payments_settled_by_the_x402_sdk_are_reported_as_settled
);

/// Many Permit2 settlements in one block: their transactions are read in one JSON-RPC
/// batch, not with the block's body, and each payment still gets its own nonce. A node
/// that serves no batches gives the same facts, read one call per transaction.
async fn settlements_crowding_one_block_are_read_in_one_batch(kind: Kind) {
    let chain = Chain::start().await;
    let (token, kit) = permit2_chain(&chain).await;
    let payer = chain.signer(PAYER);
    let mut calls = Vec::new();
    for i in 0..6u64 {
        let signed = kit
            .sign_exact(
                &payer,
                token.address,
                chain.account(SELLER),
                100 + i,
                U256::from(500 + i),
            )
            .await;
        calls.push(kit.exact_settle(&signed));
    }
    let first_block = chain.block_number().await + 1;
    chain.send_all(chain.account(FACILITATOR), calls, 250_000).await;

    for refuse_batches in [false, true] {
        let proxy = RpcProxy::start(
            &chain.endpoint(),
            Faults {
                refuse_batches,
                ..Faults::default()
            },
        )
        .await;
        let network = LocalNetwork::new(chain.chain_id(), &proxy.url, &[token.address]);
        let indexed = Indexed::new(kind, &network).await;
        let page = indexed
            .store
            .list_payments(
                &paywatch_core::listing::PaymentFilter {
                    method: Some(paywatch_core::PaymentMethod::Permit2),
                    ..paywatch_core::listing::PaymentFilter::of(
                        format!("eip155:{}", chain.chain_id()).parse().unwrap(),
                    )
                },
                None,
                100,
            )
            .await
            .unwrap();
        assert!(page.iter().all(|p| p.block_number == first_block), "one block");
        let mut facts: Vec<(String, String)> = page
            .into_iter()
            .map(|p| (p.amount, p.nonce.expect("a nonce")))
            .collect();
        facts.sort();
        let expected: Vec<(String, String)> = (0..6u64)
            .map(|i| ((100 + i).to_string(), (500 + i).to_string()))
            .collect();
        assert_eq!(facts, expected, "batches refused: {refuse_batches}");
        // A node that serves batches gets the six in one; one that refuses them gets one
        // batch (whichever the worker sent first), then single calls only.
        let (batches, what) = match refuse_batches {
            false => (
                proxy.stats.batches_of("eth_getTransactionByHash"),
                "the six transactions asked for in one batch",
            ),
            true => (
                proxy.stats.batches.load(std::sync::atomic::Ordering::SeqCst),
                "one batch tried, then single calls",
            ),
        };
        assert_eq!(batches, 1, "{what}");
        // Each transaction once, plus once more in a refused batch that carried it.
        let refused = match refuse_batches {
            true => 6 * proxy.stats.batches_of("eth_getTransactionByHash"),
            false => 0,
        };
        let reads = 6 + refused;
        assert_eq!(
            proxy.stats.calls_of("eth_getTransactionByHash"),
            reads,
            "batches refused: {refuse_batches}"
        );
    }
}
on_both_stores!(
    crowded_block,
    settlements_crowding_one_block_are_read_in_one_batch
);

/// Watching the proxies from a restart on never rewrites or renumbers what was stored:
/// a transaction settling an EIP-3009 and a Permit2 payment was indexed while no proxy
/// was watched (its EIP-3009 payment is number 0); after a restart that watches the
/// canonical proxies, that row is unchanged, and a new such transaction numbers its
/// payments 0 (EIP-3009) and 1 (Permit2), the numbers it would have had all along.
async fn watching_proxies_later_rewrites_no_stored_payment(kind: Kind) {
    let chain = Chain::start().await;
    let (token, kit) = permit2_chain(&chain).await;
    let batcher = Batcher::deploy(&chain).await;
    let payer = chain.signer(PAYER);
    let (seller, facilitator) = (chain.account(SELLER), chain.account(FACILITATOR));
    let mixed = async |nonce: u8| {
        let auth = token
            .authorize(&payer, seller, 100, B256::repeat_byte(nonce))
            .await;
        let permit = kit
            .sign_exact(&payer, token.address, seller, 200, U256::from(nonce))
            .await;
        batcher
            .settle_calls(
                vec![
                    (token.address, token.settle_calldata(&auth)),
                    kit.exact_settle(&permit),
                ],
                facilitator,
            )
            .await
            .transaction_hash
    };
    let first = mixed(1).await;
    chain.mine(3).await;

    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    let narrow = network.toml().replace(
        "alias = \"local\"",
        "alias = \"local\"\nexact_permit2_proxies = []\nupto_permit2_proxies = []",
    );
    let narrow = paywatch_core::config::parse_chains(&narrow, "test chains.toml", |_| None).unwrap();
    sync(&mut worker(&narrow, &store).await).await;
    let net = format!("eip155:{}", chain.chain_id());
    let before = store.payments_by_id(&net, &lower_hex(first)).await.unwrap();
    let facts: Vec<(u32, paywatch_core::PaymentMethod)> =
        before.iter().map(|p| (p.index_in_tx, p.method)).collect();
    assert_eq!(facts, [(0, paywatch_core::PaymentMethod::Eip3009)]);

    let wide = network.chains();
    let mut restarted = worker(&wide, &store).await;
    sync(&mut restarted).await;
    let second = mixed(2).await;
    chain.mine(3).await;
    sync(&mut restarted).await;
    assert_eq!(
        store.payments_by_id(&net, &lower_hex(first)).await.unwrap(),
        before,
        "the stored payment is unchanged"
    );
    let numbered: Vec<(u32, paywatch_core::PaymentMethod)> = store
        .payments_by_id(&net, &lower_hex(second))
        .await
        .unwrap()
        .iter()
        .map(|p| (p.index_in_tx, p.method))
        .collect();
    assert_eq!(
        numbered,
        [
            (0, paywatch_core::PaymentMethod::Eip3009),
            (1, paywatch_core::PaymentMethod::Permit2)
        ]
    );
}
on_both_stores!(
    proxies_added_later,
    watching_proxies_later_rewrites_no_stored_payment
);
