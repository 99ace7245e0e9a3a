//! Receipt proofs: what lets a third party holding only a block hash check an EVM payment
//! without trusting paywatch — the block header, the transaction's receipt (its EIP-2718
//! encoding, as the receipts trie holds it) and the Merkle-Patricia proof from the
//! header's `receiptsRoot` to it, built from the block's receipts with alloy's trie code;
//! and the offline check of such a proof, step by step, down to the payment's facts read
//! from the receipt's logs.

use alloy::consensus::{Header, ReceiptEnvelope, Transaction as _, TxEnvelope};
use alloy::eips::BlockId;
use alloy::eips::eip2718::Decodable2718;
use alloy::primitives::{Address, B256, Bytes, Log, U256, keccak256};
use alloy::rlp::{Decodable, Encodable};
use alloy::sol_types::SolEvent;
use alloy::trie::proof::{ProofRetainer, verify_proof};
use alloy::trie::root::adjust_index_for_rlp;
use alloy::trie::{HashBuilder, Nibbles};
use futures::{StreamExt, TryStreamExt};
use paywatch_core::PaymentMethod;
use paywatch_core::ids::lower_hex;
use paywatch_core::records::{EscrowEventKind, Execution};
use serde::{Deserialize, Serialize};

use crate::decode::{
    AuthorizationUsed, EscrowLog, ROOT_AUTHORITY, RedeemedDelegation, Settled, SettledWithPermit, Transfer,
    escrow_log,
};
use crate::rpc::{BlockReceipt, EvmRpc, RpcFault};
use crate::settle_calls::{decode_redeem_call, decode_settle_call};

/// Receipts asked for at once from a node without `eth_getBlockReceipts`.
const RECEIPTS_IN_FLIGHT: usize = 16;

/// A transaction's receipt and its proof of inclusion in a block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptProof {
    /// The block's hash: keccak256 of `header_rlp`.
    pub block_hash: B256,
    /// The block's number.
    pub block_number: u64,
    /// The block header, RLP-encoded.
    pub header_rlp: Bytes,
    /// The transaction's hash.
    pub tx_hash: B256,
    /// The transaction's index in the block: the receipt's key in the trie is its RLP.
    pub tx_index: u64,
    /// The receipt, EIP-2718-encoded (a type byte, then the RLP, for typed receipts).
    pub receipt: Bytes,
    /// The trie nodes from `receiptsRoot` down to the receipt's leaf, in that order.
    pub nodes: Vec<Bytes>,
    /// The block-wide log index of the receipt's first log (what the logs' `logIndex`
    /// counts from; not itself proven, only used to name logs as the node does).
    pub first_log_index: u64,
    /// The transaction itself, EIP-2718-encoded (the transactions trie's value at the same
    /// key): its call proves what no log carries, such as a Permit2 nonce.
    pub transaction: Bytes,
    /// The trie nodes from the header's `transactionsRoot` down to the transaction.
    pub transaction_nodes: Vec<Bytes>,
}

/// Why a proof could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The RPC failed after its retries.
    #[error(transparent)]
    Rpc(#[from] RpcFault),
    /// The node does not know the block (it left the chain) or the transaction in it.
    #[error("{0}")]
    NotFound(String),
    /// The node's answers do not fit together (a header that does not hash to its
    /// hash, receipts that do not make its `receiptsRoot`).
    #[error("the node's answers do not fit together: {0}")]
    Inconsistent(String),
}

/// The trie key of the receipt at `index`: its index, RLP-encoded.
fn key_of(index: u64) -> Vec<u8> {
    let mut key = Vec::new();
    (index as usize).encode(&mut key);
    key
}

