//! The answers of the queries, as both APIs serve them (the gRPC messages are these, field
//! for field): payments, refunds, histories, expectations, listings, totals, events,
//! authorizations, review checks, and the builders from the store's rows.

use paywatch_core::config::{NetworkConfig, TokenConfig};
use paywatch_core::listing::{TotalsKey, TransferRole};
use paywatch_core::records::EscrowEventKind;
use paywatch_core::refunds::RefundRule;
use paywatch_core::state::{EventKind, HistoryCause, PaymentState, confirmations};
use paywatch_core::{PaymentMethod, Reason};
use paywatch_store::{
    BoundIntent, HistoryEntry, PaymentEvent, StoredEscrow, StoredPayment, StoredRefund, StoredReview,
    StoredTransfer,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The intent fields a payer reveals; network, asset and pay_to are the payment's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IntentView {
    /// HTTP method.
    pub method: String,
    /// Resource URL (answered normalized).
    pub url: String,
    /// SHA-256 of the request body, 64 lowercase hex digits, or absent.
    #[serde(default)]
    pub body_sha256: Option<String>,
    /// The payer's resource class.
    pub class: String,
    /// The payer's cap in the asset's smallest unit, decimal string.
    pub max_atomic: String,
}

impl From<BoundIntent> for IntentView {
    fn from(b: BoundIntent) -> Self {
        Self {
            method: b.method,
            url: b.url,
            body_sha256: b.body_sha256,
            class: b.class,
            max_atomic: b.max_atomic,
        }
    }
}

/// A payment as answered by the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PaymentView {
    /// CAIP-2 network id.
    pub network: String,
    /// Transaction hash (EVM) or signature (Solana); an escrowed payment's
    /// `paymentInfoHash`.
    pub payment: String,
    /// Its number in the transaction (0 unless it settles several; see the book on numbering, docs/src/payments.md).
    pub index_in_tx: u32,
    /// Who paid.
    pub payer: String,
    /// Who was paid.
    pub pay_to: String,
    /// Exact amount in the asset's smallest unit, as a decimal string; of an escrowed
    /// payment, what was authorized into escrow (what was paid is `captured_amount`).
    pub amount: String,
    /// Token contract or mint.
    pub asset: String,
    /// The asset's symbol from `chains.toml`.
    pub asset_symbol: Option<String>,
    /// The asset's decimals from `chains.toml`.
    pub asset_decimals: Option<u8>,
    /// How the money moved: `permit2` is x402's exact Permit2 proxy, `upto` its upto
    /// Permit2 proxy, `auth_capture` the auth-capture escrow, `spl` Solana's.
    pub method: PaymentMethod,
    /// The authorization's nonce: EIP-3009's `0x` + 64 hex, or Permit2's `uint256` in
    /// decimal; `null` on Solana, for ERC-7710 (a delegation has none) and where the
    /// settling call could not be read.
    pub nonce: Option<String>,
    /// Why `nonce` is `null` on an EVM payment, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce_unavailable: Option<String>,
    /// `upto`: the maximum the payer signed; `amount` is what the facilitator settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_amount: Option<String>,
    /// Token-2022 `transferCheckedWithFee`: the transfer fee withheld in the seller's
    /// account, exact integer string; `amount` is what the seller received, and the payer
    /// sent `amount + fee_amount`. Escrowed payments: the fees of the final captures, paid
    /// to their fee receivers out of `captured_amount`. Absent where no fee applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fee_amount: Option<String>,
    /// Escrowed payments: what final captures (or the charge) paid, fees included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_amount: Option<String>,
    /// Escrowed payments: what is still held in escrow, neither captured nor released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_amount: Option<String>,
    /// Escrowed payments: what final voids or reclaims sent back uncaptured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_amount: Option<String>,
    /// Escrowed payments: the escrow, the terms its hash commits to and every event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escrow: Option<EscrowView>,
    /// The transaction's memo (Solana's SPL Memo: the seller's `extra.memo` or the
    /// client's nonce), if any.
    pub memo: Option<String>,
    /// Who settled it, in x402 the facilitator: the transaction's fee payer (Solana);
    /// `null` on EVM and for payments stored before it was recorded.
    pub facilitator: Option<String>,
    /// Block number.
    pub block_number: u64,
    /// Block hash.
    pub block_hash: String,
    /// Block time, RFC 3339 UTC.
    pub block_time: Option<String>,
    /// Blocks on top of and including the payment's block at the last recorded head
    /// (0 when dropped).
    pub confirmations: u64,
    /// Where it stands; `held` (authorized, nothing captured) and `released` (voided or
    /// reclaimed) are escrowed payments' only.
    pub payment_state: PaymentState,
    /// Sum of the final refunds tied to it, exact integer string.
    pub refunded_amount: String,
    /// The refunds tied to it, in chain order.
    pub refunds: Vec<RefundView>,
    /// The intent its nonce commits to, once revealed and checked (`POST /v1/intents/reveal`).
    pub intent: Option<IntentView>,
    /// When paywatch first saw it, RFC 3339 UTC.
    pub observed_at: String,
    /// When its state last changed, RFC 3339 UTC.
    pub state_changed_at: String,
    /// With `verification = "lagging"` only: whether the scheduled audit has cross-checked
    /// the payment's block with the verifier and found nothing about it (inline
    /// verification stores nothing unchecked; without a verifier nothing is checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// Why `verified` is false: not audited yet, or what an audit found (its difference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unverified_reason: Option<String>,
    /// How it compares with the facts the caller expects (only when some were given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectation: Option<Expectation>,
}

