//! Payment states and the finality rule that moves a payment from `pending` to `paid`.

use alloy_primitives::U256;
use strum::{Display, EnumString, IntoStaticStr, VariantArray};

/// Where a payment stands; stored and answered in snake_case (`partially_refunded`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Display,
    EnumString,
    IntoStaticStr,
    VariantArray,
    serde::Serialize,
    serde::Deserialize,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum PaymentState {
    /// Seen on chain, not yet final by the chain's rule.
    Pending,
    /// Final by the chain's rule.
    Paid,
    /// Final, and part of the amount went back to the payer in final refunds.
    PartiallyRefunded,
    /// Final, and at least the whole amount went back to the payer in final refunds.
    Refunded,
    /// Its block left the canonical chain; it never counts (unless mined again).
    Dropped,
    /// Escrow only: its authorization is final and the money sits in escrow, nothing
    /// captured yet. Not paid, and never counted as revenue.
    Held,
    /// Escrow only: the hold went back to the payer (voided by the operator or reclaimed
    /// by the payer after the authorization expired) with nothing captured: nothing paid.
    Released,
}

impl PaymentState {
    /// The states in which the money finally moved to the seller.
    pub const FINAL: [Self; 3] = [Self::Paid, Self::PartiallyRefunded, Self::Refunded];

    /// The state as stored and answered.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether the money finally moved (and so may be refunded).
    pub fn is_final(self) -> bool {
        matches!(self, Self::Paid | Self::PartiallyRefunded | Self::Refunded)
    }

    /// Whether the state rests only on final events: the money finally moved, or an
    /// escrowed payment's hold, or the hold's release, is final. What a proof can show.
    pub fn is_final_on_chain(self) -> bool {
        self.is_final() || matches!(self, Self::Held | Self::Released)
    }

    /// The state a review provider publishes beside a review, in review v1's vocabulary:
    /// `paid`, or `refunded` once the whole amount went back. A partial refund is still
    /// `paid` (the refunded amount is shown beside it); a state outside v1's two (a
    /// reorged payment's `pending` or `dropped`) is published as it is.
    pub fn published(self) -> Self {
        match self {
            Self::PartiallyRefunded => Self::Paid,
            other => other,
        }
    }
}

/// What an event of the global event sequence reports: `payment_state`, a change of a
/// payment's state (one row of its history); `review_state`, a change of the state
/// published beside a recorded review ([`PaymentState::published`]), caused by such a
/// payment change and committed with it; or `verification`, an audit's verdict on a
/// payment's state under lagging verification.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Display,
    EnumString,
    IntoStaticStr,
    VariantArray,
    serde::Serialize,
    serde::Deserialize,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum EventKind {
    /// A payment's state changed.
    PaymentState,
    /// A reviewed payment's published state changed.
    ReviewState,
    /// Under `verification = "lagging"`: an audit covered every block a payment's state is
    /// made of, and found it verified or not.
    Verification,
}

