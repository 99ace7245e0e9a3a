//! The pairing rules for x402 payments on EVM chains.
//!
//! **EIP-3009.** `transferWithAuthorization` (and `receiveWithAuthorization`) emit
//! `AuthorizationUsed(authorizer, nonce)` and then the `Transfer` it releases, from
//! the same token contract, in the same transaction. An authorization is paired with
//! the first not-yet-paired `Transfer` after it, in log order, in the same transaction,
//! on the same token, whose sender is the authorizer. The pair is one payment whose id
//! is the transaction hash. Unpaired transfers stay plain transfers; an unpaired
//! authorization is not a payment.
//!
//! A payment's `index_in_tx` is its authorization's position among *every*
//! `AuthorizationUsed` log of its transaction, whichever contract emitted it: a property
//! of the transaction, so a token added to the configuration later never renumbers a
//! stored payment (its authorizations were counted all along).
//!
//! **Permit2 (x402's exact and upto proxies).** The proxy calls Permit2's
//! `permitWitnessTransferFrom`, whose token `Transfer(owner → witness.to)` is the last log
//! before the proxy's own `Settled()` or `SettledWithPermit()`: nothing else is emitted in
//! between. A watched proxy's settlement log and the watched-token `Transfer` right before
//! it, in the same transaction, are one payment (payer = the transfer's sender); a
//! settlement whose previous log is not a watched-token transfer moved another token and is
//! not a payment. Its number is the count of every `AuthorizationUsed` log of the
//! transaction plus its position among every `Settled()`/`SettledWithPermit()` log of the
//! transaction, whichever contract emitted them: again a property of the transaction, and
//! the numbers of EIP-3009 payments stored before Permit2 was read stay what they were.
//!
//! **ERC-7710 (delegations).** A delegation manager's `redeemDelegations` has the root
//! delegator's account execute each redemption, then logs one `RedeemedDelegation` per
//! delegation of each redemption's chain, the root one last: the execution's `Transfer`
//! comes before its redemption's logs. A watched manager's redemption and a watched-token
//! `Transfer` out of its root delegator before the redemption's first log, in the same
//! transaction, are one payment (payer = the delegator). Where the redeeming call was read,
//! the transfer must be the one it executed (token, recipient, amount), and a redemption
//! that executed anything but one ERC-20 `transfer` is not a payment; unread, the first
//! such transfer not yet paired is taken. Its number is the count of every
//! `AuthorizationUsed` and every `Settled()`/`SettledWithPermit()` log of the transaction
//! plus the position of its root log among every `RedeemedDelegation` log of the
//! transaction, whichever contract emitted them.

use std::collections::{HashMap, HashSet};

use crate::method::PaymentMethod;
use crate::records::{
    AuthorizationRecord, Execution, PaymentRecord, ProxySettlementRecord, RedemptionRecord, TransferRecord,
};

/// The block-level log index of every log of one event (`AuthorizationUsed`, or the
/// proxies' `Settled()`/`SettledWithPermit()`) of each transaction, whichever contract
/// emitted it, by transaction id.
pub type TxAuthorizations = HashMap<String, Vec<u64>>;

/// The node's list of every log of an event lacks one its watched contracts' logs named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the {event} logs of every contract in {tx} lack the one at index {log_index}, which the watched contracts' logs hold"
)]
pub struct MissingAuthorization {
    /// The event: `AuthorizationUsed` or `Settled`.
    pub event: &'static str,
    /// The transaction.
    pub tx: String,
    /// The log's index.
    pub log_index: u64,
}

/// Every log of one event of each transaction, sorted once, to number payments by.
struct SortedLogs<'a> {
    event: &'static str,
    by_tx: HashMap<&'a str, Vec<u64>>,
}

impl<'a> SortedLogs<'a> {
    fn new(every: &'a TxAuthorizations, event: &'static str) -> Self {
        let by_tx = every
            .iter()
            .map(|(tx, logs)| {
                let mut logs = logs.clone();
                logs.sort_unstable();
                (tx.as_str(), logs)
            })
            .collect();
        Self { event, by_tx }
    }

