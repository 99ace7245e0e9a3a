//! Solana benchmark, in one run against a real local validator: sends N real SPL
//! `transferChecked` payments (default 300; `PAYWATCH_BENCH_SOLANA_PAYMENTS`), records
//! their `getTransaction` answers (jsonParsed, as the worker asks), then measures
//!
//! 1. the pure decode path over the recorded JSON: parsing plus decoding, and decoding
//!    alone, in transactions per second;
//! 2. end to end: a backfill of all of them by the Solana worker into a fresh SQLite file
//!    and a fresh Postgres database, in transactions per second.
//!
//! Run: `cargo bench -p paywatch-tests --bench solana`

use std::time::{Duration, Instant};

use paywatch_solana::decode::{Watched, decode_transaction};
use paywatch_tests::harness::{SolanaLocal, solana_worker};
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::validator::{TokenMarket, TokenProgram, Validator};
use solana_signer::Signer;
use solana_transaction_status_client_types::EncodedConfirmedTransactionWithStatusMeta;

const DECIMALS: u8 = 6;
/// Times the recorded transactions are decoded over, for a stable figure.
const DECODE_ROUNDS: usize = 200;

#[tokio::main]
async fn main() {
    let count: u64 = std::env::var("PAYWATCH_BENCH_SOLANA_PAYMENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let validator = Validator::start().await;
    let program = TokenProgram::Token;
    let TokenMarket {
        seller, payer, mints, ..
    } = validator.open_market(&[program], DECIMALS, u64::MAX / 4).await;
    let mint = mints[0];

    let started = Instant::now();
    let blockhash = validator.client.get_latest_blockhash().await.expect("blockhash");
    let mut signatures = Vec::new();
    for amount in 1..=count {
        let ix = program.transfer_checked(&mint, &payer, &seller.pubkey(), amount, DECIMALS);
        signatures.push(validator.send_unconfirmed(&[ix], &[&payer], blockhash).await);
    }
    validator.wait_confirmed(&signatures).await;
    println!(
        "sent and confirmed {count} payments in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // Record the node's answers, byte for byte as JSON.
    let http = reqwest::Client::new();
    let mut recorded = Vec::new();
    for signature in &signatures {
        let request = serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "getTransaction",
            "params": [signature.to_string(), {"encoding": "jsonParsed", "commitment": "confirmed", "maxSupportedTransactionVersion": 0}]
        });
        let answer: serde_json::Value = http
            .post(&validator.rpc_url)
            .json(&request)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        recorded.push((
            signature.to_string(),
            serde_json::to_string(&answer["result"]).unwrap(),
        ));
    }
    let bytes: usize = recorded.iter().map(|(_, json)| json.len()).sum();
    println!(
        "recorded {} getTransaction answers, {} bytes on average",
        recorded.len(),
        bytes / recorded.len()
    );

    let watched = Watched {
        mints: [(mint.to_string(), 0)].into(),
        pay_to: [seller.pubkey().to_string()].into(),
        facilitators: Default::default(),
    };
    let started = Instant::now();
    let mut payments = 0;
    for _ in 0..DECODE_ROUNDS {
        for (signature, json) in &recorded {
            let tx: EncodedConfirmedTransactionWithStatusMeta = serde_json::from_str(json).unwrap();
            payments += decode_transaction(signature, &tx, "hash", &watched)
                .unwrap()
                .payments
                .len();
        }
    }
    let with_parse = started.elapsed();
    assert_eq!(payments, recorded.len() * DECODE_ROUNDS);
    let parsed: Vec<EncodedConfirmedTransactionWithStatusMeta> = recorded
        .iter()
        .map(|(_, json)| serde_json::from_str(json).unwrap())
        .collect();
    let started = Instant::now();
    for _ in 0..DECODE_ROUNDS {
        for ((signature, _), tx) in recorded.iter().zip(&parsed) {
            std::hint::black_box(decode_transaction(signature, tx, "hash", &watched).unwrap());
        }
    }
    let decode_only = started.elapsed();
    let n = (recorded.len() * DECODE_ROUNDS) as f64;
    let parse_rate = n / with_parse.as_secs_f64();
    let decode_rate = n / decode_only.as_secs_f64();
    println!(
        "decode path: {parse_rate:.0} tx/s with JSON parsing, {decode_rate:.0} tx/s decoding alone (parsing is {:.1}x the decode cost)",
        decode_rate / parse_rate - 1.0
    );

    let local = SolanaLocal {
        network_id: validator.network_id().await,
        rpc_url: validator.rpc_url.clone(),
        mints: vec![(mint.to_string(), DECIMALS)],
        pay_to: vec![seller.pubkey().to_string()],
    };
    let chains = local.chains();
    let mut rates = Vec::new();
    for kind in [Kind::Sqlite, Kind::Postgres] {
        let db = TestDb::create(kind).await;
        let store = db.open().await;
        let mut worker = solana_worker(&chains, &store, 1000);
        let started = Instant::now();
        let mut read = 0;
        while read < signatures.len() {
            read += worker.step().await.expect("step").transactions;
        }
        let elapsed = started.elapsed();
        let (_, _, stored) = store.row_counts(&local.network_id).await.unwrap();
        assert_eq!(stored, count);
        let rate = read as f64 / elapsed.as_secs_f64().max(f64::EPSILON);
        println!(
            "end to end, {kind:?}: {read} transactions in {:.2} s = {rate:.0} tx/s",
            elapsed.as_secs_f64()
        );
        rates.push(rate);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("end to end, SQLite/Postgres ratio: {:.2}", rates[0] / rates[1]);
}
