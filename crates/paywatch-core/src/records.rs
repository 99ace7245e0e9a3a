//! The rows a worker produces for one batch of blocks (EVM) or slots (Solana), in
//! canonical spelling (EVM: `0x` + lowercase hex; Solana: base58), ready for the store.

use alloy_primitives::U256;

use crate::method::PaymentMethod;

/// Where an event sits on chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventPosition {
    /// Transaction hash (EVM) or signature (Solana).
    pub tx_id: String,
    /// Log index within the block (EVM) or instruction position (Solana).
    pub event_index: u64,
    /// Block number (EVM) or slot (Solana).
    pub block_number: u64,
    /// Block hash (EVM) or blockhash (Solana).
    pub block_hash: String,
    /// Block time, Unix seconds, when the node reported it.
    pub block_time: Option<i64>,
}

/// A token transfer: ERC-20 `Transfer` or SPL `transfer`/`transferChecked`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferRecord {
    /// Where it happened.
    pub position: EventPosition,
    /// The token contract (EVM) or mint (Solana).
    pub token: String,
    /// Sender (owner on Solana).
    pub from: String,
    /// Recipient (owner on Solana).
    pub to: String,
    /// Amount in the token's smallest unit.
    pub value: U256,
    /// Solana: the text of the SPL Memo in the same transaction, if any.
    pub memo: Option<String>,
}

/// An EIP-3009 `AuthorizationUsed(authorizer, nonce)` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationRecord {
    /// Where it happened.
    pub position: EventPosition,
    /// The token contract that emitted it.
    pub token: String,
    /// The address that signed the authorization.
    pub authorizer: String,
    /// The 32-byte nonce, `0x` + 64 lowercase hex.
    pub nonce: String,
}

/// A `Settled()` or `SettledWithPermit()` log of a watched x402 Permit2 proxy: the proxy
/// moved a payer's tokens through Permit2 in the log just before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxySettlementRecord {
    /// Where it happened.
    pub position: EventPosition,
    /// The proxy that emitted it.
    pub proxy: String,
    /// `Permit2` for x402's exact proxy, `Upto` for its upto proxy.
    pub method: PaymentMethod,
}

/// One redemption of an ERC-7710 delegation by a watched delegation manager: the root
/// delegator's account executed a call the delegation allowed. A redemption of a chain of
/// delegations logs one `RedeemedDelegation` per delegation, the root one last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedemptionRecord {
    /// Where its last log (the root delegation's) is.
    pub position: EventPosition,
    /// Log index of its first log: the execution's logs come before it.
    pub first_log: u64,
    /// The delegation manager that emitted it.
    pub manager: String,
    /// The root delegator: the account that executed (the payer).
    pub delegator: String,
    /// What the execution was, when its call was read.
    pub execution: Execution,
}

/// What a redemption executed, read from the redeeming call (the transaction's input when
/// it calls the manager, otherwise its call trace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Execution {
    /// The call could not be read (the node serves no traces): the logs alone decide.
    Unread,
    /// One ERC-20 `transfer(to, amount)` on `token`, x402's ERC-7710 settlement.
    Transfer {
        /// The token called.
        token: String,
        /// The recipient.
        to: String,
        /// The amount.
        amount: U256,
    },
    /// Anything else (several calls, a call with value, another function): not an x402
    /// payment.
    Other,
}

/// What an escrow event did; stored in snake_case.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
    serde::Serialize,
    serde::Deserialize,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum EscrowEventKind {
    /// `PaymentAuthorized`: the payer's money went into escrow (a hold).
    Authorized,
    /// `PaymentCharged`: authorized and captured in one step.
    Charged,
    /// `PaymentCaptured`: part or all of the hold went to the receiver (less the fee).
    Captured,
    /// `PaymentVoided`: the operator sent the uncaptured hold back to the payer.
    Voided,
    /// `PaymentReclaimed`: the payer took the uncaptured hold back after its expiry.
    Reclaimed,
    /// `PaymentRefunded`: captured money went back to the payer.
    Refunded,
}

impl EscrowEventKind {
    /// The kind as stored and answered.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether the event opens an escrowed payment (it carries the `PaymentInfo`).
    pub fn opens(self) -> bool {
        matches!(self, Self::Authorized | Self::Charged)
    }
}

