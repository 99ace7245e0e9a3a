//! The rules that tie a refund to a payment. A refund is money that went back from a
//! payment's pay_to to its payer, in the same asset, after the payment, final itself.
//!
//! 1. **An explicit link**, tied to that payment whatever its amount:
//!    - *nonce commitment* (EVM): the refund is an EIP-3009 transfer from pay_to to payer
//!      whose nonce is `keccak256("x402-refund/1" || payment tx hash)` (the 32 bytes of
//!      the hash);
//!    - *memo* (Solana): the refund transaction carries an SPL Memo whose text is the
//!      payment's signature (base58, surrounding whitespace ignored).
//! 2. **Matching** (otherwise): the refund is tied to the earliest payment between the
//!    same two parties in the same asset, not yet fully refunded, made at most the
//!    configured window before it, whose remaining amount (amount minus what was
//!    refunded already) the refund does not exceed. A transfer no payment fits is not a
//!    refund.
//!
//! Transfers are considered once, in chain order, when they become final.
//!
//! An escrowed payment (`auth_capture`) is refunded only by its escrow's
//! `PaymentRefunded` events (rule `escrow`); no transfer is ever tied to it by the rules
//! above.

use alloy_primitives::{B256, U256, keccak256};

/// The prefix hashed in front of a payment's transaction hash in a refund's nonce.
pub const REFUND_NONCE_PREFIX: &[u8] = b"x402-refund/1";

/// The EIP-3009 nonce that ties a refund to the payment with transaction hash `payment`.
pub fn refund_nonce(payment: B256) -> B256 {
    let mut preimage = Vec::with_capacity(REFUND_NONCE_PREFIX.len() + 32);
    preimage.extend_from_slice(REFUND_NONCE_PREFIX);
    preimage.extend_from_slice(payment.as_slice());
    keccak256(preimage)
}

/// Which rule tied a refund to its payment; stored and answered in snake_case.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
    serde::Serialize,
    serde::Deserialize,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum RefundRule {
    /// An escrowed payment's `PaymentRefunded` event: tied by the escrow contract itself,
    /// the strongest rule (an escrowed payment takes no other).
    Escrow,
    /// The refund's EIP-3009 nonce commits to the payment's transaction hash.
    NonceCommitment,
    /// The refund's memo names the payment's signature.
    Memo,
    /// The earliest fitting payment between the same parties.
    Matching,
}

impl RefundRule {
    /// The rule as stored and answered.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A payment a refund could be tied to: same parties and asset, final, before the refund.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundablePayment {
    /// Its payment id: the transaction hash (EVM, `0x` + hex) or signature (Solana).
    pub payment_id: String,
    /// Its number in the transaction.
    pub index_in_tx: u32,
    /// Its amount.
    pub amount: U256,
    /// What final refunds already returned.
    pub refunded: U256,
    /// Its block time, Unix seconds.
    pub block_time: Option<i64>,
}

/// What a transfer back carries that may name the payment it refunds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundLink {
    /// Nonce of the EIP-3009 authorization that released it.
    Nonce(B256),
    /// Text of the SPL Memo in its transaction.
    Memo(String),
}

impl RefundLink {
    /// Whether this link names the payment with id `payment_id`.
    pub fn names(&self, payment_id: &str) -> bool {
        match self {
            Self::Nonce(nonce) => payment_id
                .parse::<B256>()
                .is_ok_and(|hash| refund_nonce(hash) == *nonce),
            Self::Memo(text) => text.trim() == payment_id,
        }
    }

    fn rule(&self) -> RefundRule {
        match self {
            Self::Nonce(_) => RefundRule::NonceCommitment,
            Self::Memo(_) => RefundRule::Memo,
        }
    }
}

/// A final transfer from pay_to back to payer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundCandidate {
    /// Amount moved back.
    pub value: U256,
    /// Block time, Unix seconds.
    pub block_time: Option<i64>,
    /// What it carries that may name its payment, if anything.
    pub link: Option<RefundLink>,
}

