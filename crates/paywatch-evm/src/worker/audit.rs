//! Audits of final ranges already committed: each range is read again — cross-checked
//! with the verifier, or from every block's receipts — and compared with what the store
//! holds, payment by payment and kept transfer by kept transfer. A payment the chain has
//! and the store lacks, one the store holds and the chain does not, and either with other
//! facts, are differences, each with its evidence from both sides; so is a transfer the
//! chain has that ingestion would have kept (a refund a provider left out).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use alloy::primitives::Address;
use paywatch_core::PaymentMethod;
use paywatch_core::config::{StartBlock, Verification};
use paywatch_core::ids::lower_hex;
use paywatch_core::records::{
    AuditFinding, Batch, FindingSubject, PaymentKey, PaymentRecord, RangeRepair, TransferKey, TransferRecord,
};
use paywatch_core::retention::RefundRoute;
use paywatch_core::state::PaymentState;
use paywatch_store::StoredPayment;

use super::ranges::RangeRead;
use super::{EvmWorker, StepError};
use crate::rpc::RpcFault;

/// A payment's facts as an audit compares them (and its state, on the store's side).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PaymentFacts {
    /// Transaction hash.
    pub payment_id: String,
    /// Its number in the transaction.
    pub index_in_tx: u32,
    /// Block number.
    pub block_number: u64,
    /// Block hash.
    pub block_hash: String,
    /// Who paid.
    pub payer: String,
    /// Who was paid.
    pub pay_to: String,
    /// Exact amount, decimal.
    pub amount: String,
    /// Token contract.
    pub asset: String,
    /// How the money moved.
    pub method: PaymentMethod,
    /// The authorization's nonce, where the method has one.
    pub nonce: Option<String>,
    /// The stored state (store side only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<PaymentState>,
}

impl PaymentFacts {
    fn key(&self) -> (String, u32) {
        (self.payment_id.clone(), self.index_in_tx)
    }

    /// Whether the two name the same payment with the same facts (the state aside).
    fn agrees_with(&self, other: &Self) -> bool {
        Self {
            state: None,
            ..self.clone()
        } == Self {
            state: None,
            ..other.clone()
        }
    }
}

impl From<&PaymentRecord> for PaymentFacts {
    fn from(p: &PaymentRecord) -> Self {
        Self {
            payment_id: p.payment_id.clone(),
            index_in_tx: p.index_in_tx,
            block_number: p.transfer.block_number,
            block_hash: p.transfer.block_hash.clone(),
            payer: p.payer.clone(),
            pay_to: p.pay_to.clone(),
            amount: p.amount.to_string(),
            asset: p.asset.clone(),
            method: p.method,
            nonce: p.nonce.clone(),
            state: None,
        }
    }
}

impl From<&StoredPayment> for PaymentFacts {
    fn from(p: &StoredPayment) -> Self {
        Self {
            payment_id: p.payment_id.clone(),
            index_in_tx: p.index_in_tx,
            block_number: p.block_number,
            block_hash: p.block_hash.clone(),
            payer: p.payer.clone(),
            pay_to: p.pay_to.clone(),
            amount: p.amount.clone(),
            asset: p.asset.clone(),
            method: p.method,
            nonce: p.nonce.clone(),
            state: Some(p.state),
        }
    }
}

/// A token transfer's facts as an audit compares them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TransferFacts {
    /// Transaction hash.
    pub tx: String,
    /// Log index in the block.
    pub event_index: u64,
    /// Block number.
    pub block_number: u64,
    /// Block hash.
    pub block_hash: String,
    /// Token contract.
    pub token: String,
    /// Sender.
    pub from: String,
    /// Recipient.
    pub to: String,
    /// Exact amount, decimal.
    pub amount: String,
}

impl From<&TransferRecord> for TransferFacts {
    fn from(t: &TransferRecord) -> Self {
        Self {
            tx: t.position.tx_id.clone(),
            event_index: t.position.event_index,
            block_number: t.position.block_number,
            block_hash: t.position.block_hash.clone(),
            token: t.token.clone(),
            from: t.from.clone(),
            to: t.to.clone(),
            amount: t.value.to_string(),
        }
    }
}

impl TransferFacts {
    /// The refund route the transfer runs on.
    fn route(&self) -> RefundRoute {
        RefundRoute {
            from: self.from.clone(),
            to: self.to.clone(),
            asset: self.token.clone(),
        }
    }
}

