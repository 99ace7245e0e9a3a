//! Audits that ran to their end: recorded once finished with what they found, read back by
//! the scheduled audit (where to continue), by `paywatch status` (the last audit of each
//! network) and by lookups (whether a payment is verified); and, under lagging
//! verification, their verdicts on the payments they covered as `verification` events.

use std::collections::HashMap;
use std::str::FromStr;

use paywatch_core::records::{AuditFinding, AuditRecord, AuditSource, FindingSubject};
use paywatch_core::state::PaymentState;
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use crate::history::reserve_event_ids;
use crate::rows::{index_in_tx_of, to_u64};
use crate::sql::{Placeholders, insert_rows, rows_per_insert};
use crate::{Backend, Store, StoreError, Tx, now_ms, to_i64};

/// Which audits [`Store::last_audit`] looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditKind {
    /// Every audit, by `paywatch run`'s schedule or by `paywatch audit`.
    Any,
    /// Only the scheduled ones (where the schedule continues).
    Scheduled,
}

impl Store {
    /// Records a finished audit and what it found (a finding already recorded by an
    /// earlier audit, or by a repair, is kept as it was); with `announce` (a network under
    /// `verification = "lagging"`), writes the `verification` events of the payments it
    /// covered.
    pub async fn record_audit(
        &self,
        audit: &AuditRecord,
        findings: &[AuditFinding],
        announce: bool,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let mut tx = self.write_tx().await?;
        for finding in findings {
            insert_finding(&mut tx, &audit.network, finding, now, None).await?;
        }
        sqlx::query(
            "INSERT INTO audits (network, first_block, last_block, source, scheduled, differences, repaired, finished_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(audit.network.clone())
        .bind(to_i64("block number", audit.first_block)?)
        .bind(to_i64("block number", audit.last_block)?)
        .bind(<&str>::from(audit.source))
        .bind(i64::from(audit.scheduled))
        .bind(to_i64("differences", audit.differences)?)
        .bind(to_i64("repaired", audit.repaired)?)
        .bind(audit.finished_ms)
        .execute(&mut *tx)
        .await?;
        if announce {
            announce_verifications(
                self.backend,
                &mut tx,
                &audit.network,
                audit.first_block,
                audit.last_block,
                now,
            )
            .await?;
        }
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
            "SELECT network, first_block, last_block, source, scheduled, differences, repaired, finished_ms \
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

impl Store {
    /// What audits found about one payment and no repair has mended, oldest first:
    /// differences that name the payment, a transfer of its own transaction or one of its
    /// refunds' transfers, or a transfer missing from the store on its refund route after
    /// it.
    pub async fn findings_about(
        &self,
        network: &str,
        payment_id: &str,
        index_in_tx: u32,
    ) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT f.difference FROM audit_findings f WHERE f.network = $1 AND ({}) \
             ORDER BY f.found_ms, f.block_number, f.tx_id, f.position",
            about_payment("$2", "$3")
        )))
        .bind(network.to_string())
        .bind(payment_id.to_string())
        .bind(i64::from(index_in_tx))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| row.try_get("difference").map_err(StoreError::from))
            .collect()
    }

    /// For each of `payments` (id, index) of `network` that the store holds: the last
    /// block its state is made of (its own, its refunds', its escrow events') and whether
    /// an audit found something about it (as [`Store::findings_about`]).
    pub async fn audit_coverage(
        &self,
        network: &str,
        payments: &[(String, u32)],
    ) -> Result<HashMap<(String, u32), (u64, bool)>, StoreError> {
        let mut coverage = HashMap::new();
        let mut ids: Vec<&str> = payments.iter().map(|(id, _)| id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        for chunk in ids.chunks(rows_per_insert(self.backend)) {
            let sql = format!(
                "SELECT p.payment_id, p.index_in_tx, {} FROM payments p WHERE p.network = $1 AND p.payment_id IN {}",
                coverage_columns(),
                Placeholders::after(self.backend, 1).list(chunk.len())
            );
            let mut query = sqlx::query(AssertSqlSafe(sql)).bind(network.to_string());
            for id in chunk {
                query = query.bind(id.to_string());
            }
            for row in query.fetch_all(&self.pool).await? {
                coverage.insert(
                    (row.try_get("payment_id")?, index_in_tx_of("payments", &row)?),
                    coverage_of(&row)?,
                );
            }
        }
        Ok(coverage)
    }
}

