//! Integer columns and words of core's vocabulary read back from a row, with the checks
//! that turn a corrupt row into an error naming its table instead of a wrong value.

use std::str::FromStr;

use alloy_primitives::U256;
use paywatch_core::state::PaymentState;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::StoreError;

/// A non-negative integer column of `table`, as stored (negative means a corrupt row).
pub(crate) fn to_u64(table: &'static str, column: &str, value: i64) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt {
        table,
        detail: format!("{column} is negative ({value})"),
    })
}

/// The `index_in_tx` column of a row of `table`.
pub(crate) fn index_in_tx_of(table: &'static str, row: &AnyRow) -> Result<u32, StoreError> {
    let index: i64 = row.try_get("index_in_tx")?;
    u32::try_from(index).map_err(|_| StoreError::Corrupt {
        table,
        detail: format!("index_in_tx out of range ({index})"),
    })
}

pub(crate) fn parse_amount(table: &'static str, text: &str) -> Result<U256, StoreError> {
    U256::from_str_radix(text, 10).map_err(|_| StoreError::Corrupt {
        table,
        detail: format!("amount `{text}` is not a decimal integer"),
    })
}

/// The `block_number` column of a payments row.
pub(crate) fn block_of(row: &AnyRow) -> Result<u64, StoreError> {
    let block: i64 = row.try_get("block_number")?;
    u64::try_from(block).map_err(|_| StoreError::Corrupt {
        table: "payments",
        detail: format!("block_number is negative ({block})"),
    })
}

/// The `state` column of a payments row.
pub(crate) fn state_of(row: &AnyRow) -> Result<PaymentState, StoreError> {
    word_of("payments", row, "state")
}

/// Column `column` of a row of `table`, one word of core's vocabulary (a state, method,
/// cause, rule or kind, as its `FromStr` spells it).
pub(crate) fn word_of<T: FromStr>(table: &'static str, row: &AnyRow, column: &str) -> Result<T, StoreError> {
    let text: String = row.try_get(column)?;
    word(table, column, &text)
}

/// `text`, stored in column `column` of `table`, as one word of core's vocabulary.
pub(crate) fn word<T: FromStr>(table: &'static str, column: &str, text: &str) -> Result<T, StoreError> {
    text.parse().map_err(|_| StoreError::Corrupt {
        table,
        detail: format!("unknown {column} `{text}`"),
    })
}
