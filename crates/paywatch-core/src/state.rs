//! Payment states and the finality rule that moves a payment from `pending` to `paid`.

use std::fmt;
use std::str::FromStr;

/// Where a payment stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaymentState {
    /// Seen on chain, not yet final by the chain's rule.
    Pending,
    /// Final by the chain's rule.
    Paid,
    /// Its block left the canonical chain before it became final; it never counts.
    Dropped,
}

impl PaymentState {
    /// The state as stored and answered.
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentState::Pending => "pending",
            PaymentState::Paid => "paid",
            PaymentState::Dropped => "dropped",
        }
    }
}

impl fmt::Display for PaymentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored state string that paywatch does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown payment state `{0}`")]
pub struct UnknownState(pub String);

impl FromStr for PaymentState {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pending" => Ok(PaymentState::Pending),
            "paid" => Ok(PaymentState::Paid),
            "dropped" => Ok(PaymentState::Dropped),
            other => Err(UnknownState(other.to_string())),
        }
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
}

impl FinalityRule {
    /// The highest final block, given the chain head and, for tag rules, the tagged block.
    /// `None` when no block is final yet.
    pub fn final_block(self, head: u64, tagged: Option<u64>) -> Option<u64> {
        match self {
            FinalityRule::Confirmations(n) => (head + 1).checked_sub(n.max(1)),
            FinalityRule::Finalized | FinalityRule::Safe => tagged.map(|t| t.min(head)),
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
    fn states_round_trip() {
        for state in [PaymentState::Pending, PaymentState::Paid, PaymentState::Dropped] {
            assert_eq!(state.as_str().parse::<PaymentState>().unwrap(), state);
        }
        assert!("refunded!".parse::<PaymentState>().is_err());
    }
}
