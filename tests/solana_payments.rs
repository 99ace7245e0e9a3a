//! x402 payments on a real local Solana validator (agave's test validator with the real
//! SPL Token and Token-2022 programs), read by the Solana worker and answered by the HTTP
//! API, on SQLite and on Postgres: `transfer` and `transferChecked` of both programs, one
//! made by a program through CPI, a failed one, memo-linked refunds, RPC faults and
//! interrupted backfills, and reviews of Solana payments.

use std::time::{Duration, Instant};

use alloy_primitives::U256;
use base64::Engine;
use paywatch_core::review::{DEFAULT_LAST_LINE, ReviewMessage, build_review, note_sha256};
use paywatch_core::state::EventKind;
use paywatch_grpc::proto::GetProofRequest;
use paywatch_grpc::proto::payments_client::PaymentsClient;
use paywatch_solana::SolanaWorker;
use paywatch_store::Store;
use paywatch_tests::harness::{ApiServer, SolanaLocal, issued_at, solana_worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::proxy::{Faults, RpcProxy, fault_seed};
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::validator::{TokenProgram, Validator, memo};
use serde_json::{Value, json};
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_signature::Signature;
use solana_signer::Signer;
use solana_transaction::versioned::VersionedTransaction;
use spl_associated_token_account_interface::instruction::recover_nested;

const DECIMALS: u8 = 6;

/// A validator with a seller (the watched pay_to wallet), a funded payer, and two mints:
/// one of SPL Token, one of Token-2022, both with accounts for both wallets.
struct Market {
    validator: Validator,
    /// Mint authority of both mints.
    authority: Keypair,
    seller: Keypair,
    payer: Keypair,
    usdc: Pubkey,
    token22: Pubkey,
    network_id: String,
}

impl Market {
    async fn open() -> Self {
        let validator = Validator::start().await;
        let market = validator
            .open_market(
                &[TokenProgram::Token, TokenProgram::Token2022],
                DECIMALS,
                1_000_000_000,
            )
            .await;
        let network_id = validator.network_id().await;
        Self {
            validator,
            authority: market.authority,
            seller: market.seller,
            payer: market.payer,
            usdc: market.mints[0],
            token22: market.mints[1],
            network_id,
        }
    }

    fn local(&self, rpc_url: &str) -> SolanaLocal {
        SolanaLocal {
            network_id: self.network_id.clone(),
            rpc_url: rpc_url.to_string(),
            mints: vec![
                (self.usdc.to_string(), DECIMALS),
                (self.token22.to_string(), DECIMALS),
            ],
            pay_to: vec![self.seller.pubkey().to_string()],
        }
    }

    /// `transferChecked` of `amount` of `mint` from the payer to the seller.
    async fn pay(&self, program: TokenProgram, mint: &Pubkey, amount: u64) -> Signature {
        let ix = program.transfer_checked(mint, &self.payer, &self.seller.pubkey(), amount, DECIMALS);
        self.validator.send(&[ix], &[&self.payer]).await
    }

    /// A payment made by a program: the Associated Token Account program's `RecoverNested`
    /// moves `amount` of USDC from a nested account (the USDC account owned by the seller's
    /// account of another mint) to the seller's USDC account with a `transferChecked` CPI.
    /// Returns the signature and the payer (the nested account's owner).
    async fn pay_through_cpi(&self, amount: u64) -> (Signature, Pubkey) {
        let v = &self.validator;
        let program = TokenProgram::Token;
        let other = v.create_mint(program, &self.authority, DECIMALS).await;
        let owner_account = v
            .create_ata(program, &self.authority, &self.seller.pubkey(), &other)
            .await;
        let nested = v
            .create_ata(program, &self.authority, &owner_account, &self.usdc)
            .await;
        v.mint_to(program, &self.authority, &self.usdc, &nested, amount)
            .await;
        let recover = recover_nested(&self.seller.pubkey(), &other, &self.usdc, &program.id());
        (v.send(&[recover], &[&self.seller]).await, owner_account)
    }

    fn path(&self, signature: &Signature) -> String {
        format!("/v1/payments/{}/{signature}", self.network_id)
    }
}

/// A fresh store with a Solana worker and the HTTP API on it, watching a market.
struct Watcher {
    _db: TestDb,
    store: Store,
    worker: SolanaWorker,
    api: ApiServer,
}

impl Market {
    /// Watches this market's seller through `rpc_url`, on a fresh store of `kind`.
    async fn watch(&self, kind: Kind, rpc_url: &str) -> Watcher {
        self.watch_with(kind, rpc_url, "").await
    }

    /// As [`Market::watch`], with `extra` keys in the network's table (parsed by the real
    /// configuration parser).
    async fn watch_with(&self, kind: Kind, rpc_url: &str, extra: &str) -> Watcher {
        let db = TestDb::create(kind).await;
        let store = db.open().await;
        let text = self.local(rpc_url).toml().replace(
            "poll_interval_ms = 200\n",
            &format!("poll_interval_ms = 200\n{extra}\n"),
        );
        let chains =
            paywatch_core::config::parse_chains(&text, "chains.toml", |_| None).expect("chains.toml");
        let worker = solana_worker(&chains, &store, 1000);
        let api = ApiServer::start(&store, &chains).await;
        Watcher {
            _db: db,
            store,
            worker,
            api,
        }
    }
}

/// Steps `worker` until `api` answers `state` for every one of `paths`.
async fn step_until(worker: &mut SolanaWorker, api: &ApiServer, paths: &[String], state: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        worker.step().await.expect("worker step");
        let mut all = true;
        for path in paths {
            let (status, body) = api.get(path).await;
            all &= status == 200 && body["payment_state"] == state;
        }
        if all {
            return;
        }
        assert!(Instant::now() < deadline, "{paths:?} never became {state}");
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
}

async fn transfers_are_pending_at_confirmed_and_paid_at_finalized(kind: Kind) {
    let market = Market::open().await;
    let v = &market.validator;
    let checked = market.pay(TokenProgram::Token, &market.usdc, 1_000_000).await;
    let plain = v
        .send(
            &[TokenProgram::Token.transfer(&market.usdc, &market.payer, &market.seller.pubkey(), 250_000)],
            &[&market.payer],
        )
        .await;
    let token22 = market.pay(TokenProgram::Token2022, &market.token22, 42).await;
    let (cpi, cpi_payer) = market.pay_through_cpi(777).await;
    let two_in_one = v
        .send(
            &[
                TokenProgram::Token.transfer_checked(
                    &market.usdc,
                    &market.payer,
                    &market.seller.pubkey(),
                    3,
                    DECIMALS,
                ),
                TokenProgram::Token.transfer_checked(
                    &market.usdc,
                    &market.payer,
                    &market.seller.pubkey(),
                    4,
                    DECIMALS,
                ),
            ],
            &[&market.payer],
        )
        .await;
    // More than the payer holds: lands on chain as a failed transaction.
    let failed = v
        .send_failing(
            &[TokenProgram::Token.transfer_checked(
                &market.usdc,
                &market.payer,
                &market.seller.pubkey(),
                5_000_000_000,
                DECIMALS,
            )],
            &[&market.payer],
        )
        .await;

    let Watcher {
        _db,
        store,
        mut worker,
        api,
    } = market.watch(kind, &v.rpc_url).await;

    // One step right after confirmation: seen, not final yet.
    let report = worker.step().await.expect("first step");
    let (status, body) = api.get(&market.path(&checked)).await;
    assert_eq!(status, 200, "{body}");
    if report.paid_slot < body["block_number"].as_u64().unwrap() {
        assert_eq!(body["payment_state"], "pending", "{body}");
    }

    let mut paths: Vec<String> = [checked, plain, token22, cpi]
        .iter()
        .map(|s| market.path(s))
        .collect();
    paths.push(format!("{}?index=0", market.path(&two_in_one)));
    paths.push(format!("{}?index=1", market.path(&two_in_one)));
    step_until(&mut worker, &api, &paths, "paid").await;

    let (_, body) = api.get(&market.path(&checked)).await;
    assert_eq!(body["network"], market.network_id);
    assert_eq!(body["payment"], checked.to_string());
    assert_eq!(body["payer"], market.payer.pubkey().to_string());
    assert_eq!(body["pay_to"], market.seller.pubkey().to_string());
    assert_eq!(body["asset"], market.usdc.to_string());
    assert_eq!(body["amount"], "1000000");
    assert_eq!(body["asset_decimals"], DECIMALS);
    assert!(
        body["block_hash"].as_str().is_some_and(|h| h.len() >= 32),
        "{body}"
    );

    let (_, body) = api.get(&market.path(&plain)).await;
    assert_eq!(
        (body["amount"].as_str(), body["asset"].as_str()),
        (Some("250000"), Some(market.usdc.to_string().as_str()))
    );
    let (_, body) = api.get(&market.path(&token22)).await;
    assert_eq!(
        (body["amount"].as_str(), body["asset"].as_str()),
        (Some("42"), Some(market.token22.to_string().as_str()))
    );
    let (_, body) = api.get(&market.path(&cpi)).await;
    assert_eq!(
        (
            body["payer"].as_str(),
            body["pay_to"].as_str(),
            body["amount"].as_str()
        ),
        (
            Some(cpi_payer.to_string().as_str()),
            Some(market.seller.pubkey().to_string().as_str()),
            Some("777")
        ),
        "a transferChecked inside a program's instruction: {body}"
    );
    let (_, first) = api.get(&paths[4]).await;
    let (_, second) = api.get(&paths[5]).await;
    assert_eq!(
        (first["amount"].as_str(), second["amount"].as_str()),
        (Some("3"), Some("4"))
    );
    let (status, body) = api.get(&market.path(&two_in_one)).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (409, Some("ambiguous_payment")),
        "two payments in one transaction need ?index=: {body}"
    );

    let (status, body) = api.get(&market.path(&failed)).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (404, Some("payment_not_found")),
        "a failed transaction never counts: {body}"
    );
    let (status, body) = api
        .get(&format!("/v1/payments/{}/not-a-signature", market.network_id))
        .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("malformed_payment")),
        "{body}"
    );

    let (transfers, _, payments) = store.row_counts(&market.network_id).await.unwrap();
    assert_eq!(
        (transfers, payments),
        (6, 6),
        "every transfer once, nothing from the failed one"
    );
    let (_, history) = api.get(&format!("{}/history", market.path(&checked))).await;
    let states: Vec<&str> = history["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["to_state"].as_str())
        .collect();
    assert_eq!(states.last(), Some(&"paid"), "{history}");
    // How far `paid` lagged the head in seconds: recorded with the head (the confirmed
    // slot's block time minus the finalized slot's), a few seconds on a local validator.
    let head = store
        .chain_head(&market.network_id)
        .await
        .unwrap()
        .expect("a head");
    let lag = head.paid_lag_secs.expect("the lag in seconds");
    assert!(lag < 120, "{lag} s");
}
on_both_stores!(
    pending_then_paid,
    transfers_are_pending_at_confirmed_and_paid_at_finalized
);

