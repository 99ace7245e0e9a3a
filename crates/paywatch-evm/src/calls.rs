//! Questions a request needs the EVM networks to answer by `eth_call` (nothing is ever
//! sent): whether a smart-contract wallet accepts a signature (ERC-1271, ERC-6492), and
//! whether an EIP-3009 authorization or a Permit2 nonce is used; and the block header and
//! receipts a payment's proof is built from. Each network's RPC is connected on first use.

use std::collections::HashMap;
use std::sync::Arc;

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::{Address, B256, U256};
use alloy::sol;
use alloy::sol_types::SolCall;
use paywatch_chain::request_backoff;
use paywatch_core::config::{ChainsConfig, NetworkConfig};
use paywatch_core::network::{Namespace, NetworkId};
use paywatch_core::signature::is_erc6492_wrapped;
use tokio::sync::OnceCell;

use crate::proof::{BuildError, ReceiptProof, build_receipt_proof};
use crate::rpc::{EvmRpc, RpcFault};
use crate::wallets::validator_creation_code;

sol! {
    /// EIP-3009's view of an authorization: true once used (or canceled).
    function authorizationState(address authorizer, bytes32 nonce) external view returns (bool);
    /// Permit2's unordered nonces of an owner: bit `nonce & 0xff` of word `nonce >> 8` is
    /// set once the nonce is used (or invalidated).
    function nonceBitmap(address owner, uint256 wordPos) external view returns (uint256);
}

/// Why a question could not be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainCallError {
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
    /// The node cannot give what a proof is built from (the block or transaction is not
    /// there any more), or its answers do not fit together.
    #[error("no proof from {network}: {detail}")]
    NoProof {
        /// The network asked.
        network: String,
        /// Why.
        detail: String,
    },
    /// The contract reverted or answered something that is not the function's result
    /// (it does not implement the function asked).
    #[error("{contract} on {network} does not answer {function}: {detail}")]
    NotImplemented {
        /// The network asked.
        network: String,
        /// The contract asked.
        contract: Address,
        /// The function asked.
        function: &'static str,
        /// The revert or decoding error.
        detail: String,
    },
}

/// One network's RPC, connected on first use.
struct LazyRpc {
    network: NetworkConfig,
    rpc: OnceCell<EvmRpc>,
}

/// The RPCs of the configured EVM networks, connected on first use.
#[derive(Clone, Default)]
pub struct ChainCalls {
    networks: Arc<HashMap<NetworkId, LazyRpc>>,
}

impl ChainCalls {
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
        Self {
            networks: Arc::new(networks),
        }
    }

    async fn rpc(&self, network: &NetworkId) -> Result<&EvmRpc, ChainCallError> {
        let lazy = self
            .networks
            .get(network)
            .ok_or_else(|| ChainCallError::NotWatched(network.to_string()))?;
        let name = network.to_string();
        lazy.rpc
            .get_or_try_init(|| async {
                EvmRpc::connect_network(&lazy.network, &lazy.network.rpc_urls)
                    .await
                    .map(|rpc| rpc.with_backoff(request_backoff()))
            })
            .await
            .map_err(|fault| ChainCallError::Rpc {
                network: name.clone(),
                fault,
            })
    }

    /// Asks `network` whether `signature` is the smart-contract wallet `signer`'s over
    /// `hash`: `Some(answer)` when `signer` holds code or the signature is ERC-6492
    /// wrapped, `None` when `signer` is a plain account (whose signature paywatch checks
    /// itself, under its strict rules).
    pub async fn verify_contract_signature(
        &self,
        network: &NetworkId,
        signer: Address,
        hash: B256,
        signature: &[u8],
    ) -> Result<Option<bool>, ChainCallError> {
        let rpc = self.rpc(network).await?;
        let failed = |fault| ChainCallError::Rpc {
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

    /// The proof that transaction `tx_hash` of block `block_hash` has its receipt, built
    /// from the block's header and receipts.
    pub async fn receipt_proof(
        &self,
        network: &NetworkId,
        block_hash: B256,
        tx_hash: B256,
    ) -> Result<ReceiptProof, ChainCallError> {
        let rpc = self.rpc(network).await?;
        build_receipt_proof(rpc, block_hash, tx_hash)
            .await
            .map_err(|e| match e {
                BuildError::Rpc(fault) => ChainCallError::Rpc {
                    network: network.to_string(),
                    fault,
                },
                other => ChainCallError::NoProof {
                    network: network.to_string(),
                    detail: other.to_string(),
                },
            })
    }

    /// EIP-3009 `authorizationState(authorizer, nonce)` of `token` at block `at` (the
    /// latest block when `None`): whether the authorization is used (or canceled) as of
    /// that block.
    pub async fn authorization_used(
        &self,
        network: &NetworkId,
        token: Address,
        authorizer: Address,
        nonce: B256,
        at: Option<u64>,
    ) -> Result<bool, ChainCallError> {
        self.view(network, token, authorizationStateCall { authorizer, nonce }, at)
            .await
    }

    /// Whether Permit2's `nonce` of `owner` is used (or invalidated) as of block `at` (the
    /// latest block when `None`), from `nonceBitmap(owner, nonce >> 8)` of the network's
    /// Permit2. Permit2 nonces are the owner's across every token and spender.
    pub async fn permit2_nonce_used(
        &self,
        network: &NetworkId,
        owner: Address,
        nonce: U256,
        at: Option<u64>,
    ) -> Result<bool, ChainCallError> {
        let permit2: Address = self
            .networks
            .get(network)
            .and_then(|lazy| lazy.network.permit2)
            .ok_or_else(|| ChainCallError::NotWatched(network.to_string()))?;
        let call = nonceBitmapCall {
            owner,
            wordPos: nonce >> 8,
        };
        let bitmap = self.view(network, permit2, call, at).await?;
        Ok(bitmap.bit((nonce & U256::from(0xffu8)).to::<usize>()))
    }

    /// The view function `call` of `contract` at block `at` (the latest block when `None`),
    /// decoded; `NotImplemented` when it reverts or answers something else.
    async fn view<C: SolCall>(
        &self,
        network: &NetworkId,
        contract: Address,
        call: C,
        at: Option<u64>,
    ) -> Result<C::Return, ChainCallError> {
        let block = at.map_or(BlockNumberOrTag::Latest, BlockNumberOrTag::Number);
        let rpc = self.rpc(network).await?;
        let not_implemented = |detail: String| ChainCallError::NotImplemented {
            network: network.to_string(),
            contract,
            function: C::SIGNATURE,
            detail,
        };
        let answer = rpc
            .call_at(contract, call.abi_encode().into(), block)
            .await
            .map_err(|fault| ChainCallError::Rpc {
                network: network.to_string(),
                fault,
            })?
            .ok_or_else(|| not_implemented("the call reverted".to_string()))?;
        C::abi_decode_returns(&answer).map_err(|e| not_implemented(e.to_string()))
    }
}