/// Picks the payment a candidate refund is tied to, and by which rule. `payments` are
/// the refundable payments in chain order; `window_secs` bounds the matching rule.
pub fn assign_refund(
    candidate: &RefundCandidate,
    payments: &[RefundablePayment],
    window_secs: i64,
) -> Option<(usize, RefundRule)> {
    if let Some(link) = &candidate.link {
        // A transaction that settled several payments between the same two parties is
        // named as a whole: the refund goes to the first of them it fits in whole, else to
        // the first not yet fully refunded, never to one already fully refunded (nor to a
        // payment of another transaction).
        let named: Vec<usize> = (0..payments.len())
            .filter(|&i| link.names(&payments[i].payment_id))
            .collect();
        if !named.is_empty() {
            let remaining = |i: usize| payments[i].amount.saturating_sub(payments[i].refunded);
            return named
                .iter()
                .copied()
                .find(|&i| remaining(i) >= candidate.value)
                .or_else(|| named.iter().copied().find(|&i| !remaining(i).is_zero()))
                .map(|i| (i, link.rule()));
        }
    }
    payments
        .iter()
        .position(|p| {
            let remaining = p.amount.saturating_sub(p.refunded);
            let in_window = match (p.block_time, candidate.block_time) {
                (Some(paid), Some(refunded)) => refunded - paid <= window_secs,
                _ => true,
            };
            !remaining.is_zero() && candidate.value <= remaining && in_window
        })
        .map(|i| (i, RefundRule::Matching))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payment(id: u8, amount: u64, refunded: u64, time: i64) -> RefundablePayment {
        RefundablePayment {
            payment_id: B256::repeat_byte(id).to_string(),
            index_in_tx: 0,
            amount: U256::from(amount),
            refunded: U256::from(refunded),
            block_time: Some(time),
        }
    }

    fn candidate(value: u64, time: i64, nonce: Option<B256>) -> RefundCandidate {
        RefundCandidate {
            value: U256::from(value),
            block_time: Some(time),
            link: nonce.map(RefundLink::Nonce),
        }
    }

    #[test]
    fn refund_nonce_vectors() {
        // Computed independently with js-sha3's keccak256 over the same bytes.
        assert_eq!(
            refund_nonce(B256::ZERO).to_string(),
            "0xe7603f8b36ea15acdfef5bca7bcf01b40bb09523793c897b8863618ccfd6c20a"
        );
        assert_eq!(
            refund_nonce(B256::repeat_byte(0xab)).to_string(),
            "0x99a37b315c511acb9f767234c958511cc927f7d4bdc6c916e847012afa039f30"
        );
    }

    #[test]
    fn nonce_commitment_wins_over_matching() {
        let payments = [payment(1, 100, 0, 10), payment(2, 100, 0, 20)];
        let c = candidate(100, 30, Some(refund_nonce(B256::repeat_byte(2))));
        assert_eq!(
            assign_refund(&c, &payments, 3600),
            Some((1, RefundRule::NonceCommitment))
        );
    }

    #[test]
    fn a_link_to_a_batch_goes_to_the_payment_it_fits_never_to_a_refunded_one() {
        let batch = |index: u32, amount: u64, refunded: u64| RefundablePayment {
            index_in_tx: index,
            ..payment(7, amount, refunded, 10)
        };
        let named = Some(refund_nonce(B256::repeat_byte(7)));
        // Index 0 fully refunded, index 1 has 300 left: a refund of 200 goes to index 1.
        let payments = [payment(1, 500, 0, 5), batch(0, 100, 100), batch(1, 300, 0)];
        assert_eq!(
            assign_refund(&candidate(200, 30, named), &payments, 3600),
            Some((2, RefundRule::NonceCommitment))
        );
        // More than any has left: the first not fully refunded, whatever the amount.
        let payments = [batch(0, 100, 100), batch(1, 300, 250), batch(2, 300, 0)];
        assert_eq!(
            assign_refund(&candidate(400, 30, named), &payments, 3600),
            Some((1, RefundRule::NonceCommitment))
        );
        // Every payment it names is refunded: tied to none, not to another transaction's.
        let payments = [payment(1, 500, 0, 5), batch(0, 100, 100)];
        assert_eq!(assign_refund(&candidate(50, 30, named), &payments, 3600), None);
    }

    #[test]
    fn matching_takes_the_earliest_payment_it_fits() {
        let payments = [
            payment(1, 50, 0, 10),
            payment(2, 100, 0, 20),
            payment(3, 100, 0, 30),
        ];
        assert_eq!(
            assign_refund(&candidate(80, 40, None), &payments, 3600),
            Some((1, RefundRule::Matching)),
            "too big for the first payment"
        );
        assert_eq!(
            assign_refund(&candidate(50, 40, None), &payments, 3600),
            Some((0, RefundRule::Matching))
        );
        assert_eq!(
            assign_refund(&candidate(101, 40, None), &payments, 3600),
            None,
            "fits none"
        );
    }

    #[test]
    fn matching_counts_what_was_refunded_and_the_window() {
        let payments = [
            payment(1, 100, 100, 10),
            payment(2, 100, 60, 20),
            payment(3, 100, 0, 30),
        ];
        assert_eq!(
            assign_refund(&candidate(40, 40, None), &payments, 3600),
            Some((1, RefundRule::Matching))
        );
        assert_eq!(
            assign_refund(&candidate(41, 40, None), &payments, 3600),
            Some((2, RefundRule::Matching))
        );
        assert_eq!(
            assign_refund(&candidate(41, 10_000, None), &payments, 3600),
            None,
            "out of window"
        );
        // A nonce that commits to no listed payment falls back to matching.
        let stray = candidate(10, 40, Some(B256::repeat_byte(9)));
        assert_eq!(
            assign_refund(&stray, &payments, 3600),
            Some((1, RefundRule::Matching))
        );
    }

    #[test]
    fn memo_names_a_solana_payment() {
        let signature =
            "5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW";
        let mut payments = vec![payment(1, 100, 0, 10), payment(2, 100, 0, 20)];
        payments[1].payment_id = signature.to_string();
        let c = RefundCandidate {
            value: U256::from(100u64),
            block_time: Some(30),
            link: Some(RefundLink::Memo(format!(" {signature}\n"))),
        };
        assert_eq!(assign_refund(&c, &payments, 3600), Some((1, RefundRule::Memo)));
        // A memo naming something else falls back to matching.
        let other = RefundCandidate {
            link: Some(RefundLink::Memo("thanks".to_string())),
            ..c
        };
        assert_eq!(
            assign_refund(&other, &payments, 3600),
            Some((0, RefundRule::Matching))
        );
        // A nonce never names a Solana payment id.
        assert!(!RefundLink::Nonce(B256::ZERO).names(signature));
    }
}