/// Builds the proof that transaction `tx_hash` of block `block_hash` has its receipt,
/// from the block's header and receipts (`eth_getBlockReceipts`).
pub async fn build_receipt_proof(
    rpc: &EvmRpc,
    block_hash: B256,
    tx_hash: B256,
) -> Result<ReceiptProof, BuildError> {
    let header = rpc
        .full_header(BlockId::hash(block_hash))
        .await?
        .ok_or_else(|| BuildError::NotFound(format!("the node does not know block {block_hash}")))?;
    if header.hash_slow() != block_hash {
        return Err(BuildError::Inconsistent(format!(
            "the header served for {block_hash} hashes to {}",
            header.hash_slow()
        )));
    }
    let transactions = rpc.block_transactions(block_hash).await?.ok_or_else(|| {
        BuildError::NotFound(format!("the node serves no transactions of block {block_hash}"))
    })?;
    let receipts = block_receipts(rpc, block_hash, &transactions).await?;
    let position = receipts
        .iter()
        .position(|receipt| receipt.transaction_hash() == tx_hash)
        .ok_or_else(|| BuildError::NotFound(format!("transaction {tx_hash} is not in block {block_hash}")))?;
    let encoded: Vec<Vec<u8>> = receipts.iter().map(BlockReceipt::encoded_2718).collect();
    let (root, nodes) = trie_proof(&encoded, position);
    if root != header.receipts_root {
        return Err(BuildError::Inconsistent(format!(
            "the block's receipts make the root {root}, its header says {}",
            header.receipts_root
        )));
    }
    let transactions: Vec<Vec<u8>> = transactions.into_iter().map(|(_, tx)| tx).collect();
    let (transactions_root, transaction_nodes) = trie_proof(&transactions, position);
    if transactions_root != header.transactions_root || transactions.len() != encoded.len() {
        return Err(BuildError::Inconsistent(format!(
            "the block's transactions make the root {transactions_root}, its header says {}",
            header.transactions_root
        )));
    }
    let first_log_index = receipts[..position]
        .iter()
        .map(|receipt| receipt.logs().len() as u64)
        .sum();
    let mut header_rlp = Vec::new();
    header.encode(&mut header_rlp);
    Ok(ReceiptProof {
        block_hash,
        block_number: header.number,
        header_rlp: header_rlp.into(),
        tx_hash,
        tx_index: position as u64,
        receipt: encoded[position].clone().into(),
        nodes,
        first_log_index,
        transaction: transactions[position].clone().into(),
        transaction_nodes,
    })
}

/// The receipts of block `hash` (whose transactions are `transactions`), in block order
/// with their transactions' hashes: `eth_getBlockReceipts`, or, from a node that does not
/// serve it, one `eth_getTransactionReceipt` per transaction.
async fn block_receipts(
    rpc: &EvmRpc,
    hash: B256,
    transactions: &[(B256, Vec<u8>)],
) -> Result<Vec<BlockReceipt>, BuildError> {
    match rpc.block_receipts(hash).await {
        Ok(Some(receipts)) => return Ok(receipts),
        Ok(None) => {
            return Err(BuildError::NotFound(format!(
                "the node serves no receipts of block {hash}"
            )));
        }
        Err(RpcFault::Unsupported(_)) => {}
        Err(other) => return Err(other.into()),
    }
    let hashes: Vec<B256> = transactions.iter().map(|(tx, _)| *tx).collect();
    let receipts: Vec<(B256, Option<BlockReceipt>)> = futures::stream::iter(hashes)
        .map(|tx| async move { rpc.transaction_receipt(tx).await.map(|found| (tx, found)) })
        .buffered(RECEIPTS_IN_FLIGHT)
        .try_collect()
        .await?;
    receipts
        .into_iter()
        .map(|(tx, found)| match found {
            Some(receipt) if receipt.block_hash() == Some(hash) => Ok(receipt),
            _ => Err(BuildError::NotFound(format!(
                "the node has no receipt of transaction {tx} in block {hash}"
            ))),
        })
        .collect()
}

/// The root of the ordered trie of `items` (keyed by the RLP of their index, as a block's
/// transactions and receipts are) and the nodes from it down to the item at `position`.
fn trie_proof(items: &[Vec<u8>], position: usize) -> (B256, Vec<Bytes>) {
    let target = Nibbles::unpack(key_of(position as u64));
    let mut builder = HashBuilder::default().with_proof_retainer(ProofRetainer::new(vec![target]));
    for i in 0..items.len() {
        let index = adjust_index_for_rlp(i, items.len());
        builder.add_leaf(Nibbles::unpack(key_of(index as u64)), &items[index]);
    }
    let root = builder.root();
    let nodes = builder
        .take_proof_nodes()
        .matching_nodes_sorted(&target)
        .into_iter()
        .map(|(_, node)| node)
        .collect();
    (root, nodes)
}

/// The step of a proof's check that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::Display, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum ProofStep {
    /// The header does not hash to the trusted block hash, or does not decode.
    Header,
    /// The trie nodes do not lead from `receiptsRoot` to the receipt.
    Inclusion,
    /// The proven transaction is not the one the file names (its hash, or the payment's).
    Transaction,
    /// The receipt does not decode.
    Receipt,
    /// The transaction failed (a failed transaction moved nothing).
    Status,
    /// The receipt's logs do not give the facts claimed.
    Facts,
}

