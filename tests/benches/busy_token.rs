//! Mainnet-shaped ingest benchmark: N real EIP-3009 payments (default 20,000;
//! `PAYWATCH_BENCH_PAYMENTS`), each amid M unrelated transfers of the same token (default
//! 50; `PAYWATCH_BENCH_NOISE`) that eight router-like contracts spray to fresh addresses,
//! as on a busy token where almost all traffic is not x402. The same payments are also sent
//! to a second node without the noise, each of its blocks holding as many payments as
//! the busy chain's block did. Each chain is backfilled by the EVM worker into a
//! fresh SQLite file and a fresh Postgres database, in one run. Reports logs and payments
//! read per second, the bytes the store takes per payment (indexes included), the noisy
//! store's size against the quiet one's, and the process's peak resident memory, also for
//! the busy chain read with `pay_to` set (logs counted as the node served them); then the
//! bloom check's cost on the busy chain (headers and block receipts read, time), with
//! every transfer read and with only the seller's (`pay_to`).
//!
//! Run: `cargo bench -p paywatch-tests --bench busy_token`

use paywatch_tests::batch::busy_and_quiet_chains;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, timed_backfill};
use paywatch_tests::proxy::{Faults, RpcProxy};
use paywatch_tests::stores::{Kind, stored_bytes, stored_bytes_by_relation, table_rows};
use paywatch_tests::token::{SELLER, Token};
use paywatch_tests::tools::bench_setting;

struct Figures {
    /// Logs the node served, where a proxy counted them.
    logs_served: Option<u64>,
    seconds: f64,
    payments: u64,
    transfers_kept: u64,
    /// Kept transfers that are rows of their own (not a payment's, which its row holds).
    transfer_rows: u64,
    bytes: u64,
    relations: Vec<(String, u64)>,
    peak_mib: f64,
}

