//! Several networks in one process, in one run: one `paywatch run` (embedded SQLite)
//! watching eight EVM networks — eight anvil nodes with the chain ids and block times of
//! Base, Base Sepolia, Arbitrum One and Sepolia, Polygon, Ethereum, Avalanche and Monad,
//! mined by this benchmark on their block times — and one Solana validator, while real
//! payments arrive on all nine at once (default 5 a second on each;
//! `PAYWATCH_BENCH_NETWORKS_RATE`, for `PAYWATCH_BENCH_NETWORKS_SECS` seconds, default
//! 60). Every payment's `pending` and `paid` events are read from the SSE stream and
//! reported per network as lags (p50 / p95 / max):
//!
//! - EVM `mined → pending`: from the moment its block was mined to its `pending` event;
//!   `final → paid`: from the moment the block that makes it `confirmations` deep was
//!   mined to its `paid` event — paywatch's own delay, not the rule's;
//! - Solana `sent → pending` and `sent → paid`: from its submission (the cluster's
//!   confirmation and finalization are inside these).
//!
//! And the process's CPU (average over the load, in cores) and peak RSS.
//!
//! Run: `cargo bench -p paywatch --bench networks`

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy::primitives::{Address, Bytes};
use alloy::providers::Provider;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, SolanaLocal};
use paywatch_tests::sse::EventClient;
use paywatch_tests::token::{FACILITATOR, Token, payment_calls};
use paywatch_tests::tools::{
    bench_setting, free_port, process_cpu_seconds, process_peak_rss_mib, wait_serving,
};
use paywatch_tests::validator::{TokenMarket, TokenProgram, Validator};
use solana_signer::Signer;
use tokio_util::sync::CancellationToken;

/// The EVM networks: alias, chain id, block time in milliseconds.
const EVM_NETWORKS: [(&str, u64, u64); 8] = [
    ("base", 8453, 2_000),
    ("base-sepolia", 84532, 2_000),
    ("arbitrum", 42161, 250),
    ("arbitrum-sepolia", 421614, 250),
    ("polygon", 137, 2_000),
    ("ethereum", 1, 12_000),
    ("avalanche", 43114, 2_000),
    ("monad", 143, 400),
];
/// Blocks deep for `paid` on every EVM network (the lag measured is paywatch's, after the
/// rule is met).
const CONFIRMATIONS: u64 = 3;
const DECIMALS: u8 = 6;

/// When each block of a chain was mined, by number.
type MinedAt = Arc<Mutex<HashMap<u64, Instant>>>;

/// One EVM network under load.
struct EvmLoad {
    alias: &'static str,
    block_ms: u64,
    chain: Arc<Chain>,
    calls: Vec<(Address, Bytes)>,
    mined_at: MinedAt,
}

/// A payment's `pending` and `paid` event arrival, as read from the stream.
#[derive(Default, Clone, Copy)]
struct Seen {
    block: Option<u64>,
    pending: Option<Instant>,
    paid: Option<Instant>,
}

/// Mines a block every `block_ms` until `stop`, recording when each was mined.
async fn mine_on_time(chain: Arc<Chain>, block_ms: u64, mined_at: MinedAt, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(Duration::from_millis(block_ms));
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {
                chain.mine(1).await;
                let number = chain.block_number().await;
                mined_at.lock().unwrap().insert(number, Instant::now());
            }
        }
    }
}

/// Sends `calls` from the facilitator, `rate` a second, without waiting for them.
async fn send_on_time(chain: Arc<Chain>, calls: Vec<(Address, Bytes)>, rate: u64) {
    let from = chain.account(FACILITATOR);
    let first_nonce = chain.provider.get_transaction_count(from).await.expect("nonce");
    let mut ticks = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
    for (i, (to, input)) in calls.into_iter().enumerate() {
        ticks.tick().await;
        let request = alloy::rpc::types::TransactionRequest::default()
            .from(from)
            .to(to)
            .input(input.into())
            .nonce(first_nonce + i as u64)
            .gas_limit(150_000)
            .max_fee_per_gas(100_000_000_000)
            .max_priority_fee_per_gas(0);
        // Not waited for: the miner puts it in the next block.
        let _pending = chain
            .provider
            .send_transaction(request)
            .await
            .expect("send a payment");
    }
}