impl PaymentView {
    /// What moved from the payer to the seller: `amount`, or of an escrowed payment what
    /// final captures paid (a hold alone pays nothing). The amount a review's or a
    /// caller's expected amount is held against.
    pub fn paid_amount(&self) -> &str {
        self.captured_amount.as_deref().unwrap_or(&self.amount)
    }
}

/// An escrowed payment's escrow, terms and events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EscrowView {
    /// The `AuthCaptureEscrow` contract.
    pub escrow: String,
    /// Who drives the payment (captures, voids, refunds): in x402 the facilitator.
    pub operator: String,
    /// When the payer's signature expired, RFC 3339 UTC.
    pub pre_approval_expiry: String,
    /// From when the hold can no longer be captured and the payer may reclaim it.
    pub authorization_expiry: String,
    /// From when nothing can be refunded.
    pub refund_expiry: String,
    /// Least fee, basis points.
    pub min_fee_bps: u16,
    /// Largest fee, basis points.
    pub max_fee_bps: u16,
    /// Who must receive fees (the zero address: chosen at capture).
    pub fee_receiver: String,
    /// The payment's salt, decimal.
    pub salt: String,
    /// Every event, in chain order.
    pub events: Vec<EscrowEventView>,
}

/// One escrow event of a payment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EscrowEventView {
    /// Which of the escrow's events it is.
    pub kind: EscrowEventKind,
    /// Its amount, exact integer string.
    pub amount: String,
    /// Charges and captures: the fee, basis points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fee_bps: Option<u16>,
    /// Charges and captures: who received the fee.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fee_receiver: Option<String>,
    /// The token collector that moved the money.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_collector: Option<String>,
    /// Its transaction.
    pub tx: String,
    /// Its log index.
    pub log_index: u64,
    /// Its block.
    pub block_number: u64,
    /// Its block time, RFC 3339 UTC.
    pub block_time: Option<String>,
    /// Whether it is final and counted in the payment's amounts.
    pub is_final: bool,
}

impl From<StoredEscrow> for EscrowView {
    fn from(e: StoredEscrow) -> Self {
        let time = |secs: u64| {
            i64::try_from(secs)
                .ok()
                .and_then(rfc3339_seconds)
                .unwrap_or_default()
        };
        Self {
            escrow: e.escrow,
            operator: e.operator,
            pre_approval_expiry: time(e.pre_approval_expiry),
            authorization_expiry: time(e.authorization_expiry),
            refund_expiry: time(e.refund_expiry),
            min_fee_bps: e.min_fee_bps,
            max_fee_bps: e.max_fee_bps,
            fee_receiver: e.fee_receiver,
            salt: e.salt,
            events: e
                .events
                .into_iter()
                .map(|event| EscrowEventView {
                    kind: event.kind,
                    amount: event.amount,
                    fee_bps: event.fee_bps,
                    fee_receiver: event.fee_receiver,
                    token_collector: event.token_collector,
                    tx: event.tx_id,
                    log_index: event.event_index,
                    block_number: event.block_number,
                    block_time: event.block_time.and_then(rfc3339_seconds),
                    is_final: event.applied,
                })
                .collect(),
        }
    }
}