async fn backfill(kind: Kind, network: &LocalNetwork) -> Figures {
    let run = timed_backfill(kind, network).await;
    let (transfers_kept, _authorizations, payments) = run.store.row_counts(&run.network).await.unwrap();
    run.store.close().await;
    Figures {
        logs_served: None,
        seconds: run.seconds,
        payments,
        transfers_kept,
        transfer_rows: table_rows(&run.db, "transfers", &run.network).await,
        bytes: stored_bytes(&run.db).await,
        relations: stored_bytes_by_relation(&run.db).await,
        peak_mib: run.peak_mib,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let count = bench_setting("PAYWATCH_BENCH_PAYMENTS", 20_000);
    let noise = bench_setting("PAYWATCH_BENCH_NOISE", 50);
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let ((busy, busy_token), (quiet, quiet_token)) = busy_and_quiet_chains(count, noise).await;

    let settings = |chain: &Chain, token: &Token| {
        let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
        network.max_block_range = 2_000;
        network.rpc_timeout_ms = 120_000;
        network
    };
    let (busy_net, quiet_net) = (settings(&busy, &busy_token), settings(&quiet, &quiet_token));
    // The busy chain read with `pay_to`, through a proxy that counts the logs served.
    let seller_only = |kind: Kind| {
        let (chain, token) = (&busy, &busy_token);
        async move {
            let proxy = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
            let mut network = settings(chain, token);
            network.rpc_url = proxy.url.clone();
            network.pay_to = vec![chain.account(SELLER)];
            let figures = backfill(kind, &network).await;
            Figures {
                logs_served: Some(proxy.stats.logs_served.load(std::sync::atomic::Ordering::SeqCst)),
                ..figures
            }
        }
    };
    let runs = [
        ("busy", "SQLite", backfill(Kind::Sqlite, &busy_net).await),
        ("busy", "Postgres", backfill(Kind::Postgres, &busy_net).await),
        ("quiet", "SQLite", backfill(Kind::Sqlite, &quiet_net).await),
        ("quiet", "Postgres", backfill(Kind::Postgres, &quiet_net).await),
        ("busy, pay_to", "SQLite", seller_only(Kind::Sqlite).await),
        ("busy, pay_to", "Postgres", seller_only(Kind::Postgres).await),
    ];

    println!(
        "\npaywatch busy-token benchmark: {count} x402 payments, {noise} unrelated transfers each on the busy chain, one process"
    );
    println!(
        "| chain | store | payments | logs read | transfers kept | seconds | logs/s | payments/s | bytes/payment | peak RSS (MiB) |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (chain, store, f) in &runs {
        assert_eq!(f.payments, count as u64, "{chain} {store}: every payment indexed");
        // Each payment is an AuthorizationUsed and a Transfer; the noise is Transfers; the
        // mints of the payers and routers are a few more.
        let logs = f.logs_served.unwrap_or_else(|| {
            let noise_logs = if *chain == "busy" { count * noise } else { 0 };
            (count * 2 + noise_logs) as u64
        });
        println!(
            "| {chain} | {store} | {} | {logs} | {} | {:.2} | {:.0} | {:.0} | {:.0} | {:.0} |",
            f.payments,
            f.transfers_kept,
            f.seconds,
            logs as f64 / f.seconds,
            f.payments as f64 / f.seconds,
            f.bytes as f64 / f.payments as f64,
            f.peak_mib
        );
    }
    let size = |chain: &str, store: &str| {
        runs.iter()
            .find(|(c, s, _)| *c == chain && *s == store)
            .map_or(f64::NAN, |(_, _, f)| f.bytes as f64)
    };
    println!(
        "busy store size / quiet store size: SQLite {:.3}, Postgres {:.3}",
        size("busy", "SQLite") / size("quiet", "SQLite"),
        size("busy", "Postgres") / size("quiet", "Postgres")
    );

    // Where the bytes go: each table and index of the busy stores, per payment.
    println!("\n| busy chain: table or index | SQLite bytes/payment | Postgres bytes/payment |");
    println!("| --- | ---: | ---: |");
    let (sqlite, postgres) = (&runs[0].2, &runs[1].2);
    let per_payment = |f: &Figures, name: &str| {
        f.relations
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0.0, |(_, bytes)| *bytes as f64 / f.payments as f64)
    };
    let mut names: Vec<&str> = sqlite
        .relations
        .iter()
        .chain(&postgres.relations)
        .map(|(n, _)| n.as_str())
        .collect();
    names.sort_by(|a, b| {
        (per_payment(sqlite, b) + per_payment(postgres, b))
            .total_cmp(&(per_payment(sqlite, a) + per_payment(postgres, a)))
            .then(a.cmp(b))
    });
    names.dedup();
    for name in names {
        let (s, p) = (per_payment(sqlite, name), per_payment(postgres, name));
        if s >= 1.0 || p >= 1.0 {
            println!("| `{name}` | {s:.0} | {p:.0} |");
        }
    }
    // A kept transfer is a `transfers` row (the table and its indexes: SQLite names a
    // primary key `sqlite_autoindex_transfers_1`, Postgres `transfers_pkey`) unless it is
    // a payment's own, which its payment row holds at no further cost.
    let per_row = |f: &Figures| {
        let bytes: u64 = f
            .relations
            .iter()
            .filter(|(n, _)| n.contains("transfers"))
            .map(|(_, b)| b)
            .sum();
        bytes as f64 / f.transfer_rows.max(1) as f64
    };
    for (store, f) in [("SQLite", sqlite), ("Postgres", postgres)] {
        match f.transfer_rows {
            0 => println!(
                "{store}: no transfers rows, the {} kept transfers are all payments' own",
                f.transfers_kept
            ),
            rows => println!(
                "{store}: {rows} transfers rows of {} kept transfers, {:.0} bytes per row (its table and indexes)",
                f.transfers_kept,
                per_row(f)
            ),
        }
    }

    // The bloom check's cost on the busy chain, read through a proxy that counts requests:
    // every transfer, and only the seller's (`pay_to`), on SQLite.
    println!("\n| busy chain, SQLite | seconds | blocks | headers read | block receipts read |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    let blocks = busy.block_number().await + 1;
    let unchecked = runs[0].2.seconds;
    println!("| no bloom check | {unchecked:.2} | {blocks} | – | – |");
    for (name, pay_to) in [
        ("bloom check", Vec::new()),
        ("bloom check, pay_to", vec![busy.account(SELLER)]),
    ] {
        let proxy = RpcProxy::start(&busy.endpoint(), Faults::default()).await;
        let mut network = settings(&busy, &busy_token);
        network.rpc_url = proxy.url.clone();
        network.bloom_check = true;
        network.pay_to = pay_to;
        let run = backfill(Kind::Sqlite, &network).await;
        assert_eq!(run.payments, count as u64, "{name}: every payment indexed");
        println!(
            "| {name} | {:.2} | {blocks} | {} | {} |",
            run.seconds,
            proxy.stats.calls_of("eth_getBlockByNumber"),
            proxy.stats.calls_of("eth_getBlockReceipts")
        );
    }
}