/// p50 / p95 / max of `lags` in seconds, or `-` when there are none.
fn spread(mut lags: Vec<f64>) -> String {
    if lags.is_empty() {
        return "-".to_string();
    }
    lags.sort_by(f64::total_cmp);
    let at = |q: f64| lags[((lags.len() - 1) as f64 * q).round() as usize];
    format!("{:.2} / {:.2} / {:.2}", at(0.5), at(0.95), at(1.0))
}

fn spawn_paywatch(dir: &std::path::Path, listen: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_paywatch"))
        .current_dir(dir)
        .args(["run", "--listen", listen])
        .env("RUST_LOG", "warn")
        .env("PAYWATCH_GRPC_LISTEN", "127.0.0.1:0")
        .env_remove("PAYWATCH_DATABASE_URL")
        .env_remove("PAYWATCH_CHAINS")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start paywatch")
}

#[tokio::main]
async fn main() {
    let rate: u64 = bench_setting("PAYWATCH_BENCH_NETWORKS_RATE", 5);
    let seconds: u64 = bench_setting("PAYWATCH_BENCH_NETWORKS_SECS", 60);
    let per_network = (rate * seconds) as usize;

    // The chains, their tokens, and every payment signed ahead.
    let mut evm = Vec::new();
    let mut toml = String::new();
    for (alias, chain_id, block_ms) in EVM_NETWORKS {
        let chain = Arc::new(Chain::start_as(chain_id).await);
        let token = Token::deploy(&chain).await;
        let calls = payment_calls(&chain, &token, per_network).await;
        chain.set_automine(false).await;
        let mut network = LocalNetwork::new(
            chain_id,
            &chain.endpoint().replace("http://", "ws://"),
            &[token.address],
        );
        network.alias = alias.to_string();
        network.confirmations = CONFIRMATIONS;
        network.poll_interval_ms = 2_000;
        toml.push_str(&network.toml());
        toml.push('\n');
        evm.push(EvmLoad {
            alias,
            block_ms,
            chain,
            calls,
            mined_at: MinedAt::default(),
        });
    }
    let validator = Arc::new(Validator::start().await);
    let program = TokenProgram::Token;
    let TokenMarket {
        seller, payer, mints, ..
    } = validator.open_market(&[program], DECIMALS, u64::MAX / 4).await;
    let solana = SolanaLocal {
        network_id: validator.network_id().await,
        rpc_url: validator.rpc_url.clone(),
        mints: vec![(mints[0].to_string(), DECIMALS)],
        pay_to: vec![seller.pubkey().to_string()],
    };
    toml.push_str(&solana.toml());

    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("chains.toml"), &toml).expect("write chains.toml");
    let listen = format!("127.0.0.1:{}", free_port());
    let mut child = spawn_paywatch(dir.path(), &listen);
    wait_serving(&listen, Duration::from_secs(60)).await;
    let mut events = EventClient::connect_to(&format!("http://{listen}"), "", None).await;
    let pid = child.id();

    // Blocks on time from now on; give the workers a few blocks to catch up first.
    let stop_mining = CancellationToken::new();
    let miners: Vec<_> = evm
        .iter()
        .map(|load| {
            tokio::spawn(mine_on_time(
                load.chain.clone(),
                load.block_ms,
                load.mined_at.clone(),
                stop_mining.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(5)).await;

    println!(
        "load: {rate} payments a second on each of {} networks for {seconds} s",
        evm.len() + 1
    );
    let cpu_before = process_cpu_seconds(pid);
    let load_started = Instant::now();
    let mut senders = Vec::new();
    for load in &mut evm {
        senders.push(tokio::spawn(send_on_time(
            load.chain.clone(),
            std::mem::take(&mut load.calls),
            rate,
        )));
    }
    let solana_sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    senders.push(tokio::spawn({
        let (validator, sent) = (validator.clone(), solana_sent.clone());
        let (mint, seller) = (mints[0], seller.pubkey());
        async move {
            let mut ticks = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
            let mut blockhash = validator.client.get_latest_blockhash().await.expect("blockhash");
            for amount in 1..=per_network as u64 {
                ticks.tick().await;
                if amount % rate == 0 {
                    blockhash = validator.client.get_latest_blockhash().await.expect("blockhash");
                }
                let ix = program.transfer_checked(&mint, &payer, &seller, amount, DECIMALS);
                let signature = validator.send_unconfirmed(&[ix], &[&payer], blockhash).await;
                sent.lock().unwrap().insert(signature.to_string(), Instant::now());
            }
        }
    }));

    // Every event until each payment of every network is paid.
    let expected = per_network * (evm.len() + 1);
    let networks: HashMap<String, usize> = evm
        .iter()
        .enumerate()
        .map(|(i, load)| (format!("eip155:{}", load.chain.chain_id()), i))
        .chain([(solana.network_id.clone(), evm.len())])
        .collect();
    let mut seen: Vec<HashMap<String, Seen>> = vec![HashMap::new(); evm.len() + 1];
    let mut paid = 0;
    let mut cpu_during_load = f64::NAN;
    let deadline = Instant::now() + Duration::from_secs(seconds + 120);
    while paid < expected && Instant::now() < deadline {
        if senders.iter().all(|s| s.is_finished()) && cpu_during_load.is_nan() {
            cpu_during_load = (process_cpu_seconds(pid) - cpu_before) / load_started.elapsed().as_secs_f64();
        }
        let Ok(event) = tokio::time::timeout(Duration::from_secs(1), events.next()).await else {
            continue;
        };
        let arrived = Instant::now();
        let Some(&i) = event["network"].as_str().and_then(|n| networks.get(n)) else {
            continue;
        };
        let payment = event["payment"].as_str().expect("a payment id").to_string();
        let entry = seen[i].entry(payment).or_default();
        entry.block = entry.block.or(event["block_number"].as_u64());
        match event["to_state"].as_str() {
            Some("pending") => entry.pending = entry.pending.or(Some(arrived)),
            Some("paid") if entry.paid.is_none() => {
                entry.paid = Some(arrived);
                paid += 1;
            }
            _ => {}
        }
    }
    let peak_rss = process_peak_rss_mib(pid);
    stop_mining.cancel();
    for task in miners {
        task.await.expect("a miner");
    }
    let _ = child.kill();
    let _ = child.wait();

    println!(
        "| network | block time | payments | paid | mined → pending (s, p50 / p95 / max) | final → paid (s) |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (i, load) in evm.iter().enumerate() {
        let mined_at = load.mined_at.lock().unwrap();
        let lag_from = |block: Option<u64>, at: Option<Instant>| {
            let mined = mined_at.get(&block?)?;
            Some(at?.saturating_duration_since(*mined).as_secs_f64())
        };
        let seen = &seen[i];
        let pending: Vec<f64> = seen
            .values()
            .filter_map(|s| lag_from(s.block, s.pending))
            .collect();
        let paid_lags: Vec<f64> = seen
            .values()
            .filter_map(|s| lag_from(s.block.map(|b| b + CONFIRMATIONS - 1), s.paid))
            .collect();
        println!(
            "| {} (eip155:{}) | {} ms | {per_network} | {} | {} | {} |",
            load.alias,
            load.chain.chain_id(),
            load.block_ms,
            paid_lags.len(),
            spread(pending),
            spread(paid_lags)
        );
    }
    let sent = solana_sent.lock().unwrap();
    let lag_from_sent = |payment: &String, at: Option<Instant>| {
        Some(at?.saturating_duration_since(*sent.get(payment)?).as_secs_f64())
    };
    let solana_seen = &seen[evm.len()];
    let pending: Vec<f64> = solana_seen
        .iter()
        .filter_map(|(p, s)| lag_from_sent(p, s.pending))
        .collect();
    let paid_lags: Vec<f64> = solana_seen
        .iter()
        .filter_map(|(p, s)| lag_from_sent(p, s.paid))
        .collect();
    println!(
        "| solana (local validator; sent → pending, sent → paid) | ~400 ms slots | {per_network} | {} | {} | {} |",
        paid_lags.len(),
        spread(pending),
        spread(paid_lags)
    );
    println!(
        "paywatch run: {cpu_during_load:.2} cores on average during the load, peak RSS {peak_rss:.0} MiB; {paid} of {expected} payments paid"
    );
}
