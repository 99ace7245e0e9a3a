//! Payment lookups: one payment by `(network, payment)` as paywatch knows it, optionally
//! compared with what the caller expects of it; up to 1,000 lookups in one batch; a
//! payment's history; and the resolution of networks, ids and addresses they share.

use alloy_primitives::U256;
use paywatch_core::Reason;
use paywatch_core::config::{NetworkConfig, Verification};
use paywatch_core::expect::{ExpectedFacts, PaymentFacts, mismatches};
use paywatch_core::ids::{
    lower_hex, parse_evm_address, parse_evm_tx_hash, parse_solana_address, parse_solana_signature,
};
use paywatch_core::network::NetworkId;
use paywatch_core::{Namespace, PaymentMethod};
use paywatch_store::{PaymentLookup, StoredPayment};

use crate::views::{
    BatchAnswer, BatchItem, Expectation, HistoryView, MismatchView, PaymentHistory, PaymentView, payment_view,
};
use crate::{Queries, QueryError};

/// Resolves the `{network}` path segment against the configuration.
pub(crate) fn resolve_network<'a>(queries: &'a Queries, name: &str) -> Result<&'a NetworkConfig, QueryError> {
    if let Some(network) = queries.chains.network(name) {
        return Ok(network);
    }
    match NetworkId::parse_or_alias(name) {
        Ok(id) => Err(QueryError::new(
            Reason::NetworkNotWatched,
            format!("network {id} is not in this paywatch's chains.toml"),
        )),
        Err(e) => Err(QueryError::new(Reason::MalformedNetwork, e.to_string())),
    }
}

/// Parses the `{payment}` path segment in the network's spelling.
fn parse_payment_id(network: &NetworkConfig, payment: &str) -> Result<String, QueryError> {
    match network.id.namespace() {
        Namespace::Eip155 => parse_evm_tx_hash(payment)
            .map(lower_hex)
            .map_err(|e| QueryError::new(Reason::MalformedPayment, e.to_string())),
        Namespace::Solana => parse_solana_signature(payment)
            .map(|_| payment.to_string())
            .map_err(|e| QueryError::new(Reason::MalformedPayment, e.to_string())),
    }
}

/// An address or asset in the network's canonical spelling, or 400 `malformed_query`
/// naming the parameter.
pub(crate) fn canonical_address(
    network: &NetworkConfig,
    name: &str,
    value: &str,
) -> Result<String, QueryError> {
    let refused =
        |e: paywatch_core::ids::IdError| QueryError::new(Reason::MalformedQuery, format!("{name}: {e}"));
    match network.id.namespace() {
        Namespace::Eip155 => parse_evm_address(value).map(lower_hex).map_err(refused),
        Namespace::Solana => parse_solana_address(value)
            .map(|_| value.to_string())
            .map_err(refused),
    }
}

/// The facts a caller expects of a payment (each optional).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpectedParams {
    /// Expected payer.
    pub payer: Option<String>,
    /// Expected pay_to.
    pub pay_to: Option<String>,
    /// Expected amount, an exact integer in the asset's smallest unit.
    pub amount: Option<String>,
    /// Expected asset.
    pub asset: Option<String>,
}

/// Looks up one payment and compares it with the facts `expected` gives, if it gives any:
/// what the HTTP lookup and gRPC `GetPayment` answer.
pub async fn lookup_expected(
    queries: &Queries,
    network: &str,
    payment: &str,
    index: Option<u32>,
    expected: &ExpectedParams,
) -> Result<PaymentView, QueryError> {
    let mut view = lookup_payment(queries, network, payment, index).await?;
    view.expectation = check_expectation(queries, &view, expected)?;
    Ok(view)
}

/// Compares `payment` with the facts `query` expects, if it expects any.
fn check_expectation(
    queries: &Queries,
    payment: &PaymentView,
    query: &ExpectedParams,
) -> Result<Option<Expectation>, QueryError> {
    if query.payer.is_none() && query.pay_to.is_none() && query.amount.is_none() && query.asset.is_none() {
        return Ok(None);
    }
    let network = resolve_network(queries, &payment.network)?;
    let address = |name: &str, value: &Option<String>| {
        value
            .as_deref()
            .map(|v| canonical_address(network, name, v))
            .transpose()
    };
    let (payer, pay_to, asset) = (
        address("payer", &query.payer)?,
        address("pay_to", &query.pay_to)?,
        address("asset", &query.asset)?,
    );
    let amount = query
        .amount
        .as_deref()
        .map(|v| {
            U256::from_str_radix(v, 10)
                .ok()
                .filter(|n| n.to_string() == v)
                .map(|n| n.to_string())
                .ok_or_else(|| {
                    QueryError::new(Reason::MalformedQuery,
                        format!("amount={v}: expected an integer in the asset's smallest unit, without sign, point or leading zeros"),
                    )
                })
        })
        .transpose()?;
    let chain = PaymentFacts {
        payer: &payment.payer,
        pay_to: &payment.pay_to,
        amount: payment.paid_amount(),
        asset: &payment.asset,
    };
    let expected = ExpectedFacts {
        payer: payer.as_deref(),
        pay_to: pay_to.as_deref(),
        amount: amount.as_deref(),
        asset: asset.as_deref(),
    };
    let found = mismatches(&chain, &expected);
    let mut reasons: Vec<String> = found.iter().map(|m| m.reason.code().to_string()).collect();
    if let Some(reason) = payment.payment_state.unpaid_reason() {
        reasons.push(reason.code().to_string());
    }
    Ok(Some(Expectation {
        matches: reasons.is_empty(),
        reasons,
        mismatches: found
            .into_iter()
            .map(|m| MismatchView {
                fact: m.fact.to_string(),
                chain: m.chain,
                expected: m.expected,
            })
            .collect(),
    }))
}

