//! The rules for escrowed payments (x402's auth-capture scheme through commerce-payments'
//! `AuthCaptureEscrow`).
//!
//! An escrowed payment is opened by its escrow's `PaymentAuthorized` or `PaymentCharged`
//! event, which carries its `PaymentInfo`; its id is the `paymentInfoHash` the escrow
//! indexes every later event by (captures, voids, reclaims, refunds), so it is tied to
//! them by the contract itself. Its payer, receiver (pay_to), token and amount are the
//! opening event's; its nonce is that of the EIP-3009 authorization the token collector
//! used in the same transaction (`AuthorizationUsed` by the payer on the token after the
//! opening event), when there is one.
//!
//! The collector's `receiveWithAuthorization` looks like an EIP-3009 payment from the
//! payer to the collector. It is not one: an EIP-3009 payment in the transaction of an
//! opening event, from that payment's payer to the event's token collector in its token,
//! after the event, is the escrow's collection and is dropped.

use alloy_primitives::U256;

use crate::method::PaymentMethod;
use crate::records::{AuthorizationRecord, EscrowEventKind, EscrowEventRecord, EscrowTerms, PaymentRecord};
use crate::state::EscrowTotals;

/// Basis points in a whole.
const MAX_FEE_BPS: u64 = 10_000;

/// The fee of a capture of `amount` at `fee_bps`, as the escrow computes it
/// (`amount * feeBps / 10_000`, rounded down).
pub fn capture_fee(amount: U256, fee_bps: u16) -> U256 {
    amount.saturating_mul(U256::from(fee_bps)) / U256::from(MAX_FEE_BPS)
}

impl EscrowTotals {
    /// The sums after one more final event of the payment.
    pub fn with(mut self, kind: EscrowEventKind, amount: U256, fee_bps: Option<u16>) -> Self {
        let fee = capture_fee(amount, fee_bps.unwrap_or(0));
        match kind {
            EscrowEventKind::Authorized => self.authorized += amount,
            EscrowEventKind::Charged => {
                self.authorized += amount;
                self.captured += amount;
                self.fees += fee;
            }
            EscrowEventKind::Captured => {
                self.captured += amount;
                self.fees += fee;
            }
            EscrowEventKind::Voided | EscrowEventKind::Reclaimed => self.released += amount,
            EscrowEventKind::Refunded => self.refunded += amount,
        }
        self
    }
}

/// The escrowed payments `events` open (with their `terms`), in chain order.
pub fn escrow_payments(
    events: &[EscrowEventRecord],
    terms: &[EscrowTerms],
    authorizations: &[AuthorizationRecord],
) -> Vec<PaymentRecord> {
    let mut payments = Vec::new();
    for event in events.iter().filter(|e| e.kind.opens()) {
        let Some(terms) = terms
            .iter()
            .find(|t| t.payment_info_hash == event.payment_info_hash)
        else {
            continue;
        };
        let nonce = authorizations
            .iter()
            .filter(|a| {
                a.position.tx_id == event.position.tx_id
                    && a.position.event_index > event.position.event_index
                    && a.token == terms.token
                    && a.authorizer == terms.payer
            })
            .min_by_key(|a| a.position.event_index)
            .map(|a| a.nonce.clone());
        payments.push(PaymentRecord {
            payment_id: event.payment_info_hash.clone(),
            index_in_tx: 0,
            transfer: event.position.clone(),
            payer: terms.payer.clone(),
            pay_to: terms.receiver.clone(),
            amount: event.amount,
            asset: terms.token.clone(),
            method: PaymentMethod::AuthCapture,
            nonce,
            max_amount: Some(terms.max_amount),
            memo: None,
            facilitator: Some(terms.operator.clone()),
            fee_amount: None,
        });
    }
    payments.sort_by_key(|p| (p.transfer.block_number, p.transfer.event_index));
    payments
}

