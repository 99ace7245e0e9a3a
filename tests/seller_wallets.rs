//! A seller who names its wallets (`pay_to` on an EVM network) is served only what can
//! concern them: the node is asked for transfers into or out of those wallets, so other
//! traffic never crosses the wire, payments to other sellers are not seen, and the
//! seller's own payments and refunds are exactly what a run without the filter finds —
//! including a batch where the same payer paid another seller first. Real anvil, real
//! EIP-3009 signatures, both stores.

use alloy::primitives::{Address, B256};
use paywatch_core::ids::lower_hex;
use paywatch_core::listing::PaymentFilter;
use paywatch_tests::batch::Batcher;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::proxy::{Faults, RpcProxy};
use paywatch_tests::stores::{Kind, PaymentFacts, TestDb, payment_facts};
use paywatch_tests::token::Token;
use std::sync::atomic::Ordering;

/// Indexes the chain through `rpc_url` into a fresh store with `pay_to` (none: every
/// transfer), and lists the payments to `seller`.
async fn payments_to(
    kind: Kind,
    chain: &Chain,
    token: &Token,
    rpc_url: &str,
    pay_to: &[Address],
    seller: Address,
) -> Vec<PaymentFacts> {
    let mut network = LocalNetwork::new(chain.chain_id(), rpc_url, &[token.address]);
    network.pay_to = pay_to.to_vec();
    let chains = network.chains();
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    sync(&mut worker(&chains, &store).await).await;
    let everyone = PaymentFilter::of(chains.networks[0].id.clone());
    let filter = PaymentFilter {
        pay_to: Some(lower_hex(seller)),
        ..everyone.clone()
    };
    let all = store.list_payments(&everyone, None, 1_000).await.unwrap();
    if !pay_to.is_empty() {
        assert!(
            all.iter()
                .all(|p| pay_to.iter().any(|w| lower_hex(w) == p.pay_to)),
            "only payments to the named wallets: {all:?}"
        );
    }
    payment_facts(&store, &filter).await
}

async fn a_seller_reads_only_its_own_traffic(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let (payer, seller, other_seller, facilitator) = (
        chain.signer(1),
        chain.signer(2),
        chain.account(4),
        chain.account(3),
    );
    token.mint(payer.address(), 1_000_000).await;
    token.mint(chain.account(5), 1_000_000).await;
    token
        .pay(
            &payer,
            seller.address(),
            10_000,
            B256::repeat_byte(1),
            facilitator,
        )
        .await;
    token
        .pay(&payer, other_seller, 20_000, B256::repeat_byte(2), facilitator)
        .await;
    // A batch: the payer pays the other seller first, then this seller.
    let batcher = Batcher::deploy(&chain).await;
    let elsewhere = token
        .authorize(&payer, other_seller, 300, B256::repeat_byte(3))
        .await;
    let here = token
        .authorize(&payer, seller.address(), 700, B256::repeat_byte(4))
        .await;
    let batch = batcher
        .settle(&[(&token, &elsewhere), (&token, &here)], facilitator)
        .await;
    // Traffic that concerns neither seller, and a plain refund by this seller.
    for i in 0..20u64 {
        token
            .transfer(chain.account(5), chain.account(6 + (i as usize % 3)), 1 + i)
            .await;
    }
    token.transfer(seller.address(), payer.address(), 10_000).await;
    token.transfer(other_seller, payer.address(), 20_000).await;
    chain.mine(3).await;

    let everything = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
    let unfiltered = payments_to(kind, &chain, &token, &everything.url, &[], seller.address()).await;
    let filtered_proxy = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
    let filtered = payments_to(
        kind,
        &chain,
        &token,
        &filtered_proxy.url,
        &[seller.address()],
        seller.address(),
    )
    .await;
    assert_eq!(
        filtered, unfiltered,
        "the seller's payments and refunds, as without the filter"
    );
    assert_eq!(filtered.len(), 2, "{filtered:?}");
    assert_eq!(
        filtered[0].state, "refunded",
        "the plain transfer back refunds the first: {filtered:?}"
    );
    let in_batch = &filtered[1];
    assert_eq!(in_batch.payment_id, lower_hex(batch.transaction_hash));
    assert_eq!(
        (
            in_batch.index_in_tx,
            in_batch.amount.as_str(),
            in_batch.nonce.as_deref()
        ),
        (1, "700", Some(lower_hex(B256::repeat_byte(4))).as_deref()),
        "its own authorization, number and amount, never the other seller's"
    );
    let served = |proxy: &RpcProxy| proxy.stats.logs_served.load(Ordering::SeqCst);
    assert!(
        served(&filtered_proxy) + 20 <= served(&everything),
        "the unrelated transfers never crossed the wire: {} against {}",
        served(&filtered_proxy),
        served(&everything)
    );
}
on_both_stores!(seller_wallets, a_seller_reads_only_its_own_traffic);
