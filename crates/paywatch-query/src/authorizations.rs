//! Authorization lookups, for a settlement that timed out: was this authorization — an
//! EIP-3009 nonce (`0x` + 64 hex) or a Permit2 nonce (decimal `uint256`) — used, by which
//! payment, and if not, can it still be? The index answers first; when it knows no payment, the chain answers — the token's
//! `authorizationState`, or Permit2's `nonceBitmap` — read by `eth_call` at the final
//! block and at the head.

use alloy_primitives::{Address, B256, U256};
use paywatch_core::config::NetworkConfig;
use paywatch_core::ids::{lower_hex, parse_evm_address, parse_evm_word};
use paywatch_core::state::PaymentState;
use paywatch_core::{Namespace, PaymentMethod, Reason};
use paywatch_evm::ChainCallError;
use paywatch_store::StoredPayment;

use crate::payments::{lookup_payment, resolve_network};
use crate::views::{AuthorizationStatus, AuthorizationView, PaymentView};
use crate::{Queries, QueryError};

/// The nonce of an authorization, by the kind of authorization it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nonce {
    /// An EIP-3009 authorization's `bytes32` nonce.
    Eip3009(B256),
    /// A Permit2 signature transfer's `uint256` nonce (x402's `permit2` and `upto`).
    Permit2(U256),
}

impl Nonce {
    /// As stored and answered, by core's spelling rule: `0x` + 64 hex, or decimal.
    fn spelled(self) -> String {
        match self {
            Self::Eip3009(nonce) => PaymentMethod::Eip3009.spell_nonce(nonce),
            Self::Permit2(nonce) => PaymentMethod::Permit2.spell_nonce(B256::from(nonce.to_be_bytes())),
        }
    }

    /// Until when an unused authorization can still settle.
    fn expiry(self) -> &'static str {
        match self {
            Self::Eip3009(_) => "its validBefore",
            Self::Permit2(_) => "its permit's deadline",
        }
    }

    /// What else marks it used without a payment paywatch reads.
    fn other_uses(self) -> &'static str {
        match self {
            Self::Eip3009(_) => {
                "settled before the token's start block, canceled with cancelAuthorization, or used by a call paywatch does not read"
            }
            Self::Permit2(_) => {
                "settled before the token's start block, invalidated with invalidateUnorderedNonces, or used by another Permit2 \
                 transfer of the payer (Permit2 nonces are the owner's across every token and spender)"
            }
        }
    }
}

fn malformed(message: impl Into<String>) -> QueryError {
    QueryError::new(Reason::MalformedAuthorization, message)
}

/// The authorization named, in canonical spelling, or why it cannot be one.
fn parse_authorization(
    network: &NetworkConfig,
    asset: &str,
    payer: &str,
    nonce: &str,
) -> Result<(Address, Address, Nonce), QueryError> {
    if network.id.namespace() != Namespace::Eip155 {
        return Err(malformed(format!(
            "{} payments carry no authorization nonce: look the payment up by its transaction signature",
            network.id
        )));
    }
    let asset = parse_evm_address(asset).map_err(|e| malformed(format!("asset: {e}")))?;
    if !network.tokens.iter().any(|t| t.address == lower_hex(asset)) {
        return Err(QueryError::new(
            Reason::AssetNotWatched,
            format!(
                "asset {} is not a token of {} in chains.toml",
                lower_hex(asset),
                network.id
            ),
        ));
    }
    let payer = parse_evm_address(payer).map_err(|e| malformed(format!("payer: {e}")))?;
    let nonce = if !nonce.is_empty() && nonce.bytes().all(|b| b.is_ascii_digit()) {
        U256::from_str_radix(nonce, 10).map(Nonce::Permit2).map_err(|_| {
            malformed(format!(
                "nonce {nonce} is larger than a uint256: a Permit2 nonce is a decimal uint256"
            ))
        })?
    } else {
        parse_evm_word(nonce).map(Nonce::Eip3009).map_err(|e| {
            malformed(format!(
                "nonce: {e}; an EIP-3009 nonce is 0x + 64 hex, a Permit2 nonce a decimal uint256"
            ))
        })?
    };
    Ok((asset, payer, nonce))
}

/// The payment of `found` a caller means: the one that counts, or else the latest.
fn counting(found: &[StoredPayment]) -> Option<&StoredPayment> {
    found
        .iter()
        .rev()
        .find(|p| p.state != PaymentState::Dropped)
        .or(found.last())
}

