//! When a Solana payment is final, and when it has left the chain: the verdict on one
//! pending payment from its signature status, its slot, the slot at the finality rule's
//! commitment and whether the latest listing of its account still shows it.

use paywatch_core::state::FinalityRule;
use solana_transaction_status_client_types::{TransactionConfirmationStatus, TransactionStatus};

/// What to do with a pending payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Its transaction reached the rule's commitment and succeeded: it may become `paid`.
    Final,
    /// Not at the rule's commitment yet (or the node's answers disagree): keep it pending.
    NotYet,
    /// Its slot is final and the transaction is on no chain the node knows, or it failed:
    /// it becomes `dropped`.
    Vanished,
}

/// The verdict on a pending payment at `slot` given its `status`, the `paid_slot` (the
/// slot at the `rule`'s commitment, read before the listing) and whether the listing after
/// that read still showed it. `rule` is `finalized` (a finalized status, which carries no
/// confirmation count) or `confirmed` (a confirmed or finalized status).
pub fn verdict(
    status: Option<&TransactionStatus>,
    slot: u64,
    paid_slot: u64,
    listed: bool,
    rule: FinalityRule,
) -> Verdict {
    let at_rule = |status: &TransactionStatus| match (rule, &status.confirmation_status) {
        (FinalityRule::Confirmed, Some(TransactionConfirmationStatus::Confirmed)) => true,
        (_, Some(TransactionConfirmationStatus::Finalized)) => status.confirmations.is_none(),
        _ => false,
    };
    match status {
        Some(status) if status.err.is_some() => Verdict::Vanished,
        Some(status) if at_rule(status) => Verdict::Final,
        Some(_) => Verdict::NotYet,
        // Unknown to the node: gone only once its slot is final and the listing agrees.
        None if slot <= paid_slot && !listed => Verdict::Vanished,
        None => Verdict::NotYet,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(confirmation: TransactionConfirmationStatus, failed: bool) -> TransactionStatus {
        let err = failed.then_some(solana_transaction_error::TransactionError::AccountInUse);
        TransactionStatus {
            slot: 10,
            confirmations: (confirmation != TransactionConfirmationStatus::Finalized).then_some(1),
            status: match &err {
                Some(e) => Err(e.clone()),
                None => Ok(()),
            },
            err,
            confirmation_status: Some(confirmation),
        }
    }

    #[test]
    fn finalized_and_successful_is_final() {
        let s = status(TransactionConfirmationStatus::Finalized, false);
        assert_eq!(
            verdict(Some(&s), 10, 40, true, FinalityRule::Finalized),
            Verdict::Final
        );
    }

    #[test]
    fn confirmed_waits_even_below_the_finalized_slot() {
        let s = status(TransactionConfirmationStatus::Confirmed, false);
        assert_eq!(
            verdict(Some(&s), 10, 40, true, FinalityRule::Finalized),
            Verdict::NotYet
        );
    }

    #[test]
    fn a_failed_transaction_never_counts() {
        let s = status(TransactionConfirmationStatus::Finalized, true);
        assert_eq!(
            verdict(Some(&s), 10, 40, true, FinalityRule::Finalized),
            Verdict::Vanished
        );
    }

    #[test]
    fn an_unknown_signature_vanishes_only_once_its_slot_is_final_and_unlisted() {
        assert_eq!(
            verdict(None, 10, 9, false, FinalityRule::Finalized),
            Verdict::NotYet
        );
        assert_eq!(
            verdict(None, 10, 40, true, FinalityRule::Finalized),
            Verdict::NotYet
        );
        assert_eq!(
            verdict(None, 10, 40, false, FinalityRule::Finalized),
            Verdict::Vanished
        );
    }

    #[test]
    fn under_the_confirmed_rule_a_confirmed_status_is_final() {
        let confirmed = status(TransactionConfirmationStatus::Confirmed, false);
        let processed = status(TransactionConfirmationStatus::Processed, false);
        let finalized = status(TransactionConfirmationStatus::Finalized, false);
        let rule = FinalityRule::Confirmed;
        assert_eq!(verdict(Some(&confirmed), 10, 40, true, rule), Verdict::Final);
        assert_eq!(verdict(Some(&finalized), 10, 40, true, rule), Verdict::Final);
        assert_eq!(verdict(Some(&processed), 10, 40, true, rule), Verdict::NotYet);
        let failed = status(TransactionConfirmationStatus::Confirmed, true);
        assert_eq!(verdict(Some(&failed), 10, 40, true, rule), Verdict::Vanished);
    }
}
