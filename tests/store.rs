//! The store's guarantees, on SQLite and on Postgres: a batch and its cursor commit
//! together or not at all, writes are idempotent, finality promotes exactly what is
//! final, and a rollback drops what a reorg removed.

use alloy_primitives::U256;
use paywatch_core::PaymentMethod;
use paywatch_core::listing::{TransferCursor, TransferFilter};
use paywatch_core::records::{
    AuditFinding, AuditRecord, AuditSource, AuthorizationRecord, Batch, BlockRecord, EventPosition,
    FindingSubject, PaymentKey, PaymentRecord, TransferRecord,
};
use paywatch_core::refunds::{RefundRule, refund_nonce};
use paywatch_core::retention::RefundRoute;
use paywatch_core::state::PaymentState;
use paywatch_store::{AuditKind, HeadUpdate, StoreError, StoredTransfer, TokenCursor};
use paywatch_tests::on_both_stores;
use paywatch_tests::stores::{self, Kind, TestDb};

const NET: &str = "eip155:31337";
const TOKEN: &str = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
const PAYER: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
const SELLER: &str = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";

fn hash(n: u64) -> String {
    format!("0x{n:064x}")
}

fn position(tx: u64, index: u64, block: u64) -> EventPosition {
    EventPosition {
        tx_id: hash(tx),
        event_index: index,
        block_number: block,
        block_hash: hash(1_000_000 + block),
        block_time: Some(1_700_000_000 + block as i64),
    }
}

/// One payment (tx `tx`, block `block`) plus one plain transfer from the payer to the seller
/// (which can refund nothing, so the store does not keep it), as a batch over `from..=to`.
fn batch(from: u64, to: u64, tx: u64, block: u64) -> Batch {
    let transfer = TransferRecord {
        position: position(tx, 1, block),
        token: TOKEN.to_string(),
        from: PAYER.to_string(),
        to: SELLER.to_string(),
        value: U256::from(10_000u64),
        memo: None,
    };
    let plain = TransferRecord {
        position: position(tx + 1, 0, block),
        value: U256::from(5u64),
        ..transfer.clone()
    };
    Batch {
        from_block: from,
        to_block: to,
        authorizations: vec![AuthorizationRecord {
            position: position(tx, 0, block),
            token: TOKEN.to_string(),
            authorizer: PAYER.to_string(),
            nonce: hash(42),
        }],
        payments: vec![PaymentRecord {
            payment_id: hash(tx),
            index_in_tx: 0,
            transfer: transfer.position.clone(),
            payer: PAYER.to_string(),
            pay_to: SELLER.to_string(),
            amount: transfer.value,
            asset: TOKEN.to_string(),
            method: PaymentMethod::Eip3009,
            nonce: Some(hash(42)),
            max_amount: None,
            fee_amount: None,
            memo: None,
            facilitator: None,
        }],
        transfers: vec![transfer, plain],
        blocks: vec![BlockRecord {
            number: to,
            hash: hash(1_000_000 + to),
            parent_hash: Some(hash(1_000_000 + to - 1)),
        }],
        ..Batch::default()
    }
}

/// The refunds tied to the payment of transaction 1: (refund transaction, amount, rule).
async fn refunds_of_payment_1(store: &paywatch_store::Store) -> Vec<(String, String, String)> {
    store
        .refunds_of(NET, &hash(1), 0)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.refund_tx_id, r.amount, r.rule.to_string()))
        .collect()
}

fn head(head: u64, final_block: Option<u64>) -> HeadUpdate {
    HeadUpdate {
        head,
        final_block,
        refund_window_secs: 3600,
        paid_lag_secs: None,
        kept_wallets: Vec::new(),
    }
}

fn tokens() -> Vec<String> {
    vec![TOKEN.to_string()]
}

async fn batch_and_cursor_commit_together_or_not_at_all(kind: Kind) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    store
        .commit_batch(NET, &tokens(), &batch(0, 9, 1, 5), &head(9, None))
        .await
        .unwrap();
    assert_eq!(store.row_counts(NET).await.unwrap(), (1, 0, 1));
    assert_eq!(store.cursors(NET).await.unwrap()[0].next_block, 10);

    // The second batch fails at its last statement (a block number the database cannot hold):
    // none of its rows may stay, and the cursor must not move.
    let mut bad = batch(10, 19, 10, 15);
    bad.blocks.push(BlockRecord {
        number: u64::MAX,
        hash: hash(7),
        parent_hash: None,
    });
    let error = store
        .commit_batch(NET, &tokens(), &bad, &head(19, None))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::OutOfRange { .. }), "{error}");
    assert_eq!(store.row_counts(NET).await.unwrap(), (1, 0, 1));
    assert!(store.payments_by_id(NET, &hash(10)).await.unwrap().is_empty());
    assert_eq!(store.cursors(NET).await.unwrap()[0].next_block, 10);
}
on_both_stores!(
    batch_and_cursor_commit_together_or_not_at_all,
    batch_and_cursor_commit_together_or_not_at_all
);

async fn writes_are_idempotent(kind: Kind) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let b = batch(0, 9, 1, 5);
    for _ in 0..3 {
        store
            .commit_batch(NET, &tokens(), &b, &head(9, None))
            .await
            .unwrap();
    }
    assert_eq!(store.row_counts(NET).await.unwrap(), (1, 0, 1));
    let payments = store.payments_by_id(NET, &hash(1)).await.unwrap();
    assert_eq!(payments.len(), 1);
    let p = &payments[0];
    assert_eq!(
        (p.payer.as_str(), p.pay_to.as_str(), p.amount.as_str()),
        (PAYER, SELLER, "10000")
    );
    assert_eq!(
        (p.asset.as_str(), p.nonce.as_deref()),
        (TOKEN, Some(hash(42).as_str()))
    );
    assert_eq!((p.block_number, p.state), (5, PaymentState::Pending));
}
on_both_stores!(writes_are_idempotent, writes_are_idempotent);