/// A failed check: the step, and what exactly is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{step}: {detail}")]
pub struct ProofFailure {
    /// The step.
    pub step: ProofStep,
    /// What is wrong.
    pub detail: String,
}

fn failed(step: ProofStep, detail: impl Into<String>) -> ProofFailure {
    ProofFailure {
        step,
        detail: detail.into(),
    }
}

/// What a checked proof shows: the receipt's logs, and the transaction's recipient and input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proven {
    /// The receipt's logs.
    pub logs: Vec<Log>,
    /// The contract the transaction called (`None`: a creation).
    pub to: Option<Address>,
    /// The call's input.
    pub input: Bytes,
}

/// Checks `proof` against a trusted `block_hash`: the header hashes to it and so does the
/// file's `block_hash`, the header's number is the file's `block_number`, the trie nodes
/// lead from its `receiptsRoot` to the receipt and from its `transactionsRoot` to the
/// transaction (at the same index), the transaction hashes to the file's `tx_hash`, both
/// decode, and the transaction succeeded. Every field but `first_log_index` (which only
/// names logs) is thereby proven.
pub fn verify_receipt_proof(proof: &ReceiptProof, block_hash: B256) -> Result<Proven, ProofFailure> {
    let hashed = keccak256(&proof.header_rlp);
    if hashed != block_hash {
        return Err(failed(
            ProofStep::Header,
            format!("the header hashes to {hashed}, not to the trusted block hash {block_hash}"),
        ));
    }
    if proof.block_hash != block_hash {
        return Err(failed(
            ProofStep::Header,
            format!(
                "the file names block {}, not the trusted block hash {block_hash}",
                proof.block_hash
            ),
        ));
    }
    let header = Header::decode(&mut proof.header_rlp.as_ref())
        .map_err(|e| failed(ProofStep::Header, format!("the header does not decode: {e}")))?;
    if header.number != proof.block_number {
        return Err(failed(
            ProofStep::Header,
            format!(
                "the header is of block {}, the file says block {}",
                header.number, proof.block_number
            ),
        ));
    }
    let key = Nibbles::unpack(key_of(proof.tx_index));
    for (what, root, value, nodes) in [
        ("receiptsRoot", header.receipts_root, &proof.receipt, &proof.nodes),
        (
            "transactionsRoot",
            header.transactions_root,
            &proof.transaction,
            &proof.transaction_nodes,
        ),
    ] {
        verify_proof(root, key, Some(value.to_vec()), nodes).map_err(|e| {
            failed(
                ProofStep::Inclusion,
                format!(
                    "the nodes do not lead from {what} {root} to the item at index {}: {e}",
                    proof.tx_index
                ),
            )
        })?;
    }
    let transaction_hash = keccak256(&proof.transaction);
    if transaction_hash != proof.tx_hash {
        return Err(failed(
            ProofStep::Transaction,
            format!(
                "the proven transaction hashes to {transaction_hash}, the file says {}",
                proof.tx_hash
            ),
        ));
    }
    let receipt = ReceiptEnvelope::decode_2718(&mut proof.receipt.as_ref())
        .map_err(|e| failed(ProofStep::Receipt, format!("the receipt does not decode: {e}")))?;
    let transaction = TxEnvelope::decode_2718(&mut proof.transaction.as_ref()).map_err(|e| {
        failed(
            ProofStep::Receipt,
            format!("the transaction does not decode: {e}"),
        )
    })?;
    if !receipt.status() {
        return Err(failed(
            ProofStep::Status,
            "the transaction failed: it moved nothing",
        ));
    }
    Ok(Proven {
        logs: receipt.logs().to_vec(),
        to: transaction.to(),
        input: transaction.input().clone(),
    })
}

/// A payment's facts as its logs give them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvenFacts {
    /// Who paid.
    pub payer: Address,
    /// Who was paid.
    pub pay_to: Address,
    /// What moved, in the token's smallest unit (a decimal string in JSON, as paywatch
    /// answers amounts everywhere).
    #[serde(with = "decimal")]
    pub amount: U256,
    /// The token.
    pub asset: Address,
    /// EIP-3009: the authorization's nonce.
    pub nonce: Option<B256>,
    /// Permit2: the contract that emitted `Settled()`/`SettledWithPermit()` (x402's proxy);
    /// ERC-7710: the delegation manager that emitted the redemption.
    pub settled_by: Option<Address>,
    /// Permit2: the nonce, decimal, from the proven transaction's call of the proxy (absent
    /// when the proxy was called through another contract: no log or input shows it).
    pub permit2_nonce: Option<String>,
    /// Upto: the maximum the payer signed, decimal, from the same call; an escrowed
    /// payment: its terms' `maxAmount`.
    pub max_amount: Option<String>,
    /// An escrowed payment (`auth_capture`): its `paymentInfoHash` and what the proven
    /// escrow events add up to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escrow: Option<EscrowFacts>,
}