/// Looks up one payment: what the HTTP handler answers and `paywatch lookup` prints.
pub async fn lookup_payment(
    queries: &Queries,
    network: &str,
    payment: &str,
    index: Option<u32>,
) -> Result<PaymentView, QueryError> {
    let (network, payment_id, found) = stored_payments_of(queries, network, payment).await?;
    let found = pick_payment(network, &payment_id, found, index)?;
    full_view(queries, network, found).await
}

/// The payment `index` picks among `found`, the stored payments of transaction
/// `payment_id`: the only one when `index` is not given (409 `ambiguous_payment` when
/// there are several), 404 `payment_not_found` when none matches.
pub(crate) fn pick_payment(
    network: &NetworkConfig,
    payment_id: &str,
    mut found: Vec<PaymentLookup>,
    index: Option<u32>,
) -> Result<PaymentLookup, QueryError> {
    let chosen = match (index, found.len()) {
        (_, 0) => None,
        (None, 1) => found.pop(),
        (None, n) => {
            let indexes: Vec<String> = found.iter().map(|p| p.payment.index_in_tx.to_string()).collect();
            return Err(QueryError::new(
                Reason::AmbiguousPayment,
                format!(
                    "transaction {payment_id} settles {n} payments; add ?index= one of {} to pick one",
                    indexes.join(", ")
                ),
            ));
        }
        (Some(index), _) => found.into_iter().find(|p| p.payment.index_in_tx == index),
    };
    chosen.ok_or_else(|| {
        QueryError::new(
            Reason::PaymentNotFound,
            format!(
                "no x402 payment {payment_id} is indexed on {} (not yet seen, not a payment, or not on a watched token)",
                network.id
            ),
        )
    })
}

/// The network named, the payment id in its canonical spelling, and every stored
/// payment of that transaction.
pub(crate) async fn stored_payments_of<'a>(
    queries: &'a Queries,
    network: &str,
    payment: &str,
) -> Result<(&'a NetworkConfig, String, Vec<PaymentLookup>), QueryError> {
    let network = resolve_network(queries, network)?;
    let payment_id = parse_payment_id(network, payment)?;
    let net = network.id.to_string();
    let mut found = queries
        .store
        .lookup_payments(&net, &payment_id)
        .await
        .map_err(QueryError::store)?;
    // An escrowed payment's id is its paymentInfoHash; its authorization's or charge's
    // transaction hash finds it too.
    if found.is_empty() && network.id.namespace() == Namespace::Eip155 {
        let opened = queries
            .store
            .escrow_opened_in(&net, &payment_id)
            .await
            .map_err(QueryError::store)?;
        for id in opened {
            found.extend(
                queries
                    .store
                    .lookup_payments(&net, &id)
                    .await
                    .map_err(QueryError::store)?,
            );
        }
    }
    Ok((network, payment_id, found))
}

/// The view of a looked-up payment, with its refunds read when it has any.
async fn full_view(
    queries: &Queries,
    network: &NetworkConfig,
    found: PaymentLookup,
) -> Result<PaymentView, QueryError> {
    let refunds = if found.refund_count == 0 {
        Vec::new()
    } else {
        queries
            .store
            .refunds_of(
                &found.payment.network,
                &found.payment.payment_id,
                found.payment.index_in_tx,
            )
            .await
            .map_err(QueryError::store)?
    };
    let escrow = if found.payment.method == PaymentMethod::AuthCapture {
        queries
            .store
            .escrow(&found.payment.network, &found.payment.payment_id)
            .await
            .map_err(QueryError::store)?
    } else {
        None
    };
    let verification = if network.verification == Verification::Lagging {
        Some(verification_of(queries, &found.payment).await?)
    } else {
        None
    };
    let mut view = payment_view(
        network,
        found.payment,
        refunds,
        found.intent,
        found.head_block,
        escrow,
    );
    if let Some((verified, reason)) = verification {
        view.verified = Some(verified);
        view.unverified_reason = reason;
    }
    Ok(view)
}

