//! Receipt proofs of EVM payments against real anvil blocks holding several receipts: an
//! EIP-3009 payment, a Permit2 exact one and an upto one, served by `GET …/proof` (and `paywatch proof
//! show`), verify offline with `paywatch proof verify` against the block hash the node
//! reports; a proof with one byte changed in the header, the receipt or a trie node, a
//! claimed fact changed, or another block's hash is refused at its own step (its own exit
//! code); a payment not yet final has no proof. On an OP-stack chain, a block holding a
//! deposit transaction proves its payments the same way. An escrowed payment is proven
//! event by event, each against its own block's hash. On SQLite and Postgres.

use std::path::Path;
use std::process::Command;

use alloy::primitives::{B256, U256};
use alloy::providers::Provider;
use alloy::rpc::types::TransactionRequest;
use paywatch_core::ids::lower_hex;
use paywatch_evm::proof::{ReceiptProof, build_receipt_proof};
use paywatch_evm::rpc::EvmRpc;
use paywatch_grpc::proto::GetProofRequest;
use paywatch_grpc::proto::payments_client::PaymentsClient;
use paywatch_tests::chain::Chain;
use paywatch_tests::escrow::{EscrowKit, Terms};
use paywatch_tests::harness::{Indexed, LocalNetwork, sync};
use paywatch_tests::on_both_stores;
use paywatch_tests::permit2::{self, Permit2Kit};
use paywatch_tests::proxy::{Faults, RpcProxy};
use paywatch_tests::stores::Kind;
use paywatch_tests::token::{Token, transfer_calldata};
use paywatch_tests::tools::output_text;
use serde_json::{Value, json};

/// Runs `paywatch proof verify` on `proof` (written to a file in `dir`) against `block_hash`
/// with `extra` arguments; its exit code and printed verdict.
fn verify(dir: &Path, proof: &Value, block_hash: &str, extra: &[&str]) -> (i32, Value) {
    let file = dir.join("proof.json");
    std::fs::write(&file, proof.to_string()).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_paywatch"))
        .args([
            "proof",
            "verify",
            file.to_str().unwrap(),
            "--block-hash",
            block_hash,
        ])
        .args(extra)
        .output()
        .unwrap();
    let verdict =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|_| panic!("{}", output_text(&output)));
    (output.status.code().unwrap(), verdict)
}

/// The path of every leaf of `value` (a string, number, bool or null), keys and indexes
/// as text.
fn leaves(value: &Value, path: &mut Vec<String>, found: &mut Vec<Vec<String>>) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields {
                path.push(key.clone());
                leaves(field, path, found);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(i.to_string());
                leaves(item, path, found);
                path.pop();
            }
        }
        _ => found.push(path.clone()),
    }
}

/// A leaf changed as a forger would: hex with its last byte flipped, a number or decimal
/// one more, a word another, a bool negated, a null given a value.
fn change(leaf: &mut Value) {
    *leaf = match &*leaf {
        Value::String(text) if text.starts_with("0x") && text.len() > 2 => json!(flip(text, usize::MAX)),
        Value::String(text) => match text.parse::<u128>() {
            Ok(n) => json!((n + 1).to_string()),
            Err(_) => json!(format!("{text}x")),
        },
        Value::Number(n) => json!(n.as_u64().unwrap_or_default() + 1),
        Value::Bool(b) => json!(!b),
        _ => json!(lower_hex(B256::repeat_byte(7))),
    };
}

/// `text` (0x + hex) with one byte changed at `at` bytes from its start.
fn flip(text: &str, at: usize) -> String {
    let mut bytes = alloy::hex::decode(text).unwrap();
    let at = at.min(bytes.len() - 1);
    bytes[at] ^= 0x01;
    format!("0x{}", alloy::hex::encode(bytes))
}

