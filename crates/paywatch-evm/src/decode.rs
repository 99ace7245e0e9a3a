//! Turns `eth_getLogs` answers into records, refusing answers a correct node cannot give
//! (logs outside the asked range, from unasked contracts, pending or removed logs, two
//! hashes for one block).

use std::collections::HashMap;

use alloy::primitives::{Address, B256, U256, keccak256};
use alloy::rpc::types::Log;
use alloy::sol;
use alloy::sol_types::{SolEvent, SolValue};
use paywatch_core::PaymentMethod;
use paywatch_core::ids::lower_hex;
use paywatch_core::matching::{EveryMarker, MissingAuthorization};
use paywatch_core::records::{
    AuthorizationRecord, EscrowEventKind, EscrowEventRecord, EscrowTerms, EventPosition, Execution,
    ProxySettlementRecord, RedemptionRecord, TransferRecord,
};

sol! {
    /// ERC-20 transfer.
    event Transfer(address indexed from, address indexed to, uint256 value);
    /// EIP-3009: an authorization was used.
    event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);
    /// x402's Permit2 proxies: `settle` completed.
    event Settled();
    /// x402's Permit2 proxies: `settleWithPermit` completed.
    event SettledWithPermit();
}

sol! {
    /// The delegation framework's `Caveat`.
    #[derive(Debug)]
    struct Caveat {
        address enforcer;
        bytes terms;
        bytes args;
    }
    /// The delegation framework's `Delegation`.
    #[derive(Debug)]
    struct Delegation {
        address delegate;
        address delegator;
        bytes32 authority;
        Caveat[] caveats;
        uint256 salt;
        bytes signature;
    }
    /// ERC-7710 delegation manager: one delegation of a redeemed chain (the root one last).
    event RedeemedDelegation(address indexed rootDelegator, address indexed redeemer, Delegation delegation);
}

/// The `authority` of a chain's root delegation (the delegation framework's
/// `ROOT_AUTHORITY`).
pub const ROOT_AUTHORITY: B256 = B256::repeat_byte(0xff);

sol! {
    /// commerce-payments' `AuthCaptureEscrow.PaymentInfo`.
    #[derive(Debug)]
    struct PaymentInfo {
        address operator;
        address payer;
        address receiver;
        address token;
        uint120 maxAmount;
        uint48 preApprovalExpiry;
        uint48 authorizationExpiry;
        uint48 refundExpiry;
        uint16 minFeeBps;
        uint16 maxFeeBps;
        address feeReceiver;
        uint256 salt;
    }
    /// The escrow: authorized and captured in one step.
    event PaymentCharged(bytes32 indexed paymentInfoHash, PaymentInfo paymentInfo, uint256 amount, address tokenCollector, uint16 feeBps, address feeReceiver);
    /// The escrow: money went into escrow (a hold).
    event PaymentAuthorized(bytes32 indexed paymentInfoHash, PaymentInfo paymentInfo, uint256 amount, address tokenCollector);
    /// The escrow: part or all of the hold went to the receiver.
    event PaymentCaptured(bytes32 indexed paymentInfoHash, uint256 amount, uint16 feeBps, address feeReceiver);
    /// The escrow: the operator voided the hold.
    event PaymentVoided(bytes32 indexed paymentInfoHash, uint256 amount);
    /// The escrow: the payer reclaimed the hold after its expiry.
    event PaymentReclaimed(bytes32 indexed paymentInfoHash, uint256 amount);
    /// The escrow: captured money went back to the payer.
    event PaymentRefunded(bytes32 indexed paymentInfoHash, uint256 amount, address tokenCollector);
}

/// The escrow's `PAYMENT_INFO_TYPEHASH`.
fn payment_info_typehash() -> B256 {
    keccak256(
        "PaymentInfo(address operator,address payer,address receiver,address token,uint120 maxAmount,uint48 preApprovalExpiry,uint48 authorizationExpiry,uint48 refundExpiry,uint16 minFeeBps,uint16 maxFeeBps,address feeReceiver,uint256 salt)",
    )
}