impl EventKind {
    /// The kind as stored and answered.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Why a payment's state changed: the `cause` of each row of its history.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Display,
    EnumString,
    IntoStaticStr,
    VariantArray,
    serde::Serialize,
    serde::Deserialize,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum HistoryCause {
    /// First seen in a block of the canonical chain.
    Seen,
    /// First seen in a block that was already final (`pending` and `paid` at once).
    SeenFinal,
    /// Its block became final.
    Final,
    /// Its block left the canonical chain.
    Reorged,
    /// Mined again after a reorg had dropped it.
    Reincluded,
    /// A final refund tied to it changed what was refunded.
    Refund,
    /// A refund tied to it left the canonical chain.
    RefundReorged,
    /// A pending payment's transaction left the chain before becoming final, found by
    /// asking after the transaction itself rather than by a reorg of its block.
    Vanished,
    /// Escrow: a final capture (or charge) added to what was captured.
    Captured,
    /// Escrow: a capture left the canonical chain.
    CaptureReorged,
    /// Escrow: a final void or reclaim sent the uncaptured hold back to the payer.
    Released,
    /// Escrow: a void or reclaim left the canonical chain.
    ReleaseReorged,
    /// An audit found that the chain does not hold what a provider had answered (a made-up
    /// payment, or a made-up refund tied to it), and `paywatch audit --repair` took it
    /// back: the payment is `dropped`, or its refunded sum and state are what the chain's
    /// transfers make them.
    Refuted,
    /// An audit found the chain holding other facts for the payment (block hash, payer,
    /// pay_to, amount, asset, method or nonce) than a provider had answered, and
    /// `paywatch audit --repair` replaced them with the chain's; its state is kept.
    Corrected,
}

impl HistoryCause {
    /// The cause as stored and answered.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What happened to a payment; each event is recorded in its history with its `cause`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaymentEvent {
    /// Its transaction is in a block of the canonical chain (first seen, or mined again
    /// after a reorg dropped it).
    Seen,
    /// Its block became final.
    Finalized,
    /// Its block left the canonical chain.
    Reorged,
    /// The final refunds tied to it now add up to `refunded` of its `amount`.
    Refunded {
        /// Sum of its final refunds.
        refunded: U256,
        /// The payment's amount.
        amount: U256,
    },
    /// Escrow: the sums of its final escrow events changed (its authorization or charge
    /// became final, or a capture, void, reclaim or refund did, or one of them left the
    /// chain); built by [`EscrowTotals::change_to`].
    Escrow(EscrowChange),
}

/// What a change of an escrowed payment's sums does: the state the new sums give and
/// the cause of the move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EscrowChange {
    /// The state the new sums give ([`EscrowTotals::state`]).
    pub state: PaymentState,
    /// Which sum moved, and which way: a capture, release or refund, or one leaving the
    /// chain; `final` when only the opening's finality changed.
    pub cause: HistoryCause,
}

/// What an escrowed payment's final events add up to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EscrowTotals {
    /// Authorized into escrow (a charge's amount counts as authorized and captured).
    pub authorized: U256,
    /// Captured to the receiver, fees included.
    pub captured: U256,
    /// The fees of the captures, to their fee receivers.
    pub fees: U256,
    /// Voided or reclaimed: the uncaptured hold sent back to the payer.
    pub released: U256,
    /// Refunded from what was captured.
    pub refunded: U256,
}

impl EscrowTotals {
    /// What is still in escrow: authorized, neither captured nor released.
    pub fn held(&self) -> U256 {
        self.authorized
            .saturating_sub(self.captured)
            .saturating_sub(self.released)
    }

    /// The state these sums put a payment whose authorization is final in: captured money
    /// is paid (less what was refunded); a hold with nothing captured is held, or released
    /// once it went back.
    pub fn state(&self) -> PaymentState {
        if !self.captured.is_zero() {
            if self.refunded.is_zero() {
                PaymentState::Paid
            } else if self.refunded >= self.captured {
                PaymentState::Refunded
            } else {
                PaymentState::PartiallyRefunded
            }
        } else if !self.released.is_zero() {
            PaymentState::Released
        } else {
            PaymentState::Held
        }
    }

    /// The event of these sums becoming `after`: the state `after` gives, and the cause
    /// named by the first sum that moved (capture, then release, then refund).
    pub fn change_to(self, after: Self) -> PaymentEvent {
        let moved = |a: U256, b: U256, up, down| (a != b).then_some(if b > a { up } else { down });
        let cause = moved(
            self.captured,
            after.captured,
            HistoryCause::Captured,
            HistoryCause::CaptureReorged,
        )
        .or(moved(
            self.released,
            after.released,
            HistoryCause::Released,
            HistoryCause::ReleaseReorged,
        ))
        .or(moved(
            self.refunded,
            after.refunded,
            HistoryCause::Refund,
            HistoryCause::RefundReorged,
        ))
        .unwrap_or(HistoryCause::Final);
        PaymentEvent::Escrow(EscrowChange {
            state: after.state(),
            cause,
        })
    }
}

impl PaymentEvent {
    /// The cause written in the history.
    pub fn cause(self, from: Option<PaymentState>) -> HistoryCause {
        match (self, from) {
            (Self::Seen, Some(PaymentState::Dropped)) => HistoryCause::Reincluded,
            (Self::Seen, _) => HistoryCause::Seen,
            (Self::Finalized, _) => HistoryCause::Final,
            (Self::Reorged, _) => HistoryCause::Reorged,
            (Self::Refunded { .. }, _) => HistoryCause::Refund,
            (Self::Escrow(_), Some(PaymentState::Pending)) => HistoryCause::Final,
            (Self::Escrow(change), _) => change.cause,
        }
    }
}