/// One way the store and the chain disagree, with what each side holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "difference", rename_all = "snake_case")]
pub enum Difference {
    /// A payment on chain that the store does not hold (a provider left it out).
    MissingPayment {
        /// The chain's payment.
        chain: PaymentFacts,
    },
    /// A payment the store holds (not dropped) that the chain does not have (made up).
    MadeUpPayment {
        /// The stored payment.
        store: PaymentFacts,
    },
    /// A payment both hold, with other facts.
    DifferingPayment {
        /// The stored payment.
        store: PaymentFacts,
        /// The chain's.
        chain: PaymentFacts,
    },
    /// A transfer the store kept that the chain does not have (a refund that never
    /// happened, say).
    MadeUpTransfer {
        /// The stored transfer.
        store: TransferFacts,
    },
    /// A transfer both hold, with other facts.
    DifferingTransfer {
        /// The stored transfer.
        store: TransferFacts,
        /// The chain's.
        chain: TransferFacts,
    },
    /// A transfer on chain the store should hold and lacks: the transfer of a stored
    /// payment, or one on the refund route of a payment stored in an earlier block (a
    /// refund a provider left out).
    MissingTransfer {
        /// The chain's transfer.
        chain: TransferFacts,
    },
}

impl Difference {
    /// The finding this difference is recorded as: what it names, its refund route (a
    /// missing transfer's), and its JSON line, as `paywatch audit` prints it.
    pub fn finding(&self) -> AuditFinding {
        let (subject, tx_id, position, block_number) = self.subject();
        AuditFinding {
            subject,
            tx_id: tx_id.to_string(),
            position,
            block_number,
            refund_route: self.refund_route(),
            difference: self.to_json(),
        }
    }

    /// The JSON line `paywatch audit` prints.
    fn to_json(&self) -> String {
        // Strings, numbers and enums of unit variants only: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_else(|error| format!("{{\"unprintable\":\"{error}\"}}"))
    }

    /// What the difference names — a payment (its id and index) or a transfer (its
    /// transaction and log index) — and its block.
    fn subject(&self) -> (FindingSubject, &str, u64, u64) {
        match self {
            Self::MissingPayment { chain: p }
            | Self::MadeUpPayment { store: p }
            | Self::DifferingPayment { store: p, .. } => (
                FindingSubject::Payment,
                &p.payment_id,
                u64::from(p.index_in_tx),
                p.block_number,
            ),
            Self::MadeUpTransfer { store: t }
            | Self::DifferingTransfer { store: t, .. }
            | Self::MissingTransfer { chain: t } => {
                (FindingSubject::Transfer, &t.tx, t.event_index, t.block_number)
            }
        }
    }

    /// A transfer the store lacks: the refund route it runs on (the payments on it before
    /// it may show a refunded sum that is wrong).
    fn refund_route(&self) -> Option<RefundRoute> {
        match self {
            Self::MissingTransfer { chain } => Some(chain.route()),
            _ => None,
        }
    }
}

/// Whether an audit only reports, or also repairs what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditMode {
    /// Report the differences; change nothing.
    Report,
    /// Report them and make the store hold what the chain holds (`--repair`).
    Repair,
}

/// How auditing one range ended.
#[derive(Debug)]
pub enum RangeAudit {
    /// Read and compared: the differences found, and the logs read.
    Compared {
        /// Every difference, in chain order of payments, then of transfers.
        differences: Vec<Difference>,
        /// Logs read from the chain.
        logs: u64,
        /// Whether the differences were repaired ([`AuditMode::Repair`]).
        repaired: bool,
    },
    /// The node refused the range as too large: audit smaller ranges.
    Refused(RpcFault),
    /// The chain moved under the read (final blocks should not): read again.
    ChainMoved,
}

impl EvmWorker {
    /// Reads every block's logs from its receipts instead of `eth_getLogs`: an audit's
    /// source when no verifier is configured.
    pub fn reading_receipts(mut self) -> Self {
        self.reader.from_receipts = true;
        self
    }

    /// The last block an audit may read: committed for every token and final by the
    /// network's rule; `None` while no such block exists.
    pub async fn audit_limit(&self) -> Result<Option<u64>, StepError> {
        let committed = self
            .store
            .cursors(&self.network)
            .await?
            .iter()
            .filter(|c| self.config.tokens.iter().any(|t| t.address == c.token))
            .map(|c| c.next_block)
            .min()
            .and_then(|next| next.checked_sub(1));
        let head = self.reader.rpc.block_number().await?;
        let (final_block, _) = self.final_block(head).await?;
        Ok(committed.zip(final_block).map(|(c, f)| c.min(f)))
    }