/// The escrow's `getHash(paymentInfo)` on chain `chain_id` at `escrow`:
/// `keccak256(abi.encode(chainId, escrow, keccak256(abi.encode(TYPEHASH, paymentInfo))))`.
pub fn payment_info_hash(chain_id: u64, escrow: Address, info: &PaymentInfo) -> B256 {
    let inner = keccak256((payment_info_typehash(), info.clone()).abi_encode());
    keccak256((U256::from(chain_id), escrow, inner).abi_encode())
}

/// The `topic0`s of a watched escrow's events.
pub fn escrow_topics() -> [B256; 6] {
    [
        PaymentAuthorized::SIGNATURE_HASH,
        PaymentCharged::SIGNATURE_HASH,
        PaymentCaptured::SIGNATURE_HASH,
        PaymentVoided::SIGNATURE_HASH,
        PaymentReclaimed::SIGNATURE_HASH,
        PaymentRefunded::SIGNATURE_HASH,
    ]
}

/// The contracts one read watches.
#[derive(Debug, Clone, Copy)]
pub struct Watched<'a> {
    /// Tokens (of the group being read).
    pub tokens: &'a [Address],
    /// Permit2 proxies, each with the method its settlements are.
    pub proxies: &'a [(Address, PaymentMethod)],
    /// `AuthCaptureEscrow` contracts.
    pub escrows: &'a [Address],
    /// ERC-7710 delegation managers.
    pub managers: &'a [Address],
    /// The chain id, which escrow hashes commit to.
    pub chain_id: u64,
}

/// The `topic0`s of the logs that mark a settlement, read of every contract: EIP-3009's
/// `AuthorizationUsed`, the Permit2 proxies' `Settled()` and `SettledWithPermit()`, and
/// ERC-7710 managers' `RedeemedDelegation`.
pub fn settlement_topics() -> [B256; 4] {
    [
        AuthorizationUsed::SIGNATURE_HASH,
        Settled::SIGNATURE_HASH,
        SettledWithPermit::SIGNATURE_HASH,
        RedeemedDelegation::SIGNATURE_HASH,
    ]
}

/// The `topic0` of ERC-20's `Transfer`.
pub fn transfer_topic() -> B256 {
    Transfer::SIGNATURE_HASH
}

/// An RPC answer that cannot be right.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum BadAnswer {
    /// A log without block number, block hash, transaction hash or log index (a pending log).
    #[error("log without {0}: the node returned a pending log for a mined range")]
    MissingField(&'static str),
    /// A log outside the block range that was asked for.
    #[error("log at block {block} is outside the asked range {from}..={to}")]
    OutOfRange {
        /// Block of the log.
        block: u64,
        /// Range start.
        from: u64,
        /// Range end.
        to: u64,
    },
    /// A log from a contract that was not asked for.
    #[error("log from unwatched contract {0}")]
    UnaskedContract(String),
    /// A log flagged `removed`.
    #[error("log at block {0} is flagged removed")]
    Removed(u64),
    /// Two logs of one block number with different block hashes.
    #[error("block {0} has logs with two different block hashes")]
    InconsistentBlockHash(u64),
    /// Logs naming a block hash that the block's header (read from the same provider) does
    /// not have: a block the chain does not hold.
    #[error(
        "logs name block {block} as {named}, but that block's header is {header}: the provider made up or mixed up blocks; reading again"
    )]
    ForeignBlock {
        /// The block number.
        block: u64,
        /// The hash the logs name.
        named: String,
        /// The header's hash.
        header: String,
    },
    /// A log with a watched topic whose data does not decode.
    #[error("undecodable {event} log in tx {tx}: {detail}")]
    Undecodable {
        /// Event name.
        event: &'static str,
        /// Transaction hash.
        tx: String,
        /// Decoder message.
        detail: String,
    },
    /// A log of another event than was asked for.
    #[error(
        "a log of tx {0} has another topic than AuthorizationUsed, Settled, SettledWithPermit or RedeemedDelegation, which alone were asked for"
    )]
    UnaskedTopic(String),
    /// The node does not know a transaction whose logs it returned.
    #[error("the node does not know tx {0}, whose logs it returned")]
    UnknownTransaction(String),
    /// A proxy's settling calls (its transaction's input or call trace) disagree with the
    /// settlements its logs show.
    #[error("the settling calls of tx {tx} disagree with its logs: {detail}")]
    SettleCallMismatch {
        /// Transaction hash.
        tx: String,
        /// What disagrees.
        detail: String,
    },
    /// One provider reports a reorg below the final block, and another still has the
    /// stored block: nothing final changes on one provider's word.
    #[error(
        "{reporting} reports a reorg below the final block at block {block}, which {disagreeing} does not: nothing final changes; reading again"
    )]
    DisputedFork {
        /// The stored block the reporting provider no longer has.
        block: u64,
        /// The provider that reports the fork.
        reporting: String,
        /// The provider that still has the stored block.
        disagreeing: String,
    },
    /// The primary and the verifier disagree about a log, and so do their receipts of its
    /// transaction: one of them lies in its receipts too, and two providers cannot tell
    /// which. Nothing is committed; the range is read again later.
    #[error(
        "the providers disagree about log {log_index} of tx {tx} (block {block}), and so do their receipts: \
         the primary's receipt {primary}, the verifier's {verifier}; nothing committed, reading again later"
    )]
    UnsettledDisagreement {
        /// Transaction hash.
        tx: String,
        /// Its block.
        block: u64,
        /// The log's index.
        log_index: u64,
        /// Whether the primary's receipt holds the log (`holds it` / `lacks it`).
        primary: &'static str,
        /// Whether the verifier's receipt holds the log.
        verifier: &'static str,
    },
    /// The node's list of every settlement log lacks one of a watched contract.
    #[error(transparent)]
    MissingAuthorization(#[from] MissingAuthorization),
    /// An escrow event's `paymentInfoHash` is not the hash of the `PaymentInfo` it carries.
    #[error(
        "escrow event in tx {tx} names paymentInfoHash {logged}, but its PaymentInfo hashes to {computed}"
    )]
    EscrowHashMismatch {
        /// Transaction hash.
        tx: String,
        /// The hash in the log's topic.
        logged: String,
        /// The hash of the log's `PaymentInfo`.
        computed: String,
    },
}