/// Why an EVM payment has no nonce: a Permit2 settling call that was not read, or an
/// ERC-7710 delegation, which has none.
fn nonce_unavailable(method: PaymentMethod, has_nonce: bool) -> Option<String> {
    match method {
        PaymentMethod::Erc7710 => Some(
            "an ERC-7710 delegation has no nonce: it may be redeemed again within its caveats, \
             and the payment is known by its transaction and index"
                .to_string(),
        ),
        PaymentMethod::Permit2 | PaymentMethod::Upto if !has_nonce => Some(
            "the proxy was called through another contract and the node served no call trace \
             (debug_traceTransaction with the callTracer), so the settle call's nonce could not be read"
                .to_string(),
        ),
        _ => None,
    }
}

/// The answer of the `expect` form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Expectation {
    /// Every expected fact matches the chain and the payment is final.
    pub matches: bool,
    /// Reason codes: `payer_mismatch`, `v1_pay_to_mismatch`, `v1_amount_mismatch`,
    /// `v1_asset_mismatch`, `payment_not_final`.
    pub reasons: Vec<String>,
    /// The facts that differ, with both values.
    pub mismatches: Vec<MismatchView>,
}

/// One fact that differs from what the caller expects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MismatchView {
    /// `payer`, `pay_to`, `amount` or `asset`.
    pub fact: String,
    /// What the chain says.
    pub chain: String,
    /// What the caller expected.
    pub expected: String,
}

/// A refund as answered by the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RefundView {
    /// The transaction that moved the money back.
    pub tx: String,
    /// Log index of its transfer.
    pub event_index: u64,
    /// Amount moved back, exact integer string.
    pub amount: String,
    /// The rule that tied it to the payment.
    pub rule: RefundRule,
    /// Its block.
    pub block_number: u64,
}

/// One state change, as answered by the history endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HistoryView {
    /// Position in the history, from 0.
    pub seq: u64,
    /// State before (absent for the first).
    pub from_state: Option<PaymentState>,
    /// State after.
    pub to_state: PaymentState,
    /// Why it changed: the escrow's causes are `captured`, `capture_reorged`, `released`
    /// and `release_reorged`; an audit repair's `refuted` (made up, taken back) and
    /// `corrected` (facts replaced by the chain's).
    pub cause: HistoryCause,
    /// The block that caused it (the fork block for reorgs).
    pub block_number: Option<u64>,
    /// The transaction that caused it (the refund's, for refunds).
    pub tx: Option<String>,
    /// When paywatch recorded it, RFC 3339 UTC.
    pub at: String,
}

impl From<HistoryEntry> for HistoryView {
    fn from(h: HistoryEntry) -> Self {
        Self {
            seq: h.seq,
            from_state: h.from_state,
            to_state: h.to_state,
            cause: h.cause,
            block_number: h.block_number,
            tx: h.tx_id,
            at: rfc3339_ms(h.at_ms),
        }
    }
}

/// The history endpoint's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PaymentHistory {
    /// The payment now.
    pub payment: PaymentView,
    /// Every state change, oldest first.
    pub history: Vec<HistoryView>,
}

/// A block time (Unix seconds) in RFC 3339 UTC.
pub(crate) fn rfc3339_seconds(seconds: i64) -> Option<String> {
    OffsetDateTime::from_unix_timestamp(seconds)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
}

/// The configured token a payment's asset is, for its symbol and decimals.
pub(crate) fn token_of<'a>(network: &'a NetworkConfig, asset: &str) -> Option<&'a TokenConfig> {
    network.tokens.iter().find(|t| t.address == *asset)
}