async fn finality_promotes_exactly_what_is_final(kind: Kind) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    store
        .commit_batch(NET, &tokens(), &batch(0, 5, 1, 5), &head(5, None))
        .await
        .unwrap();
    store
        .commit_batch(NET, &tokens(), &batch(6, 8, 3, 8), &head(8, Some(4)))
        .await
        .unwrap();
    let state = |id| {
        let store = store.clone();
        async move { store.payments_by_id(NET, &hash(id)).await.unwrap()[0].state }
    };
    assert_eq!(
        (state(1).await, state(3).await),
        (PaymentState::Pending, PaymentState::Pending)
    );
    assert_eq!(store.record_head(NET, &head(9, Some(5))).await.unwrap(), 1);
    assert_eq!(
        (state(1).await, state(3).await),
        (PaymentState::Paid, PaymentState::Pending)
    );
    assert_eq!(store.record_head(NET, &head(12, Some(8))).await.unwrap(), 1);
    assert_eq!(state(3).await, PaymentState::Paid);
    let head = store.chain_head(NET).await.unwrap().unwrap();
    assert_eq!((head.head_block, head.final_block), (12, Some(8)));
}
on_both_stores!(
    finality_promotes_exactly_what_is_final,
    finality_promotes_exactly_what_is_final
);

async fn rollback_drops_then_reinclusion_revives_one_payment(kind: Kind) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    store
        .commit_batch(NET, &tokens(), &batch(0, 4, 1, 3), &head(4, None))
        .await
        .unwrap();
    store
        .commit_batch(NET, &tokens(), &batch(5, 9, 5, 7), &head(9, None))
        .await
        .unwrap();

    let summary = store.rollback_after(NET, 5).await.unwrap();
    assert_eq!(
        (summary.transfers, summary.authorizations, summary.pending_dropped),
        (1, 0, 1),
        "a payment's authorization is its row's nonce, not a row of its own"
    );
    assert_eq!(summary.paid_dropped, 0);
    assert_eq!(store.cursors(NET).await.unwrap()[0].next_block, 6);
    assert_eq!(
        store.blocks_descending(NET, 1_000, 10).await.unwrap()[0].number,
        4
    );
    let dropped = store.payments_by_id(NET, &hash(5)).await.unwrap();
    assert_eq!(dropped[0].state, PaymentState::Dropped);
    assert_eq!(
        store.payments_by_id(NET, &hash(1)).await.unwrap()[0].state,
        PaymentState::Pending
    );

    // The same transaction mined again in block 8 on the new chain: one payment, pending again.
    store
        .commit_batch(NET, &tokens(), &batch(6, 9, 5, 8), &head(9, None))
        .await
        .unwrap();
    let revived = store.payments_by_id(NET, &hash(5)).await.unwrap();
    assert_eq!(revived.len(), 1);
    assert_eq!(
        (revived[0].state, revived[0].block_number),
        (PaymentState::Pending, 8)
    );
    assert_eq!(store.row_counts(NET).await.unwrap(), (2, 0, 2));
}
on_both_stores!(
    rollback_drops_then_reinclusion_revives_one_payment,
    rollback_drops_then_reinclusion_revives_one_payment
);

/// A payment's own transfer is no row of its own: its payment row holds it, and every
/// reader gets it back fact for fact — the audit's read of blocks, the counts, the listing
/// (with the payment it moved, page by page across both sources) and the refund rules (a
/// refund that is itself a Permit2 payment is tied from its row). A transfer whose payment
/// says more than it (a memo) and one no payment moved keep their rows. A rollback
/// forgets the dropped payments' transfers with them; reinclusion brings them back.
async fn a_payments_transfer_is_read_from_its_row(kind: Kind) {
    const OTHER: &str = "0x90f79bf6eb2c4f870365e785982e1f101e93b906";
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    // Block 5: the payment (tx 1) and a transfer from its payer to its seller (tx 2), kept
    // because it runs on the refund route of the payment in block 6.
    let mut blocks = batch(0, 6, 1, 5);
    let paid = blocks.transfers[0].clone();
    let on_route = blocks.transfers[1].clone();
    // Block 6: the seller pays 400 back to the payer by Permit2 (tx 20), a payment itself
    // and a refund of tx 1; and a payment (tx 21) whose record carries a memo its transfer
    // does not (its row cannot stand for the transfer).
    let paid_back = plain(SELLER, PAYER, 400, 20, 0, 6);
    let with_memo = plain(OTHER, SELLER, 50, 21, 1, 6);
    blocks.transfers.extend([paid_back.clone(), with_memo.clone()]);
    blocks.payments.extend([
        PaymentRecord {
            nonce: Some("7".to_string()),
            ..PaymentRecord::paid_by(&paid_back, 0, PaymentMethod::Permit2)
        },
        PaymentRecord {
            memo: Some("order 7".to_string()),
            ..PaymentRecord::paid_by(&with_memo, 0, PaymentMethod::Permit2)
        },
    ]);
    // A refund window long enough that the transfer on the route is not pruned.
    let final_at_6 = HeadUpdate {
        refund_window_secs: 1_000_000_000,
        ..head(6, Some(6))
    };
    let committed = store
        .commit_batch(NET, &tokens(), &blocks, &final_at_6)
        .await
        .unwrap();
    assert_eq!(
        (
            committed.transfers_kept,
            committed.transfers_skipped,
            committed.transfers_pruned
        ),
        (4, 0, 0)
    );
    assert_eq!(store.row_counts(NET).await.unwrap(), (4, 0, 3));
    assert_eq!(
        stores::table_rows(&db, "transfers", NET).await,
        2,
        "rows only for the transfer on the route and the one whose payment has a memo"
    );
    assert_eq!(
        store.transfers_in_blocks(NET, 0, 6).await.unwrap(),
        [
            on_route.clone(),
            paid.clone(),
            paid_back.clone(),
            with_memo.clone()
        ],
        "each transfer read back as it was committed"
    );
    let refunds = refunds_of_payment_1(&store).await;
    assert_eq!(
        refunds,
        [(hash(20), "400".to_string(), RefundRule::Matching.to_string())]
    );

    let all = stores::every_transfer(NET);
    let listed = store.list_transfers(&all, None, 100).await.unwrap();
    let roles: Vec<_> = listed
        .iter()
        .map(|t| (t.transfer.clone(), t.paid.clone(), t.refunded.clone()))
        .collect();
    assert_eq!(
        roles,
        [
            (paid.clone(), Some((hash(1), 0)), None),
            (on_route.clone(), None, None),
            (
                paid_back.clone(),
                Some((hash(20), 0)),
                Some((hash(1), 0, RefundRule::Matching))
            ),
            (with_memo.clone(), Some((hash(21), 0)), None),
        ],
        "in chain order: block, transaction, event index"
    );
    let mut paged = Vec::new();
    let mut after: Option<TransferCursor> = None;
    loop {
        let page = store.list_transfers(&all, after.as_ref(), 1).await.unwrap();
        let Some(last) = page.last() else { break };
        after = Some(TransferCursor {
            block_number: last.transfer.position.block_number,
            tx_id: last.transfer.position.tx_id.clone(),
            event_index: last.transfer.position.event_index,
        });
        paged.extend(page);
    }
    assert_eq!(paged, listed, "pages of one, across both sources, list the same");
    let from_seller = TransferFilter {
        from_address: Some(SELLER.to_string()),
        ..all.clone()
    };
    let listed = store.list_transfers(&from_seller, None, 100).await.unwrap();
    assert_eq!(
        listed.iter().map(|t| &t.transfer).collect::<Vec<_>>(),
        [&paid_back]
    );

    let summary = store.rollback_after(NET, 5).await.unwrap();
    assert_eq!(
        (summary.transfers, summary.paid_dropped),
        (2, 2),
        "both of block 6's transfers forgotten, the one held by its payment too"
    );
    assert_eq!(store.row_counts(NET).await.unwrap(), (2, 0, 3));
    assert_eq!(stores::table_rows(&db, "transfers", NET).await, 1);
    assert!(store.refunds_of(NET, &hash(1), 0).await.unwrap().is_empty());

    let mut again = blocks.clone();
    again.from_block = 6;
    again.transfers.drain(..2);
    again.payments.remove(0);
    again.authorizations.clear();
    store
        .commit_batch(NET, &tokens(), &again, &final_at_6)
        .await
        .unwrap();
    assert_eq!(store.row_counts(NET).await.unwrap(), (4, 0, 3));
    assert_eq!(
        store.transfers_in_blocks(NET, 6, 6).await.unwrap(),
        [paid_back, with_memo]
    );
}
on_both_stores!(
    a_payments_transfer_is_read_from_its_row,
    a_payments_transfer_is_read_from_its_row
);

