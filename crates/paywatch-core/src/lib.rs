//! Types and pure rules of paywatch.
//!
//! Everything here is free of I/O: the spelling of networks and identifiers,
//! the chain configuration, the records the workers produce, the rule that pairs
//! EIP-3009 authorizations with transfers into payments, payment states and the
//! machine-readable reason codes every interface answers with.

pub mod config;
pub mod escrow;
pub mod expect;
pub mod health;
pub mod ids;
pub mod intent;
pub mod listing;
pub mod matching;
pub mod method;
pub mod network;
pub mod reason;
pub mod records;
pub mod refunds;
pub mod retention;
pub mod review;
pub mod signature;
pub mod state;
pub mod vocabulary;

pub use method::PaymentMethod;
pub use network::{Namespace, NetworkId};
pub use reason::{Reason, ReasonKind};
pub use state::PaymentState;
