//! `paywatch review verify`: a review provider's checks from the command line, offline
//! (format, provider, signature, note) or against the index; `paywatch review template`:
//! the exact message a payer signs for one indexed payment.

use std::path::PathBuf;
use std::process::ExitCode;

use alloy_primitives::U256;
use anyhow::Context;
use paywatch_core::config::ChainsConfig;
use paywatch_core::review::{ReviewMessage, build_review, issued_at_of, note_sha256, parse_review};
use paywatch_query::{Queries, ReviewRules, ReviewSubmission, lookup_payment, verify_review};
use paywatch_store::Store;

/// Arguments of `paywatch review verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// File holding the exact message bytes.
    #[arg(long)]
    message: PathBuf,
    /// The signature: 0x + hex (EVM) or base58 (Solana).
    #[arg(long)]
    signature: String,
    /// File holding the note.
    #[arg(long)]
    note: PathBuf,
    /// The provider's host, e.g. reviews.example.
    #[arg(long)]
    provider_host: String,
    /// Check format, provider, signature and note only, without the index.
    #[arg(long)]
    offline: bool,
    /// Record the review when every other check passes (one per payment).
    #[arg(long, conflicts_with = "offline")]
    record: bool,
}

/// Exit code when every check that could run passed, but some could not (offline).
const PASSED_WHAT_RAN: u8 = 3;

/// Prints every check as JSON; exit code 0 when all six passed, 1 when a check failed, 3
/// when no check failed but some were not run (offline).
pub(crate) async fn verify(
    args: VerifyArgs,
    chains: ChainsConfig,
    store: Option<Store>,
) -> anyhow::Result<ExitCode> {
    let read = |path: &PathBuf| {
        std::fs::read(path)
            .with_context(|| format!("cannot read {}", path.display()))
            .and_then(|bytes| {
                String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", path.display()))
            })
    };
    let submission = ReviewSubmission {
        message: read(&args.message)?,
        signature: args.signature,
        note: read(&args.note)?,
        provider_host: args.provider_host,
        record: args.record,
        via: None,
    };
    let rules = ReviewRules::of(&chains);
    let queries = store.map(|store| Queries::new(store, chains.clone().into()));
    let answer = verify_review(queries.as_ref(), rules, &submission)
        .await
        .map_err(|e| anyhow::anyhow!("{}: {}", e.reason, e.message))?;
    println!("{}", serde_json::to_string_pretty(&answer)?);
    Ok(match answer.valid {
        Some(true) => ExitCode::SUCCESS,
        Some(false) => ExitCode::FAILURE,
        None => ExitCode::from(PASSED_WHAT_RAN),
    })
}

/// Whether `verify` needs the store.
pub(crate) fn needs_store(args: &VerifyArgs) -> bool {
    !args.offline
}

/// Arguments of `paywatch review template`.
#[derive(Debug, clap::Args)]
pub(crate) struct TemplateArgs {
    /// Network: CAIP-2 id or alias.
    #[arg(long)]
    network: String,
    /// The payment: transaction hash (EVM) or signature (Solana).
    #[arg(long)]
    payment: String,
    /// Which payment of a transaction that settles several.
    #[arg(long)]
    index: Option<u32>,
    /// The provider's host, e.g. reviews.example.
    #[arg(long)]
    provider_host: String,
    /// Stars, 1 to 5.
    #[arg(long)]
    stars: u8,
    /// File holding the note (its SHA-256 goes in the message).
    #[arg(long)]
    note: PathBuf,
    /// When the payer signs, `YYYY-MM-DDTHH:MM:SSZ` (default: now).
    #[arg(long)]
    issued_at: Option<String>,
}

/// Prints the review v1 message for an indexed payment exactly as a payer signs it (no
/// trailing newline), with the configured last line, so a client and a provider can
/// compare bytes.
pub(crate) async fn template(args: TemplateArgs, chains: ChainsConfig, store: Store) -> anyhow::Result<()> {
    let note = std::fs::read(&args.note)
        .with_context(|| format!("cannot read {}", args.note.display()))
        .and_then(|bytes| {
            String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", args.note.display()))
        })?;
    let last_line = chains.review_last_line.clone();
    let now = ReviewRules::of(&chains).now;
    let queries = Queries::new(store, chains.into());
    let payment = lookup_payment(&queries, &args.network, &args.payment, args.index)
        .await
        .map_err(|e| anyhow::anyhow!("{}: {}", e.reason, e.message))?;
    let issued_at = match args.issued_at {
        Some(at) => at,
        None => issued_at_of(now).context("the clock is outside the years 0000-9999")?,
    };
    let review = ReviewMessage {
        provider: args.provider_host,
        network: payment.network.parse()?,
        payment: payment.payment,
        payer: payment.payer,
        pay_to: payment.pay_to,
        amount: U256::from_str_radix(&payment.amount, 10)?,
        asset: payment.asset,
        stars: args.stars,
        note_sha256: note_sha256(&note),
        issued_at,
    };
    let message = build_review(&review, &last_line);
    parse_review(message.as_bytes(), &last_line)
        .map_err(|e| anyhow::anyhow!("the message would break a review v1 rule: {}: {e}", e.code()))?;
    print!("{message}");
    Ok(())
}