/// One event of a watched `AuthCaptureEscrow`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EscrowEventRecord {
    /// Where it happened.
    pub position: EventPosition,
    /// The escrow contract that emitted it.
    pub escrow: String,
    /// The payment's `paymentInfoHash`, `0x` + 64 lowercase hex: its id.
    pub payment_info_hash: String,
    /// What happened.
    pub kind: EscrowEventKind,
    /// The event's amount.
    pub amount: U256,
    /// Charges and captures: the fee in basis points of `amount`.
    pub fee_bps: Option<u16>,
    /// Charges and captures: who received the fee.
    pub fee_receiver: Option<String>,
    /// Authorizations, charges and refunds: the token collector that moved the money.
    pub token_collector: Option<String>,
}

/// The `PaymentInfo` an escrowed payment's authorization or charge carries: its terms,
/// which its `paymentInfoHash` commits to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EscrowTerms {
    /// The escrow contract.
    pub escrow: String,
    /// The payment's `paymentInfoHash`.
    pub payment_info_hash: String,
    /// Who drives the payment (captures, voids, refunds): in x402 the facilitator.
    pub operator: String,
    /// Who pays.
    pub payer: String,
    /// Who is paid (less fees).
    pub receiver: String,
    /// The token.
    pub token: String,
    /// The most that may be authorized.
    pub max_amount: U256,
    /// Unix seconds after which the payer's signature can no longer be used.
    pub pre_approval_expiry: u64,
    /// Unix seconds from which the hold can no longer be captured and the payer may
    /// reclaim it.
    pub authorization_expiry: u64,
    /// Unix seconds from which captured money can no longer be refunded.
    pub refund_expiry: u64,
    /// Least fee, basis points.
    pub min_fee_bps: u16,
    /// Largest fee, basis points.
    pub max_fee_bps: u16,
    /// Who must receive fees (the zero address: the operator chooses at capture).
    pub fee_receiver: String,
    /// The payment's salt, decimal.
    pub salt: String,
}

/// One x402 payment: the settlement (an authorization, a proxy's `Settled`, an SPL
/// instruction) paired with the transfer it released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentRecord {
    /// The payment id: the transaction hash (EVM) or signature (Solana).
    pub payment_id: String,
    /// Its number in the transaction (almost always 0): on Solana the position of its
    /// transfer among the transaction's token transfers; on EVM the position of its
    /// authorization among every `AuthorizationUsed` log of the transaction.
    pub index_in_tx: u32,
    /// Position of the transfer that moved the money.
    pub transfer: EventPosition,
    /// Who paid.
    pub payer: String,
    /// Who was paid.
    pub pay_to: String,
    /// Amount in the asset's smallest unit.
    pub amount: U256,
    /// The token contract or mint.
    pub asset: String,
    /// How the money moved.
    pub method: PaymentMethod,
    /// The authorization's nonce (EVM): EIP-3009's `0x` + 64 hex, or Permit2's `uint256`
    /// in decimal; `None` where the settling call could not be read.
    pub nonce: Option<String>,
    /// `upto` only: the maximum the payer signed (`amount` is what was settled).
    pub max_amount: Option<U256>,
    /// The text of the transaction's SPL Memo (Solana only): the seller's `extra.memo` or
    /// the client's random nonce, which x402's exact scheme puts in every payment.
    pub memo: Option<String>,
    /// Who settled it, in x402 the facilitator: the fee payer on Solana; not read on EVM
    /// (the sender is not in the logs), `None`.
    pub facilitator: Option<String>,
    /// Token-2022 `transferCheckedWithFee` only: the transfer fee withheld in the seller's
    /// account. `amount` is what the seller received; the payer sent `amount + fee_amount`.
    /// (An escrowed payment's fees are those of its final captures, kept by the store.)
    pub fee_amount: Option<U256>,
}

impl PaymentRecord {
    /// The payment `transfer` made, numbered `index_in_tx` (its id: the transaction); its
    /// nonce and the rest are left for the rule that found it to fill in.
    pub fn paid_by(transfer: &TransferRecord, index_in_tx: u32, method: PaymentMethod) -> Self {
        Self {
            payment_id: transfer.position.tx_id.clone(),
            index_in_tx,
            transfer: transfer.position.clone(),
            payer: transfer.from.clone(),
            pay_to: transfer.to.clone(),
            amount: transfer.value,
            asset: transfer.token.clone(),
            method,
            nonce: None,
            max_amount: None,
            fee_amount: None,
            memo: None,
            facilitator: None,
        }
    }
}

/// A block whose hash paywatch remembers, to notice when the chain reorganises under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRecord {
    /// Block number.
    pub number: u64,
    /// Block hash.
    pub hash: String,
    /// Parent hash, when known.
    pub parent_hash: Option<String>,
}