/// What the escrow's proven events give of an escrowed payment: the hash that names it in
/// every event, and what its captures (or charge), voids and reclaims, and refunds add up
/// to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EscrowFacts {
    /// The payment's `paymentInfoHash`, the first topic of each of its events.
    pub payment_info_hash: B256,
    /// What the charge or the captures paid (fees included), decimal.
    #[serde(with = "decimal")]
    pub captured_amount: U256,
    /// What voids and reclaims sent back uncaptured, decimal.
    #[serde(with = "decimal")]
    pub released_amount: U256,
    /// What refunds sent back, decimal.
    #[serde(with = "decimal")]
    pub refunded_amount: U256,
}

/// An escrow event of an escrowed payment after its opening (a capture, void, reclaim or
/// refund), with the proof of its own transaction's receipt, against its own block's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EscrowEventProof {
    /// What happened: `captured`, `voided`, `reclaimed` or `refunded`.
    pub kind: EscrowEventKind,
    /// The position of the event's log among its receipt's logs.
    pub log: u64,
    /// Its receipt's proof.
    pub proof: ReceiptProof,
}

/// Which logs of a receipt make a payment of `method`, by their positions in the receipt,
/// given the position of its `Transfer`: EIP-3009's `AuthorizationUsed` and `Transfer`,
/// Permit2's `Transfer` and the proxy's settlement log right after it, ERC-7710's
/// `Transfer` and the first root `RedeemedDelegation` of its sender after it.
pub fn payment_logs(
    logs: &[Log],
    method: PaymentMethod,
    transfer: usize,
) -> Result<Vec<usize>, ProofFailure> {
    match method {
        PaymentMethod::Eip3009 => {
            let moved = transfer_at(logs, transfer)?;
            let authorization = logs[..transfer]
                .iter()
                .rposition(|log| {
                    log.address == moved.address
                        && AuthorizationUsed::decode_log(log).is_ok_and(|a| a.authorizer == moved.from)
                })
                .ok_or_else(|| {
                    failed(
                        ProofStep::Facts,
                        "no AuthorizationUsed of the payer before the Transfer",
                    )
                })?;
            Ok(vec![authorization, transfer])
        }
        PaymentMethod::Permit2 | PaymentMethod::Upto => Ok(vec![transfer, transfer + 1]),
        PaymentMethod::Erc7710 => {
            let moved = transfer_at(logs, transfer)?;
            let redemption = logs[transfer + 1..]
                .iter()
                .position(|log| root_redemption_of(log, moved.from).is_some())
                .ok_or_else(|| {
                    failed(
                        ProofStep::Facts,
                        "no root RedeemedDelegation of the payer after the Transfer",
                    )
                })?;
            Ok(vec![transfer, transfer + 1 + redemption])
        }
        PaymentMethod::AuthCapture => {
            if logs.get(transfer).and_then(escrow_opening).is_none() {
                return Err(failed(
                    ProofStep::Facts,
                    format!("log {transfer} is not an escrow's PaymentAuthorized or PaymentCharged"),
                ));
            }
            Ok(vec![transfer])
        }
        other => Err(failed(
            ProofStep::Facts,
            format!("proofs of {other} payments are not built yet"),
        )),
    }
}

