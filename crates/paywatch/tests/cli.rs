//! The `paywatch` binary itself: `run` against a real anvil node on SQLite, the HTTP
//! lookup, `lookup` on the command line, graceful shutdown on SIGTERM, and refusals of
//! bad configuration; and `run` against a real local Solana validator.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use alloy::primitives::B256;
use paywatch_core::ids::lower_hex;
use paywatch_grpc::proto::GetPaymentRequest;
use paywatch_grpc::proto::payments_client::PaymentsClient;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, SolanaLocal, issued_at};
use paywatch_tests::token::Token;
use paywatch_tests::tools::{free_port, output_text};
use paywatch_tests::validator::{TokenMarket, TokenProgram, Validator};
use solana_signer::Signer;

fn paywatch(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_paywatch"));
    command
        .current_dir(dir)
        .args(args)
        .env("RUST_LOG", "info")
        .env("PAYWATCH_GRPC_LISTEN", "127.0.0.1:0")
        .env_remove("PAYWATCH_DATABASE_URL")
        .env_remove("PAYWATCH_CHAINS");
    command
}

/// Polls the lookup at `url` until it answers `paid`, and returns that answer.
async fn wait_until_paid(url: &str, within: Duration) -> serde_json::Value {
    let deadline = Instant::now() + within;
    loop {
        assert!(
            Instant::now() < deadline,
            "{url} did not answer paid within {within:?}"
        );
        if let Ok(response) = reqwest::get(url).await
            && response.status() == 200
        {
            let body: serde_json::Value = response.json().await.unwrap();
            if body["payment_state"] == "paid" {
                return body;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_lookups_and_stops_gracefully() {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    token.mint(chain.account(1), 1_000_000).await;
    let receipt = token
        .pay(
            &chain.signer(1),
            chain.account(2),
            12_345,
            B256::repeat_byte(9),
            chain.account(3),
        )
        .await;
    chain.mine(1).await;

    let dir = tempfile::tempdir().unwrap();
    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let grpc_listen = format!("127.0.0.1:{}", free_port());
    let child = paywatch(
        dir.path(),
        &["run", "--listen", &listen, "--grpc-listen", &grpc_listen],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();

    let url = format!(
        "http://{listen}/v1/payments/local/{}",
        lower_hex(receipt.transaction_hash)
    );
    let body = wait_until_paid(&url, Duration::from_secs(60)).await;
    assert_eq!(body["payer"], lower_hex(chain.account(1)));
    assert_eq!(body["pay_to"], lower_hex(chain.account(2)));
    assert_eq!(body["amount"], "12345");
    let metrics = reqwest::get(format!("http://{listen}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("paywatch_head_lag_blocks{network=\"eip155:31337\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("paywatch_rows_ingested_total"), "{metrics}");
    assert!(
        metrics.contains("paywatch_paid_lag_seconds{network=\"eip155:31337\"}"),
        "{metrics}"
    );

    // The gRPC API of the same process answers the same payment.
    let mut grpc = PaymentsClient::connect(format!("http://{grpc_listen}"))
        .await
        .expect("connect to the gRPC API");
    let payment = grpc
        .get_payment(GetPaymentRequest {
            network: "eip155:31337".into(),
            payment: lower_hex(receipt.transaction_hash),
            ..Default::default()
        })
        .await
        .expect("GetPayment")
        .into_inner();
    assert_eq!(payment.amount, "12345");
    assert_eq!(payment.payment_state, body["payment_state"].as_str().unwrap());

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        output.status.success(),
        "exit after SIGTERM: {}",
        output_text(&output)
    );
    assert!(
        output_text(&output).contains("paywatch stopped"),
        "{}",
        output_text(&output)
    );

    // The CLI lookup reads the same store and prints the same answer.
    let lookup = paywatch(
        dir.path(),
        &["lookup", "eip155:31337", &lower_hex(receipt.transaction_hash)],
    )
    .output()
    .unwrap();
    assert!(lookup.status.success(), "{}", output_text(&lookup));
    let printed: serde_json::Value = serde_json::from_slice(&lookup.stdout).unwrap();
    assert_eq!(printed["amount"], "12345");
    assert_eq!(printed["payment_state"], "paid");
    assert_eq!(printed["block_number"], body["block_number"]);

    // And answers by authorization: the payer's nonce 0x0909… was used by this payment.
    let by_authorization = paywatch(
        dir.path(),
        &[
            "lookup",
            "local",
            "--authorization",
            &lower_hex(token.address),
            &lower_hex(chain.account(1)),
            &lower_hex(B256::repeat_byte(9)),
        ],
    )
    .output()
    .unwrap();
    assert!(
        by_authorization.status.success(),
        "{}",
        output_text(&by_authorization)
    );
    let printed: serde_json::Value = serde_json::from_slice(&by_authorization.stdout).unwrap();
    assert_eq!(printed["status"], "indexed");
    assert_eq!(printed["payment"]["payment"], lower_hex(receipt.transaction_hash));

    let bad = paywatch(dir.path(), &["lookup", "local", "0x1234"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", output_text(&bad));
    let printed: serde_json::Value = serde_json::from_slice(&bad.stdout).unwrap();
    assert_eq!(printed["reason"], "malformed_payment");
}

/// A new user's path on Solana: a pay_to wallet in chains.toml, `paywatch run`, and the
/// payment looked up by its signature, over HTTP and on the command line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_reads_solana_payments_by_signature() {
    let validator = Validator::start().await;
    let program = TokenProgram::Token;
    let TokenMarket {
        seller, payer, mints, ..
    } = validator.open_market(&[program], 6, 5_000_000).await;
    let mint = mints[0];
    let transfer = program.transfer_checked(&mint, &payer, &seller.pubkey(), 1_250_000, 6);
    let signature = validator.send(&[transfer], &[&payer]).await.to_string();

    let dir = tempfile::tempdir().unwrap();
    let local = SolanaLocal {
        network_id: validator.network_id().await,
        rpc_url: validator.rpc_url.clone(),
        mints: vec![(mint.to_string(), 6)],
        pay_to: vec![seller.pubkey().to_string()],
    };
    std::fs::write(dir.path().join("chains.toml"), local.toml()).unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let child = paywatch(dir.path(), &["run", "--listen", &listen])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let url = format!("http://{listen}/v1/payments/local-solana/{signature}");
    let body = wait_until_paid(&url, Duration::from_secs(120)).await;
    assert_eq!(body["network"], local.network_id);
    assert_eq!(body["payer"], payer.pubkey().to_string());
    assert_eq!(body["pay_to"], seller.pubkey().to_string());
    assert_eq!(body["amount"], "1250000");
    assert_eq!(body["asset"], mint.to_string());

    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        output.status.success(),
        "exit after SIGTERM: {}",
        output_text(&output)
    );

    let lookup = paywatch(dir.path(), &["lookup", &local.network_id, &signature])
        .output()
        .unwrap();
    assert!(lookup.status.success(), "{}", output_text(&lookup));
    let printed: serde_json::Value = serde_json::from_slice(&lookup.stdout).unwrap();
    assert_eq!(
        (printed["amount"].as_str(), printed["payment_state"].as_str()),
        (Some("1250000"), Some("paid"))
    );
    // A signature spelled in another case is another (malformed) signature.
    let bad = paywatch(dir.path(), &["lookup", "local-solana", &signature.to_lowercase()])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", output_text(&bad));

    // No receipt proof on Solana: `proof show` prints the transaction's evidence, which
    // `proof verify` recognizes and will not call proven (exit 3).
    let shown = paywatch(dir.path(), &["proof", "show", "local-solana", &signature])
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", output_text(&shown));
    let evidence: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(evidence["evidence"], "node_attested_transaction", "{evidence}");
    assert_eq!(evidence["payment"], signature);
    assert_eq!(evidence["transaction"]["meta"]["err"], serde_json::Value::Null);
    let file = dir.path().join("evidence.json");
    std::fs::write(&file, &shown.stdout).unwrap();
    let verified = paywatch(
        dir.path(),
        &[
            "proof",
            "verify",
            file.to_str().unwrap(),
            "--block-hash",
            &format!("0x{}", "00".repeat(32)),
        ],
    )
    .output()
    .unwrap();
    assert_eq!(verified.status.code(), Some(3), "{}", output_text(&verified));
    let verdict: serde_json::Value = serde_json::from_slice(&verified.stdout).unwrap();
    assert_eq!(verdict["valid"], false, "{verdict}");
    assert!(
        verdict["detail"].as_str().unwrap().contains("not a proof"),
        "{verdict}"
    );
}

#[test]
fn bad_configuration_is_refused_with_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("chains.toml"),
        "[networks.\"eip155:31337\"]\nrpc_urls = [\"http://127.0.0.1:1\"]\n\n[[networks.\"eip155:31337\".tokens]]\naddress = \"0xnot-an-address\"\ndecimals = 6\n",
    )
    .unwrap();
    let output = paywatch(dir.path(), &["run"]).output().unwrap();
    assert!(!output.status.success());
    let message = output_text(&output);
    assert!(
        message.contains("chains.toml: networks.\"eip155:31337\".tokens[0].address"),
        "{message}"
    );

    let missing = paywatch(dir.path(), &["--chains", "nope.toml", "run"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(
        output_text(&missing).contains("nope.toml"),
        "{}",
        output_text(&missing)
    );

    let bad_store = paywatch(dir.path(), &["--database-url", "mysql://x", "migrate"])
        .output()
        .unwrap();
    assert!(!bad_store.status.success());
    assert!(
        output_text(&bad_store).contains("unsupported store URL"),
        "{}",
        output_text(&bad_store)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_an_rpc_of_another_chain() {
    let chain = Chain::start().await;
    let dir = tempfile::tempdir().unwrap();
    let network = LocalNetwork::new(
        8453,
        &chain.endpoint(),
        &[alloy::primitives::Address::repeat_byte(1)],
    );
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let output = paywatch(dir.path(), &["run", "--listen", &listen])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        output_text(&output).contains("serves chain id 31337, not 8453"),
        "{}",
        output_text(&output)
    );
}

/// A token address with no contract on the RPC's chain (another network's address), a
/// contract that is no ERC-20 token, and a wrong `decimals` are each refused at start,
/// naming the network, the token and the key to fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_a_token_that_is_not_on_this_chain() {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let dir = tempfile::tempdir().unwrap();
    let refusal = |toml: String| {
        std::fs::write(dir.path().join("chains.toml"), toml).unwrap();
        let output = paywatch(dir.path(), &["backfill", "--network", "local"])
            .output()
            .unwrap();
        assert!(!output.status.success(), "{}", output_text(&output));
        output_text(&output)
    };
    let elsewhere = alloy::primitives::Address::repeat_byte(1);
    let text = refusal(LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[elsewhere]).toml());
    assert!(
        text.contains(
            "eip155:31337: token USDC 0x0101010101010101010101010101010101010101: no contract at this address"
        ) && text.contains("fix tokens[].address"),
        "{text}"
    );
    // A contract wallet factory: a contract, but no token.
    let not_a_token = paywatch_tests::wallet::WalletFactory::deploy(&chain)
        .await
        .address;
    let text = refusal(LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[not_a_token]).toml());
    assert!(text.contains("does not answer ERC-20's decimals()"), "{text}");
    let wrong_decimals = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address])
        .toml()
        .replace("decimals = 6", "decimals = 18");
    let text = refusal(wrong_decimals);
    assert!(
        text.contains("the contract has 6 decimals, chains.toml says 18; fix tokens[].decimals"),
        "{text}"
    );
    // The token signs in the domain ("USD Coin", "2"): Base Sepolia's name for USDC is not it.
    let with_domain = |name: &str| {
        LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address])
            .toml()
            .replace(
                "decimals = 6",
                &format!("decimals = 6\neip712_name = \"{name}\"\neip712_version = \"2\""),
            )
    };
    let text = refusal(with_domain("USDC"));
    assert!(
        text.contains(&format!(
            "eip155:31337: token USDC {}: its DOMAIN_SEPARATOR() is",
            lower_hex(token.address)
        )) && text
            .contains("not that of EIP712Domain(name \"USDC\", version \"2\", this chain, this address)")
            && text.contains("fix tokens[].eip712_name / eip712_version"),
        "{text}"
    );
    std::fs::write(dir.path().join("chains.toml"), with_domain("USD Coin")).unwrap();
    let output = paywatch(dir.path(), &["backfill", "--network", "local"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
}

#[test]
fn intent_nonce_prints_the_commitment() {
    let dir = tempfile::tempdir().unwrap();
    let salt = format!("0x{}", "07".repeat(32));
    let nonce_for = |method: &str, url: &str| {
        paywatch(
            dir.path(),
            &[
                "intent",
                "nonce",
                "--method",
                method,
                "--url",
                url,
                "--class",
                "market-data",
                "--max-atomic",
                "20000",
                "--network",
                "base-sepolia",
                "--asset",
                "0x036cbd53842c5426634e7929541ec2318f3dcf7e",
                "--pay-to",
                "0x209693bc6afc0c5328ba36faf03c514ef312287c",
                "--salt",
                &salt,
            ],
        )
        .output()
        .unwrap()
    };
    let output = nonce_for("get", "https://api.example.com/premium-data");
    assert!(output.status.success(), "{}", output_text(&output));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // The same vector as the core unit test, computed independently with js-sha3.
    assert_eq!(
        printed["nonce"],
        "0xe021482586cad6d308377b4621baf8f5d5c90886ca79c806df00f7b4484e0522"
    );
    assert!(
        printed["canonical_intent"]
            .as_str()
            .unwrap()
            .starts_with("x402-intent/1\nmethod: GET\n")
    );
    // Permit2's uint256 nonce and the auth-capture salt are the same 32 bytes, in decimal.
    let decimal = "101376881973239643556810023423300324127761910061652250666518382623239172916514";
    assert_eq!(printed["permit2_nonce"], decimal);
    assert_eq!(printed["auth_capture_salt"], decimal);
    assert!(printed.get("auth_capture_salt_nonce").is_none());

    let bad = nonce_for("GET", "ftp://x/");
    assert!(!bad.status.success());
    assert!(
        output_text(&bad).contains("http or https"),
        "{}",
        output_text(&bad)
    );
}

#[tokio::test]
async fn review_verify_offline_checks_format_signature_and_note_and_says_what_it_did_not() {
    use alloy::signers::Signer;
    use paywatch_core::review::{DEFAULT_LAST_LINE, ReviewMessage, build_review, note_sha256};

    let dir = tempfile::tempdir().unwrap();
    let network = LocalNetwork::new(
        31337,
        "http://127.0.0.1:1",
        &[alloy::primitives::Address::repeat_byte(1)],
    );
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();
    let payer = alloy::signers::local::PrivateKeySigner::from_bytes(&B256::repeat_byte(0x21)).unwrap();
    let note = "Fast and correct.";
    let review = ReviewMessage {
        provider: "reviews.example".to_string(),
        network: "eip155:8453".parse().unwrap(),
        payment: format!("0x{}", "ab".repeat(32)),
        payer: lower_hex(payer.address()),
        pay_to: format!("0x{}", "cd".repeat(20)),
        amount: alloy::primitives::U256::from(10_000u64),
        asset: "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913".to_string(),
        stars: 5,
        note_sha256: note_sha256(note),
        issued_at: issued_at(-60),
    };
    let message = build_review(&review, DEFAULT_LAST_LINE);
    let signature = format!(
        "0x{}",
        alloy::hex::encode(payer.sign_message(message.as_bytes()).await.unwrap().as_bytes())
    );
    std::fs::write(dir.path().join("message.txt"), &message).unwrap();
    std::fs::write(dir.path().join("note.txt"), note).unwrap();
    std::fs::write(dir.path().join("other-note.txt"), "Slow.").unwrap();
    let run = |note_file: &str, signature: &str| {
        paywatch(
            dir.path(),
            &[
                "review",
                "verify",
                "--offline",
                "--message",
                "message.txt",
                "--signature",
                signature,
                "--note",
                note_file,
                "--provider-host",
                "reviews.example",
            ],
        )
        .output()
        .unwrap()
    };

    // Everything that can be checked offline passes, but the payment and uniqueness
    // checks need the index: not valid, not invalid, and its own exit code.
    let good = run("note.txt", &signature);
    assert_eq!(good.status.code(), Some(3), "{}", output_text(&good));
    let answer: serde_json::Value = serde_json::from_slice(&good.stdout).unwrap();
    assert!(answer["valid"].is_null(), "{answer}");
    assert_eq!(answer["not_run"], serde_json::json!(["payment", "unique"]));
    assert!(
        answer["checks"][2]["ok"].is_null(),
        "the payment check needs the index"
    );

    let bad_note = run("other-note.txt", &signature);
    assert_eq!(bad_note.status.code(), Some(1));
    assert!(
        output_text(&bad_note).contains("v1_note_mismatch"),
        "{}",
        output_text(&bad_note)
    );

    let upper = signature.to_uppercase().replacen("0X", "0x", 1);
    let bad_signature = run("note.txt", &upper);
    assert_eq!(bad_signature.status.code(), Some(1));
    assert!(
        output_text(&bad_signature).contains("signature_uppercase_hex"),
        "{}",
        output_text(&bad_signature)
    );
}

/// `review template` prints, for a payment in the index, the exact message its payer
/// signs (the facts from the chain, the note's hash, the configured last line), and that
/// message passes `review verify --offline` once signed; recorded with `review verify
/// --record`, `review show` publishes it verbatim with the payment's state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_template_prints_the_message_to_sign_for_an_indexed_payment() {
    use alloy::signers::Signer;
    use paywatch_core::review::{DEFAULT_LAST_LINE, ReviewMessage, build_review, note_sha256};
    use paywatch_tests::harness::{sync, worker};
    use paywatch_tests::stores::{Kind, TestDb};

    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    token.mint(chain.account(1), 1_000_000).await;
    let payer = chain.signer(1);
    let receipt = token
        .pay(
            &payer,
            chain.account(2),
            12_345,
            B256::repeat_byte(0x77),
            chain.account(3),
        )
        .await;
    chain.mine(3).await;
    let db = TestDb::create(Kind::Sqlite).await;
    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    let store = db.open().await;
    sync(&mut worker(&network.chains(), &store).await).await;
    store.close().await;

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();
    let note = "Quick, and the data was right.";
    std::fs::write(dir.path().join("note.txt"), note).unwrap();
    let payment = lower_hex(receipt.transaction_hash);
    // `review template` for `payment`, with `extra` arguments.
    let template = |payment: &str, extra: &[&str]| {
        let mut args = vec![
            "--database-url",
            &db.url,
            "review",
            "template",
            "--network",
            "local",
            "--payment",
            payment,
            "--provider-host",
            "reviews.example",
            "--stars",
            "4",
            "--note",
            "note.txt",
        ];
        args.extend_from_slice(extra);
        paywatch(dir.path(), &args).output().unwrap()
    };
    let printed = template(&payment, &["--issued-at", &issued_at(-30)]);
    assert!(printed.status.success(), "{}", output_text(&printed));
    let message = String::from_utf8(printed.stdout).unwrap();
    let expected = ReviewMessage {
        provider: "reviews.example".to_string(),
        network: format!("eip155:{}", chain.chain_id()).parse().unwrap(),
        payment: payment.clone(),
        payer: lower_hex(payer.address()),
        pay_to: lower_hex(chain.account(2)),
        amount: alloy::primitives::U256::from(12_345u64),
        asset: lower_hex(token.address),
        stars: 4,
        note_sha256: note_sha256(note),
        issued_at: message
            .lines()
            .find_map(|l| l.strip_prefix("issued_at: "))
            .unwrap()
            .to_string(),
    };
    assert_eq!(message, build_review(&expected, DEFAULT_LAST_LINE));

    std::fs::write(dir.path().join("message.txt"), &message).unwrap();
    let signature = format!(
        "0x{}",
        alloy::hex::encode(payer.sign_message(message.as_bytes()).await.unwrap().as_bytes())
    );
    let verify = paywatch(
        dir.path(),
        &[
            "review",
            "verify",
            "--offline",
            "--message",
            "message.txt",
            "--signature",
            &signature,
            "--note",
            "note.txt",
            "--provider-host",
            "reviews.example",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(verify.status.code(), Some(3), "{}", output_text(&verify));

    // Recorded against the index, then published by `review show` as the HTTP read side.
    let review_args = |verb: &'static str| {
        let mut args = vec!["--database-url", db.url.as_str(), "review", verb];
        if verb == "verify" {
            args.extend([
                "--record",
                "--message",
                "message.txt",
                "--signature",
                signature.as_str(),
                "--note",
                "note.txt",
                "--provider-host",
                "reviews.example",
            ]);
        } else {
            args.extend(["local", payment.as_str()]);
        }
        paywatch(dir.path(), &args).output().unwrap()
    };
    let recorded = review_args("verify");
    assert_eq!(recorded.status.code(), Some(0), "{}", output_text(&recorded));
    let shown = review_args("show");
    assert!(shown.status.success(), "{}", output_text(&shown));
    let published: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(published["message"], message, "the message, verbatim");
    assert_eq!(published["signature"], signature);
    assert_eq!(published["wallet"], lower_hex(payer.address()));
    assert_eq!(published["payment_state"], "paid");

    let missing = template(&format!("0x{}", "ab".repeat(32)), &[]);
    assert!(!missing.status.success());
    assert!(
        output_text(&missing).contains("payment_not_found"),
        "{}",
        output_text(&missing)
    );
}
