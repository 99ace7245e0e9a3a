//! The metrics of chain workers, declared once: the same names and labels on every chain,
//! and one description of each for `/metrics`.

/// The rows `paywatch_rows_ingested_total` counts, by its `kind` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum RowKind {
    /// A token transfer kept by the store.
    Transfer,
    /// An authorization (EIP-3009 `AuthorizationUsed`) kept by the store.
    Authorization,
    /// A payment.
    Payment,
}

/// The worker metrics of one network (label `network`).
#[derive(Debug, Clone)]
pub struct ChainMetrics {
    network: String,
}

impl ChainMetrics {
    /// The metrics of `network`.
    pub fn new(network: &str) -> Self {
        Self {
            network: network.to_string(),
        }
    }

    /// The latest block (slot) the node reported.
    pub fn head(&self, head: u64) {
        metrics::gauge!("paywatch_chain_head_block", "network" => self.network.clone()).set(head as f64);
    }

    /// How far `paid` lags the head, in seconds of block time.
    pub fn paid_lag_seconds(&self, seconds: u64) {
        metrics::gauge!("paywatch_paid_lag_seconds", "network" => self.network.clone()).set(seconds as f64);
    }

    /// Everything up to `indexed_to` is read and committed, with the head at `head`.
    pub fn progress(&self, indexed_to: u64, head: u64) {
        metrics::gauge!("paywatch_cursor_block", "network" => self.network.clone()).set(indexed_to as f64);
        metrics::gauge!("paywatch_head_lag_blocks", "network" => self.network.clone())
            .set(head.saturating_sub(indexed_to) as f64);
    }

    /// `n` rows of `kind` committed.
    pub fn rows(&self, kind: RowKind, n: usize) {
        metrics::counter!("paywatch_rows_ingested_total", "network" => self.network.clone(), "kind" => <&str>::from(kind))
            .increment(n as u64);
    }

    /// `n` transfers read that were neither a payment's nor a possible refund, not stored.
    pub fn transfers_skipped(&self, n: usize) {
        metrics::counter!("paywatch_transfers_skipped_total", "network" => self.network.clone())
            .increment(n as u64);
    }

    /// `n` transfers kept as possible refunds pruned once examined and past the window.
    pub fn transfers_pruned(&self, n: u64) {
        metrics::counter!("paywatch_transfers_pruned_total", "network" => self.network.clone()).increment(n);
    }

    /// `n` more blocks (slots) read and committed.
    pub fn blocks(&self, n: u64) {
        metrics::counter!("paywatch_blocks_ingested_total", "network" => self.network.clone()).increment(n);
    }

    /// How long reading a batch from the node took.
    pub fn batch_read(&self, seconds: f64) {
        metrics::histogram!("paywatch_batch_read_seconds", "network" => self.network.clone()).record(seconds);
    }

    /// How long committing a batch took.
    pub fn batch_commit(&self, seconds: f64) {
        metrics::histogram!("paywatch_batch_commit_seconds", "network" => self.network.clone())
            .record(seconds);
    }

    /// A worker step completed, now.
    pub fn stepped(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64());
        metrics::gauge!("paywatch_worker_last_step_timestamp_seconds", "network" => self.network.clone())
            .set(now);
    }

    /// The worker runs (`true`) or stopped for good on an error retrying cannot heal.
    pub fn worker_running(&self, running: bool) {
        metrics::gauge!("paywatch_worker_running", "network" => self.network.clone()).set(if running {
            1.0
        } else {
            0.0
        });
    }

    /// A worker step failed (after its RPC retries).
    pub fn worker_error(&self) {
        metrics::counter!("paywatch_worker_errors_total", "network" => self.network.clone()).increment(1);
    }

    /// An RPC request of `method` (one call, or one JSON-RPC batch of them) took `seconds`,
    /// and failed as `failure` if it did.
    pub fn rpc_call(&self, method: &'static str, seconds: f64, failure: Option<&'static str>) {
        metrics::histogram!("paywatch_rpc_latency_seconds", "network" => self.network.clone(), "method" => method)
            .record(seconds);
        if let Some(kind) = failure {
            metrics::counter!(
                "paywatch_rpc_errors_total",
                "network" => self.network.clone(),
                "method" => method,
                "kind" => kind
            )
            .increment(1);
        }
    }

    /// `n` logs that the `endpoint` provider (`primary` or `verifier`) left out of an
    /// answer or made up, found by cross-checking it with the other.
    pub fn rpc_disagreements(&self, endpoint: &'static str, n: usize) {
        metrics::counter!(
            "paywatch_rpc_disagreements_total",
            "network" => self.network.clone(),
            "endpoint" => endpoint
        )
        .increment(n as u64);
    }

    /// The RPC endpoint `endpoint` (scheme, host and port) serves another chain: dropped
    /// from rotation.
    pub fn endpoint_refused(&self, endpoint: &str) {
        metrics::counter!(
            "paywatch_rpc_endpoints_refused_total",
            "network" => self.network.clone(),
            "endpoint" => endpoint.to_string()
        )
        .increment(1);
    }

    /// An answer of an RPC provider refused as one a correct node cannot give, by `kind`
    /// (made-up blocks, pending or removed logs, …); the step is read again.
    pub fn bad_answer(&self, kind: &'static str) {
        metrics::counter!("paywatch_rpc_bad_answers_total", "network" => self.network.clone(), "kind" => kind)
            .increment(1);
    }

    /// The bloom check read the receipts of `n` blocks whose bloom may hold a wanted log
    /// although `eth_getLogs` returned none for them.
    pub fn bloom_receipt_reads(&self, n: usize) {
        metrics::counter!("paywatch_bloom_receipt_reads_total", "network" => self.network.clone())
            .increment(n as u64);
    }

    /// An audit read every block up to `last_block` again and found `differences` between
    /// the store and the chain in them.
    pub fn audited(&self, last_block: u64, differences: usize) {
        metrics::gauge!("paywatch_audited_block", "network" => self.network.clone()).set(last_block as f64);
        metrics::counter!("paywatch_audit_differences_total", "network" => self.network.clone())
            .increment(differences as u64);
    }

    /// A reorg `depth` blocks deep was rolled back; `deep` when it removed paid payments.
    pub fn reorg(&self, depth: u64, deep: bool) {
        metrics::counter!("paywatch_reorgs_total", "network" => self.network.clone()).increment(1);
        metrics::histogram!("paywatch_reorg_depth_blocks", "network" => self.network.clone())
            .record(depth as f64);
        if deep {
            metrics::counter!("paywatch_deep_reorgs_total", "network" => self.network.clone()).increment(1);
        }
    }
}

