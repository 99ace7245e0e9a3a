//! Reorgs on a real anvil node (snapshot/revert replaces blocks): a payment whose block
//! leaves the chain becomes `dropped`; one mined again in another block stays one payment
//! and becomes `paid` there (a Permit2 payment too); a reorg deeper than the finality rule
//! is reported.

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::{B256, U256};
use alloy::providers::Provider;
use paywatch_core::PaymentMethod;
use paywatch_core::ids::lower_hex;
use paywatch_core::state::PaymentState;
use paywatch_evm::worker::StepOutcome;
use paywatch_tests::batch::Batcher;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::permit2::{self, Permit2Kit, send_call};
use paywatch_tests::proxy::{Faults, RpcProxy};
use paywatch_tests::stores::{Kind, TestDb, every_transfer};
use paywatch_tests::token::Token;

const PAYER: usize = 1;
const SELLER: usize = 2;
const FACILITATOR: usize = 3;

struct Setup {
    chain: Chain,
    token: Token,
    _db: TestDb,
    store: paywatch_store::Store,
    network: String,
}

async fn setup(kind: Kind) -> Setup {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    token.mint(chain.account(PAYER), 1_000_000).await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    Setup {
        network: format!("eip155:{}", chain.chain_id()),
        chain,
        token,
        _db: db,
        store,
    }
}

impl Setup {
    /// A worker that calls a block final at `confirmations` deep.
    async fn worker(&self, confirmations: u64) -> paywatch_evm::EvmWorker {
        let mut network = LocalNetwork::new(
            self.chain.chain_id(),
            &self.chain.endpoint(),
            &[self.token.address],
        );
        network.confirmations = confirmations;
        worker(&network.chains(), &self.store).await
    }

    /// A worker that keeps the seller's whole ledger (`pay_to` and
    /// `keep_transfers = "pay_to"`), final at `confirmations` deep.
    async fn ledger_worker(&self, confirmations: u64) -> paywatch_evm::EvmWorker {
        let mut network = LocalNetwork::new(
            self.chain.chain_id(),
            &self.chain.endpoint(),
            &[self.token.address],
        );
        network.confirmations = confirmations;
        network.pay_to = vec![self.chain.account(SELLER)];
        network.keep_transfers = Some("pay_to");
        worker(&network.chains(), &self.store).await
    }

    /// One payment of `amount` with the nonce `0xnn…nn`.
    async fn pay(&self, amount: u64, nonce: u8) -> alloy::rpc::types::TransactionReceipt {
        self.token
            .pay(
                &self.chain.signer(PAYER),
                self.chain.account(SELLER),
                amount,
                B256::repeat_byte(nonce),
                self.chain.account(FACILITATOR),
            )
            .await
    }

    async fn state(&self, id: &str) -> PaymentState {
        self.store.payments_by_id(&self.network, id).await.unwrap()[0].state
    }
}

fn rolled_back(outcomes: &[StepOutcome]) -> Vec<(u64, u64)> {
    outcomes
        .iter()
        .filter_map(|o| match o {
            StepOutcome::RolledBack {
                fork_block,
                paid_dropped,
            } => Some((*fork_block, *paid_dropped)),
            _ => None,
        })
        .collect()
}

async fn payment_reorged_out_is_dropped(kind: Kind) {
    let s = setup(kind).await;
    let mut worker = s.worker(4).await;

    let before = s.chain.snapshot().await;
    let fork_block = s.chain.block_number().await;
    let receipt = s.pay(500, 1).await;
    s.chain.mine(1).await;
    sync(&mut worker).await;
    let id = lower_hex(receipt.transaction_hash);
    assert_eq!(s.state(&id).await, PaymentState::Pending);

    // The payment's block and the one after it are replaced by three empty blocks.
    s.chain.revert(&before).await;
    s.chain.mine(3).await;
    let outcomes = sync(&mut worker).await;
    assert_eq!(rolled_back(&outcomes), vec![(fork_block, 0)]);
    let payment = &s.store.payments_by_id(&s.network, &id).await.unwrap()[0];
    assert_eq!(payment.state, PaymentState::Dropped);
    // Even once everything left is final, a dropped payment never becomes paid.
    s.chain.mine(10).await;
    sync(&mut worker).await;
    assert_eq!(s.state(&id).await, PaymentState::Dropped);
    assert_eq!(
        s.store.row_counts(&s.network).await.unwrap(),
        (0, 0, 1),
        "only the dropped payment is left (the mint is not kept)"
    );
}
on_both_stores!(payment_reorged_out_is_dropped, payment_reorged_out_is_dropped);