    /// The position of `log_index` among the transaction's logs of the event.
    fn position(&self, tx: &str, log_index: u64) -> Result<usize, MissingAuthorization> {
        self.by_tx
            .get(tx)
            .and_then(|logs| logs.binary_search(&log_index).ok())
            .ok_or_else(|| MissingAuthorization {
                event: self.event,
                tx: tx.to_string(),
                log_index,
            })
    }
}

/// Pairs authorizations with transfers and numbers each payment by its authorization's
/// position among `every[tx]`. Inputs may be in any order; the output is in chain
/// order (block, then log index).
pub fn pair_payments(
    authorizations: &[AuthorizationRecord],
    transfers: &[TransferRecord],
    every: &TxAuthorizations,
) -> Result<Vec<PaymentRecord>, MissingAuthorization> {
    let transfers_by_tx = by_transaction(transfers);

    let sorted = SortedLogs::new(every, "AuthorizationUsed");
    let mut ordered: Vec<&AuthorizationRecord> = authorizations.iter().collect();
    ordered.sort_by_key(|a| (a.position.block_number, a.position.event_index));

    let mut used: HashMap<(&str, u64), ()> = HashMap::new();
    let mut payments = Vec::new();
    for (i, auth) in ordered.iter().enumerate() {
        let tx = auth.position.tx_id.as_str();
        // A token emits an authorization's transfer after it and before its next
        // authorization in the transaction: when the node was asked only for some
        // transfers (a `pay_to` filter), a later transfer of the same payer never stands in
        // for one that was not read.
        // (A transaction's logs are contiguous in chain order.)
        let next_authorization = ordered[i + 1..]
            .iter()
            .take_while(|next| next.position.tx_id == auth.position.tx_id)
            .find(|next| next.token == auth.token)
            .map_or(u64::MAX, |next| next.position.event_index);
        let candidate = transfers_by_tx.get(tx).and_then(|list| {
            list.iter().copied().find(|t| {
                t.position.event_index > auth.position.event_index
                    && t.position.event_index < next_authorization
                    && t.token == auth.token
                    && t.from == auth.authorizer
                    && !used.contains_key(&(tx, t.position.event_index))
            })
        });
        if let Some(transfer) = candidate {
            let position = sorted.position(tx, auth.position.event_index)?;
            used.insert((tx, transfer.position.event_index), ());
            payments.push(PaymentRecord {
                nonce: Some(auth.nonce.clone()),
                ..PaymentRecord::paid_by(transfer, number(position, 0), PaymentMethod::Eip3009)
            });
        }
    }
    Ok(payments)
}

/// Which of `redemptions` may be payments: those with a transfer out of their delegator
/// before their logs that no rule paired into `taken` — the ones whose executions are worth
/// reading.
pub fn redemptions_that_may_pay<'a>(
    redemptions: &'a [RedemptionRecord],
    transfers: &[TransferRecord],
    taken: &[PaymentRecord],
) -> Vec<&'a RedemptionRecord> {
    let used = transfers_of(taken);
    let transfers_by_tx = by_transaction(transfers);
    redemptions
        .iter()
        .filter(|r| {
            made_by(r, &transfers_by_tx)
                .any(|t| !used.contains(&(t.position.tx_id.as_str(), t.position.event_index)))
        })
        .collect()
}

/// The transfers `redemption` may have made, whatever it executed: in its transaction, out
/// of its delegator, before its logs; in log order.
fn made_by<'a, 't>(
    redemption: &'a RedemptionRecord,
    transfers_by_tx: &'a HashMap<&str, Vec<&'t TransferRecord>>,
) -> impl Iterator<Item = &'t TransferRecord> + 'a {
    transfers_by_tx
        .get(redemption.position.tx_id.as_str())
        .into_iter()
        .flatten()
        .copied()
        .filter(|t| t.position.event_index < redemption.first_log && t.from == redemption.delegator)
}

/// The transfers `payments` moved, by transaction and log index.
fn transfers_of(payments: &[PaymentRecord]) -> HashSet<(&str, u64)> {
    payments
        .iter()
        .map(|p| (p.payment_id.as_str(), p.transfer.event_index))
        .collect()
}

