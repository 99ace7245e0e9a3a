//! Refunds on a real anvil node: tied by nonce commitment or by the matching rule,
//! partial and full, two payments and one refund, counted only once final, and never when
//! the refund is reorged out; Permit2 payments by the same rules. On SQLite and on
//! Postgres, through the HTTP API, with the default transfer filter and with the seller's
//! whole ledger kept (`keep_transfers = "pay_to"`).

use alloy::primitives::{B256, TxHash, U256};
use paywatch_core::ids::lower_hex;
use paywatch_core::refunds::refund_nonce;
use paywatch_tests::batch::Batcher;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{ApiServer, LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::permit2::{self, Permit2Kit, send_call};
use paywatch_tests::proxy::{Faults, RpcProxy};
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;

const PAYER: usize = 1;
const SELLER: usize = 2;
const FACILITATOR: usize = 3;
const STRANGER: usize = 4;

struct World {
    chain: Chain,
    token: Token,
    _db: TestDb,
    worker: paywatch_evm::EvmWorker,
    api: ApiServer,
}

/// Which transfers the network keeps: the default, or every one of the seller's wallet
/// (`pay_to` set, `keep_transfers = "pay_to"`) — the refund rules must answer the same.
#[derive(Clone, Copy)]
enum Keep {
    Refunds,
    SellerLedger,
}

/// Runs `$body` on both stores with each [`Keep`].
macro_rules! both_ways {
    ($name:ident, $body:ident) => {
        mod $name {
            use paywatch_tests::on_both_stores;
            use paywatch_tests::stores::Kind;

            async fn refunds_kept(kind: Kind) {
                super::$body(kind, super::Keep::Refunds).await
            }
            async fn seller_ledger_kept(kind: Kind) {
                super::$body(kind, super::Keep::SellerLedger).await
            }
            on_both_stores!(keep_refunds, refunds_kept);
            on_both_stores!(keep_pay_to, seller_ledger_kept);
        }
    };
}

impl World {
    async fn new(kind: Kind, keep: Keep) -> Self {
        let chain = Chain::start().await;
        let token = Token::deploy(&chain).await;
        for who in [PAYER, SELLER, STRANGER] {
            token.mint(chain.account(who), 1_000_000).await;
        }
        let db = TestDb::create(kind).await;
        let store = db.open().await;
        let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
        network.confirmations = 3;
        if matches!(keep, Keep::SellerLedger) {
            network.pay_to = vec![chain.account(SELLER)];
            network.keep_transfers = Some("pay_to");
        }
        let chains = network.chains();
        let worker = worker(&chains, &store).await;
        let api = ApiServer::start(&store, &chains).await;
        Self {
            chain,
            token,
            _db: db,
            worker,
            api,
        }
    }

    async fn pay(&self, amount: u64, nonce: u8) -> TxHash {
        self.token
            .pay(
                &self.chain.signer(PAYER),
                self.chain.account(SELLER),
                amount,
                B256::repeat_byte(nonce),
                self.chain.account(FACILITATOR),
            )
            .await
            .transaction_hash
    }

    /// Mines enough blocks for everything so far to be final, and lets the worker catch up.
    async fn settle(&mut self) {
        self.chain.mine(3).await;
        sync(&mut self.worker).await;
    }

    async fn lookup(&self, tx: TxHash) -> serde_json::Value {
        let (status, body) = self
            .api
            .get(&format!("/v1/payments/local/{}", lower_hex(tx)))
            .await;
        assert_eq!(status, 200, "{body}");
        body
    }
}

async fn nonce_commitment_ties_the_named_payment(kind: Kind, keep: Keep) {
    let mut w = World::new(kind, keep).await;
    let first = w.pay(10_000, 1).await;
    let second = w.pay(10_000, 2).await;
    // The seller refunds the *second* payment with an EIP-3009 transfer whose nonce commits
    // to its hash; the matching rule alone would have picked the first.
    let refund = w
        .token
        .pay(
            &w.chain.signer(SELLER),
            w.chain.account(PAYER),
            10_000,
            refund_nonce(second),
            w.chain.account(FACILITATOR),
        )
        .await;
    w.settle().await;

    let a = w.lookup(first).await;
    let b = w.lookup(second).await;
    assert_eq!(
        (
            a["payment_state"].as_str(),
            a["refunds"].as_array().unwrap().len()
        ),
        (Some("paid"), 0)
    );
    assert_eq!(b["payment_state"], "refunded");
    assert_eq!(b["refunded_amount"], "10000");
    assert_eq!(b["refunds"][0]["tx"], lower_hex(refund.transaction_hash));
    assert_eq!(b["refunds"][0]["rule"], "nonce_commitment");
    assert_eq!(b["refunds"][0]["amount"], "10000");
}
both_ways!(
    nonce_commitment_ties_the_named_payment,
    nonce_commitment_ties_the_named_payment
);

/// A refund whose nonce names a transaction that settled two payments between the same
/// parties goes to the one it fits, never to the one a plain refund already returned in
/// full.
async fn nonce_commitment_to_a_batch_skips_a_refunded_payment(kind: Kind, keep: Keep) {
    let mut w = World::new(kind, keep).await;
    let batcher = Batcher::deploy(&w.chain).await;
    let payer = w.chain.signer(PAYER);
    let seller = w.chain.account(SELLER);
    let small = w.token.authorize(&payer, seller, 100, B256::repeat_byte(1)).await;
    let large = w.token.authorize(&payer, seller, 300, B256::repeat_byte(2)).await;
    let batch = batcher
        .settle(
            &[(&w.token, &small), (&w.token, &large)],
            w.chain.account(FACILITATOR),
        )
        .await
        .transaction_hash;
    w.settle().await;
    // A plain transfer back of 100: the matching rule gives it to the first payment.
    w.token.transfer(seller, w.chain.account(PAYER), 100).await;
    w.settle().await;
    let refund = w
        .token
        .pay(
            &w.chain.signer(SELLER),
            w.chain.account(PAYER),
            300,
            refund_nonce(batch),
            w.chain.account(FACILITATOR),
        )
        .await;
    w.settle().await;

    let lookup = |index: u32| {
        let path = format!("/v1/payments/local/{}?index={index}", lower_hex(batch));
        let api = &w.api;
        async move {
            let (status, body) = api.get(&path).await;
            assert_eq!(status, 200, "{body}");
            body
        }
    };
    let first = lookup(0).await;
    assert_eq!(
        (
            first["payment_state"].as_str(),
            first["refunds"][0]["rule"].as_str()
        ),
        (Some("refunded"), Some("matching"))
    );
    assert_eq!(first["refunds"].as_array().map(Vec::len), Some(1), "{first}");
    let second = lookup(1).await;
    assert_eq!(second["payment_state"], "refunded", "{second}");
    assert_eq!(second["refunds"][0]["tx"], lower_hex(refund.transaction_hash));
    assert_eq!(second["refunds"][0]["rule"], "nonce_commitment");
}
both_ways!(
    nonce_commitment_to_a_batch,
    nonce_commitment_to_a_batch_skips_a_refunded_payment
);

/// Behind a node whose logs carry no `blockTimestamp` (many nodes and providers), paywatch
/// reads the block times of payments and of transfers that may refund them, so the refund
/// window still holds: a transfer back after the window refunds nothing, one inside it does.
async fn the_refund_window_holds_where_logs_carry_no_time(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    token.mint(chain.account(PAYER), 1_000_000).await;
    let proxy = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            strip_log_timestamps: true,
            ..Faults::default()
        },
    )
    .await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let mut network = LocalNetwork::new(chain.chain_id(), &proxy.url, &[token.address]);
    network.refund_window_secs = Some(600);
    let chains = network.chains();
    let mut worker = worker(&chains, &store).await;
    let api = ApiServer::start(&store, &chains).await;
    let (payer, seller) = (chain.signer(PAYER), chain.account(SELLER));
    let facilitator = chain.account(FACILITATOR);

    let late = token
        .pay(&payer, seller, 1_000, B256::repeat_byte(1), facilitator)
        .await;
    chain.travel(601).await;
    token.transfer(seller, chain.account(PAYER), 400).await;
    let timely = token
        .pay(&payer, seller, 2_000, B256::repeat_byte(2), facilitator)
        .await;
    chain.travel(300).await;
    let refund = token.transfer(seller, chain.account(PAYER), 700).await;
    chain.mine(3).await;
    sync(&mut worker).await;

    let lookup = |tx: TxHash| {
        let path = format!("/v1/payments/local/{}", lower_hex(tx));
        let api = &api;
        async move {
            let (status, body) = api.get(&path).await;
            assert_eq!(status, 200, "{body}");
            body
        }
    };
    let body = lookup(late.transaction_hash).await;
    assert!(body["block_time"].is_string(), "read from the header: {body}");
    assert_eq!(
        (body["payment_state"].as_str(), body["refunded_amount"].as_str()),
        (Some("paid"), Some("0")),
        "the transfer back came after the window: {body}"
    );
    let body = lookup(timely.transaction_hash).await;
    assert_eq!(body["payment_state"], "partially_refunded", "{body}");
    assert_eq!(body["refunds"][0]["tx"], lower_hex(refund.transaction_hash));
    assert_eq!(body["refunds"][0]["amount"], "700");
}
on_both_stores!(
    refund_window_without_log_times,
    the_refund_window_holds_where_logs_carry_no_time
);

