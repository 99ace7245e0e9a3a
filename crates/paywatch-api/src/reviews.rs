//! `POST /v1/reviews/verify`: the six checks of a review v1 provider, against paywatch's
//! own index. Every check is answered, with its reason code when it fails.

use alloy_primitives::eip191_hash_message;
use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use paywatch_core::expect::{ExpectedFacts, PaymentFacts, mismatches};
use paywatch_core::ids::parse_evm_address;
use paywatch_core::review::{ReviewMessage, note_sha256, parse_review};
use paywatch_core::signature::{decode_contract_signature, verify_ed25519_strict, verify_eip191_strict};
use paywatch_core::state::PaymentState;
use paywatch_core::{Namespace, Reason};
use paywatch_evm::ContractWallets;
use serde::{Deserialize, Serialize};

use crate::AppState;
use crate::error::{ApiError, ErrorBody};
use crate::payments::lookup_payment;

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CheckResult {
    /// `parse`, `provider`, `payment`, `signature`, `note`, `unique`.
    pub check: String,
    /// Whether it passed (`null`: not run, because the message did not parse).
    pub ok: Option<bool>,
    /// Reason codes when it failed.
    pub reasons: Vec<String>,
    /// What exactly is wrong.
    pub detail: Option<String>,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct VerifyResponse {
    /// Every check passed.
    pub valid: bool,
    /// The six checks, in the spec's order.
    pub checks: Vec<CheckResult>,
    /// The payment's state as paywatch last saw it, when it is indexed.
    pub payment_state: Option<String>,
}

fn check(name: &str, failures: Vec<(Reason, String)>) -> CheckResult {
    CheckResult {
        check: name.to_string(),
        ok: Some(failures.is_empty()),
        reasons: failures.iter().map(|(r, _)| r.code().to_string()).collect(),
        detail: (!failures.is_empty()).then(|| {
            failures
                .iter()
                .map(|(_, d)| d.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        }),
    }
}

fn not_run(name: &str) -> CheckResult {
    CheckResult {
        check: name.to_string(),
        ok: None,
        reasons: Vec::new(),
        detail: Some("not run: the message does not parse".to_string()),
    }
}

/// Check 3: the payment moved `amount` of `asset` from payer to pay_to, and is final.
async fn check_payment(state: &AppState, review: &ReviewMessage) -> (Vec<(Reason, String)>, Option<String>) {
    let network = review.network.to_string();
    let payment = match lookup_payment(state, &network, &review.payment, None).await {
        Ok(payment) => payment,
        Err(e) if e.reason == Reason::PaymentNotFound => {
            for other in state.chains.networks.iter().filter(|n| n.id != review.network) {
                let id = other.id.to_string();
                if let Ok(found) = lookup_payment(state, &id, &review.payment, None).await {
                    return (
                        vec![(
                            Reason::V1NetworkMismatch,
                            format!("the payment is on {id}, not {network}"),
                        )],
                        Some(found.payment_state),
                    );
                }
            }
            return (vec![(e.reason, e.message)], None);
        }
        Err(e) => return (vec![(e.reason, e.message)], None),
    };
    let chain = PaymentFacts {
        payer: &payment.payer,
        pay_to: &payment.pay_to,
        amount: &payment.amount,
        asset: &payment.asset,
    };
    let amount = review.amount.to_string();
    let claimed = ExpectedFacts {
        payer: Some(&review.payer),
        pay_to: Some(&review.pay_to),
        amount: Some(&amount),
        asset: Some(&review.asset),
    };
    let mut failures: Vec<(Reason, String)> = mismatches(&chain, &claimed)
        .into_iter()
        .map(|m| {
            let detail = format!(
                "{}: the chain says {}, the message says {}",
                m.fact, m.chain, m.expected
            );
            (m.reason, detail)
        })
        .collect();
    let final_state = payment
        .payment_state
        .parse::<PaymentState>()
        .is_ok_and(PaymentState::is_final);
    if !final_state {
        failures.push((
            Reason::PaymentNotFinal,
            format!(
                "the payment is {}: only final payments can be reviewed",
                payment.payment_state
            ),
        ));
    }
    (failures, Some(payment.payment_state))
}

/// Check 4: the signature is the payer's, over the exact bytes, in strict encoding. A
/// plain account's EVM signature must pass the strict rules; when it does not, and the
/// index is at hand, the chain is asked whether the payer is a smart-contract wallet that
/// accepts it over the EIP-191 hash (ERC-1271, or ERC-6492 for a wallet not yet deployed).
async fn check_signature(
    wallets: Option<&ContractWallets>,
    review: &ReviewMessage,
    message: &[u8],
    signature: &str,
) -> Result<Vec<(Reason, String)>, ApiError> {
    let invalid = |detail: String| Ok(vec![(Reason::V1SignatureInvalid, detail)]);
    let strict = match review.network.namespace() {
        Namespace::Solana => verify_ed25519_strict(message, signature, &review.payer),
        Namespace::Eip155 => {
            let payer = match parse_evm_address(&review.payer) {
                Ok(payer) => payer,
                Err(e) => return invalid(e.to_string()),
            };
            let strict = verify_eip191_strict(message, signature, payer);
            if let (Err(_), Some(wallets), Ok(bytes)) =
                (&strict, wallets, decode_contract_signature(signature))
            {
                let hash = eip191_hash_message(message);
                match wallets.verify(&review.network, payer, hash, &bytes).await {
                    Ok(Some(true)) => return Ok(Vec::new()),
                    Ok(Some(false)) => {
                        return invalid(format!(
                            "signature_contract_rejected: the payer {} is a smart-contract wallet \
                             and does not accept this signature (ERC-1271 / ERC-6492)",
                            review.payer
                        ));
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot ask the chain about a contract wallet");
                        return Err(ApiError::new(
                            StatusCode::SERVICE_UNAVAILABLE,
                            Reason::RpcUnavailable,
                            format!(
                                "cannot tell whether the payer is a smart-contract wallet: {e}; retry later"
                            ),
                        ));
                    }
                }
            }
            strict
        }
    };
    match strict {
        Ok(()) => Ok(Vec::new()),
        Err(e) => invalid(format!("{}: {e}", e.code())),
    }
}

/// A review as posted to a provider.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewSubmission {
    /// The exact message text.
    pub message: String,
    /// The signature: `0x` + hex (EVM) or base58 (Solana).
    pub signature: String,
    /// The note.
    pub note: String,
    /// The provider's host.
    pub provider_host: String,
    /// Record the review when every other check passes, refusing a second one for the pair.
    #[serde(default)]
    pub record: bool,
}

fn offline(name: &str) -> CheckResult {
    CheckResult {
        check: name.to_string(),
        ok: None,
        reasons: Vec::new(),
        detail: Some("not run: offline (no index)".to_string()),
    }
}

/// Runs the six checks. With `state`, checks 3 and 6 run against the index and the chain
/// is asked about smart-contract wallets; without it (offline) checks 3 and 6 are not run,
/// only plain-account signatures can pass, and `valid` only covers format, provider,
/// signature and note.
pub async fn verify_review(
    state: Option<&AppState>,
    last_line: &str,
    request: &ReviewSubmission,
) -> Result<VerifyResponse, ApiError> {
    let review = match parse_review(request.message.as_bytes(), last_line) {
        Ok(review) => review,
        Err(e) => {
            let mut checks = vec![check(
                "parse",
                vec![(Reason::V1MalformedMessage, format!("{}: {e}", e.code()))],
            )];
            checks.extend(["provider", "payment", "signature", "note", "unique"].map(not_run));
            return Ok(VerifyResponse {
                valid: false,
                checks,
                payment_state: None,
            });
        }
    };
    let mut checks = vec![check("parse", Vec::new())];
    let host = request.provider_host.to_ascii_lowercase();
    let provider = if review.provider == host {
        Vec::new()
    } else {
        vec![(
            Reason::V1ProviderMismatch,
            format!("the message is for {}, this provider is {host}", review.provider),
        )]
    };
    checks.push(check("provider", provider));
    let mut payment_state = None;
    match state {
        Some(state) => {
            let (failures, seen) = check_payment(state, &review).await;
            payment_state = seen;
            checks.push(check("payment", failures));
        }
        None => checks.push(offline("payment")),
    }
    let wallets = state.map(|state| &state.contract_wallets);
    checks.push(check(
        "signature",
        check_signature(wallets, &review, request.message.as_bytes(), &request.signature).await?,
    ));
    let note = if note_sha256(&request.note) == review.note_sha256 {
        Vec::new()
    } else {
        vec![(
            Reason::V1NoteMismatch,
            "SHA-256 of the note differs from note_sha256".to_string(),
        )]
    };
    checks.push(check("note", note));

    match state {
        Some(state) => {
            let network = review.network.to_string();
            let others_pass = checks.iter().all(|c| c.ok == Some(true));
            let unique = if request.record && others_pass {
                state
                    .store
                    .record_review(&network, &review.payment, &request.message, &request.signature)
                    .await
                    .map_err(ApiError::store)?
            } else {
                !state
                    .store
                    .review_exists(&network, &review.payment)
                    .await
                    .map_err(ApiError::store)?
            };
            checks.push(check(
                "unique",
                if unique {
                    Vec::new()
                } else {
                    vec![(
                        Reason::V1DuplicateReview,
                        format!("a review of {network} {} is already recorded", review.payment),
                    )]
                },
            ));
        }
        None => checks.push(offline("unique")),
    }
    Ok(VerifyResponse {
        valid: checks.iter().all(|c| c.ok != Some(false)),
        checks,
        payment_state,
    })
}

/// The verify handler.
#[utoipa::path(post, path = "/v1/reviews/verify", tag = "providers", request_body = ReviewSubmission,
    responses((status = 200, description = "The six checks of review v1", body = VerifyResponse), (status = 400, description = "Malformed input", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 429, description = "Over the client's rate limit", body = ErrorBody), (status = 503, description = "The store did not answer", body = ErrorBody)))]
pub(crate) async fn verify(
    State(state): State<AppState>,
    body: Result<Json<ReviewSubmission>, JsonRejection>,
) -> Result<Json<VerifyResponse>, ApiError> {
    let Json(request) = body?;
    verify_review(Some(&state), &state.chains.review_last_line, &request)
        .await
        .map(Json)
}
