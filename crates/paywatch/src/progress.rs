//! Progress of a long read over a block range (a backfill, an audit): a bar on a terminal
//! (blocks done, blocks and logs per second, ETA), a plain log line every 10 s otherwise.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How a long read reports progress: a bar on a terminal, log lines elsewhere.
pub(crate) struct Progress {
    /// What the log lines call it (`backfill`, `audit`).
    what: &'static str,
    bar: Option<ProgressBar>,
    start_block: Option<u64>,
    target: u64,
    started: Instant,
    last_line: Instant,
    logs: u64,
}

impl Progress {
    /// Progress of `what` up to block `target`.
    pub(crate) fn new(what: &'static str, target: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} {prefix} [{bar:40}] {pos}/{len} blocks  {per_sec}  {msg}  ETA {eta}",
                )
                .expect("a valid progress template")
                .progress_chars("=> "),
            );
            bar
        });
        Self {
            what,
            bar,
            start_block: None,
            target,
            started: Instant::now(),
            last_line: Instant::now(),
            logs: 0,
        }
    }

    /// Records a range `from..=to` done, holding `logs` logs.
    pub(crate) fn advanced(&mut self, network: &str, from: u64, to: u64, logs: u64) {
        let start = *self.start_block.get_or_insert(from);
        self.logs += logs;
        let done = to.saturating_add(1).saturating_sub(start);
        let total = self.target.saturating_add(1).saturating_sub(start);
        let logs_per_sec = self.logs as f64 / self.started.elapsed().as_secs_f64().max(0.001);
        match &self.bar {
            Some(bar) => {
                bar.set_prefix(network.to_string());
                bar.set_length(total);
                bar.set_position(done.min(total));
                bar.set_message(format!("{logs_per_sec:.0} logs/s"));
            }
            None if self.last_line.elapsed() >= Duration::from_secs(10) => {
                self.last_line = Instant::now();
                tracing::info!(
                    network,
                    block = to,
                    target = self.target,
                    done,
                    total,
                    logs = self.logs,
                    logs_per_sec = logs_per_sec as u64,
                    "{} progress",
                    self.what
                );
            }
            None => {}
        }
    }

    /// Ends the bar.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
