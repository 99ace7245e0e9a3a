//! The check, before a worker reads anything, that each configured token is an ERC-20
//! contract on the RPC's chain with the configured decimals and, when configured, the
//! EIP-712 domain payers sign in: an address copied from another network, a wrong
//! `decimals`, or a look-alike token (a bridged USDC.e with USDC's decimals but its own
//! domain) is refused at start instead of indexing nothing, showing amounts a thousand
//! times off, or watching a token no x402 authorization is signed for.

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::{Address, B256, U256};
use alloy::sol;
use alloy::sol_types::{Eip712Domain, SolCall};
use paywatch_core::config::{Eip712Name, TokenConfig};
use paywatch_core::ids::lower_hex;

use crate::rpc::{EvmRpc, RpcFault};

sol! {
    /// ERC-20's decimals.
    function decimals() external view returns (uint8);
    /// The EIP-712 domain separator of EIP-3009 and EIP-2612 tokens.
    function DOMAIN_SEPARATOR() external view returns (bytes32);
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
    /// The contract answers no `DOMAIN_SEPARATOR()`, so it signs in no EIP-712 domain.
    #[error(
        "token {symbol} {address}: the contract answers no DOMAIN_SEPARATOR(), so no EIP-3009 or EIP-2612 authorization is signed for it; fix tokens[].address, or remove eip712_name and eip712_version"
    )]
    NoDomain {
        /// The token's symbol.
        symbol: String,
        /// Its address, lowercase hex.
        address: String,
    },
    /// The contract's domain separator is not that of the configured name and version.
    #[error(
        "token {symbol} {address}: its DOMAIN_SEPARATOR() is {actual}, not that of EIP712Domain(name \"{name}\", version \"{version}\", this chain, this address) ({expected}); payers signing in the configured domain would be refused: fix tokens[].eip712_name / eip712_version, or tokens[].address if this is a look-alike token"
    )]
    WrongDomain {
        /// The token's symbol.
        symbol: String,
        /// Its address, lowercase hex.
        address: String,
        /// The configured domain name.
        name: String,
        /// The configured domain version.
        version: String,
        /// The separator of the configured domain.
        expected: B256,
        /// The contract's separator.
        actual: B256,
    },
}

/// The first thing wrong with `tokens` on the chain `rpc` serves (chain id `chain_id`),
/// if any.
pub async fn check_tokens(
    rpc: &EvmRpc,
    chain_id: u64,
    tokens: &[TokenConfig],
) -> Result<Option<TokenMismatch>, RpcFault> {
    for token in tokens {
        let Some(address) = token.address.evm() else {
            continue;
        };
        if let Some(mismatch) = check_token(rpc, token, address).await? {
            return Ok(Some(mismatch));
        }
        if let Some(domain) = &token.eip712
            && let Some(mismatch) = check_domain(rpc, chain_id, token, address, domain).await?
        {
            return Ok(Some(mismatch));
        }
    }
    Ok(None)
}

/// What the view `call` of the contract at `address` answers at the head; `None` when it
/// reverts or answers something else than the view's return type.
async fn view<C: SolCall>(rpc: &EvmRpc, address: Address, call: C) -> Result<Option<C::Return>, RpcFault> {
    let answer = rpc
        .call_at(address, call.abi_encode().into(), BlockNumberOrTag::Latest)
        .await?;
    Ok(answer.and_then(|data| C::abi_decode_returns(&data).ok()))
}

/// The separator of `domain` for the token at `address` on chain `chain_id`.
fn domain_separator(domain: &Eip712Name, chain_id: u64, address: Address) -> B256 {
    Eip712Domain::new(
        Some(domain.name.clone().into()),
        Some(domain.version.clone().into()),
        Some(U256::from(chain_id)),
        Some(address),
        None,
    )
    .separator()
}

async fn check_domain(
    rpc: &EvmRpc,
    chain_id: u64,
    token: &TokenConfig,
    address: Address,
    domain: &Eip712Name,
) -> Result<Option<TokenMismatch>, RpcFault> {
    let (symbol, hex) = (token.symbol.clone(), lower_hex(address));
    let Some(actual) = view(rpc, address, DOMAIN_SEPARATORCall {}).await? else {
        return Ok(Some(TokenMismatch::NoDomain { symbol, address: hex }));
    };
    let expected = domain_separator(domain, chain_id, address);
    Ok((actual != expected).then(|| TokenMismatch::WrongDomain {
        symbol,
        address: hex,
        name: domain.name.clone(),
        version: domain.version.clone(),
        expected,
        actual,
    }))
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
    Ok(match view(rpc, address, decimalsCall {}).await? {
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