async fn first_start_cursors_never_overwrite(kind: Kind) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let cursor = |next_block| TokenCursor {
        token: TOKEN.to_string(),
        next_block,
    };
    store.init_cursors(NET, &[cursor(100)]).await.unwrap();
    store.init_cursors(NET, &[cursor(0)]).await.unwrap();
    assert_eq!(store.cursors(NET).await.unwrap(), vec![cursor(100)]);
}
on_both_stores!(
    first_start_cursors_never_overwrite,
    first_start_cursors_never_overwrite
);

async fn vanished_pending_payments_are_dropped_and_can_return(kind: Kind) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    store
        .commit_batch(NET, &tokens(), &batch(0, 9, 1, 5), &head(9, None))
        .await
        .unwrap();
    assert_eq!(store.pending_payments(NET, 4).await.unwrap(), vec![]);
    let key = PaymentKey {
        payment_id: hash(1),
        index_in_tx: 0,
    };
    assert_eq!(
        store.pending_payments(NET, 5).await.unwrap(),
        vec![(key.clone(), 5)]
    );

    // The worker found the transaction gone at a final slot: dropped, with its cause, and
    // the same verdict again changes nothing.
    let vanished = Batch {
        vanished_payments: vec![key.clone()],
        ..Batch::default()
    };
    for _ in 0..2 {
        store
            .commit_batch(NET, &[], &vanished, &head(20, Some(10)))
            .await
            .unwrap();
    }
    let payment = &store.payments_by_id(NET, &hash(1)).await.unwrap()[0];
    assert_eq!(
        payment.state,
        PaymentState::Dropped,
        "dropped, never promoted to paid"
    );
    let history = store.history_of(NET, &hash(1), 0).await.unwrap();
    let causes: Vec<&str> = history.iter().map(|h| h.cause.as_str()).collect();
    assert_eq!(causes, ["seen", "vanished"]);
    assert_eq!(
        store.cursors(NET).await.unwrap()[0].next_block,
        10,
        "no cursor moved"
    );

    // Listed again (landed in a later slot): one payment, pending, then paid.
    store
        .commit_batch(NET, &tokens(), &batch(10, 19, 1, 15), &head(20, Some(12)))
        .await
        .unwrap();
    assert_eq!(
        store.payments_by_id(NET, &hash(1)).await.unwrap()[0].state,
        PaymentState::Pending
    );
    store.record_head(NET, &head(30, Some(15))).await.unwrap();
    let payments = store.payments_by_id(NET, &hash(1)).await.unwrap();
    assert_eq!((payments.len(), payments[0].state), (1, PaymentState::Paid));
}
on_both_stores!(
    vanished_pending_payments_are_dropped_and_can_return,
    vanished_pending_payments_are_dropped_and_can_return
);

async fn leases_fence_the_writes_of_their_owner(kind: Kind) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let job = "worker:eip155:31337";
    let ttl = std::time::Duration::from_secs(30);
    assert!(store.acquire_lease(job, "a", ttl).await.unwrap());
    assert!(!store.acquire_lease(job, "b", ttl).await.unwrap(), "held by a");
    assert!(store.acquire_lease(job, "a", ttl).await.unwrap(), "a renews");
    let (as_a, as_b) = (store.fenced(job, "a"), store.fenced(job, "b"));
    as_a.commit_batch(NET, &tokens(), &batch(0, 9, 1, 5), &head(9, None))
        .await
        .unwrap();
    let refused = as_b
        .commit_batch(NET, &tokens(), &batch(10, 19, 10, 15), &head(19, None))
        .await
        .unwrap_err();
    assert!(matches!(refused, StoreError::LeaseLost { .. }), "{refused}");
    assert_eq!(
        store.cursors(NET).await.unwrap()[0].next_block,
        10,
        "b wrote nothing"
    );

    // a hands over: b takes the lease, and a's writes are refused from then on.
    store.release_lease(job, "a").await.unwrap();
    assert!(store.acquire_lease(job, "b", ttl).await.unwrap());
    let refused = as_a.record_head(NET, &head(20, None)).await.unwrap_err();
    assert!(matches!(refused, StoreError::LeaseLost { .. }), "{refused}");
    as_b.commit_batch(NET, &tokens(), &batch(10, 19, 10, 15), &head(19, None))
        .await
        .unwrap();
    assert_eq!(store.cursors(NET).await.unwrap()[0].next_block, 20);

    // A lease that is not renewed lapses, by the database's clock, and another takes it.
    let short = std::time::Duration::from_millis(200);
    assert!(store.acquire_lease(job, "b", short).await.unwrap());
    assert!(!store.acquire_lease(job, "c", ttl).await.unwrap());
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let leases = store.leases().await.unwrap();
    assert_eq!((leases[0].owner.as_str(), leases[0].expired), ("b", true));
    assert!(store.acquire_lease(job, "c", ttl).await.unwrap());
    let refused = as_b.record_head(NET, &head(21, None)).await.unwrap_err();
    assert!(matches!(refused, StoreError::LeaseLost { .. }), "{refused}");
    let leases = store.leases().await.unwrap();
    assert_eq!((leases[0].owner.as_str(), leases[0].expired), ("c", false));
}
on_both_stores!(leases_fence_writes, leases_fence_the_writes_of_their_owner);

