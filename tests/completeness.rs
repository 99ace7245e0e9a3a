//! Completeness against a provider that answers `eth_getLogs` with valid pages that leave
//! logs out or make some up (receipts stay true, as with a lagging or buggy index), on
//! anvil through a lying proxy, on SQLite and Postgres. Alone, the liar makes paywatch miss
//! a payment or book a refund that never happened; with an independent verifier
//! (`verify_rpc_urls`) every run stores exactly what an honest run stores — whichever of
//! the two lies, and in whatever way; with the bloom check alone, a block left out is
//! found in its receipts.

use alloy::primitives::{B256, TxHash};
use paywatch_core::ids::lower_hex;
use paywatch_core::listing::PaymentFilter;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::proxy::{Faults, LogLies, RpcProxy};
use paywatch_tests::stores::{Kind, PaymentFacts, TestDb, payment_facts};
use paywatch_tests::token::Token;

/// What a run stored: every payment, and the counts of transfers, authorizations and
/// payments.
#[derive(Debug, PartialEq, Eq)]
struct Indexed {
    payments: Vec<PaymentFacts>,
    counts: (u64, u64, u64),
}

/// How a run checks its provider.
#[derive(Clone, Copy)]
enum Check<'a> {
    /// It takes the provider's word.
    Nothing,
    /// It cross-checks every range with this verifier.
    Verifier(&'a str),
    /// It reads from receipts the blocks with no log whose bloom may hold one.
    Bloom,
}

/// Indexes the chain through `rpc_url`, checked as `check` says, into a fresh store, up
/// to the head.
async fn index(kind: Kind, chain: &Chain, token: &Token, rpc_url: &str, check: Check<'_>) -> Indexed {
    let mut network = LocalNetwork::new(chain.chain_id(), rpc_url, &[token.address]);
    match check {
        Check::Nothing => {}
        Check::Verifier(url) => network.verify_rpc_url = Some(url.to_string()),
        Check::Bloom => network.bloom_check = true,
    }
    let chains = network.chains();
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let mut worker = worker(&chains, &store).await;
    sync(&mut worker).await;
    let id = chains.networks[0].id.clone();
    let payments = payment_facts(&store, &PaymentFilter::of(id.clone())).await;
    let counts = store.row_counts(&id.to_string()).await.unwrap();
    Indexed { payments, counts }
}

fn liar(lies: LogLies) -> Faults {
    Faults {
        log_lies: lies,
        ..Faults::default()
    }
}