async fn proofs_hold_against_the_block_hash_alone(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let (payer, seller, facilitator) = (chain.signer(1), chain.account(2), chain.account(3));
    token.mint(payer.address(), 1_000_000).await;
    token.approve(payer.address(), permit2::PERMIT2, U256::MAX).await;
    let kit = Permit2Kit::install(&chain).await;
    for sender in 5..9 {
        token.mint(chain.account(sender), 1_000).await;
    }
    let auth = token
        .authorize(&payer, seller, 10_000, B256::repeat_byte(1))
        .await;
    let exact = kit
        .sign_exact(&payer, token.address, seller, 20_000, U256::from(77u64))
        .await;
    let upto = kit
        .sign_upto(
            &payer,
            token.address,
            seller,
            chain.account(0),
            30_000,
            U256::from(88u64),
        )
        .await;

    // One block: unrelated transfers around the two payments.
    chain.set_automine(false).await;
    let send = |from: usize, call: (alloy::primitives::Address, alloy::primitives::Bytes)| {
        let chain = &chain;
        async move {
            *chain
                .provider
                .send_transaction(
                    TransactionRequest::default()
                        .from(chain.account(from))
                        .to(call.0)
                        .input(call.1.into()),
                )
                .await
                .expect("send")
                .tx_hash()
        }
    };
    let mut sent = Vec::new();
    for (i, sender) in (5..9).enumerate() {
        sent.push(
            send(
                sender,
                (token.address, transfer_calldata(chain.account(9), 1 + i as u64)),
            )
            .await,
        );
        if i == 1 {
            sent.push(send(3, (token.address, token.settle_calldata(&auth))).await);
        }
        if i == 2 {
            sent.push(send(4, kit.exact_settle(&exact)).await);
        }
        if i == 3 {
            sent.push(send(0, kit.upto_settle(&upto, 15_000)).await);
        }
    }
    // The EIP-3009 authorization replayed by another sender in the same block: it reverts.
    let replayed = *chain
        .provider
        .send_transaction(
            TransactionRequest::default()
                .from(chain.account(5))
                .to(token.address)
                .input(token.settle_calldata(&auth).into())
                .gas_limit(200_000),
        )
        .await
        .expect("send")
        .tx_hash();
    sent.push(replayed);
    chain.mine(1).await;
    chain.set_automine(true).await;
    let (eip3009_tx, permit2_tx, upto_tx) = (sent[2], sent[4], sent[6]);
    let block = chain
        .provider
        .get_transaction_receipt(eip3009_tx)
        .await
        .unwrap()
        .expect("mined");
    let reverted = chain
        .provider
        .get_transaction_receipt(replayed)
        .await
        .unwrap()
        .expect("mined");
    assert!(!reverted.status(), "the replayed authorization reverts");
    assert_eq!(reverted.block_hash, block.block_hash, "in the payments' block");
    let block_hash = lower_hex(block.block_hash.unwrap());
    let count = chain
        .provider
        .get_block_transaction_count_by_hash(block.block_hash.unwrap())
        .await
        .unwrap();
    assert_eq!(count, Some(sent.len() as u64), "every transaction in one block");
    chain.mine(3).await;

    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    let Indexed {
        db, api, mut worker, ..
    } = Indexed::new(kind, &network).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();

    for (tx, method, amount, nonce, permit2_nonce) in [
        (
            eip3009_tx,
            "eip3009",
            "10000",
            json!(lower_hex(B256::repeat_byte(1))),
            Value::Null,
        ),
        (permit2_tx, "permit2", "20000", Value::Null, json!("77")),
        (upto_tx, "upto", "15000", Value::Null, json!("88")),
    ] {
        let (status, proof) = api
            .get(&format!("/v1/payments/local/{}/proof", lower_hex(tx)))
            .await;
        assert_eq!(status, 200, "{proof}");
        assert_eq!(proof["method"], method);
        assert_eq!(proof["proof"]["block_hash"], block_hash);
        assert!(
            proof["proof"]["nodes"].as_array().unwrap().len() >= 2,
            "a trie of several receipts: {proof}"
        );
        let facts = &proof["facts"];
        assert_eq!(
            (
                &facts["payer"],
                &facts["pay_to"],
                &facts["asset"],
                &facts["nonce"]
            ),
            (
                &json!(lower_hex(payer.address())),
                &json!(lower_hex(seller)),
                &json!(lower_hex(token.address)),
                &nonce
            ),
            "{proof}"
        );
        assert_eq!(facts["amount"], amount);
        assert_eq!(
            facts["permit2_nonce"], permit2_nonce,
            "the nonce from the proven call"
        );
        let max_amount = if method == "upto" {
            json!("30000")
        } else {
            Value::Null
        };
        assert_eq!(
            facts["max_amount"], max_amount,
            "upto's maximum from the proven call"
        );

        let (code, verdict) = verify(dir.path(), &proof, &block_hash, &[]);
        assert_eq!((code, &verdict["valid"]), (0, &json!(true)), "{verdict}");
        // `paywatch proof show` serves the same proof.
        let shown = Command::new(env!("CARGO_BIN_EXE_paywatch"))
            .current_dir(dir.path())
            .args([
                "--database-url",
                &db.url,
                "proof",
                "show",
                "local",
                &lower_hex(tx),
            ])
            .env_remove("PAYWATCH_DATABASE_URL")
            .env_remove("PAYWATCH_CHAINS")
            .output()
            .unwrap();
        assert!(shown.status.success(), "{}", output_text(&shown));
        let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
        assert_eq!(
            (&shown["proof"], &shown["facts"]),
            (&proof["proof"], &proof["facts"])
        );
        // And gRPC `GetProof`, field for field.
        let grpc = PaymentsClient::connect(api.grpc_url.clone())
            .await
            .unwrap()
            .get_proof(GetProofRequest {
                network: "local".to_string(),
                payment: lower_hex(tx),
                index: None,
            })
            .await
            .expect("GetProof")
            .into_inner();
        let receipt = grpc.proof.expect("a receipt proof");
        assert_eq!(receipt.block_hash, block_hash);
        assert_eq!(
            format!("0x{}", alloy::hex::encode(&receipt.header_rlp)),
            proof["proof"]["header_rlp"]
        );
        assert_eq!(
            format!("0x{}", alloy::hex::encode(&receipt.receipt)),
            proof["proof"]["receipt"]
        );
        assert_eq!(
            receipt.nodes.len(),
            proof["proof"]["nodes"].as_array().unwrap().len()
        );
        assert_eq!(grpc.facts.expect("facts").amount, amount);
        let (code, verdict) = verify(dir.path(), &proof, &block_hash, &["--amount", "1"]);
        assert_eq!((code, &verdict["step"]), (14, &json!("facts")), "{verdict}");

        let tampered = |path: &[&str], mutate: &dyn Fn(&mut Value)| {
            let mut copy = proof.clone();
            let mut at = &mut copy;
            for key in path {
                at = if let Ok(i) = key.parse::<usize>() {
                    &mut at[i]
                } else {
                    &mut at[*key]
                };
            }
            mutate(at);
            copy
        };
        let flipped = |at: usize| move |v: &mut Value| *v = json!(flip(v.as_str().unwrap(), at));
        for (name, bad, code, step) in [
            (
                "header",
                tampered(&["proof", "header_rlp"], &flipped(40)),
                10,
                "header",
            ),
            (
                "receipt",
                tampered(&["proof", "receipt"], &flipped(60)),
                11,
                "inclusion",
            ),
            (
                "trie node",
                tampered(&["proof", "nodes", "0"], &flipped(20)),
                11,
                "inclusion",
            ),
            (
                "transaction",
                tampered(&["proof", "transaction"], &flipped(30)),
                11,
                "inclusion",
            ),
            (
                "claimed amount",
                tampered(&["facts", "amount"], &|v: &mut Value| *v = json!("1")),
                14,
                "facts",
            ),
        ] {
            let (got, verdict) = verify(dir.path(), &bad, &block_hash, &[]);
            assert_eq!(
                (got, verdict["step"].as_str()),
                (code, Some(step)),
                "{name}: {verdict}"
            );
        }
        // Every field of the file, changed: refused, unless the verifier neither proves it
        // nor prints it (then the verdict is the same to the letter).
        let (_, holds) = verify(dir.path(), &proof, &block_hash, &[]);
        let unproven = [
            "network",
            "index_in_tx",
            "payment_state",
            "head_block",
            "final_block",
            "proof.first_log_index",
        ];
        let mut fields = Vec::new();
        leaves(&proof, &mut Vec::new(), &mut fields);
        assert!(fields.len() > 20, "{fields:?}");
        for field in &fields {
            let name = field.join(".");
            let path: Vec<&str> = field.iter().map(String::as_str).collect();
            let bad = match name.as_str() {
                // (Another state the file can carry.)
                "payment_state" => tampered(&path, &|v: &mut Value| *v = json!("refunded")),
                _ => tampered(&path, &change),
            };
            let (got, verdict) = verify(dir.path(), &bad, &block_hash, &[]);
            if unproven.contains(&name.as_str()) {
                assert_eq!(
                    (got, &verdict),
                    (0, &holds),
                    "{name} is neither proven nor printed"
                );
            } else {
                assert_ne!(
                    got, 0,
                    "{method}: {name} changed, yet the proof verified: {verdict}"
                );
            }
        }
        // Relabelled to the reverted transaction of the same block: its hash is not the
        // proven transaction's.
        let relabelled = tampered(&["proof", "tx_hash"], &|v: &mut Value| {
            *v = json!(lower_hex(replayed))
        });
        let relabelled = {
            let mut copy = relabelled;
            copy["payment"] = json!(lower_hex(replayed));
            copy
        };
        let (got, verdict) = verify(dir.path(), &relabelled, &block_hash, &[]);
        assert_eq!(
            (got, verdict["step"].as_str()),
            (15, Some("transaction")),
            "{verdict}"
        );
        // The reverted transaction's own receipt and transaction, under the payment's facts:
        // it moved nothing.
        let rpc = EvmRpc::connect(
            "local",
            &[chain.endpoint().parse().unwrap()],
            std::time::Duration::from_secs(5),
        )
        .await
        .unwrap();
        let reverted_proof = build_receipt_proof(&rpc, block.block_hash.unwrap(), replayed)
            .await
            .unwrap();
        let mut swapped = proof.clone();
        swapped["proof"] = serde_json::to_value(&reverted_proof).unwrap();
        swapped["payment"] = json!(lower_hex(replayed));
        let (got, verdict) = verify(dir.path(), &swapped, &block_hash, &[]);
        assert_eq!((got, verdict["step"].as_str()), (13, Some("status")), "{verdict}");

        let other_block = lower_hex(
            chain
                .provider
                .get_block_by_number(1.into())
                .await
                .unwrap()
                .unwrap()
                .header
                .hash,
        );
        let (got, verdict) = verify(dir.path(), &proof, &other_block, &[]);
        assert_eq!((got, verdict["step"].as_str()), (10, Some("header")), "{verdict}");
    }

    // A node without eth_getBlockReceipts: the receipts are read one by one, and the
    // proof is the same.
    let (rebuilt, receipts_read) =
        built_from_single_receipts(&chain, block.block_hash.unwrap(), eip3009_tx).await;
    let (_, served) = api
        .get(&format!("/v1/payments/local/{}/proof", lower_hex(eip3009_tx)))
        .await;
    assert_eq!(serde_json::to_value(&rebuilt).unwrap(), served["proof"]);
    assert_eq!(receipts_read, sent.len() as u64);

    // A payment not yet final has no proof.
    let pending = token
        .pay(&payer, seller, 5, B256::repeat_byte(2), facilitator)
        .await;
    sync(&mut worker).await;
    let (status, body) = api
        .get(&format!(
            "/v1/payments/local/{}/proof",
            lower_hex(pending.transaction_hash)
        ))
        .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (409, Some("proof_unavailable")),
        "{body}"
    );
}
on_both_stores!(proofs, proofs_hold_against_the_block_hash_alone);

