//! `paywatch`: watches blockchains for x402 payments and answers whether a payment
//! happened, is final, and was refunded.

mod audit;
mod backfill;
mod evm;
mod exclusive;
mod intent;
mod progress;
mod proof;
mod review;
mod run;
mod scheduled_audit;
mod status;
mod telemetry;
mod writer_lease;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use paywatch_core::config::{ChainsConfig, parse_chains};
use paywatch_store::{Store, StoreOptions};

/// jemalloc, as in reth: under many concurrent lookups it spends less time in the
/// allocator than glibc's malloc (the lookup benchmark, docs/src/benchmarks.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Command-line interface.
#[derive(Parser)]
#[command(
    name = "paywatch",
    version,
    about = "Watches blockchains for x402 payments: did it happen, is it final, was it refunded?"
)]
struct Cli {
    /// Chain configuration file.
    #[arg(long, global = true, env = "PAYWATCH_CHAINS", default_value = "chains.toml")]
    chains: PathBuf,
    /// Store URL: sqlite://FILE (embedded default) or postgres://USER@HOST:PORT/DATABASE.
    #[arg(
        long,
        global = true,
        env = "PAYWATCH_DATABASE_URL",
        default_value = "sqlite://paywatch.db"
    )]
    database_url: String,
    /// Most database connections.
    #[arg(long, global = true, env = "PAYWATCH_DB_MAX_CONNECTIONS", default_value_t = 8)]
    db_max_connections: u32,
    /// Log format.
    #[arg(long, global = true, env = "PAYWATCH_LOG_FORMAT", value_enum, default_value_t = telemetry::LogFormat::Text)]
    log_format: telemetry::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the workers of every enabled network and the HTTP API.
    Run(run::RunArgs),
    /// Apply the schema migrations to the store and exit.
    Migrate,
    /// Intent-committed nonces.
    #[command(subcommand)]
    Intent(IntentCommand),
    /// x402 review v1 messages.
    #[command(subcommand)]
    Review(ReviewCommand),
    /// Receipt proofs of EVM payments: serve one, or check one offline.
    #[command(subcommand)]
    Proof(ProofCommand),
    /// Read one EVM network's history up to a block, with progress, and exit.
    Backfill(backfill::BackfillArgs),
    /// Read an EVM network's committed final blocks again (from the verifier, or from
    /// receipts) and print every difference with the store as JSON lines (exit code 4 if
    /// any).
    Audit(audit::AuditArgs),
    /// Print each network's head, cursor, lag and lease owner.
    Status {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Exit with code 1 when a network's worker is stalled or stopped (what `/readyz`
        /// answers 503 for): a health check for containers without an HTTP client.
        #[arg(long)]
        ready: bool,
    },
    /// Print what paywatch knows of one payment, or of one authorization (an EIP-3009 or Permit2 nonce)
    /// (`--authorization ASSET PAYER NONCE`: was it used, by which payment, can it still
    /// settle), as the HTTP API answers it.
    Lookup {
        /// Network: CAIP-2 id (eip155:8453) or alias (base).
        network: String,
        /// Payment id: the transaction hash (EVM) or signature (Solana).
        #[arg(required_unless_present = "authorization")]
        payment: Option<String>,
        /// Which payment of a transaction that settles several.
        #[arg(long, conflicts_with = "authorization")]
        index: Option<u32>,
        /// An authorization instead of a payment: the token, the payer and the nonce.
        #[arg(long, num_args = 3, value_names = ["ASSET", "PAYER", "NONCE"], conflicts_with = "payment")]
        authorization: Option<Vec<String>>,
    },
}

#[derive(Subcommand)]
enum IntentCommand {
    /// Print the canonical intent and the nonce (or auth-capture salt) that commits to it.
    Nonce(intent::NonceArgs),
}

#[derive(Subcommand)]
enum ReviewCommand {
    /// Run a review provider's six checks on a submitted review (exit code 1 if one fails, 3
    /// if none failed but some could not run, offline).
    Verify(review::VerifyArgs),
    /// Print the exact twelve-line message a payer signs to review one indexed payment.
    Template(review::TemplateArgs),
    /// Print a recorded review as `GET /v1/reviews/{network}/{payment}` publishes it.
    Show {
        /// Network: CAIP-2 id or alias.
        network: String,
        /// The reviewed payment: transaction hash or signature.
        payment: String,
        /// Which payment of a transaction that settles several.
        #[arg(long)]
        index: Option<u32>,
        /// Add the payment's receipt proof (EVM) or its transaction's evidence (Solana).
        #[arg(long)]
        proof: bool,
    },
}

#[derive(Subcommand)]
enum ProofCommand {
    /// Print a final EVM payment's receipt proof (JSON), as the HTTP API serves it; for a
    /// Solana payment, which no trie commits to, its transaction's evidence (`/evidence`).
    Show {
        /// Network: CAIP-2 id or alias.
        network: String,
        /// The payment's transaction hash or signature.
        payment: String,
        /// Which payment of a transaction that settles several.
        #[arg(long)]
        index: Option<u32>,
    },
    /// Check a proof offline against a block hash you trust (exit code 0 if it holds; 10
    /// header, 11 inclusion, 12 receipt, 13 status, 14 facts when that step fails; 2 when
    /// the file is not a proof; 3 when it is a Solana payment's evidence, which only a node
    /// can confirm).
    Verify(proof::VerifyArgs),
}

