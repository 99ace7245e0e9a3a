//! paywatch's query operations: what the HTTP API, the gRPC API and the CLI answer, written
//! once. Each operation takes the caller's input as given (names, ids, filters) and answers
//! a view or one [`QueryError`] — a [`Reason`](paywatch_core::Reason) from core and a
//! message — whose kind each interface maps to its own status codes in one place.

mod access;
mod authorizations;
mod error;
mod events;
mod health;
mod intents;
mod listings;
mod payments;
mod proofs;
mod published;
mod replica;
mod reviews;
mod transfers;
mod views;

use std::sync::Arc;

use paywatch_core::config::ChainsConfig;
use paywatch_evm::ChainCalls;
use paywatch_solana::SolanaCalls;
use paywatch_store::Store;
use tokio_util::sync::CancellationToken;

pub use access::AccessControl;
pub use authorizations::lookup_authorization;
pub use error::QueryError;
pub use events::{EventFeed, event_kinds, event_stream};
pub use health::{NetworkHealth, network_health, readiness};
pub use intents::{RevealRequest, SaltBindingView, reveal_intent};
pub use listings::{ListParams, list_page, listing_pages, totals};
pub use payments::{
    ExpectedParams, MAX_BATCH, lookup_batch, lookup_expected, lookup_payment, payment_history,
};
pub use paywatch_evm::proof::{EscrowEventProof, EscrowFacts, ReceiptProof};
pub use proofs::{payment_evidence, payment_proof, proof_or_evidence};
pub use published::{list_reviews, published_review};
pub use replica::{
    Consistency, Fallback, ReadReplica, ReadRoute, ReadSource, ReplicaError, describe_metrics,
};
pub use reviews::{ReviewRules, ReviewSubmission, verify_review};
pub use transfers::{TransferParams, transfer_page, transfer_pages};
pub use views::{
    AuthorizationStatus, AuthorizationView, BatchAnswer, BatchItem, BatchRequest, BatchResponse, CheckResult,
    EscrowEventView, EscrowView, EventView, EvidenceView, Expectation, HistoryView, IntentView,
    ListedPayment, ListedTransfer, MismatchView, PaymentHistory, PaymentPage, PaymentView, ProofOrEvidence,
    ProofView, RefundView, ReviewPage, ReviewView, Totals, TotalsGroup, TransferPage, VerifyResponse,
};

/// What every query can reach.
#[derive(Clone)]
pub struct Queries {
    /// The store: the primary, or the read replica in the queries of a read routed there
    /// ([`Queries::read`]).
    pub store: Store,
    /// The streaming replica that answers reads while it is fresh enough, if configured.
    pub replica: Option<ReadReplica>,
    /// The watched networks.
    pub chains: Arc<ChainsConfig>,
    /// Asks the EVM networks by `eth_call`: contract-wallet signatures, authorization states.
    pub chain_calls: ChainCalls,
    /// Asks the Solana networks for a payment's transaction, its evidence.
    pub solana_calls: SolanaCalls,
    /// Cancelled when paywatch stops: long-lived answers (the event stream) end with it.
    pub shutdown: CancellationToken,
    /// Bearer tokens and rate limits (`[api]`), for both APIs.
    pub access: AccessControl,
    /// Wakes the event streams when events are committed.
    pub events: EventFeed,
}

impl Queries {
    /// The queries of `chains` on `store`, with RPCs for chain calls connected on first use.
    pub fn new(store: Store, chains: Arc<ChainsConfig>) -> Self {
        Self {
            chain_calls: ChainCalls::new(&chains),
            solana_calls: SolanaCalls::new(&chains),
            access: AccessControl::new(&chains.api),
            store,
            replica: None,
            chains,
            shutdown: CancellationToken::new(),
            events: EventFeed::default(),
        }
    }
}
