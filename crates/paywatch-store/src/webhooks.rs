//! Webhook delivery state: each sink's cursor in the event sequence and its dead letters.

use sqlx::Row;

use crate::{Store, StoreError, now_ms, to_i64};

/// An event a webhook sink never accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The event.
    pub event_id: u64,
    /// How many times it was POSTed.
    pub attempts: u32,
    /// The last failure.
    pub error: String,
}

impl Store {
    /// The last event the sink `name` is done with (0 before the first).
    pub async fn webhook_cursor(&self, name: &str) -> Result<u64, StoreError> {
        let last: Option<i64> = sqlx::query_scalar("SELECT last_event FROM webhook_cursors WHERE name = $1")
            .bind(name.to_string())
            .fetch_optional(&self.pool)
            .await?;
        Ok(last.map_or(0, |n| n.max(0) as u64))
    }

    /// Marks `event_id` done for the sink `name`: delivered, or (with `failure`) given up
    /// on after its attempts and kept as a dead letter, in one transaction.
    pub async fn advance_webhook(
        &self,
        name: &str,
        event_id: u64,
        failure: Option<(u32, &str)>,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let event = to_i64("event id", event_id)?;
        let mut tx = self.write_tx().await?;
        if let Some((attempts, error)) = failure {
            sqlx::query(
                "INSERT INTO webhook_dead_letters (name, event_id, attempts, error, at_ms) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (name, event_id) DO NOTHING",
            )
            .bind(name.to_string())
            .bind(event)
            .bind(i64::from(attempts))
            .bind(error.to_string())
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "INSERT INTO webhook_cursors (name, last_event, updated_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO UPDATE SET last_event = excluded.last_event, updated_ms = excluded.updated_ms",
        )
        .bind(name.to_string())
        .bind(event)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The dead letters of the sink `name`, oldest event first.
    pub async fn dead_letters(&self, name: &str) -> Result<Vec<DeadLetter>, StoreError> {
        let rows = sqlx::query(
            "SELECT event_id, attempts, error FROM webhook_dead_letters WHERE name = $1 ORDER BY event_id",
        )
        .bind(name.to_string())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let event_id: i64 = row.try_get("event_id")?;
                let attempts: i64 = row.try_get("attempts")?;
                Ok(DeadLetter {
                    event_id: event_id.max(0) as u64,
                    attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                    error: row.try_get("error")?,
                })
            })
            .collect()
    }
}
