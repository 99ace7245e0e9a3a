//! What a range's reads ask the node for, written once: as `eth_getLogs` filters (the
//! watched tokens' transfers — only those into or out of the `pay_to` wallets when a
//! network names them — the escrows' events, and the settlement topics of every contract)
//! and as the same sets tested on one log or on a block's bloom, for the bloom check.

use alloy::primitives::{Address, Bloom, BloomInput};
use alloy::rpc::types::Log;

use crate::decode::{escrow_topics, settlement_topics, transfer_topic};
use crate::rpc::{EvmRpc, RpcFault};

/// The reads of one range.
#[derive(Debug, Clone, Copy)]
pub struct RangeReads<'a> {
    /// The watched tokens of the range.
    pub tokens: &'a [Address],
    /// The watched escrows.
    pub escrows: &'a [Address],
    /// The sellers' wallets: when any, only transfers into or out of them are read.
    pub pay_to: &'a [Address],
}

impl RangeReads<'_> {
    /// Both reads of `from..=to` from `rpc`, at once: the watched contracts' logs and the
    /// settlement logs of every contract.
    pub async fn read(
        &self,
        rpc: &EvmRpc,
        from: u64,
        to: u64,
    ) -> (Result<Vec<Log>, RpcFault>, Result<Vec<Log>, RpcFault>) {
        let settlements = settlement_topics();
        tokio::join!(
            self.watched_logs(rpc, from, to),
            rpc.logs_of_any_contract(&settlements, from, to)
        )
    }

    /// The tokens' transfers and the escrows' events, in one `eth_getLogs` (neither kind of
    /// contract emits the other's events); with `pay_to` wallets, only the transfers into
    /// or out of them (two topic-filtered reads) and the escrows' events apart, in chain
    /// order.
    async fn watched_logs(&self, rpc: &EvmRpc, from: u64, to: u64) -> Result<Vec<Log>, RpcFault> {
        if self.pay_to.is_empty() {
            let mut contracts = self.tokens.to_vec();
            contracts.extend(self.escrows);
            let mut topics = vec![transfer_topic()];
            if !self.escrows.is_empty() {
                topics.extend(escrow_topics());
            }
            return rpc.logs(&contracts, &topics, from, to).await;
        }
        let escrow_events = async {
            match self.escrows.is_empty() {
                true => Ok(Vec::new()),
                false => rpc.logs(self.escrows, &escrow_topics(), from, to).await,
            }
        };
        let (incoming, outgoing, escrow_events) = tokio::join!(
            rpc.logs_between(self.tokens, transfer_topic(), None, Some(self.pay_to), from, to),
            rpc.logs_between(self.tokens, transfer_topic(), Some(self.pay_to), None, from, to),
            escrow_events
        );
        let mut logs = incoming?;
        logs.extend(outgoing?);
        logs.extend(escrow_events?);
        logs.sort_by_key(|log| (log.block_number, log.log_index));
        // A transfer between two `pay_to` wallets comes back from both reads.
        logs.dedup_by(|a, b| a.block_hash == b.block_hash && a.log_index == b.log_index);
        Ok(logs)
    }

    /// Whether `log` is one the watched contracts' read asks for.
    pub fn watched(&self, log: &Log) -> bool {
        let topics = log.topics();
        let Some(topic) = topics.first() else {
            return false;
        };
        if self.escrows.contains(&log.address()) && escrow_topics().contains(topic) {
            return true;
        }
        if !self.tokens.contains(&log.address()) || *topic != transfer_topic() {
            return false;
        }
        if self.pay_to.is_empty() {
            return true;
        }
        let touches = |i: usize| {
            topics
                .get(i)
                .is_some_and(|t| self.pay_to.iter().any(|w| w.into_word() == *t))
        };
        touches(1) || touches(2)
    }

    /// Whether `log` is one the settlement read asks for (by topic, from every contract).
    pub fn settlement(&self, log: &Log) -> bool {
        log.topics()
            .first()
            .is_some_and(|t| settlement_topics().contains(t))
    }

    /// Whether a block with `bloom` may hold a log either read asks for. With `pay_to`
    /// wallets, a transfer must also have one of them among its topics: a busy token's
    /// blocks of other people's transfers are not read again.
    pub fn may_hold(&self, bloom: &Bloom) -> bool {
        let has = |bytes: &[u8]| bloom.contains_input(BloomInput::Raw(bytes));
        let to_or_from_a_seller =
            self.pay_to.is_empty() || self.pay_to.iter().any(|w| has(w.into_word().as_slice()));
        let transfers = has(transfer_topic().as_slice())
            && self.tokens.iter().any(|t| has(t.as_slice()))
            && to_or_from_a_seller;
        let escrow = self.escrows.iter().any(|e| has(e.as_slice()))
            && escrow_topics().iter().any(|t| has(t.as_slice()));
        let settlements = settlement_topics().iter().any(|t| has(t.as_slice()));
        transfers || escrow || settlements
    }
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{Address, Bytes, Log as PrimitiveLog, LogData, logs_bloom};

    use super::*;

    fn transfer(token: Address, from: Address, to: Address) -> PrimitiveLog {
        PrimitiveLog {
            address: token,
            data: LogData::new_unchecked(
                vec![transfer_topic(), from.into_word(), to.into_word()],
                Bytes::new(),
            ),
        }
    }

    #[test]
    fn a_bloom_may_hold_a_sellers_transfer_only_with_the_seller_in_it() {
        let (token, seller, someone, other) = (
            Address::repeat_byte(1),
            Address::repeat_byte(2),
            Address::repeat_byte(3),
            Address::repeat_byte(4),
        );
        let tokens = [token];
        let every = RangeReads {
            tokens: &tokens,
            escrows: &[],
            pay_to: &[],
        };
        let sellers = [seller];
        let only_sellers = RangeReads {
            pay_to: &sellers,
            ..every
        };
        let others = logs_bloom([&transfer(token, someone, other)]);
        let paid = logs_bloom([&transfer(token, someone, seller)]);
        let refunded = logs_bloom([&transfer(token, seller, someone)]);
        assert!(every.may_hold(&others));
        assert!(!only_sellers.may_hold(&others), "other people's transfers");
        assert!(only_sellers.may_hold(&paid));
        assert!(only_sellers.may_hold(&refunded));
        assert!(!every.may_hold(&logs_bloom([&transfer(Address::repeat_byte(9), someone, seller)])));
        assert!(!every.may_hold(&Bloom::default()));
    }
}