async fn a_lying_provider_is_caught_by_the_verifier(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let (payer, other_payer, seller) = (chain.signer(1), chain.signer(4), chain.account(2));
    token.mint(payer.address(), 1_000_000).await;
    token.mint(other_payer.address(), 1_000_000).await;
    let pay = |who: &alloy::signers::local::PrivateKeySigner, amount: u64, nonce: u8| {
        let (token, chain, who) = (&token, &chain, who.clone());
        async move {
            token
                .pay(&who, seller, amount, B256::repeat_byte(nonce), chain.account(3))
                .await
        }
    };
    let first = pay(&payer, 10_000, 1).await;
    let second = pay(&other_payer, 20_000, 2).await;
    let third = pay(&payer, 5_000, 3).await;
    chain.mine(3).await;
    let tx = |hash: TxHash| lower_hex(hash);
    let honest = index(kind, &chain, &token, &chain.endpoint(), Check::Nothing).await;
    assert_eq!(honest.payments.len(), 3, "{honest:?}");
    let paid = |indexed: &Indexed, hash: TxHash| {
        indexed
            .payments
            .iter()
            .find(|row| row.payment_id == tx(hash))
            .map(|row| row.state.clone())
    };

    // Alone, each lie makes paywatch wrong, and silently.
    let omits_second = RpcProxy::start(
        &chain.endpoint(),
        liar(LogLies {
            omit_transactions: vec![tx(second.transaction_hash)],
            ..LogLies::default()
        }),
    )
    .await;
    let fooled = index(kind, &chain, &token, &omits_second.url, Check::Nothing).await;
    assert_eq!(paid(&fooled, second.transaction_hash), None, "a missed payment");
    let invents_refund = RpcProxy::start(
        &chain.endpoint(),
        liar(LogLies {
            invent_refunds_in: vec![tx(first.transaction_hash)],
            ..LogLies::default()
        }),
    )
    .await;
    let fooled = index(kind, &chain, &token, &invents_refund.url, Check::Nothing).await;
    assert_eq!(
        paid(&fooled, first.transaction_hash).as_deref(),
        Some("refunded"),
        "a refund that never happened"
    );

    // Cross-checked with an honest verifier, or with one that lies another way, every
    // run stores what the honest run stored.
    let omits_third_block = RpcProxy::start(
        &chain.endpoint(),
        liar(LogLies {
            omit_blocks: vec![third.block_number.unwrap()],
            ..LogLies::default()
        }),
    )
    .await;
    let honest_verifier = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
    for (primary, verifier, case) in [
        (
            &omits_second,
            &honest_verifier,
            "the primary leaves a transaction out",
        ),
        (
            &omits_third_block,
            &honest_verifier,
            "the primary leaves a block out",
        ),
        (&invents_refund, &honest_verifier, "the primary makes a refund up"),
        (&omits_second, &invents_refund, "each lies, another way"),
        (
            &honest_verifier,
            &omits_third_block,
            "the verifier leaves a block out",
        ),
    ] {
        let checked = index(kind, &chain, &token, &primary.url, Check::Verifier(&verifier.url)).await;
        assert_eq!(checked, honest, "{case}");
    }

    // One provider, with the bloom check: a block it left out is read from its receipts
    // (each payment here is alone in its block); a log it made up is not caught that way.
    for (liar, case) in [
        (&omits_second, "the provider leaves a transaction's block out"),
        (&omits_third_block, "the provider leaves a block out"),
    ] {
        let checked = index(kind, &chain, &token, &liar.url, Check::Bloom).await;
        assert_eq!(checked, honest, "{case}");
    }
    let blooms_only = index(kind, &chain, &token, &invents_refund.url, Check::Bloom).await;
    assert_eq!(
        paid(&blooms_only, first.transaction_hash).as_deref(),
        Some("refunded"),
        "a made-up log needs a verifier"
    );
    let honest_blooms = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
    assert_eq!(
        index(kind, &chain, &token, &honest_blooms.url, Check::Bloom).await,
        honest
    );
    assert_eq!(
        honest_blooms.stats.calls_of("eth_getBlockReceipts"),
        0,
        "an honest node's silent blocks have blooms that say so: headers only"
    );

    // Two honest providers cost the second read only: no receipt is asked for.
    let primary = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
    let verifier = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
    let agreed = index(kind, &chain, &token, &primary.url, Check::Verifier(&verifier.url)).await;
    assert_eq!(agreed, honest);
    for proxy in [&primary, &verifier] {
        assert!(proxy.stats.calls_of("eth_getLogs") > 0);
        assert_eq!(proxy.stats.calls_of("eth_getTransactionReceipt"), 0);
    }

    // A primary that hides the transaction from its receipts too contradicts the verifier
    // with no way to tell which is right: the step fails, naming both, and nothing commits.
    let hides_everywhere = RpcProxy::start(
        &chain.endpoint(),
        liar(LogLies {
            omit_transactions: vec![tx(second.transaction_hash)],
            in_receipts_too: true,
            ..LogLies::default()
        }),
    )
    .await;
    let mut network = LocalNetwork::new(chain.chain_id(), &hides_everywhere.url, &[token.address]);
    network.verify_rpc_url = Some(honest_verifier.url.clone());
    let chains = network.chains();
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let mut worker = worker(&chains, &store).await;
    let error = worker
        .step()
        .await
        .expect_err("contradicting providers stop the step");
    assert!(
        error.to_string().contains(&tx(second.transaction_hash))
            && error
                .to_string()
                .contains("the primary's receipt lacks it, the verifier's holds it"),
        "{error}"
    );
    assert_eq!(
        store
            .row_counts(&chains.networks[0].id.to_string())
            .await
            .unwrap(),
        (0, 0, 0)
    );
}
on_both_stores!(lying_providers, a_lying_provider_is_caught_by_the_verifier);