async fn audits_are_read_back_by_how_far_they_reached(kind: Kind) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let audit = |first_block, last_block, source, scheduled, differences| AuditRecord {
        network: NET.to_string(),
        first_block,
        last_block,
        source,
        scheduled,
        differences,
        repaired: 0,
        finished_ms: 1_700_000_000_000 + last_block as i64,
    };
    assert_eq!(store.last_audit(NET, AuditKind::Any).await.unwrap(), None);
    let scheduled = audit(0, 99, AuditSource::Receipts, true, 2);
    store.record_audit(&scheduled, &[], false).await.unwrap();
    store
        .record_audit(&audit(100, 149, AuditSource::Receipts, true, 0), &[], false)
        .await
        .unwrap();
    let by_hand = audit(0, 500, AuditSource::Verifier, false, 1);
    store.record_audit(&by_hand, &[], false).await.unwrap();
    let other_network = AuditRecord {
        network: "eip155:8453".to_string(),
        ..audit(0, 900, AuditSource::Receipts, true, 0)
    };
    store.record_audit(&other_network, &[], false).await.unwrap();
    assert_eq!(
        store.last_audit(NET, AuditKind::Any).await.unwrap(),
        Some(by_hand),
        "the audit that reached furthest, whoever ran it"
    );
    assert_eq!(
        store.last_audit(NET, AuditKind::Scheduled).await.unwrap(),
        Some(audit(100, 149, AuditSource::Receipts, true, 0)),
        "the schedule continues after its own last audit"
    );

    // An audit is a write: a store fenced by a lease another holds records nothing.
    let job = "audit:eip155:31337";
    let ttl = std::time::Duration::from_secs(30);
    assert!(store.acquire_lease(job, "a", ttl).await.unwrap());
    let refused = store
        .fenced(job, "b")
        .record_audit(&audit(150, 199, AuditSource::Receipts, true, 0), &[], false)
        .await
        .unwrap_err();
    assert!(matches!(refused, StoreError::LeaseLost { .. }), "{refused}");
    assert_eq!(
        store
            .last_audit(NET, AuditKind::Scheduled)
            .await
            .unwrap()
            .unwrap()
            .last_block,
        149
    );
}
on_both_stores!(audits_read_back, audits_are_read_back_by_how_far_they_reached);

async fn concurrent_lookups_each_get_their_own_answer(kind: Kind) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    // Twenty payments, one a block; transaction 100 settles two payments.
    for n in 0..20u64 {
        let mut batch = batch(n, n, 10 * (n + 1), n);
        if n == 9 {
            let mut second = batch.payments[0].clone();
            second.index_in_tx = 1;
            second.amount = U256::from(7u64);
            batch.payments.push(second);
        }
        store
            .commit_batch(NET, &tokens(), &batch, &head(n, None))
            .await
            .unwrap();
    }
    // The second payment of transaction 100 has a revealed intent.
    let intent = paywatch_store::BoundIntent {
        method: "GET".to_string(),
        url: "https://api.example/report".to_string(),
        body_sha256: None,
        class: "report".to_string(),
        max_atomic: "7".to_string(),
        salt: hash(9),
    };
    store.bind_intent(NET, &hash(100), 1, &intent).await.unwrap();
    // Many lookups at once, more than one statement answers: stored payments, repeats,
    // ids never stored, and another network's.
    let asked: Vec<(&str, String)> = (0..(3 * paywatch_store::MAX_COALESCED as u64))
        .map(|i| {
            let network = if i % 17 == 0 { "eip155:1" } else { NET };
            (network, hash(5 * (i % 50)))
        })
        .collect();
    let answers = futures::future::join_all(
        asked
            .iter()
            .map(|(network, id)| store.lookup_payments(network, id)),
    )
    .await;
    let mut found = 0;
    for ((network, id), answer) in asked.iter().zip(answers) {
        let answer = answer.unwrap();
        let expected = store.payments_by_id(network, id).await.unwrap();
        let payments: Vec<_> = answer.iter().map(|l| l.payment.clone()).collect();
        assert_eq!(payments, expected, "{network} {id}");
        for lookup in &answer {
            assert_eq!(lookup.head_block, Some(19), "{network} {id}");
            assert_eq!(lookup.refund_count, 0);
            let bound = *id == hash(100) && lookup.payment.index_in_tx == 1;
            assert_eq!(lookup.intent, bound.then(|| intent.clone()), "{id}");
        }
        found += usize::from(!answer.is_empty());
    }
    assert!(found > 50, "most asked payments exist ({found})");
    let two = store.lookup_payments(NET, &hash(100)).await.unwrap();
    assert_eq!(
        two.iter()
            .map(|l| (l.payment.index_in_tx, l.payment.amount.clone()))
            .collect::<Vec<_>>(),
        vec![(0, "10000".to_string()), (1, "7".to_string())]
    );
}
on_both_stores!(concurrent_lookups, concurrent_lookups_each_get_their_own_answer);

