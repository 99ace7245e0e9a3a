//! Audits as a user runs them, on both stores: a store filled through a provider whose
//! `eth_getLogs` left one payment out and made a refund up (receipts stay true).
//! `paywatch audit` reads it from the blocks' receipts, and again with an honest verifier:
//! both name the missing payment and the made-up transfer with what the chain and the
//! store hold, exit 4 and are recorded. A store filled honestly audits clean (exit 0). A
//! refund the provider left out is named too.
//! `paywatch run` with `audit_interval_secs` finds the same two on its schedule (WARN
//! lines, metric, `status`), then audits only blocks committed after its last audit, also
//! after a restart. With `verification = "lagging"`, lookups answer `verified: false` until
//! the schedule has audited a payment's block, and for good where it found a difference —
//! until `paywatch audit --repair` mends it. A repair of every lie an audit names leaves
//! the store as an honest run fills it.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use alloy::primitives::{Address, B256};
use alloy::rpc::types::TransactionReceipt;
use paywatch_core::ids::lower_hex;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::proxy::{Faults, LogLies, RpcProxy};
use paywatch_tests::sse::EventClient;
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;
use paywatch_tests::tools::{free_port, output_text, paywatch_on, wait_serving};
use serde_json::Value;

/// `paywatch` with `args` on the store at `database_url`, in `dir` (its chains.toml).
fn paywatch(dir: &Path, database_url: &str, args: &[&str]) -> Command {
    paywatch_on(env!("CARGO_BIN_EXE_paywatch"), dir, database_url, args)
}

/// `paywatch audit` of the network `network` describes, on the store at `database_url`.
fn audit(dir: &Path, network: &LocalNetwork, database_url: &str, extra: &[&str]) -> Output {
    std::fs::write(dir.join("chains.toml"), network.toml()).unwrap();
    paywatch(dir, database_url, &["audit", "--network", "local"])
        .args(extra)
        .output()
        .unwrap()
}