/// On an OP-stack chain (Base, Optimism) blocks hold deposit transactions (type `0x7e`)
/// whose receipts carry a deposit nonce, which Ethereum's receipt types do not know. A
/// payment in a block with a deposit is found by the bloom check from the block's
/// receipts (its provider leaves the block's logs out), and its proof is built and
/// verifies against the block hash, from `eth_getBlockReceipts` and from per-transaction
/// receipts alike.
async fn proofs_hold_on_an_op_stack_chain(kind: Kind) {
    let chain = Chain::start_op_stack().await;
    let token = Token::deploy(&chain).await;
    let (payer, seller) = (chain.signer(1), chain.account(2));
    token.mint(payer.address(), 1_000_000).await;
    let auth = token
        .authorize(&payer, seller, 10_000, B256::repeat_byte(7))
        .await;

    chain.set_automine(false).await;
    let deposit = chain
        .send_deposit(chain.account(4), chain.account(5), B256::repeat_byte(0x11))
        .await;
    let payment = *chain
        .provider
        .send_transaction(
            TransactionRequest::default()
                .from(chain.account(3))
                .to(token.address)
                .input(token.settle_calldata(&auth).into()),
        )
        .await
        .expect("send")
        .tx_hash();
    chain.mine(1).await;
    chain.set_automine(true).await;
    let receipts: Value = chain
        .provider
        .raw_request("eth_getBlockReceipts".into(), ("latest",))
        .await
        .unwrap();
    let receipts = receipts.as_array().unwrap();
    assert_eq!(
        receipts.len(),
        2,
        "the deposit and the payment in one block: {receipts:?}"
    );
    let by_type = |deposit: bool| {
        receipts
            .iter()
            .find(|r| r["type"].as_str().unwrap().eq_ignore_ascii_case("0x7e") == deposit)
            .unwrap_or_else(|| panic!("no receipt of the kind in {receipts:?}"))
    };
    let (deposit_receipt, payment_receipt) = (by_type(true), by_type(false));
    assert_eq!(deposit_receipt["transactionHash"], json!(lower_hex(deposit)));
    assert!(deposit_receipt["depositNonce"].is_string(), "{deposit_receipt}");
    assert!(
        serde_json::from_value::<alloy::rpc::types::TransactionReceipt>(deposit_receipt.clone()).is_err(),
        "Ethereum's receipt types do not know a deposit's (why paywatch reads both kinds)"
    );
    assert_eq!(payment_receipt["transactionHash"], json!(lower_hex(payment)));
    let block_hash = payment_receipt["blockHash"].as_str().unwrap().to_string();
    let block_number = u64::from_str_radix(
        payment_receipt["blockNumber"]
            .as_str()
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    chain.mine(3).await;

    let silent = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            log_lies: paywatch_tests::proxy::LogLies {
                omit_blocks: vec![block_number],
                ..Default::default()
            },
            ..Faults::default()
        },
    )
    .await;
    let mut network = LocalNetwork::new(chain.chain_id(), &silent.url, &[token.address]);
    network.bloom_check = true;
    let indexed = Indexed::new(kind, &network).await;
    let api = &indexed.api;
    assert!(
        silent.stats.logs_left_out() > 0,
        "the provider left the block's logs out"
    );
    assert!(
        silent.stats.calls_of("eth_getBlockReceipts") > 0,
        "the bloom check read the block's receipts"
    );

    let (status, served) = api
        .get(&format!("/v1/payments/local/{}/proof", lower_hex(payment)))
        .await;
    assert_eq!(status, 200, "{served}");
    assert_eq!(served["proof"]["block_hash"], json!(block_hash));
    let dir = tempfile::tempdir().unwrap();
    let (code, verdict) = verify(dir.path(), &served, &block_hash, &[]);
    assert_eq!((code, &verdict["valid"]), (0, &json!(true)), "{verdict}");
    assert_eq!(served["facts"]["amount"], "10000", "{served}");

    // From per-transaction receipts, the deposit's included: the same proof.
    let (rebuilt, receipts_read) =
        built_from_single_receipts(&chain, block_hash.parse().unwrap(), payment).await;
    assert_eq!(serde_json::to_value(&rebuilt).unwrap(), served["proof"]);
    assert_eq!(receipts_read, 2);
}
on_both_stores!(op_stack_proofs, proofs_hold_on_an_op_stack_chain);

