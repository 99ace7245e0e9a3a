//! Review verification: the six checks of a review v1 provider, against paywatch's own
//! index. Every check is answered, with its reason code when it fails.

use alloy_primitives::eip191_hash_message;
use paywatch_core::config::ChainsConfig;
use paywatch_core::expect::{ExpectedFacts, PaymentFacts, mismatches};
use paywatch_core::ids::parse_evm_address;
use paywatch_core::review::{Freshness, ReviewMessage, Staleness, note_sha256, parse_review};
use paywatch_core::signature::{decode_contract_signature, verify_ed25519_strict, verify_eip191_strict};
use paywatch_core::state::PaymentState;
use paywatch_core::{Namespace, Reason};
use paywatch_evm::ChainCalls;
use paywatch_store::ReviewRecording;
use serde::Deserialize;

use crate::payments::payments_of_transaction;
use crate::views::{CheckResult, VerifyResponse};
use crate::{Queries, QueryError};

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

/// What check 3 found: its failures, and the payment it judged (its state, its id as
/// stored — an escrowed payment's paymentInfoHash — and its number).
struct PaymentCheck {
    failures: Vec<(Reason, String)>,
    payment_state: Option<PaymentState>,
    payment_id: Option<String>,
    index_in_tx: Option<u32>,
}

impl PaymentCheck {
    fn failed(reason: Reason, detail: String) -> Self {
        Self {
            failures: vec![(reason, detail)],
            payment_state: None,
            payment_id: None,
            index_in_tx: None,
        }
    }
}

/// Check 3: the payment moved `amount` of `asset` from payer to pay_to, and is final. Of
/// a transaction that settles several payments, the one whose four facts the message
/// names is judged (failing that, the one that differs in the fewest).
async fn check_payment(queries: &Queries, review: &ReviewMessage) -> PaymentCheck {
    let network = review.network.to_string();
    if !watches(queries, review) {
        return PaymentCheck::failed(
            Reason::NetworkNotWatched,
            format!(
                "paywatch does not watch {network}, so it cannot tell whether the payment happened; \
                 add the network to chains.toml (or enable it) to review its payments"
            ),
        );
    }
    let payments = match payments_of_transaction(queries, &network, &review.payment).await {
        Ok(payments) => payments,
        Err(e) => return PaymentCheck::failed(e.reason, e.message),
    };
    if payments.is_empty() {
        for other in queries.chains.networks.iter().filter(|n| n.id != review.network) {
            let id = other.id.to_string();
            if let Ok(found) = payments_of_transaction(queries, &id, &review.payment).await
                && let Some(first) = found.into_iter().next()
            {
                return PaymentCheck {
                    payment_state: Some(first.payment_state),
                    ..PaymentCheck::failed(
                        Reason::V1NetworkMismatch,
                        format!("the payment is on {id}, not {network}"),
                    )
                };
            }
        }
        return PaymentCheck::failed(
            Reason::PaymentNotFound,
            format!(
                "no x402 payment {} is indexed on {network} (not yet seen, not a payment, or not on a watched token)",
                review.payment
            ),
        );
    }
    let amount = review.amount.to_string();
    let claimed = ExpectedFacts {
        payer: Some(&review.payer),
        pay_to: Some(&review.pay_to),
        amount: Some(&amount),
        asset: Some(&review.asset),
    };
    let judged = payments
        .iter()
        .map(|payment| {
            let chain = PaymentFacts {
                payer: &payment.payer,
                pay_to: &payment.pay_to,
                amount: payment.paid_amount(),
                asset: &payment.asset,
            };
            let failures: Vec<(Reason, String)> = mismatches(&chain, &claimed)
                .into_iter()
                .map(|m| {
                    let detail = format!(
                        "{}: the chain says {}, the message says {}",
                        m.fact, m.chain, m.expected
                    );
                    (m.reason, detail)
                })
                .collect();
            (payment, failures)
        })
        .min_by_key(|(payment, failures)| (failures.len(), payment.index_in_tx));
    let Some((payment, mut failures)) = judged else {
        unreachable!("payments is not empty");
    };
    if let Some(reason) = payment.payment_state.unpaid_reason() {
        failures.push((
            reason,
            format!(
                "the payment is {}: only final, paid payments can be reviewed (a hold that was never captured does not count)",
                payment.payment_state
            ),
        ));
    }
    PaymentCheck {
        failures,
        payment_state: Some(payment.payment_state),
        payment_id: Some(payment.payment.clone()),
        index_in_tx: Some(payment.index_in_tx),
    }
}