fn load_chains(path: &PathBuf) -> anyhow::Result<ChainsConfig> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "cannot read the chain configuration {}: pass --chains FILE or create it (see docs/src/configuration.md)",
            path.display()
        )
    })?;
    Ok(parse_chains(&text, &path.display().to_string(), |name| {
        std::env::var(name).ok()
    })?)
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init_logs(cli.log_format);
    match dispatch(cli).await {
        Ok(code) => code,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("paywatch: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Prints a query's answer as JSON, or its refusal as `{"reason", "message"}`; exit code 0,
/// 1 when paywatch could not answer (retry), 2 when the question was refused.
fn print_answer(
    answer: Result<serde_json::Result<serde_json::Value>, paywatch_query::QueryError>,
) -> anyhow::Result<ExitCode> {
    match answer {
        Ok(json) => {
            println!("{}", serde_json::to_string_pretty(&json?)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if let Some(internal) = &e.internal {
                tracing::error!(error = %internal, "the query failed inside paywatch");
            }
            println!(
                "{}",
                serde_json::json!({ "reason": e.reason.code(), "message": e.message })
            );
            Ok(ExitCode::from(if e.is_unavailable() { 1 } else { 2 }))
        }
    }
}

async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    let options = StoreOptions {
        max_connections: cli.db_max_connections,
        ..StoreOptions::default()
    };
    match cli.command {
        Command::Intent(IntentCommand::Nonce(args)) => {
            intent::print_nonce(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Review(ReviewCommand::Verify(args)) => {
            let chains = load_chains(&cli.chains)?;
            let store = if review::needs_store(&args) {
                Some(Store::open(&cli.database_url, &options).await?)
            } else {
                None
            };
            review::verify(args, chains, store).await
        }
        Command::Review(ReviewCommand::Template(args)) => {
            let chains = load_chains(&cli.chains)?;
            let store = Store::open(&cli.database_url, &options).await?;
            review::template(args, chains, store).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Proof(ProofCommand::Verify(args)) => proof::verify(args),
        Command::Proof(ProofCommand::Show {
            network,
            payment,
            index,
        }) => {
            let chains = load_chains(&cli.chains)?;
            let store = Store::open(&cli.database_url, &options).await?;
            let queries = paywatch_query::Queries::new(store, chains.into());
            let answer = paywatch_query::proof_or_evidence(&queries, &network, &payment, index).await;
            print_answer(answer.map(|view| serde_json::to_value(&view)))
        }
        Command::Review(ReviewCommand::Show {
            network,
            payment,
            index,
            proof,
        }) => {
            let chains = load_chains(&cli.chains)?;
            let store = Store::open(&cli.database_url, &options).await?;
            let queries = paywatch_query::Queries::new(store, chains.into());
            let answer = paywatch_query::published_review(&queries, &network, &payment, index, proof).await;
            print_answer(answer.map(|view| serde_json::to_value(&view)))
        }
        Command::Migrate => {
            let store = Store::connect(&cli.database_url, &options).await?;
            store.migrate().await?;
            println!("schema is up to date");
            Ok(ExitCode::SUCCESS)
        }
        Command::Backfill(args) => {
            let chains = load_chains(&cli.chains)?;
            let store = Store::open(&cli.database_url, &options).await?;
            backfill::backfill(args, chains, store).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit(args) => {
            let chains = load_chains(&cli.chains)?;
            let store = Store::open(&cli.database_url, &options).await?;
            audit::audit(args, chains, store).await
        }
        Command::Status { json, ready } => {
            let chains = load_chains(&cli.chains)?;
            let store = Store::open(&cli.database_url, &options).await?;
            let all_ready = status::print(&chains, &store, json).await?;
            Ok(match ready && !all_ready {
                true => ExitCode::from(1),
                false => ExitCode::SUCCESS,
            })
        }
        Command::Lookup {
            network,
            payment,
            index,
            authorization,
        } => {
            let chains = load_chains(&cli.chains)?;
            let store = Store::open(&cli.database_url, &options).await?;
            let queries = paywatch_query::Queries::new(store, chains.into());
            let answer = match (authorization.as_deref(), payment) {
                (Some([asset, payer, nonce]), _) => {
                    paywatch_query::lookup_authorization(&queries, &network, asset, payer, nonce)
                        .await
                        .map(|view| serde_json::to_value(&view))
                }
                (_, Some(payment)) => paywatch_query::lookup_payment(&queries, &network, &payment, index)
                    .await
                    .map(|view| serde_json::to_value(&view)),
                _ => anyhow::bail!(
                    "name a payment, or an authorization with --authorization ASSET PAYER NONCE"
                ),
            };
            print_answer(answer)
        }
        Command::Run(args) => {
            let chains = load_chains(&cli.chains)?;
            let store = Store::open(&cli.database_url, &options).await?;
            run::run(args, chains, store, &cli.database_url, &options).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
