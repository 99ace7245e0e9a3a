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
    fn uses_anonymous_parameters_on_sqlite() {
        assert_eq!(values_placeholders(Backend::Sqlite, 2, 2), "(?,?),(?,?)");
    }
}
