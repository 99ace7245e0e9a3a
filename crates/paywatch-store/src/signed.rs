//! What payers sign about payments: revealed intents bound to them (reviews: `reviews.rs`).

use crate::{Store, StoreError, now_ms};

/// An intent whose nonce commitment paywatch checked against an indexed payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundIntent {
    /// HTTP method, uppercase.
    pub method: String,
    /// The resource URL, normalized.
    pub url: String,
    /// SHA-256 of the request body, if any.
    pub body_sha256: Option<String>,
    /// The payer's resource class.
    pub class: String,
    /// The payer's cap, exact integer string.
    pub max_atomic: String,
    /// The 32-byte salt, `0x` + hex.
    pub salt: String,
}

impl Store {
    /// Stores a checked intent for a payment (a second reveal of the same intent is a no-op).
    pub async fn bind_intent(
        &self,
        network: &str,
        payment_id: &str,
        index_in_tx: u32,
        intent: &BoundIntent,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO intents (network, payment_id, index_in_tx, method, url, body_sha256, class, max_atomic, salt, revealed_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (network, payment_id, index_in_tx) DO NOTHING",
        )
        .bind(network.to_string())
        .bind(payment_id.to_string())
        .bind(i64::from(index_in_tx))
        .bind(intent.method.clone())
        .bind(intent.url.clone())
        .bind(intent.body_sha256.clone())
        .bind(intent.class.clone())
        .bind(intent.max_atomic.clone())
        .bind(intent.salt.clone())
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