/// Milliseconds since the Unix epoch in RFC 3339 UTC.
pub(crate) fn rfc3339_ms(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

/// Builds the API view of a stored payment.
pub(crate) fn payment_view(
    network: &NetworkConfig,
    payment: StoredPayment,
    refunds: Vec<StoredRefund>,
    intent: Option<BoundIntent>,
    head: Option<u64>,
    escrow: Option<StoredEscrow>,
) -> PaymentView {
    let token = token_of(network, &payment.asset);
    let confirmations = match (payment.state, head) {
        (PaymentState::Dropped, _) | (_, None) => 0,
        (_, Some(head)) => confirmations(payment.block_number, head),
    };
    PaymentView {
        network: payment.network,
        payment: payment.payment_id,
        index_in_tx: payment.index_in_tx,
        payer: payment.payer,
        pay_to: payment.pay_to,
        amount: payment.amount,
        asset: payment.asset,
        asset_symbol: token.map(|t| t.symbol.clone()),
        asset_decimals: token.map(|t| t.decimals),
        nonce_unavailable: nonce_unavailable(payment.method, payment.nonce.is_some()),
        method: payment.method,
        nonce: payment.nonce,
        max_amount: payment.max_amount,
        fee_amount: payment.fee_amount,
        captured_amount: payment.captured_amount,
        held_amount: payment.held_amount,
        released_amount: payment.released_amount,
        escrow: escrow.map(EscrowView::from),
        memo: payment.memo,
        facilitator: payment.facilitator,
        block_number: payment.block_number,
        block_hash: payment.block_hash,
        block_time: payment.block_time.and_then(rfc3339_seconds),
        confirmations,
        payment_state: payment.state,
        refunded_amount: payment.refunded_amount,
        refunds: refunds
            .into_iter()
            .map(|r| RefundView {
                tx: r.refund_tx_id,
                event_index: r.refund_event_index,
                amount: r.amount,
                rule: r.rule,
                block_number: r.block_number,
            })
            .collect(),
        intent: intent.map(IntentView::from),
        observed_at: rfc3339_ms(payment.first_seen_ms),
        state_changed_at: rfc3339_ms(payment.state_changed_ms),
        verified: None,
        unverified_reason: None,
        expectation: None,
    }
}

/// One lookup of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchItem {
    /// Network: CAIP-2 id or alias.
    pub network: String,
    /// Transaction hash or signature.
    pub payment: String,
    /// Picks one payment of a transaction that settles several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
}

/// The batch request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// Up to 1,000 lookups.
    pub lookups: Vec<BatchItem>,
}

/// One answer of a batch: the payment, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BatchAnswer {
    /// The lookup, as asked.
    pub lookup: BatchItem,
    /// The payment, when found.
    pub payment: Option<PaymentView>,
    /// The reason code when not (`payment_not_found`, `malformed_payment`, …).
    #[schema(value_type = Option<Reason>)]
    pub reason: Option<String>,
    /// What is wrong, when not found.
    pub message: Option<String>,
}

/// The batch answer, in request order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BatchResponse {
    /// One answer per lookup.
    pub results: Vec<BatchAnswer>,
}

/// One payment of a listing (and one CSV row, in this column order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ListedPayment {
    /// CAIP-2 network id.
    pub network: String,
    /// Transaction hash (EVM) or signature (Solana).
    pub payment: String,
    /// Its number in the transaction.
    pub index_in_tx: u32,
    /// Block (slot) number.
    pub block_number: u64,
    /// Block time, RFC 3339 UTC.
    pub block_time: Option<String>,
    /// Who paid.
    pub payer: String,
    /// Who was paid.
    pub pay_to: String,
    /// Token contract or mint.
    pub asset: String,
    /// The asset's symbol from `chains.toml`.
    pub asset_symbol: Option<String>,
    /// The asset's decimals from `chains.toml`.
    pub asset_decimals: Option<u8>,
    /// Exact amount in the asset's smallest unit.
    pub amount: String,
    /// Sum of its final refunds, exact integer.
    pub refunded_amount: String,
    /// Where it stands.
    pub payment_state: PaymentState,
    /// The transaction's memo (Solana's SPL Memo), if any.
    pub memo: Option<String>,
    /// Who settled it (paid the transaction's fee; Solana), when recorded.
    pub facilitator: Option<String>,
    /// How the money moved.
    pub method: PaymentMethod,
    /// Token-2022 transfer fee withheld in the seller's account (`amount` is what it
    /// received); escrowed payments: the fees of final captures; empty where none.
    pub fee_amount: Option<String>,
    /// Escrowed payments: what final captures paid, fees included; empty for others.
    pub captured_amount: Option<String>,
    /// Escrowed payments: what is still held in escrow; empty for others.
    pub held_amount: Option<String>,
    /// Escrowed payments: what voids or reclaims sent back uncaptured; empty for others.
    pub released_amount: Option<String>,
    /// With `verification = "lagging"` only (a last column then): whether the scheduled
    /// audit has cross-checked the payment and found nothing about it (as in a lookup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
}

/// A JSON page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PaymentPage {
    /// The payments, in chain order.
    pub payments: Vec<ListedPayment>,
    /// Where this page ends: pass it as `cursor` for the next page, or later to get only
    /// payments listed after it (absent when nothing has been listed yet).
    pub next_cursor: Option<String>,
    /// Whether more payments matched than this page holds.
    pub has_more: bool,
}

