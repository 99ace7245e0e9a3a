//! Integer columns read back from a row, with the range checks that turn a corrupt row
//! into an error naming its table instead of a wrong number.

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