/// Each transaction's transfers, in log order.
fn by_transaction(transfers: &[TransferRecord]) -> HashMap<&str, Vec<&TransferRecord>> {
    let mut by_tx: HashMap<&str, Vec<&TransferRecord>> = HashMap::new();
    for transfer in transfers {
        by_tx
            .entry(transfer.position.tx_id.as_str())
            .or_default()
            .push(transfer);
    }
    for list in by_tx.values_mut() {
        list.sort_by_key(|t| t.position.event_index);
    }
    by_tx
}

/// A payment's number from its position among its kind's logs and the count of the kinds
/// numbered before it (saturating: a transaction holds far fewer than 2^32 logs).
fn number(position: usize, before: usize) -> u32 {
    u32::try_from(position.saturating_add(before)).unwrap_or(u32::MAX)
}

/// Pairs watched proxies' settlement logs with the watched-token transfer right before
/// each, skipping transfers `eip3009` already paired, and numbers each payment after every
/// authorization of its transaction (`every_authorization`) by its position among every
/// settlement log of the transaction (`every_settlement`). The nonce (and upto's maximum)
/// are not in the logs: the caller reads them from the settling call.
pub fn pair_proxy_settlements(
    settlements: &[ProxySettlementRecord],
    transfers: &[TransferRecord],
    eip3009: &[PaymentRecord],
    every_authorization: &TxAuthorizations,
    every_settlement: &TxAuthorizations,
) -> Result<Vec<PaymentRecord>, MissingAuthorization> {
    let paired = transfers_of(eip3009);
    let by_position: HashMap<(&str, u64), &TransferRecord> = transfers
        .iter()
        .map(|t| ((t.position.tx_id.as_str(), t.position.event_index), t))
        .collect();
    let sorted = SortedLogs::new(every_settlement, "Settled");
    let mut ordered: Vec<&ProxySettlementRecord> = settlements.iter().collect();
    ordered.sort_by_key(|s| (s.position.block_number, s.position.event_index));
    let mut payments = Vec::new();
    for settlement in ordered {
        let tx = settlement.position.tx_id.as_str();
        let Some(previous) = settlement.position.event_index.checked_sub(1) else {
            continue;
        };
        let Some(transfer) = by_position.get(&(tx, previous)) else {
            continue;
        };
        if paired.contains(&(tx, previous)) {
            continue;
        }
        let position = sorted.position(tx, settlement.position.event_index)?;
        let authorizations = every_authorization.get(tx).map_or(0, Vec::len);
        payments.push(PaymentRecord::paid_by(
            transfer,
            number(position, authorizations),
            settlement.method,
        ));
    }
    Ok(payments)
}

/// Every settlement-marking log of each transaction, whichever contract emitted it, by
/// kind: what payments are numbered by.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EveryMarker {
    /// `AuthorizationUsed` logs.
    pub authorizations: TxAuthorizations,
    /// `Settled()` and `SettledWithPermit()` logs.
    pub settlements: TxAuthorizations,
    /// `RedeemedDelegation` logs.
    pub redemptions: TxAuthorizations,
}