async fn payment_moved_to_another_block_stays_one_payment(kind: Kind) {
    let s = setup(kind).await;
    let mut worker = s.worker(3).await;

    let before = s.chain.snapshot().await;
    let receipt = s.pay(700, 2).await;
    let raw = s.chain.raw_transaction(receipt.transaction_hash).await;
    sync(&mut worker).await;
    let id = lower_hex(receipt.transaction_hash);
    let first = s.store.payments_by_id(&s.network, &id).await.unwrap()[0].clone();

    // Reorg: an empty block takes the payment's place, and the same signed transaction is
    // mined one block later.
    s.chain.revert(&before).await;
    s.chain.mine(1).await;
    let moved = s.chain.resend(&raw).await;
    assert_eq!(
        moved.transaction_hash, receipt.transaction_hash,
        "the same transaction"
    );
    assert_eq!(moved.block_number, first.block_number.checked_add(1));
    s.chain.mine(2).await;

    let outcomes = sync(&mut worker).await;
    assert_eq!(rolled_back(&outcomes).len(), 1, "{outcomes:?}");
    let payments = s.store.payments_by_id(&s.network, &id).await.unwrap();
    assert_eq!(payments.len(), 1, "still one payment");
    assert_eq!(payments[0].state, PaymentState::Paid);
    assert_eq!(payments[0].block_number, first.block_number + 1);
    assert_eq!(payments[0].block_hash, lower_hex(moved.block_hash.unwrap()));
    assert_ne!(payments[0].block_hash, first.block_hash);
    assert_eq!(
        s.store.row_counts(&s.network).await.unwrap(),
        (1, 0, 1),
        "nothing counted twice (the mint can refund nothing and is not kept)"
    );
}
on_both_stores!(
    payment_moved_to_another_block_stays_one_payment,
    payment_moved_to_another_block_stays_one_payment
);

/// A Permit2 (upto) payment treats a reorg as an EIP-3009 one: mined again one block later,
/// it is still one payment, with the nonce and maximum read from its call again.
async fn a_permit2_payment_moved_to_another_block_stays_one_payment(kind: Kind) {
    let s = setup(kind).await;
    s.token
        .approve(s.chain.account(PAYER), permit2::PERMIT2, U256::MAX)
        .await;
    let kit = Permit2Kit::install(&s.chain).await;
    let mut worker = s.worker(3).await;
    let signed = kit
        .sign_upto(
            &s.chain.signer(PAYER),
            s.token.address,
            s.chain.account(SELLER),
            s.chain.account(FACILITATOR),
            900,
            U256::from(31u64),
        )
        .await;

    let before = s.chain.snapshot().await;
    let receipt = send_call(
        &s.chain,
        s.chain.account(FACILITATOR),
        kit.upto_settle(&signed, 600),
    )
    .await;
    let raw = s.chain.raw_transaction(receipt.transaction_hash).await;
    sync(&mut worker).await;
    let id = lower_hex(receipt.transaction_hash);
    let first = s.store.payments_by_id(&s.network, &id).await.unwrap()[0].clone();
    assert_eq!(first.state, PaymentState::Pending);

    s.chain.revert(&before).await;
    s.chain.mine(1).await;
    let moved = s.chain.resend(&raw).await;
    s.chain.mine(2).await;
    let outcomes = sync(&mut worker).await;
    assert_eq!(rolled_back(&outcomes).len(), 1, "{outcomes:?}");
    let payments = s.store.payments_by_id(&s.network, &id).await.unwrap();
    assert_eq!(payments.len(), 1, "still one payment");
    let payment = &payments[0];
    assert_eq!(
        (payment.state, payment.method, payment.block_number),
        (PaymentState::Paid, PaymentMethod::Upto, first.block_number + 1)
    );
    assert_eq!(payment.block_hash, lower_hex(moved.block_hash.unwrap()));
    assert_eq!(
        (
            payment.amount.as_str(),
            payment.nonce.as_deref(),
            payment.max_amount.as_deref()
        ),
        ("600", Some("31"), Some("900"))
    );
}
on_both_stores!(
    a_permit2_payment_moved_to_another_block_stays_one_payment,
    a_permit2_payment_moved_to_another_block_stays_one_payment
);

