//! Recorded reviews: one per payment, written once verified, read back with the payment's
//! live state for a provider to publish.

use paywatch_core::listing::{PageCursor, PaymentFilter};
use paywatch_core::state::PaymentState;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::query::{StoredPayment, filtered, page_after, payment_from_row};
use crate::rows::state_of;
use crate::{Store, StoreError};

/// A recorded review, with its payment as stored now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredReview {
    /// The reviewed payment, in its current state.
    pub payment: StoredPayment,
    /// The message, exactly as submitted.
    pub message: String,
    /// The signature, exactly as submitted.
    pub signature: String,
    /// When it was recorded, Unix milliseconds.
    pub recorded_ms: i64,
}

/// What recording a review did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewRecording {
    /// Recorded; `state` is the payment's state as of the recording (`None` when the
    /// payment is not stored): every later change of its published state is a
    /// `review_state` event.
    Recorded {
        /// The payment's state when the review was recorded.
        state: Option<PaymentState>,
    },
    /// A review of that payment was recorded before; nothing changed.
    Duplicate,
}

/// Reviews joined to their payments, as a table named `payments` with the review's
/// columns beside the payment's (so a listing filter reads it as it reads payments).
const REVIEWED_PAYMENTS: &str = "(SELECT p.*, r.message, r.signature, r.recorded_ms FROM reviews r \
     JOIN payments p ON p.network = r.network AND p.payment_id = r.payment_id AND p.index_in_tx = r.index_in_tx) AS payments";

fn review_from_row(row: &AnyRow) -> Result<StoredReview, StoreError> {
    Ok(StoredReview {
        payment: payment_from_row(row)?,
        message: row.try_get("message")?,
        signature: row.try_get("signature")?,
        recorded_ms: row.try_get("recorded_ms")?,
    })
}

impl Store {
    /// Records a verified review of one payment, unless one is already recorded for that
    /// payment (`(network, payment_id, index_in_tx)`).
    pub async fn record_review(
        &self,
        network: &str,
        payment_id: &str,
        index_in_tx: u32,
        message: &str,
        signature: &str,
    ) -> Result<ReviewRecording, StoreError> {
        let mut tx = self.pool.begin().await?;
        // Taking the event counter's lock orders the recording with the commits that
        // write events: a change committed after it sees the review and writes its
        // `review_state` event; one committed before it is in the state read here.
        sqlx::query("UPDATE event_counter SET last_event = last_event WHERE id = 1")
            .execute(&mut *tx)
            .await?;
        let inserted = sqlx::query(
            "INSERT INTO reviews (network, payment_id, index_in_tx, message, signature, recorded_ms) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (network, payment_id, index_in_tx) DO NOTHING",
        )
        .bind(network.to_string())
        .bind(payment_id.to_string())
        .bind(i64::from(index_in_tx))
        .bind(message.to_string())
        .bind(signature.to_string())
        .bind(crate::now_ms())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if inserted != 1 {
            return Ok(ReviewRecording::Duplicate);
        }
        let row = sqlx::query(
            "SELECT state FROM payments WHERE network = $1 AND payment_id = $2 AND index_in_tx = $3",
        )
        .bind(network.to_string())
        .bind(payment_id.to_string())
        .bind(i64::from(index_in_tx))
        .fetch_optional(&mut *tx)
        .await?;
        let state = row.as_ref().map(state_of).transpose()?;
        tx.commit().await?;
        Ok(ReviewRecording::Recorded { state })
    }

    /// Whether a review is recorded for the payment, or with `index_in_tx` `None` for any
    /// payment of the transaction.
    pub async fn review_exists(
        &self,
        network: &str,
        payment_id: &str,
        index_in_tx: Option<u32>,
    ) -> Result<bool, StoreError> {
        let query = match index_in_tx {
            Some(index) => sqlx::query(
                "SELECT 1 AS one FROM reviews WHERE network = $1 AND payment_id = $2 AND index_in_tx = $3",
            )
            .bind(network.to_string())
            .bind(payment_id.to_string())
            .bind(i64::from(index)),
            None => sqlx::query("SELECT 1 AS one FROM reviews WHERE network = $1 AND payment_id = $2")
                .bind(network.to_string())
                .bind(payment_id.to_string()),
        };
        Ok(query.fetch_optional(&self.pool).await?.is_some())
    }

    /// The reviews recorded for the payments of one transaction, in their order within it.
    pub async fn reviews_by_id(
        &self,
        network: &str,
        payment_id: &str,
    ) -> Result<Vec<StoredReview>, StoreError> {
        let sql = format!(
            "{}, message, signature, recorded_ms FROM {REVIEWED_PAYMENTS} \
             WHERE network = $1 AND payment_id = $2 ORDER BY index_in_tx",
            crate::query::SELECT_PAYMENTS
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(network.to_string())
            .bind(payment_id.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(review_from_row).collect()
    }

    /// One page of recorded reviews whose payments match `filter`, in the payments'
    /// chain order, after `after` when given.
    pub async fn list_reviews(
        &self,
        filter: &PaymentFilter,
        after: Option<&PageCursor>,
        limit: u32,
    ) -> Result<Vec<StoredReview>, StoreError> {
        let select = format!(
            "{}, message, signature, recorded_ms FROM {REVIEWED_PAYMENTS}",
            crate::query::SELECT_PAYMENTS
        );
        let (sql, bindings) = filtered(self.backend, &select, filter);
        let (sql, bindings) = page_after(sql, bindings, after, limit)?;
        let rows = bindings.query(sql).fetch_all(&self.pool).await?;
        rows.iter().map(review_from_row).collect()
    }
}
