//! Machine-readable reason codes, and what kind of refusal each is, in one place for
//! every interface (HTTP, gRPC, CLI).

use strum::{Display, IntoStaticStr, VariantArray};

/// What kind of refusal a reason is: each interface maps a kind, never a reason, to its
/// own codes (HTTP status, gRPC code, exit code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReasonKind {
    /// The request is malformed; the message says how to fix it.
    BadInput,
    /// What the request names does not exist (a payment, a network, a route).
    NotFound,
    /// The request is well-formed but conflicts with what is stored (several payments
    /// where one was named, a review already recorded).
    Conflict,
    /// The request is well-formed, but what it claims is false (a revealed intent that
    /// does not hash to the payment's nonce).
    Rejected,
    /// No valid credentials.
    Unauthorized,
    /// Over the client's rate limit; retry later.
    RateLimited,
    /// The request is larger than paywatch takes.
    TooLarge,
    /// A dependency (the store, a chain's RPC) could not answer; retry later.
    Unavailable,
    /// Not a refusal: a verdict about the thing checked (a review check or an expected
    /// fact that failed), answered inside a successful response.
    Verdict,
}

/// Why a request was refused or what a lookup found; answered as `reason` next to a
/// human-readable message, as its stable snake_case code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Display, IntoStaticStr, VariantArray)]
#[strum(serialize_all = "snake_case")]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::ToSchema),
    schema(rename_all = "snake_case")
)]
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
    /// An authorization lookup names a payer, asset or nonce in the wrong shape, or a
    /// network whose payments carry no authorization nonce.
    MalformedAuthorization,
    /// The asset is not a token of that network in `chains.toml`.
    AssetNotWatched,
    /// paywatch has not yet recorded the network's final block, which the answer is
    /// checked at; retry once its worker has run.
    NetworkNotSynced,
    /// A network's worker is stalled (no step completed for longer than its stall time) or
    /// stopped for good: its answers grow stale (`/readyz`); `paywatch status` says why.
    NetworkStalled,
    /// An escrowed payment whose money is only held in escrow (`held`) or went back
    /// uncaptured (`released`): nothing was paid.
    PaymentNotCaptured,
    /// No review is recorded for the payment (or for any payment of the transaction).
    ReviewNotFound,
    /// No proof is served for this payment: it is not final (or left the chain), its
    /// method has no proof yet, or it is not on an EVM network.
    ProofUnavailable,
}

impl crate::state::PaymentState {
    /// Why a payment in this state does not count as paid (`None`: it does).
    pub fn unpaid_reason(self) -> Option<Reason> {
        use crate::state::PaymentState::*;
        match self {
            Paid | PartiallyRefunded | Refunded => None,
            Pending | Dropped => Some(Reason::PaymentNotFinal),
            Held | Released => Some(Reason::PaymentNotCaptured),
        }
    }
}

impl Reason {
    /// The stable snake_case code.
    pub fn code(self) -> &'static str {
        self.into()
    }

    /// What kind of refusal it is.
    pub fn kind(self) -> ReasonKind {
        use Reason::*;
        match self {
            MalformedNetwork
            | MalformedPayment
            | MalformedQuery
            | MalformedPath
            | MalformedBody
            | MalformedIntent
            | MalformedAuthorization => ReasonKind::BadInput,
            IntentNonceMismatch => ReasonKind::Rejected,
            NetworkNotWatched | PaymentNotFound | RouteNotFound | AssetNotWatched | ReviewNotFound => {
                ReasonKind::NotFound
            }
            AmbiguousPayment | V1DuplicateReview | ProofUnavailable => ReasonKind::Conflict,
            Unauthorized => ReasonKind::Unauthorized,
            RateLimited => ReasonKind::RateLimited,
            PayloadTooLarge => ReasonKind::TooLarge,
            StoreUnavailable | RpcUnavailable | NetworkNotSynced | NetworkStalled => ReasonKind::Unavailable,
            V1MalformedMessage | V1ProviderMismatch | V1NetworkMismatch | V1PayToMismatch
            | V1AmountMismatch | V1AssetMismatch | PayerMismatch | PaymentNotFinal | V1SignatureInvalid
            | V1NoteMismatch | V1StaleMessage | V1FutureMessage | PaymentNotCaptured => ReasonKind::Verdict,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_documented_snake_case() {
        let codes: Vec<&str> = Reason::VARIANTS.iter().map(|r| r.code()).collect();
        assert_eq!(
            codes,
            [
                "malformed_network",
                "malformed_payment",
                "network_not_watched",
                "payment_not_found",
                "ambiguous_payment",
                "malformed_query",
                "malformed_path",
                "route_not_found",
                "store_unavailable",
                "malformed_body",
                "malformed_intent",
                "intent_nonce_mismatch",
                "v1_malformed_message",
                "v1_provider_mismatch",
                "v1_network_mismatch",
                "v1_pay_to_mismatch",
                "v1_amount_mismatch",
                "v1_asset_mismatch",
                "payer_mismatch",
                "payment_not_final",
                "v1_signature_invalid",
                "v1_note_mismatch",
                "v1_duplicate_review",
                "v1_stale_message",
                "v1_future_message",
                "unauthorized",
                "rate_limited",
                "payload_too_large",
                "rpc_unavailable",
                "malformed_authorization",
                "asset_not_watched",
                "network_not_synced",
                "network_stalled",
                "payment_not_captured",
                "review_not_found",
                "proof_unavailable",
            ]
        );
        assert!(Reason::VARIANTS.iter().all(|r| r.to_string() == r.code()));
    }
}