/// One kept transfer of a listing (and one CSV row, in this column order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ListedTransfer {
    /// CAIP-2 network id.
    pub network: String,
    /// Transaction hash (EVM) or signature (Solana).
    pub transaction: String,
    /// Its event's index (EVM: the log index in the block).
    pub event_index: u64,
    /// Block (slot) number.
    pub block_number: u64,
    /// Block time, RFC 3339 UTC.
    pub block_time: Option<String>,
    /// Sender (Solana: the source account's owner).
    pub from: String,
    /// Recipient (Solana: the destination account's owner).
    pub to: String,
    /// Token contract or mint.
    pub asset: String,
    /// The asset's symbol from `chains.toml`.
    pub asset_symbol: Option<String>,
    /// The asset's decimals from `chains.toml`.
    pub asset_decimals: Option<u8>,
    /// Exact amount in the asset's smallest unit.
    pub amount: String,
    /// The transaction's memo (Solana's SPL Memo), if any.
    pub memo: Option<String>,
    /// Whether its block is final (at or below the network's final block).
    #[serde(rename = "final")]
    pub is_final: bool,
    /// `payment` (it moved the payment's money), `refund` (a refund rule tied it to the
    /// payment it refunds) or `other`.
    pub role: TransferRole,
    /// The payment it moved or refunds (transaction hash or signature); empty for `other`.
    pub payment: Option<String>,
    /// That payment's number in its transaction.
    pub index_in_tx: Option<u32>,
    /// For a refund, the rule that tied it: `nonce_commitment`, `memo`, `matching` or
    /// `escrow`.
    #[schema(value_type = Option<String>)]
    pub refund_rule: Option<RefundRule>,
}

/// A JSON page of kept transfers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TransferPage {
    /// The transfers, in chain order.
    pub transfers: Vec<ListedTransfer>,
    /// Where this page ends: pass it as `cursor` for the next page (absent when nothing
    /// has been listed yet).
    pub next_cursor: Option<String>,
    /// Whether more transfers matched than this page holds.
    pub has_more: bool,
}

/// A kept transfer of `network` as listed, final when at or below `final_block`.
pub(crate) fn listed_transfer(
    network: &NetworkConfig,
    final_block: Option<u64>,
    listed: StoredTransfer,
) -> ListedTransfer {
    let StoredTransfer {
        transfer,
        paid,
        refunded,
    } = listed;
    let token = token_of(network, &transfer.token);
    let (role, payment, index_in_tx, refund_rule) = match (paid, refunded) {
        (Some((payment, index)), _) => (TransferRole::Payment, Some(payment), Some(index), None),
        (None, Some((payment, index, rule))) => {
            (TransferRole::Refund, Some(payment), Some(index), Some(rule))
        }
        (None, None) => (TransferRole::Other, None, None, None),
    };
    ListedTransfer {
        network: network.id.to_string(),
        transaction: transfer.position.tx_id,
        event_index: transfer.position.event_index,
        block_number: transfer.position.block_number,
        block_time: transfer.position.block_time.and_then(rfc3339_seconds),
        from: transfer.from,
        to: transfer.to,
        asset_symbol: token.map(|t| t.symbol.clone()),
        asset_decimals: token.map(|t| t.decimals),
        asset: transfer.token,
        amount: transfer.value.to_string(),
        memo: transfer.memo,
        is_final: final_block.is_some_and(|f| transfer.position.block_number <= f),
        role,
        payment,
        index_in_tx,
        refund_rule,
    }
}

/// Sums of one group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TotalsGroup {
    /// The day (`YYYY-MM-DD`, UTC), asset, pay_to, facilitator (`unknown` when not
    /// recorded) or method.
    pub key: String,
    /// Payments in the group, any state.
    pub payments: u64,
    /// Payments per state.
    pub by_state: BTreeMap<String, u64>,
    /// Sum of final payments (paid, partially refunded, refunded), exact integer; of an
    /// escrowed payment what final captures paid, never what is only held.
    pub final_amount: String,
    /// Sum of pending payments, exact integer.
    pub pending_amount: String,
    /// Sum of final refunds, exact integer.
    pub refunded_amount: String,
    /// Sum of what escrowed payments still hold in escrow (not revenue), exact integer.
    pub held_amount: String,
    /// Sum of the fees of final payments (escrow capture fees to fee receivers,
    /// Token-2022 transfer fees withheld), exact integer.
    pub fee_amount: String,
}