async fn a_memo_names_the_payment_a_refund_returns(kind: Kind) {
    let market = Market::open().await;
    let v = &market.validator;
    let first = market.pay(TokenProgram::Token, &market.usdc, 500_000).await;
    let second = market.pay(TokenProgram::Token, &market.usdc, 500_000).await;
    // The seller returns the second payment, naming it in a memo: without the memo the
    // matching rule would tie it to the first (earliest) payment.
    v.send(
        &[
            TokenProgram::Token.transfer_checked(
                &market.usdc,
                &market.seller,
                &market.payer.pubkey(),
                500_000,
                DECIMALS,
            ),
            memo(&second.to_string(), &market.seller),
        ],
        &[&market.seller],
    )
    .await;
    // A partial refund with no memo: the matching rule ties it to the first payment.
    v.send(
        &[TokenProgram::Token.transfer_checked(
            &market.usdc,
            &market.seller,
            &market.payer.pubkey(),
            100_000,
            DECIMALS,
        )],
        &[&market.seller],
    )
    .await;

    let Watcher {
        _db, mut worker, api, ..
    } = market.watch(kind, &v.rpc_url).await;
    step_until(&mut worker, &api, &[market.path(&second)], "refunded").await;
    step_until(&mut worker, &api, &[market.path(&first)], "partially_refunded").await;

    let (_, body) = api.get(&market.path(&second)).await;
    assert_eq!(body["refunds"][0]["rule"], "memo", "{body}");
    assert_eq!(body["refunded_amount"], "500000");
    let (_, body) = api.get(&market.path(&first)).await;
    assert_eq!(body["refunds"][0]["rule"], "matching", "{body}");
    assert_eq!(body["refunded_amount"], "100000");
}
on_both_stores!(memo_refunds, a_memo_names_the_payment_a_refund_returns);

