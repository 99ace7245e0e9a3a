//! paywatch's test kit: the real parts every end-to-end test talks to. A real `anvil`
//! node (installed from npm), the real EIP-3009 token contract deployed on it, real
//! EIP-712 authorizations signed with real keys, a fresh SQLite file or Postgres
//! database per test, an RPC proxy that injects faults in front of the node, and a TCP
//! proxy that cuts database connections as a server restart would.

pub mod batch;
pub mod chain;
pub mod delegation;
pub mod escrow;
pub mod harness;
pub mod permit2;
pub mod proxy;
pub mod sink;
pub mod sse;
pub mod standby;
pub mod stores;
pub mod tcp_proxy;
pub mod token;
pub mod tools;
pub mod validator;
pub mod wallet;