    /// The tokens read at block `from`: those whose start block is at or below it (a token
    /// starting at `latest` counts as read from wherever an audit starts).
    fn tokens_read_at(&self, from: u64) -> Vec<Address> {
        self.config
            .tokens
            .iter()
            .filter(|t| match t.start_block {
                StartBlock::Number(start) => start <= from,
                StartBlock::Latest => true,
            })
            .filter_map(|t| t.address.evm())
            .collect()
    }

    /// Reads `from..=to` again and compares it with the store (the range must not cross
    /// a token's start block; see [`EvmWorker::audit_limit`] for how far it may reach);
    /// with [`AuditMode::Repair`], makes the store hold what the chain holds there, in one
    /// transaction, before answering.
    pub async fn audit_range(&self, from: u64, to: u64, mode: AuditMode) -> Result<RangeAudit, StepError> {
        let tokens = self.tokens_read_at(from);
        let read = match self.reader.read_range(from, to, &tokens).await? {
            RangeRead::Read(read) => read,
            RangeRead::Refused(fault) => return Ok(RangeAudit::Refused(fault)),
            RangeRead::ChainMoved => return Ok(RangeAudit::ChainMoved),
        };
        let watched: Vec<String> = tokens.iter().map(lower_hex).collect();
        let stored_payments: Vec<PaymentFacts> = self
            .store
            .payments_in_blocks(&self.network, from, to)
            .await?
            .iter()
            .filter(|p| p.state != PaymentState::Dropped && watched.contains(&p.asset))
            .map(PaymentFacts::from)
            .collect();
        let stored_transfers: Vec<TransferFacts> = self
            .store
            .transfers_in_blocks(&self.network, from, to)
            .await?
            .iter()
            .filter(|t| watched.contains(&t.token))
            .map(TransferFacts::from)
            .collect();
        let chain_payments: BTreeMap<(String, u32), PaymentFacts> = read
            .payments
            .iter()
            .map(|p| {
                let facts = PaymentFacts::from(p);
                (facts.key(), facts)
            })
            .collect();
        let chain_transfers: BTreeMap<(String, u64), TransferFacts> = read
            .decoded
            .transfers
            .iter()
            .map(|t| {
                (
                    (t.position.tx_id.clone(), t.position.event_index),
                    TransferFacts::from(t),
                )
            })
            .collect();
        let mut differences = compare(
            &stored_payments,
            &chain_payments,
            &stored_transfers,
            &chain_transfers,
        );
        let unkept = self
            .unkept_transfers(
                &read.payments,
                &stored_payments,
                &stored_transfers,
                &chain_transfers,
            )
            .await?;
        differences.extend(
            unkept
                .into_iter()
                .map(|chain| Difference::MissingTransfer { chain }),
        );
        let logs = read.logs_read as u64;
        let repaired = mode == AuditMode::Repair && !differences.is_empty();
        if repaired {
            let named: Vec<TransferRecord> = read
                .decoded
                .transfers
                .iter()
                .filter(|t| {
                    differences.iter().any(|d| match d {
                        Difference::MissingTransfer { chain }
                        | Difference::DifferingTransfer { chain, .. } => {
                            chain.tx == t.position.tx_id && chain.event_index == t.position.event_index
                        }
                        _ => false,
                    })
                })
                .cloned()
                .collect();
            let (batch, _) = self.batch_of(*read).await?;
            let repair = repair_of(batch, named, &differences);
            let announce = self.config.verification == Verification::Lagging;
            let window = self.config.refund_window_secs();
            self.store
                .repair_range(&self.network, &repair, window, announce)
                .await?;
        }
        Ok(RangeAudit::Compared {
            differences,
            logs,
            repaired,
        })
    }

