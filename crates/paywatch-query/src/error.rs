//! The one error every query answers: a reason code from core, whose kind says what sort
//! of refusal it is, and a message saying what is wrong and how to fix it.

use paywatch_core::{Reason, ReasonKind};

/// A refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct QueryError {
    /// Machine-readable reason.
    pub reason: Reason,
    /// What is wrong and how to fix it (sent to the caller).
    pub message: String,
    /// What failed inside paywatch, for the operator's log, never sent (store failures).
    pub internal: Option<String>,
}

impl QueryError {
    /// A new refusal.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
            internal: None,
        }
    }

    /// The store failed: `store_unavailable`, with the store's error kept for the log.
    pub fn store(error: paywatch_store::StoreError) -> Self {
        Self {
            internal: Some(error.to_string()),
            ..Self::new(
                Reason::StoreUnavailable,
                "the store could not answer; retry later",
            )
        }
    }

    /// The kind of refusal its reason is.
    pub fn kind(&self) -> ReasonKind {
        self.reason.kind()
    }

    /// Whether paywatch, not the caller, failed: the answer may differ on retry.
    pub fn is_unavailable(&self) -> bool {
        self.kind() == ReasonKind::Unavailable
    }
}
