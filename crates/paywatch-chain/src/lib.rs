//! The runtime paywatch's chain workers share, whatever the chain: the set of RPC
//! endpoints a network is read through ([`Endpoints`]) and the loop that drives a worker's
//! steps until shutdown ([`drive`]), and the metrics they report ([`ChainMetrics`]). Each chain brings its own client, its own fault
//! classification ([`RpcFailure`]) and its own steps ([`Stage`]).

mod endpoints;
mod metrics;
mod stage;

pub use endpoints::{
    Endpoints, Identity, IdentityCheck, RpcFailure, default_backoff, redact, request_backoff, truncate,
};
pub use metrics::{ChainMetrics, RowKind, describe_metrics};
pub use stage::{Progress, Seen, Stage, StepError as ChainStepError, StepFailure, ask_until_answered, drive};