/// An event that cannot happen to a payment in that state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a payment that is {from:?} cannot take the event {event:?}")]
pub struct IllegalTransition {
    /// The state before (`None`: not stored yet).
    pub from: Option<PaymentState>,
    /// The event.
    pub event: PaymentEvent,
}

/// The payment state machine: the state after `event` happens to a payment in `from`
/// (`None` when it is not stored yet). `Ok(from)` means the event changes nothing.
///
/// ```text
///   (new) --seen--> pending --final--> paid --refund--> partially_refunded --refund--> refunded
///                      |                 |                     |                         |
///                      +---- reorged ----+------ reorged ------+-------- reorged --------+--> dropped
///   dropped --seen (mined again)--> pending
/// ```
///
/// An escrowed payment (method `auth_capture`) moves by the sums of its final escrow
/// events instead ([`EscrowTotals::state`]):
///
/// ```text
///   pending --authorization final--> held --capture--> paid --refund--> partially_refunded / refunded
///      |                               |
///      +--charge final--> paid         +--void / reclaim--> released
///   a capture, void or refund that leaves the chain moves it back; reorged --> dropped
/// ```
pub fn transition(
    from: Option<PaymentState>,
    event: PaymentEvent,
) -> Result<PaymentState, IllegalTransition> {
    use PaymentState::*;
    let illegal = Err(IllegalTransition { from, event });
    match (from, event) {
        (None | Some(Dropped), PaymentEvent::Seen) => Ok(Pending),
        (Some(state), PaymentEvent::Seen) => Ok(state),
        (Some(Pending), PaymentEvent::Finalized) => Ok(Paid),
        (Some(state @ (Paid | PartiallyRefunded | Refunded | Held | Released)), PaymentEvent::Finalized) => {
            Ok(state)
        }
        (Some(_), PaymentEvent::Reorged) => Ok(Dropped),
        (Some(Paid | PartiallyRefunded | Refunded), PaymentEvent::Refunded { refunded, amount }) => {
            Ok(if refunded.is_zero() {
                Paid
            } else if refunded >= amount {
                Refunded
            } else {
                PartiallyRefunded
            })
        }
        (
            Some(Pending | Held | Paid | PartiallyRefunded | Refunded | Released),
            PaymentEvent::Escrow(change),
        ) => Ok(change.state),
        _ => illegal,
    }
}

/// How a chain decides a block is final.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalityRule {
    /// Final once this many blocks (the block itself included) are on top of the chain.
    Confirmations(u64),
    /// Final at or below the node's `finalized` block.
    Finalized,
    /// Final at or below the node's `safe` block.
    Safe,
    /// Solana: final at or below the cluster's `confirmed` slot (a supermajority has
    /// voted on it; under Alpenglow `confirmed` and `finalized` converge). `chains.toml`
    /// refuses it on EVM networks.
    Confirmed,
}

impl FinalityRule {
    /// The highest final block, given the chain head and, for tag rules, the tagged block.
    /// `None` when no block is final yet.
    pub fn final_block(self, head: u64, tagged: Option<u64>) -> Option<u64> {
        match self {
            Self::Confirmations(n) => (head + 1).checked_sub(n.max(1)),
            Self::Finalized | Self::Safe | Self::Confirmed => tagged.map(|t| t.min(head)),
        }
    }
}

/// The rule as `chains.toml` spells it (`confirmations=N` for a depth), as `paywatch status`
/// shows it.
impl std::fmt::Display for FinalityRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Confirmations(n) => write!(f, "confirmations={n}"),
            Self::Finalized => f.write_str("finalized"),
            Self::Safe => f.write_str("safe"),
            Self::Confirmed => f.write_str("confirmed"),
        }
    }
}

