//! Small helpers for SQL text that runs on both SQLite and Postgres.

use crate::Backend;

/// `(…),(…)` placeholders for `rows` rows of `columns` columns. Postgres needs numbered
/// `$N` parameters (sqlx's `QueryBuilder<Any>` would write `?`, which Postgres refuses).
/// SQLite gets anonymous `?`: it resolves each named parameter by walking a list, so
/// binding thousands of `$N` parameters costs quadratic time.
pub(crate) fn values_placeholders(backend: Backend, rows: usize, columns: usize) -> String {
    let mut out = String::with_capacity(rows * columns * 5);
    for row in 0..rows {
        if row > 0 {
            out.push(',');
        }
        out.push('(');
        for col in 0..columns {
            if col > 0 {
                out.push(',');
            }
            match backend {
                Backend::Postgres => {
                    out.push('$');
                    out.push_str(&(row * columns + col + 1).to_string());
                }
                Backend::Sqlite => out.push('?'),
            }
        }
        out.push(')');
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_parameters_row_by_row_on_postgres() {
        assert_eq!(
            values_placeholders(Backend::Postgres, 2, 3),
            "($1,$2,$3),($4,$5,$6)"
        );
        assert_eq!(values_placeholders(Backend::Postgres, 1, 1), "($1)");
        assert_eq!(values_placeholders(Backend::Postgres, 0, 3), "");
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
        assert_eq!(values_placeholders(Backend::Sqlite, 2, 2), "(?,?),(?,?)");
    }
}