/// Under `verification = "lagging"`: whether the scheduled audit has cross-checked every
/// block the payment's state is made of (its own, its refunds', its escrow events') and
/// found nothing about it, and why not otherwise.
async fn verification_of(
    queries: &Queries,
    payment: &StoredPayment,
) -> Result<(bool, Option<String>), QueryError> {
    let store = &queries.store;
    let key = (payment.payment_id.clone(), payment.index_in_tx);
    let coverage = store
        .audit_coverage(&payment.network, std::slice::from_ref(&key))
        .await
        .map_err(QueryError::store)?;
    let (last_block, found) = coverage
        .get(&key)
        .copied()
        .unwrap_or((payment.block_number, false));
    if found {
        let findings = store
            .findings_about(&payment.network, &payment.payment_id, payment.index_in_tx)
            .await
            .map_err(QueryError::store)?;
        let more = match findings.len() {
            0 | 1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        let first = findings.first().map_or("", String::as_str);
        return Ok((
            false,
            Some(format!(
                "an audit found the store and the chain to disagree: {first}{more}"
            )),
        ));
    }
    let audited_to = store
        .audited_to(&payment.network)
        .await
        .map_err(QueryError::store)?;
    if is_verified(audited_to, last_block, found) {
        return Ok((true, None));
    }
    let what = if last_block == payment.block_number {
        "the payment is in block"
    } else {
        "the payment's last refund or escrow event is in block"
    };
    Ok((
        false,
        Some(format!(
            "not cross-checked yet: the scheduled audit has reached {}, {what} {last_block}",
            audited_to.map_or("no block".to_string(), |to| format!("block {to}")),
        )),
    ))
}

/// A payment is verified once the scheduled audit reached `last_block` (the last block its
/// state is made of) and no audit `found` anything about it.
pub(crate) fn is_verified(audited_to: Option<u64>, last_block: u64, found: bool) -> bool {
    !found && audited_to.is_some_and(|to| to >= last_block)
}

/// Every payment a transaction settles, in `index_in_tx` order (empty when none is
/// indexed).
pub(crate) async fn payments_of_transaction(
    queries: &Queries,
    network: &str,
    payment: &str,
) -> Result<Vec<PaymentView>, QueryError> {
    let (network, _, found) = stored_payments_of(queries, network, payment).await?;
    let mut views = Vec::with_capacity(found.len());
    for found in found {
        views.push(full_view(queries, network, found).await?);
    }
    views.sort_by_key(|v| v.index_in_tx);
    Ok(views)
}

/// A payment with every state change it went through.
pub async fn payment_history(
    queries: &Queries,
    network: &str,
    payment: &str,
    index: Option<u32>,
) -> Result<PaymentHistory, QueryError> {
    let payment = lookup_payment(queries, network, payment, index).await?;
    let history = queries
        .store
        .history_of(&payment.network, &payment.payment, payment.index_in_tx)
        .await
        .map_err(QueryError::store)?
        .into_iter()
        .map(HistoryView::from)
        .collect();
    Ok(PaymentHistory { payment, history })
}

/// Most lookups in one batch.
pub const MAX_BATCH: usize = 1000;

/// Answers each lookup as [`lookup_payment`] would, in request order. A lookup the caller
/// got wrong (malformed, not found, ambiguous) is answered in its place; a failure of
/// paywatch's own (the store) fails the whole batch rather than answering part of it.
pub async fn lookup_batch(
    queries: &Queries,
    lookups: Vec<BatchItem>,
) -> Result<Vec<BatchAnswer>, QueryError> {
    if lookups.len() > MAX_BATCH {
        return Err(QueryError::new(
            Reason::PayloadTooLarge,
            format!("{} lookups in one batch; at most {MAX_BATCH}", lookups.len()),
        ));
    }
    // All at once: the store answers concurrent lookups with shared statements.
    let answers = futures::future::join_all(
        lookups
            .iter()
            .map(|lookup| lookup_payment(queries, &lookup.network, &lookup.payment, lookup.index)),
    )
    .await;
    let mut results = Vec::with_capacity(answers.len());
    for (lookup, answer) in lookups.into_iter().zip(answers) {
        results.push(match answer {
            Ok(view) => BatchAnswer {
                lookup,
                payment: Some(view),
                reason: None,
                message: None,
            },
            Err(e) if e.is_unavailable() => return Err(e),
            Err(e) => BatchAnswer {
                lookup,
                payment: None,
                reason: Some(e.reason.code().to_string()),
                message: Some(e.message),
            },
        });
    }
    Ok(results)
}
