//! The check, before a worker reads anything, that each configured token is an ERC-20
//! contract on the RPC's chain with the configured decimals: an address copied from
//! another network, or a wrong `decimals`, is refused at start instead of indexing nothing
//! or showing amounts a thousand times off.

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::Address;
use alloy::sol;
use alloy::sol_types::SolCall;
use paywatch_core::config::TokenConfig;
use paywatch_core::ids::lower_hex;

use crate::rpc::{EvmRpc, RpcFault};

sol! {
    /// ERC-20's decimals.
    function decimals() external view returns (uint8);
}

/// What is wrong with a configured token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenMismatch {
    /// No contract at the address on this chain.
    #[error(
        "token {symbol} {address}: no contract at this address on the RPC's chain; fix tokens[].address in chains.toml (is it another network's address?)"
    )]
    NoContract {
        /// The token's symbol.
        symbol: String,
        /// Its address, lowercase hex.
        address: String,
    },
    /// The contract does not answer `decimals()`.
    #[error(
        "token {symbol} {address}: the contract does not answer ERC-20's decimals(); fix tokens[].address in chains.toml"
    )]
    NotAToken {
        /// The token's symbol.
        symbol: String,
        /// Its address, lowercase hex.
        address: String,
    },
    /// The contract's decimals are not the configured ones.
    #[error(
        "token {symbol} {address}: the contract has {actual} decimals, chains.toml says {configured}; fix tokens[].decimals"
    )]
    WrongDecimals {
        /// The token's symbol.
        symbol: String,
        /// Its address, lowercase hex.
        address: String,
        /// What `chains.toml` says.
        configured: u8,
        /// What the contract answers.
        actual: u8,
    },
}

/// The first thing wrong with `tokens` on the chain `rpc` serves, if any.
pub async fn check_tokens(rpc: &EvmRpc, tokens: &[TokenConfig]) -> Result<Option<TokenMismatch>, RpcFault> {
    for token in tokens {
        let Some(address) = token.address.evm() else {
            continue;
        };
        if let Some(mismatch) = check_token(rpc, token, address).await? {
            return Ok(Some(mismatch));
        }
    }
    Ok(None)
}

async fn check_token(
    rpc: &EvmRpc,
    token: &TokenConfig,
    address: Address,
) -> Result<Option<TokenMismatch>, RpcFault> {
    let (symbol, hex) = (token.symbol.clone(), lower_hex(address));
    if !rpc.has_code(address).await? {
        return Ok(Some(TokenMismatch::NoContract { symbol, address: hex }));
    }
    let answer = rpc
        .call_at(
            address,
            decimalsCall {}.abi_encode().into(),
            BlockNumberOrTag::Latest,
        )
        .await?;
    let decimals = answer.and_then(|data| decimalsCall::abi_decode_returns(&data).ok());
    Ok(match decimals {
        None => Some(TokenMismatch::NotAToken { symbol, address: hex }),
        Some(actual) if actual != token.decimals => Some(TokenMismatch::WrongDecimals {
            symbol,
            address: hex,
            configured: token.decimals,
            actual,
        }),
        Some(_) => None,
    })
}
