//! The schema's migrations as each backend applies them: a migration file may hold a
//! `-- postgres:begin` … `-- postgres:end` and a `-- sqlite:begin` … `-- sqlite:end`
//! section, for what the two databases spell differently (SQLite adds a CHECK constraint
//! to an existing table only by rebuilding the table); each backend runs the rest of the
//! file and its own section. A migration keeps its file's checksum, so an edited file is
//! still noticed.

use sqlx::AssertSqlSafe;
use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, Migrator};

use crate::Backend;

/// `embedded` (the store's migrations, or a test's prefix of them) with each file cut to
/// `backend`'s sections, each keeping its file's checksum.
pub fn migrator_for(backend: Backend, embedded: &Migrator) -> Migrator {
    let migrations = embedded
        .migrations
        .iter()
        .map(|m| {
            let sql = sql_for(backend, m.sql.as_str());
            Migration {
                version: m.version,
                description: m.description.clone(),
                migration_type: m.migration_type,
                sql: AssertSqlSafe(sql).into_sql_str(),
                checksum: m.checksum.clone(),
                no_tx: m.no_tx,
            }
        })
        .collect();
    Migrator::with_migrations(migrations)
}

/// `sql` without the sections of the other backend (and without the section markers).
pub(crate) fn sql_for(backend: Backend, sql: &str) -> String {
    let own = match backend {
        Backend::Postgres => "postgres",
        Backend::Sqlite => "sqlite",
    };
    let mut kept = String::with_capacity(sql.len());
    let mut section: Option<String> = None;
    for line in sql.split_inclusive('\n') {
        let marker = line.trim().strip_prefix("-- ");
        if let Some(name) = marker.and_then(|m| m.strip_suffix(":begin")) {
            section = Some(name.to_string());
            continue;
        }
        if marker.is_some_and(|m| m.ends_with(":end")) {
            section = None;
            continue;
        }
        if section.as_deref().is_none_or(|name| name == own) {
            kept.push_str(line);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "CREATE TABLE t (a TEXT);\n-- postgres:begin\nALTER TABLE t ADD CHECK (a <> '');\n-- postgres:end\n-- sqlite:begin\nCREATE TRIGGER x BEFORE INSERT ON t BEGIN SELECT 1; END;\n-- sqlite:end\nSELECT 2;\n";

    #[test]
    fn each_backend_keeps_the_shared_lines_and_its_own_section() {
        assert_eq!(
            sql_for(Backend::Postgres, FILE),
            "CREATE TABLE t (a TEXT);\nALTER TABLE t ADD CHECK (a <> '');\nSELECT 2;\n"
        );
        assert_eq!(
            sql_for(Backend::Sqlite, FILE),
            "CREATE TABLE t (a TEXT);\nCREATE TRIGGER x BEFORE INSERT ON t BEGIN SELECT 1; END;\nSELECT 2;\n"
        );
        assert_eq!(sql_for(Backend::Sqlite, "SELECT 1;\n"), "SELECT 1;\n");
    }
}
