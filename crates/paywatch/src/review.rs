//! `paywatch review verify`: a review provider's checks from the command line, offline
//! (format, provider, signature, note) or against the index.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use paywatch_api::{AppState, ReviewRules, ReviewSubmission, verify_review};
use paywatch_core::config::ChainsConfig;
use paywatch_store::Store;

/// Arguments of `paywatch review verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
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
pub async fn verify(
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
    let state = store.map(|store| AppState::new(store, chains.clone().into(), None));
    let answer = verify_review(state.as_ref(), rules, &submission)
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
pub fn needs_store(args: &VerifyArgs) -> bool {
    !args.offline
}
