//! Structured logs (`tracing`, text or JSON) and the Prometheus metrics recorder.

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the log subscriber; `RUST_LOG` filters (default `info`).
pub fn init_logs(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

/// Installs the Prometheus recorder and describes paywatch's metrics.
pub fn init_metrics() -> anyhow::Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new().install_recorder()?;
    metrics::describe_gauge!(
        "paywatch_chain_head_block",
        "Latest block number the RPC reported"
    );
    metrics::describe_gauge!("paywatch_cursor_block", "Highest block read and committed");
    metrics::describe_gauge!(
        "paywatch_head_lag_blocks",
        "Blocks between the chain head and the highest committed block"
    );
    metrics::describe_counter!("paywatch_rows_ingested_total", "Rows committed, by kind");
    metrics::describe_counter!("paywatch_blocks_ingested_total", "Blocks read and committed");
    metrics::describe_counter!(
        "paywatch_rpc_errors_total",
        "Failed RPC calls, by method and kind"
    );
    metrics::describe_histogram!("paywatch_rpc_latency_seconds", "RPC call latency, by method");
    metrics::describe_counter!(
        "paywatch_worker_errors_total",
        "Worker steps that failed after retries"
    );
    metrics::describe_counter!("paywatch_reorgs_total", "Reorgs detected and rolled back");
    metrics::describe_histogram!("paywatch_reorg_depth_blocks", "Depth of rolled-back reorgs");
    metrics::describe_counter!(
        "paywatch_deep_reorgs_total",
        "Reorgs that rolled back payments already reported paid"
    );
    Ok(handle)
}
