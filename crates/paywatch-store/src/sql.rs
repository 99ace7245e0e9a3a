//! SQL text that runs on both SQLite and Postgres: the one placeholder builder, bound
//! values of statements built from parts, lists of stored spellings, multi-row inserts.

use paywatch_core::records::{EventPosition, RefundRoute};
use sqlx::any::AnyArguments;
use sqlx::query::Query;
use sqlx::{Any, AssertSqlSafe};

use crate::{Backend, StoreError, Tx, to_i64};

/// Writes the bind parameters of one statement, in order — the one place placeholders are
/// written: numbered `$N` on Postgres; on SQLite anonymous `?` where the builder writes
/// every parameter of the statement, and `?N` after hand-written `$1` … `$k` (anonymous
/// parameters after a named one bind wrongly through sqlx). Binding thousands of numbered
/// parameters on SQLite costs quadratic time per statement — the ingest benchmark's SQLite
/// backfill took 6.6 s with `?N` in its multi-row inserts against 0.6 s with `?` — so
/// large statements start with no hand-written parameter. sqlx's `QueryBuilder<Any>`
/// writes `?`, which Postgres refuses.
pub(crate) struct Placeholders {
    backend: Backend,
    bound: usize,
    /// SQLite only: whether hand-written parameters come first.
    after_named: bool,
}

impl Placeholders {
    /// For a statement whose hand-written text binds `$1` … `$count` first.
    pub(crate) fn after(backend: Backend, count: usize) -> Self {
        Self {
            backend,
            bound: count,
            after_named: count > 0,
        }
    }

    /// The next parameter.
    pub(crate) fn next(&mut self) -> String {
        self.bound += 1;
        match self.backend {
            Backend::Postgres => format!("${}", self.bound),
            Backend::Sqlite if self.after_named => format!("?{}", self.bound),
            Backend::Sqlite => "?".to_string(),
        }
    }

    /// `(p, p, …)`: `count` parameters, as an `IN` list or one row of `VALUES`.
    pub(crate) fn list(&mut self, count: usize) -> String {
        let items: Vec<String> = (0..count).map(|_| self.next()).collect();
        format!("({})", items.join(","))
    }

    /// `(…),(…)`: `rows` rows of `columns` parameters, for a multi-row `VALUES`.
    pub(crate) fn rows(&mut self, rows: usize, columns: usize) -> String {
        let rows: Vec<String> = (0..rows).map(|_| self.list(columns)).collect();
        rows.join(",")
    }
}

/// A value bound to a statement built from optional parts.
pub(crate) enum Param {
    Text(String),
    Int(i64),
}

/// The values of a statement built from optional parts, each written into the SQL by
/// [`Placeholders`] as it is pushed.
pub(crate) struct Bindings {
    marks: Placeholders,
    params: Vec<Param>,
}

impl Bindings {
    /// No values yet.
    pub(crate) fn new(backend: Backend) -> Self {
        Self {
            marks: Placeholders::after(backend, 0),
            params: Vec::new(),
        }
    }

    /// Binds `param`; its placeholder, to splice into the SQL.
    pub(crate) fn push(&mut self, param: Param) -> String {
        self.params.push(param);
        self.marks.next()
    }

    /// `sql` with the values bound in order. Only column names, SQL built by paywatch and
    /// placeholders are spliced into `sql`; every value is bound.
    pub(crate) fn query(self, sql: String) -> Query<'static, Any, AnyArguments> {
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for param in self.params {
            query = match param {
                Param::Text(value) => query.bind(value),
                Param::Int(value) => query.bind(value),
            };
        }
        query
    }
}

/// Continues `sql` (a filtered `SELECT`) after the row whose `order` columns — block,
/// transaction, index — hold `after`, in that order, cut to `limit` rows: a keyset page.
pub(crate) fn keyset_page(
    sql: &mut String,
    bindings: &mut Bindings,
    order: [&str; 3],
    after: Option<(i64, String, i64)>,
    limit: u32,
) {
    let [block, tx, index] = order;
    if let Some((after_block, after_tx, after_index)) = after {
        let (b, t, i) = (
            bindings.push(Param::Int(after_block)),
            bindings.push(Param::Text(after_tx)),
            bindings.push(Param::Int(after_index)),
        );
        // A row-value comparison, which both databases answer from the listing index
        // by seeking to the cursor (an OR of the three columns made Postgres scan).
        sql.push_str(&format!(" AND ({block}, {tx}, {index}) > ({b}, {t}, {i})"));
    }
    sql.push_str(&format!(
        " ORDER BY {block}, {tx}, {index} LIMIT {}",
        limit.max(1)
    ));
}

