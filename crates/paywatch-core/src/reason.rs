//! Machine-readable reason codes, in one place for every interface (HTTP, CLI).

use std::fmt;

/// Why a request was refused or what a lookup found; answered as `reason` next to a
/// human-readable message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The network is not a CAIP-2 id or alias paywatch understands.
    MalformedNetwork,
    /// The payment id is not a transaction hash (EVM) or signature (Solana) in the right shape.
    MalformedPayment,
    /// The network is well-formed but not configured in `chains.toml`.
    NetworkNotWatched,
    /// No payment with that id is indexed on that network.
    PaymentNotFound,
    /// The transaction holds several payments; a `log_index` query parameter picks one.
    AmbiguousPayment,
    /// A query parameter is malformed.
    MalformedQuery,
    /// The store could not answer; retry later.
    StoreUnavailable,
    /// The request body is not the JSON the endpoint takes.
    MalformedBody,
    /// The revealed intent cannot be made canonical (bad URL, field or salt).
    MalformedIntent,
    /// The revealed intent and salt do not hash to the payment's nonce.
    IntentNonceMismatch,
}

impl Reason {
    /// The stable snake_case code.
    pub fn code(self) -> &'static str {
        match self {
            Reason::MalformedNetwork => "malformed_network",
            Reason::MalformedPayment => "malformed_payment",
            Reason::NetworkNotWatched => "network_not_watched",
            Reason::PaymentNotFound => "payment_not_found",
            Reason::AmbiguousPayment => "ambiguous_payment",
            Reason::MalformedQuery => "malformed_query",
            Reason::StoreUnavailable => "store_unavailable",
            Reason::MalformedBody => "malformed_body",
            Reason::MalformedIntent => "malformed_intent",
            Reason::IntentNonceMismatch => "intent_nonce_mismatch",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}