async fn matching_partial_then_full_refund_with_history(kind: Kind, keep: Keep) {
    let mut w = World::new(kind, keep).await;
    let payment = w.pay(10_000, 1).await;
    sync(&mut w.worker).await;
    w.settle().await;
    let seller = w.chain.account(SELLER);
    let payer = w.chain.account(PAYER);
    let partial = w.token.transfer(seller, payer, 4_000).await;
    w.settle().await;
    let body = w.lookup(payment).await;
    assert_eq!(body["payment_state"], "partially_refunded");
    assert_eq!(body["refunded_amount"], "4000");
    assert_eq!(body["refunds"][0]["rule"], "matching");

    let rest = w.token.transfer(seller, payer, 6_000).await;
    w.settle().await;
    let body = w.lookup(payment).await;
    assert_eq!(body["payment_state"], "refunded");
    assert_eq!(body["refunded_amount"], "10000");
    let refund_txs: Vec<&str> = body["refunds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tx"].as_str().unwrap())
        .collect();
    assert_eq!(
        refund_txs,
        [
            lower_hex(partial.transaction_hash),
            lower_hex(rest.transaction_hash)
        ]
    );

    let (status, history) = w
        .api
        .get(&format!("/v1/payments/local/{}/history", lower_hex(payment)))
        .await;
    assert_eq!(status, 200, "{history}");
    let steps: Vec<(String, String, String)> = history["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["from_state"].as_str().unwrap_or("-").to_string(),
                h["to_state"].as_str().unwrap().to_string(),
                h["cause"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected = [
        ("-", "pending", "seen"),
        ("pending", "paid", "final"),
        ("paid", "partially_refunded", "refund"),
        ("partially_refunded", "refunded", "refund"),
    ];
    let expected: Vec<(String, String, String)> = expected
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(steps, expected);
    assert_eq!(history["history"][2]["tx"], lower_hex(partial.transaction_hash));
}
both_ways!(
    matching_partial_then_full_refund_with_history,
    matching_partial_then_full_refund_with_history
);

async fn two_payments_one_refund_goes_to_the_first_it_fits(kind: Kind, keep: Keep) {
    let mut w = World::new(kind, keep).await;
    let small = w.pay(3_000, 1).await;
    let large = w.pay(5_000, 2).await;
    w.settle().await;
    // Not a refund: money from a stranger, and money from the seller to a stranger.
    w.token
        .transfer(w.chain.account(STRANGER), w.chain.account(PAYER), 5_000)
        .await;
    w.token
        .transfer(w.chain.account(SELLER), w.chain.account(STRANGER), 5_000)
        .await;
    w.token
        .transfer(w.chain.account(SELLER), w.chain.account(PAYER), 5_000)
        .await;
    w.settle().await;
    let a = w.lookup(small).await;
    let b = w.lookup(large).await;
    assert_eq!(
        (a["payment_state"].as_str(), a["refunded_amount"].as_str()),
        (Some("paid"), Some("0"))
    );
    assert_eq!(
        (b["payment_state"].as_str(), b["refunded_amount"].as_str()),
        (Some("refunded"), Some("5000"))
    );
    assert_eq!(b["refunds"].as_array().unwrap().len(), 1);
}
both_ways!(
    two_payments_one_refund_goes_to_the_first_it_fits,
    two_payments_one_refund_goes_to_the_first_it_fits
);

async fn refund_counts_only_once_final_and_never_when_reorged_out(kind: Kind, keep: Keep) {
    let mut w = World::new(kind, keep).await;
    let payment = w.pay(10_000, 1).await;
    w.settle().await;
    let before_refund = w.chain.snapshot().await;
    w.token
        .transfer(w.chain.account(SELLER), w.chain.account(PAYER), 10_000)
        .await;
    sync(&mut w.worker).await;
    let body = w.lookup(payment).await;
    assert_eq!(
        body["payment_state"], "paid",
        "a refund that is not final does not count"
    );
    assert_eq!(body["refunds"].as_array().unwrap().len(), 0);

    // The refund's block is replaced: it never happened.
    w.chain.revert(&before_refund).await;
    w.settle().await;
    w.settle().await;
    let body = w.lookup(payment).await;
    assert_eq!(
        (body["payment_state"].as_str(), body["refunded_amount"].as_str()),
        (Some("paid"), Some("0"))
    );

    // A real refund later still counts.
    w.token
        .transfer(w.chain.account(SELLER), w.chain.account(PAYER), 10_000)
        .await;
    w.settle().await;
    assert_eq!(w.lookup(payment).await["payment_state"], "refunded");
}
both_ways!(
    refund_counts_only_once_final_and_never_when_reorged_out,
    refund_counts_only_once_final_and_never_when_reorged_out
);

/// A Permit2 (upto) payment is refunded like an EIP-3009 one: by a transfer whose
/// EIP-3009 nonce commits to it, or by a plain transfer back that matches it.
async fn permit2_payments_are_refunded_by_the_same_rules(kind: Kind, keep: Keep) {
    let mut w = World::new(kind, keep).await;
    w.token
        .approve(w.chain.account(PAYER), permit2::PERMIT2, U256::MAX)
        .await;
    let kit = Permit2Kit::install(&w.chain).await;
    let settle = async |max: u64, amount: u64, nonce: u64| {
        let signed = kit
            .sign_upto(
                &w.chain.signer(PAYER),
                w.token.address,
                w.chain.account(SELLER),
                w.chain.account(FACILITATOR),
                max,
                U256::from(nonce),
            )
            .await;
        send_call(
            &w.chain,
            w.chain.account(FACILITATOR),
            kit.upto_settle(&signed, amount),
        )
        .await
        .transaction_hash
    };
    let matched = settle(9_000, 8_000, 1).await;
    let committed = settle(9_000, 7_000, 2).await;
    w.token
        .transfer(w.chain.account(SELLER), w.chain.account(PAYER), 3_000)
        .await;
    w.token
        .pay(
            &w.chain.signer(SELLER),
            w.chain.account(PAYER),
            7_000,
            refund_nonce(committed),
            w.chain.account(FACILITATOR),
        )
        .await;
    w.settle().await;

    let a = w.lookup(matched).await;
    assert_eq!(
        (
            a["method"].as_str(),
            a["payment_state"].as_str(),
            a["refunded_amount"].as_str(),
            a["refunds"][0]["rule"].as_str()
        ),
        (
            Some("upto"),
            Some("partially_refunded"),
            Some("3000"),
            Some("matching")
        )
    );
    let b = w.lookup(committed).await;
    assert_eq!(
        (
            b["payment_state"].as_str(),
            b["refunded_amount"].as_str(),
            b["refunds"][0]["rule"].as_str()
        ),
        (Some("refunded"), Some("7000"), Some("nonce_commitment"))
    );
}
both_ways!(
    permit2_payments_are_refunded_by_the_same_rules,
    permit2_payments_are_refunded_by_the_same_rules
);
