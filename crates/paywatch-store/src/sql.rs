//! Small helpers for SQL text that runs on both SQLite and Postgres.

/// `($1,$2,$3),($4,$5,$6)` for `rows` rows of `columns` columns. Both databases accept
/// numbered `$N` parameters; sqlx's `QueryBuilder<Any>` would write `?`, which Postgres refuses.
pub(crate) fn values_placeholders(rows: usize, columns: usize) -> String {
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
            out.push('$');
            out.push_str(&(row * columns + col + 1).to_string());
        }
        out.push(')');
    }
    out
}

/// Rows per multi-row `INSERT`: well under SQLite's 32,766 and Postgres' 65,535 parameters.
pub(crate) const ROWS_PER_INSERT: usize = 500;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_parameters_row_by_row() {
        assert_eq!(values_placeholders(2, 3), "($1,$2,$3),($4,$5,$6)");
        assert_eq!(values_placeholders(1, 1), "($1)");
        assert_eq!(values_placeholders(0, 3), "");
    }
}