    /// The chain's transfers the store should hold and lacks, in chain order: a stored
    /// payment's own transfer, one on the refund route of a payment stored in an earlier
    /// block — ingestion kept such a transfer whatever the batch boundaries — or one into
    /// or out of a kept wallet (`keep_transfers = "pay_to"`, never pruned). Not
    /// compared: a missing payment's transfer (the payment is the difference), and
    /// transfers at or below the pruning horizon (kept candidates there may be pruned).
    async fn unkept_transfers(
        &self,
        chain_payments: &[PaymentRecord],
        stored_payments: &[PaymentFacts],
        stored_transfers: &[TransferFacts],
        chain_transfers: &BTreeMap<(String, u64), TransferFacts>,
    ) -> Result<Vec<TransferFacts>, StepError> {
        let stored: HashSet<(&str, u64)> = stored_transfers
            .iter()
            .map(|t| (t.tx.as_str(), t.event_index))
            .collect();
        let stored_ids: HashSet<(&str, u32)> = stored_payments
            .iter()
            .map(|p| (p.payment_id.as_str(), p.index_in_tx))
            .collect();
        // The transfer of each chain payment, and whether the store holds that payment.
        let moved: HashMap<(&str, u64), bool> = chain_payments
            .iter()
            .map(|p| {
                let held = stored_ids.contains(&(p.payment_id.as_str(), p.index_in_tx));
                ((p.transfer.tx_id.as_str(), p.transfer.event_index), held)
            })
            .collect();
        let kept_wallets = self.config.kept_wallets();
        let of_kept_wallet = |t: &TransferFacts| kept_wallets.iter().any(|w| *w == t.from || *w == t.to);
        let lacking: Vec<&TransferFacts> = chain_transfers
            .iter()
            .filter(|((tx, index), _)| !stored.contains(&(tx.as_str(), *index)))
            .map(|(_, t)| t)
            .collect();
        let routes: Vec<RefundRoute> = lacking
            .iter()
            .filter(|t| !moved.contains_key(&(t.tx.as_str(), t.event_index)) && !of_kept_wallet(t))
            .map(|t| t.route())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let (first_payments, pruned_to) = if routes.is_empty() {
            (HashMap::new(), None)
        } else {
            (
                self.store
                    .first_payments_on_routes(&self.network, &routes)
                    .await?,
                self.store.transfers_pruned_to(&self.network).await?,
            )
        };
        let mut unkept: Vec<TransferFacts> = lacking
            .into_iter()
            .filter(|t| match moved.get(&(t.tx.as_str(), t.event_index)) {
                Some(held) => *held,
                None if of_kept_wallet(t) => true,
                None => {
                    first_payments
                        .get(&t.route())
                        .is_some_and(|first| *first < t.block_number)
                        && pruned_to.is_none_or(|pruned| t.block_number > pruned)
                }
            })
            .cloned()
            .collect();
        unkept.sort_by(|a, b| {
            (a.block_number, &a.tx, a.event_index).cmp(&(b.block_number, &b.tx, b.event_index))
        });
        Ok(unkept)
    }
}

/// The repair that makes the store hold what `chain` (the range as ingestion would commit
/// it) holds where `differences` say it does not: the missing and differing payments
/// written from the chain's side with the kept transfers (`named`: the chain's side of
/// the transfer differences, kept or not), made-up payments refuted, made-up and
/// differing transfers deleted, and the refunds of each route a difference touches tied
/// again from the difference's block.
fn repair_of(mut chain: Batch, named: Vec<TransferRecord>, differences: &[Difference]) -> RangeRepair {
    let key = |p: &PaymentFacts| PaymentKey {
        payment_id: p.payment_id.clone(),
        index_in_tx: p.index_in_tx,
    };
    let transfer_key = |t: &TransferFacts| TransferKey {
        tx_id: t.tx.clone(),
        event_index: t.event_index,
    };
    let payment_route = |p: &PaymentFacts| {
        (
            RefundRoute {
                from: p.pay_to.clone(),
                to: p.payer.clone(),
                asset: p.asset.clone(),
            },
            p.block_number,
        )
    };
    let transfer_route = |t: &TransferFacts| (t.route(), t.block_number);
    let mut repair = RangeRepair::default();
    let mut written: Vec<PaymentKey> = Vec::new();
    for difference in differences {
        repair.findings.push(difference.finding());
        match difference {
            Difference::MissingPayment { chain } => {
                written.push(key(chain));
                repair.routes.push(payment_route(chain));
            }
            Difference::MadeUpPayment { store } => {
                repair.refuted.push(key(store));
                repair.routes.push(payment_route(store));
            }
            Difference::DifferingPayment { store, chain } => {
                written.push(key(chain));
                repair.corrected.push(key(chain));
                repair.routes.extend([payment_route(store), payment_route(chain)]);
            }
            Difference::MadeUpTransfer { store } => {
                repair.deleted_transfers.push(transfer_key(store));
                repair.routes.push(transfer_route(store));
            }
            Difference::DifferingTransfer { store, chain } => {
                repair.deleted_transfers.push(transfer_key(store));
                repair
                    .routes
                    .extend([transfer_route(store), transfer_route(chain)]);
            }
            Difference::MissingTransfer { chain } => repair.routes.push(transfer_route(chain)),
        }
    }
    chain.payments.retain(|p| {
        written
            .iter()
            .any(|k| k.payment_id == p.payment_id && k.index_in_tx == p.index_in_tx)
    });
    for transfer in named {
        let kept = chain.transfers.iter().any(|t| {
            t.position.tx_id == transfer.position.tx_id
                && t.position.event_index == transfer.position.event_index
        });
        if !kept {
            chain.transfers.push(transfer);
        }
    }
    chain.blocks.clear();
    repair.chain = chain;
    repair
}

