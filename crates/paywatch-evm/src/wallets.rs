//! Smart-contract wallet signatures, answered by the chain: ERC-1271 `isValidSignature`
//! for a deployed wallet, and ERC-6492 wrapped signatures for a wallet its factory has not
//! deployed yet. Both go through one `eth_call` that simulates paywatch's validator
//! contract (`contracts/Erc6492Validator.sol`, compiled artifact beside it); nothing is
//! ever sent to the chain.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use alloy::primitives::{Address, B256, Bytes};
use alloy::sol;
use alloy::sol_types::SolConstructor;
use backon::ExponentialBuilder;
use paywatch_core::config::{ChainsConfig, NetworkConfig};
use paywatch_core::network::{Namespace, NetworkId};
use paywatch_core::signature::is_erc6492_wrapped;
use tokio::sync::OnceCell;

use crate::rpc::{EvmRpc, RpcFault};

sol!(Erc6492Validator, "contracts/Erc6492Validator.json");

/// The creation code, with its constructor arguments, that answers `0x01` when run by
/// `eth_call` if `signature` is the contract wallet `signer`'s over `hash`.
pub fn validator_creation_code(signer: Address, hash: B256, signature: &[u8]) -> Bytes {
    let arguments = Erc6492Validator::constructorCall {
        signer,
        hash,
        signature: Bytes::copy_from_slice(signature),
    }
    .abi_encode();
    [Erc6492Validator::BYTECODE.as_ref(), &arguments].concat().into()
}

/// Why a contract-wallet check could not be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WalletCheckError {
    /// The network is not an EVM network of `chains.toml`, so there is no RPC to ask.
    #[error("{0} is not a watched EVM network: no RPC to ask")]
    NotWatched(String),
    /// The RPC failed after its retries.
    #[error("the RPC of {network} failed: {fault}")]
    Rpc {
        /// The network asked.
        network: String,
        /// What went wrong.
        fault: RpcFault,
    },
}

/// One network's RPC, connected on first use.
struct LazyRpc {
    network: NetworkConfig,
    rpc: OnceCell<EvmRpc>,
}

/// The RPCs of the configured EVM networks, connected on first use, for answering
/// contract-wallet signatures.
#[derive(Clone, Default)]
pub struct ContractWallets {
    networks: Arc<HashMap<NetworkId, LazyRpc>>,
}

impl ContractWallets {
    /// Fewer, shorter retries than the workers': a request is waiting on the answer.
    fn backoff() -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(Duration::from_secs(1))
            .with_max_times(2)
            .with_jitter()
    }

    /// The EVM networks of `chains`.
    pub fn new(chains: &ChainsConfig) -> Self {
        let networks = chains
            .networks
            .iter()
            .filter(|n| n.id.namespace() == Namespace::Eip155)
            .map(|n| {
                (
                    n.id.clone(),
                    LazyRpc {
                        network: n.clone(),
                        rpc: OnceCell::new(),
                    },
                )
            })
            .collect();
        ContractWallets {
            networks: Arc::new(networks),
        }
    }

    async fn rpc(&self, network: &NetworkId) -> Result<&EvmRpc, WalletCheckError> {
        let lazy = self
            .networks
            .get(network)
            .ok_or_else(|| WalletCheckError::NotWatched(network.to_string()))?;
        let name = network.to_string();
        lazy.rpc
            .get_or_try_init(|| async {
                EvmRpc::connect(&name, &lazy.network.rpc_urls, lazy.network.rpc_timeout)
                    .await
                    .map(|rpc| rpc.with_backoff(Self::backoff()))
            })
            .await
            .map_err(|fault| WalletCheckError::Rpc {
                network: name.clone(),
                fault,
            })
    }

    /// Asks `network` whether `signature` is the smart-contract wallet `signer`'s over
    /// `hash`: `Some(answer)` when `signer` holds code or the signature is ERC-6492
    /// wrapped, `None` when `signer` is a plain account (whose signature paywatch checks
    /// itself, under its strict rules).
    pub async fn verify(
        &self,
        network: &NetworkId,
        signer: Address,
        hash: B256,
        signature: &[u8],
    ) -> Result<Option<bool>, WalletCheckError> {
        let rpc = self.rpc(network).await?;
        let failed = |fault| WalletCheckError::Rpc {
            network: network.to_string(),
            fault,
        };
        if !is_erc6492_wrapped(signature) && !rpc.has_code(signer).await.map_err(failed)? {
            return Ok(None);
        }
        let answer = rpc
            .simulate_creation(validator_creation_code(signer, hash, signature))
            .await
            .map_err(failed)?;
        Ok(Some(answer.is_some_and(|bytes| bytes.as_ref() == [1])))
    }
}