/// With `keep_transfers = "pay_to"` a Solana seller keeps every transfer out of its
/// wallet — here a payment to a supplier — beside its payments and refunds, and lists them
/// with `GET /v1/transfers`; without it the same chain keeps only the payment's transfer
/// and the refund.
async fn a_solana_seller_keeps_all_its_transfers(kind: Kind) {
    let market = Market::open().await;
    let v = &market.validator;
    let supplier = Keypair::new();
    v.create_ata(
        TokenProgram::Token,
        &market.authority,
        &supplier.pubkey(),
        &market.usdc,
    )
    .await;
    let paid = market.pay(TokenProgram::Token, &market.usdc, 300_000).await;
    let out = |to: Pubkey, amount: u64| {
        TokenProgram::Token.transfer_checked(&market.usdc, &market.seller, &to, amount, DECIMALS)
    };
    v.send(&[out(supplier.pubkey(), 55_000)], &[&market.seller]).await;
    v.send(&[out(market.payer.pubkey(), 200_000)], &[&market.seller])
        .await;

    let listed = |page: &Value| -> Vec<(String, String, String, String)> {
        page["transfers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let text = |key: &str| t[key].as_str().unwrap_or_default().to_string();
                (text("role"), text("from"), text("to"), text("amount"))
            })
            .collect()
    };
    let (seller, payer) = (
        market.seller.pubkey().to_string(),
        market.payer.pubkey().to_string(),
    );
    let payment = (
        "payment".to_string(),
        payer.clone(),
        seller.clone(),
        "300000".to_string(),
    );
    let refund = (
        "refund".to_string(),
        seller.clone(),
        payer.clone(),
        "200000".to_string(),
    );
    let transfers = format!("/v1/transfers?network={}", market.network_id);

    let Watcher {
        _db, mut worker, api, ..
    } = market.watch(kind, &v.rpc_url).await;
    step_until(&mut worker, &api, &[market.path(&paid)], "partially_refunded").await;
    let (status, page) = api.get(&transfers).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        listed(&page),
        [payment.clone(), refund.clone()],
        "the default keeps only these: {page}"
    );

    let Watcher {
        _db, mut worker, api, ..
    } = market
        .watch_with(kind, &v.rpc_url, "keep_transfers = \"pay_to\"")
        .await;
    step_until(&mut worker, &api, &[market.path(&paid)], "partially_refunded").await;
    let (status, page) = api.get(&transfers).await;
    assert_eq!(status, 200, "{page}");
    let to_supplier = (
        "other".to_string(),
        seller.clone(),
        supplier.pubkey().to_string(),
        "55000".to_string(),
    );
    assert_eq!(listed(&page), [payment, to_supplier, refund], "{page}");
    assert_eq!(
        page["transfers"][2]["payment"],
        paid.to_string(),
        "the refund names its payment"
    );
}
on_both_stores!(solana_kept_transfers, a_solana_seller_keeps_all_its_transfers);