/// Pairs watched delegation managers' redemptions with the transfers their executions
/// made, skipping transfers earlier rules (`taken`) paired, and numbers each payment after
/// every authorization and settlement log of its transaction by its root log's position
/// among every redemption log (see the module's rules).
pub fn pair_redemptions(
    redemptions: &[RedemptionRecord],
    transfers: &[TransferRecord],
    taken: &[PaymentRecord],
    every: &EveryMarker,
) -> Result<Vec<PaymentRecord>, MissingAuthorization> {
    let mut used = transfers_of(taken);
    let transfers_by_tx = by_transaction(transfers);
    let sorted = SortedLogs::new(&every.redemptions, "RedeemedDelegation");
    let mut ordered: Vec<&RedemptionRecord> = redemptions.iter().collect();
    ordered.sort_by_key(|r| (r.position.block_number, r.position.event_index));
    let mut payments = Vec::new();
    for redemption in ordered {
        let tx = redemption.position.tx_id.as_str();
        let executed = |t: &TransferRecord| match &redemption.execution {
            Execution::Unread => true,
            Execution::Transfer { token, to, amount } => {
                t.token == *token && t.to == *to && t.value == *amount
            }
            Execution::Other => false,
        };
        let candidate = made_by(redemption, &transfers_by_tx)
            .find(|t| !used.contains(&(tx, t.position.event_index)) && executed(t));
        let Some(transfer) = candidate else {
            continue;
        };
        let position = sorted.position(tx, redemption.position.event_index)?;
        let before =
            every.authorizations.get(tx).map_or(0, Vec::len) + every.settlements.get(tx).map_or(0, Vec::len);
        used.insert((tx, transfer.position.event_index));
        payments.push(PaymentRecord::paid_by(
            transfer,
            number(position, before),
            PaymentMethod::Erc7710,
        ));
    }
    Ok(payments)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::EventPosition;
    use alloy_primitives::U256;

    const USDC: &str = "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913";
    const OTHER: &str = "0x036cbd53842c5426634e7929541ec2318f3dcf7e";
    const PAYER: &str = "0x1111111111111111111111111111111111111111";
    const SELLER: &str = "0x2222222222222222222222222222222222222222";
    const FACILITATOR: &str = "0x3333333333333333333333333333333333333333";

    fn pos(tx: &str, index: u64) -> EventPosition {
        EventPosition {
            tx_id: tx.to_string(),
            event_index: index,
            block_number: 7,
            block_hash: "0xb7".to_string(),
            block_time: Some(1_700_000_000),
        }
    }

    fn auth(tx: &str, index: u64, token: &str, authorizer: &str, nonce: &str) -> AuthorizationRecord {
        AuthorizationRecord {
            position: pos(tx, index),
            token: token.to_string(),
            authorizer: authorizer.to_string(),
            nonce: nonce.to_string(),
        }
    }

    fn transfer(tx: &str, index: u64, token: &str, from: &str, to: &str, value: u64) -> TransferRecord {
        TransferRecord {
            position: pos(tx, index),
            token: token.to_string(),
            from: from.to_string(),
            to: to.to_string(),
            value: U256::from(value),
            memo: None,
        }
    }

    /// Pairs with transactions that hold exactly the given authorizations.
    fn pair(authorizations: &[AuthorizationRecord], transfers: &[TransferRecord]) -> Vec<PaymentRecord> {
        let mut every = TxAuthorizations::new();
        for a in authorizations {
            every
                .entry(a.position.tx_id.clone())
                .or_default()
                .push(a.position.event_index);
        }
        pair_payments(authorizations, transfers, &every).unwrap()
    }

    #[test]
    fn pairs_authorization_with_following_transfer() {
        let payments = pair(
            &[auth("0xaa", 3, USDC, PAYER, "0x01")],
            &[transfer("0xaa", 4, USDC, PAYER, SELLER, 10_000)],
        );
        assert_eq!(payments.len(), 1);
        let p = &payments[0];
        assert_eq!(p.payment_id, "0xaa");
        assert_eq!((p.payer.as_str(), p.pay_to.as_str()), (PAYER, SELLER));
        assert_eq!(p.amount, U256::from(10_000u64));
        assert_eq!(p.asset, USDC);
        assert_eq!(p.nonce.as_deref(), Some("0x01"));
        assert_eq!(p.index_in_tx, 0);
        assert_eq!(p.transfer.event_index, 4);
    }

    #[test]
    fn plain_transfer_is_not_a_payment() {
        assert!(pair(&[], &[transfer("0xaa", 0, USDC, PAYER, SELLER, 5)]).is_empty());
    }

    #[test]
    fn ignores_transfers_of_other_tokens_senders_txs_or_earlier_logs() {
        let payments = pair(
            &[auth("0xaa", 5, USDC, PAYER, "0x01")],
            &[
                transfer("0xaa", 4, USDC, PAYER, SELLER, 1),
                transfer("0xaa", 6, OTHER, PAYER, SELLER, 2),
                transfer("0xaa", 7, USDC, FACILITATOR, SELLER, 3),
                transfer("0xbb", 8, USDC, PAYER, SELLER, 4),
            ],
        );
        assert!(payments.is_empty());
    }

    #[test]
    fn batch_settlement_pairs_each_authorization_once() {
        let payments = pair(
            &[
                auth("0xaa", 0, USDC, PAYER, "0x01"),
                auth("0xaa", 2, USDC, PAYER, "0x02"),
            ],
            &[
                transfer("0xaa", 3, USDC, PAYER, SELLER, 200),
                transfer("0xaa", 1, USDC, PAYER, SELLER, 100),
            ],
        );
        assert_eq!(payments.len(), 2);
        assert_eq!(
            (payments[0].index_in_tx, payments[0].amount),
            (0, U256::from(100u64))
        );
        assert_eq!(
            (payments[1].index_in_tx, payments[1].amount),
            (1, U256::from(200u64))
        );
        assert_eq!(payments[1].nonce.as_deref(), Some("0x02"));
    }

    #[test]
    fn a_transfer_not_read_is_never_replaced_by_the_next_authorizations() {
        // A batch where the payer pays another seller first (that transfer was not read:
        // the node was asked only for transfers to SELLER), then SELLER: the first
        // authorization has no transfer, the second pairs with its own.
        let payments = pair(
            &[
                auth("0xaa", 0, USDC, PAYER, "0x01"),
                auth("0xaa", 2, USDC, PAYER, "0x02"),
            ],
            &[transfer("0xaa", 3, USDC, PAYER, SELLER, 200)],
        );
        assert_eq!(payments.len(), 1);
        assert_eq!(payments[0].nonce.as_deref(), Some("0x02"));
        assert_eq!(
            (payments[0].index_in_tx, payments[0].amount),
            (1, U256::from(200u64))
        );
    }

    #[test]
    fn authorization_without_transfer_is_not_a_payment() {
        assert!(pair(&[auth("0xaa", 0, USDC, PAYER, "0x01")], &[]).is_empty());
    }

    #[test]
    fn numbers_count_every_authorization_of_the_transaction_watched_or_not() {
        // The transaction holds an authorization of an unwatched token (log 1) before
        // ours (log 3): ours is payment 1 whether or not that token is watched.
        let every: TxAuthorizations = [("0xaa".to_string(), vec![3, 1])].into();
        let payments = pair_payments(
            &[auth("0xaa", 3, USDC, PAYER, "0x01")],
            &[transfer("0xaa", 4, USDC, PAYER, SELLER, 10)],
            &every,
        )
        .unwrap();
        assert_eq!(payments[0].index_in_tx, 1);
        let both = pair_payments(
            &[
                auth("0xaa", 1, OTHER, PAYER, "0x02"),
                auth("0xaa", 3, USDC, PAYER, "0x01"),
            ],
            &[
                transfer("0xaa", 2, OTHER, PAYER, SELLER, 20),
                transfer("0xaa", 4, USDC, PAYER, SELLER, 10),
            ],
            &every,
        )
        .unwrap();
        let numbers: Vec<(u32, &str)> = both.iter().map(|p| (p.index_in_tx, p.asset.as_str())).collect();
        assert_eq!(numbers, vec![(0, OTHER), (1, USDC)]);
    }

    #[test]
    fn an_authorization_missing_from_the_full_list_is_refused() {
        let every: TxAuthorizations = [("0xaa".to_string(), vec![1])].into();
        let refused = pair_payments(
            &[auth("0xaa", 3, USDC, PAYER, "0x01")],
            &[transfer("0xaa", 4, USDC, PAYER, SELLER, 10)],
            &every,
        );
        assert_eq!(
            refused,
            Err(MissingAuthorization {
                event: "AuthorizationUsed",
                tx: "0xaa".to_string(),
                log_index: 3
            })
        );
    }

    fn settled(tx: &str, index: u64, method: PaymentMethod) -> ProxySettlementRecord {
        ProxySettlementRecord {
            position: pos(tx, index),
            proxy: "0x402085c248eea27d92e8b30b2c58ed07f9e20001".to_string(),
            method,
        }
    }

    #[test]
    fn a_proxy_settlement_pairs_with_the_transfer_right_before_it() {
        // One EIP-3009 payment (logs 0, 1), then two Permit2 settlements (transfer, Settled)
        // at logs 3-4 and 6-7; an unwatched contract's Settled() at log 9 counts in numbering.
        let eip3009 = pair(
            &[auth("0xaa", 0, USDC, PAYER, "0x01")],
            &[transfer("0xaa", 1, USDC, PAYER, SELLER, 5)],
        );
        let transfers = [
            transfer("0xaa", 1, USDC, PAYER, SELLER, 5),
            transfer("0xaa", 3, USDC, PAYER, SELLER, 30),
            transfer("0xaa", 6, USDC, FACILITATOR, SELLER, 60),
        ];
        let every_authorization: TxAuthorizations = [("0xaa".to_string(), vec![0])].into();
        let every_settlement: TxAuthorizations = [("0xaa".to_string(), vec![9, 7, 4])].into();
        let payments = pair_proxy_settlements(
            &[
                settled("0xaa", 7, PaymentMethod::Upto),
                settled("0xaa", 4, PaymentMethod::Permit2),
            ],
            &transfers,
            &eip3009,
            &every_authorization,
            &every_settlement,
        )
        .unwrap();
        let facts: Vec<(u32, &str, u64, PaymentMethod)> = payments
            .iter()
            .map(|p| (p.index_in_tx, p.payer.as_str(), p.transfer.event_index, p.method))
            .collect();
        assert_eq!(
            facts,
            vec![
                (1, PAYER, 3, PaymentMethod::Permit2),
                (2, FACILITATOR, 6, PaymentMethod::Upto)
            ]
        );
        assert_eq!(payments[0].amount, U256::from(30u64));
        assert_eq!(payments[0].nonce, None);
    }

    #[test]
    fn a_settlement_after_anything_but_an_unpaired_watched_transfer_is_not_a_payment() {
        let every: TxAuthorizations = [("0xaa".to_string(), vec![0, 2, 5])].into();
        let eip3009 = pair(
            &[auth("0xaa", 3, USDC, PAYER, "0x01")],
            &[transfer("0xaa", 4, USDC, PAYER, SELLER, 5)],
        );
        let payments = pair_proxy_settlements(
            // Log 0 has no log before it; log 2 follows an unwatched token's transfer (log 1,
            // not read); log 5 follows the EIP-3009 payment's own transfer.
            &[
                settled("0xaa", 0, PaymentMethod::Permit2),
                settled("0xaa", 2, PaymentMethod::Permit2),
                settled("0xaa", 5, PaymentMethod::Permit2),
            ],
            &[transfer("0xaa", 4, USDC, PAYER, SELLER, 5)],
            &eip3009,
            &TxAuthorizations::new(),
            &every,
        )
        .unwrap();
        assert!(payments.is_empty());
    }

    #[test]
    fn a_settlement_missing_from_the_full_list_is_refused() {
        let refused = pair_proxy_settlements(
            &[settled("0xaa", 2, PaymentMethod::Permit2)],
            &[transfer("0xaa", 1, USDC, PAYER, SELLER, 5)],
            &[],
            &TxAuthorizations::new(),
            &TxAuthorizations::new(),
        );
        assert_eq!(
            refused,
            Err(MissingAuthorization {
                event: "Settled",
                tx: "0xaa".to_string(),
                log_index: 2
            })
        );
    }

    fn redemption(
        tx: &str,
        first_log: u64,
        root_log: u64,
        delegator: &str,
        execution: Execution,
    ) -> RedemptionRecord {
        RedemptionRecord {
            position: pos(tx, root_log),
            first_log,
            manager: FACILITATOR.to_string(),
            delegator: delegator.to_string(),
            execution,
        }
    }

    fn executed(to: &str, amount: u64) -> Execution {
        Execution::Transfer {
            token: USDC.to_string(),
            to: to.to_string(),
            amount: U256::from(amount),
        }
    }

    #[test]
    fn redemptions_pair_with_their_executions_transfers_and_number_the_same_whatever_was_read() {
        const OTHER_SELLER: &str = "0x4444444444444444444444444444444444444444";
        // One redeemDelegations call, two redemptions by PAYER's account: the executions'
        // transfers (logs 1, 2), then the logs of a one-delegation chain (3) and of a
        // two-delegation chain (4, 5: root last). A Permit2 settlement log came first (0).
        let every = EveryMarker {
            settlements: [("0xbb".to_string(), vec![0])].into(),
            redemptions: [("0xbb".to_string(), vec![3, 4, 5])].into(),
            ..EveryMarker::default()
        };
        let both = [
            transfer("0xbb", 1, USDC, PAYER, OTHER_SELLER, 10),
            transfer("0xbb", 2, USDC, PAYER, SELLER, 20),
        ];
        let facts = |payments: &[PaymentRecord]| -> Vec<(u32, String, U256)> {
            payments
                .iter()
                .map(|p| (p.index_in_tx, p.pay_to.clone(), p.amount))
                .collect()
        };
        let unread = [
            redemption("0xbb", 3, 3, PAYER, Execution::Unread),
            redemption("0xbb", 4, 5, PAYER, Execution::Unread),
        ];
        let read = [
            redemption("0xbb", 3, 3, PAYER, executed(OTHER_SELLER, 10)),
            redemption("0xbb", 4, 5, PAYER, executed(SELLER, 20)),
        ];
        let expected = vec![
            (1, OTHER_SELLER.to_string(), U256::from(10u64)),
            (3, SELLER.to_string(), U256::from(20u64)),
        ];
        assert_eq!(
            facts(&pair_redemptions(&unread, &both, &[], &every).unwrap()),
            expected
        );
        assert_eq!(
            facts(&pair_redemptions(&read, &both, &[], &every).unwrap()),
            expected
        );
        for p in pair_redemptions(&read, &both, &[], &every).unwrap() {
            assert_eq!(
                (p.method, p.payer.as_str(), p.nonce),
                (PaymentMethod::Erc7710, PAYER, None)
            );
        }
        // Only the transfers to SELLER were read (a `pay_to` filter): with the calls read,
        // SELLER's payment keeps its number.
        assert_eq!(
            facts(&pair_redemptions(&read, &both[1..], &[], &every).unwrap()),
            expected[1..]
        );
    }

    #[test]
    fn a_redemption_pairs_only_with_its_delegators_transfer_before_its_logs() {
        let every = EveryMarker {
            redemptions: [("0xbb".to_string(), vec![5])].into(),
            ..EveryMarker::default()
        };
        let pair_with = |transfers: &[TransferRecord], execution: Execution, taken: &[PaymentRecord]| {
            pair_redemptions(
                &[redemption("0xbb", 5, 5, PAYER, execution)],
                transfers,
                taken,
                &every,
            )
            .unwrap()
        };
        let paying = transfer("0xbb", 2, USDC, PAYER, SELLER, 20);
        assert_eq!(
            pair_with(std::slice::from_ref(&paying), Execution::Unread, &[]).len(),
            1
        );
        // Not a single `transfer`, another amount, another sender, after the logs, or
        // already another rule's payment: no payment.
        assert!(pair_with(std::slice::from_ref(&paying), Execution::Other, &[]).is_empty());
        assert!(pair_with(std::slice::from_ref(&paying), executed(SELLER, 21), &[]).is_empty());
        assert!(
            pair_with(
                &[transfer("0xbb", 2, USDC, FACILITATOR, SELLER, 20)],
                Execution::Unread,
                &[]
            )
            .is_empty()
        );
        assert!(
            pair_with(
                &[transfer("0xbb", 6, USDC, PAYER, SELLER, 20)],
                Execution::Unread,
                &[]
            )
            .is_empty()
        );
        let earlier = pair_with(std::slice::from_ref(&paying), Execution::Unread, &[]);
        assert!(pair_with(std::slice::from_ref(&paying), Execution::Unread, &earlier).is_empty());
        // A node whose list of every redemption log lacks the watched one is refused.
        let lacking = EveryMarker::default();
        assert!(
            pair_redemptions(
                &[redemption("0xbb", 5, 5, PAYER, Execution::Unread)],
                &[paying],
                &[],
                &lacking
            )
            .is_err()
        );
    }
}