/// A batched Permit2 payment (its nonce read from the call trace) moved by a reorg and read
/// again behind a node that serves no traces keeps the nonce it was stored with.
async fn a_reread_without_traces_keeps_a_stored_nonce(kind: Kind) {
    let s = setup(kind).await;
    s.token
        .approve(s.chain.account(PAYER), permit2::PERMIT2, U256::MAX)
        .await;
    let kit = Permit2Kit::install(&s.chain).await;
    let batcher = Batcher::deploy(&s.chain).await;
    let mut traced = s.worker(3).await;
    let signed = kit
        .sign_exact(
            &s.chain.signer(PAYER),
            s.token.address,
            s.chain.account(SELLER),
            400,
            U256::from(41u64),
        )
        .await;
    let before = s.chain.snapshot().await;
    let receipt = batcher
        .settle_calls(vec![kit.exact_settle(&signed)], s.chain.account(FACILITATOR))
        .await;
    let raw = s.chain.raw_transaction(receipt.transaction_hash).await;
    sync(&mut traced).await;
    let id = lower_hex(receipt.transaction_hash);
    let first = s.store.payments_by_id(&s.network, &id).await.unwrap()[0].clone();
    assert_eq!(first.nonce.as_deref(), Some("41"));

    s.chain.revert(&before).await;
    s.chain.mine(1).await;
    s.chain.resend(&raw).await;
    s.chain.mine(2).await;
    let proxy = RpcProxy::start(
        &s.chain.endpoint(),
        Faults {
            unserved_methods: vec!["debug_traceTransaction"],
            ..Faults::default()
        },
    )
    .await;
    let mut network = LocalNetwork::new(s.chain.chain_id(), &proxy.url, &[s.token.address]);
    network.confirmations = 3;
    let mut untraced = worker(&network.chains(), &s.store).await;
    let outcomes = sync(&mut untraced).await;
    assert_eq!(rolled_back(&outcomes).len(), 1, "{outcomes:?}");
    let payments = s.store.payments_by_id(&s.network, &id).await.unwrap();
    assert_eq!(payments.len(), 1);
    assert_eq!(payments[0].block_number, first.block_number + 1, "read again");
    assert_eq!(payments[0].nonce.as_deref(), Some("41"), "the stored nonce stays");
}
on_both_stores!(
    a_reread_without_traces_keeps_a_stored_nonce,
    a_reread_without_traces_keeps_a_stored_nonce
);

async fn reorg_deeper_than_finality_is_reported(kind: Kind) {
    let s = setup(kind).await;
    let mut worker = s.worker(2).await;

    let before = s.chain.snapshot().await;
    let receipt = s.pay(900, 3).await;
    s.chain.mine(3).await;
    sync(&mut worker).await;
    let id = lower_hex(receipt.transaction_hash);
    assert_eq!(s.state(&id).await, PaymentState::Paid);

    s.chain.revert(&before).await;
    s.chain.mine(6).await;
    let outcomes = sync(&mut worker).await;
    let rollbacks = rolled_back(&outcomes);
    assert_eq!(rollbacks.len(), 1, "{outcomes:?}");
    assert_eq!(
        rollbacks[0].1, 1,
        "the paid payment is reported as rolled back past finality"
    );
    assert_eq!(s.state(&id).await, PaymentState::Dropped);
}
on_both_stores!(
    reorg_deeper_than_finality_is_reported,
    reorg_deeper_than_finality_is_reported
);

