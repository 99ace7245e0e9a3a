//! The query views as protobuf messages, field for field.

use paywatch_query::{
    AuthorizationView, BatchAnswer, BatchItem, EscrowView, EventView, EvidenceView, Expectation, HistoryView,
    IntentView, ListedPayment, ListedTransfer, MismatchView, PaymentHistory, PaymentPage, PaymentView,
    ProofView, ReceiptProof, RefundView, ReviewPage, ReviewView, Totals, TotalsGroup, TransferPage,
};

use crate::proto;

impl From<PaymentView> for proto::Payment {
    fn from(v: PaymentView) -> Self {
        Self {
            network: v.network,
            payment: v.payment,
            index_in_tx: v.index_in_tx,
            payer: v.payer,
            pay_to: v.pay_to,
            amount: v.amount,
            asset: v.asset,
            asset_symbol: v.asset_symbol,
            asset_decimals: v.asset_decimals.map(u32::from),
            nonce: v.nonce,
            block_number: v.block_number,
            block_hash: v.block_hash,
            block_time: v.block_time,
            confirmations: v.confirmations,
            payment_state: v.payment_state.to_string(),
            refunded_amount: v.refunded_amount,
            refunds: v.refunds.into_iter().map(proto::Refund::from).collect(),
            intent: v.intent.map(proto::Intent::from),
            observed_at: v.observed_at,
            state_changed_at: v.state_changed_at,
            verified: v.verified,
            unverified_reason: v.unverified_reason,
            expectation: v.expectation.map(proto::Expectation::from),
            memo: v.memo,
            facilitator: v.facilitator,
            method: v.method.to_string(),
            max_amount: v.max_amount,
            fee_amount: v.fee_amount,
            nonce_unavailable: v.nonce_unavailable,
            captured_amount: v.captured_amount,
            held_amount: v.held_amount,
            released_amount: v.released_amount,
            escrow: v.escrow.map(proto::Escrow::from),
        }
    }
}

impl From<EscrowView> for proto::Escrow {
    fn from(e: EscrowView) -> Self {
        Self {
            escrow: e.escrow,
            operator: e.operator,
            pre_approval_expiry: e.pre_approval_expiry,
            authorization_expiry: e.authorization_expiry,
            refund_expiry: e.refund_expiry,
            min_fee_bps: u32::from(e.min_fee_bps),
            max_fee_bps: u32::from(e.max_fee_bps),
            fee_receiver: e.fee_receiver,
            salt: e.salt,
            events: e
                .events
                .into_iter()
                .map(|event| proto::EscrowEvent {
                    kind: event.kind.to_string(),
                    amount: event.amount,
                    fee_bps: event.fee_bps.map(u32::from),
                    fee_receiver: event.fee_receiver,
                    token_collector: event.token_collector,
                    tx: event.tx,
                    log_index: event.log_index,
                    block_number: event.block_number,
                    block_time: event.block_time,
                    is_final: event.is_final,
                })
                .collect(),
        }
    }
}

impl From<AuthorizationView> for proto::Authorization {
    fn from(v: AuthorizationView) -> Self {
        Self {
            network: v.network,
            asset: v.asset,
            payer: v.payer,
            nonce: v.nonce,
            status: v.status.to_string(),
            payment: v.payment.map(proto::Payment::from),
            checked_at_block: v.checked_at_block,
            message: v.message,
            kind: v.kind,
        }
    }
}

impl From<RefundView> for proto::Refund {
    fn from(r: RefundView) -> Self {
        Self {
            tx: r.tx,
            event_index: r.event_index,
            amount: r.amount,
            rule: r.rule.to_string(),
            block_number: r.block_number,
        }
    }
}

impl From<IntentView> for proto::Intent {
    fn from(i: IntentView) -> Self {
        Self {
            method: i.method,
            url: i.url,
            body_sha256: i.body_sha256,
            class: i.class,
            max_atomic: i.max_atomic,
        }
    }
}

impl From<Expectation> for proto::Expectation {
    fn from(e: Expectation) -> Self {
        Self {
            matches: e.matches,
            reasons: e.reasons,
            mismatches: e.mismatches.into_iter().map(proto::Mismatch::from).collect(),
        }
    }
}

impl From<MismatchView> for proto::Mismatch {
    fn from(m: MismatchView) -> Self {
        Self {
            fact: m.fact,
            chain: m.chain,
            expected: m.expected,
        }
    }
}

