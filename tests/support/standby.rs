//! A hot standby of the test Postgres server, for the read-replica tests and benchmark: a
//! base backup of the local server (`pg_basebackup`, log streamed) started on a free port
//! as its own `postgres` process, replaying the primary's log as any streaming replica
//! does. The server must accept replication connections from 127.0.0.1: `./test.sh
//! --prepare` adds `host replication all 127.0.0.1/32 trust` to a local server's
//! `pg_hba.conf`.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection, Row};

use crate::stores::admin_url;
use crate::tools::free_port;

/// A running hot standby of the test server; stopped and removed when dropped.
pub struct Standby {
    /// Its port on 127.0.0.1.
    pub port: u16,
    user: String,
    dir: tempfile::TempDir,
    /// The server binaries' directory.
    bin: PathBuf,
    server: Option<Child>,
}

impl Standby {
    /// Starts a standby of the test server and waits until it accepts reads. `Err` says
    /// why this machine cannot run one (the test server is not local).
    pub async fn start() -> Result<Self, String> {
        let admin: url::Url = admin_url().parse().expect("the test server's URL");
        let host = admin.host_str().unwrap_or_default().to_string();
        if !matches!(host.as_str(), "127.0.0.1" | "localhost") {
            return Err(format!(
                "the test Postgres server at {host} is not on this machine: a standby of it cannot be started here"
            ));
        }
        let primary_port = admin.port().unwrap_or(5432);
        let user = match admin.username() {
            "" => "postgres".to_string(),
            user => user.to_string(),
        };
        let bin = server_binaries(&admin_url()).await;
        let dir = tempfile::Builder::new()
            .prefix("paywatch-standby-")
            .tempdir()
            .expect("a temporary directory");
        let data = dir.path().join("data");
        let server_user = server_user();
        if server_user.is_some() {
            run(Command::new("chown").args(["postgres:postgres"]).arg(dir.path()));
        }
        let backup = as_server_user(server_user, &bin.join("pg_basebackup"))
            .args(["-h", "127.0.0.1", "-p", &primary_port.to_string(), "-U", &user])
            .arg("-D")
            .arg(&data)
            .args(["-R", "-X", "stream", "-c", "fast"])
            .output()
            .expect("run pg_basebackup");
        assert!(
            backup.status.success(),
            "pg_basebackup of the test server failed: {}\nThe server must accept replication connections from 127.0.0.1: run ./test.sh --prepare, or add `host replication all 127.0.0.1/32 trust` to its pg_hba.conf and reload it",
            String::from_utf8_lossy(&backup.stderr)
        );
        // The backup holds the cluster, not Debian's configuration under /etc: the
        // standby gets its own (defaults, trust on loopback).
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhost all all 127.0.0.1/32 trust\n",
        )
        .expect("write the standby's pg_hba.conf");
        std::fs::write(data.join("postgresql.conf"), "").expect("write the standby's postgresql.conf");
        if server_user.is_some() {
            run(Command::new("chown").args(["-R", "postgres:postgres"]).arg(&data));
        }
        let mut standby = Self {
            port: free_port(),
            user,
            dir,
            bin,
            server: None,
        };
        standby.start_server().await;
        Ok(standby)
    }

    /// Starts the standby's server — at first, and again after [`Standby::stop`] — on its
    /// port, from its data directory, and waits until it accepts reads.
    pub async fn start_server(&mut self) {
        assert!(self.server.is_none(), "the standby is running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("server.log"))
            .expect("the standby's log");
        let server = as_server_user(server_user(), &self.bin.join("postgres"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args([
                "-p",
                &self.port.to_string(),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "hot_standby=on",
            ])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", self.dir.path().display()))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the standby's postgres");
        self.server = Some(server);
        self.wait_ready().await;
    }

    /// The URL of `database` on the standby.
    pub fn url_of(&self, database: &str) -> String {
        format!("postgres://{}@127.0.0.1:{}/{database}", self.user, self.port)
    }

    /// The URL of the standby's copy of the database at `primary_url`.
    pub fn url_like(&self, primary_url: &str) -> String {
        let database = primary_url.rsplit('/').next().unwrap_or("postgres");
        self.url_of(database)
    }

    /// Waits until the standby has replayed everything the primary had written when called.
    pub async fn catch_up(&self) {
        let mut primary = PgConnection::connect(&admin_url())
            .await
            .expect("connect to the primary");
        let written: String = sqlx::query("SELECT CAST(pg_current_wal_lsn() AS TEXT)")
            .fetch_one(&mut primary)
            .await
            .expect("the primary's log position")
            .get(0);
        let mut standby = self.connect().await;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let replayed: bool = sqlx::query("SELECT pg_last_wal_replay_lsn() >= CAST($1 AS pg_lsn)")
                .bind(&written)
                .fetch_one(&mut standby)
                .await
                .expect("the standby's replay position")
                .get(0);
            if replayed {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the standby did not replay the primary's log to {written} within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Pauses replay: the standby keeps answering from what it has, however far the
    /// primary moves on.
    pub async fn pause_replay(&self) {
        self.execute("SELECT pg_wal_replay_pause()").await;
    }

    /// Resumes replay.
    pub async fn resume_replay(&self) {
        self.execute("SELECT pg_wal_replay_resume()").await;
    }

    /// Stops the standby at once (an immediate shutdown: as if its machine had gone).
    pub fn stop(&mut self) {
        if let Some(mut server) = self.server.take() {
            let _ = Command::new("kill")
                .args(["-QUIT", &server.id().to_string()])
                .status();
            let _ = server.wait();
        }
    }

    /// The standby's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    async fn execute(&self, sql: &'static str) {
        sqlx::query(sql)
            .execute(&mut self.connect().await)
            .await
            .unwrap_or_else(|e| panic!("{sql} on the standby: {e}"));
    }

    async fn connect(&self) -> PgConnection {
        PgConnection::connect(&self.url_of("postgres"))
            .await
            .unwrap_or_else(|e| panic!("connect to the standby: {e}\n{}", self.log()))
    }

    async fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if PgConnection::connect(&self.url_of("postgres")).await.is_ok() {
                return;
            }
            if let Some(server) = &mut self.server
                && let Ok(Some(status)) = server.try_wait()
            {
                panic!("the standby's postgres exited ({status}):\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "the standby did not start within 60 s:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Standby {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The directory of the server binaries of the version the test server runs.
async fn server_binaries(admin: &str) -> PathBuf {
    let mut conn = PgConnection::connect(admin)
        .await
        .expect("connect to the test server");
    let version: String = sqlx::query("SHOW server_version_num")
        .fetch_one(&mut conn)
        .await
        .expect("the server's version")
        .get(0);
    let major = version.parse::<u32>().expect("a version number") / 10_000;
    let debian = PathBuf::from(format!("/usr/lib/postgresql/{major}/bin"));
    if debian.join("pg_basebackup").exists() {
        return debian;
    }
    let bindir = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    bindir
        .filter(|dir| dir.join("pg_basebackup").exists())
        .unwrap_or_else(|| panic!("no Postgres {major} server binaries (pg_basebackup, postgres) in {debian:?} or pg_config --bindir: install the server package"))
}

/// Postgres refuses to run as root: as root, the standby runs as the `postgres` user,
/// whose user and group ids this returns; `None` when this process is not root.
fn server_user() -> Option<(u32, u32)> {
    let id = |args: &[&str]| -> u32 {
        let out = Command::new("id").args(args).output().expect("run id");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("a numeric id")
    };
    (id(&["-u"]) == 0).then(|| (id(&["-u", "postgres"]), id(&["-g", "postgres"])))
}

/// `program` run as `user` (ids) when given, as this process's user otherwise; its own
/// process either way, so that signals reach it.
fn as_server_user(user: Option<(u32, u32)>, program: &Path) -> Command {
    let mut command = Command::new(program);
    if let Some((uid, gid)) = user {
        command.uid(uid).gid(gid).env("HOME", "/tmp");
    }
    command
}

fn run(command: &mut Command) {
    let status = command.status().expect("run a set-up command");
    assert!(status.success(), "{command:?} failed: {status}");
}