/// The totals answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Totals {
    /// What the groups are keyed by.
    pub group_by: TotalsKey,
    /// One entry per key, in key order.
    pub groups: Vec<TotalsGroup>,
}

pub(crate) fn listed(network: &NetworkConfig, payment: StoredPayment) -> ListedPayment {
    let token = token_of(network, &payment.asset);
    ListedPayment {
        network: payment.network,
        payment: payment.payment_id,
        index_in_tx: payment.index_in_tx,
        block_number: payment.block_number,
        block_time: payment.block_time.and_then(rfc3339_seconds),
        payer: payment.payer,
        pay_to: payment.pay_to,
        asset: payment.asset,
        asset_symbol: token.map(|t| t.symbol.clone()),
        asset_decimals: token.map(|t| t.decimals),
        amount: payment.amount,
        refunded_amount: payment.refunded_amount,
        payment_state: payment.state,
        memo: payment.memo,
        facilitator: payment.facilitator,
        method: payment.method,
        fee_amount: payment.fee_amount,
        captured_amount: payment.captured_amount,
        held_amount: payment.held_amount,
        released_amount: payment.released_amount,
        verified: None,
    }
}

/// One event, as the `data` of an SSE message whose type is its `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EventView {
    /// Position in the global sequence; also the SSE `id`.
    pub event_id: u64,
    /// `payment_state`: the payment's state changed (`from_state`/`to_state` are its
    /// states). `review_state`: a reviewed payment's published state changed
    /// (`from_state`/`to_state` are published states: `paid`, `refunded`, or a reorged
    /// payment's `pending`/`dropped`; `seq`, `cause`, block and tx are those of the
    /// payment change that caused it). Served only to streams that ask for it.
    /// `verification` (under `verification = "lagging"`, to streams that ask for it): an
    /// audit covered every block the payment's state is made of; `verified` is its verdict
    /// on the state of the change shown.
    pub kind: EventKind,
    /// CAIP-2 network id.
    pub network: String,
    /// Transaction hash or signature.
    pub payment: String,
    /// Its number in the transaction.
    pub index_in_tx: u32,
    /// The payment's memo (Solana's SPL Memo), if any.
    pub memo: Option<String>,
    /// How the payment's money moved.
    pub method: PaymentMethod,
    /// The change itself, as the history endpoint shows it (a `verification` event: the
    /// payment's last change, the state the verdict is on).
    #[serde(flatten)]
    pub change: HistoryView,
    /// `verification` events only: whether the audit found the payment's state as the
    /// chain has it (`false`: a difference about it is recorded and not repaired; the
    /// payment's lookup says which).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
}

impl From<PaymentEvent> for EventView {
    fn from(event: PaymentEvent) -> Self {
        Self {
            event_id: event.event_id,
            kind: event.kind,
            network: event.network,
            payment: event.payment_id,
            index_in_tx: event.index_in_tx,
            memo: event.memo,
            method: event.method,
            change: HistoryView::from(event.change),
            verified: event.verified,
        }
    }
}

/// What became of an authorization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::Display, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum AuthorizationStatus {
    /// A payment paywatch indexes used it (`payment` says which, and its state).
    Indexed,
    /// Used (or canceled) on chain by the final block, but paywatch indexes no payment
    /// for it: settled before the token's start block, canceled with
    /// `cancelAuthorization`, or used by a call paywatch does not read.
    UsedUnindexed,
    /// Unused at the final block but used (or canceled) at the head: a settlement in a
    /// block not yet final, or not yet read; ask again.
    UsedNotFinal,
    /// Unused at the final block and at the head: it can still settle until its
    /// `validBefore` (EIP-3009) or its permit's deadline (Permit2).
    Unused,
}