/// What became of `payer`'s authorization `nonce` on `asset`.
pub async fn lookup_authorization(
    queries: &Queries,
    network: &str,
    asset: &str,
    payer: &str,
    nonce: &str,
) -> Result<AuthorizationView, QueryError> {
    let network = resolve_network(queries, network)?;
    let (asset, payer, nonce) = parse_authorization(network, asset, payer, nonce)?;
    let net = network.id.to_string();
    let answer = |status, payment, checked_at_block, message: String| AuthorizationView {
        network: net.clone(),
        asset: lower_hex(asset),
        payer: lower_hex(payer),
        nonce: nonce.spelled(),
        kind: match nonce {
            Nonce::Eip3009(_) => "eip3009",
            Nonce::Permit2(_) => "permit2",
        }
        .to_string(),
        status,
        payment,
        checked_at_block,
        message,
    };
    if let Some(view) = indexed_payment(queries, &net, asset, payer, nonce).await? {
        return Ok(answer(
            AuthorizationStatus::Indexed,
            Some(view),
            None,
            "a payment paywatch indexes used this authorization; its payment_state says whether it is final"
                .to_string(),
        ));
    }
    let final_block = queries
        .store
        .chain_head(&net)
        .await
        .map_err(QueryError::store)?
        .and_then(|head| head.final_block)
        .ok_or_else(|| {
            QueryError::new(
                Reason::NetworkNotSynced,
                format!(
                    "paywatch has not recorded a final block of {net} yet; retry once its worker has run"
                ),
            )
        })?;
    let used_at = |block| async move {
        match nonce {
            Nonce::Eip3009(word) => {
                queries
                    .chain_calls
                    .authorization_used(&network.id, asset, payer, word, block)
                    .await
            }
            Nonce::Permit2(number) => {
                queries
                    .chain_calls
                    .permit2_nonce_used(&network.id, payer, number, block)
                    .await
            }
        }
        .map_err(chain_call_refusal)
    };
    if used_at(Some(final_block)).await? {
        // The worker may have indexed it since the first read.
        if let Some(view) = indexed_payment(queries, &net, asset, payer, nonce).await? {
            return Ok(answer(
                AuthorizationStatus::Indexed,
                Some(view),
                Some(final_block),
                "a payment paywatch indexes used this authorization".to_string(),
            ));
        }
        return Ok(answer(
            AuthorizationStatus::UsedUnindexed,
            None,
            Some(final_block),
            format!(
                "used or canceled on chain by final block {final_block}, but paywatch indexes no payment for it ({}): \
                 it can no longer settle",
                nonce.other_uses()
            ),
        ));
    }
    if used_at(None).await? {
        return Ok(answer(
            AuthorizationStatus::UsedNotFinal,
            None,
            Some(final_block),
            format!(
                "unused at final block {final_block} but used or canceled at the head: settled in a block that is not final \
                 or not read yet; ask again"
            ),
        ));
    }
    Ok(answer(
        AuthorizationStatus::Unused,
        None,
        Some(final_block),
        format!(
            "unused at final block {final_block} and at the head: it can still settle until {}",
            nonce.expiry()
        ),
    ))
}

/// The view of the indexed payment that used the authorization, if any.
async fn indexed_payment(
    queries: &Queries,
    network: &str,
    asset: Address,
    payer: Address,
    nonce: Nonce,
) -> Result<Option<PaymentView>, QueryError> {
    let found = queries
        .store
        .payments_by_authorization(network, &lower_hex(asset), &lower_hex(payer), &nonce.spelled())
        .await
        .map_err(QueryError::store)?;
    match counting(&found) {
        Some(payment) => lookup_payment(queries, network, &payment.payment_id, Some(payment.index_in_tx))
            .await
            .map(Some),
        None => Ok(None),
    }
}

fn chain_call_refusal(error: ChainCallError) -> QueryError {
    match error {
        ChainCallError::NotImplemented { function, .. } if function.starts_with("nonceBitmap") => {
            QueryError::new(
                Reason::RpcUnavailable,
                format!(
                    "{error}: Permit2 is not at the address chains.toml names for this network (`permit2`, the canonical one by default)"
                ),
            )
        }
        ChainCallError::NotImplemented { .. } => malformed(format!(
            "{error}: the asset is not an EIP-3009 token, so it has no authorizations to ask about"
        )),
        ChainCallError::NotWatched(_) | ChainCallError::Rpc { .. } => {
            QueryError::new(Reason::RpcUnavailable, format!("{error}; retry later"))
        }
        ChainCallError::NoProof { .. } => QueryError::new(Reason::ProofUnavailable, error.to_string()),
    }
}
