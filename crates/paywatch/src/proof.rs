//! `paywatch proof show`: a final EVM payment's receipt proof, as the HTTP API serves it;
//! `paywatch proof verify`: the offline check of such a proof against a block hash the
//! caller trusts (one per block, for an escrowed payment's later events), step by step,
//! with an exit code per failed step. A Solana payment has
//! no proof: `show` prints its transaction's evidence, which `verify` recognizes and
//! refuses to call proven.

use std::path::PathBuf;
use std::process::ExitCode;

use alloy_primitives::{Address, B256, U256};
use anyhow::Context;
use paywatch_core::ids::lower_hex;
use paywatch_evm::proof::{
    ProofFailure, ProofStep, ProvenFacts, add_escrow_events, proven_facts, verify_receipt_proof,
};
use paywatch_query::{EvidenceView, ProofView};

/// Arguments of `paywatch proof verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// The proof, as `paywatch proof show` or `GET /v1/payments/{network}/{payment}/proof`
    /// answered it (JSON).
    file: PathBuf,
    /// The block hash you trust (from your own node, or any source but the proof). An
    /// escrowed payment's later events sit in their own blocks: repeat the option with
    /// each of their block hashes.
    #[arg(long, required = true)]
    block_hash: Vec<B256>,
    /// Also require this payer.
    #[arg(long)]
    payer: Option<Address>,
    /// Also require this pay_to.
    #[arg(long)]
    pay_to: Option<Address>,
    /// Also require this amount (the asset's smallest unit).
    #[arg(long)]
    amount: Option<U256>,
    /// Also require this asset (token contract).
    #[arg(long)]
    asset: Option<Address>,
}

/// The exit code of a file that is a Solana payment's evidence, not a proof.
const NODE_ATTESTED: u8 = 3;

/// The exit code of a failed step (0: the proof holds; 2: the file is not a proof).
fn exit_code(step: ProofStep) -> u8 {
    match step {
        ProofStep::Header => 10,
        ProofStep::Inclusion => 11,
        ProofStep::Receipt => 12,
        ProofStep::Status => 13,
        ProofStep::Facts => 14,
        ProofStep::Transaction => 15,
    }
}

/// The facts the proof's logs give, held to what the file claims and the caller requires.
fn check(view: &ProofView, args: &VerifyArgs) -> Result<ProvenFacts, ProofFailure> {
    let checked = verify_receipt_proof(&view.proof, main_block_hash(view, args))?;
    let positions: Vec<usize> = view.payment_logs.iter().map(|p| *p as usize).collect();
    let mut proven = proven_facts(&checked, view.method, &positions)?;
    let mut events = Vec::new();
    for event in &view.escrow_events {
        let trusted = args
            .block_hash
            .iter()
            .find(|hash| **hash == event.proof.block_hash)
            .ok_or_else(|| ProofFailure {
                step: ProofStep::Header,
                detail: format!(
                    "the {} event is in block {} ({}): check that hash against a source you trust and pass it with another --block-hash",
                    event.kind, event.proof.block_number, event.proof.block_hash
                ),
            })?;
        events.push((
            event.kind,
            verify_receipt_proof(&event.proof, *trusted)?,
            event.log as usize,
        ));
    }
    add_escrow_events(&mut proven, &events)?;
    let named = proven
        .escrow
        .as_ref()
        .map_or(view.proof.tx_hash, |escrow| escrow.payment_info_hash);
    if view.payment != lower_hex(named) {
        return Err(ProofFailure {
            step: ProofStep::Transaction,
            detail: format!(
                "the file names payment {}, the proof proves {} ({})",
                view.payment,
                lower_hex(named),
                match proven.escrow {
                    Some(_) => "the paymentInfoHash its escrow events carry",
                    None => "the proven transaction's hash",
                }
            ),
        });
    }
    let wrong = |what: &str, claimed: String, proven: String| ProofFailure {
        step: ProofStep::Facts,
        detail: format!("{what}: the receipt's logs give {proven}, the claim says {claimed}"),
    };
    if proven != view.facts {
        return Err(wrong("facts", format!("{:?}", view.facts), format!("{proven:?}")));
    }
    let required = [
        (
            "payer",
            args.payer.map(|a| a.to_string()),
            proven.payer.to_string(),
        ),
        (
            "pay_to",
            args.pay_to.map(|a| a.to_string()),
            proven.pay_to.to_string(),
        ),
        (
            "amount",
            args.amount.map(|a| a.to_string()),
            proven.amount.to_string(),
        ),
        (
            "asset",
            args.asset.map(|a| a.to_string()),
            proven.asset.to_string(),
        ),
    ];
    for (what, required, proven) in required {
        if let Some(required) = required
            && required != proven
        {
            return Err(wrong(what, required, proven));
        }
    }
    Ok(proven)
}

/// The trusted hash the payment's own receipt is checked against: the one given that it
/// claims, else the first given (which then fails the header step, naming both).
fn main_block_hash(view: &ProofView, args: &VerifyArgs) -> B256 {
    args.block_hash
        .iter()
        .copied()
        .find(|hash| *hash == view.proof.block_hash)
        .unwrap_or(args.block_hash[0])
}

/// Checks a proof file offline; prints the verdict as JSON.
pub(crate) fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read the proof {}", args.file.display()))?;
    if let Ok(evidence) = serde_json::from_str::<EvidenceView>(&text) {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "valid": false,
                "step": "file",
                "detail": format!(
                    "this is the evidence of Solana transaction {} ({}): a node's answer, not a proof; no block hash can check it. Ask a node you trust for the signature's status (getSignatureStatuses) and the transaction (getTransaction)",
                    evidence.payment, evidence.evidence
                ),
            }))?
        );
        return Ok(ExitCode::from(NODE_ATTESTED));
    }
    let view: ProofView = match serde_json::from_str(&text) {
        Ok(view) => view,
        Err(e) => {
            println!(
                "{}",
                serde_json::json!({ "valid": false, "step": "file", "detail": format!("not a paywatch proof: {e}") })
            );
            return Ok(ExitCode::from(2));
        }
    };
    match check(&view, &args) {
        Ok(facts) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "valid": true,
                    "block_hash": main_block_hash(&view, &args),
                    "block_number": view.proof.block_number,
                    "tx": view.proof.tx_hash,
                    "payment": view.payment,
                    "method": view.method,
                    "facts": facts,
                }))?
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(failure) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "valid": false,
                    "step": failure.step.to_string(),
                    "detail": failure.detail,
                }))?
            );
            Ok(ExitCode::from(exit_code(failure.step)))
        }
    }
}
