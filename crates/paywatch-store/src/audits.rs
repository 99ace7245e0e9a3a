//! Audits that ran to their end: recorded once finished, read back by the scheduled audit
//! (where to continue) and by `paywatch status` (the last audit of each network).

use std::str::FromStr;

use paywatch_core::records::{AuditRecord, AuditSource};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::rows::to_u64;
use crate::{Store, StoreError, to_i64};

/// Which audits [`Store::last_audit`] looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditKind {
    /// Every audit, by `paywatch run`'s schedule or by `paywatch audit`.
    Any,
    /// Only the scheduled ones (where the schedule continues).
    Scheduled,
}

impl Store {
    /// Records a finished audit.
    pub async fn record_audit(&self, audit: &AuditRecord) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        sqlx::query(
            "INSERT INTO audits (network, first_block, last_block, source, scheduled, differences, finished_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(audit.network.clone())
        .bind(to_i64("block number", audit.first_block)?)
        .bind(to_i64("block number", audit.last_block)?)
        .bind(<&str>::from(audit.source))
        .bind(i64::from(audit.scheduled))
        .bind(to_i64("differences", audit.differences)?)
        .bind(audit.finished_ms)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The audit of `network` of `kind` that reached furthest (the last to finish among
    /// those), if any.
    pub async fn last_audit(
        &self,
        network: &str,
        kind: AuditKind,
    ) -> Result<Option<AuditRecord>, StoreError> {
        let scheduled_only = match kind {
            AuditKind::Any => 0i64,
            AuditKind::Scheduled => 1,
        };
        sqlx::query(
            "SELECT network, first_block, last_block, source, scheduled, differences, finished_ms \
             FROM audits WHERE network = $1 AND scheduled >= $2 \
             ORDER BY last_block DESC, finished_ms DESC LIMIT 1",
        )
        .bind(network.to_string())
        .bind(scheduled_only)
        .fetch_optional(&self.pool)
        .await?
        .map(|row| audit_from_row(&row))
        .transpose()
    }
}

fn audit_from_row(row: &AnyRow) -> Result<AuditRecord, StoreError> {
    let source: String = row.try_get("source")?;
    let scheduled: i64 = row.try_get("scheduled")?;
    Ok(AuditRecord {
        network: row.try_get("network")?,
        first_block: to_u64("audits", "first_block", row.try_get("first_block")?)?,
        last_block: to_u64("audits", "last_block", row.try_get("last_block")?)?,
        source: AuditSource::from_str(&source).map_err(|_| StoreError::Corrupt {
            table: "audits",
            detail: format!("unknown source {source:?}"),
        })?,
        scheduled: scheduled != 0,
        differences: to_u64("audits", "differences", row.try_get("differences")?)?,
        finished_ms: row.try_get("finished_ms")?,
    })
}
