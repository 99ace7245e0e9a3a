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
    /// A path segment cannot be read at all (for example, it is not UTF-8).
    MalformedPath,
    /// No endpoint answers this method and path.
    RouteNotFound,
    /// The store could not answer; retry later.
    StoreUnavailable,
    /// The request body is not the JSON the endpoint takes.
    MalformedBody,
    /// The revealed intent cannot be made canonical (bad URL, field or salt).
    MalformedIntent,
    /// The revealed intent and salt do not hash to the payment's nonce.
    IntentNonceMismatch,
    /// Review v1: the message breaks a byte rule (the detail names which).
    V1MalformedMessage,
    /// Review v1: the provider line is not this provider's host.
    V1ProviderMismatch,
    /// Review v1: the payment is indexed on another network than the message names.
    V1NetworkMismatch,
    /// Review v1: the payment paid another pay_to.
    V1PayToMismatch,
    /// Review v1: the payment moved another amount.
    V1AmountMismatch,
    /// Review v1: the payment moved another asset.
    V1AssetMismatch,
    /// Review v1: another wallet paid.
    PayerMismatch,
    /// The payment is not final (pending) or never counted (dropped).
    PaymentNotFinal,
    /// Review v1: the signature is malformed, malleated or not the payer's.
    V1SignatureInvalid,
    /// Review v1: the note's SHA-256 differs from note_sha256.
    V1NoteMismatch,
    /// Review v1: a review for this (network, payment) is already recorded.
    V1DuplicateReview,
    /// Review v1: `issued_at` is older than the provider takes (`[review] max_age_secs`).
    V1StaleMessage,
    /// Review v1: `issued_at` is further in the future than the provider's clock skew
    /// allows (`[review] max_future_secs`).
    V1FutureMessage,
    /// No bearer token, or one that belongs to no client.
    Unauthorized,
    /// The client is over its rate limit; retry after the `Retry-After` seconds.
    RateLimited,
    /// The request body is larger than the API takes.
    PayloadTooLarge,
    /// The chain's RPC could not answer a question the request needs (for example,
    /// whether the payer is a smart-contract wallet); retry later.
    RpcUnavailable,
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
            Reason::MalformedPath => "malformed_path",
            Reason::RouteNotFound => "route_not_found",
            Reason::StoreUnavailable => "store_unavailable",
            Reason::MalformedBody => "malformed_body",
            Reason::MalformedIntent => "malformed_intent",
            Reason::IntentNonceMismatch => "intent_nonce_mismatch",
            Reason::V1MalformedMessage => "v1_malformed_message",
            Reason::V1ProviderMismatch => "v1_provider_mismatch",
            Reason::V1NetworkMismatch => "v1_network_mismatch",
            Reason::V1PayToMismatch => "v1_pay_to_mismatch",
            Reason::V1AmountMismatch => "v1_amount_mismatch",
            Reason::V1AssetMismatch => "v1_asset_mismatch",
            Reason::PayerMismatch => "payer_mismatch",
            Reason::PaymentNotFinal => "payment_not_final",
            Reason::V1SignatureInvalid => "v1_signature_invalid",
            Reason::V1NoteMismatch => "v1_note_mismatch",
            Reason::V1DuplicateReview => "v1_duplicate_review",
            Reason::V1StaleMessage => "v1_stale_message",
            Reason::V1FutureMessage => "v1_future_message",
            Reason::RpcUnavailable => "rpc_unavailable",
            Reason::Unauthorized => "unauthorized",
            Reason::RateLimited => "rate_limited",
            Reason::PayloadTooLarge => "payload_too_large",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}
