//! SQLite is single-process: the writing process holds an exclusive lock on a file beside
//! the database for its whole life, so a second writer on the same file is refused at
//! start with an error saying why, instead of two processes ingesting into one file.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::PathBuf;

use anyhow::{Context, bail};

/// The database file a `sqlite:` URL names (without its query), or `None` for memory.
fn sqlite_path(url: &str) -> Option<PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or_default();
    (!path.is_empty() && path != ":memory:").then(|| PathBuf::from(path))
}

/// Takes the writer lock of the SQLite database at `url`; held until the file is dropped.
pub(crate) fn lock_sqlite_writer(url: &str) -> anyhow::Result<Option<File>> {
    let Some(path) = sqlite_path(url) else {
        return Ok(None);
    };
    let mut lock_path = path.clone().into_os_string();
    lock_path.push(".writer-lock");
    let lock_path = PathBuf::from(lock_path);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("cannot open the writer lock {}", lock_path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => bail!(
            "another paywatch process is already writing to {}: SQLite takes one writer. Stop it, \
             run this one with --role api to serve queries from the same file, or use Postgres \
             (--database-url postgres://…) to run several writing replicas",
            path.display()
        ),
        Err(TryLockError::Error(error)) => {
            Err(error).with_context(|| format!("cannot lock {}", lock_path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_sqlite_urls() {
        assert_eq!(sqlite_path("sqlite://paywatch.db"), Some("paywatch.db".into()));
        assert_eq!(
            sqlite_path("sqlite:///var/lib/pw.db?mode=rwc"),
            Some("/var/lib/pw.db".into())
        );
        assert_eq!(sqlite_path("sqlite::memory:"), None);
        assert_eq!(sqlite_path("postgres://x@y/z"), None);
    }

    #[test]
    fn a_second_writer_is_refused() {
        let dir = std::env::temp_dir().join(format!("paywatch-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("db.sqlite").display());
        let first = lock_sqlite_writer(&url).unwrap();
        assert!(first.is_some());
        let second = lock_sqlite_writer(&url).unwrap_err().to_string();
        assert!(second.contains("another paywatch process"), "{second}");
        drop(first);
        assert!(
            lock_sqlite_writer(&url).unwrap().is_some(),
            "free once the first is gone"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