async fn a_reread_never_overwrites_a_final_payment_with_other_facts(kind: Kind) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let original = batch(0, 9, 1, 5);
    let other_seller = "0x90f79bf6eb2c4f870365e785982e1f101e93b906";
    let mut contradicting = original.clone();
    contradicting.payments[0].pay_to = other_seller.to_string();
    contradicting.payments[0].amount = U256::from(7u64);

    // Not final yet: the same transaction may execute differently on another fork, so the
    // new answer's facts replace the old ones.
    store
        .commit_batch(NET, &tokens(), &original, &head(9, None))
        .await
        .unwrap();
    store
        .commit_batch(NET, &tokens(), &contradicting, &head(9, None))
        .await
        .unwrap();
    let p = &store.payments_by_id(NET, &hash(1)).await.unwrap()[0];
    assert_eq!((p.pay_to.as_str(), p.amount.as_str()), (other_seller, "7"));

    // Final: the stored facts stand and the contradicting batch is refused whole.
    store
        .commit_batch(NET, &tokens(), &original, &head(9, Some(9)))
        .await
        .unwrap();
    let p = &store.payments_by_id(NET, &hash(1)).await.unwrap()[0];
    assert_eq!(
        (p.pay_to.as_str(), p.amount.as_str(), p.state),
        (SELLER, "10000", PaymentState::Paid)
    );
    let error = store
        .commit_batch(NET, &tokens(), &contradicting, &head(9, Some(9)))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, StoreError::ConflictingPayment { index_in_tx: 0, stored, answered, .. }
            if stored.contains(SELLER) && stored.contains("10000") && answered.contains(other_seller)),
        "{error}"
    );
    let p = &store.payments_by_id(NET, &hash(1)).await.unwrap()[0];
    assert_eq!((p.pay_to.as_str(), p.amount.as_str()), (SELLER, "10000"));
}
on_both_stores!(
    final_payments_keep_their_facts,
    a_reread_never_overwrites_a_final_payment_with_other_facts
);

async fn totals_are_exact_beyond_64_bits(kind: Kind) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    // Amounts far beyond what a 64-bit (or 128-bit) sum holds; their total is still exact.
    let huge = U256::MAX / U256::from(3u64);
    for (tx, amount) in [(1, huge), (3, huge), (5, U256::from(7u64))] {
        let mut one = batch(tx * 10, tx * 10 + 9, tx, tx * 10 + 5);
        one.payments[0].amount = amount;
        one.transfers[0].value = amount;
        one.authorizations[0].nonce = hash(tx);
        one.payments[0].nonce = Some(hash(tx));
        store
            .commit_batch(NET, &tokens(), &one, &head(tx * 10 + 9, None))
            .await
            .unwrap();
    }
    let filter = paywatch_core::listing::PaymentFilter::of(NET.parse().unwrap());
    let totals = store
        .totals(&filter, paywatch_core::listing::TotalsKey::Asset)
        .await
        .unwrap();
    assert_eq!(totals.len(), 1, "{totals:?}");
    assert_eq!(totals[0].key.as_deref(), Some(TOKEN));
    assert_eq!(totals[0].state, PaymentState::Pending);
    assert_eq!(totals[0].payments, 3);
    assert_eq!(totals[0].amount, huge + huge + U256::from(7u64));
    assert_eq!(totals[0].refunded_amount, U256::ZERO);

    // By UTC day of the block time (1_700_000_015 .. 1_700_000_055: 2023-11-14).
    let by_day = store
        .totals(&filter, paywatch_core::listing::TotalsKey::Day)
        .await
        .unwrap();
    assert_eq!(by_day.len(), 1, "{by_day:?}");
    assert_eq!(by_day[0].key.as_deref(), Some("2023-11-14"));
    // No facilitator recorded: no key.
    let by_facilitator = store
        .totals(&filter, paywatch_core::listing::TotalsKey::Facilitator)
        .await
        .unwrap();
    assert_eq!(by_facilitator[0].key, None);
    assert_eq!(by_facilitator[0].payments, 3);
}
on_both_stores!(totals_are_exact_beyond_64_bits, totals_are_exact_beyond_64_bits);

/// A plain transfer of the payment's asset from `from` to `to` at `(tx, index)` in `block`.
fn plain(from: &str, to: &str, value: u64, tx: u64, index: u64, block: u64) -> TransferRecord {
    TransferRecord {
        position: position(tx, index, block),
        token: TOKEN.to_string(),
        from: from.to_string(),
        to: to.to_string(),
        value: U256::from(value),
        memo: None,
    }
}

/// The store keeps a payment's transfer and what can refund a payment — from its seller
/// to its payer in its asset, whether the payment is stored already or in the same batch,
/// wherever in the batch — and nothing else: a busy token's unrelated traffic, and
/// transfers between the same two parties before any payment, are counted and dropped.
/// Of the authorizations, only one that released a kept transfer other than its payment's
/// is kept (a refund sent by EIP-3009, whose nonce names the payment); the payment's own
/// is its row's nonce, and someone else's names nothing stored. Refunds are tied as before.
async fn only_payments_and_possible_refunds_are_kept(kind: Kind) {
    const OTHER: &str = "0x90f79bf6eb2c4f870365e785982e1f101e93b906";
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let before_any = Batch {
        from_block: 0,
        to_block: 2,
        transfers: vec![
            plain(SELLER, PAYER, 3, 90, 0, 1),
            plain(OTHER, PAYER, 7, 91, 0, 2),
        ],
        ..Batch::default()
    };
    let committed = store
        .commit_batch(NET, &tokens(), &before_any, &head(2, None))
        .await
        .unwrap();
    assert_eq!((committed.transfers_kept, committed.transfers_skipped), (0, 2));

    // The payment in block 5, its refund in block 6 listed first (sent by EIP-3009 with a
    // nonce that commits to the payment), and noise, one of it by EIP-3009 too.
    let mut with_payment = batch(3, 6, 1, 5);
    with_payment
        .transfers
        .insert(0, plain(SELLER, PAYER, 400, 92, 1, 6));
    let payment_id: alloy_primitives::B256 = hash(1).parse().unwrap();
    with_payment.authorizations.extend([
        AuthorizationRecord {
            position: position(92, 0, 6),
            token: TOKEN.to_string(),
            authorizer: SELLER.to_string(),
            nonce: refund_nonce(payment_id).to_string(),
        },
        AuthorizationRecord {
            position: position(93, 0, 6),
            token: TOKEN.to_string(),
            authorizer: OTHER.to_string(),
            nonce: hash(77),
        },
    ]);
    with_payment.transfers.push(plain(OTHER, SELLER, 9, 93, 1, 6));
    with_payment.transfers.push(plain(PAYER, OTHER, 9, 94, 0, 6));
    let committed = store
        .commit_batch(NET, &tokens(), &with_payment, &head(6, None))
        .await
        .unwrap();
    assert_eq!(
        (
            committed.transfers_kept,
            committed.transfers_skipped,
            committed.authorizations_kept
        ),
        (2, 3, 1),
        "of the three authorizations only the refund's is kept"
    );

    // A later batch: a second refund of the stored payment, and noise again.
    let later = Batch {
        from_block: 7,
        to_block: 20,
        transfers: vec![
            plain(SELLER, PAYER, 600, 95, 0, 8),
            plain(SELLER, OTHER, 600, 96, 0, 8),
        ],
        ..Batch::default()
    };
    let committed = store
        .commit_batch(NET, &tokens(), &later, &head(20, Some(20)))
        .await
        .unwrap();
    assert_eq!((committed.transfers_kept, committed.transfers_skipped), (1, 1));
    assert_eq!(store.row_counts(NET).await.unwrap(), (3, 1, 1));

    let refunds = refunds_of_payment_1(&store).await;
    assert_eq!(
        refunds,
        [
            (
                hash(92),
                "400".to_string(),
                RefundRule::NonceCommitment.to_string()
            ),
            (hash(95), "600".to_string(), RefundRule::Matching.to_string())
        ]
    );
    let payment = &store.payments_by_id(NET, &hash(1)).await.unwrap()[0];
    assert_eq!(
        (payment.state, payment.refunded_amount.as_str()),
        (PaymentState::PartiallyRefunded, "1000")
    );
}
on_both_stores!(
    only_payments_and_possible_refunds_are_kept,
    only_payments_and_possible_refunds_are_kept
);