/// Where a log of a mined block sits.
struct Mined {
    block: u64,
    block_hash: B256,
    tx: B256,
    log_index: u64,
}

/// The position of a log the node returned for `from..=to`, refused when it is pending,
/// removed or outside the range.
fn mined(log: &Log, from: u64, to: u64) -> Result<Mined, BadAnswer> {
    let block = log.block_number.ok_or(BadAnswer::MissingField("blockNumber"))?;
    let block_hash = log.block_hash.ok_or(BadAnswer::MissingField("blockHash"))?;
    let tx = log
        .transaction_hash
        .ok_or(BadAnswer::MissingField("transactionHash"))?;
    let log_index = log.log_index.ok_or(BadAnswer::MissingField("logIndex"))?;
    if block < from || block > to {
        return Err(BadAnswer::OutOfRange { block, from, to });
    }
    if log.removed {
        return Err(BadAnswer::Removed(block));
    }
    Ok(Mined {
        block,
        block_hash,
        tx,
        log_index,
    })
}

/// The settlement-marking logs of every contract over `from..=to` (one `eth_getLogs` by
/// topics alone, [`settlement_topics`]); refused like any answer a correct node cannot
/// give, and when a block's hash differs from the one the watched contracts' logs named
/// (`block_hashes`).
pub fn every_marker(
    logs: &[Log],
    from: u64,
    to: u64,
    block_hashes: &HashMap<u64, B256>,
) -> Result<EveryMarker, BadAnswer> {
    let mut every = EveryMarker::default();
    for log in logs {
        let Mined {
            block,
            block_hash,
            tx,
            log_index,
        } = mined(log, from, to)?;
        let by_tx = match log.topic0() {
            Some(&AuthorizationUsed::SIGNATURE_HASH) => &mut every.authorizations,
            Some(&Settled::SIGNATURE_HASH | &SettledWithPermit::SIGNATURE_HASH) => &mut every.settlements,
            Some(&RedeemedDelegation::SIGNATURE_HASH) => &mut every.redemptions,
            _ => return Err(BadAnswer::UnaskedTopic(lower_hex(tx))),
        };
        if block_hashes.get(&block).is_some_and(|known| *known != block_hash) {
            return Err(BadAnswer::InconsistentBlockHash(block));
        }
        by_tx.entry(lower_hex(tx)).or_default().push(log_index);
    }
    Ok(every)
}