/// The x402 SDK signs an escrowed (`auth_capture`) payment on this chain's escrow, with
/// the test's operator, seller and fee receiver.
fn escrow_terms(chain: &Chain, max_amount: u64) -> Terms {
    Terms::usual(chain.account(3), chain.account(2), chain.account(4), max_amount)
}

/// An escrowed payment's facts span several transactions: its proof is its authorization's
/// (or charge's) receipt proof plus one receipt proof per final capture, void, reclaim and
/// refund, each against its own block's hash. `paywatch proof verify` checks every one
/// against the block hashes the caller trusts and adds the events up; a missing block
/// hash, an event's log moved, or a claimed sum changed is refused at its step.
async fn escrowed_payments_are_proven_event_by_event(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    token.mint(chain.account(1), 1_000_000).await;
    token.mint(chain.account(3), 1_000_000).await;
    let kit = EscrowKit::install(&chain, &token).await;

    let captured = kit.sign(1, escrow_terms(&chain, 1_000)).await;
    let mut blocks = vec![kit.authorize(&captured, 1_000).await.block_hash.unwrap()];
    for part in [600, 400] {
        blocks.push(kit.capture(&captured, part, 100).await.block_hash.unwrap());
    }
    let charged = kit.sign(1, escrow_terms(&chain, 500)).await;
    blocks.push(kit.charge(&charged, 500, 0).await.block_hash.unwrap());
    blocks.push(kit.refund(&charged, 200).await.block_hash.unwrap());
    let voided = kit.sign(1, escrow_terms(&chain, 700)).await;
    blocks.push(kit.authorize(&voided, 700).await.block_hash.unwrap());
    blocks.push(kit.void(&voided).await.block_hash.unwrap());
    let held = kit.sign(1, escrow_terms(&chain, 150)).await;
    blocks.push(kit.authorize(&held, 150).await.block_hash.unwrap());
    chain.mine(3).await;

    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    let indexed = Indexed::new(kind, &network).await;
    let dir = tempfile::tempdir().unwrap();
    let trusted: Vec<String> = blocks.iter().map(lower_hex).collect();
    let all_hashes: Vec<&str> = trusted
        .iter()
        .flat_map(|hash| ["--block-hash", hash.as_str()])
        .collect();

    for (signed, kinds, sums) in [
        (&captured, vec!["captured", "captured"], ["1000", "0", "0"]),
        (&charged, vec!["refunded"], ["500", "0", "200"]),
        (&voided, vec!["voided"], ["0", "700", "0"]),
        (&held, vec![], ["0", "0", "0"]),
    ] {
        let id = lower_hex(signed.hash(chain.chain_id()));
        let (status, proof) = indexed.api.get(&format!("/v1/payments/local/{id}/proof")).await;
        assert_eq!(status, 200, "{proof}");
        assert_eq!(proof["method"], "auth_capture");
        let facts = &proof["facts"];
        assert_eq!(
            (
                &facts["payer"],
                &facts["pay_to"],
                &facts["asset"],
                &facts["settled_by"]
            ),
            (
                &json!(lower_hex(chain.account(1))),
                &json!(lower_hex(chain.account(2))),
                &json!(lower_hex(token.address)),
                &json!(lower_hex(paywatch_tests::escrow::ESCROW))
            ),
            "{proof}"
        );
        assert_eq!(facts["escrow"]["payment_info_hash"], json!(id));
        assert_eq!(
            [
                &facts["escrow"]["captured_amount"],
                &facts["escrow"]["released_amount"],
                &facts["escrow"]["refunded_amount"]
            ],
            sums.map(|s| json!(s)).each_ref(),
            "{proof}"
        );
        let events: Vec<&str> = proof["escrow_events"]
            .as_array()
            .map(|events| events.iter().map(|e| e["kind"].as_str().unwrap()).collect())
            .unwrap_or_default();
        assert_eq!(events, kinds, "{proof}");

        let (code, verdict) = verify(dir.path(), &proof, &trusted[0], &all_hashes);
        assert_eq!((code, &verdict["valid"]), (0, &json!(true)), "{verdict}");
        assert_eq!(&verdict["facts"], facts);
    }

    // The captured payment: each later event needs its own trusted block hash.
    let id = lower_hex(captured.hash(chain.chain_id()));
    let (_, proof) = indexed.api.get(&format!("/v1/payments/local/{id}/proof")).await;
    let (code, verdict) = verify(dir.path(), &proof, &trusted[0], &[]);
    assert_eq!(
        (code, verdict["step"].as_str()),
        (10, Some("header")),
        "{verdict}"
    );
    assert!(
        verdict["detail"].as_str().unwrap().contains("captured"),
        "{verdict}"
    );
    // A capture's log moved to another log of its receipt (a token transfer the capture
    // made).
    let mut moved = proof.clone();
    let log = proof["escrow_events"][1]["log"].as_u64().unwrap();
    moved["escrow_events"][1]["log"] = json!(if log == 0 { 1 } else { log - 1 });
    let (code, verdict) = verify(dir.path(), &moved, &trusted[0], &all_hashes);
    assert_eq!((code, verdict["step"].as_str()), (14, Some("facts")), "{verdict}");
    // A claimed sum that the events do not add up to.
    let mut inflated = proof.clone();
    inflated["facts"]["escrow"]["captured_amount"] = json!("1001");
    let (code, verdict) = verify(dir.path(), &inflated, &trusted[0], &all_hashes);
    assert_eq!((code, verdict["step"].as_str()), (14, Some("facts")), "{verdict}");
    // One byte changed in a capture's receipt.
    let mut forged = proof.clone();
    let receipt = forged["escrow_events"][0]["proof"]["receipt"]
        .as_str()
        .unwrap()
        .to_string();
    forged["escrow_events"][0]["proof"]["receipt"] = json!(flip(&receipt, receipt.len() / 4));
    let (code, verdict) = verify(dir.path(), &forged, &trusted[0], &all_hashes);
    assert_eq!(
        (code, verdict["step"].as_str()),
        (11, Some("inclusion")),
        "{verdict}"
    );

    // gRPC `GetProof` carries the events' proofs too.
    let mut grpc = PaymentsClient::connect(indexed.api.grpc_url.clone())
        .await
        .unwrap();
    let served = grpc
        .get_proof(GetProofRequest {
            network: "local".to_string(),
            payment: id.clone(),
            index: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(served.escrow_events.len(), 2);
    assert_eq!(served.escrow_events[0].kind, "captured");
    assert_eq!(
        served.facts.and_then(|f| f.escrow).map(|e| e.captured_amount),
        Some("1000".to_string())
    );
}
on_both_stores!(escrow_proofs, escrowed_payments_are_proven_event_by_event);

/// A payment whose block left the chain has no proof: 409 `proof_unavailable` naming its
/// state, while pending and once dropped.
async fn a_reorged_out_payment_has_no_proof(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let (payer, seller, facilitator) = (chain.signer(1), chain.account(2), chain.account(3));
    token.mint(payer.address(), 1_000_000).await;
    let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    network.confirmations = 4;
    let Indexed {
        db: _db,
        api,
        mut worker,
        ..
    } = Indexed::new(kind, &network).await;

    let before = chain.snapshot().await;
    let paid = token
        .pay(&payer, seller, 500, B256::repeat_byte(9), facilitator)
        .await;
    chain.mine(1).await;
    sync(&mut worker).await;
    let path = format!("/v1/payments/local/{}/proof", lower_hex(paid.transaction_hash));
    for state in ["pending", "dropped"] {
        if state == "dropped" {
            // The payment's block and the one after it are replaced by empty blocks.
            chain.revert(&before).await;
            chain.mine(10).await;
            sync(&mut worker).await;
        }
        let (status, body) = api.get(&path).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (409, Some("proof_unavailable")),
            "{body}"
        );
        assert!(
            body["message"].as_str().unwrap().contains(state),
            "{state}: {body}"
        );
    }
}
on_both_stores!(reorged_out, a_reorged_out_payment_has_no_proof);

/// The proof of transaction `tx` in block `block_hash` as built through a node that does
/// not serve `eth_getBlockReceipts`, with how many receipts it was asked for one by one.
async fn built_from_single_receipts(chain: &Chain, block_hash: B256, tx: B256) -> (ReceiptProof, u64) {
    let no_block_receipts = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            unserved_methods: vec!["eth_getBlockReceipts"],
            ..Faults::default()
        },
    )
    .await;
    let rpc = EvmRpc::connect(
        "local",
        &[no_block_receipts.url.parse().unwrap()],
        std::time::Duration::from_secs(10),
    )
    .await
    .unwrap();
    let proof = build_receipt_proof(&rpc, block_hash, tx)
        .await
        .expect("a proof from per-transaction receipts");
    (
        proof,
        no_block_receipts.stats.calls_of("eth_getTransactionReceipt"),
    )
}
