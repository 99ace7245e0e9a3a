//! Reconciliation listings: which payments (or kept transfers) a finance query selects,
//! and the keyset cursors that page through them in chain order (block, transaction,
//! index) with no offsets, so a page boundary stays put while new rows arrive.

use std::fmt;
use std::str::FromStr;

use crate::method::PaymentMethod;
use crate::network::NetworkId;
use crate::state::PaymentState;

/// What a listing selects. Addresses and assets are in the network's canonical spelling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentFilter {
    /// The network (required: ids and spellings differ between networks).
    pub network: NetworkId,
    /// Only payments by this payer.
    pub payer: Option<String>,
    /// Only payments to this pay_to.
    pub pay_to: Option<String>,
    /// Only payments of this token contract or mint.
    pub asset: Option<String>,
    /// Only payments whose transaction's memo is exactly this (Solana).
    pub memo: Option<String>,
    /// Only payments this facilitator settled (sent, or paid the fee for).
    pub facilitator: Option<String>,
    /// Only payments in this state.
    pub state: Option<PaymentState>,
    /// Only payments settled by this method.
    pub method: Option<PaymentMethod>,
    /// Only payments whose block time is at or after this, Unix seconds.
    pub from: Option<i64>,
    /// Only payments whose block time is before this, Unix seconds.
    pub to: Option<i64>,
}

impl PaymentFilter {
    /// Every payment of `network`: the filter that selects nothing else.
    pub fn of(network: NetworkId) -> Self {
        Self {
            network,
            payer: None,
            pay_to: None,
            asset: None,
            memo: None,
            facilitator: None,
            state: None,
            method: None,
            from: None,
            to: None,
        }
    }
}

/// What a listing of kept transfers selects. Addresses and assets are in the network's
/// canonical spelling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferFilter {
    /// The network.
    pub network: NetworkId,
    /// Only transfers from or to this address.
    pub address: Option<String>,
    /// Only transfers from this address.
    pub from_address: Option<String>,
    /// Only transfers to this address.
    pub to_address: Option<String>,
    /// Only transfers of this token contract or mint.
    pub asset: Option<String>,
    /// Only transfers whose block time is at or after this, Unix seconds.
    pub from: Option<i64>,
    /// Only transfers whose block time is before this, Unix seconds.
    pub to: Option<i64>,
}

/// What a kept transfer was to paywatch, as listings spell it.
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
    serde::Deserialize,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum TransferRole {
    /// It moved a payment's money.
    Payment,
    /// A refund rule tied it to a payment it refunds.
    Refund,
    /// Neither (yet): a transfer that may still refund a payment, or, with
    /// `keep_transfers = "pay_to"`, any other money in or out of a seller's wallet.
    Other,
}

/// What totals are grouped by.
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
    serde::Deserialize,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum TotalsKey {
    /// The block's UTC day, `YYYY-MM-DD`.
    Day,
    /// The token contract or mint.
    Asset,
    /// Who was paid.
    PayTo,
    /// Who settled it, where recorded.
    Facilitator,
    /// How the money moved.
    Method,
}

/// Where a page ends: the last payment it holds, in listing order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageCursor {
    /// Its block (slot).
    pub block_number: u64,
    /// Its transaction hash or signature.
    pub payment_id: String,
    /// Its number within the transaction.
    pub index_in_tx: u32,
}

/// A cursor that is not one paywatch handed out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cursor {0:?} is not one paywatch handed out; pass next_cursor from the previous page unchanged")]
pub struct BadCursor(pub String);

/// Where a page of kept transfers ends: the last transfer it holds, in chain order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferCursor {
    /// Its block (slot).
    pub block_number: u64,
    /// Its transaction hash or signature.
    pub tx_id: String,
    /// Its event's index.
    pub event_index: u64,
}

impl fmt::Display for PageCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}.{}",
            self.block_number, self.payment_id, self.index_in_tx
        )
    }
}

impl fmt::Display for TransferCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.block_number, self.tx_id, self.event_index)
    }
}

/// `BLOCK.TRANSACTION.INDEX` (transaction ids hold no dot) as its three parts.
fn cursor_parts<I: FromStr>(text: &str) -> Result<(u64, String, I), BadCursor> {
    let bad = || BadCursor(text.to_string());
    let mut parts = text.split('.');
    let (Some(block), Some(tx), Some(index), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let number = |s: &str| s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty();
    if !number(block) || !number(index) || tx.is_empty() || !tx.is_ascii() {
        return Err(bad());
    }
    Ok((
        block.parse().map_err(|_| bad())?,
        tx.to_string(),
        index.parse().map_err(|_| bad())?,
    ))
}

impl FromStr for PageCursor {
    type Err = BadCursor;

    /// Parses `BLOCK.PAYMENT.INDEX`.
    fn from_str(text: &str) -> Result<Self, BadCursor> {
        let (block_number, payment_id, index_in_tx) = cursor_parts(text)?;
        Ok(Self {
            block_number,
            payment_id,
            index_in_tx,
        })
    }
}

impl FromStr for TransferCursor {
    type Err = BadCursor;

    /// Parses `BLOCK.TRANSACTION.EVENT_INDEX`.
    fn from_str(text: &str) -> Result<Self, BadCursor> {
        let (block_number, tx_id, event_index) = cursor_parts(text)?;
        Ok(Self {
            block_number,
            tx_id,
            event_index,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip() {
        let cursor = PageCursor {
            block_number: 42,
            payment_id: format!("0x{}", "ab".repeat(32)),
            index_in_tx: 1,
        };
        assert_eq!(cursor.to_string().parse::<PageCursor>(), Ok(cursor));
        let solana = PageCursor {
            block_number: 7,
            payment_id: "5XDPqonATb1F36SN73WmKSU7UHxqbBNQNb99qeTACinX".to_string(),
            index_in_tx: 0,
        };
        assert_eq!(solana.to_string().parse::<PageCursor>(), Ok(solana));
        let transfer = TransferCursor {
            block_number: 9,
            tx_id: format!("0x{}", "cd".repeat(32)),
            event_index: 4_294_967_300,
        };
        assert_eq!(transfer.to_string().parse::<TransferCursor>(), Ok(transfer));
    }

    #[test]
    fn refuses_what_it_did_not_write() {
        for bad in [
            "",
            "1.2",
            "1.x.2.3",
            "a.0xab.0",
            "1..0",
            "1.0xab.",
            "-1.0xab.0",
            "1.0xab.99999999999",
        ] {
            assert!(bad.parse::<PageCursor>().is_err(), "{bad}");
            assert!(
                bad.replace("99999999999", "x").parse::<TransferCursor>().is_err(),
                "{bad}"
            );
        }
    }
}
