//! Which token transfers the store keeps: those that moved a payment's money and those
//! that can refund a payment, and, where a network keeps its sellers' transfers
//! (`keep_transfers = "pay_to"`), every one into or out of their wallets. A busy token's
//! traffic is almost all none of these (DEX pools, bots, exchanges); it is counted and
//! dropped at ingest, so the store grows with payments, not with the token's traffic.

use std::collections::{HashMap, HashSet};

use crate::PaymentMethod;
pub use crate::records::RefundRoute;
use crate::records::{AuthorizationRecord, Batch, PaymentRecord, TransferRecord};

impl RefundRoute {
    /// The route a refund of `payment` takes; `None` for an escrowed payment, which only
    /// its escrow refunds.
    pub fn back_to_payer(payment: &PaymentRecord) -> Option<Self> {
        (payment.method != PaymentMethod::AuthCapture).then(|| Self {
            from: payment.pay_to.clone(),
            to: payment.payer.clone(),
            asset: payment.asset.clone(),
        })
    }

    /// The route `transfer` runs on.
    pub fn of(transfer: &TransferRecord) -> Self {
        Self {
            from: transfer.from.clone(),
            to: transfer.to.clone(),
            asset: transfer.token.clone(),
        }
    }
}

/// A batch's transfers sorted by what the batch alone tells of them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TransferTriage<'a> {
    /// Kept: each moved one of the batch's payments, runs on the refund route of one of
    /// them (wherever it is in the batch: the refund rules look at chain order later,
    /// when the transfer is final), or is into or out of a kept wallet.
    pub kept: Vec<&'a TransferRecord>,
    /// Undecided: kept only if it runs on the refund route of a payment stored before.
    pub undecided: Vec<&'a TransferRecord>,
}

impl<'a> TransferTriage<'a> {
    /// Sorts `batch`'s transfers; every transfer into or out of `kept_wallets` is kept.
    pub fn of(batch: &'a Batch, kept_wallets: &[String]) -> Self {
        Self::new(&batch.transfers, &batch.payments, kept_wallets)
    }

    /// Sorts `transfers`, read with `payments`; every transfer into or out of
    /// `kept_wallets` is kept.
    pub fn new(transfers: &'a [TransferRecord], payments: &[PaymentRecord], kept_wallets: &[String]) -> Self {
        let wallets: HashSet<&str> = kept_wallets.iter().map(String::as_str).collect();
        let moved: HashSet<(&str, u64)> = payments
            .iter()
            .map(|p| (p.transfer.tx_id.as_str(), p.transfer.event_index))
            .collect();
        let routes: HashSet<RefundRoute> = payments.iter().filter_map(RefundRoute::back_to_payer).collect();
        let (kept, undecided) = transfers.iter().partition(|t| {
            moved.contains(&(t.position.tx_id.as_str(), t.position.event_index))
                || routes.contains(&RefundRoute::of(t))
                || wallets.contains(t.from.as_str())
                || wallets.contains(t.to.as_str())
        });
        Self { kept, undecided }
    }

    /// The distinct routes of the undecided transfers: what the store looks up.
    pub fn undecided_routes(&self) -> Vec<RefundRoute> {
        let mut routes: Vec<RefundRoute> = self.undecided.iter().map(|t| RefundRoute::of(t)).collect();
        routes.sort_unstable();
        routes.dedup();
        routes
    }

    /// Every transfer to keep, given the routes of stored payments among
    /// [`Self::undecided_routes`]; and how many are dropped.
    pub fn keep(self, stored: &HashSet<RefundRoute>) -> (Vec<&'a TransferRecord>, usize) {
        let mut kept = self.kept;
        let mut dropped = 0;
        for transfer in self.undecided {
            if stored.contains(&RefundRoute::of(transfer)) {
                kept.push(transfer);
            } else {
                dropped += 1;
            }
        }
        (kept, dropped)
    }
}