/// With `finality = "finalized"` or `"safe"`, the node's tagged block decides `paid`.
async fn tag_decides_paid(kind: Kind, tag: BlockNumberOrTag) {
    let s = setup(kind).await;
    let mut network = LocalNetwork::new(s.chain.chain_id(), &s.chain.endpoint(), &[s.token.address]);
    network.finality_tag = Some(match tag {
        BlockNumberOrTag::Safe => "safe",
        _ => "finalized",
    });
    let mut worker = worker(&network.chains(), &s.store).await;
    let receipt = s.pay(700, 4).await;
    let block = receipt.block_number.unwrap();
    let id = lower_hex(receipt.transaction_hash);
    let tagged = || async {
        let block: alloy::rpc::types::Block =
            s.chain.provider.get_block_by_number(tag).await.unwrap().unwrap();
        block.header.number
    };
    // Many confirmations, but the node's tagged block is still below the payment.
    s.chain
        .mine(if tag == BlockNumberOrTag::Safe { 8 } else { 20 })
        .await;
    sync(&mut worker).await;
    assert!(tagged().await < block, "anvil tags blocks far behind its head");
    assert_eq!(s.state(&id).await, PaymentState::Pending);
    // Mine until the node's tagged block passes the payment's block.
    while tagged().await < block {
        s.chain.mine(8).await;
    }
    sync(&mut worker).await;
    assert_eq!(s.state(&id).await, PaymentState::Paid);
    let head = s.store.chain_head(&s.network).await.unwrap().unwrap();
    assert_eq!(head.final_block, Some(tagged().await));
}
async fn finalized_tag_decides_paid(kind: Kind) {
    tag_decides_paid(kind, BlockNumberOrTag::Finalized).await;
}
on_both_stores!(finalized_tag_decides_paid, finalized_tag_decides_paid);

async fn safe_tag_decides_paid(kind: Kind) {
    tag_decides_paid(kind, BlockNumberOrTag::Safe).await;
}
on_both_stores!(safe_tag_decides_paid, safe_tag_decides_paid);

/// A transfer into the seller's wallet that is no payment, kept with
/// `keep_transfers = "pay_to"`, leaves the store when a reorg removes its block; the
/// transfer the new branch holds is kept once.
async fn a_kept_ledger_transfer_reorged_out_is_gone(kind: Kind) {
    let s = setup(kind).await;
    let mut worker = s.ledger_worker(4).await;
    let ledger = every_transfer(&s.network);
    let amounts = || async {
        let kept = s.store.list_transfers(&ledger, None, 100).await.unwrap();
        kept.into_iter()
            .map(|t| t.transfer.value.to_string())
            .collect::<Vec<_>>()
    };

    let before = s.chain.snapshot().await;
    s.token
        .transfer(s.chain.account(PAYER), s.chain.account(SELLER), 123)
        .await;
    s.chain.mine(1).await;
    sync(&mut worker).await;
    assert_eq!(amounts().await, ["123"]);

    s.chain.revert(&before).await;
    s.token
        .transfer(s.chain.account(PAYER), s.chain.account(SELLER), 456)
        .await;
    s.chain.mine(3).await;
    let outcomes = sync(&mut worker).await;
    assert_eq!(rolled_back(&outcomes).len(), 1, "{outcomes:?}");
    s.chain.mine(10).await;
    sync(&mut worker).await;
    assert_eq!(
        amounts().await,
        ["456"],
        "the reorged-out transfer is gone, the new one kept once"
    );
}
on_both_stores!(
    a_kept_ledger_transfer_reorged_out_is_gone,
    a_kept_ledger_transfer_reorged_out_is_gone
);