/// The answer about one authorization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AuthorizationView {
    /// CAIP-2 network id.
    pub network: String,
    /// The token contract.
    pub asset: String,
    /// The authorizer (the payer).
    pub payer: String,
    /// The nonce: EIP-3009's `0x` + 64 hex, or Permit2's decimal `uint256`.
    pub nonce: String,
    /// `eip3009` or `permit2` (a Permit2 nonce, settled by x402's exact or upto proxy).
    pub kind: String,
    /// What became of it.
    pub status: AuthorizationStatus,
    /// The payment that used it, when indexed.
    pub payment: Option<PaymentView>,
    /// The final block the chain was asked at, when it was asked.
    pub checked_at_block: Option<u64>,
    /// What the status means for the caller.
    pub message: String,
}

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
    /// `true` when all six checks ran and passed, `false` when one failed, `null` when
    /// none failed but some were not run (offline: `not_run` names them).
    pub valid: Option<bool>,
    /// The checks that were not run.
    pub not_run: Vec<String>,
    /// The six checks, in the spec's order.
    pub checks: Vec<CheckResult>,
    /// The payment's state as paywatch last saw it, when it is indexed.
    #[schema(value_type = Option<String>)]
    pub payment_state: Option<PaymentState>,
}

/// A recorded review as a provider publishes it (review v1's read side): the message, the
/// signature and the wallet exactly as submitted, and the payment's state as paywatch
/// sees it now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReviewView {
    /// CAIP-2 network id.
    pub network: String,
    /// The reviewed payment: its transaction hash or signature (an escrowed payment's
    /// paymentInfoHash).
    pub payment: String,
    /// Its number in the transaction.
    pub index_in_tx: u32,
    /// The twelve-line message, verbatim.
    pub message: String,
    /// The signature, verbatim.
    pub signature: String,
    /// The wallet that signed: the message's payer line, verbatim.
    pub wallet: String,
    /// The published state, in review v1's vocabulary: `paid`, or `refunded` once final
    /// refunds returned the whole amount (a partial refund stays `paid`, with
    /// `refunded_amount` beside it); a payment a reorg took out after the review shows
    /// paywatch's `pending` or `dropped`.
    pub payment_state: PaymentState,
    /// paywatch's own state of the payment (`partially_refunded` included).
    pub paywatch_state: PaymentState,
    /// Sum of the payment's final refunds, exact integer.
    pub refunded_amount: String,
    /// The payment's block (slot), for a third party to re-check it.
    pub block_number: u64,
    /// That block's hash.
    pub block_hash: String,
    /// The log index (EVM) of the transfer that moved the money.
    pub log_index: u64,
    /// When paywatch last read the payment's chain, RFC 3339 UTC: the state held then.
    pub observed_at: String,
    /// When the state last changed, RFC 3339 UTC.
    pub state_since: String,
    /// When the review was recorded, RFC 3339 UTC.
    pub recorded_at: String,
    /// With `?proof=true`: the payment's receipt proof, so a reader holding only the block
    /// hash can check the payment behind the review (`paywatch proof verify`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub proof: Option<Box<ProofView>>,
    /// With `?proof=true`, for a Solana payment (no trie commits to it): its transaction
    /// as the node serves it at `finalized`, the best available evidence — not a proof.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub evidence: Option<Box<EvidenceView>>,
    /// With `?proof=true`, when neither can be served: why (an escrowed payment, or one no
    /// longer final).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof_unavailable: Option<String>,
}

/// The payer line of a review message (`payer: …`), as written in it.
fn wallet_of(message: &str) -> String {
    message
        .split('\n')
        .find_map(|line| line.strip_prefix("payer: "))
        .unwrap_or_default()
        .to_string()
}

/// The published view of a stored review; `observed_ms` is when paywatch last read the
/// chain (its head's update time).
pub(crate) fn review_view(review: StoredReview, observed_ms: Option<i64>) -> ReviewView {
    let payment = review.payment;
    ReviewView {
        wallet: wallet_of(&review.message),
        network: payment.network,
        payment: payment.payment_id,
        index_in_tx: payment.index_in_tx,
        message: review.message,
        signature: review.signature,
        payment_state: payment.state.published(),
        paywatch_state: payment.state,
        refunded_amount: payment.refunded_amount,
        block_number: payment.block_number,
        block_hash: payment.block_hash,
        log_index: payment.event_index,
        observed_at: rfc3339_ms(observed_ms.unwrap_or(payment.state_changed_ms)),
        state_since: rfc3339_ms(payment.state_changed_ms),
        recorded_at: rfc3339_ms(review.recorded_ms),
        proof: None,
        evidence: None,
        proof_unavailable: None,
    }
}

/// A page of published reviews.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReviewPage {
    /// The reviews, in their payments' chain order.
    pub reviews: Vec<ReviewView>,
    /// Where this page ends: pass it as `cursor` for the next page.
    pub next_cursor: Option<String>,
    /// Whether more reviews matched than this page holds.
    pub has_more: bool,
}

