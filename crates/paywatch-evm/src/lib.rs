//! paywatch's EVM worker: reads ERC-20 `Transfer` and EIP-3009 `AuthorizationUsed` logs
//! of the configured tokens over JSON-RPC, pairs them into x402 payments, and commits
//! them with the cursor in one transaction; it notices reorgs and rolls back, and moves
//! payments to `paid` when the chain's finality rule says so.

pub mod decode;
pub mod rpc;
pub mod worker;

pub use worker::{EvmWorker, WorkerError};