/// Check 4: the signature is the payer's, over the exact bytes, in strict encoding. A
/// plain account's EVM signature must pass the strict rules; when it does not, and the
/// index is at hand, the chain is asked whether the payer is a smart-contract wallet that
/// accepts it over the EIP-191 hash (ERC-1271, or ERC-6492 for a wallet not yet deployed).
async fn check_signature(
    wallets: Option<&ChainCalls>,
    review: &ReviewMessage,
    message: &[u8],
    signature: &str,
) -> Result<Vec<(Reason, String)>, QueryError> {
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
                match wallets
                    .verify_contract_signature(&review.network, payer, hash, &bytes)
                    .await
                {
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
                        return Err(QueryError::new(
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
    /// The software that posted the review (review v1's optional `via`); not checked.
    #[serde(default)]
    pub via: Option<String>,
}

/// Whether the review's network is one paywatch indexes.
fn watches(queries: &Queries, review: &ReviewMessage) -> bool {
    queries.chains.networks.iter().any(|n| n.id == review.network)
}

/// Check 1's freshness rule: `issued_at` within `[review] max_age_secs` before and
/// `max_future_secs` after `now`.
fn fresh(freshness: &Freshness, review: &ReviewMessage, now: i64) -> Vec<(Reason, String)> {
    match freshness.check(review, now) {
        Ok(()) => Vec::new(),
        Err(e @ Staleness::TooOld { .. }) => vec![(Reason::V1StaleMessage, e.to_string())],
        Err(e @ Staleness::InFuture { .. }) => vec![(Reason::V1FutureMessage, e.to_string())],
    }
}

fn offline(name: &str) -> CheckResult {
    CheckResult {
        check: name.to_string(),
        ok: None,
        reasons: Vec::new(),
        detail: Some("not run: offline (no index)".to_string()),
    }
}

/// The provider's fixed rules for messages: the last line and the freshness bounds.
#[derive(Debug, Clone, Copy)]
pub struct ReviewRules<'a> {
    /// The fixed last line (`[review] last_line`).
    pub last_line: &'a str,
    /// How old or how far ahead `issued_at` may be.
    pub freshness: Freshness,
    /// The provider's clock, Unix seconds.
    pub now: i64,
}

impl<'a> ReviewRules<'a> {
    /// The rules of `chains`, at the system clock.
    pub fn of(chains: &'a ChainsConfig) -> Self {
        ReviewRules {
            last_line: &chains.review_last_line,
            freshness: chains.review_freshness,
            now: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
        }
    }
}

/// Runs the six checks. With `queries`, checks 3 and 6 run against the index and the chain
/// is asked about smart-contract wallets; without it (offline) checks 3 and 6 are not run,
/// only plain-account signatures can pass, and `valid` is `null` at best (`not_run` names
/// what was not checked).
pub async fn verify_review(
    queries: Option<&Queries>,
    rules: ReviewRules<'_>,
    request: &ReviewSubmission,
) -> Result<VerifyResponse, QueryError> {
    let review = match parse_review(request.message.as_bytes(), rules.last_line) {
        Ok(review) => review,
        Err(e) => {
            let mut checks = vec![check(
                "parse",
                vec![(Reason::V1MalformedMessage, format!("{}: {e}", e.code()))],
            )];
            checks.extend(["provider", "payment", "signature", "note", "unique"].map(not_run));
            return Ok(VerifyResponse {
                valid: Some(false),
                not_run: Vec::new(),
                checks,
                payment_state: None,
            });
        }
    };
    let mut checks = vec![check("parse", fresh(&rules.freshness, &review, rules.now))];
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
    let mut payment_id = None;
    let mut index_in_tx = None;
    match queries {
        Some(queries) => {
            let judged = check_payment(queries, &review).await;
            payment_state = judged.payment_state;
            payment_id = judged.payment_id;
            index_in_tx = judged.index_in_tx;
            checks.push(check("payment", judged.failures));
        }
        None => checks.push(offline("payment")),
    }
    // A network paywatch does not watch has no RPC to ask about contract wallets: its
    // signatures are held to the plain-account rules.
    let wallets = queries
        .filter(|queries| watches(queries, &review))
        .map(|queries| &queries.chain_calls);
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

    match queries {
        Some(queries) => {
            let network = review.network.to_string();
            let others_pass = checks.iter().all(|c| c.ok == Some(true));
            // One review per payment; of a batch settlement, per payment of it.
            let unique = match (index_in_tx, &payment_id) {
                (Some(index), Some(payment_id)) if request.record && others_pass => {
                    let recorded = queries
                        .store
                        .record_review(&network, payment_id, index, &request.message, &request.signature)
                        .await
                        .map_err(QueryError::store)?;
                    // The state as of the recording: every later change of its published
                    // state is a `review_state` event.
                    match recorded {
                        ReviewRecording::Recorded { state } => {
                            payment_state = state.or(payment_state);
                            true
                        }
                        ReviewRecording::Duplicate => false,
                    }
                }
                (index, payment_id) => !queries
                    .store
                    .review_exists(&network, payment_id.as_deref().unwrap_or(&review.payment), index)
                    .await
                    .map_err(QueryError::store)?,
            };
            checks.push(check(
                "unique",
                if unique {
                    Vec::new()
                } else {
                    vec![(
                        Reason::V1DuplicateReview,
                        match index_in_tx {
                            Some(index) => format!(
                                "a review of {network} {} #{index} is already recorded",
                                review.payment
                            ),
                            None => format!("a review of {network} {} is already recorded", review.payment),
                        },
                    )]
                },
            ));
        }
        None => checks.push(offline("unique")),
    }
    let not_run: Vec<String> = checks
        .iter()
        .filter(|c| c.ok.is_none())
        .map(|c| c.check.clone())
        .collect();
    let valid = if checks.iter().any(|c| c.ok == Some(false)) {
        Some(false)
    } else if not_run.is_empty() {
        Some(true)
    } else {
        None
    };
    Ok(VerifyResponse {
        valid,
        not_run,
        checks,
        payment_state,
    })
}
