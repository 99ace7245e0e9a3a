//! Structured logs (`tracing`, text or JSON) and the Prometheus metrics recorder.

use std::io::IsTerminal;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the log subscriber; `RUST_LOG` filters (default `info`). Text lines are
/// coloured only on a terminal (and never with `NO_COLOR` set), so a journal or a log file
/// gets no escape codes.
pub(crate) fn init_logs(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let colour =
        std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

/// Installs the Prometheus recorder and describes paywatch's metrics.
pub(crate) fn init_metrics() -> anyhow::Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new().install_recorder()?;
    paywatch_chain::describe_metrics();
    paywatch_query::describe_metrics();
    Ok(handle)
}