/// The EIP-3009 authorizations the store keeps, of `authorizations` read with `kept`
/// transfers and `payments`: each that released a kept transfer other than its own
/// payment's. The refund rules read a transfer's authorization for its nonce, which may
/// name the payment it refunds; a payment's own authorization is already its row's nonce
/// and payer (the store reads it there), and one that released a dropped transfer names
/// nothing the store holds. A transfer's authorization is the last its sender's
/// `AuthorizationUsed` of the same token before it in its transaction.
pub fn authorizations_to_keep<'a>(
    authorizations: &'a [AuthorizationRecord],
    kept: &[&TransferRecord],
    payments: &[PaymentRecord],
) -> Vec<&'a AuthorizationRecord> {
    let mut by_tx: HashMap<&str, Vec<&AuthorizationRecord>> = HashMap::new();
    for authorization in authorizations {
        by_tx
            .entry(authorization.position.tx_id.as_str())
            .or_default()
            .push(authorization);
    }
    let own: HashMap<(&str, u64), &PaymentRecord> = payments
        .iter()
        .filter(|p| p.method == PaymentMethod::Eip3009)
        .map(|p| ((p.transfer.tx_id.as_str(), p.transfer.event_index), p))
        .collect();
    let mut needed: HashSet<(&str, u64)> = HashSet::new();
    for transfer in kept {
        let position = &transfer.position;
        let Some(released_by) = by_tx.get(position.tx_id.as_str()).and_then(|in_tx| {
            in_tx
                .iter()
                .filter(|a| {
                    a.token == transfer.token
                        && a.authorizer == transfer.from
                        && a.position.event_index < position.event_index
                })
                .max_by_key(|a| a.position.event_index)
        }) else {
            continue;
        };
        let its_payments_own = own
            .get(&(position.tx_id.as_str(), position.event_index))
            .is_some_and(|p| {
                p.nonce.as_deref() == Some(released_by.nonce.as_str()) && p.payer == released_by.authorizer
            });
        if !its_payments_own {
            needed.insert((
                released_by.position.tx_id.as_str(),
                released_by.position.event_index,
            ));
        }
    }
    authorizations
        .iter()
        .filter(|a| needed.contains(&(a.position.tx_id.as_str(), a.position.event_index)))
        .collect()
}

/// Whether `payment`'s row holds every fact of `transfer`, so that the store need not
/// write the transfer as a row of its own: it is the payment's own transfer (same
/// transaction, log or instruction, block), between the payment's payer and seller, of its
/// asset and amount, with its memo. An escrowed payment's transfer goes to the escrow, not
/// to its seller, and keeps its row.
pub fn payment_holds(payment: &PaymentRecord, transfer: &TransferRecord) -> bool {
    payment.method != PaymentMethod::AuthCapture
        && payment.payment_id == transfer.position.tx_id
        && payment.transfer == transfer.position
        && payment.payer == transfer.from
        && payment.pay_to == transfer.to
        && payment.amount == transfer.value
        && payment.asset == transfer.token
        && payment.memo == transfer.memo
}