/// Records `finding` of `network`, found at `now`; `repaired`: when a repair mended it
/// (a finding already recorded is then marked repaired; without, it is kept as it was).
pub(crate) async fn insert_finding(
    tx: &mut Tx<'_>,
    network: &str,
    finding: &AuditFinding,
    now: i64,
    repaired: Option<i64>,
) -> Result<(), StoreError> {
    let on_conflict = match repaired {
        Some(_) => "DO UPDATE SET repaired_ms = excluded.repaired_ms",
        None => "DO NOTHING",
    };
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO audit_findings (network, subject, tx_id, position, block_number, refund_from, refund_to, refund_asset, difference, found_ms, repaired_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (network, subject, tx_id, position) {on_conflict}"
    )))
    .bind(network.to_string())
    .bind(<&str>::from(finding.subject))
    .bind(finding.tx_id.clone())
    .bind(to_i64("position", finding.position)?)
    .bind(to_i64("block number", finding.block_number)?)
    .bind(finding.refund_route.as_ref().map(|r| r.from.clone()))
    .bind(finding.refund_route.as_ref().map(|r| r.to.clone()))
    .bind(finding.refund_route.as_ref().map(|r| r.asset.clone()))
    .bind(finding.difference.clone())
    .bind(now)
    .bind(repaired)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The columns of a payments row `p` that [`coverage_of`] reads: its block, the last
/// blocks of its refunds and escrow events, and whether an unrepaired finding is about it.
fn coverage_columns() -> String {
    format!(
        "p.block_number, \
         (SELECT MAX(r.block_number) FROM refunds r WHERE r.network = p.network \
             AND r.payment_id = p.payment_id AND r.index_in_tx = p.index_in_tx) AS last_refund, \
         (SELECT MAX(e.block_number) FROM escrow_events e WHERE e.network = p.network \
             AND e.payment_id = p.payment_id) AS last_escrow_event, \
         CAST(CASE WHEN EXISTS (SELECT 1 FROM audit_findings f WHERE f.network = p.network AND ({})) \
             THEN 1 ELSE 0 END AS BIGINT) AS found",
        about_payment("p.payment_id", "p.index_in_tx")
    )
}

/// From a row of [`coverage_columns`]: the last block the payment's state is made of (its
/// own, its refunds', its escrow events'), and whether an audit found something about it.
fn coverage_of(row: &AnyRow) -> Result<(u64, bool), StoreError> {
    let blocks = [
        Some(row.try_get::<i64, _>("block_number")?),
        row.try_get::<Option<i64>, _>("last_refund")?,
        row.try_get::<Option<i64>, _>("last_escrow_event")?,
    ];
    let last = blocks.into_iter().flatten().max().unwrap_or(0);
    let found: i64 = row.try_get("found")?;
    Ok((to_u64("payments", "block_number", last)?, found != 0))
}