/// The differences between what the store holds and what the chain has, payments first
/// (in chain order), then transfers.
fn compare(
    stored_payments: &[PaymentFacts],
    chain_payments: &BTreeMap<(String, u32), PaymentFacts>,
    stored_transfers: &[TransferFacts],
    chain_transfers: &BTreeMap<(String, u64), TransferFacts>,
) -> Vec<Difference> {
    let stored: BTreeMap<(String, u32), &PaymentFacts> =
        stored_payments.iter().map(|p| (p.key(), p)).collect();
    // Each payment difference with its place in the chain: block, transaction, index.
    let mut payments: Vec<((u64, String, u32), Difference)> = Vec::new();
    let place = |p: &PaymentFacts| (p.block_number, p.payment_id.clone(), p.index_in_tx);
    for (key, chain) in chain_payments {
        match stored.get(key) {
            None => payments.push((place(chain), Difference::MissingPayment { chain: chain.clone() })),
            Some(store) if !store.agrees_with(chain) => payments.push((
                place(chain),
                Difference::DifferingPayment {
                    store: (*store).clone(),
                    chain: chain.clone(),
                },
            )),
            Some(_) => {}
        }
    }
    for (key, store) in &stored {
        if !chain_payments.contains_key(key) {
            payments.push((
                place(store),
                Difference::MadeUpPayment {
                    store: (*store).clone(),
                },
            ));
        }
    }
    payments.sort_by(|a, b| a.0.cmp(&b.0));
    let mut differences: Vec<Difference> = payments.into_iter().map(|(_, d)| d).collect();
    for store in stored_transfers {
        match chain_transfers.get(&(store.tx.clone(), store.event_index)) {
            None => differences.push(Difference::MadeUpTransfer { store: store.clone() }),
            Some(chain) if chain != store => differences.push(Difference::DifferingTransfer {
                store: store.clone(),
                chain: chain.clone(),
            }),
            Some(_) => {}
        }
    }
    differences
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payment(tx: &str, amount: &str) -> PaymentFacts {
        PaymentFacts {
            payment_id: tx.into(),
            index_in_tx: 0,
            block_number: 7,
            block_hash: "0xb7".into(),
            payer: "0xpayer".into(),
            pay_to: "0xseller".into(),
            amount: amount.into(),
            asset: "0xtoken".into(),
            method: PaymentMethod::Eip3009,
            nonce: Some("0x01".into()),
            state: None,
        }
    }

    fn transfer(tx: &str, index: u64) -> TransferFacts {
        TransferFacts {
            tx: tx.into(),
            event_index: index,
            block_number: 7,
            block_hash: "0xb7".into(),
            token: "0xtoken".into(),
            from: "0xseller".into(),
            to: "0xpayer".into(),
            amount: "5".into(),
        }
    }

    #[test]
    fn finds_what_one_side_lacks_and_what_differs_but_not_the_state() {
        let paid = PaymentFacts {
            state: Some(PaymentState::Paid),
            ..payment("0xa", "10")
        };
        let made_up = PaymentFacts {
            state: Some(PaymentState::Paid),
            ..payment("0xc", "30")
        };
        let chain: BTreeMap<_, _> = [payment("0xa", "10"), payment("0xb", "20"), payment("0xd", "40")]
            .into_iter()
            .map(|p| (p.key(), p))
            .collect();
        let stored = [paid, made_up.clone(), payment("0xd", "41")];
        let chain_transfers: BTreeMap<_, _> = [(("0xa".to_string(), 1), transfer("0xa", 1))].into();
        let stored_transfers = [transfer("0xa", 1), transfer("0xe", 3)];
        let differences = compare(&stored, &chain, &stored_transfers, &chain_transfers);
        assert_eq!(
            differences,
            vec![
                Difference::MissingPayment {
                    chain: payment("0xb", "20")
                },
                Difference::MadeUpPayment { store: made_up },
                Difference::DifferingPayment {
                    store: payment("0xd", "41"),
                    chain: payment("0xd", "40")
                },
                Difference::MadeUpTransfer {
                    store: transfer("0xe", 3)
                },
            ]
        );
        let json = serde_json::to_value(&differences[0]).unwrap();
        assert_eq!(json["difference"], "missing_payment");
        assert_eq!(json["chain"]["method"], "eip3009");
        assert!(json["chain"].get("state").is_none());
    }
}