/// What one `eth_getLogs` answer holds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DecodedLogs {
    /// Transfers.
    pub transfers: Vec<TransferRecord>,
    /// Authorizations.
    pub authorizations: Vec<AuthorizationRecord>,
    /// Settlements of watched Permit2 proxies.
    pub settlements: Vec<ProxySettlementRecord>,
    /// Events of watched escrows: openings only of payments in the read tokens.
    pub escrow_events: Vec<EscrowEventRecord>,
    /// The terms of the payments the openings open.
    pub escrow_terms: Vec<EscrowTerms>,
    /// Redemptions of watched delegation managers (their executions not read yet).
    pub redemptions: Vec<RedemptionRecord>,
    /// Hash of every block that had a log.
    pub block_hashes: HashMap<u64, B256>,
}

/// Decodes and checks the logs of `from..=to` asked for the `watched` contracts.
pub fn decode_logs(
    logs: &[Log],
    from: u64,
    to: u64,
    watched: &Watched<'_>,
) -> Result<DecodedLogs, BadAnswer> {
    let Watched {
        tokens,
        proxies,
        escrows,
        managers,
        chain_id,
    } = *watched;
    let mut out = DecodedLogs::default();
    let mut redeemed: Vec<(EventPosition, Address, RedeemedDelegation)> = Vec::new();
    for log in logs {
        let Mined {
            block,
            block_hash,
            tx,
            log_index,
        } = mined(log, from, to)?;
        let token = log.address();
        let proxy = proxies.iter().find(|(address, _)| *address == token);
        let escrow = escrows.contains(&token);
        let manager = managers.contains(&token);
        if !tokens.contains(&token) && proxy.is_none() && !escrow && !manager {
            return Err(BadAnswer::UnaskedContract(lower_hex(token)));
        }
        if *out.block_hashes.entry(block).or_insert(block_hash) != block_hash {
            return Err(BadAnswer::InconsistentBlockHash(block));
        }
        let position = EventPosition {
            tx_id: lower_hex(tx),
            event_index: log_index,
            block_number: block,
            block_hash: lower_hex(block_hash),
            block_time: log.block_timestamp.and_then(|t| i64::try_from(t).ok()),
        };
        let undecodable = |event: &'static str, e: alloy::sol_types::Error| BadAnswer::Undecodable {
            event,
            tx: lower_hex(tx),
            detail: e.to_string(),
        };
        if escrow {
            if let Some((event, terms)) = decode_escrow_log(log, position, chain_id)? {
                let opens_watched = terms
                    .as_ref()
                    .is_none_or(|t| tokens.iter().any(|a| lower_hex(a) == t.token));
                if opens_watched {
                    out.escrow_terms.extend(terms);
                    out.escrow_events.push(event);
                }
            }
            continue;
        }
        if manager {
            // A manager's other logs (delegations enabled or disabled) move no money.
            if log.topic0() == Some(&RedeemedDelegation::SIGNATURE_HASH) {
                let event = RedeemedDelegation::decode_log(&log.inner)
                    .map_err(|e| undecodable("RedeemedDelegation", e))?;
                redeemed.push((position, token, event.data));
            }
            continue;
        }
        match (log.topic0(), proxy) {
            (Some(&Settled::SIGNATURE_HASH | &SettledWithPermit::SIGNATURE_HASH), Some((_, method))) => {
                out.settlements.push(ProxySettlementRecord {
                    position,
                    proxy: lower_hex(token),
                    method: *method,
                });
            }
            // A proxy's other logs (a failed EIP-2612 permit) carry nothing paywatch reads.
            (_, Some(_)) => {}
            (Some(&Transfer::SIGNATURE_HASH), None) => {
                let event = Transfer::decode_log(&log.inner).map_err(|e| undecodable("Transfer", e))?;
                out.transfers.push(TransferRecord {
                    position,
                    token: lower_hex(token),
                    from: lower_hex(event.from),
                    to: lower_hex(event.to),
                    value: event.value,
                    memo: None,
                });
            }
            (Some(&AuthorizationUsed::SIGNATURE_HASH), None) => {
                let event = AuthorizationUsed::decode_log(&log.inner)
                    .map_err(|e| undecodable("AuthorizationUsed", e))?;
                out.authorizations.push(AuthorizationRecord {
                    position,
                    token: lower_hex(token),
                    authorizer: lower_hex(event.authorizer),
                    nonce: lower_hex(event.nonce),
                });
            }
            // A topic that was not asked for carries nothing paywatch reads.
            _ => {}
        }
    }
    out.redemptions = redemptions(redeemed)?;
    Ok(out)
}

