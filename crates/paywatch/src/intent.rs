//! `paywatch intent nonce`: the nonce (or, for an escrowed payment, the salt) that commits
//! to an intent, for payer-side tools.

use alloy_primitives::{Address, U256};
use anyhow::Context;
use paywatch_core::ids::{lower_hex, parse_decimal_amount, parse_evm_address, parse_evm_word};
use paywatch_core::intent::{Intent, SaltBinding, canonical_intent, escrow_salt, intent_nonce};
use paywatch_core::network::NetworkId;

/// Arguments of `paywatch intent nonce`.
#[derive(Debug, clap::Args)]
pub(crate) struct NonceArgs {
    /// HTTP method of the request paid for.
    #[arg(long)]
    method: String,
    /// Resource URL (normalized: scheme and host lowercased, default port and fragment removed).
    #[arg(long)]
    url: String,
    /// SHA-256 of the request body, 64 lowercase hex digits; omit for no body.
    #[arg(long)]
    body_sha256: Option<String>,
    /// The payer's resource class.
    #[arg(long)]
    class: String,
    /// The most the payer agrees to pay, in the asset's smallest unit.
    #[arg(long)]
    max_atomic: String,
    /// Network: CAIP-2 id or alias.
    #[arg(long)]
    network: String,
    /// Token contract.
    #[arg(long)]
    asset: String,
    /// The seller.
    #[arg(long)]
    pay_to: String,
    /// 32 random bytes, 0x + 64 hex digits; keep them to reveal the intent later.
    #[arg(long)]
    salt: String,
    /// Auth-capture: the requirements' `receiverAuthorizer`, when they name one (the x402
    /// SDK then binds the salt nonce to it and to `--policy`).
    #[arg(long)]
    receiver_authorizer: Option<String>,
    /// Auth-capture: the requirements' `policy`, when they name one.
    #[arg(long)]
    policy: Option<String>,
}

/// Prints as JSON the canonical intent, the EIP-3009 nonce that commits to it (Permit2's
/// `uint256` nonce is the same 32 bytes), and the auth-capture `PaymentInfo` salt that does
/// (with a salt binding, also the salt nonce to draw instead of a random one).
pub(crate) fn print_nonce(args: NonceArgs) -> anyhow::Result<()> {
    let network = NetworkId::parse_or_alias(&args.network).context("--network")?;
    let max_atomic = parse_decimal_amount(&args.max_atomic).with_context(|| {
        format!(
            "--max-atomic: `{}` is not a decimal integer in the asset's smallest unit (digits only, no sign)",
            args.max_atomic
        )
    })?;
    let salt = parse_evm_word(&args.salt).context("--salt")?;
    let intent = Intent {
        method: args.method,
        url: args.url,
        body_sha256: args.body_sha256,
        resource_class: args.class,
        max_atomic,
        network,
        asset: args.asset,
        pay_to: args.pay_to,
    };
    let text = String::from_utf8(canonical_intent(&intent)?).context("canonical intent is UTF-8")?;
    let nonce = intent_nonce(&intent, &salt)?;
    let binding_address = |flag: &str, value: Option<&String>| match value {
        Some(value) => parse_evm_address(value).with_context(|| format!("--{flag}")),
        None => Ok(Address::ZERO),
    };
    let binding = match (&args.receiver_authorizer, &args.policy) {
        (None, None) => None,
        (authorizer, policy) => Some(SaltBinding {
            receiver_authorizer: binding_address("receiver-authorizer", authorizer.as_ref())?,
            policy: binding_address("policy", policy.as_ref())?,
        }),
    };
    let mut answer = serde_json::json!({
        "canonical_intent": text,
        "nonce": lower_hex(nonce),
        "permit2_nonce": U256::from_be_bytes(nonce.0).to_string(),
        "auth_capture_salt": escrow_salt(nonce, binding.as_ref()).to_string(),
    });
    if binding.is_some() {
        answer["auth_capture_salt_nonce"] = U256::from_be_bytes(nonce.0).to_string().into();
    }
    println!("{}", serde_json::to_string_pretty(&answer)?);
    Ok(())
}