/// `('a', 'b')`: the stored spellings of `values` as an SQL list for `IN`, written from
/// core's enums so that no state, cause or rule is spelled by hand in SQL.
pub(crate) fn quoted_list<T: Copy + Into<&'static str>>(values: &[T]) -> String {
    let quoted: Vec<String> = values
        .iter()
        .map(|v| format!("'{}'", Into::<&'static str>::into(*v)))
        .collect();
    format!("({})", quoted.join(", "))
}

/// Rows per multi-row `INSERT`, measured with the ingest benchmark: large statements pay
/// on SQLite; on Postgres, planning thousands of parameters costs more than the round trips
/// it saves. Both stay well under the parameter limits (32,766 and 65,535).
pub(crate) fn rows_per_insert(backend: Backend) -> usize {
    match backend {
        Backend::Sqlite => 500,
        Backend::Postgres => 100,
    }
}

/// Runs a multi-row `INSERT … VALUES … <suffix>` over `rows` in chunks, binding each row with `bind`.
pub(crate) async fn insert_rows<T>(
    backend: Backend,
    tx: &mut Tx<'_>,
    head: &str,
    suffix: &str,
    columns: usize,
    rows: &[T],
    bind: impl for<'q> Fn(Query<'q, Any, AnyArguments>, &T) -> Result<Query<'q, Any, AnyArguments>, StoreError>,
) -> Result<(), StoreError> {
    for chunk in rows.chunks(rows_per_insert(backend)) {
        let sql = format!(
            "{head} VALUES {} {suffix}",
            Placeholders::after(backend, 0).rows(chunk.len(), columns)
        );
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for row in chunk {
            query = bind(query, row)?;
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

/// `query` with `network` and `route`'s sender, recipient and asset bound, in that order
/// (the first four parameters of a query about one refund route).
pub(crate) fn bind_route<'q>(
    query: Query<'q, Any, AnyArguments>,
    network: &str,
    route: &RefundRoute,
) -> Query<'q, Any, AnyArguments> {
    query
        .bind(network.to_string())
        .bind(route.from.clone())
        .bind(route.to.clone())
        .bind(route.asset.clone())
}

pub(crate) fn bind_position<'q>(
    query: Query<'q, Any, AnyArguments>,
    network: &str,
    position: &EventPosition,
) -> Result<Query<'q, Any, AnyArguments>, StoreError> {
    Ok(query
        .bind(network.to_string())
        .bind(position.tx_id.clone())
        .bind(to_i64("event index", position.event_index)?)
        .bind(to_i64("block number", position.block_number)?)
        .bind(position.block_hash.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_parameters_row_by_row_on_postgres() {
        let rows = |rows, columns| Placeholders::after(Backend::Postgres, 0).rows(rows, columns);
        assert_eq!(rows(2, 3), "($1,$2,$3),($4,$5,$6)");
        assert_eq!(rows(1, 1), "($1)");
        assert_eq!(rows(0, 3), "");
    }

    #[test]
    fn continues_after_hand_written_parameters() {
        let mut marks = Placeholders::after(Backend::Postgres, 1);
        assert_eq!(marks.list(2), "($2,$3)");
        assert_eq!(marks.next(), "$4");
        let mut bindings = Bindings::new(Backend::Postgres);
        assert_eq!(bindings.push(Param::Int(7)), "$1");
        assert_eq!(bindings.push(Param::Text("a".into())), "$2");
    }

    #[test]
    fn lists_stored_spellings() {
        use paywatch_core::state::PaymentState;
        assert_eq!(
            quoted_list(&PaymentState::FINAL),
            "('paid', 'partially_refunded', 'refunded')"
        );
        assert_eq!(quoted_list(&[PaymentState::Pending]), "('pending')");
    }

    #[test]
    fn uses_anonymous_parameters_on_sqlite() {
        assert_eq!(Placeholders::after(Backend::Sqlite, 0).rows(2, 2), "(?,?),(?,?)");
        assert_eq!(Placeholders::after(Backend::Sqlite, 1).list(2), "(?2,?3)");
    }
}