/// The redemptions of a manager's `RedeemedDelegation` logs: each transaction's logs of
/// one manager in order, a redemption ending at its root delegation's log.
fn redemptions(
    mut logs: Vec<(EventPosition, Address, RedeemedDelegation)>,
) -> Result<Vec<RedemptionRecord>, BadAnswer> {
    logs.sort_by_key(|(position, _, _)| (position.block_number, position.event_index));
    let mut out = Vec::new();
    let mut opened: HashMap<(String, Address), u64> = HashMap::new();
    for (position, manager, event) in logs {
        let chain_start = *opened
            .entry((position.tx_id.clone(), manager))
            .or_insert(position.event_index);
        if event.delegation.authority != ROOT_AUTHORITY {
            continue;
        }
        opened.remove(&(position.tx_id.clone(), manager));
        if event.delegation.delegator != event.rootDelegator {
            return Err(BadAnswer::Undecodable {
                event: "RedeemedDelegation",
                tx: position.tx_id,
                detail: format!(
                    "the root delegation's delegator {} is not the logged root delegator {}",
                    lower_hex(event.delegation.delegator),
                    lower_hex(event.rootDelegator)
                ),
            });
        }
        out.push(RedemptionRecord {
            first_log: chain_start,
            manager: lower_hex(manager),
            delegator: lower_hex(event.rootDelegator),
            execution: Execution::Unread,
            position,
        });
    }
    Ok(out)
}

/// One escrow event as the escrow logged it, whatever its kind.
#[derive(Debug, Clone)]
pub(crate) struct EscrowLog {
    /// Which event.
    pub kind: EscrowEventKind,
    /// The `paymentInfoHash` it names.
    pub payment_info_hash: B256,
    /// The amount it moved.
    pub amount: U256,
    /// An opening's (`PaymentAuthorized`, `PaymentCharged`) terms.
    pub terms: Option<PaymentInfo>,
    /// The fee (basis points, receiver) of a charge or capture.
    pub fee: Option<(u16, Address)>,
    /// The token collector of an opening or refund.
    pub token_collector: Option<Address>,
}

/// `log` as an escrow event, by its `topic0`: `None` for any other event
/// (`TokenStoreCreated` included); `Err` names the event whose data do not decode.
pub(crate) fn escrow_log(
    log: &alloy::primitives::Log,
) -> Option<Result<EscrowLog, (&'static str, alloy::sol_types::Error)>> {
    let event = |kind, payment_info_hash, amount| EscrowLog {
        kind,
        payment_info_hash,
        amount,
        terms: None,
        fee: None,
        token_collector: None,
    };
    let decoded = match *log.topics().first()? {
        PaymentAuthorized::SIGNATURE_HASH => PaymentAuthorized::decode_log(log)
            .map(|e| e.data)
            .map(|e| EscrowLog {
                terms: Some(e.paymentInfo),
                token_collector: Some(e.tokenCollector),
                ..event(EscrowEventKind::Authorized, e.paymentInfoHash, e.amount)
            })
            .map_err(|e| ("PaymentAuthorized", e)),
        PaymentCharged::SIGNATURE_HASH => PaymentCharged::decode_log(log)
            .map(|e| e.data)
            .map(|e| EscrowLog {
                terms: Some(e.paymentInfo),
                fee: Some((e.feeBps, e.feeReceiver)),
                token_collector: Some(e.tokenCollector),
                ..event(EscrowEventKind::Charged, e.paymentInfoHash, e.amount)
            })
            .map_err(|e| ("PaymentCharged", e)),
        PaymentCaptured::SIGNATURE_HASH => PaymentCaptured::decode_log(log)
            .map(|e| e.data)
            .map(|e| EscrowLog {
                fee: Some((e.feeBps, e.feeReceiver)),
                ..event(EscrowEventKind::Captured, e.paymentInfoHash, e.amount)
            })
            .map_err(|e| ("PaymentCaptured", e)),
        PaymentVoided::SIGNATURE_HASH => PaymentVoided::decode_log(log)
            .map(|e| e.data)
            .map(|e| event(EscrowEventKind::Voided, e.paymentInfoHash, e.amount))
            .map_err(|e| ("PaymentVoided", e)),
        PaymentReclaimed::SIGNATURE_HASH => PaymentReclaimed::decode_log(log)
            .map(|e| e.data)
            .map(|e| event(EscrowEventKind::Reclaimed, e.paymentInfoHash, e.amount))
            .map_err(|e| ("PaymentReclaimed", e)),
        PaymentRefunded::SIGNATURE_HASH => PaymentRefunded::decode_log(log)
            .map(|e| e.data)
            .map(|e| EscrowLog {
                token_collector: Some(e.tokenCollector),
                ..event(EscrowEventKind::Refunded, e.paymentInfoHash, e.amount)
            })
            .map_err(|e| ("PaymentRefunded", e)),
        _ => return None,
    };
    Some(decoded)
}