/// The `kept` transfers the store writes as rows of their own, read with `payments`: all
/// but those one payment's row holds ([`payment_holds`]), which the store reads back from
/// that row (the `stored_transfers` view). A transfer two payments name keeps its row, so
/// that it is listed once.
pub fn transfers_to_write<'a>(
    kept: &[&'a TransferRecord],
    payments: &[PaymentRecord],
) -> Vec<&'a TransferRecord> {
    let mut naming: HashMap<(&str, u64), Vec<&PaymentRecord>> = HashMap::new();
    for payment in payments.iter().filter(|p| p.method != PaymentMethod::AuthCapture) {
        naming
            .entry((payment.transfer.tx_id.as_str(), payment.transfer.event_index))
            .or_default()
            .push(payment);
    }
    kept.iter()
        .copied()
        .filter(|t| {
            let key = (t.position.tx_id.as_str(), t.position.event_index);
            !matches!(naming.get(&key).map(Vec::as_slice), Some([only]) if payment_holds(only, t))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use alloy_primitives::U256;

    use super::*;
    use crate::records::EventPosition;

    fn at(tx: &str, event_index: u64) -> EventPosition {
        EventPosition {
            tx_id: tx.to_string(),
            event_index,
            block_number: 1,
            block_hash: "0xb".to_string(),
            block_time: None,
        }
    }

    fn transfer(tx: &str, event_index: u64, from: &str, to: &str) -> TransferRecord {
        TransferRecord {
            position: at(tx, event_index),
            token: "0xusdc".to_string(),
            from: from.to_string(),
            to: to.to_string(),
            value: U256::from(5u64),
            memo: None,
        }
    }

    fn payment(transfer: &TransferRecord, method: PaymentMethod) -> PaymentRecord {
        PaymentRecord::paid_by(transfer, 0, method)
    }

    #[test]
    fn keeps_payments_and_what_can_refund_them_in_any_order() {
        let refund_first = transfer("0x01", 0, "0xshop", "0xalice");
        let paid = transfer("0x02", 0, "0xalice", "0xshop");
        let noise = transfer("0x02", 1, "0xpool", "0xbot");
        let same_parties_other_way = transfer("0x03", 0, "0xalice", "0xshop");
        let stored_route = transfer("0x04", 0, "0xcafe", "0xbob");
        let escrow_pay = transfer("0x05", 0, "0xcarol", "0xstore");
        let escrow_back = transfer("0x05", 1, "0xstore", "0xcarol");
        let batch = Batch {
            transfers: vec![
                refund_first.clone(),
                paid.clone(),
                noise.clone(),
                same_parties_other_way.clone(),
                stored_route.clone(),
                escrow_pay.clone(),
                escrow_back.clone(),
            ],
            payments: vec![
                payment(&paid, PaymentMethod::Eip3009),
                payment(&escrow_pay, PaymentMethod::AuthCapture),
            ],
            ..Batch::default()
        };
        let triage = TransferTriage::of(&batch, &[]);
        assert_eq!(triage.kept, [&refund_first, &paid, &escrow_pay]);
        assert_eq!(
            triage.undecided_routes(),
            [
                RefundRoute::of(&same_parties_other_way),
                RefundRoute::of(&stored_route),
                RefundRoute::of(&noise),
                RefundRoute::of(&escrow_back),
            ]
        );
        let stored = HashSet::from([RefundRoute::of(&stored_route)]);
        let (kept, dropped) = triage.keep(&stored);
        assert_eq!(kept, [&refund_first, &paid, &escrow_pay, &stored_route]);
        assert_eq!(dropped, 3);
    }

    fn authorization(tx: &str, event_index: u64, authorizer: &str, nonce: u8) -> AuthorizationRecord {
        AuthorizationRecord {
            position: at(tx, event_index),
            token: "0xusdc".to_string(),
            authorizer: authorizer.to_string(),
            nonce: format!("0x{nonce:064x}"),
        }
    }

    #[test]
    fn keeps_the_authorizations_of_kept_transfers_that_are_not_their_payments() {
        // 0x01: a payment by EIP-3009 — its authorization is the payment row's nonce.
        let paid_auth = authorization("0x01", 0, "0xalice", 1);
        let paid = transfer("0x01", 1, "0xalice", "0xshop");
        // 0x02: a refund sent by EIP-3009 (its nonce may name the payment): kept.
        let refund_auth = authorization("0x02", 0, "0xshop", 2);
        let refund = transfer("0x02", 1, "0xshop", "0xalice");
        // 0x03: someone else's EIP-3009 transfer, dropped: its authorization too.
        let other_auth = authorization("0x03", 0, "0xpool", 3);
        // 0x04: a refund that is itself an EIP-3009 payment (the shop pays alice by x402):
        // folded into that payment like any payment's.
        let paid_back_auth = authorization("0x04", 0, "0xshop", 4);
        let paid_back = transfer("0x04", 1, "0xshop", "0xalice");
        // 0x05: alice's authorization before a payment and a second kept transfer of hers
        // after it: that transfer's authorization is the payment's, so it is kept.
        let twice_auth = authorization("0x05", 0, "0xalice", 5);
        let twice_paid = transfer("0x05", 1, "0xalice", "0xshop");
        let twice_more = transfer("0x05", 2, "0xalice", "0xshop");
        // 0x06: a Permit2 payment's transfer after an authorization of its payer: not a
        // payment by EIP-3009, so the authorization is the transfer's and is kept.
        let permit2_auth = authorization("0x06", 0, "0xbob", 6);
        let permit2_paid = transfer("0x06", 1, "0xbob", "0xshop");
        let authorizations = [
            paid_auth.clone(),
            refund_auth.clone(),
            other_auth,
            paid_back_auth,
            twice_auth.clone(),
            permit2_auth.clone(),
        ];
        let with_nonce = |transfer: &TransferRecord, nonce: &AuthorizationRecord, method| PaymentRecord {
            nonce: Some(nonce.nonce.clone()),
            ..payment(transfer, method)
        };
        let payments = [
            with_nonce(&paid, &paid_auth, PaymentMethod::Eip3009),
            with_nonce(&paid_back, &authorizations[3], PaymentMethod::Eip3009),
            with_nonce(&twice_paid, &twice_auth, PaymentMethod::Eip3009),
            payment(&permit2_paid, PaymentMethod::Permit2),
        ];
        let kept = [
            &paid,
            &refund,
            &paid_back,
            &twice_paid,
            &twice_more,
            &permit2_paid,
        ];
        assert_eq!(
            authorizations_to_keep(&authorizations, &kept, &payments),
            [&refund_auth, &twice_auth, &permit2_auth]
        );
        assert!(authorizations_to_keep(&authorizations, &[], &payments).is_empty());
    }

    #[test]
    fn keeps_every_transfer_of_a_kept_wallet() {
        let paid = transfer("0x01", 0, "0xalice", "0xshop");
        let into_shop = transfer("0x02", 0, "0xbob", "0xshop");
        let out_of_shop = transfer("0x03", 0, "0xshop", "0xsupplier");
        let noise = transfer("0x04", 0, "0xpool", "0xbot");
        let batch = Batch {
            transfers: vec![
                paid.clone(),
                into_shop.clone(),
                out_of_shop.clone(),
                noise.clone(),
            ],
            payments: vec![payment(&paid, PaymentMethod::Eip3009)],
            ..Batch::default()
        };
        let triage = TransferTriage::of(&batch, &["0xshop".to_string()]);
        assert_eq!(triage.kept, [&paid, &into_shop, &out_of_shop]);
        assert_eq!(triage.undecided, [&noise]);
        let (kept, dropped) = TransferTriage::of(&batch, &[]).keep(&HashSet::new());
        assert_eq!((kept, dropped), (vec![&paid], 3));
    }

    #[test]
    fn writes_only_the_transfers_no_payment_row_holds() {
        // 0x01: a payment's own transfer: its row holds it.
        let paid = transfer("0x01", 0, "0xalice", "0xshop");
        // 0x02: a refund, no payment's.
        let refund = transfer("0x02", 0, "0xshop", "0xalice");
        // 0x03: an escrowed payment's transfer, into the escrow: kept as a row.
        let escrowed = transfer("0x03", 0, "0xcarol", "0xescrow");
        // 0x04: a Solana payment with a memo the transfer does not carry (the payment's
        // facts are not the transfer's): kept as a row.
        let memo_differs = transfer("0x04", 0, "0xdave", "0xshop");
        // 0x05: one transfer two payments name: kept as a row, listed once.
        let twice_named = transfer("0x05", 0, "0xerin", "0xshop");
        // 0x06: a payment whose transfer sits in another block than the one read.
        let moved = transfer("0x06", 0, "0xfrank", "0xshop");
        let payments = [
            payment(&paid, PaymentMethod::Eip3009),
            PaymentRecord {
                pay_to: "0xshop".to_string(),
                ..payment(&escrowed, PaymentMethod::AuthCapture)
            },
            PaymentRecord {
                memo: Some("order 7".to_string()),
                ..payment(&memo_differs, PaymentMethod::Spl)
            },
            payment(&twice_named, PaymentMethod::Permit2),
            PaymentRecord {
                index_in_tx: 1,
                ..payment(&twice_named, PaymentMethod::Permit2)
            },
            PaymentRecord {
                transfer: EventPosition {
                    block_number: 2,
                    ..moved.position.clone()
                },
                ..payment(&moved, PaymentMethod::Erc7710)
            },
        ];
        let kept = [&paid, &refund, &escrowed, &memo_differs, &twice_named, &moved];
        assert!(payment_holds(&payments[0], &paid));
        assert!(!payment_holds(&payments[1], &escrowed));
        assert_eq!(
            transfers_to_write(&kept, &payments),
            [&refund, &escrowed, &memo_differs, &twice_named, &moved]
        );
        assert_eq!(transfers_to_write(&kept, &[]), kept);
    }
}
