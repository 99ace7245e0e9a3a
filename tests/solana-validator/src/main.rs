//! A real local Solana validator for paywatch's tests.
//!
//! Starts agave's `solana-test-validator` in this process, with the SPL Token, Token-2022,
//! Associated Token Account and Memo programs in its genesis, then prints one JSON line
//! on stdout — `{"rpc_url": …, "pubsub_url": …, "mint_keypair": …}`, the keypair in
//! base58 — and serves until stdin closes or the process is killed.
//!
//! Usage: `paywatch-test-validator --rpc-port PORT --ledger DIR`

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use solana_test_validator::TestValidatorGenesis;

/// The two settings a test chooses: where RPC listens and where the ledger lives.
struct Args {
    rpc_port: u16,
    ledger: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let mut rpc_port = None;
    let mut ledger = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--rpc-port" => {
                rpc_port = Some(value.parse().map_err(|_| format!("--rpc-port {value}: not a port number"))?)
            }
            "--ledger" => ledger = Some(PathBuf::from(value)),
            other => return Err(format!("unknown flag {other}; flags are --rpc-port and --ledger")),
        }
    }
    Ok(Args {
        rpc_port: rpc_port.ok_or("--rpc-port is required")?,
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
    let (validator, mint_keypair) =
        TestValidatorGenesis::default().rpc_port(args.rpc_port).ledger_path(&args.ledger).start();
    println!(
        "{{\"rpc_url\":\"{}\",\"pubsub_url\":\"{}\",\"mint_keypair\":\"{}\"}}",
        validator.rpc_url(),
        validator.rpc_pubsub_url(),
        mint_keypair.to_base58_string()
    );
    // Serve until the test closes our stdin (or kills us).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(validator);
    ExitCode::SUCCESS
}