/// One escrow log as its event (with the terms, checked against the hash they are logged
/// under, for an opening); `None` for an event paywatch does not read
/// (`TokenStoreCreated`).
fn decode_escrow_log(
    log: &Log,
    position: EventPosition,
    chain_id: u64,
) -> Result<Option<(EscrowEventRecord, Option<EscrowTerms>)>, BadAnswer> {
    let escrow = log.address();
    let event = match escrow_log(&log.inner) {
        None => return Ok(None),
        Some(Err((event, e))) => {
            return Err(BadAnswer::Undecodable {
                event,
                tx: position.tx_id,
                detail: e.to_string(),
            });
        }
        Some(Ok(event)) => event,
    };
    let terms = match &event.terms {
        None => None,
        Some(info) => {
            let computed = payment_info_hash(chain_id, escrow, info);
            if computed != event.payment_info_hash {
                return Err(BadAnswer::EscrowHashMismatch {
                    tx: position.tx_id,
                    logged: lower_hex(event.payment_info_hash),
                    computed: lower_hex(computed),
                });
            }
            Some(EscrowTerms {
                escrow: lower_hex(escrow),
                payment_info_hash: lower_hex(event.payment_info_hash),
                operator: lower_hex(info.operator),
                payer: lower_hex(info.payer),
                receiver: lower_hex(info.receiver),
                token: lower_hex(info.token),
                max_amount: U256::from(info.maxAmount),
                pre_approval_expiry: info.preApprovalExpiry.to::<u64>(),
                authorization_expiry: info.authorizationExpiry.to::<u64>(),
                refund_expiry: info.refundExpiry.to::<u64>(),
                min_fee_bps: info.minFeeBps,
                max_fee_bps: info.maxFeeBps,
                fee_receiver: lower_hex(info.feeReceiver),
                salt: info.salt.to_string(),
            })
        }
    };
    let record = EscrowEventRecord {
        position,
        escrow: lower_hex(escrow),
        payment_info_hash: lower_hex(event.payment_info_hash),
        kind: event.kind,
        amount: event.amount,
        fee_bps: event.fee.map(|(bps, _)| bps),
        fee_receiver: event.fee.map(|(_, receiver)| lower_hex(receiver)),
        token_collector: event.token_collector.map(lower_hex),
    };
    Ok(Some((record, terms)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::primitives::{LogData, U256, address, b256};

    const TOKEN: Address = address!("833589fcd6edb6e08f4c7c32d4f71b54bda02913");
    const PAYER: Address = address!("1111111111111111111111111111111111111111");
    const SELLER: Address = address!("2222222222222222222222222222222222222222");

    fn watch<'a>(tokens: &'a [Address], proxies: &'a [(Address, PaymentMethod)]) -> Watched<'a> {
        Watched {
            tokens,
            proxies,
            escrows: &[],
            managers: &[],
            chain_id: 8453,
        }
    }

    fn rpc_log(block: u64, index: u64, data: LogData) -> Log {
        Log {
            inner: alloy::primitives::Log { address: TOKEN, data },
            block_hash: Some(B256::with_last_byte(block as u8)),
            block_number: Some(block),
            block_timestamp: Some(1_700_000_000 + block),
            transaction_hash: Some(b256!(
                "00000000000000000000000000000000000000000000000000000000000000aa"
            )),
            transaction_index: Some(0),
            log_index: Some(index),
            removed: false,
        }
    }

    fn transfer_log(block: u64, index: u64) -> Log {
        rpc_log(
            block,
            index,
            Transfer {
                from: PAYER,
                to: SELLER,
                value: U256::from(10_000u64),
            }
            .encode_log_data(),
        )
    }

    fn authorization_log(block: u64, index: u64) -> Log {
        rpc_log(
            block,
            index,
            AuthorizationUsed {
                authorizer: PAYER,
                nonce: B256::repeat_byte(7),
            }
            .encode_log_data(),
        )
    }

    #[test]
    fn every_marker_groups_by_transaction_and_refuses_what_was_not_asked() {
        let known: HashMap<u64, B256> = [(5, B256::with_last_byte(5))].into();
        let every = every_marker(
            &[
                authorization_log(5, 3),
                authorization_log(5, 1),
                rpc_log(5, 7, Settled {}.encode_log_data()),
                rpc_log(5, 9, SettledWithPermit {}.encode_log_data()),
            ],
            1,
            9,
            &known,
        )
        .unwrap();
        let tx = lower_hex(b256!(
            "00000000000000000000000000000000000000000000000000000000000000aa"
        ));
        assert_eq!(every.authorizations[&tx], vec![3, 1]);
        assert_eq!(every.settlements[&tx], vec![7, 9]);
        assert_eq!(
            every_marker(&[transfer_log(5, 0)], 1, 9, &known),
            Err(BadAnswer::UnaskedTopic(tx))
        );
        assert_eq!(
            every_marker(&[authorization_log(12, 0)], 1, 9, &known),
            Err(BadAnswer::OutOfRange {
                block: 12,
                from: 1,
                to: 9
            })
        );
        let mut forked = authorization_log(5, 0);
        forked.block_hash = Some(B256::repeat_byte(0xee));
        assert_eq!(
            every_marker(&[forked], 1, 9, &known),
            Err(BadAnswer::InconsistentBlockHash(5))
        );
    }

    #[test]
    fn decodes_transfer_and_authorization() {
        let decoded = decode_logs(
            &[authorization_log(5, 0), transfer_log(5, 1)],
            1,
            9,
            &watch(&[TOKEN], &[]),
        )
        .unwrap();
        assert_eq!(decoded.transfers.len(), 1);
        let t = &decoded.transfers[0];
        assert_eq!(t.from, lower_hex(PAYER));
        assert_eq!(t.to, lower_hex(SELLER));
        assert_eq!(t.value, U256::from(10_000u64));
        assert_eq!(t.position.block_time, Some(1_700_000_005));
        assert_eq!(decoded.authorizations[0].nonce, lower_hex(B256::repeat_byte(7)));
        assert_eq!(decoded.block_hashes[&5], B256::with_last_byte(5));
    }

    #[test]
    fn decodes_watched_proxies_settlements_and_nothing_else_of_theirs() {
        const PROXY: Address = address!("402085c248eea27d92e8b30b2c58ed07f9e20001");
        let of_proxy = |index: u64, data: LogData| {
            let mut log = rpc_log(5, index, data);
            log.inner.address = PROXY;
            log
        };
        let failed_permit = LogData::new_unchecked(
            vec![B256::repeat_byte(0x42), B256::ZERO, B256::ZERO],
            Vec::new().into(),
        );
        let decoded = decode_logs(
            &[
                transfer_log(5, 0),
                of_proxy(1, Settled {}.encode_log_data()),
                of_proxy(2, failed_permit),
                of_proxy(4, SettledWithPermit {}.encode_log_data()),
            ],
            1,
            9,
            &watch(&[TOKEN], &[(PROXY, PaymentMethod::Upto)]),
        )
        .unwrap();
        let settlements: Vec<(u64, &str, PaymentMethod)> = decoded
            .settlements
            .iter()
            .map(|s| (s.position.event_index, s.proxy.as_str(), s.method))
            .collect();
        let proxy = lower_hex(PROXY);
        assert_eq!(
            settlements,
            [
                (1, proxy.as_str(), PaymentMethod::Upto),
                (4, proxy.as_str(), PaymentMethod::Upto)
            ]
        );
        assert_eq!(decoded.transfers.len(), 1);
        assert!(matches!(
            decode_logs(
                &[of_proxy(1, Settled {}.encode_log_data())],
                1,
                9,
                &watch(&[TOKEN], &[])
            ),
            Err(BadAnswer::UnaskedContract(_))
        ));
    }

    #[test]
    fn refuses_lies() {
        assert_eq!(
            decode_logs(&[transfer_log(12, 0)], 1, 9, &watch(&[TOKEN], &[])),
            Err(BadAnswer::OutOfRange {
                block: 12,
                from: 1,
                to: 9
            })
        );
        let mut pending = transfer_log(5, 0);
        pending.block_hash = None;
        assert_eq!(
            decode_logs(&[pending], 1, 9, &watch(&[TOKEN], &[])),
            Err(BadAnswer::MissingField("blockHash"))
        );
        let mut removed = transfer_log(5, 0);
        removed.removed = true;
        assert_eq!(
            decode_logs(&[removed], 1, 9, &watch(&[TOKEN], &[])),
            Err(BadAnswer::Removed(5))
        );
        assert!(matches!(
            decode_logs(&[transfer_log(5, 0)], 1, 9, &watch(&[SELLER], &[])),
            Err(BadAnswer::UnaskedContract(_))
        ));
        let mut forked = transfer_log(5, 1);
        forked.block_hash = Some(B256::repeat_byte(9));
        assert_eq!(
            decode_logs(&[transfer_log(5, 0), forked], 1, 9, &watch(&[TOKEN], &[])),
            Err(BadAnswer::InconsistentBlockHash(5))
        );
        let mut truncated = transfer_log(5, 0);
        truncated.inner.data =
            LogData::new_unchecked(truncated.inner.data.topics().to_vec(), vec![1, 2].into());
        assert!(matches!(
            decode_logs(&[truncated], 1, 9, &watch(&[TOKEN], &[])),
            Err(BadAnswer::Undecodable {
                event: "Transfer",
                ..
            })
        ));
    }

    #[test]
    fn a_managers_logs_are_redemptions_each_ending_at_its_root_delegation() {
        const MANAGER: Address = address!("db9b1e94b5b69df7e401ddbede43491141047db3");
        const ACCOUNT: Address = address!("5555555555555555555555555555555555555555");
        let redeemed = |index: u64, root: Address, delegator: Address, authority: B256| {
            let mut log = rpc_log(
                5,
                index,
                RedeemedDelegation {
                    rootDelegator: root,
                    redeemer: SELLER,
                    delegation: Delegation {
                        delegate: SELLER,
                        delegator,
                        authority,
                        caveats: Vec::new(),
                        salt: U256::from(index),
                        signature: Default::default(),
                    },
                }
                .encode_log_data(),
            );
            log.inner.address = MANAGER;
            log
        };
        let watched = Watched {
            managers: &[MANAGER],
            ..watch(&[TOKEN], &[])
        };
        // A two-delegation chain (leaf at 3, root at 4) and a one-delegation chain (6).
        let decoded = decode_logs(
            &[
                redeemed(6, PAYER, PAYER, ROOT_AUTHORITY),
                redeemed(3, ACCOUNT, PAYER, B256::repeat_byte(1)),
                redeemed(4, ACCOUNT, ACCOUNT, ROOT_AUTHORITY),
            ],
            1,
            9,
            &watched,
        )
        .unwrap();
        let found: Vec<(u64, u64, String)> = decoded
            .redemptions
            .iter()
            .map(|r| (r.first_log, r.position.event_index, r.delegator.clone()))
            .collect();
        assert_eq!(found, [(3, 4, lower_hex(ACCOUNT)), (6, 6, lower_hex(PAYER))]);
        assert!(
            decoded
                .redemptions
                .iter()
                .all(|r| r.execution == Execution::Unread)
        );
        assert!(matches!(
            decode_logs(&[redeemed(4, ACCOUNT, PAYER, ROOT_AUTHORITY)], 1, 9, &watched),
            Err(BadAnswer::Undecodable {
                event: "RedeemedDelegation",
                ..
            })
        ));
    }
}