/// The local network's line of `paywatch status --json`.
fn status(dir: &Path, database_url: &str) -> Value {
    let output = paywatch(dir, database_url, &["status", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    let status: Value = serde_json::from_slice(&output.stdout).unwrap();
    status["networks"][0].clone()
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

/// A chain with two payments, a provider whose `eth_getLogs` leaves the second out and
/// makes a refund of the first up (its receipts stay true), and a store filled through it.
struct Fooled {
    chain: Chain,
    token: Token,
    liar: RpcProxy,
    db: TestDb,
    payer: Address,
    other_payer: Address,
    seller: Address,
    first: TransactionReceipt,
    second: TransactionReceipt,
}

impl Fooled {
    async fn start(kind: Kind) -> Self {
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
        let liar = RpcProxy::start(
            &chain.endpoint(),
            Faults {
                log_lies: LogLies {
                    omit_transactions: vec![lower_hex(second.transaction_hash)],
                    invent_refunds_in: vec![lower_hex(first.transaction_hash)],
                    ..LogLies::default()
                },
                ..Faults::default()
            },
        )
        .await;
        let db = filled(kind, &chain, &token, &liar.url).await;
        Self {
            payer: payer.address(),
            other_payer: other_payer.address(),
            seller,
            chain,
            token,
            liar,
            db,
            first,
            second,
        }
    }

    /// The network as read through the lying provider.
    fn network(&self) -> LocalNetwork {
        LocalNetwork::new(self.chain.chain_id(), &self.liar.url, &[self.token.address])
    }

    /// Asserts that `found` names exactly the left-out payment and the made-up refund,
    /// with the chain's and the store's facts.
    fn assert_found(&self, found: &[Value]) {
        assert_eq!(found.len(), 2, "{found:?}");
        let missing = &found[0];
        assert_eq!(missing["difference"], "missing_payment", "{missing}");
        assert_eq!(
            missing["chain"]["payment_id"],
            lower_hex(self.second.transaction_hash)
        );
        assert_eq!(missing["chain"]["amount"], "20000");
        assert_eq!(missing["chain"]["payer"], lower_hex(self.other_payer));
        assert_eq!(missing["chain"]["pay_to"], lower_hex(self.seller));
        assert_eq!(missing["chain"]["method"], "eip3009");
        assert_eq!(
            missing["chain"]["block_hash"],
            lower_hex(self.second.block_hash.unwrap())
        );
        let made_up = &found[1];
        assert_eq!(made_up["difference"], "made_up_transfer", "{made_up}");
        assert_eq!(made_up["store"]["tx"], lower_hex(self.first.transaction_hash));
        assert_eq!(made_up["store"]["from"], lower_hex(self.seller));
        assert_eq!(made_up["store"]["to"], lower_hex(self.payer));
        assert_eq!(made_up["store"]["amount"], "10000");
    }
}

async fn an_audit_names_what_a_lying_provider_left_out_and_made_up(kind: Kind) {
    let fooled = Fooled::start(kind).await;
    let chain = &fooled.chain;
    let dir = tempfile::tempdir().unwrap();

    // From the receipts, through the same lying provider; then with an honest verifier.
    let from_receipts = fooled.network();
    let mut with_verifier = from_receipts.clone();
    with_verifier.verify_rpc_url = Some(chain.endpoint());
    for (network, source, stored_source) in [
        (&from_receipts, "every block's receipts", "receipts"),
        (&with_verifier, "the verifier", "verifier"),
    ] {
        let output = audit(dir.path(), network, &fooled.db.url, &[]);
        assert_eq!(output.status.code(), Some(4), "{}", output_text(&output));
        assert!(
            output_text(&output).contains(&format!("against {source}"))
                && output_text(&output).contains("2 difference(s)"),
            "{}",
            output_text(&output)
        );
        fooled.assert_found(&differences(&output));
        let recorded = &status(dir.path(), &fooled.db.url)["last_audit"];
        assert_eq!(recorded["differences"], 2, "{recorded}");
        assert_eq!(recorded["source"], stored_source, "{recorded}");
        assert_eq!(recorded["scheduled"], false, "{recorded}");
    }

    // An honestly filled store agrees with the chain.
    let honest = filled(kind, chain, &fooled.token, &chain.endpoint()).await;
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

/// A refund a provider left out: the store lacks the transfer back, so its payment stays
/// `paid`. An audit names that transfer (`missing_transfer`), but not a transfer back made
/// before the payment, which ingestion never keeps; an honestly filled store audits clean.
async fn an_audit_names_a_refund_a_provider_left_out(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let (payer, seller) = (chain.signer(1), chain.account(2));
    token.mint(payer.address(), 1_000_000).await;
    token.mint(seller, 1_000).await;
    let before_payment = token.transfer(seller, payer.address(), 500).await;
    let paid = token
        .pay(&payer, seller, 10_000, B256::repeat_byte(1), chain.account(3))
        .await;
    let refund = token.transfer(seller, payer.address(), 4_000).await;
    assert!(before_payment.block_number < paid.block_number && paid.block_number < refund.block_number);
    chain.mine(3).await;
    let liar = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            log_lies: LogLies {
                omit_transactions: vec![lower_hex(refund.transaction_hash)],
                ..LogLies::default()
            },
            ..Faults::default()
        },
    )
    .await;
    let fooled = filled(kind, &chain, &token, &liar.url).await;
    let dir = tempfile::tempdir().unwrap();
    let network = LocalNetwork::new(chain.chain_id(), &liar.url, &[token.address]);

    let output = audit(dir.path(), &network, &fooled.url, &[]);
    assert_eq!(output.status.code(), Some(4), "{}", output_text(&output));
    let found = differences(&output);
    assert_eq!(found.len(), 1, "{found:?}");
    let missing = &found[0];
    assert_eq!(missing["difference"], "missing_transfer", "{missing}");
    assert_eq!(missing["chain"]["tx"], lower_hex(refund.transaction_hash));
    assert_eq!(missing["chain"]["from"], lower_hex(seller));
    assert_eq!(missing["chain"]["to"], lower_hex(payer.address()));
    assert_eq!(missing["chain"]["amount"], "4000");
    assert_eq!(missing["chain"]["block_number"], refund.block_number.unwrap());

    let honest = filled(kind, &chain, &token, &chain.endpoint()).await;
    let output = audit(dir.path(), &network, &honest.url, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", output_text(&output));
}

on_both_stores!(
    an_audit_names_a_refund_a_provider_left_out,
    an_audit_names_a_refund_a_provider_left_out
);

/// `paywatch audit --repair` on a store filled through a provider that told every lie an
/// audit names: a payment left out (and the refund of it that followed, which ingestion
/// then had no payment for), a refund left out, a refund made up, a payment's amount
/// doubled, and a second settlement made up in a real transaction. The repair ends with
/// every payment, refunded sum and state an honest run stores (the made-up payment
/// `dropped`, cause `refuted`; the doubled one `corrected`), the same transfers kept, the
/// audit recorded as repaired — also when the repair is done in two runs, as after an
/// interruption; a further audit and repair find nothing. On
/// Postgres the repair takes the worker's lease and is refused while another process
/// holds it.
async fn a_repair_makes_the_store_what_an_honest_run_stores(kind: Kind) {
    use paywatch_core::listing::PaymentFilter;
    use paywatch_tests::stores::payment_facts;
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let (first_payer, second_payer, third_payer) = (chain.signer(1), chain.signer(4), chain.signer(5));
    let (seller, facilitator) = (chain.account(2), chain.account(3));
    for payer in [&first_payer, &second_payer, &third_payer] {
        token.mint(payer.address(), 1_000_000).await;
    }
    let first = token
        .pay(&first_payer, seller, 10_000, B256::repeat_byte(1), facilitator)
        .await;
    let left_out = token
        .pay(&second_payer, seller, 20_000, B256::repeat_byte(2), facilitator)
        .await;
    let refund_of_left_out = token.transfer(seller, second_payer.address(), 5_000).await;
    let doubled = token
        .pay(&third_payer, seller, 30_000, B256::repeat_byte(3), facilitator)
        .await;
    let doubled_again = token
        .pay(&first_payer, seller, 7_000, B256::repeat_byte(4), facilitator)
        .await;
    let left_out_refund = token.transfer(seller, first_payer.address(), 3_000).await;
    chain.mine(3).await;
    let hex = |r: &TransactionReceipt| lower_hex(r.transaction_hash);
    let liar = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            log_lies: LogLies {
                omit_transactions: vec![hex(&left_out), hex(&left_out_refund)],
                invent_refunds_in: vec![hex(&first)],
                double_amounts_in: vec![hex(&doubled)],
                invent_payments_in: vec![hex(&doubled_again)],
                ..LogLies::default()
            },
            ..Faults::default()
        },
    )
    .await;
    let fooled = filled(kind, &chain, &token, &liar.url).await;
    let honest = filled(kind, &chain, &token, &chain.endpoint()).await;
    let network = LocalNetwork::new(chain.chain_id(), &liar.url, &[token.address]);
    let id = network.chains().networks[0].id.clone();
    let (fooled_store, honest_store) = (fooled.open().await, honest.open().await);
    let live = |facts: Vec<paywatch_tests::stores::PaymentFacts>| -> Vec<_> {
        facts.into_iter().filter(|p| p.state != "dropped").collect()
    };
    let honest_facts = payment_facts(&honest_store, &PaymentFilter::of(id.clone())).await;
    assert_eq!(honest_facts.len(), 4, "{honest_facts:?}");
    assert_ne!(
        live(payment_facts(&fooled_store, &PaymentFilter::of(id.clone())).await),
        honest_facts,
        "the liar fooled the store"
    );
    let dir = tempfile::tempdir().unwrap();

    if kind == Kind::Postgres {
        let job = format!("worker:{id}");
        assert!(
            fooled_store
                .acquire_lease(&job, "other-host:1", Duration::from_secs(60))
                .await
                .unwrap()
        );
        let output = audit(dir.path(), &network, &fooled.url, &["--repair"]);
        assert!(!output.status.success());
        assert!(
            output_text(&output).contains("another paywatch process holds the lease"),
            "{}",
            output_text(&output)
        );
        fooled_store.release_lease(&job, "other-host:1").await.unwrap();
    }

    // Repaired in two runs, as after an interruption: up to the block before the doubled
    // payment, then everything (the first part is found repaired).
    let mut found = Vec::new();
    let mut repaired = 0;
    let part = (doubled.block_number.unwrap() - 1).to_string();
    for extra in [&["--repair", "--to", part.as_str()][..], &["--repair"][..]] {
        let output = audit(dir.path(), &network, &fooled.url, extra);
        assert_eq!(output.status.code(), Some(4), "{}", output_text(&output));
        let this_run = differences(&output);
        repaired = this_run.len();
        assert!(
            output_text(&output).contains(&format!("{repaired} difference(s), {repaired} repaired")),
            "{}",
            output_text(&output)
        );
        found.extend(this_run);
    }
    let kinds: Vec<&str> = found.iter().map(|d| d["difference"].as_str().unwrap()).collect();
    for expected in [
        "missing_payment",
        "made_up_payment",
        "differing_payment",
        "made_up_transfer",
        "differing_transfer",
        "missing_transfer",
    ] {
        assert_eq!(
            kinds.iter().filter(|k| **k == expected).count(),
            if expected == "made_up_transfer" { 2 } else { 1 },
            "{expected} in {found:?}"
        );
    }
    assert_eq!(found.len(), 7, "{found:?}");

    // Every live payment, refunded sum and state as the honest run stores them; the same
    // transfers kept.
    let after = payment_facts(&fooled_store, &PaymentFilter::of(id.clone())).await;
    assert_eq!(live(after.clone()), honest_facts);
    let of = |tx: &TransactionReceipt| {
        honest_facts
            .iter()
            .find(|p| p.payment_id == hex(tx))
            .unwrap()
            .clone()
    };
    assert_eq!(of(&left_out).state, "partially_refunded", "{honest_facts:?}");
    assert_eq!(of(&left_out).refunded_amount, "5000");
    // The refund the liar left out goes, by the matching rule, to the first payment.
    assert_eq!(of(&first).refunded_amount, "3000");
    let name = id.to_string();
    let transfers = |counts: (u64, u64, u64)| counts.0;
    assert_eq!(
        transfers(fooled_store.row_counts(&name).await.unwrap()),
        transfers(honest_store.row_counts(&name).await.unwrap())
    );
    let causes = |history: Vec<paywatch_store::HistoryEntry>| -> Vec<String> {
        history
            .into_iter()
            .map(|h| format!("{}>{}", h.cause, h.to_state))
            .collect()
    };
    let made_up = after
        .iter()
        .find(|p| p.payment_id == hex(&doubled_again) && p.index_in_tx == 1)
        .unwrap_or_else(|| panic!("the made-up payment: {after:?}"));
    assert_eq!(made_up.state, "dropped");
    assert_eq!(
        causes(
            fooled_store
                .history_of(&name, &hex(&doubled_again), 1)
                .await
                .unwrap()
        ),
        ["seen_final>paid", "refuted>dropped"]
    );
    assert_eq!(
        causes(fooled_store.history_of(&name, &hex(&doubled), 0).await.unwrap()),
        ["seen_final>paid", "corrected>paid"]
    );
    assert_eq!(
        causes(fooled_store.history_of(&name, &hex(&first), 0).await.unwrap()),
        // The first run took the made-up refund back, the second tied the left-out one.
        [
            "seen_final>paid",
            "refund>refunded",
            "refuted>paid",
            "refund>partially_refunded"
        ]
    );
    assert_eq!(
        causes(fooled_store.history_of(&name, &hex(&left_out), 0).await.unwrap()),
        ["seen_final>paid", "refund>partially_refunded"]
    );
    let recorded = &status(dir.path(), &fooled.url)["last_audit"];
    assert_eq!(recorded["differences"], repaired, "{recorded}");
    assert_eq!(recorded["repaired"], repaired, "{recorded}");

    // Nothing is left to find or to repair.
    for extra in [&[][..], &["--repair"][..]] {
        let output = audit(dir.path(), &network, &fooled.url, extra);
        assert_eq!(output.status.code(), Some(0), "{}", output_text(&output));
        assert!(differences(&output).is_empty());
    }
    assert_eq!(
        payment_facts(&fooled_store, &PaymentFilter::of(id.clone())).await,
        after
    );
    assert!(
        refund_of_left_out.block_number < doubled.block_number
            && left_out.block_number < refund_of_left_out.block_number
    );
    fooled_store.close().await;
    honest_store.close().await;
}

on_both_stores!(
    a_repair_makes_the_store_what_an_honest_run_stores,
    a_repair_makes_the_store_what_an_honest_run_stores
);

/// A running `paywatch run`, its HTTP address and the file its log goes to.
struct Running {
    child: Child,
    listen: String,
    log: std::path::PathBuf,
}

impl Running {
    async fn start(dir: &Path, database_url: &str, name: &str) -> Self {
        let listen = format!("127.0.0.1:{}", free_port());
        let log = dir.join(format!("{name}.log"));
        let child = paywatch(dir, database_url, &["run", "--listen", &listen])
            .env("PAYWATCH_GRPC_LISTEN", "127.0.0.1:0")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        wait_serving(&listen, Duration::from_secs(60)).await;
        Self { child, listen, log }
    }

    /// The audit WARN lines logged so far, each with its difference's JSON. A log file is
    /// not a terminal, so it holds no colour codes.
    fn audit_warnings(&self) -> Vec<Value> {
        let log = std::fs::read_to_string(&self.log).unwrap();
        assert!(!log.contains('\u{1b}'), "escape codes in a log file: {log}");
        log.lines()
            .filter(|line| line.contains("the store and the chain disagree"))
            .map(|line| {
                let json = &line[line.find("difference=").unwrap() + "difference=".len()..];
                let json = &json[..json.rfind('}').unwrap() + 1];
                serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {line}"))
            })
            .collect()
    }

    /// The HTTP lookup of the payment `tx` settles.
    async fn lookup(&self, tx: B256) -> (u16, Value) {
        let response = reqwest::get(format!("http://{}/v1/payments/local/{tx:#x}", self.listen))
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    /// The value of `metric{network="eip155:31337"}` on `/metrics`.
    async fn metric(&self, metric: &str) -> Option<f64> {
        let text = reqwest::get(format!("http://{}/metrics", self.listen))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find(|line| line.starts_with(&format!("{metric}{{network=\"eip155:31337\"}}")))
            .and_then(|line| line.rsplit(' ').next())
            .map(|value| value.parse().unwrap())
    }

    fn stop(mut self) {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(self.child.wait().unwrap().success());
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until the scheduled audit has reached block `block` (per `paywatch status`).
async fn wait_audited_to(dir: &Path, database_url: &str, block: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = status(dir, database_url);
        if status["audited_to"].as_u64().is_some_and(|to| to >= block) {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "the scheduled audit did not reach block {block}: {status}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn scheduled_audits_find_what_a_lying_provider_did_once(kind: Kind) {
    let fooled = Fooled::start(kind).await;
    let dir = tempfile::tempdir().unwrap();
    let mut network = fooled.network();
    network.audit_interval_secs = Some(1);
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();

    // The schedule audits from the token's start block, from receipts through the same
    // provider the worker reads, and finds both lies.
    let running = Running::start(dir.path(), &fooled.db.url, "first").await;
    let second_block = fooled.second.block_number.unwrap();
    let status = wait_audited_to(dir.path(), &fooled.db.url, second_block).await;
    fooled.assert_found(&running.audit_warnings());
    assert_eq!(status["last_audit"]["scheduled"], true, "{status}");
    assert_eq!(status["last_audit"]["first_block"], 0, "{status}");
    assert_eq!(status["last_audit"]["source"], "receipts", "{status}");
    assert_eq!(
        running.metric("paywatch_audit_differences_total").await,
        Some(2.0)
    );
    let audited = status["audited_to"].as_u64().unwrap();
    assert_eq!(
        running.metric("paywatch_audited_block").await,
        Some(audited as f64)
    );
    // Inline verification (or none) answers no `verified`: nothing unchecked is stored.
    let (code, first) = running.lookup(fooled.first.transaction_hash).await;
    assert_eq!(code, 200, "{first}");
    assert!(first.get("verified").is_none(), "{first}");

    // New blocks are audited after the last audit's, and nothing is reported twice.
    fooled.chain.mine(5).await;
    let status = wait_audited_to(dir.path(), &fooled.db.url, audited + 1).await;
    assert_eq!(status["last_audit"]["first_block"], audited + 1, "{status}");
    assert_eq!(status["last_audit"]["differences"], 0, "{status}");
    assert_eq!(running.audit_warnings().len(), 2);
    assert_eq!(
        running.metric("paywatch_audit_differences_total").await,
        Some(2.0)
    );
    running.stop();

    // After a restart the schedule continues where it stopped.
    let audited = status["audited_to"].as_u64().unwrap();
    let restarted = Running::start(dir.path(), &fooled.db.url, "restarted").await;
    fooled.chain.mine(5).await;
    let status = wait_audited_to(dir.path(), &fooled.db.url, audited + 1).await;
    assert_eq!(status["last_audit"]["first_block"], audited + 1, "{status}");
    assert!(restarted.audit_warnings().is_empty());
    assert_eq!(
        restarted.metric("paywatch_audit_differences_total").await,
        Some(0.0)
    );
    restarted.stop();
}

on_both_stores!(
    scheduled_audits_find_what_a_lying_provider_did_once,
    scheduled_audits_find_what_a_lying_provider_did_once
);

/// `verification = "lagging"`: ranges commit as the primary answers, and the scheduled
/// audit cross-checks them with the verifier afterwards. A payment answers
/// `verified: false` (with why) until an audit has covered its block, `true` after, and
/// `false` for good when the audit found a difference about it (here, a made-up refund).
async fn lagging_verification_answers_verified_once_audited(kind: Kind) {
    let fooled = Fooled::start(kind).await;
    let dir = tempfile::tempdir().unwrap();
    let mut network = fooled.network();
    network.verify_rpc_url = Some(fooled.chain.endpoint());
    let write_chains = |interval: u64| {
        let mut network = network.clone();
        network.audit_interval_secs = Some(interval);
        let text = network.toml().replace(
            "audit_interval_secs",
            "verification = \"lagging\"\naudit_interval_secs",
        );
        assert!(text.contains("verification = \"lagging\""), "{text}");
        std::fs::write(dir.path().join("chains.toml"), text).unwrap();
    };

    // No audit has run yet (the first is an hour away): nothing is verified, and a new
    // payment is read at once, as the primary answers it.
    write_chains(3600);
    let running = Running::start(dir.path(), &fooled.db.url, "unaudited").await;
    let (code, first) = running.lookup(fooled.first.transaction_hash).await;
    assert_eq!(code, 200, "{first}");
    assert_eq!(first["verified"], false, "{first}");
    assert!(
        first["unverified_reason"]
            .as_str()
            .unwrap()
            .contains("not cross-checked yet: the scheduled audit has reached no block"),
        "{first}"
    );
    let payer = fooled.chain.signer(1);
    let third = fooled
        .token
        .pay(
            &payer,
            fooled.seller,
            30_000,
            B256::repeat_byte(3),
            fooled.chain.account(3),
        )
        .await;
    fooled.chain.mine(3).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let third_view = loop {
        let (code, view) = running.lookup(third.transaction_hash).await;
        if code == 200 && view["payment_state"] == "paid" {
            break view;
        }
        assert!(
            Instant::now() < deadline,
            "the third payment was not read: {view}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(third_view["verified"], false, "{third_view}");
    assert_eq!(status(dir.path(), &fooled.db.url)["verification"], "lagging");
    running.stop();

    // The schedule audits every second: what it checked is verified; the payment whose
    // refund the primary made up is not, and says what the audit found.
    write_chains(1);
    let running = Running::start(dir.path(), &fooled.db.url, "audited").await;
    let third_block = third.block_number.unwrap();
    wait_audited_to(dir.path(), &fooled.db.url, third_block).await;
    let (_, third_view) = running.lookup(third.transaction_hash).await;
    assert_eq!(third_view["verified"], true, "{third_view}");
    assert!(third_view.get("unverified_reason").is_none(), "{third_view}");
    let (_, first) = running.lookup(fooled.first.transaction_hash).await;
    assert_eq!(first["verified"], false, "{first}");
    let reason = first["unverified_reason"].as_str().unwrap();
    assert!(
        reason.contains("an audit found") && reason.contains("made_up_transfer"),
        "{first}"
    );
    // The listing and its CSV say the same, row by row.
    let page: Value = reqwest::get(format!("http://{}/v1/payments?network=local", running.listen))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = |tx: B256| {
        page["payments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["payment"] == format!("{tx:#x}"))
            .unwrap_or_else(|| panic!("{tx:#x} not listed: {page}"))["verified"]
            .clone()
    };
    assert_eq!(listed(third.transaction_hash), true, "{page}");
    assert_eq!(listed(fooled.first.transaction_hash), false, "{page}");
    let csv = reqwest::Client::new()
        .get(format!("http://{}/v1/payments?network=local", running.listen))
        .header("accept", "text/csv")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().ends_with(",verified"), "{csv}");
    let row_of = |tx: B256| {
        csv.lines()
            .find(|l| l.contains(&format!("{tx:#x}")))
            .unwrap()
            .to_string()
    };
    assert!(row_of(third.transaction_hash).ends_with(",true"), "{csv}");
    assert!(row_of(fooled.first.transaction_hash).ends_with(",false"), "{csv}");
    // The audit reports the left-out payment; lagging verification does not repair it.
    assert_eq!(running.lookup(fooled.second.transaction_hash).await.0, 404);
    fooled.assert_found(&running.audit_warnings());
    // A stream that asks for them gets each verdict as a `verification` event, on the
    // payment's last change.
    let base = format!("http://{}", running.listen);
    let mut stream = EventClient::connect_to(&base, "?kinds=payment_state,verification", None).await;
    let verdicts = verdicts_on(
        &mut stream,
        &[fooled.first.transaction_hash, third.transaction_hash],
    )
    .await;
    assert_eq!(verdicts[0]["verified"], false, "{verdicts:?}");
    assert_eq!(verdicts[1]["verified"], true, "{verdicts:?}");
    assert_eq!(verdicts[1]["to_state"], "paid", "{verdicts:?}");
    let seen_up_to = verdicts.iter().map(|v| v["event_id"].as_u64().unwrap()).max();
    running.stop();

    // `paywatch audit --repair` (through the verifier) mends both: the left-out payment is
    // indexed and verified, the made-up refund untied, and its payment verified again.
    let output = paywatch(
        dir.path(),
        &fooled.db.url,
        &["audit", "--network", "local", "--repair"],
    )
    .output()
    .unwrap();
    assert_eq!(output.status.code(), Some(4), "{}", output_text(&output));
    fooled.assert_found(&differences(&output));
    let running = Running::start(dir.path(), &fooled.db.url, "repaired").await;
    let (code, second) = running.lookup(fooled.second.transaction_hash).await;
    assert_eq!(code, 200, "{second}");
    assert_eq!(second["payment_state"], "paid", "{second}");
    assert_eq!(second["verified"], true, "{second}");
    let (_, first) = running.lookup(fooled.first.transaction_hash).await;
    assert_eq!(first["payment_state"], "paid", "{first}");
    assert_eq!(first["verified"], true, "{first}");
    // The repair's changes and its verdicts follow on the stream.
    let base = format!("http://{}", running.listen);
    let mut stream = EventClient::connect_to(&base, "?kinds=payment_state,verification", seen_up_to).await;
    let verdicts = verdicts_on(
        &mut stream,
        &[fooled.first.transaction_hash, fooled.second.transaction_hash],
    )
    .await;
    assert!(verdicts.iter().all(|v| v["verified"] == true), "{verdicts:?}");
    assert_eq!(verdicts[0]["cause"], "refuted", "{verdicts:?}");
    running.stop();
}

/// Reads `stream` until it has delivered a `verification` event for each payment of
/// `payments` (the first of each), and answers them in that order.
async fn verdicts_on(stream: &mut EventClient, payments: &[B256]) -> Vec<Value> {
    let mut verdicts: Vec<Option<Value>> = vec![None; payments.len()];
    while verdicts.iter().any(Option::is_none) {
        let (kind, event) = stream.next_typed().await;
        if kind != "verification" {
            assert!(event.get("verified").is_none(), "{event}");
            continue;
        }
        if let Some(i) = payments
            .iter()
            .position(|p| event["payment"] == format!("{p:#x}"))
        {
            verdicts[i].get_or_insert(event);
        }
    }
    verdicts.into_iter().flatten().collect()
}

on_both_stores!(
    lagging_verification_answers_verified_once_audited,
    lagging_verification_answers_verified_once_audited
);