/// A payment's proof: everything a third party holding only the block hash needs to check
/// it (`paywatch proof verify`, or any Ethereum library).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ProofView {
    /// CAIP-2 network id.
    pub network: String,
    /// The payment (its transaction hash).
    pub payment: String,
    /// Its number in the transaction.
    pub index_in_tx: u32,
    /// How the money moved (an EVM method: never `spl`).
    pub method: PaymentMethod,
    /// The payment's state when the proof was served (always final on chain).
    pub payment_state: PaymentState,
    /// The network's head block paywatch last recorded.
    pub head_block: Option<u64>,
    /// The network's final block paywatch last recorded.
    pub final_block: Option<u64>,
    /// The positions, in the receipt's logs, of the logs that make the payment:
    /// EIP-3009's `AuthorizationUsed` and `Transfer`; Permit2's `Transfer` and the
    /// proxy's `Settled()`/`SettledWithPermit()` right after it; ERC-7710's `Transfer` and
    /// its redemption's root `RedeemedDelegation`.
    pub payment_logs: Vec<u64>,
    /// What those logs give: payer (the transfer's sender), pay_to (its recipient),
    /// amount (its value), asset (the token that emitted it), EIP-3009's nonce (the
    /// authorization's second topic), Permit2's proxy or ERC-7710's manager (`settled_by`); and, from the proven
    /// transaction when it calls the proxy directly, Permit2's nonce and upto's maximum.
    #[schema(value_type = Object)]
    pub facts: paywatch_evm::proof::ProvenFacts,
    /// The block header (`header_rlp`, hashing to `block_hash`), the receipt (EIP-2718
    /// encoding, the trie's value at key RLP(`tx_index`)) and the trie `nodes` from the
    /// header's `receiptsRoot` down to it; `first_log_index` is the block-wide index of the
    /// receipt's first log (not proven; it names logs as nodes do); `transaction` and
    /// `transaction_nodes` prove the transaction itself from `transactionsRoot`.
    #[schema(value_type = Object)]
    pub proof: paywatch_evm::proof::ReceiptProof,
    /// An escrowed payment (`auth_capture`): `proof` is its authorization's or charge's
    /// receipt, and each final capture, void, reclaim and refund after it comes with its
    /// own receipt's proof (`kind`, `log`: its log's position in that receipt, `proof`),
    /// against its own block's hash. Absent for other methods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    pub escrow_events: Vec<paywatch_evm::proof::EscrowEventProof>,
}

/// A Solana payment's best available evidence — not a proof: Solana has no receipt trie,
/// so nothing ties a payment to a block hash alone. It is the node's own `getTransaction`
/// answer at `finalized`, which paywatch checked to be the payment's transaction, at its
/// slot, successful, with the signature's status `finalized`. Check it against a node you
/// trust (`getSignatureStatuses`, `getTransaction`); the payer's ed25519 signature in the
/// signed transaction can be checked by anyone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EvidenceView {
    /// What this is: always `node_attested_transaction` (evidence from a node, not a proof).
    pub evidence: String,
    /// CAIP-2 network id.
    pub network: String,
    /// The payment (its transaction's signature).
    pub payment: String,
    /// Its number in the transaction.
    pub index_in_tx: u32,
    /// How the money moved (Solana's: `spl`, Token-2022 transfers included).
    pub method: PaymentMethod,
    /// The payment's state when the evidence was served (always a final one).
    pub payment_state: PaymentState,
    /// The payment's slot.
    pub slot: u64,
    /// That slot's block hash, as paywatch stored it.
    pub block_hash: String,
    /// The signature's status at the node (`getSignatureStatuses`): `finalized`.
    pub confirmation_status: String,
    /// The cluster's finalized slot when the evidence was read (at or above `slot`).
    pub finalized_slot: u64,
    /// The JSON-RPC `result` of `getTransaction` (encoding `base64`: the transaction
    /// exactly as signed; commitment `finalized`), as the node sent it.
    #[schema(value_type = Object)]
    pub transaction: serde_json::Value,
}

/// What backs a payment: its receipt proof on EVM, its transaction's evidence on Solana
/// (serialized as the one it holds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ProofOrEvidence {
    /// An EVM payment's receipt proof.
    Receipt(Box<ProofView>),
    /// A Solana payment's evidence.
    Evidence(Box<EvidenceView>),
}