/// The facts the logs at `positions` (as [`payment_logs`] names them) give for a payment
/// of `method`; refuses logs that do not make such a payment.
pub fn proven_facts(
    proven: &Proven,
    method: PaymentMethod,
    positions: &[usize],
) -> Result<ProvenFacts, ProofFailure> {
    let logs = &proven.logs;
    let at = |i: usize| {
        positions.get(i).and_then(|p| logs.get(*p)).ok_or_else(|| {
            failed(
                ProofStep::Facts,
                format!("the receipt has no log at position {i} of the payment"),
            )
        })
    };
    match method {
        PaymentMethod::Eip3009 => {
            let (authorization, transfer) = (at(0)?, at(1)?);
            let used = AuthorizationUsed::decode_log(authorization)
                .map_err(|e| failed(ProofStep::Facts, format!("not an AuthorizationUsed log: {e}")))?;
            let moved = Transfer::decode_log(transfer)
                .map_err(|e| failed(ProofStep::Facts, format!("not a Transfer log: {e}")))?;
            if positions[0] >= positions[1] || used.address != moved.address || used.authorizer != moved.from
            {
                return Err(failed(
                    ProofStep::Facts,
                    "the Transfer is not the one the authorization released (same token, from the authorizer, after it)",
                ));
            }
            Ok(ProvenFacts {
                payer: moved.from,
                pay_to: moved.to,
                amount: moved.value,
                asset: moved.address,
                nonce: Some(used.nonce),
                settled_by: None,
                permit2_nonce: None,
                max_amount: None,
                escrow: None,
            })
        }
        PaymentMethod::Permit2 | PaymentMethod::Upto => {
            let (transfer, settlement) = (at(0)?, at(1)?);
            let moved = Transfer::decode_log(transfer)
                .map_err(|e| failed(ProofStep::Facts, format!("not a Transfer log: {e}")))?;
            let settled =
                Settled::decode_log(settlement).is_ok() || SettledWithPermit::decode_log(settlement).is_ok();
            if !settled || positions[1] != positions[0] + 1 {
                return Err(failed(
                    ProofStep::Facts,
                    "the log right after the Transfer is not a proxy's Settled() or SettledWithPermit()",
                ));
            }
            // The proxy called directly: its call names the nonce (and upto's maximum),
            // and must settle what the logs show.
            let call = (proven.to == Some(settlement.address))
                .then(|| decode_settle_call(settlement.address, method, &proven.input))
                .flatten();
            if let Some(call) = &call
                && (call.owner != moved.from
                    || call.to != moved.to
                    || call.token != moved.address
                    || call.amount != moved.value)
            {
                return Err(failed(
                    ProofStep::Facts,
                    "the proxy's call does not settle what the logs show",
                ));
            }
            Ok(ProvenFacts {
                payer: moved.from,
                pay_to: moved.to,
                amount: moved.value,
                asset: moved.address,
                nonce: None,
                settled_by: Some(settlement.address),
                permit2_nonce: call.as_ref().map(|c| c.nonce.to_string()),
                max_amount: call.and_then(|c| c.max_amount).map(|m| m.to_string()),
                escrow: None,
            })
        }
        PaymentMethod::Erc7710 => {
            let (transfer, redemption) = (at(0)?, at(1)?);
            let moved = Transfer::decode_log(transfer)
                .map_err(|e| failed(ProofStep::Facts, format!("not a Transfer log: {e}")))?;
            if positions[1] <= positions[0] || root_redemption_of(redemption, moved.from).is_none() {
                return Err(failed(
                    ProofStep::Facts,
                    "the log after the Transfer is not the root RedeemedDelegation of its sender",
                ));
            }
            // The manager called directly: one of its redemptions by the payer executed
            // exactly this transfer.
            let executed = Execution::Transfer {
                token: lower_hex(moved.address),
                to: lower_hex(moved.to),
                amount: moved.value,
            };
            if proven.to == Some(redemption.address)
                && let Some(call) = decode_redeem_call(redemption.address, &proven.input)
                && !call.redemptions.contains(&(moved.from, executed))
            {
                return Err(failed(
                    ProofStep::Facts,
                    "the manager's call redeems no transfer of what the logs show",
                ));
            }
            Ok(ProvenFacts {
                payer: moved.from,
                pay_to: moved.to,
                amount: moved.value,
                asset: moved.address,
                nonce: None,
                settled_by: Some(redemption.address),
                permit2_nonce: None,
                max_amount: None,
                escrow: None,
            })
        }
        PaymentMethod::AuthCapture => {
            let opening = at(0)?;
            let not_opening = || {
                failed(
                    ProofStep::Facts,
                    "the log is not an escrow's PaymentAuthorized or PaymentCharged",
                )
            };
            let event = escrow_opening(opening).ok_or_else(not_opening)?;
            let (hash, amount, charged) = (
                event.payment_info_hash,
                event.amount,
                event.kind == EscrowEventKind::Charged,
            );
            let info = event.terms.ok_or_else(not_opening)?;
            Ok(ProvenFacts {
                payer: info.payer,
                pay_to: info.receiver,
                amount,
                asset: info.token,
                nonce: None,
                settled_by: Some(opening.address),
                permit2_nonce: None,
                max_amount: Some(U256::from(info.maxAmount).to_string()),
                escrow: Some(EscrowFacts {
                    payment_info_hash: hash,
                    captured_amount: if charged { amount } else { U256::ZERO },
                    released_amount: U256::ZERO,
                    refunded_amount: U256::ZERO,
                }),
            })
        }
        other => Err(failed(
            ProofStep::Facts,
            format!("proofs of {other} payments are not built yet"),
        )),
    }
}