impl From<ListedPayment> for proto::ListedPayment {
    fn from(p: ListedPayment) -> Self {
        Self {
            network: p.network,
            payment: p.payment,
            index_in_tx: p.index_in_tx,
            block_number: p.block_number,
            block_time: p.block_time,
            payer: p.payer,
            pay_to: p.pay_to,
            asset: p.asset,
            asset_symbol: p.asset_symbol,
            asset_decimals: p.asset_decimals.map(u32::from),
            amount: p.amount,
            refunded_amount: p.refunded_amount,
            payment_state: p.payment_state.to_string(),
            memo: p.memo,
            facilitator: p.facilitator,
            method: p.method.to_string(),
            fee_amount: p.fee_amount,
            captured_amount: p.captured_amount,
            held_amount: p.held_amount,
            released_amount: p.released_amount,
            verified: p.verified,
        }
    }
}

impl From<PaymentPage> for proto::ListPaymentsResponse {
    fn from(page: PaymentPage) -> Self {
        Self {
            payments: page
                .payments
                .into_iter()
                .map(proto::ListedPayment::from)
                .collect(),
            next_cursor: page.next_cursor,
            has_more: page.has_more,
        }
    }
}

impl From<ReviewView> for proto::Review {
    fn from(r: ReviewView) -> Self {
        Self {
            network: r.network,
            payment: r.payment,
            index_in_tx: r.index_in_tx,
            message: r.message,
            signature: r.signature,
            wallet: r.wallet,
            payment_state: r.payment_state.to_string(),
            paywatch_state: r.paywatch_state.to_string(),
            refunded_amount: r.refunded_amount,
            block_number: r.block_number,
            block_hash: r.block_hash,
            log_index: r.log_index,
            observed_at: r.observed_at,
            state_since: r.state_since,
            recorded_at: r.recorded_at,
            proof: r.proof.map(|proof| (*proof).into()),
            evidence: r.evidence.map(|evidence| (*evidence).into()),
            proof_unavailable: r.proof_unavailable,
        }
    }
}

impl From<ReviewPage> for proto::ListReviewsResponse {
    fn from(page: ReviewPage) -> Self {
        Self {
            reviews: page.reviews.into_iter().map(proto::Review::from).collect(),
            next_cursor: page.next_cursor,
            has_more: page.has_more,
        }
    }
}

impl From<proto::PaymentLookup> for BatchItem {
    fn from(lookup: proto::PaymentLookup) -> Self {
        Self {
            network: lookup.network,
            payment: lookup.payment,
            index: lookup.index,
        }
    }
}

impl From<BatchItem> for proto::PaymentLookup {
    fn from(lookup: BatchItem) -> Self {
        Self {
            network: lookup.network,
            payment: lookup.payment,
            index: lookup.index,
        }
    }
}

impl From<Vec<BatchAnswer>> for proto::BatchGetPaymentsResponse {
    fn from(answers: Vec<BatchAnswer>) -> Self {
        Self {
            results: answers
                .into_iter()
                .map(|answer| proto::PaymentLookupResult {
                    lookup: Some(answer.lookup.into()),
                    payment: answer.payment.map(proto::Payment::from),
                    reason: answer.reason,
                    message: answer.message,
                })
                .collect(),
        }
    }
}

impl From<PaymentHistory> for proto::PaymentHistory {
    fn from(h: PaymentHistory) -> Self {
        Self {
            payment: Some(h.payment.into()),
            history: h.history.into_iter().map(proto::HistoryEntry::from).collect(),
        }
    }
}

impl From<HistoryView> for proto::HistoryEntry {
    fn from(h: HistoryView) -> Self {
        Self {
            seq: h.seq,
            from_state: h.from_state.map(|state| state.to_string()),
            to_state: h.to_state.to_string(),
            cause: h.cause.to_string(),
            block_number: h.block_number,
            tx: h.tx,
            at: h.at,
        }
    }
}

impl From<Totals> for proto::Totals {
    fn from(totals: Totals) -> Self {
        Self {
            group_by: totals.group_by.to_string(),
            groups: totals.groups.into_iter().map(proto::TotalsGroup::from).collect(),
        }
    }
}

impl From<TotalsGroup> for proto::TotalsGroup {
    fn from(g: TotalsGroup) -> Self {
        Self {
            key: g.key,
            payments: g.payments,
            by_state: g.by_state.into_iter().collect(),
            final_amount: g.final_amount,
            pending_amount: g.pending_amount,
            refunded_amount: g.refunded_amount,
            held_amount: g.held_amount,
            fee_amount: g.fee_amount,
        }
    }
}

