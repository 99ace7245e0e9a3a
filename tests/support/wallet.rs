//! Smart-contract wallets for review tests (`contracts/OwnerWallet.sol`, compiled artifacts
//! beside it): a CREATE2 factory, wallets it deploys for an owner key, and ERC-6492
//! wrapped signatures for wallets it has not deployed yet.

use alloy::primitives::{Address, B256, Bytes};
use alloy::providers::{DynProvider, Provider};
use alloy::sol;
use alloy::sol_types::{SolCall, SolValue};
use paywatch_core::signature::ERC6492_SUFFIX;

use crate::chain::Chain;

sol!(
    #[sol(rpc)]
    OwnerWalletFactory,
    "contracts/OwnerWalletFactory.json"
);

/// A deployed factory.
pub struct WalletFactory {
    /// Contract address.
    pub address: Address,
    contract: OwnerWalletFactory::OwnerWalletFactoryInstance<DynProvider>,
    provider: DynProvider,
}

impl WalletFactory {
    /// Deploys the factory from dev account 0.
    pub async fn deploy(chain: &Chain) -> Self {
        let contract = OwnerWalletFactory::deploy(chain.provider.clone())
            .await
            .expect("deploy OwnerWalletFactory");
        Self {
            address: *contract.address(),
            contract,
            provider: chain.provider.clone(),
        }
    }

    /// Where the wallet of `owner` with `salt` is (or will be) deployed.
    pub async fn address_of(&self, owner: Address, salt: B256) -> Address {
        self.contract
            .addressOf(owner, salt)
            .call()
            .await
            .expect("addressOf")
    }

    /// Deploys the wallet of `owner` with `salt` and returns its address.
    pub async fn deploy_wallet(&self, owner: Address, salt: B256) -> Address {
        let receipt = self
            .contract
            .deployWallet(owner, salt)
            .send()
            .await
            .expect("send deploy")
            .get_receipt()
            .await
            .expect("deploy receipt");
        assert!(receipt.status(), "wallet deployment reverted");
        self.address_of(owner, salt).await
    }

    /// Whether `address` holds code.
    pub async fn is_deployed(&self, address: Address) -> bool {
        !self
            .provider
            .get_code_at(address)
            .await
            .expect("eth_getCode")
            .is_empty()
    }

    /// `inner` wrapped per ERC-6492 for the not-yet-deployed wallet of `owner` with `salt`:
    /// `abi.encode(factory, deploy calldata, inner)` followed by the magic suffix.
    pub fn wrap_erc6492(&self, owner: Address, salt: B256, inner: &[u8]) -> Vec<u8> {
        let calldata = OwnerWalletFactory::deployWalletCall { owner, salt }.abi_encode();
        let body = (self.address, Bytes::from(calldata), Bytes::copy_from_slice(inner)).abi_encode_params();
        [body, ERC6492_SUFFIX.to_vec()].concat()
    }
}
