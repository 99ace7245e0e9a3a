//! A real anvil node per test, with helpers for its mining, snapshot and reorg RPCs.

use alloy::network::EthereumWallet;
use alloy::node_bindings::{Anvil, AnvilInstance};
use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::rpc::types::TransactionReceipt;
use alloy::signers::local::PrivateKeySigner;

use crate::tools::anvil_path;

/// A running anvil node; killed when dropped.
pub struct Chain {
    anvil: AnvilInstance,
    /// A provider that signs with every dev account.
    pub provider: DynProvider,
}

impl Chain {
    /// Starts anvil on a free port with automine.
    pub async fn start() -> Self {
        Self::from_anvil(Anvil::at(anvil_path()).spawn())
    }

    /// Starts anvil for a long load of full blocks (a benchmark's chain): with a base fee of
    /// zero, which stays zero — from a positive one, full blocks raise it 12.5 % a block
    /// until it passes the sends' max fee and anvil drops them from its pool (seen after
    /// ~980 transactions of 50 transfers each) — and without state history, which anvil
    /// otherwise writes to `~/.foundry/anvil/tmp` (tens of GB for such a chain).
    pub async fn start_for_load() -> Self {
        Self::from_anvil(
            Anvil::at(anvil_path())
                .args(["--base-fee", "0", "--prune-history"])
                .spawn(),
        )
    }

    /// Starts anvil with chain id `chain_id` (a real network's, say) on a free port.
    pub async fn start_as(chain_id: u64) -> Self {
        Self::from_anvil(Anvil::at(anvil_path()).chain_id(chain_id).spawn())
    }

    /// Starts anvil on `port` (the local network of `chains.toml` uses 8545).
    pub async fn start_on(port: u16) -> Self {
        Self::from_anvil(Anvil::at(anvil_path()).port(port).spawn())
    }

    /// Starts anvil as an OP-stack chain (`--network optimism`, as Base and Optimism are),
    /// whose blocks can hold deposit transactions (type `0x7e`).
    pub async fn start_op_stack() -> Self {
        Self::from_anvil(Anvil::at(anvil_path()).args(["--network", "optimism"]).spawn())
    }

    /// The id of the process anvil was started as (npm's launcher, whose child is the
    /// node itself: read the CPU time the node spends with `process_tree_cpu_seconds`).
    pub fn pid(&self) -> u32 {
        self.anvil.child().id()
    }

    fn from_anvil(anvil: AnvilInstance) -> Self {
        // Account 0 signs by default (it deploys and mints); the others sign their own sends.
        let mut wallet = EthereumWallet::new(PrivateKeySigner::from(anvil.keys()[0].clone()));
        for key in &anvil.keys()[1..] {
            wallet.register_signer(PrivateKeySigner::from(key.clone()));
        }
        // Nonces are read from the node for every send: evm_revert rewinds them.
        let provider = ProviderBuilder::new()
            .with_simple_nonce_management()
            .wallet(wallet)
            .connect_http(anvil.endpoint_url())
            .erased();
        Self { anvil, provider }
    }

    /// Sends an OP-stack deposit transaction (type `0x7e`: no signature, a source hash; the
    /// kind every Base block opens with) of one wei from `from` to `to`; its hash. Needs a
    /// chain started with [`Chain::start_op_stack`].
    pub async fn send_deposit(&self, from: Address, to: Address, source_hash: B256) -> B256 {
        let deposit = serde_json::json!({
            "type": "0x7e",
            "from": from,
            "to": to,
            "value": "0x1",
            "mint": "0x0",
            "sourceHash": source_hash,
            "isSystemTx": false,
            "gas": "0x30000",
        });
        self.provider
            .raw_request("eth_sendTransaction".into(), (deposit,))
            .await
            .expect("a deposit transaction")
    }

    /// HTTP endpoint.
    pub fn endpoint(&self) -> String {
        self.anvil.endpoint()
    }

    /// Chain id.
    pub fn chain_id(&self) -> u64 {
        self.anvil.chain_id()
    }

    /// Dev account `i` (account 0 deploys, the others play payers, sellers, facilitators).
    pub fn account(&self, i: usize) -> Address {
        self.anvil.addresses()[i]
    }

    /// Signer of dev account `i`.
    pub fn signer(&self, i: usize) -> PrivateKeySigner {
        PrivateKeySigner::from(self.anvil.keys()[i].clone())
    }

    /// Current block number.
    pub async fn block_number(&self) -> u64 {
        self.provider.get_block_number().await.expect("eth_blockNumber")
    }

    /// Mines `n` empty blocks.
    pub async fn mine(&self, n: u64) {
        let _: serde_json::Value = self
            .provider
            .raw_request("anvil_mine".into(), (U256::from(n),))
            .await
            .expect("anvil_mine");
    }

    /// Moves the chain's clock `seconds` forward and mines a block there.
    pub async fn travel(&self, seconds: u64) {
        let _: serde_json::Value = self
            .provider
            .raw_request("evm_increaseTime".into(), (seconds,))
            .await
            .expect("evm_increaseTime");
        self.mine(1).await;
    }

