//! Payment proofs: for a final EVM payment, the block header, the transaction's receipt
//! and its Merkle-Patricia proof from `receiptsRoot`, the logs of the receipt that make
//! the payment and the facts they give — checked by paywatch before it serves them, and
//! checkable by anyone holding the block hash (`paywatch proof verify`). For a final
//! Solana payment, which no trie commits to, the best available evidence instead: the
//! node's `getTransaction` answer at `finalized`, checked against the payment.

use alloy_primitives::B256;
use paywatch_core::{Namespace, PaymentMethod, Reason};
use paywatch_evm::ChainCallError;
use paywatch_evm::proof::{
    EscrowEventProof, Proven, ProvenFacts, ReceiptProof, add_escrow_events, payment_logs, proven_facts,
    verify_receipt_proof,
};
use paywatch_solana::evidence::{EvidenceError, NODE_ATTESTED_TRANSACTION};

use crate::payments::{pick_payment, resolve_network, stored_payments_of};
use crate::views::{EvidenceView, ProofOrEvidence, ProofView};
use crate::{Queries, QueryError};

fn unavailable(message: impl Into<String>) -> QueryError {
    QueryError::new(Reason::ProofUnavailable, message)
}

fn hash(what: &str, text: &str) -> Result<B256, QueryError> {
    text.parse().map_err(|_| {
        QueryError::new(
            Reason::StoreUnavailable,
            format!("a stored {what} is not a hash: {text}"),
        )
    })
}

/// The proof of one payment: what `GET /v1/payments/{network}/{payment}/proof` and
/// `paywatch proof` answer.
pub async fn payment_proof(
    queries: &Queries,
    network: &str,
    payment: &str,
    index: Option<u32>,
) -> Result<ProofView, QueryError> {
    let (network, payment_id, found) = stored_payments_of(queries, network, payment).await?;
    if network.id.namespace() == Namespace::Solana {
        return Err(unavailable(
            "Solana has no receipt trie, so no proof: GET …/evidence serves the node's finalized transaction as the best available evidence; see the book's Payment proofs chapter (docs/src/proofs.md)",
        ));
    }
    let lookup = pick_payment(network, &payment_id, found, index)?;
    let stored = lookup.payment;
    if !stored.state.is_final_on_chain() {
        return Err(unavailable(format!(
            "the payment is {}: a proof is served once it is final (a payment that left the chain has none)",
            stored.state
        )));
    }
    if !matches!(
        stored.method,
        PaymentMethod::Eip3009
            | PaymentMethod::Permit2
            | PaymentMethod::Upto
            | PaymentMethod::Erc7710
            | PaymentMethod::AuthCapture
    ) {
        return Err(unavailable(format!(
            "{} payments have no receipt proof",
            stored.method
        )));
    }
    // The receipt that makes the payment: its own transaction's, or an escrowed payment's
    // authorization or charge, whose later events are proven each from its own receipt.
    let escrow_events = if stored.method == PaymentMethod::AuthCapture {
        queries
            .store
            .escrow(&stored.network, &stored.payment_id)
            .await
            .map_err(QueryError::store)?
            .ok_or_else(|| unavailable("the escrowed payment's terms and events are not stored"))?
            .events
    } else {
        Vec::new()
    };
    let (opening_block, opening_tx, opening_log) = match escrow_events.iter().find(|e| e.kind.opens()) {
        Some(opening) => (
            opening.block_hash.as_str(),
            opening.tx_id.as_str(),
            opening.event_index,
        ),
        None if stored.method == PaymentMethod::AuthCapture => {
            return Err(unavailable("the escrowed payment's opening event is not stored"));
        }
        None => (
            stored.block_hash.as_str(),
            stored.payment_id.as_str(),
            stored.event_index,
        ),
    };
    let (proof, proven, position) =
        proven_receipt(queries, &network.id, opening_block, opening_tx, opening_log).await?;
    let positions =
        payment_logs(&proven.logs, stored.method, position).map_err(|e| unavailable(e.to_string()))?;
    let mut facts: ProvenFacts =
        proven_facts(&proven, stored.method, &positions).map_err(|e| unavailable(e.to_string()))?;
    let mut event_proofs = Vec::new();
    let mut proven_events = Vec::new();
    // Only final events count in the payment's sums; so in its proof.
    for event in escrow_events.iter().filter(|e| e.applied && !e.kind.opens()) {
        let (proof, proven, position) = proven_receipt(
            queries,
            &network.id,
            &event.block_hash,
            &event.tx_id,
            event.event_index,
        )
        .await?;
        proven_events.push((event.kind, proven, position));
        event_proofs.push(EscrowEventProof {
            kind: event.kind,
            log: position as u64,
            proof,
        });
    }
    add_escrow_events(&mut facts, &proven_events).map_err(|e| unavailable(e.to_string()))?;
    let sums_agree = facts.escrow.as_ref().is_none_or(|sums| {
        Some(sums.captured_amount.to_string()) == stored.captured_amount
            && Some(sums.released_amount.to_string()) == stored.released_amount
            && sums.refunded_amount.to_string() == stored.refunded_amount
    });
    let agrees = paywatch_core::ids::lower_hex(facts.payer) == stored.payer
        && paywatch_core::ids::lower_hex(facts.pay_to) == stored.pay_to
        && facts.amount.to_string() == stored.amount
        && paywatch_core::ids::lower_hex(facts.asset) == stored.asset
        && sums_agree;
    if !agrees {
        return Err(unavailable(format!(
            "the receipts' logs give {facts:?}, which is not the stored payment: the index and the chain disagree (please report it)"
        )));
    }
    let head = queries
        .store
        .chain_head(&network.id.to_string())
        .await
        .map_err(QueryError::store)?;
    Ok(ProofView {
        network: network.id.to_string(),
        payment: stored.payment_id,
        index_in_tx: stored.index_in_tx,
        method: stored.method,
        payment_state: stored.state,
        head_block: head.map(|h| h.head_block),
        final_block: head.and_then(|h| h.final_block),
        payment_logs: positions.iter().map(|p| *p as u64).collect(),
        facts,
        proof,
        escrow_events: event_proofs,
    })
}