/// The signed transaction inside an evidence answer (`getTransaction` in base64), with the
/// check of every signature on its message (ed25519).
fn signed_transaction(evidence: &Value) -> VersionedTransaction {
    let encoded = &evidence["transaction"]["transaction"];
    assert_eq!(encoded[1], "base64", "{evidence}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded[0].as_str().expect("base64 text"))
        .expect("base64");
    let tx: VersionedTransaction = bincode::deserialize(&bytes).expect("a signed transaction");
    let message = tx.message.serialize();
    for (signature, signer) in tx.signatures.iter().zip(tx.message.static_account_keys()) {
        let key = ed25519_dalek::VerifyingKey::from_bytes(&signer.to_bytes()).expect("a signer key");
        key.verify_strict(
            &message,
            &ed25519_dalek::Signature::from_bytes(signature.as_array()),
        )
        .expect("each signature signs the message");
    }
    tx
}

/// A Solana payment has no receipt trie to prove it: its evidence is the node's finalized
/// `getTransaction` answer, which paywatch checks and serves alike over HTTP and gRPC —
/// not while the payment is pending, and `/proof` points to it. The signed transaction in
/// it is the payer's (its signatures check), and its balances move the amount.
async fn a_final_solana_payment_has_its_transaction_as_evidence(kind: Kind) {
    let market = Market::open().await;
    let paid = market.pay(TokenProgram::Token, &market.usdc, 3_000).await;
    let Watcher {
        _db, mut worker, api, ..
    } = market.watch(kind, &market.validator.rpc_url).await;
    let evidence_path = format!("{}/evidence", market.path(&paid));
    // Right after confirmation the payment is pending (unless the cluster finalized its
    // slot before the step read): no evidence yet.
    let report = worker.step().await.expect("first step");
    let (status, body) = api.get(&market.path(&paid)).await;
    assert_eq!(status, 200, "{body}");
    if report.paid_slot < body["block_number"].as_u64().unwrap() {
        assert_eq!(body["payment_state"], "pending", "{body}");
        let (status, refused) = api.get(&evidence_path).await;
        assert_eq!(
            (status, &refused["reason"]),
            (409, &json!("proof_unavailable")),
            "{refused}"
        );
        assert!(
            refused["message"].as_str().unwrap().contains("pending"),
            "{refused}"
        );
    }

    step_until(&mut worker, &api, &[market.path(&paid)], "paid").await;
    let (_, payment) = api.get(&market.path(&paid)).await;
    let (status, evidence) = api.get(&evidence_path).await;
    assert_eq!(status, 200, "{evidence}");
    assert_eq!(evidence["evidence"], "node_attested_transaction");
    assert_eq!(evidence["payment"], paid.to_string());
    assert_eq!(evidence["method"], "spl");
    assert_eq!(evidence["payment_state"], "paid");
    assert_eq!(evidence["slot"], payment["block_number"], "{evidence}");
    assert_eq!(evidence["block_hash"], payment["block_hash"], "{evidence}");
    assert_eq!(evidence["confirmation_status"], "finalized");
    assert!(evidence["finalized_slot"].as_u64().unwrap() >= evidence["slot"].as_u64().unwrap());
    let answer = &evidence["transaction"];
    assert_eq!(answer["slot"], evidence["slot"], "{evidence}");
    assert_eq!(answer["meta"]["err"], Value::Null, "{evidence}");

    let tx = signed_transaction(&evidence);
    assert_eq!(
        tx.signatures[0], paid,
        "the transaction's id is its first signature"
    );
    assert!(
        tx.message.static_account_keys().contains(&market.payer.pubkey()),
        "the payer signed it"
    );
    let seller_balance = |balances: &Value| -> u64 {
        balances
            .as_array()
            .unwrap()
            .iter()
            .find(|b| {
                b["owner"] == market.seller.pubkey().to_string() && b["mint"] == market.usdc.to_string()
            })
            .map_or(0, |b| {
                b["uiTokenAmount"]["amount"].as_str().unwrap().parse().unwrap()
            })
    };
    let meta = &answer["meta"];
    assert_eq!(
        seller_balance(&meta["postTokenBalances"]) - seller_balance(&meta["preTokenBalances"]),
        3_000,
        "the seller's USDC balance moved by the amount: {meta}"
    );

    // gRPC serves the same evidence.
    let mut client = PaymentsClient::connect(api.grpc_url.clone())
        .await
        .expect("connect");
    let served = client
        .get_evidence(GetProofRequest {
            network: market.network_id.clone(),
            payment: paid.to_string(),
            index: None,
        })
        .await
        .expect("GetEvidence")
        .into_inner();
    assert_eq!(served.evidence, "node_attested_transaction");
    assert_eq!(served.slot, evidence["slot"].as_u64().unwrap());
    assert_eq!(served.block_hash, evidence["block_hash"]);
    assert_eq!(
        serde_json::from_str::<Value>(&served.transaction_json).expect("JSON"),
        *answer,
        "the node's finalized answer does not change"
    );

    // No receipt proof on Solana: `/proof` says so and points to the evidence.
    let (status, body) = api.get(&format!("{}/proof", market.path(&paid))).await;
    assert_eq!(
        (status, &body["reason"]),
        (409, &json!("proof_unavailable")),
        "{body}"
    );
    assert!(body["message"].as_str().unwrap().contains("/evidence"), "{body}");
    // An unknown payment has no evidence.
    let (status, body) = api
        .get(&format!(
            "/v1/payments/{}/{}/evidence",
            market.network_id,
            Signature::default()
        ))
        .await;
    assert_eq!(
        (status, &body["reason"]),
        (404, &json!("payment_not_found")),
        "{body}"
    );
}
on_both_stores!(
    solana_evidence,
    a_final_solana_payment_has_its_transaction_as_evidence
);

/// `finality = "confirmed"`: a payment is `paid` at the first step after its transaction
/// is confirmed, while the cluster has not finalized its slot.
async fn paid_at_confirmed_when_the_network_says_so(kind: Kind) {
    let market = Market::open().await;
    let paid = market.pay(TokenProgram::Token, &market.usdc, 1_000).await;
    let Watcher {
        _db, mut worker, api, ..
    } = market
        .watch_with(kind, &market.validator.rpc_url, "finality = \"confirmed\"")
        .await;
    let report = worker.step().await.expect("first step");
    let (status, body) = api.get(&market.path(&paid)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["payment_state"], "paid", "{body}");
    let slot = body["block_number"].as_u64().unwrap();
    assert!(
        report.paid_slot >= slot,
        "the confirmed slot {} covers the payment's {slot}",
        report.paid_slot
    );
    let finalized = market
        .validator
        .client
        .get_slot_with_commitment(solana_commitment_config::CommitmentConfig::finalized())
        .await
        .unwrap();
    eprintln!("payment slot {slot}, finalized slot {finalized} when checked");
}
on_both_stores!(paid_at_confirmed, paid_at_confirmed_when_the_network_says_so);

/// `commitment = "finalized"`: a payment is read only once final, so it is never seen
/// `pending`: absent, then `paid`.
async fn read_at_finalized_never_pending(kind: Kind) {
    let market = Market::open().await;
    let paid = market.pay(TokenProgram::Token, &market.usdc, 2_000).await;
    let Watcher {
        _db, mut worker, api, ..
    } = market
        .watch_with(kind, &market.validator.rpc_url, "commitment = \"finalized\"")
        .await;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut absent_steps = 0;
    loop {
        worker.step().await.expect("worker step");
        let (status, body) = api.get(&market.path(&paid)).await;
        if status == 200 {
            assert_eq!(body["payment_state"], "paid", "never pending: {body}");
            break;
        }
        assert_eq!(status, 404, "{body}");
        absent_steps += 1;
        assert!(Instant::now() < deadline, "never read");
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    eprintln!("absent for {absent_steps} steps, then paid");
}
on_both_stores!(read_at_finalized, read_at_finalized_never_pending);

/// x402's exact scheme on Solana puts a Memo in every payment transaction (the seller's
/// `extra.memo`, or a random nonce): each payment carries its transaction's memo in
/// lookups, listings (`memo=` filters), CSV and the event stream.
async fn a_payment_carries_its_transactions_memo(kind: Kind) {
    let market = Market::open().await;
    let v = &market.validator;
    let program = TokenProgram::Token;
    let (payer, usdc, seller) = (&market.payer, &market.usdc, market.seller.pubkey());
    let pay_with_memo = |amount: u64, text: &str| {
        let instructions = [
            program.transfer_checked(usdc, payer, &seller, amount, DECIMALS),
            memo(text, payer),
        ];
        async move { v.send(&instructions, &[payer]).await }
    };
    let order_a = pay_with_memo(1_000, "order-1234").await;
    let order_b = pay_with_memo(2_000, "order 5678 — café").await;
    let plain = market.pay(program, &market.usdc, 3_000).await;

    let Watcher {
        _db,
        store,
        mut worker,
        api,
    } = market.watch(kind, &v.rpc_url).await;
    let paths: Vec<String> = [order_a, order_b, plain].iter().map(|s| market.path(s)).collect();
    step_until(&mut worker, &api, &paths, "paid").await;

    for (path, memo) in paths
        .iter()
        .zip([json!("order-1234"), json!("order 5678 — café"), Value::Null])
    {
        let (_, body) = api.get(path).await;
        assert_eq!(body["memo"], memo, "{body}");
    }
    let network = &market.network_id;
    let listing = |query: String| {
        let api = &api;
        async move {
            let (status, page) = api.get(&format!("/v1/payments?network={network}{query}")).await;
            assert_eq!(status, 200, "{page}");
            page["payments"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p["payment"].as_str().unwrap().to_string(), p["memo"].clone()))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        listing("&memo=order-1234".to_string()).await,
        vec![(order_a.to_string(), json!("order-1234"))]
    );
    let encoded: String = url::form_urlencoded::byte_serialize("order 5678 — café".as_bytes()).collect();
    assert_eq!(
        listing(format!("&memo={encoded}")).await,
        vec![(order_b.to_string(), json!("order 5678 — café"))]
    );
    assert!(listing("&memo=order-0000".to_string()).await.is_empty());

    let response = reqwest::Client::new()
        .get(format!(
            "{}/v1/payments?network={}&memo=order-1234",
            api.base_url, market.network_id
        ))
        .header("accept", "text/csv")
        .send()
        .await
        .unwrap();
    let csv = response.text().await.unwrap();
    let mut lines = csv.lines();
    assert!(
        lines.next().unwrap().ends_with(
            ",payment_state,memo,facilitator,method,fee_amount,captured_amount,held_amount,released_amount"
        ),
        "{csv}"
    );
    let row = lines.next().unwrap();
    assert!(
        row.starts_with(&format!("{},{order_a},", market.network_id)),
        "{csv}"
    );
    assert!(
        row.ends_with(&format!(",paid,order-1234,{},spl,,,,", market.payer.pubkey())),
        "{csv}"
    );

    let events = store
        .events_after(0, Some(&market.network_id), &[EventKind::PaymentState], 100)
        .await
        .unwrap();
    let memo_of = |signature: &Signature| {
        events
            .iter()
            .filter(|e| e.payment_id == signature.to_string())
            .map(|e| e.memo.clone())
            .collect::<Vec<_>>()
    };
    assert!(!memo_of(&order_a).is_empty());
    assert!(
        memo_of(&order_a)
            .iter()
            .all(|m| m.as_deref() == Some("order-1234"))
    );
    assert!(memo_of(&plain).iter().all(Option::is_none));
}
on_both_stores!(payment_memos, a_payment_carries_its_transactions_memo);

/// Token-2022 transfer fees: a mint withholding 1 % (at most 5,000) in the destination.
/// A `transferCheckedWithFee` states its fee; a plain `transferChecked` of the same mint has
/// the fee withheld all the same, unstated. Either way the payment's `amount` is what the
/// seller received — checked against the seller's balance on the chain — and `fee_amount`
/// the fee withheld, in lookups, listings (JSON and CSV) and gRPC.
async fn a_transfer_fee_is_answered_beside_what_the_seller_received(kind: Kind) {
    let market = Market::open().await;
    let v = &market.validator;
    let program = TokenProgram::Token2022;
    let mint = v.create_fee_mint(&market.authority, DECIMALS, 100, 5_000).await;
    let payer_account = v
        .create_ata(program, &market.authority, &market.payer.pubkey(), &mint)
        .await;
    let seller_account = v
        .create_ata(program, &market.authority, &market.seller.pubkey(), &mint)
        .await;
    v.mint_to(program, &market.authority, &mint, &payer_account, 10_000_000)
        .await;
    let stated = v
        .send(
            &[program.transfer_checked_with_fee(
                &mint,
                &market.payer,
                &market.seller.pubkey(),
                10_000,
                DECIMALS,
                100,
            )],
            &[&market.payer],
        )
        .await;
    let unstated = market.pay(program, &mint, 20_000).await;
    // Over the cap: 1 % of 800,000 is 8,000, the mint withholds at most 5,000.
    let capped = market.pay(program, &mint, 800_000).await;
    assert_eq!(
        v.token_balance(&seller_account).await,
        9_900 + 19_800 + 795_000,
        "the chain withholds the fees in the seller's account"
    );

    let mut local = market.local(&market.validator.rpc_url);
    local.mints.push((mint.to_string(), DECIMALS));
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = local.chains();
    let mut worker = solana_worker(&chains, &store, 1000);
    let api = ApiServer::start(&store, &chains).await;
    let paths: Vec<String> = [&stated, &unstated, &capped]
        .iter()
        .map(|s| market.path(s))
        .collect();
    step_until(&mut worker, &api, &paths, "paid").await;
    for (path, amount, fee) in [
        (&paths[0], "9900", "100"),
        (&paths[1], "19800", "200"),
        (&paths[2], "795000", "5000"),
    ] {
        let (status, body) = api.get(path).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["amount"], amount, "{body}");
        assert_eq!(body["fee_amount"], fee, "{body}");
        assert_eq!(body["asset"], mint.to_string(), "{body}");
    }
    let (status, page) = api
        .get(&format!(
            "/v1/payments?network={}&asset={mint}",
            market.network_id
        ))
        .await;
    assert_eq!(status, 200, "{page}");
    let fees: Vec<&str> = page["payments"]
        .as_array()
        .expect("payments")
        .iter()
        .filter_map(|p| p["fee_amount"].as_str())
        .collect();
    assert_eq!(fees, ["100", "200", "5000"], "{page}");
    let csv = reqwest::Client::new()
        .get(format!(
            "{}/v1/payments?network={}&asset={mint}",
            api.base_url, market.network_id
        ))
        .header("accept", "text/csv")
        .send()
        .await
        .expect("CSV")
        .text()
        .await
        .expect("CSV body");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{csv}");
    assert!(rows[0].ends_with(",spl,100,,,"), "{csv}");
    let mut client = PaymentsClient::connect(api.grpc_url.clone()).await.expect("gRPC");
    let payment = client
        .get_payment(paywatch_grpc::proto::GetPaymentRequest {
            network: market.network_id.clone(),
            payment: capped.to_string(),
            ..Default::default()
        })
        .await
        .expect("GetPayment")
        .into_inner();
    assert_eq!(
        (payment.amount.as_str(), payment.fee_amount.as_deref()),
        ("795000", Some("5000"))
    );
    // A mint without a transfer fee answers no fee.
    let plain = market.pay(TokenProgram::Token, &market.usdc, 1_000).await;
    step_until(&mut worker, &api, &[market.path(&plain)], "paid").await;
    let (_, body) = api.get(&market.path(&plain)).await;
    assert!(body.get("fee_amount").is_none(), "{body}");
}
on_both_stores!(
    transfer_fees,
    a_transfer_fee_is_answered_beside_what_the_seller_received
);

/// A review provider does not know every seller: with `facilitators`, every watched-mint
/// transfer in a transaction whose fee a listed facilitator paid is a payment, whoever the
/// seller. A payment to an unwatched seller whose fee the payer paid is not indexed.
async fn a_facilitators_settlements_are_payments_whoever_the_seller(kind: Kind) {
    let market = Market::open().await;
    let v = &market.validator;
    let program = TokenProgram::Token;
    let facilitator = v.funded_wallet(1_000_000_000).await;
    let stranger = Keypair::new();
    v.create_ata(program, &market.authority, &stranger.pubkey(), &market.usdc)
        .await;
    let to_stranger = |amount: u64| {
        program.transfer_checked(&market.usdc, &market.payer, &stranger.pubkey(), amount, DECIMALS)
    };
    // The facilitator signs first: it pays the fee.
    let settled = v
        .send(&[to_stranger(4_000)], &[&facilitator, &market.payer])
        .await;
    let direct = v.send(&[to_stranger(5_000)], &[&market.payer]).await;
    let to_seller = market.pay(program, &market.usdc, 6_000).await;

    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let text = market.local(&v.rpc_url).toml().replacen(
        "\nstart_block = 0\n",
        &format!(
            "\nfacilitators = [\"{}\"]\nstart_block = 0\n",
            facilitator.pubkey()
        ),
        1,
    );
    let chains = paywatch_core::config::parse_chains(&text, "test chains.toml", |_| None).unwrap();
    let mut worker = solana_worker(&chains, &store, 1000);
    let api = ApiServer::start(&store, &chains).await;
    step_until(
        &mut worker,
        &api,
        &[market.path(&settled), market.path(&to_seller)],
        "paid",
    )
    .await;

    let (_, body) = api.get(&market.path(&settled)).await;
    assert_eq!(
        (&body["pay_to"], &body["amount"], &body["facilitator"]),
        (
            &json!(stranger.pubkey().to_string()),
            &json!("4000"),
            &json!(facilitator.pubkey().to_string())
        ),
        "{body}"
    );
    let (status, body) = api.get(&market.path(&direct)).await;
    assert_eq!(
        (status, &body["reason"]),
        (404, &json!("payment_not_found")),
        "{body}"
    );
    let (_, body) = api.get(&market.path(&to_seller)).await;
    assert_eq!(
        body["facilitator"],
        market.payer.pubkey().to_string(),
        "the fee payer"
    );

    let network = &market.network_id;
    let (_, page) = api
        .get(&format!(
            "/v1/payments?network={network}&facilitator={}",
            facilitator.pubkey()
        ))
        .await;
    let listed: Vec<&str> = page["payments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["payment"].as_str().unwrap())
        .collect();
    assert_eq!(listed, vec![settled.to_string()], "{page}");
    let (_, totals) = api
        .get(&format!("/v1/totals?network={network}&group_by=facilitator"))
        .await;
    let facilitator_key = facilitator.pubkey().to_string();
    assert!(
        totals["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["key"] == facilitator_key.as_str() && g["final_amount"] == "4000"),
        "{totals}"
    );
}
on_both_stores!(
    facilitator_settlements,
    a_facilitators_settlements_are_payments_whoever_the_seller
);

/// Payments are numbered by their transfer instruction's position in the transaction: a
/// wallet and a mint added later, on the same store, find the transaction's other
/// payments under their own numbers and leave the stored one as it was.
async fn a_wallet_or_mint_added_later_never_renumbers_a_payment(kind: Kind) {
    let market = Market::open().await;
    let v = &market.validator;
    let other_seller = Keypair::new();
    v.create_ata(
        TokenProgram::Token,
        &market.authority,
        &other_seller.pubkey(),
        &market.usdc,
    )
    .await;
    let pay = |program: TokenProgram, mint: &Pubkey, to: &Pubkey, amount: u64| {
        program.transfer_checked(mint, &market.payer, to, amount, DECIMALS)
    };
    // Instruction 0 pays the other seller, 1 the seller in Token-2022, 2 the seller in USDC.
    let batch = v
        .send(
            &[
                pay(TokenProgram::Token, &market.usdc, &other_seller.pubkey(), 100),
                pay(
                    TokenProgram::Token2022,
                    &market.token22,
                    &market.seller.pubkey(),
                    300,
                ),
                pay(TokenProgram::Token, &market.usdc, &market.seller.pubkey(), 200),
            ],
            &[&market.payer],
        )
        .await;
    let at = |index: u32| format!("{}?index={index}", market.path(&batch));

    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let first = SolanaLocal {
        mints: vec![(market.usdc.to_string(), DECIMALS)],
        ..market.local(&v.rpc_url)
    }
    .chains();
    let mut worker = solana_worker(&first, &store, 1000);
    let api = ApiServer::start(&store, &first).await;
    step_until(&mut worker, &api, &[market.path(&batch)], "paid").await;
    let (_, only) = api.get(&market.path(&batch)).await;
    assert_eq!(only["index_in_tx"], 2, "{only}");
    assert_eq!(only["amount"], "200");
    let history_before = store
        .history_of(&market.network_id, &batch.to_string(), 2)
        .await
        .unwrap();
    drop(api);

    let seller = market.seller.pubkey().to_string();
    let other = other_seller.pubkey().to_string();
    let mut wider = market.local(&v.rpc_url);
    wider.pay_to.push(other.clone());
    let wider = wider.chains();
    let mut worker = solana_worker(&wider, &store, 1000);
    let api = ApiServer::start(&store, &wider).await;
    step_until(&mut worker, &api, &[at(0), at(1), at(2)], "paid").await;
    let expected = [
        (0, &other, "100", market.usdc.to_string()),
        (1, &seller, "300", market.token22.to_string()),
        (2, &seller, "200", market.usdc.to_string()),
    ];
    for (index, pay_to, amount, asset) in expected {
        let (_, body) = api.get(&at(index)).await;
        assert_eq!(body["index_in_tx"], index, "{body}");
        assert_eq!(body["pay_to"], *pay_to, "{body}");
        assert_eq!(body["amount"], amount, "{body}");
        assert_eq!(body["asset"], asset, "{body}");
    }
    let (status, body) = api.get(&market.path(&batch)).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("one of 0, 1, 2"),
        "{body}"
    );
    let history = store
        .history_of(&market.network_id, &batch.to_string(), 2)
        .await
        .unwrap();
    assert_eq!(
        history, history_before,
        "the stored payment's history was not rewritten"
    );
}
on_both_stores!(
    numbering_is_the_chains,
    a_wallet_or_mint_added_later_never_renumbers_a_payment
);

async fn interrupted_backfills_page_through_every_signature_once(kind: Kind) {
    let market = Market::open().await;
    let blockhash = market
        .validator
        .client
        .get_latest_blockhash()
        .await
        .expect("getLatestBlockhash");
    let mut signatures = Vec::new();
    for amount in 1..=23 {
        let ix = TokenProgram::Token.transfer_checked(
            &market.usdc,
            &market.payer,
            &market.seller.pubkey(),
            amount,
            DECIMALS,
        );
        signatures.push(
            market
                .validator
                .send_unconfirmed(&[ix], &[&market.payer], blockhash)
                .await,
        );
    }
    market.validator.wait_confirmed(&signatures).await;
    // About one request in 12 each: 429, 502, a stall past the timeout (2 s in these
    // tests), an answer cut mid-JSON, a connection dropped mid-answer.
    let proxy = RpcProxy::start(
        &market.validator.rpc_url,
        Faults::all(fault_seed(), 0.08, Duration::from_secs(3)),
    )
    .await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = market.local(&proxy.url).chains();
    let api = ApiServer::start(&store, &chains).await;

    // Pages of 4 signatures; each worker is abandoned mid-step (a crash before its commit
    // or between chunk commits), and a new one resumes from the store.
    for cut_ms in [150u64, 400, 900, 1_700, 2_600] {
        let mut worker = solana_worker(&chains, &store, 4);
        let _ = tokio::time::timeout(Duration::from_millis(cut_ms), worker.step()).await;
    }
    let mut worker = solana_worker(&chains, &store, 4);
    let paths: Vec<String> = signatures.iter().map(|s| market.path(s)).collect();
    step_until(&mut worker, &api, &paths, "paid").await;
    // Keep the worker polling until each kind of fault has struck.
    proxy
        .drive_until_every_fault(async || {
            let _ = worker.step().await;
        })
        .await;

    let (transfers, _, payments) = store.row_counts(&market.network_id).await.unwrap();
    assert_eq!(
        (transfers, payments),
        (23, 23),
        "no signature skipped or counted twice"
    );
    for (amount, path) in (1..=23).zip(&paths) {
        let (_, body) = api.get(path).await;
        assert_eq!(body["amount"], amount.to_string(), "{body}");
        let (_, history) = api.get(&format!("{path}/history")).await;
        let paid = history["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["to_state"] == "paid")
            .count();
        assert_eq!(paid, 1, "paid exactly once: {history}");
    }
}
on_both_stores!(
    interrupted_backfill,
    interrupted_backfills_page_through_every_signature_once
);

async fn a_review_of_a_solana_payment_passes_the_six_checks(kind: Kind) {
    let market = Market::open().await;
    let paid = market.pay(TokenProgram::Token, &market.usdc, 2_500_000).await;
    let Watcher {
        _db, mut worker, api, ..
    } = market.watch(kind, &market.validator.rpc_url).await;
    step_until(&mut worker, &api, &[market.path(&paid)], "paid").await;

    let note = "Fast and exactly as described.";
    let review = ReviewMessage {
        provider: "reviews.example".to_string(),
        network: market.network_id.parse().unwrap(),
        payment: paid.to_string(),
        payer: market.payer.pubkey().to_string(),
        pay_to: market.seller.pubkey().to_string(),
        amount: U256::from(2_500_000u64),
        asset: market.usdc.to_string(),
        stars: 5,
        note_sha256: note_sha256(note),
        issued_at: issued_at(-60),
    };
    let message = build_review(&review, DEFAULT_LAST_LINE);
    let verify = |signer: &Keypair, amount: u64| {
        let fields = ReviewMessage {
            amount: U256::from(amount),
            ..review.clone()
        };
        let text = build_review(&fields, DEFAULT_LAST_LINE);
        let body = serde_json::json!({
            "message": text,
            "signature": signer.sign_message(text.as_bytes()).to_string(),
            "note": note,
            "provider_host": "reviews.example",
        });
        let api = &api;
        async move { api.post("/v1/reviews/verify", &body).await }
    };
    let (status, answer) = verify(&market.payer, 2_500_000).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (answer["valid"].as_bool(), answer["payment_state"].as_str()),
        (Some(true), Some("paid")),
        "{answer}"
    );
    assert!(message.starts_with("x402 review v1\n"));

    // Signed by someone else (the seller): Ed25519 over the same bytes fails.
    let (_, answer) = verify(&market.seller, 2_500_000).await;
    assert_eq!(answer["valid"], false);
    assert_eq!(
        answer["checks"][3]["reasons"][0], "v1_signature_invalid",
        "{answer}"
    );
    // A review claiming another amount than moved on chain.
    let (_, answer) = verify(&market.payer, 2_500_001).await;
    assert_eq!(answer["valid"], false);
    assert!(answer.to_string().contains("v1_amount_mismatch"), "{answer}");

    // A batch settlement: one transaction, two payers paying the seller. Each payer's
    // review names its own facts, which pick its payment; one review per payment.
    let v = &market.validator;
    let second = Keypair::new();
    let second_account = v
        .create_ata(
            TokenProgram::Token,
            &market.authority,
            &second.pubkey(),
            &market.usdc,
        )
        .await;
    v.mint_to(
        TokenProgram::Token,
        &market.authority,
        &market.usdc,
        &second_account,
        5_000,
    )
    .await;
    let seller = market.seller.pubkey();
    let program = TokenProgram::Token;
    let batch = v
        .send(
            &[
                program.transfer_checked(&market.usdc, &market.payer, &seller, 1_000, DECIMALS),
                program.transfer_checked(&market.usdc, &second, &seller, 2_000, DECIMALS),
            ],
            &[&market.payer, &second],
        )
        .await;
    let at = |index: u32| format!("{}?index={index}", market.path(&batch));
    step_until(&mut worker, &api, &[at(0), at(1)], "paid").await;
    let review_of = |signer: &Keypair, amount: u64| {
        let fields = ReviewMessage {
            payment: batch.to_string(),
            payer: signer.pubkey().to_string(),
            amount: U256::from(amount),
            ..review.clone()
        };
        let text = build_review(&fields, DEFAULT_LAST_LINE);
        let body = serde_json::json!({
            "message": text,
            "signature": signer.sign_message(text.as_bytes()).to_string(),
            "note": note,
            "provider_host": "reviews.example",
            "record": true,
        });
        let api = &api;
        async move {
            let (status, answer) = api.post("/v1/reviews/verify", &body).await;
            assert_eq!(status, 200, "{answer}");
            answer
        }
    };
    for (signer, amount) in [(&market.payer, 1_000), (&second, 2_000)] {
        let answer = review_of(signer, amount).await;
        assert_eq!(answer["valid"], true, "{answer}");
    }
    let again = review_of(&second, 2_000).await;
    assert_eq!(again["valid"], false, "{again}");
    assert_eq!(again["checks"][5]["reasons"][0], "v1_duplicate_review", "{again}");
    assert!(
        again["checks"][5]["detail"].as_str().unwrap().contains("#1"),
        "{again}"
    );
    // The first payer claiming the second payer's amount matches neither payment.
    let mixed = review_of(&market.payer, 2_000).await;
    assert_eq!(mixed["valid"], false, "{mixed}");
    assert_eq!(mixed["checks"][2]["reasons"][0], "v1_amount_mismatch", "{mixed}");

    // Published: each payer's review of the batch under its own payment's number, with
    // its wallet and signature verbatim (base58).
    let reviews = format!("/v1/reviews/{}/{batch}", market.network_id);
    let (status, body) = api.get(&reviews).await;
    assert_eq!(
        (status, &body["reason"]),
        (409, &serde_json::json!("ambiguous_payment")),
        "{body}"
    );
    let (status, second_review) = api.get(&format!("{reviews}?index=1")).await;
    assert_eq!(status, 200, "{second_review}");
    assert_eq!(second_review["wallet"], second.pubkey().to_string());
    assert_eq!(second_review["payment_state"], "paid");
    assert!(
        second_review["message"]
            .as_str()
            .unwrap()
            .contains("amount: 2000\n")
    );
    let (status, listed) = api
        .get(&format!("/v1/reviews?network={}", market.network_id))
        .await;
    assert_eq!(status, 200, "{listed}");
    let wallets: Vec<&str> = listed["reviews"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["wallet"].as_str().unwrap())
        .collect();
    let (first_payer, second_payer) = (market.payer.pubkey().to_string(), second.pubkey().to_string());
    assert!(
        wallets.contains(&first_payer.as_str()) && wallets.contains(&second_payer.as_str()),
        "{listed}"
    );
    // With ?proof=true a Solana review carries its transaction's evidence (no trie
    // commits to it, so no receipt proof).
    let (status, with_evidence) = api.get(&format!("{reviews}?index=1&proof=true")).await;
    assert_eq!(status, 200, "{with_evidence}");
    let evidence = &with_evidence["evidence"];
    assert_eq!(
        evidence["evidence"], "node_attested_transaction",
        "{with_evidence}"
    );
    assert_eq!(evidence["payment"], batch.to_string(), "{with_evidence}");
    assert_eq!(evidence["index_in_tx"], 1, "{with_evidence}");
    assert_eq!(evidence["confirmation_status"], "finalized", "{with_evidence}");
    assert!(with_evidence.get("proof").is_none(), "{with_evidence}");
}
on_both_stores!(solana_reviews, a_review_of_a_solana_payment_passes_the_six_checks);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_refuses_another_cluster() {
    let validator = Validator::start().await;
    let db = TestDb::create(Kind::Sqlite).await;
    let store = db.open().await;
    let local = SolanaLocal {
        network_id: "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp".to_string(),
        rpc_url: validator.rpc_url.clone(),
        mints: vec![("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v".to_string(), 6)],
        pay_to: vec![Keypair::new().pubkey().to_string()],
    };
    let worker = solana_worker(&local.chains(), &store, 1000);
    let error = tokio::time::timeout(Duration::from_secs(60), worker.run(Default::default()))
        .await
        .expect("the worker stops at once")
        .expect_err("mainnet's id against a local validator");
    assert!(error.to_string().contains("genesis hash"), "{error}");
}