/// Everything one worker step read from `from_block..=to_block`, committed in one transaction
/// together with the cursor advance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// First block read.
    pub from_block: u64,
    /// Last block read (inclusive).
    pub to_block: u64,
    /// Token transfers.
    pub transfers: Vec<TransferRecord>,
    /// EIP-3009 authorizations.
    pub authorizations: Vec<AuthorizationRecord>,
    /// Payments paired from the above.
    pub payments: Vec<PaymentRecord>,
    /// Block hashes to remember.
    pub blocks: Vec<BlockRecord>,
    /// Solana: pending payments whose transactions left the chain before they became
    /// final (their slot is final and their signature is unknown): marked `dropped`.
    pub vanished_payments: Vec<PaymentKey>,
    /// Events of watched escrows, of payments in watched tokens.
    pub escrow_events: Vec<EscrowEventRecord>,
    /// The terms of the escrowed payments this batch opens.
    pub escrow_terms: Vec<EscrowTerms>,
}

/// Names one payment: its id and its number within its transaction.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PaymentKey {
    /// Transaction hash or signature.
    pub payment_id: String,
    /// Its number in the transaction (see `PaymentRecord::index_in_tx`).
    pub index_in_tx: u32,
}

/// Where an audit read the chain's side of final blocks again; stored in snake_case.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
    serde::Serialize,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum AuditSource {
    /// The independent provider of `verify_rpc_urls`, differences settled by receipts.
    Verifier,
    /// Every block's receipts, through the network's own endpoints.
    Receipts,
}

/// One audit that ran to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// CAIP-2 id.
    pub network: String,
    /// First block read again.
    pub first_block: u64,
    /// Last block read again (inclusive).
    pub last_block: u64,
    /// Where the chain's side came from.
    pub source: AuditSource,
    /// Run by `paywatch run` on its schedule (else by `paywatch audit`).
    pub scheduled: bool,
    /// Differences found between the store and the chain.
    pub differences: u64,
    /// Of those, the ones `paywatch audit --repair` repaired.
    pub repaired: u64,
    /// When it finished, Unix milliseconds.
    pub finished_ms: i64,
}

/// Names one token transfer: its transaction and its log index.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TransferKey {
    /// Transaction hash.
    pub tx_id: String,
    /// Log index in the block.
    pub event_index: u64,
}

/// What `paywatch audit --repair` changes in one audited range so that the store holds
/// what the chain holds there, applied in one transaction
/// (`paywatch_store::Store::repair_range`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeRepair {
    /// The range as ingestion would have committed it from the chain's side (its
    /// payments, kept transfers, authorizations and escrow events; no cursor moves):
    /// what the store lacks of it is inserted, what it holds already is left as it is.
    pub chain: Batch,
    /// Stored payments the chain does not have: `dropped`, with the cause `refuted`.
    pub refuted: Vec<PaymentKey>,
    /// Stored payments the chain holds with other facts: the chain's facts replace them
    /// (they are in `chain.payments`), with the cause `corrected`.
    pub corrected: Vec<PaymentKey>,
    /// Stored transfers the chain does not have, or has with other facts: deleted (the
    /// chain's, when it has one, is in `chain.transfers`).
    pub deleted_transfers: Vec<TransferKey>,
    /// The refund routes whose refunds are tied again in chain order, each from the first
    /// block of the range a change on it touches.
    pub routes: Vec<(RefundRoute, u64)>,
    /// The findings repaired (recorded as repaired).
    pub findings: Vec<AuditFinding>,
}

/// The way money goes back to refund a payment: from its seller to its payer, in its
/// asset. A transfer on no payment's route can refund nothing (the retention rules build
/// and use routes).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RefundRoute {
    /// The payment's `pay_to`: who sends a refund.
    pub from: String,
    /// The payment's payer: who receives it.
    pub to: String,
    /// The payment's asset.
    pub asset: String,
}

/// What an audit finding names.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[strum(serialize_all = "snake_case")]
pub enum FindingSubject {
    /// A payment: the finding's `tx_id` is its payment id, `position` its index in the
    /// transaction.
    Payment,
    /// A transfer: `tx_id` is its transaction, `position` its log index.
    Transfer,
}

/// One difference an audit found between the store and the chain, about one payment or
/// transfer, with its evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditFinding {
    /// What it names.
    pub subject: FindingSubject,
    /// The payment id or the transfer's transaction.
    pub tx_id: String,
    /// The payment's index in its transaction or the transfer's log index.
    pub position: u64,
    /// The block it is in.
    pub block_number: u64,
    /// A transfer the store lacks: the refund route it runs on.
    pub refund_route: Option<RefundRoute>,
    /// The difference, as the JSON line `paywatch audit` prints.
    pub difference: String,
}