/// What audits found is read back per payment: a finding about the payment, about a
/// transfer of its transaction, or about one of its refunds' transfers — not about another
/// payment or another network; a finding recorded twice is kept once.
async fn audit_findings_are_read_back_per_payment(kind: Kind) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    // Payment 1 in block 5, refunded by tx 92 in block 6; payment 3 in block 7.
    let mut first = batch(0, 6, 1, 5);
    first.transfers.push(plain(SELLER, PAYER, 400, 92, 0, 6));
    store
        .commit_batch(NET, &tokens(), &first, &head(6, Some(6)))
        .await
        .unwrap();
    store
        .commit_batch(NET, &tokens(), &batch(7, 7, 3, 7), &head(7, Some(7)))
        .await
        .unwrap();
    assert_eq!(store.refunds_of(NET, &hash(1), 0).await.unwrap().len(), 1);

    let finding = |subject, tx: u64, position, block, difference: &str| AuditFinding {
        subject,
        tx_id: hash(tx),
        position,
        block_number: block,
        refund_route: None,
        difference: difference.to_string(),
    };
    let made_up_refund = finding(
        FindingSubject::Transfer,
        92,
        0,
        6,
        r#"{"difference":"made_up_transfer"}"#,
    );
    let differing = finding(
        FindingSubject::Payment,
        1,
        0,
        5,
        r#"{"difference":"differing_payment"}"#,
    );
    let record = AuditRecord {
        network: NET.to_string(),
        first_block: 0,
        last_block: 7,
        source: AuditSource::Verifier,
        scheduled: true,
        differences: 2,
        repaired: 0,
        finished_ms: 1_700_000_000_000,
    };
    store
        .record_audit(&record, &[made_up_refund.clone(), differing.clone()], false)
        .await
        .unwrap();
    // Found again by a later audit, and a finding on another network.
    store
        .record_audit(&record, std::slice::from_ref(&made_up_refund), false)
        .await
        .unwrap();
    let elsewhere = AuditRecord {
        network: "eip155:8453".to_string(),
        ..record.clone()
    };
    store
        .record_audit(
            &elsewhere,
            &[finding(FindingSubject::Payment, 3, 0, 7, "{}")],
            false,
        )
        .await
        .unwrap();

    let mut about_first = store.findings_about(NET, &hash(1), 0).await.unwrap();
    about_first.sort();
    let mut expected = vec![made_up_refund.difference, differing.difference];
    expected.sort();
    assert_eq!(about_first, expected);
    assert!(store.findings_about(NET, &hash(3), 0).await.unwrap().is_empty());
    assert!(
        store.findings_about(NET, &hash(1), 1).await.unwrap().is_empty(),
        "another payment of the same transaction"
    );

    // A transfer of the payment's own transaction.
    store
        .record_audit(
            &record,
            &[finding(
                FindingSubject::Transfer,
                3,
                1,
                7,
                r#"{"difference":"differing_transfer"}"#,
            )],
            false,
        )
        .await
        .unwrap();
    assert_eq!(
        store.findings_about(NET, &hash(3), 0).await.unwrap(),
        [r#"{"difference":"differing_transfer"}"#]
    );

    // A transfer back the store lacks, in block 6 on the route of both payments: it may
    // refund the earlier one (block 5), not the later one (block 7).
    let missing_refund = AuditFinding {
        refund_route: Some(RefundRoute {
            from: SELLER.to_string(),
            to: PAYER.to_string(),
            asset: TOKEN.to_string(),
        }),
        ..finding(
            FindingSubject::Transfer,
            97,
            0,
            6,
            r#"{"difference":"missing_transfer"}"#,
        )
    };
    store
        .record_audit(&record, &[missing_refund], false)
        .await
        .unwrap();
    let about_first = store.findings_about(NET, &hash(1), 0).await.unwrap();
    assert_eq!(about_first.len(), 3, "{about_first:?}");
    assert!(about_first.contains(&r#"{"difference":"missing_transfer"}"#.to_string()));
    assert_eq!(store.findings_about(NET, &hash(3), 0).await.unwrap().len(), 1);
}
on_both_stores!(audit_findings, audit_findings_are_read_back_per_payment);

/// Under `verification = "lagging"` a lookup is verified only once the scheduled audit has
/// covered every block its state is made of: the payment's and its refunds'.
async fn lagging_verification_covers_a_payments_refunds(kind: Kind) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    // Payment 1 in block 5, refunded by tx 92 in block 8 (final at 8).
    store
        .commit_batch(NET, &tokens(), &batch(0, 5, 1, 5), &head(5, Some(5)))
        .await
        .unwrap();
    let refund = Batch {
        from_block: 6,
        to_block: 8,
        transfers: vec![plain(SELLER, PAYER, 400, 92, 0, 8)],
        ..Batch::default()
    };
    store
        .commit_batch(NET, &tokens(), &refund, &head(8, Some(8)))
        .await
        .unwrap();
    let chains = paywatch_core::config::parse_chains(
        &format!(
            "[networks.\"{NET}\"]\nrpc_urls = [\"http://127.0.0.1:1\"]\nverify_rpc_urls = [\"http://127.0.0.1:2\"]\n\
             verification = \"lagging\"\naudit_interval_secs = 60\n\n[[networks.\"{NET}\".tokens]]\naddress = \"{TOKEN}\"\ndecimals = 6\n"
        ),
        "chains.toml",
        |_| None,
    )
    .unwrap();
    let queries = paywatch_query::Queries::new(store.clone(), std::sync::Arc::new(chains));
    let scheduled = |first_block, last_block| AuditRecord {
        network: NET.to_string(),
        first_block,
        last_block,
        source: AuditSource::Verifier,
        scheduled: true,
        differences: 0,
        repaired: 0,
        finished_ms: 1_700_000_000_000 + last_block as i64,
    };

    store.record_audit(&scheduled(0, 6), &[], false).await.unwrap();
    let view = paywatch_query::lookup_payment(&queries, NET, &hash(1), None)
        .await
        .unwrap();
    assert_eq!(view.refunds.len(), 1, "{view:?}");
    assert_eq!(view.verified, Some(false));
    let reason = view.unverified_reason.unwrap();
    assert!(
        reason.contains("reached block 6") && reason.contains("last refund or escrow event is in block 8"),
        "{reason}"
    );

    store.record_audit(&scheduled(7, 8), &[], false).await.unwrap();
    let view = paywatch_query::lookup_payment(&queries, NET, &hash(1), None)
        .await
        .unwrap();
    assert_eq!((view.verified, view.unverified_reason), (Some(true), None));
}
on_both_stores!(
    lagging_verification_of_refunds,
    lagging_verification_covers_a_payments_refunds
);

/// Transfers kept only as possible refunds are pruned once the refund rules examined them
/// and they are older than the refund window, with the authorizations that released them;
/// a payment's transfer, a tied refund and a transfer still inside the window (and its
/// authorization) stay.
async fn examined_old_candidates_are_pruned(kind: Kind) {
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut first = batch(0, 9, 1, 5);
    first.transfers = vec![first.transfers[0].clone()];
    let tied = plain(SELLER, PAYER, 400, 20, 0, 6);
    let too_large = plain(SELLER, PAYER, 50_000, 21, 1, 7);
    let young = TransferRecord {
        position: EventPosition {
            block_time: Some(now),
            ..position(22, 1, 8)
        },
        ..plain(SELLER, PAYER, 60_000, 22, 1, 8)
    };
    let released = |tx: u64, block: u64| AuthorizationRecord {
        position: position(tx, 0, block),
        token: TOKEN.to_string(),
        authorizer: SELLER.to_string(),
        nonce: hash(1_000 + tx),
    };
    first.authorizations.extend([released(21, 7), released(22, 8)]);
    first.transfers.extend([tied, too_large, young]);
    let committed = store
        .commit_batch(NET, &tokens(), &first, &head(9, Some(9)))
        .await
        .unwrap();
    assert_eq!(
        (committed.transfers_kept, committed.transfers_pruned),
        (4, 1),
        "the untied old candidate is pruned"
    );
    assert_eq!(store.row_counts(NET).await.unwrap(), (3, 1, 1));
    let refunds = store.refunds_of(NET, &hash(1), 0).await.unwrap();
    assert_eq!(refunds.len(), 1);
    assert_eq!(refunds[0].refund_tx_id, hash(20));

    // The next batch goes on from where pruning stopped: the young transfer stays.
    let second = Batch {
        from_block: 10,
        to_block: 12,
        ..Batch::default()
    };
    let committed = store
        .commit_batch(NET, &tokens(), &second, &head(12, Some(12)))
        .await
        .unwrap();
    assert_eq!(committed.transfers_pruned, 0);
    assert_eq!(store.row_counts(NET).await.unwrap(), (3, 1, 1));
}
on_both_stores!(
    examined_old_candidates_are_pruned,
    examined_old_candidates_are_pruned
);

/// With `keep_transfers = "pay_to"` every transfer into or out of the sellers' wallets is
/// kept and never pruned, beside what can refund a payment (pruned as before); the kept
/// transfers are listed in chain order with the payment each moved or refunds, by address,
/// asset and time, a page at a time.
async fn a_sellers_transfers_are_kept_listed_and_never_pruned(kind: Kind) {
    const OTHER: &str = "0x90f79bf6eb2c4f870365e785982e1f101e93b906";
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let kept = |h, final_block| HeadUpdate {
        kept_wallets: vec![SELLER.to_string()],
        ..head(h, final_block)
    };
    let before_any = Batch {
        from_block: 0,
        to_block: 2,
        transfers: vec![
            plain(OTHER, SELLER, 3, 90, 0, 1),
            plain(SELLER, OTHER, 4, 91, 0, 1),
            plain(OTHER, PAYER, 5, 92, 0, 2),
        ],
        ..Batch::default()
    };
    let committed = store
        .commit_batch(NET, &tokens(), &before_any, &kept(2, None))
        .await
        .unwrap();
    assert_eq!((committed.transfers_kept, committed.transfers_skipped), (2, 1));

    // The seller's payment (tx 1, block 5, with a plain transfer to the seller beside it),
    // its refund (tx 93), another seller's payment (tx 10) and a transfer on that one's
    // refund route too large to refund it (tx 94): all old and final, so pruning runs.
    let mut with_payments = batch(3, 9, 1, 5);
    let mut other = batch(3, 9, 10, 7);
    other.payments[0].pay_to = OTHER.to_string();
    other.transfers[0].to = OTHER.to_string();
    with_payments.payments.push(other.payments[0].clone());
    with_payments.transfers.push(other.transfers[0].clone());
    with_payments.authorizations.push(other.authorizations[0].clone());
    with_payments.transfers.push(plain(SELLER, PAYER, 400, 93, 0, 6));
    with_payments
        .transfers
        .push(plain(OTHER, PAYER, 50_000, 94, 0, 8));
    let committed = store
        .commit_batch(NET, &tokens(), &with_payments, &kept(9, Some(9)))
        .await
        .unwrap();
    assert_eq!(
        (
            committed.transfers_kept,
            committed.transfers_skipped,
            committed.transfers_pruned
        ),
        (5, 0, 1),
        "only the untied candidate of the other seller is pruned"
    );
    assert_eq!(store.row_counts(NET).await.unwrap(), (6, 0, 2));

    let all = stores::every_transfer(NET);
    let listed = |filter: TransferFilter, after: Option<TransferCursor>, limit: u32| {
        let store = store.clone();
        async move {
            store
                .list_transfers(&filter, after.as_ref(), limit)
                .await
                .unwrap()
        }
    };
    let txs = |rows: &[StoredTransfer]| -> Vec<String> {
        rows.iter().map(|t| t.transfer.position.tx_id.clone()).collect()
    };
    let rows = listed(all.clone(), None, 100).await;
    assert_eq!(
        txs(&rows),
        [hash(90), hash(91), hash(1), hash(2), hash(93), hash(10)]
    );
    let roles: Vec<_> = rows
        .iter()
        .map(|t| (t.paid.clone(), t.refunded.clone()))
        .collect();
    assert_eq!(
        roles,
        [
            (None, None),
            (None, None),
            (Some((hash(1), 0)), None),
            (None, None),
            (None, Some((hash(1), 0, RefundRule::Matching))),
            (Some((hash(10), 0)), None),
        ]
    );
    assert_eq!(
        (
            rows[4].transfer.from.as_str(),
            rows[4].transfer.to.as_str(),
            rows[4].transfer.value.to_string().as_str()
        ),
        (SELLER, PAYER, "400")
    );

    let of_other = TransferFilter {
        address: Some(OTHER.to_string()),
        ..all.clone()
    };
    assert_eq!(
        txs(&listed(of_other, None, 100).await),
        [hash(90), hash(91), hash(10)]
    );
    let out_of_seller = TransferFilter {
        from_address: Some(SELLER.to_string()),
        ..all.clone()
    };
    assert_eq!(txs(&listed(out_of_seller, None, 100).await), [hash(91), hash(93)]);
    let into_seller_before_block_6 = TransferFilter {
        to_address: Some(SELLER.to_string()),
        to: Some(1_700_000_006),
        ..all.clone()
    };
    assert_eq!(
        txs(&listed(into_seller_before_block_6, None, 100).await),
        [hash(90), hash(1), hash(2)]
    );
    let from_block_6_other_asset = TransferFilter {
        from: Some(1_700_000_006),
        asset: Some(SELLER.to_string()),
        ..all.clone()
    };
    assert!(listed(from_block_6_other_asset, None, 100).await.is_empty());

    // Pages of two, each after the last one's final transfer, cover the listing once.
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = listed(all.clone(), after.clone(), 2).await;
        let Some(last) = page.last() else { break };
        after = Some(TransferCursor {
            block_number: last.transfer.position.block_number,
            tx_id: last.transfer.position.tx_id.clone(),
            event_index: last.transfer.position.event_index,
        });
        paged.extend(txs(&page));
    }
    assert_eq!(paged, txs(&rows));
}
on_both_stores!(
    a_sellers_transfers_are_kept_listed_and_never_pruned,
    a_sellers_transfers_are_kept_listed_and_never_pruned
);

