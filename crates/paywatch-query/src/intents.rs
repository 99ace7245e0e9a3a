//! Intent reveals: checks a revealed intent and salt against the nonce of an indexed
//! payment (of an escrowed payment, its `PaymentInfo` salt) and, on a match, binds the
//! intent (its resource URL) to the payment.

use paywatch_core::Reason;
use paywatch_core::ids::{lower_hex, parse_decimal_amount, parse_evm_address, parse_evm_word};
use paywatch_core::intent::{Intent, SaltBinding, escrow_salt, intent_nonce, normalize_url};
use paywatch_core::method::PaymentMethod;
use paywatch_store::BoundIntent;
use serde::Deserialize;

use crate::payments::lookup_payment;
use crate::views::{IntentView, PaymentView};
use crate::{Queries, QueryError};

/// A revealed intent: the payment, the intent its nonce commits to, and the salt.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RevealRequest {
    /// Network: CAIP-2 id or alias.
    pub network: String,
    /// Transaction hash or signature.
    pub payment: String,
    /// Picks one payment of a transaction that settles several.
    #[serde(default)]
    pub index: Option<u32>,
    /// The intent.
    pub intent: IntentView,
    /// The 32-byte salt, `0x` + 64 hex.
    pub salt: String,
    /// An escrowed (`auth_capture`) payment whose requirements named a
    /// `receiverAuthorizer` or a `policy`: the x402 SDK then bound the committed salt
    /// nonce to them, and these are the two addresses (absent one: the zero address).
    #[serde(default)]
    pub salt_binding: Option<SaltBindingView>,
}

/// The addresses the x402 SDK binds an auth-capture salt nonce to.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SaltBindingView {
    /// The requirements' `receiverAuthorizer`, `0x` + 40 hex.
    pub receiver_authorizer: String,
    /// The requirements' `policy`, `0x` + 40 hex.
    pub policy: String,
}

impl SaltBindingView {
    fn parse(&self) -> Result<SaltBinding, QueryError> {
        let address = |field: &str, value: &str| {
            parse_evm_address(value).map_err(|e| malformed(format!("salt_binding.{field}: {e}")))
        };
        Ok(SaltBinding {
            receiver_authorizer: address("receiver_authorizer", &self.receiver_authorizer)?,
            policy: address("policy", &self.policy)?,
        })
    }
}

fn malformed(message: impl Into<String>) -> QueryError {
    QueryError::new(Reason::MalformedIntent, message)
}

/// Checks `request` against its payment's nonce and binds the intent: the payment with
/// its bound intent, or `intent_nonce_mismatch`.
pub async fn reveal_intent(queries: &Queries, request: RevealRequest) -> Result<PaymentView, QueryError> {
    let mut payment = lookup_payment(queries, &request.network, &request.payment, request.index).await?;
    let salt = parse_evm_word(&request.salt).map_err(|e| malformed(format!("salt: {e}")))?;
    let max_atomic = parse_decimal_amount(&request.intent.max_atomic).ok_or_else(|| {
        malformed(format!(
            "max_atomic: `{}` is not a decimal integer in the asset's smallest unit (digits only, no sign)",
            request.intent.max_atomic
        ))
    })?;
    let intent = Intent {
        method: request.intent.method.clone(),
        url: request.intent.url.clone(),
        body_sha256: request.intent.body_sha256.clone(),
        resource_class: request.intent.class.clone(),
        max_atomic,
        network: payment
            .network
            .parse()
            .map_err(|_| malformed("the payment's network is not a CAIP-2 id"))?,
        asset: payment.asset.clone(),
        pay_to: payment.pay_to.clone(),
    };
    let commitment = intent_nonce(&intent, &salt).map_err(|e| malformed(e.to_string()))?;
    let binding = request
        .salt_binding
        .as_ref()
        .map(SaltBindingView::parse)
        .transpose()?;
    let (expected, actual, what) = match (payment.method, &payment.escrow) {
        (PaymentMethod::AuthCapture, Some(escrow)) => (
            escrow_salt(commitment, binding.as_ref()).to_string(),
            Some(escrow.salt.as_str()),
            "PaymentInfo salt",
        ),
        _ if binding.is_some() => {
            return Err(malformed(
                "salt_binding applies only to escrowed (auth_capture) payments; leave it out",
            ));
        }
        // EIP-3009 signs the hash as its bytes32 nonce, Permit2 as its uint256 nonce.
        (method, _) => (method.spell_nonce(commitment), payment.nonce.as_deref(), "nonce"),
    };
    if actual != Some(expected.as_str()) {
        let derived = match binding {
            Some(_) => "the salt bound from keccak256(canonical intent || salt)",
            None => "keccak256(canonical intent || salt)",
        };
        return Err(QueryError::new(
            Reason::IntentNonceMismatch,
            format!(
                "{derived} gives the {what} {expected}, but the payment's {what} is {}: the intent, the salt, or the payment differs from what was signed",
                actual.unwrap_or("absent")
            ),
        ));
    }
    let bound = BoundIntent {
        method: intent.method.to_ascii_uppercase(),
        url: normalize_url(&intent.url).map_err(|e| malformed(e.to_string()))?,
        body_sha256: intent.body_sha256,
        class: intent.resource_class,
        max_atomic: max_atomic.to_string(),
        salt: lower_hex(salt),
    };
    queries
        .store
        .bind_intent(&payment.network, &payment.payment, payment.index_in_tx, &bound)
        .await
        .map_err(QueryError::store)?;
    // Only this intent and salt hash to the payment's nonce, so the bound intent is this one.
    payment.intent = Some(IntentView::from(bound));
    Ok(payment)
}