    /// Takes a snapshot of the chain state (`evm_snapshot`).
    pub async fn snapshot(&self) -> String {
        self.provider
            .raw_request("evm_snapshot".into(), ())
            .await
            .expect("evm_snapshot")
    }

    /// Reverts to a snapshot (`evm_revert`): the blocks after it leave the chain, and the
    /// blocks mined next replace them — a reorg.
    pub async fn revert(&self, snapshot: &str) {
        let reverted: bool = self
            .provider
            .raw_request("evm_revert".into(), (snapshot,))
            .await
            .expect("evm_revert");
        assert!(reverted, "evm_revert {snapshot}");
    }

    /// The signed bytes of a mined transaction, to send it again after a reorg.
    pub async fn raw_transaction(&self, hash: B256) -> Bytes {
        self.provider
            .raw_request("eth_getRawTransactionByHash".into(), (hash,))
            .await
            .expect("eth_getRawTransactionByHash")
    }

    /// Sends `raw` again (after a revert) and waits for its receipt by asking for it: the
    /// provider's block watcher, which `get_receipt` uses, can miss a transaction mined
    /// right after the chain went back.
    pub async fn resend(&self, raw: &Bytes) -> TransactionReceipt {
        let hash = *self
            .provider
            .send_raw_transaction(raw)
            .await
            .expect("eth_sendRawTransaction")
            .tx_hash();
        for _ in 0..200 {
            if let Some(receipt) = self
                .provider
                .get_transaction_receipt(hash)
                .await
                .expect("eth_getTransactionReceipt")
            {
                return receipt;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("{hash} was not mined within 10 s");
    }

    /// Turns automine on or off (off: transactions wait in the pool until `mine`).
    pub async fn set_automine(&self, on: bool) {
        let _: serde_json::Value = self
            .provider
            .raw_request("evm_setAutomine".into(), (on,))
            .await
            .expect("evm_setAutomine");
    }

    /// Sends every `(target, calldata)` from `from` with its fields set here (no RPC to fill
    /// them; benchmarks send thousands), 32 in flight, automine off while they are sent, then
    /// mines until all are in blocks, and two blocks on top.
    pub async fn send_all(&self, from: Address, calls: Vec<(Address, Bytes)>, gas: u64) {
        self.set_automine(false).await;
        let first_nonce = self.provider.get_transaction_count(from).await.expect("nonce");
        let count = calls.len() as u64;
        self.send_from(from, first_nonce, calls, gas).await;
        let mut mined_since_progress = 0u32;
        let mut included = self.provider.get_transaction_count(from).await.expect("nonce");
        while included < first_nonce + count {
            self.mine(1).await;
            let now_included = self.provider.get_transaction_count(from).await.expect("nonce");
            mined_since_progress = if now_included > included {
                0
            } else {
                mined_since_progress + 1
            };
            included = now_included;
            if mined_since_progress == 64 {
                let pool: serde_json::Value = self
                    .provider
                    .raw_request("txpool_status".into(), ())
                    .await
                    .expect("txpool_status");
                assert!(
                    pool["pending"] != "0x0" || pool["queued"] != "0x0",
                    "anvil dropped {} of the {count} transactions sent (its pool is empty): full blocks \
                     raised the base fee past their max fee? start such a chain with Chain::start_for_load",
                    first_nonce + count - included
                );
                mined_since_progress = 0;
            }
        }
        self.set_automine(true).await;
        self.mine(2).await;
    }

    /// Sends each group of `(target, calldata)` from `from` as [`Chain::send_all`] does and
    /// mines it alone into one block, so that a chain's blocks hold exactly these groups;
    /// then two blocks on top.
    pub async fn send_in_blocks(&self, from: Address, blocks: Vec<Vec<(Address, Bytes)>>, gas: u64) {
        self.set_automine(false).await;
        let mut nonce = self.provider.get_transaction_count(from).await.expect("nonce");
        for calls in blocks {
            let count = calls.len() as u64;
            self.send_from(from, nonce, calls, gas).await;
            self.mine(1).await;
            nonce += count;
            let included = self.provider.get_transaction_count(from).await.expect("nonce");
            assert_eq!(
                included, nonce,
                "anvil left some of a block's {count} transactions out of it"
            );
        }
        self.set_automine(true).await;
        self.mine(2).await;
    }

    /// Sends `calls` from `from` with nonces from `first_nonce` on, 32 in flight.
    async fn send_from(&self, from: Address, first_nonce: u64, calls: Vec<(Address, Bytes)>, gas: u64) {
        use futures::StreamExt;
        futures::stream::iter(calls.into_iter().enumerate())
            .map(|(i, (to, input))| {
                let request = alloy::rpc::types::TransactionRequest::default()
                    .from(from)
                    .to(to)
                    .input(input.into())
                    .nonce(first_nonce + i as u64)
                    .gas_limit(gas)
                    .max_fee_per_gas(100_000_000_000)
                    .max_priority_fee_per_gas(0);
                async move {
                    *self
                        .provider
                        .send_transaction(request)
                        .await
                        .expect("send transaction")
                        .tx_hash()
                }
            })
            .buffer_unordered(32)
            .collect::<Vec<_>>()
            .await;
    }
}
