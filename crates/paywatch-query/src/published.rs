//! Review v1's read side: each recorded review published with the message, signature and
//! wallet verbatim and the payment's state as paywatch sees it now, one at a time or as
//! a keyset-paged listing by the payments' filters (pay_to, asset, time, …).

use crate::listings::{ListParams, cursor_after, cursor_of, cut_page, filter_of, page_limit};
use crate::payments::stored_payments_of;
use crate::proofs::proof_or_evidence;
use crate::views::{ProofOrEvidence, ReviewPage, ReviewView, review_view};
use crate::{Queries, QueryError};
use paywatch_core::Reason;

/// When paywatch last read `network`'s chain, Unix milliseconds.
async fn observed_ms(queries: &Queries, network: &str) -> Result<Option<i64>, QueryError> {
    Ok(queries
        .store
        .chain_head(network)
        .await
        .map_err(QueryError::store)?
        .map(|head| head.updated_ms))
}

/// The review recorded for one payment, as published: what `GET /v1/reviews/{network}/{payment}`
/// answers. `index` picks one payment of a transaction that settles several; `with_proof`
/// adds the payment's receipt proof (EVM) or its transaction's evidence (Solana), or why
/// there is none.
pub async fn published_review(
    queries: &Queries,
    network: &str,
    payment: &str,
    index: Option<u32>,
    with_proof: bool,
) -> Result<ReviewView, QueryError> {
    let (network, payment_id, payments) = stored_payments_of(queries, network, payment).await?;
    let net = network.id.to_string();
    if payments.is_empty() {
        return Err(QueryError::new(
            Reason::PaymentNotFound,
            format!("no x402 payment {payment_id} is indexed on {net}, so no review of it either"),
        ));
    }
    let mut ids: Vec<&str> = payments.iter().map(|p| p.payment.payment_id.as_str()).collect();
    ids.dedup();
    let mut reviews = Vec::new();
    for id in ids {
        reviews.extend(
            queries
                .store
                .reviews_by_id(&net, id)
                .await
                .map_err(QueryError::store)?,
        );
    }
    if let Some(index) = index {
        reviews.retain(|r| r.payment.index_in_tx == index);
    }
    if reviews.len() > 1 {
        let indexes: Vec<String> = reviews
            .iter()
            .map(|r| r.payment.index_in_tx.to_string())
            .collect();
        return Err(QueryError::new(
            Reason::AmbiguousPayment,
            format!(
                "transaction {payment_id} has {} reviewed payments; add ?index= one of {} to pick one",
                reviews.len(),
                indexes.join(", ")
            ),
        ));
    }
    let Some(review) = reviews.pop() else {
        return Err(QueryError::new(
            Reason::ReviewNotFound,
            format!(
                "no review is recorded for {net} {payment_id}{}; record one with POST /v1/reviews/verify and \"record\": true",
                index.map(|i| format!(" #{i}")).unwrap_or_default()
            ),
        ));
    };
    let mut view = review_view(review, observed_ms(queries, &net).await?);
    if with_proof {
        match proof_or_evidence(queries, &net, &view.payment, Some(view.index_in_tx)).await {
            Ok(ProofOrEvidence::Receipt(proof)) => view.proof = Some(proof),
            Ok(ProofOrEvidence::Evidence(evidence)) => view.evidence = Some(evidence),
            Err(e) if e.reason == Reason::ProofUnavailable => view.proof_unavailable = Some(e.message),
            Err(e) => return Err(e),
        }
    }
    Ok(view)
}

/// One page of published reviews whose payments match the listing filter: what
/// `GET /v1/reviews` answers.
pub async fn list_reviews(queries: &Queries, params: &ListParams) -> Result<ReviewPage, QueryError> {
    let (filter, network) = filter_of(queries, params)?;
    let after = cursor_of(params)?;
    let limit = page_limit(params.limit)?;
    let mut page = queries
        .store
        .list_reviews(&filter, after.as_ref(), limit + 1)
        .await
        .map_err(QueryError::store)?;
    let has_more = cut_page(&mut page, limit);
    let next_cursor = page
        .last()
        .map(|r| cursor_after(&r.payment))
        .or(after)
        .map(|c| c.to_string());
    let observed = observed_ms(queries, &network.id.to_string()).await?;
    Ok(ReviewPage {
        reviews: page.into_iter().map(|r| review_view(r, observed)).collect(),
        next_cursor,
        has_more,
    })
}
