//! `paywatch audit` as a user runs it, on both stores: a store filled through a provider
//! whose `eth_getLogs` left one payment out and made a refund up (receipts stay true) is
//! audited from the blocks' receipts, and again with an honest verifier; both audits name
//! the missing payment and the made-up transfer with what the chain and the store hold,
//! and exit 4. A store filled honestly audits clean (exit 0).

use std::path::Path;
use std::process::{Command, Output};

use alloy::primitives::B256;
use paywatch_core::ids::lower_hex;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::proxy::{Faults, LogLies, RpcProxy};
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;
use paywatch_tests::tools::output_text;
use serde_json::Value;

/// `paywatch audit` of the network `network` describes, on the store at `database_url`.
fn audit(dir: &Path, network: &LocalNetwork, database_url: &str, extra: &[&str]) -> Output {
    std::fs::write(dir.join("chains.toml"), network.toml()).unwrap();
    Command::new(env!("CARGO_BIN_EXE_paywatch"))
        .current_dir(dir)
        .args(["--database-url", database_url, "audit", "--network", "local"])
        .args(extra)
        .env("RUST_LOG", "warn")
        .env_remove("PAYWATCH_DATABASE_URL")
        .env_remove("PAYWATCH_CHAINS")
        .output()
        .unwrap()
}

/// The JSON lines an audit printed.
fn differences(output: &Output) -> Vec<Value> {
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// A fresh store of `kind` filled by a worker reading through `rpc_url`.
async fn filled(kind: Kind, chain: &Chain, token: &Token, rpc_url: &str) -> TestDb {
    let network = LocalNetwork::new(chain.chain_id(), rpc_url, &[token.address]);
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let mut worker = worker(&network.chains(), &store).await;
    sync(&mut worker).await;
    store.close().await;
    db
}

async fn an_audit_names_what_a_lying_provider_left_out_and_made_up(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let (payer, other_payer, seller) = (chain.signer(1), chain.signer(4), chain.account(2));
    token.mint(payer.address(), 1_000_000).await;
    token.mint(other_payer.address(), 1_000_000).await;
    let first = token
        .pay(&payer, seller, 10_000, B256::repeat_byte(1), chain.account(3))
        .await;
    let second = token
        .pay(
            &other_payer,
            seller,
            20_000,
            B256::repeat_byte(2),
            chain.account(3),
        )
        .await;
    chain.mine(3).await;
    let (first_tx, second_tx) = (
        lower_hex(first.transaction_hash),
        lower_hex(second.transaction_hash),
    );
    let liar = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            log_lies: LogLies {
                omit_transactions: vec![second_tx.clone()],
                invent_refunds_in: vec![first_tx.clone()],
                ..LogLies::default()
            },
            ..Faults::default()
        },
    )
    .await;
    let fooled = filled(kind, &chain, &token, &liar.url).await;
    let dir = tempfile::tempdir().unwrap();

    // From the receipts, through the same lying provider; then with an honest verifier.
    let from_receipts = LocalNetwork::new(chain.chain_id(), &liar.url, &[token.address]);
    let mut with_verifier = from_receipts.clone();
    with_verifier.verify_rpc_url = Some(chain.endpoint());
    for (network, source) in [
        (&from_receipts, "every block's receipts"),
        (&with_verifier, "the verifier"),
    ] {
        let output = audit(dir.path(), network, &fooled.url, &[]);
        assert_eq!(output.status.code(), Some(4), "{}", output_text(&output));
        assert!(
            output_text(&output).contains(&format!("against {source}"))
                && output_text(&output).contains("2 difference(s)"),
            "{}",
            output_text(&output)
        );
        let found = differences(&output);
        assert_eq!(found.len(), 2, "{found:?}");
        let missing = &found[0];
        assert_eq!(missing["difference"], "missing_payment", "{missing}");
        assert_eq!(missing["chain"]["payment_id"], second_tx);
        assert_eq!(missing["chain"]["amount"], "20000");
        assert_eq!(missing["chain"]["payer"], lower_hex(other_payer.address()));
        assert_eq!(missing["chain"]["pay_to"], lower_hex(seller));
        assert_eq!(missing["chain"]["method"], "eip3009");
        assert_eq!(
            missing["chain"]["block_hash"],
            lower_hex(second.block_hash.unwrap())
        );
        let made_up = &found[1];
        assert_eq!(made_up["difference"], "made_up_transfer", "{made_up}");
        assert_eq!(made_up["store"]["tx"], first_tx);
        assert_eq!(made_up["store"]["from"], lower_hex(seller));
        assert_eq!(made_up["store"]["to"], lower_hex(payer.address()));
        assert_eq!(made_up["store"]["amount"], "10000");
    }

    // An honestly filled store agrees with the chain.
    let honest = filled(kind, &chain, &token, &chain.endpoint()).await;
    let output = audit(dir.path(), &from_receipts, &honest.url, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", output_text(&output));
    assert!(differences(&output).is_empty());
    assert!(
        output_text(&output).contains("0 difference(s)"),
        "{}",
        output_text(&output)
    );

    // An audit reaches no further than what was committed and is final.
    let head = chain.block_number().await;
    let output = audit(
        dir.path(),
        &from_receipts,
        &honest.url,
        &["--to", &(head + 10).to_string()],
    );
    assert!(!output.status.success());
    assert!(
        output_text(&output).contains("the last block committed and final"),
        "{}",
        output_text(&output)
    );
}

on_both_stores!(
    an_audit_names_what_a_lying_provider_left_out_and_made_up,
    an_audit_names_what_a_lying_provider_left_out_and_made_up
);