/// Adds an escrowed payment's later events to its `facts` (as [`proven_facts`] read them
/// from its opening): each proven event must be a log of the same escrow, naming the same
/// `paymentInfoHash`, of the kind claimed; captures add to `captured_amount`, voids and
/// reclaims to `released_amount`, refunds to `refunded_amount`. Each event is given with
/// its checked receipt and the position of its log in it; no events add nothing.
pub fn add_escrow_events(
    facts: &mut ProvenFacts,
    events: &[(EscrowEventKind, Proven, usize)],
) -> Result<(), ProofFailure> {
    if events.is_empty() {
        return Ok(());
    }
    let escrow = facts.settled_by;
    let Some(sums) = facts.escrow.as_mut() else {
        return Err(failed(
            ProofStep::Facts,
            "escrow events are given for a payment that is not escrowed",
        ));
    };
    for (kind, proven, position) in events {
        let log = proven.logs.get(*position).ok_or_else(|| {
            failed(
                ProofStep::Facts,
                format!("the {kind} event's receipt has no log at position {position}"),
            )
        })?;
        if matches!(kind, EscrowEventKind::Authorized | EscrowEventKind::Charged) {
            return Err(failed(
                ProofStep::Facts,
                format!("a {kind} event opens a payment; it cannot follow the opening"),
            ));
        }
        let (hash, amount) = match escrow_log(log) {
            Some(Ok(event)) if event.kind == *kind => (event.payment_info_hash, event.amount),
            Some(Err((_, e))) => {
                return Err(failed(
                    ProofStep::Facts,
                    format!("the log is not the escrow's {kind} event: {e}"),
                ));
            }
            _ => {
                return Err(failed(
                    ProofStep::Facts,
                    format!("the log is not the escrow's {kind} event"),
                ));
            }
        };
        if Some(log.address) != escrow || hash != sums.payment_info_hash {
            return Err(failed(
                ProofStep::Facts,
                format!(
                    "the {kind} event is not of this payment: emitted by {}, naming {hash}",
                    log.address
                ),
            ));
        }
        let sum = match kind {
            EscrowEventKind::Captured => &mut sums.captured_amount,
            EscrowEventKind::Voided | EscrowEventKind::Reclaimed => &mut sums.released_amount,
            _ => &mut sums.refunded_amount,
        };
        *sum = sum
            .checked_add(amount)
            .ok_or_else(|| failed(ProofStep::Facts, "the events' amounts overflow 256 bits"))?;
    }
    Ok(())
}

/// `log` as an escrow's opening event (`PaymentAuthorized`, `PaymentCharged`).
fn escrow_opening(log: &Log) -> Option<EscrowLog> {
    escrow_log(log)
        .and_then(Result::ok)
        .filter(|event| matches!(event.kind, EscrowEventKind::Authorized | EscrowEventKind::Charged))
}

/// The receipt's log at `position` as a `Transfer`.
fn transfer_at(logs: &[Log], position: usize) -> Result<Log<Transfer>, ProofFailure> {
    logs.get(position)
        .and_then(|log| Transfer::decode_log(log).ok())
        .ok_or_else(|| failed(ProofStep::Facts, format!("log {position} is not a Transfer")))
}

/// `log` as the root delegation's `RedeemedDelegation` of a redemption `delegator`'s
/// account executed.
fn root_redemption_of(log: &Log, delegator: Address) -> Option<RedeemedDelegation> {
    RedeemedDelegation::decode_log(log)
        .ok()
        .map(|event| event.data)
        .filter(|event| event.rootDelegator == delegator && event.delegation.authority == ROOT_AUTHORITY)
}

/// A `U256` as a decimal string in JSON.
mod decimal {
    use alloy::primitives::U256;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(value: &U256, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&value.to_string())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<U256, D::Error> {
        let text = String::deserialize(deserializer)?;
        U256::from_str_radix(&text, 10)
            .map_err(|_| serde::de::Error::custom(format!("`{text}` is not a decimal amount")))
    }
}