impl From<ListedTransfer> for proto::ListedTransfer {
    fn from(t: ListedTransfer) -> Self {
        Self {
            network: t.network,
            transaction: t.transaction,
            event_index: t.event_index,
            block_number: t.block_number,
            block_time: t.block_time,
            from: t.from,
            to: t.to,
            asset: t.asset,
            asset_symbol: t.asset_symbol,
            asset_decimals: t.asset_decimals.map(u32::from),
            amount: t.amount,
            memo: t.memo,
            r#final: t.is_final,
            role: t.role.to_string(),
            payment: t.payment,
            index_in_tx: t.index_in_tx,
            refund_rule: t.refund_rule.map(|rule| rule.to_string()),
        }
    }
}

impl From<TransferPage> for proto::ListTransfersResponse {
    fn from(page: TransferPage) -> Self {
        Self {
            transfers: page
                .transfers
                .into_iter()
                .map(proto::ListedTransfer::from)
                .collect(),
            next_cursor: page.next_cursor,
            has_more: page.has_more,
        }
    }
}

impl From<EventView> for proto::PaymentEvent {
    fn from(e: EventView) -> Self {
        Self {
            event_id: e.event_id,
            network: e.network,
            payment: e.payment,
            index_in_tx: e.index_in_tx,
            seq: e.change.seq,
            from_state: e.change.from_state.map(|state| state.to_string()),
            to_state: e.change.to_state.to_string(),
            cause: e.change.cause.to_string(),
            block_number: e.change.block_number,
            tx: e.change.tx,
            at: e.change.at,
            memo: e.memo,
            method: e.method.to_string(),
            kind: e.kind.to_string(),
            verified: e.verified,
        }
    }
}

impl From<ProofView> for proto::PaymentProof {
    fn from(v: ProofView) -> Self {
        Self {
            network: v.network,
            payment: v.payment,
            index_in_tx: v.index_in_tx,
            method: v.method.to_string(),
            payment_state: v.payment_state.to_string(),
            head_block: v.head_block,
            final_block: v.final_block,
            payment_logs: v.payment_logs,
            facts: Some(proto::ProvenFacts {
                payer: format!("{:#x}", v.facts.payer),
                pay_to: format!("{:#x}", v.facts.pay_to),
                amount: v.facts.amount.to_string(),
                asset: format!("{:#x}", v.facts.asset),
                nonce: v.facts.nonce.map(|n| format!("{n:#x}")),
                settled_by: v.facts.settled_by.map(|a| format!("{a:#x}")),
                permit2_nonce: v.facts.permit2_nonce,
                max_amount: v.facts.max_amount,
                escrow: v.facts.escrow.map(|e| proto::EscrowFacts {
                    payment_info_hash: format!("{:#x}", e.payment_info_hash),
                    captured_amount: e.captured_amount.to_string(),
                    released_amount: e.released_amount.to_string(),
                    refunded_amount: e.refunded_amount.to_string(),
                }),
            }),
            proof: Some(v.proof.into()),
            escrow_events: v
                .escrow_events
                .into_iter()
                .map(|e| proto::EscrowEventProof {
                    kind: e.kind.to_string(),
                    log: e.log,
                    proof: Some(e.proof.into()),
                })
                .collect(),
        }
    }
}

impl From<ReceiptProof> for proto::ReceiptProof {
    fn from(p: ReceiptProof) -> Self {
        Self {
            block_hash: format!("{:#x}", p.block_hash),
            block_number: p.block_number,
            header_rlp: p.header_rlp.to_vec(),
            tx_hash: format!("{:#x}", p.tx_hash),
            tx_index: p.tx_index,
            receipt: p.receipt.to_vec(),
            nodes: p.nodes.iter().map(|n| n.to_vec()).collect(),
            first_log_index: p.first_log_index,
            transaction: p.transaction.to_vec(),
            transaction_nodes: p.transaction_nodes.iter().map(|n| n.to_vec()).collect(),
        }
    }
}

impl From<EvidenceView> for proto::TransactionEvidence {
    fn from(v: EvidenceView) -> Self {
        Self {
            evidence: v.evidence,
            network: v.network,
            payment: v.payment,
            index_in_tx: v.index_in_tx,
            method: v.method.to_string(),
            payment_state: v.payment_state.to_string(),
            slot: v.slot,
            block_hash: v.block_hash,
            confirmation_status: v.confirmation_status,
            finalized_slot: v.finalized_slot,
            transaction_json: v.transaction.to_string(),
        }
    }
}