/// Describes every chain-worker and RPC metric to the installed recorder.
pub fn describe_metrics() {
    metrics::describe_gauge!(
        "paywatch_chain_head_block",
        "Latest block number the RPC reported"
    );
    metrics::describe_gauge!("paywatch_cursor_block", "Highest block read and committed");
    metrics::describe_gauge!(
        "paywatch_paid_lag_seconds",
        "Block time between the chain head and the highest final block: how long `paid` lags"
    );
    metrics::describe_gauge!(
        "paywatch_head_lag_blocks",
        "Blocks between the chain head and the highest committed block"
    );
    metrics::describe_counter!("paywatch_rows_ingested_total", "Rows committed, by kind");
    metrics::describe_counter!("paywatch_blocks_ingested_total", "Blocks read and committed");
    metrics::describe_counter!(
        "paywatch_transfers_skipped_total",
        "Transfers read that were neither part of a payment nor a possible refund, not stored"
    );
    metrics::describe_counter!(
        "paywatch_transfers_pruned_total",
        "Transfers kept as possible refunds, deleted once examined and older than the refund window"
    );
    metrics::describe_histogram!(
        "paywatch_batch_read_seconds",
        "Time to read a batch from the node"
    );
    metrics::describe_histogram!(
        "paywatch_batch_commit_seconds",
        "Time to commit a batch to the store"
    );
    metrics::describe_counter!(
        "paywatch_rpc_errors_total",
        "Failed RPC calls, by method and kind"
    );
    metrics::describe_histogram!(
        "paywatch_rpc_latency_seconds",
        "Latency of each RPC request, by method (a JSON-RPC batch of one method is one request)"
    );
    metrics::describe_counter!(
        "paywatch_worker_errors_total",
        "Worker steps that failed after retries"
    );
    metrics::describe_gauge!(
        "paywatch_worker_last_step_timestamp_seconds",
        "When the worker last completed a step, Unix seconds: a network is stalled when this stops moving"
    );
    metrics::describe_gauge!(
        "paywatch_worker_running",
        "1 while the worker runs, 0 once an error retrying cannot heal stopped it (paywatch status says why)"
    );
    metrics::describe_counter!(
        "paywatch_rpc_disagreements_total",
        "Logs a provider left out or made up, found by cross-checking it with another, by endpoint (primary, verifier)"
    );
    metrics::describe_counter!(
        "paywatch_rpc_endpoints_refused_total",
        "RPC endpoints found serving another chain (chain id, genesis hash) and dropped from rotation, by endpoint"
    );
    metrics::describe_counter!(
        "paywatch_rpc_bad_answers_total",
        "RPC answers refused as ones a correct node cannot give (a log naming a block hash its block's header does not have, a pending or removed log, …), by kind; the range is read again"
    );
    metrics::describe_counter!(
        "paywatch_bloom_receipt_reads_total",
        "Blocks whose receipts the bloom check read: no log came back for them, but their bloom may hold one"
    );
    metrics::describe_gauge!(
        "paywatch_audited_block",
        "Highest block the scheduled audit read again and compared with the store"
    );
    metrics::describe_counter!(
        "paywatch_audit_differences_total",
        "Differences between the store and the chain found by audits (missing, made-up or differing payments and transfers)"
    );
    metrics::describe_counter!("paywatch_reorgs_total", "Reorgs detected and rolled back");
    metrics::describe_histogram!("paywatch_reorg_depth_blocks", "Depth of rolled-back reorgs");
    metrics::describe_counter!(
        "paywatch_deep_reorgs_total",
        "Reorgs that rolled back payments already reported paid"
    );
}
