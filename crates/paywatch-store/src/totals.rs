//! Totals of the payments a listing filter selects, summed by the database per group and
//! state, so summing reads no payment row into the process however many match. Amounts
//! are decimal text of up to 78 digits (any `uint256`); both databases sum them exactly in
//! nine limbs of nine digits, which paywatch joins into one integer.

use alloy_primitives::U256;
use paywatch_core::listing::{PaymentFilter, TotalsKey};
use paywatch_core::state::PaymentState;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::query::filtered;
use crate::rows::{state_of, to_u64};
use crate::{Backend, Store, StoreError};

/// Digits of one limb: a limb fits a 32-bit INTEGER, whose SUM both databases answer as
/// a 64-bit integer that stays exact for billions of rows.
const LIMB_DIGITS: usize = 9;
/// Limbs of an amount: 81 digits, room for the 78 of any `uint256`.
const LIMBS: usize = 9;
/// The most digits a stored amount may have.
const MAX_DIGITS: usize = 78;

/// The sums of one (group, state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateTotals {
    /// The group's key; `None` where it is not recorded (a block time, a facilitator).
    pub key: Option<String>,
    /// The state.
    pub state: PaymentState,
    /// How many payments.
    pub payments: u64,
    /// The sum of what they paid: their amounts, and of escrowed payments what was
    /// captured (fees included), never what is only held.
    pub amount: U256,
    /// The sum of their final refunds.
    pub refunded_amount: U256,
    /// Escrowed payments: the sum of what is still held in escrow.
    pub held_amount: U256,
    /// The sum of their fees (escrow capture fees, Token-2022 transfer fees).
    pub fee_amount: U256,
}

/// What a payment paid: an escrowed payment's captured amount, else its amount.
const PAID_AMOUNT: &str = "COALESCE(captured_amount, amount)";
/// What an escrowed payment still holds (none for others).
const HELD_AMOUNT: &str = "COALESCE(held_amount, '0')";
/// A payment's fees (none recorded: zero).
const FEE_AMOUNT: &str = "COALESCE(fee_amount, '0')";

/// The SQL of `key` on `backend`.
fn key_sql(key: TotalsKey, backend: Backend) -> &'static str {
    match (key, backend) {
        (TotalsKey::Day, Backend::Sqlite) => "strftime('%Y-%m-%d', block_time, 'unixepoch')",
        (TotalsKey::Day, Backend::Postgres) => {
            "to_char(to_timestamp(block_time) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
        }
        (TotalsKey::Asset, _) => "asset",
        (TotalsKey::PayTo, _) => "pay_to",
        (TotalsKey::Facilitator, _) => "facilitator",
        (TotalsKey::Method, _) => "method",
    }
}

/// A condition true when `column` is not 1 to 78 decimal digits.
fn malformed_sql(column: &str, backend: Backend) -> String {
    match backend {
        Backend::Sqlite => {
            format!("({column} = '' OR {column} GLOB '*[^0-9]*' OR length({column}) > {MAX_DIGITS})")
        }
        Backend::Postgres => format!("({column} !~ '^[0-9]{{1,{MAX_DIGITS}}}$')"),
    }
}

/// `SUM`s of the limbs of `column`, named `{prefix}0` (most significant) on.
fn limb_sums(column: &str, prefix: &str) -> String {
    let width = LIMB_DIGITS * LIMBS;
    let padded = format!(
        "substr('{}' || {column}, length({column}) + 1, {width})",
        "0".repeat(width)
    );
    (0..LIMBS)
        .map(|limb| {
            format!(
                "SUM(CAST(substr({padded}, {start}, {LIMB_DIGITS}) AS INTEGER)) AS {prefix}{limb}",
                start = limb * LIMB_DIGITS + 1
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The integer whose limb sums are `{prefix}0…` in `row`.
fn joined(row: &AnyRow, prefix: &str) -> Result<U256, StoreError> {
    let base = U256::from(10u64.pow(LIMB_DIGITS as u32));
    let mut total = U256::ZERO;
    for limb in 0..LIMBS {
        let sum: i64 = row.try_get(format!("{prefix}{limb}").as_str())?;
        total = total * base + U256::from(to_u64("payments", "amount", sum)?);
    }
    Ok(total)
}

impl Store {
    /// Per `key` and state, how many payments `filter` selects and the exact sums of their
    /// amounts and final refunds, in key order.
    pub async fn totals(
        &self,
        filter: &PaymentFilter,
        key: TotalsKey,
    ) -> Result<Vec<StateTotals>, StoreError> {
        let select = format!(
            "SELECT {key} AS group_key, state, COUNT(*) AS payments, {amounts}, {refunds}, {held}, {fees}, \
             SUM(CASE WHEN {bad_amount} OR {bad_refund} OR {bad_held} OR {bad_fee} THEN 1 ELSE 0 END) AS malformed FROM payments",
            key = key_sql(key, self.backend),
            amounts = limb_sums(PAID_AMOUNT, "a"),
            refunds = limb_sums("refunded_amount", "r"),
            held = limb_sums(HELD_AMOUNT, "h"),
            fees = limb_sums(FEE_AMOUNT, "f"),
            bad_amount = malformed_sql(PAID_AMOUNT, self.backend),
            bad_refund = malformed_sql("refunded_amount", self.backend),
            bad_held = malformed_sql(HELD_AMOUNT, self.backend),
            bad_fee = malformed_sql(FEE_AMOUNT, self.backend),
        );
        let (mut sql, bindings) = filtered(self.backend, &select, filter);
        sql.push_str(" GROUP BY group_key, state ORDER BY group_key, state");
        let rows = bindings.query(sql).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| {
                let malformed: i64 = row.try_get("malformed")?;
                if malformed > 0 {
                    return Err(StoreError::Corrupt {
                        table: "payments",
                        detail: format!(
                            "{malformed} stored amounts are not decimal integers of 1 to {MAX_DIGITS} digits"
                        ),
                    });
                }
                Ok(StateTotals {
                    key: row.try_get("group_key")?,
                    state: state_of(row)?,
                    payments: to_u64("payments", "count", row.try_get("payments")?)?,
                    amount: joined(row, "a")?,
                    refunded_amount: joined(row, "r")?,
                    held_amount: joined(row, "h")?,
                    fee_amount: joined(row, "f")?,
                })
            })
            .collect()
    }
}
