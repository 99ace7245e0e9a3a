//! The batch settler (`contracts/BatchSettler.sol`, compiled artifact beside it): several
//! settling calls (`transferWithAuthorization`, the Permit2 proxies' `settle`), of one
//! token or several, in one transaction.

use alloy::primitives::{Address, Bytes};
use alloy::providers::DynProvider;
use alloy::rpc::types::TransactionReceipt;
use alloy::sol;

use crate::chain::Chain;
use crate::token::{Authorization, Token};

sol!(
    #[sol(rpc)]
    BatchSettler,
    "contracts/BatchSettler.json"
);

/// A deployed batch settler.
pub struct Batcher {
    contract: BatchSettler::BatchSettlerInstance<DynProvider>,
}

impl Batcher {
    /// Deploys the settler from dev account 0.
    pub async fn deploy(chain: &Chain) -> Self {
        let contract = BatchSettler::deploy(chain.provider.clone())
            .await
            .expect("deploy BatchSettler");
        Self { contract }
    }

    /// Its address.
    pub fn address(&self) -> Address {
        *self.contract.address()
    }

    /// Sends every `(target, calldata)` in one transaction from `facilitator`, in order,
    /// and waits for its receipt.
    pub async fn settle_calls(
        &self,
        calls: Vec<(Address, Bytes)>,
        facilitator: Address,
    ) -> TransactionReceipt {
        let (targets, calls): (Vec<Address>, Vec<Bytes>) = calls.into_iter().unzip();
        let receipt = self
            .contract
            .settle(targets, calls)
            .from(facilitator)
            .send()
            .await
            .expect("send settle")
            .get_receipt()
            .await
            .expect("receipt");
        assert!(receipt.status(), "the batch settlement reverted");
        receipt
    }

    /// Settles every `(token, authorization)` in one transaction sent by `facilitator`, in
    /// order, and waits for its receipt.
    pub async fn settle(
        &self,
        settlements: &[(&Token, &Authorization)],
        facilitator: Address,
    ) -> TransactionReceipt {
        let calls = settlements
            .iter()
            .map(|(token, auth)| (token.address, token.settle_calldata(auth)))
            .collect();
        self.settle_calls(calls, facilitator).await
    }
}
