//! A real local Solana validator for paywatch's tests.
//!
//! Starts agave's `solana-test-validator` in this process, with the SPL Token, Token-2022,
//! Associated Token Account and Memo programs in its genesis, then prints one JSON line
//! on stdout — `{"rpc_url": …, "pubsub_url": …, "mint_keypair": …}`, the keypair in
//! base58 — and serves until stdin closes, then deletes the ledger directory.
//!
//! Usage: `paywatch-test-validator --rpc-port PORT --ports FIRST-LAST --ledger DIR`
//!
//! `--ports` is the range the validator binds its gossip (the first port), TPU, TVU and
//! repair sockets in; tests give each validator its own so several run side by side.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use solana_rpc::rpc::JsonRpcConfig;
use solana_test_validator::TestValidatorGenesis;

/// The settings a test chooses: where RPC listens, which ports the rest binds, and where
/// the ledger lives.
struct Args {
    rpc_port: u16,
    ports: (u16, u16),
    ledger: PathBuf,
}

fn parse_range(value: &str) -> Option<(u16, u16)> {
    let (first, last) = value.split_once('-')?;
    let range = (first.parse().ok()?, last.parse().ok()?);
    (range.0 < range.1).then_some(range)
}

fn parse_args() -> Result<Args, String> {
    let mut rpc_port = None;
    let mut ports = None;
    let mut ledger = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--rpc-port" => {
                rpc_port = Some(
                    value
                        .parse()
                        .map_err(|_| format!("--rpc-port {value}: not a port number"))?,
                )
            }
            "--ports" => {
                ports =
                    Some(parse_range(&value).ok_or_else(|| format!("--ports {value}: expected FIRST-LAST"))?)
            }
            "--ledger" => ledger = Some(PathBuf::from(value)),
            other => {
                return Err(format!(
                    "unknown flag {other}; flags are --rpc-port, --ports and --ledger"
                ));
            }
        }
    }
    Ok(Args {
        rpc_port: rpc_port.ok_or("--rpc-port is required")?,
        ports: ports.ok_or("--ports is required")?,
        ledger: ledger.ok_or("--ledger is required")?,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("paywatch-test-validator: {message}");
            return ExitCode::from(2);
        }
    };
    // As the `solana-test-validator` command: the history API (getSignaturesForAddress,
    // getTransaction) on, which paywatch reads.
    let rpc_config = JsonRpcConfig {
        enable_rpc_transaction_history: true,
        enable_extended_tx_metadata_storage: true,
        full_api: true,
        ..JsonRpcConfig::default_for_test()
    };
    let (validator, mint_keypair) = TestValidatorGenesis::default()
        .rpc_config(rpc_config)
        .rpc_port(args.rpc_port)
        .gossip_port(args.ports.0)
        .port_range(args.ports)
        .ledger_path(&args.ledger)
        .start();
    // The library prints progress lines on stdout first; this one line is the answer.
    println!(
        "{{\"rpc_url\":\"{}\",\"pubsub_url\":\"{}\",\"mint_keypair\":\"{}\"}}",
        validator.rpc_url(),
        validator.rpc_pubsub_url(),
        mint_keypair.to_base58_string()
    );
    // Serve until the test process closes our stdin (or exits), then leave no ledger behind.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(validator);
    let _ = std::fs::remove_dir_all(&args.ledger);
    ExitCode::SUCCESS
}