/// The receipt proof of transaction `tx` in block `block` (as stored), checked by paywatch
/// before it is served, with what it proves and the position, among its receipt's logs,
/// of the log with block-wide index `log_index`.
async fn proven_receipt(
    queries: &Queries,
    network: &paywatch_core::NetworkId,
    block: &str,
    tx: &str,
    log_index: u64,
) -> Result<(ReceiptProof, Proven, usize), QueryError> {
    let (block_hash, tx_hash) = (hash("block hash", block)?, hash("transaction hash", tx)?);
    let proof = queries
        .chain_calls
        .receipt_proof(network, block_hash, tx_hash)
        .await
        .map_err(|e| match e {
            ChainCallError::NoProof { .. } => unavailable(e.to_string()),
            other => QueryError::new(Reason::RpcUnavailable, format!("{other}; retry later")),
        })?;
    let proven = verify_receipt_proof(&proof, block_hash)
        .map_err(|e| unavailable(format!("the node's proof fails: {e}")))?;
    let position = log_index
        .checked_sub(proof.first_log_index)
        .and_then(|i| usize::try_from(i).ok())
        .filter(|i| *i < proven.logs.len())
        .ok_or_else(|| {
            unavailable(format!(
                "the payment's log {log_index} is not in transaction {tx}'s receipt"
            ))
        })?;
    Ok((proof, proven, position))
}

/// The proof of a payment on an EVM network, or its evidence on a Solana one: what
/// `paywatch proof show` prints and a published review with `?proof=true` carries.
pub async fn proof_or_evidence(
    queries: &Queries,
    network: &str,
    payment: &str,
    index: Option<u32>,
) -> Result<ProofOrEvidence, QueryError> {
    match resolve_network(queries, network)?.id.namespace() {
        Namespace::Solana => payment_evidence(queries, network, payment, index)
            .await
            .map(|evidence| ProofOrEvidence::Evidence(Box::new(evidence))),
        Namespace::Eip155 => payment_proof(queries, network, payment, index)
            .await
            .map(|proof| ProofOrEvidence::Receipt(Box::new(proof))),
    }
}

/// What `GET /v1/payments/{network}/{payment}/evidence` and `paywatch proof show` answer
/// for a final Solana payment: its transaction as the node serves it at `finalized`, checked
/// to be the stored payment's (not a proof: see [`EvidenceView`]).
pub async fn payment_evidence(
    queries: &Queries,
    network: &str,
    payment: &str,
    index: Option<u32>,
) -> Result<EvidenceView, QueryError> {
    let (network, payment_id, found) = stored_payments_of(queries, network, payment).await?;
    if network.id.namespace() != Namespace::Solana {
        return Err(unavailable(
            "an EVM payment has a receipt proof, which needs no trust in a node: GET …/proof",
        ));
    }
    let stored = pick_payment(network, &payment_id, found, index)?.payment;
    if !stored.state.is_final() {
        return Err(unavailable(format!(
            "the payment is {}: evidence is served once it is final (a payment that left the chain has none)",
            stored.state
        )));
    }
    let evidence = queries
        .solana_calls
        .transaction_evidence(&network.id, &stored.payment_id, stored.block_number)
        .await
        .map_err(|e| match e {
            EvidenceError::Rpc { .. } => QueryError::new(Reason::RpcUnavailable, format!("{e}; retry later")),
            EvidenceError::NotWatched(_) | EvidenceError::NoEvidence { .. } => unavailable(e.to_string()),
        })?;
    Ok(EvidenceView {
        evidence: NODE_ATTESTED_TRANSACTION.to_string(),
        network: network.id.to_string(),
        payment: stored.payment_id,
        index_in_tx: stored.index_in_tx,
        method: stored.method,
        payment_state: stored.state,
        slot: stored.block_number,
        block_hash: stored.block_hash,
        confirmation_status: evidence.confirmation_status,
        finalized_slot: evidence.finalized_slot,
        transaction: evidence.transaction,
    })
}
