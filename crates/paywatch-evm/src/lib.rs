//! paywatch's EVM worker: reads ERC-20 `Transfer` and EIP-3009 `AuthorizationUsed` logs
//! of the configured tokens and the `Settled` logs of x402's Permit2 proxies over
//! JSON-RPC, pairs them into x402 payments, and commits
//! them with the cursor in one transaction; it notices reorgs and rolls back, and moves
//! payments to `paid` when the chain's finality rule says so. It also answers what a
//! request needs from the chain: whether a smart-contract wallet accepts a signature
//! (ERC-1271, ERC-6492) and whether an EIP-3009 authorization is used.

pub mod bloom;
pub mod calls;
pub mod decode;
pub mod proof;
pub mod reads;
pub mod rpc;
pub mod settle_calls;
pub mod tokens;
pub mod transport;
pub mod verify;
pub mod wallets;
pub mod worker;

pub use calls::{ChainCallError, ChainCalls};
pub use worker::{EvmWorker, WorkerError};
