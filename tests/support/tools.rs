//! Locates the npm-installed tools (anvil, the x402 SDK), installing them with `npm ci` on first use;
//! picks free loopback ports; helpers for tests that run the `paywatch` binary.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository root")
        .to_path_buf()
}

/// Path of the `anvil` binary: `$PAYWATCH_ANVIL`, else `node_modules/.bin/anvil`, from
/// [`npm_tools`].
pub fn anvil_path() -> PathBuf {
    if let Some(path) = std::env::var_os("PAYWATCH_ANVIL") {
        return PathBuf::from(path);
    }
    npm_tools().join(".bin/anvil")
}

/// The repository's `node_modules` (anvil, solc, the x402 SDK), running `npm ci` (under a
/// file lock, once for all test processes) when a package of package.json is missing.
pub fn npm_tools() -> PathBuf {
    let root = repo_root();
    let modules = root.join("node_modules");
    let installed = || {
        [".bin/anvil", "@x402/evm/package.json", "@x402/svm/package.json"]
            .iter()
            .all(|path| modules.join(path).exists())
    };
    if installed() {
        return modules;
    }
    let lock = File::create(std::env::temp_dir().join("paywatch-npm-ci.lock")).expect("create lock file");
    lock.lock().expect("lock npm install");
    if !installed() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&root)
            .status()
            .expect("run `npm ci` (is Node.js installed?) to install the npm tools");
        assert!(
            status.success(),
            "`npm ci` failed; run it in {} by hand",
            root.display()
        );
    }
    modules
}

/// Runs `node ARGS` from the repository root with the npm tools on its module path (the
/// x402 SDK's scripts of `tests/sdk/`), and parses what it prints as JSON; panics with
/// node's error output when it fails.
pub fn node_json<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> serde_json::Value {
    let output = Command::new("node")
        .args(args)
        .env("NODE_PATH", npm_tools())
        .current_dir(repo_root())
        .output()
        .expect("run node (installed with npm)");
    assert!(
        output.status.success(),
        "node {:?}: {}",
        args.first().map(|a| a.as_ref().to_string_lossy().into_owned()),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("node prints JSON")
}

/// A benchmark's setting from the environment variable `name` (`PAYWATCH_BENCH_…`), or
/// `default` when it is unset or not a number.
pub fn bench_setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A loopback port free at the time of asking.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// The `paywatch` binary at `binary` (an integration test's
/// `env!("CARGO_BIN_EXE_paywatch")`) with `args`, in `dir` (where its `chains.toml` is), on
/// the store at `database_url`, logging at `info`, with no store or configuration taken
/// from the caller's environment.
pub fn paywatch_on(binary: &str, dir: &Path, database_url: &str, args: &[&str]) -> Command {
    let mut command = Command::new(binary);
    command
        .current_dir(dir)
        .args(["--database-url", database_url])
        .args(args)
        .env("RUST_LOG", "info")
        .env_remove("PAYWATCH_DATABASE_URL")
        .env_remove("PAYWATCH_CHAINS");
    command
}

/// A finished process's standard output and error, as one text.
pub fn output_text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Waits until a paywatch at `listen` (`host:port`) answers `/healthz` with 200; panics
/// after `within`.
pub async fn wait_serving(listen: &str, within: Duration) {
    let deadline = Instant::now() + within;
    while reqwest::get(format!("http://{listen}/healthz"))
        .await
        .map(|r| r.status().as_u16())
        .ok()
        != Some(200)
    {
        assert!(Instant::now() < deadline, "paywatch did not start serving");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A `/proc/<process>/status` figure (`VmRSS`, `VmHWM`) of `process` (`self` or a pid),
/// in MiB (NaN where the system has none).
fn status_mib(process: &str, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{process}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Resident set size of this process, in MiB (benchmarks).
pub fn rss_mib() -> f64 {
    status_mib("self", "VmRSS:")
}

/// Peak resident set size of this process since the last [`reset_peak_rss`], in MiB.
pub fn peak_rss_mib() -> f64 {
    status_mib("self", "VmHWM:")
}

/// Resident set size of the process `pid` (a `paywatch run` child, say), in MiB.
pub fn process_rss_mib(pid: u32) -> f64 {
    status_mib(&pid.to_string(), "VmRSS:")
}

/// Peak resident set size of the process `pid` since it started, in MiB.
pub fn process_peak_rss_mib(pid: u32) -> f64 {
    status_mib(&pid.to_string(), "VmHWM:")
}

/// CPU time (user + system) the process `pid` has used, in seconds (NaN where the system
/// has no `/proc/<pid>/stat`).
pub fn process_cpu_seconds(pid: u32) -> f64 {
    stat_of(pid).map_or(f64::NAN, |stat| stat.cpu_seconds)
}

/// CPU time (user + system) the process `pid` and every process it started, and they in
/// turn, are using, in seconds: a server behind a launcher script (npm's `anvil` runs the
/// binary as a child of Node.js). Processes that have exited no longer count.
pub fn process_tree_cpu_seconds(pid: u32) -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return f64::NAN;
    };
    let processes: Vec<(u32, ProcessStat)> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|id| Some((id, stat_of(id)?)))
        .collect();
    let mut tree = vec![pid];
    let mut cpu = 0.0;
    while let Some(parent) = tree.pop() {
        for (id, stat) in &processes {
            if *id == parent {
                cpu += stat.cpu_seconds;
            }
            if stat.parent == parent {
                tree.push(*id);
            }
        }
    }
    cpu
}

/// What `/proc/<pid>/stat` says of a process.
struct ProcessStat {
    parent: u32,
    cpu_seconds: f64,
}

fn stat_of(pid: u32) -> Option<ProcessStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces, inside parentheses): state is
    // field 3, the parent's id 4, utime 14 and stime 15, in clock ticks.
    let (_, after_name) = stat.rsplit_once(") ")?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |i: usize| fields.get(i - 3).and_then(|v| v.parse::<f64>().ok());
    Some(ProcessStat {
        parent: fields.get(1)?.parse().ok()?,
        cpu_seconds: (field(14)? + field(15)?) / clock_ticks_per_second(),
    })
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`, asked once; 100 where it
/// cannot be asked).
fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::LazyLock<f64> = std::sync::LazyLock::new(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(100.0)
    });
    *TICKS
}

/// Resets the peak resident set size to the current one (Linux `clear_refs` 5).
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}