/// Whether an EIP-3009 `payment` is an escrow's collection: in the transaction of an
/// opening event of `events`, after it, from its payer to its token collector in its token.
pub fn is_collection(payment: &PaymentRecord, events: &[EscrowEventRecord], terms: &[EscrowTerms]) -> bool {
    payment.method == PaymentMethod::Eip3009
        && events.iter().filter(|e| e.kind.opens()).any(|event| {
            event.position.tx_id == payment.payment_id
                && event.position.event_index < payment.transfer.event_index
                && event.token_collector.as_deref() == Some(payment.pay_to.as_str())
                && terms.iter().any(|t| {
                    t.payment_info_hash == event.payment_info_hash
                        && t.payer == payment.payer
                        && t.token == payment.asset
                })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::EventPosition;

    fn at(tx: &str, index: u64) -> EventPosition {
        EventPosition {
            tx_id: tx.to_string(),
            event_index: index,
            block_number: 7,
            block_hash: "0xb7".to_string(),
            block_time: Some(1_700_000_000),
        }
    }

    fn opening(kind: EscrowEventKind) -> (EscrowEventRecord, EscrowTerms) {
        let event = EscrowEventRecord {
            position: at("0xaa", 3),
            escrow: "0xe5".to_string(),
            payment_info_hash: "0x11".to_string(),
            kind,
            amount: U256::from(800u64),
            fee_bps: None,
            fee_receiver: None,
            token_collector: Some("0xc0".to_string()),
        };
        let terms = EscrowTerms {
            escrow: "0xe5".to_string(),
            payment_info_hash: "0x11".to_string(),
            operator: "0x0p".to_string(),
            payer: "0xpa".to_string(),
            receiver: "0xse".to_string(),
            token: "0xto".to_string(),
            max_amount: U256::from(1_000u64),
            pre_approval_expiry: 10,
            authorization_expiry: 20,
            refund_expiry: 30,
            min_fee_bps: 0,
            max_fee_bps: 100,
            fee_receiver: "0x00".to_string(),
            salt: "5".to_string(),
        };
        (event, terms)
    }

    fn collection(index: u64, to: &str) -> PaymentRecord {
        PaymentRecord {
            payment_id: "0xaa".to_string(),
            index_in_tx: 0,
            transfer: at("0xaa", index),
            payer: "0xpa".to_string(),
            pay_to: to.to_string(),
            amount: U256::from(1_000u64),
            asset: "0xto".to_string(),
            method: PaymentMethod::Eip3009,
            nonce: Some("0xn0".to_string()),
            max_amount: None,
            memo: None,
            facilitator: None,
            fee_amount: None,
        }
    }

    #[test]
    fn an_authorization_opens_a_payment_with_its_collectors_nonce() {
        let (event, terms) = opening(EscrowEventKind::Authorized);
        let authorizations = [
            AuthorizationRecord {
                position: at("0xaa", 2),
                token: "0xto".to_string(),
                authorizer: "0xpa".to_string(),
                nonce: "0xbefore".to_string(),
            },
            AuthorizationRecord {
                position: at("0xaa", 4),
                token: "0xto".to_string(),
                authorizer: "0xpa".to_string(),
                nonce: "0xn0".to_string(),
            },
        ];
        let payments = escrow_payments(
            std::slice::from_ref(&event),
            std::slice::from_ref(&terms),
            &authorizations,
        );
        assert_eq!(payments.len(), 1);
        let p = &payments[0];
        assert_eq!(p.payment_id, "0x11");
        assert_eq!((p.payer.as_str(), p.pay_to.as_str()), ("0xpa", "0xse"));
        assert_eq!(p.amount, U256::from(800u64));
        assert_eq!(p.max_amount, Some(U256::from(1_000u64)));
        assert_eq!(p.nonce.as_deref(), Some("0xn0"));
        assert_eq!(p.facilitator.as_deref(), Some("0x0p"));
        assert_eq!(p.method, PaymentMethod::AuthCapture);
        let capture = EscrowEventRecord {
            kind: EscrowEventKind::Captured,
            ..event
        };
        assert!(
            escrow_payments(&[capture], &[terms], &[]).is_empty(),
            "only openings open"
        );
    }

    #[test]
    fn the_collectors_pull_is_not_an_exact_payment() {
        let (event, terms) = opening(EscrowEventKind::Charged);
        let events = [event];
        let terms = [terms];
        assert!(is_collection(&collection(5, "0xc0"), &events, &terms));
        assert!(
            !is_collection(&collection(5, "0xse"), &events, &terms),
            "to someone else"
        );
        assert!(
            !is_collection(&collection(1, "0xc0"), &events, &terms),
            "before the event"
        );
        let mut other_tx = collection(5, "0xc0");
        other_tx.payment_id = "0xbb".to_string();
        assert!(!is_collection(&other_tx, &events, &terms));
        let mut other_payer = collection(5, "0xc0");
        other_payer.payer = "0xzz".to_string();
        assert!(!is_collection(&other_payer, &events, &terms));
    }

    #[test]
    fn sums_follow_the_contract() {
        let t = EscrowTotals::default()
            .with(EscrowEventKind::Authorized, U256::from(1_000u64), None)
            .with(EscrowEventKind::Captured, U256::from(400u64), Some(250))
            .with(EscrowEventKind::Captured, U256::from(3u64), Some(250))
            .with(EscrowEventKind::Voided, U256::from(597u64), None)
            .with(EscrowEventKind::Refunded, U256::from(100u64), None);
        assert_eq!(t.captured, U256::from(403u64));
        assert_eq!(t.fees, U256::from(10u64), "400 * 2.5% = 10, 3 * 2.5% rounds to 0");
        assert_eq!(t.released, U256::from(597u64));
        assert_eq!(t.held(), U256::ZERO);
        let charged = EscrowTotals::default().with(EscrowEventKind::Charged, U256::from(50u64), Some(100));
        assert_eq!(
            (charged.authorized, charged.captured),
            (U256::from(50u64), U256::from(50u64))
        );
        assert_eq!(capture_fee(U256::MAX, 10_000), U256::MAX / U256::from(10_000u64));
    }
}