/// Confirmations of a block at `block` under a head at `head` (the block itself counts as one).
pub fn confirmations(block: u64, head: u64) -> u64 {
    (head + 1).saturating_sub(block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finality_rules_display_as_chains_toml_spells_them() {
        assert_eq!(FinalityRule::Confirmations(10).to_string(), "confirmations=10");
        assert_eq!(FinalityRule::Finalized.to_string(), "finalized");
        assert_eq!(FinalityRule::Safe.to_string(), "safe");
    }

    #[test]
    fn published_states_use_review_v1_vocabulary() {
        assert_eq!(PaymentState::Paid.published(), PaymentState::Paid);
        assert_eq!(PaymentState::PartiallyRefunded.published(), PaymentState::Paid);
        assert_eq!(PaymentState::Refunded.published(), PaymentState::Refunded);
        assert_eq!(PaymentState::Dropped.published(), PaymentState::Dropped);
        assert_eq!(
            "review_state".parse::<EventKind>().unwrap(),
            EventKind::ReviewState
        );
        assert_eq!(EventKind::Verification.as_str(), "verification");
    }

    #[test]
    fn confirmation_depth_rule() {
        let rule = FinalityRule::Confirmations(3);
        assert_eq!(rule.final_block(10, None), Some(8));
        assert_eq!(rule.final_block(1, None), None);
        assert_eq!(rule.final_block(2, None), Some(0));
        assert_eq!(FinalityRule::Confirmations(1).final_block(10, None), Some(10));
        assert_eq!(FinalityRule::Confirmations(0).final_block(10, None), Some(10));
    }

    #[test]
    fn tag_rule_never_runs_ahead_of_head() {
        assert_eq!(FinalityRule::Finalized.final_block(100, Some(64)), Some(64));
        assert_eq!(FinalityRule::Finalized.final_block(100, None), None);
        assert_eq!(FinalityRule::Safe.final_block(50, Some(64)), Some(50));
    }

    #[test]
    fn counts_confirmations() {
        assert_eq!(confirmations(10, 10), 1);
        assert_eq!(confirmations(8, 10), 3);
        assert_eq!(confirmations(11, 10), 0);
    }

    #[test]
    fn states_and_causes_round_trip() {
        let states: Vec<&str> = PaymentState::VARIANTS.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            states,
            [
                "pending",
                "paid",
                "partially_refunded",
                "refunded",
                "dropped",
                "held",
                "released"
            ]
        );
        for state in PaymentState::VARIANTS {
            assert_eq!(state.as_str().parse::<PaymentState>().unwrap(), *state);
            assert_eq!(state.to_string(), state.as_str());
            assert_eq!(
                serde_json::to_string(state).unwrap(),
                format!("\"{}\"", state.as_str())
            );
        }
        assert!("refunded!".parse::<PaymentState>().is_err());
        assert!(PaymentState::FINAL.iter().all(|s| s.is_final()));
        let causes: Vec<&str> = HistoryCause::VARIANTS.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            causes,
            [
                "seen",
                "seen_final",
                "final",
                "reorged",
                "reincluded",
                "refund",
                "refund_reorged",
                "vanished",
                "captured",
                "capture_reorged",
                "released",
                "release_reorged",
                "refuted",
                "corrected"
            ]
        );
        for cause in HistoryCause::VARIANTS {
            assert_eq!(cause.as_str().parse::<HistoryCause>().unwrap(), *cause);
        }
    }

    fn refund(refunded: u64, amount: u64) -> PaymentEvent {
        PaymentEvent::Refunded {
            refunded: U256::from(refunded),
            amount: U256::from(amount),
        }
    }

    #[test]
    fn the_happy_path() {
        use PaymentState::*;
        let seen = transition(None, PaymentEvent::Seen).unwrap();
        assert_eq!(seen, Pending);
        let paid = transition(Some(seen), PaymentEvent::Finalized).unwrap();
        assert_eq!(paid, Paid);
        let partial = transition(Some(paid), refund(40, 100)).unwrap();
        assert_eq!(partial, PartiallyRefunded);
        assert_eq!(transition(Some(partial), refund(100, 100)), Ok(Refunded));
        assert_eq!(transition(Some(partial), refund(150, 100)), Ok(Refunded));
        assert_eq!(
            transition(Some(Refunded), refund(0, 100)),
            Ok(Paid),
            "refunds reorged away"
        );
    }

    #[test]
    fn reorgs_drop_and_reinclusion_revives() {
        use PaymentState::*;
        for state in [Pending, Paid, PartiallyRefunded, Refunded, Dropped] {
            assert_eq!(transition(Some(state), PaymentEvent::Reorged), Ok(Dropped));
        }
        assert_eq!(transition(Some(Dropped), PaymentEvent::Seen), Ok(Pending));
        assert_eq!(
            transition(Some(Paid), PaymentEvent::Seen),
            Ok(Paid),
            "moved, not changed"
        );
        assert_eq!(PaymentEvent::Seen.cause(Some(Dropped)), HistoryCause::Reincluded);
        assert_eq!(PaymentEvent::Seen.cause(None), HistoryCause::Seen);
    }

    fn escrow(before: EscrowTotals, after: EscrowTotals) -> PaymentEvent {
        before.change_to(after)
    }

    fn totals(authorized: u64, captured: u64, released: u64, refunded: u64) -> EscrowTotals {
        EscrowTotals {
            authorized: U256::from(authorized),
            captured: U256::from(captured),
            fees: U256::ZERO,
            released: U256::from(released),
            refunded: U256::from(refunded),
        }
    }

    #[test]
    fn escrowed_payments_move_by_their_final_events() {
        use PaymentState::*;
        let none = EscrowTotals::default();
        let authorized = totals(100, 0, 0, 0);
        let hold = escrow(none, authorized);
        assert_eq!(transition(Some(Pending), hold), Ok(Held));
        assert_eq!(hold.cause(Some(Pending)), HistoryCause::Final);
        let part = totals(100, 40, 0, 0);
        assert_eq!(part.held(), U256::from(60u64));
        assert_eq!(transition(Some(Held), escrow(authorized, part)), Ok(Paid));
        assert_eq!(escrow(authorized, part).cause(Some(Held)), HistoryCause::Captured);
        let rest = totals(100, 100, 0, 0);
        assert_eq!(transition(Some(Paid), escrow(part, rest)), Ok(Paid));
        assert_eq!(rest.held(), U256::ZERO);
        assert_eq!(
            transition(Some(Paid), escrow(rest, totals(100, 100, 0, 30))),
            Ok(PartiallyRefunded)
        );
        assert_eq!(
            transition(Some(PartiallyRefunded), escrow(rest, totals(100, 100, 0, 100))),
            Ok(Refunded)
        );
        assert_eq!(
            escrow(totals(100, 100, 0, 100), rest).cause(Some(Refunded)),
            HistoryCause::RefundReorged
        );
        let voided = totals(100, 0, 100, 0);
        assert_eq!(transition(Some(Held), escrow(authorized, voided)), Ok(Released));
        assert_eq!(
            escrow(authorized, voided).cause(Some(Held)),
            HistoryCause::Released
        );
        assert_eq!(
            escrow(voided, authorized).cause(Some(Released)),
            HistoryCause::ReleaseReorged
        );
        assert_eq!(
            transition(Some(Paid), escrow(part, authorized)),
            Ok(Held),
            "capture reorged"
        );
        assert_eq!(
            escrow(part, authorized).cause(Some(Paid)),
            HistoryCause::CaptureReorged
        );
        assert_eq!(
            transition(Some(Paid), escrow(part, totals(100, 40, 60, 0))),
            Ok(Paid),
            "a void after a partial capture releases the rest; what was captured stays paid"
        );
        assert_eq!(
            transition(Some(Pending), escrow(none, totals(50, 50, 0, 0))),
            Ok(Paid),
            "a charge is paid once final"
        );
        assert!(transition(Some(Dropped), hold).is_err());
        assert!(transition(None, hold).is_err());
        assert!(!Held.is_final() && !Released.is_final());
        assert_eq!(transition(Some(Held), PaymentEvent::Reorged), Ok(Dropped));
    }

    #[test]
    fn impossible_events_are_refused() {
        use PaymentState::*;
        assert!(
            transition(Some(Pending), refund(1, 100)).is_err(),
            "no refund before final"
        );
        assert!(transition(Some(Dropped), refund(1, 100)).is_err());
        assert!(transition(Some(Dropped), PaymentEvent::Finalized).is_err());
        assert!(transition(None, PaymentEvent::Finalized).is_err());
        assert!(transition(None, PaymentEvent::Reorged).is_err());
        assert!(!Pending.is_final() && !Dropped.is_final());
        assert!(Paid.is_final() && PartiallyRefunded.is_final() && Refunded.is_final());
    }
}