/// Under `verification = "lagging"`: writes a `verification` event for each payment whose
/// state an audit of `first..=last` has now covered — every block its state is made of is
/// at most the scheduled audits' reach and `last`, and one is at least `first` — with the
/// verdict (verified unless an unrepaired finding is about it) on its last history row.
pub(crate) async fn announce_verifications(
    backend: Backend,
    tx: &mut Tx<'_>,
    network: &str,
    first: u64,
    last: u64,
    now: i64,
) -> Result<(), StoreError> {
    let reach: Option<i64> =
        sqlx::query("SELECT MAX(last_block) AS reach FROM audits WHERE network = $1 AND scheduled = 1")
            .bind(network.to_string())
            .fetch_one(&mut **tx)
            .await?
            .try_get("reach")?;
    let Some(reach) = reach else {
        return Ok(());
    };
    let covered_to = last.min(to_u64("audits", "last_block", reach)?);
    if covered_to < first {
        return Ok(());
    }
    let (first, covered) = (
        to_i64("block number", first)?,
        to_i64("block number", covered_to)?,
    );
    // The payments with a block of their state in the span: their own, a refund's, an
    // escrow event's (an escrowed payment is its transaction's only one).
    let rows = sqlx::query(AssertSqlSafe(format!(
        "SELECT p.payment_id, p.index_in_tx, h.seq, h.cause, h.from_state, h.to_state, h.block_number AS change_block, \
         COALESCE(h.tx_id, h.payment_id) AS tx_id, {} \
         FROM payments p JOIN (\
             SELECT payment_id, index_in_tx FROM payments WHERE network = $1 AND block_number >= $2 AND block_number <= $3 \
             UNION SELECT payment_id, index_in_tx FROM refunds WHERE network = $1 AND block_number >= $2 AND block_number <= $3 \
             UNION SELECT payment_id, 0 FROM escrow_events WHERE network = $1 AND block_number >= $2 AND block_number <= $3\
         ) k ON k.payment_id = p.payment_id AND k.index_in_tx = p.index_in_tx \
         JOIN payment_history h ON h.network = p.network AND h.payment_id = p.payment_id \
             AND h.index_in_tx = p.index_in_tx AND h.seq = p.history_len - 1 \
         WHERE p.network = $1 AND p.state <> '{dropped}' \
         ORDER BY p.block_number, p.event_index",
        coverage_columns(),
        dropped = PaymentState::Dropped.as_str(),
    )))
    .bind(network.to_string())
    .bind(first)
    .bind(covered)
    .fetch_all(&mut **tx)
    .await?;
    let mut announced = Vec::new();
    for row in &rows {
        let (state_to, found) = coverage_of(row)?;
        if state_to <= covered_to {
            announced.push((row, !found));
        }
    }
    if announced.is_empty() {
        return Ok(());
    }
    let first_id = reserve_event_ids(tx, announced.len()).await?;
    let numbered: Vec<(i64, &(&AnyRow, bool))> = (first_id..).zip(&announced).collect();
    insert_rows(
        backend,
        tx,
        "INSERT INTO verification_events (event_id, network, payment_id, index_in_tx, seq, cause, from_state, to_state, block_number, tx_id, verified, at_ms)",
        "",
        12,
        &numbered,
        |q, (event_id, (row, verified))| {
            Ok(q.bind(*event_id)
                .bind(network.to_string())
                .bind(row.try_get::<String, _>("payment_id")?)
                .bind(row.try_get::<i64, _>("index_in_tx")?)
                .bind(row.try_get::<i64, _>("seq")?)
                .bind(row.try_get::<String, _>("cause")?)
                .bind(row.try_get::<Option<String>, _>("from_state")?)
                .bind(row.try_get::<String, _>("to_state")?)
                .bind(row.try_get::<Option<i64>, _>("change_block")?)
                .bind(row.try_get::<Option<String>, _>("tx_id")?)
                .bind(i64::from(*verified))
                .bind(now))
        },
    )
    .await
}

/// The SQL condition on a finding `f` that it is not repaired and is about the payment
/// whose id and index are the SQL expressions `id` and `index`: it names the payment, a
/// transfer of its transaction or a transfer tied to it as a refund, or a transfer missing
/// on its refund route in a later block.
fn about_payment(id: &str, index: &str) -> String {
    let (payment, transfer) = (
        <&str>::from(FindingSubject::Payment),
        <&str>::from(FindingSubject::Transfer),
    );
    format!(
        "f.repaired_ms IS NULL AND ((f.subject = '{payment}' AND f.tx_id = {id} AND f.position = {index}) \
         OR (f.subject = '{transfer}' AND f.tx_id = {id}) \
         OR (f.subject = '{transfer}' AND EXISTS (SELECT 1 FROM refunds r WHERE r.network = f.network \
             AND r.payment_id = {id} AND r.index_in_tx = {index} \
             AND r.refund_tx_id = f.tx_id AND r.refund_event_index = f.position)) \
         OR (f.refund_from IS NOT NULL AND EXISTS (SELECT 1 FROM payments q WHERE q.network = f.network \
             AND q.payment_id = {id} AND q.index_in_tx = {index} AND q.pay_to = f.refund_from \
             AND q.payer = f.refund_to AND q.asset = f.refund_asset AND q.block_number < f.block_number)))"
    )
}

impl Store {
    /// The last block the scheduled audits of `network` reached: every block from where
    /// the schedule started up to it was compared with the chain.
    pub async fn audited_to(&self, network: &str) -> Result<Option<u64>, StoreError> {
        Ok(self
            .last_audit(network, AuditKind::Scheduled)
            .await?
            .map(|audit| audit.last_block))
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
        repaired: to_u64("audits", "repaired", row.try_get("repaired")?)?,
        finished_ms: row.try_get("finished_ms")?,
    })
}