/// Listing pages order the payments of one block by transaction and index, whatever the
/// order they were written in, with or without a payer or seller filter: the listing
/// indexes are keyed by block only (migration 34), and each database sorts a block's few
/// rows. Pages of one and of two, each after the last one's cursor, list what one page does.
async fn listing_pages_order_one_blocks_payments(kind: Kind) {
    use paywatch_core::listing::{PageCursor, PaymentFilter};
    const OTHER_PAYER: &str = "0x90f79bf6eb2c4f870365e785982e1f101e93b906";
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let payment = |tx: u64, index_in_tx: u32, event_index: u64, block: u64, payer: &str, pay_to: &str| {
        let transfer = plain(payer, pay_to, 1_000 + tx, tx, event_index, block);
        let payment = PaymentRecord {
            nonce: Some(format!("{tx}{index_in_tx}")),
            ..PaymentRecord::paid_by(&transfer, index_in_tx, PaymentMethod::Permit2)
        };
        (payment, transfer)
    };
    // Block 5 written out of order: transactions 9, 3 (two payments), 7; block 4 after it.
    let written = [
        payment(9, 0, 1, 5, PAYER, SELLER),
        payment(3, 1, 6, 5, OTHER_PAYER, SELLER),
        payment(3, 0, 4, 5, PAYER, SELLER),
        payment(7, 0, 2, 5, OTHER_PAYER, PAYER),
        payment(2, 0, 1, 4, PAYER, SELLER),
    ];
    let batch = Batch {
        from_block: 0,
        to_block: 5,
        payments: written.iter().map(|(p, _)| p.clone()).collect(),
        transfers: written.iter().map(|(_, t)| t.clone()).collect(),
        blocks: vec![BlockRecord {
            number: 5,
            hash: hash(1_000_005),
            parent_hash: Some(hash(1_000_004)),
        }],
        ..Batch::default()
    };
    store
        .commit_batch(NET, &tokens(), &batch, &head(5, None))
        .await
        .unwrap();

    let every = PaymentFilter::of(NET.parse().unwrap());
    let cases = [
        (every.clone(), vec![(2, 0), (3, 0), (3, 1), (7, 0), (9, 0)]),
        (
            PaymentFilter {
                payer: Some(PAYER.to_string()),
                ..every.clone()
            },
            vec![(2, 0), (3, 0), (9, 0)],
        ),
        (
            PaymentFilter {
                payer: Some(OTHER_PAYER.to_string()),
                ..every.clone()
            },
            vec![(3, 1), (7, 0)],
        ),
        (
            PaymentFilter {
                pay_to: Some(SELLER.to_string()),
                ..every.clone()
            },
            vec![(2, 0), (3, 0), (3, 1), (9, 0)],
        ),
    ];
    for (filter, expected) in cases {
        let expected: Vec<(String, u32)> = expected.into_iter().map(|(tx, i)| (hash(tx), i)).collect();
        let keys = |page: &[paywatch_store::StoredPayment]| -> Vec<(String, u32)> {
            page.iter()
                .map(|p| (p.payment_id.clone(), p.index_in_tx))
                .collect()
        };
        let whole = store.list_payments(&filter, None, 100).await.unwrap();
        assert_eq!(keys(&whole), expected, "{filter:?}");
        for size in [1, 2] {
            let (mut paged, mut after) = (Vec::new(), None);
            loop {
                let page = store.list_payments(&filter, after.as_ref(), size).await.unwrap();
                let Some(last) = page.last() else { break };
                after = Some(PageCursor {
                    block_number: last.block_number,
                    payment_id: last.payment_id.clone(),
                    index_in_tx: last.index_in_tx,
                });
                paged.extend(keys(&page));
            }
            assert_eq!(paged, expected, "pages of {size}, {filter:?}");
        }
    }
}
on_both_stores!(
    listing_pages_order_one_blocks_payments,
    listing_pages_order_one_blocks_payments
);
