//! paywatch's Solana worker: reads SPL Token and Token-2022 transfers into the watched
//! pay_to wallets, calls them `paid` at the `finalized` commitment, and drops those whose
//! transactions vanish before; and serves a payment's transaction as its evidence.

pub mod decode;
pub mod evidence;
pub mod finality;
pub mod rpc;
pub mod worker;

pub use evidence::{EvidenceError, SolanaCalls, TransactionEvidence};
pub use worker::{SolanaWorker, StepError, StepReport, WorkerError};
