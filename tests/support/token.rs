//! The test EIP-3009 token (`contracts/Eip3009Token.sol`, compiled artifact beside it):
//! deploy, mint, and settle real `transferWithAuthorization` calls signed with EIP-712.

use std::time::Instant;

use alloy::network::Ethereum;
use alloy::primitives::{Address, B256, U256, keccak256};
use alloy::providers::{DynProvider, PendingTransactionBuilder, Provider};
use alloy::rpc::types::TransactionReceipt;
use alloy::signers::Signer;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol;
use alloy::sol_types::{SolStruct, eip712_domain};

use paywatch_core::config::Eip712Name;

use crate::chain::Chain;

sol!(
    #[sol(rpc)]
    #[allow(clippy::too_many_arguments)]
    Eip3009Token,
    "contracts/Eip3009Token.json"
);

sol! {
    /// The EIP-3009 typed struct a payer signs.
    struct TransferWithAuthorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
    }
}

/// A deployed token.
pub struct Token {
    /// Contract address.
    pub address: Address,
    contract: Eip3009Token::Eip3009TokenInstance<DynProvider>,
    chain_id: u64,
    /// Its EIP-712 domain's name and version, which payers sign in.
    domain: Eip712Name,
}

/// USDC's EIP-712 domain name and version (Circle's FiatToken v2 on most networks).
fn usd_coin() -> Eip712Name {
    Eip712Name {
        name: "USD Coin".into(),
        version: "2".into(),
    }
}

/// A signed authorization, ready to submit.
pub struct Authorization {
    /// The signed fields.
    pub message: TransferWithAuthorization,
    /// Signature v (27/28).
    pub v: u8,
    /// Signature r.
    pub r: B256,
    /// Signature s.
    pub s: B256,
}

impl Token {
    /// Deploys a 6-decimals "USD Coin" (EIP-712 version "2") from dev account 0.
    pub async fn deploy(chain: &Chain) -> Self {
        let domain = usd_coin();
        let contract = Eip3009Token::deploy(
            chain.provider.clone(),
            domain.name.clone(),
            domain.version.clone(),
            "USDC".into(),
            6,
        )
        .await
        .expect("deploy Eip3009Token");
        Self {
            address: *contract.address(),
            contract,
            chain_id: chain.chain_id(),
            domain,
        }
    }

    /// The token with `decimals` and the EIP-712 `domain` name and version (USDC's when
    /// `None`), put at `address` (its runtime code, name, symbol and version) as the token
    /// a network's configuration names — a shipped network's USDC, say. Its EIP-712
    /// domain is computed from `address(this)` and the chain id, so signatures for
    /// `address` hold; account 0 mints, as it deployed the original.
    pub async fn deploy_at(
        chain: &Chain,
        address: Address,
        decimals: u8,
        domain: Option<&Eip712Name>,
    ) -> Self {
        let domain = domain.cloned().unwrap_or_else(usd_coin);
        let original = Eip3009Token::deploy(
            chain.provider.clone(),
            domain.name.clone(),
            domain.version.clone(),
            "USDC".into(),
            decimals,
        )
        .await
        .expect("deploy Eip3009Token");
        let provider = &chain.provider;
        let code = provider
            .get_code_at(*original.address())
            .await
            .expect("token code");
        let (): () = provider
            .raw_request("anvil_setCode".into(), (address, code))
            .await
            .expect("anvil_setCode");
        // The name, the symbol and the version, short strings stored in slots 0 to 2.
        for slot in [U256::ZERO, U256::from(1), U256::from(2)] {
            let value = provider
                .get_storage_at(*original.address(), slot)
                .await
                .expect("token storage");
            let _: bool = provider
                .raw_request(
                    "anvil_setStorageAt".into(),
                    (address, B256::from(slot), B256::from(value)),
                )
                .await
                .expect("anvil_setStorageAt");
        }
        Self {
            address,
            contract: Eip3009Token::new(address, chain.provider.clone()),
            chain_id: chain.chain_id(),
            domain,
        }
    }

    /// Mints `amount` to `to`.
    pub async fn mint(&self, to: Address, amount: u64) -> TransactionReceipt {
        self.contract
            .mint(to, U256::from(amount))
            .send()
            .await
            .expect("send mint")
            .get_receipt()
            .await
            .expect("mint receipt")
    }

    /// Balance of `who`.
    pub async fn balance(&self, who: Address) -> U256 {
        self.contract.balanceOf(who).call().await.expect("balanceOf")
    }

    /// Signs an authorization for `payer` to pay `pay_to` `amount` with `nonce`.
    pub async fn authorize(
        &self,
        payer: &PrivateKeySigner,
        pay_to: Address,
        amount: u64,
        nonce: B256,
    ) -> Authorization {
        let (message, signature) = self
            .sign_authorization(payer, payer.address(), pay_to, amount, nonce)
            .await;
        Authorization {
            message,
            v: 27 + u8::from(signature.v()),
            r: signature.r().into(),
            s: signature.s().into(),
        }
    }

    /// The EIP-3009 authorization for `from` to pay `pay_to` `amount` with `nonce`, with
    /// `signer`'s EIP-712 signature over it (`signer` is `from`, or a contract wallet's owner).
    async fn sign_authorization(
        &self,
        signer: &PrivateKeySigner,
        from: Address,
        pay_to: Address,
        amount: u64,
        nonce: B256,
    ) -> (TransferWithAuthorization, alloy::primitives::Signature) {
        let message = TransferWithAuthorization {
            from,
            to: pay_to,
            value: U256::from(amount),
            validAfter: U256::ZERO,
            validBefore: U256::from(u64::MAX),
            nonce,
        };
        let domain = eip712_domain! {
            name: self.domain.name.clone(),
            version: self.domain.version.clone(),
            chain_id: self.chain_id,
            verifying_contract: self.address,
        };
        let signature = signer
            .sign_hash(&message.eip712_signing_hash(&domain))
            .await
            .expect("sign authorization");
        (message, signature)
    }

    /// The `transferWithAuthorization` call that settles `auth`.
    fn settle_call(
        &self,
        auth: &Authorization,
    ) -> alloy::contract::SolCallBuilder<&DynProvider, Eip3009Token::transferWithAuthorization_1Call> {
        let m = &auth.message;
        self.contract.transferWithAuthorization_1(
            m.from,
            m.to,
            m.value,
            m.validAfter,
            m.validBefore,
            m.nonce,
            auth.v,
            auth.r,
            auth.s,
        )
    }

    /// The calldata of the `transferWithAuthorization` that settles `auth` (for a
    /// contract that settles several in one transaction).
    pub fn settle_calldata(&self, auth: &Authorization) -> alloy::primitives::Bytes {
        self.settle_call(auth).calldata().clone()
    }

    /// Sends `transferWithAuthorization` from `facilitator` and returns the pending
    /// transaction (with automine off it waits in the pool until a block is mined).
    pub async fn submit(
        &self,
        auth: &Authorization,
        facilitator: Address,
    ) -> PendingTransactionBuilder<Ethereum> {
        self.settle_call(auth)
            .from(facilitator)
            .send()
            .await
            .expect("send transferWithAuthorization")
    }

    /// Signs and settles one x402 payment, waiting for its receipt.
    pub async fn pay(
        &self,
        payer: &PrivateKeySigner,
        pay_to: Address,
        amount: u64,
        nonce: B256,
        facilitator: Address,
    ) -> TransactionReceipt {
        let auth = self.authorize(payer, pay_to, amount, nonce).await;
        let receipt = self
            .submit(&auth, facilitator)
            .await
            .get_receipt()
            .await
            .expect("receipt");
        assert!(receipt.status(), "transferWithAuthorization reverted");
        receipt
    }

    /// Settles one x402 payment from the smart-contract wallet `wallet`, whose `owner`
    /// signs the EIP-3009 authorization; the token asks the wallet (ERC-1271), as USDC
    /// v2.2 does with its bytes-signature `transferWithAuthorization`.
    pub async fn pay_from_wallet(
        &self,
        owner: &PrivateKeySigner,
        wallet: Address,
        pay_to: Address,
        amount: u64,
        nonce: B256,
        facilitator: Address,
    ) -> TransactionReceipt {
        let (message, signature) = self
            .sign_authorization(owner, wallet, pay_to, amount, nonce)
            .await;
        let receipt = self
            .contract
            .transferWithAuthorization_0(
                message.from,
                message.to,
                message.value,
                message.validAfter,
                message.validBefore,
                message.nonce,
                signature.as_bytes().to_vec().into(),
            )
            .from(facilitator)
            .send()
            .await
            .expect("send transferWithAuthorization (bytes signature)")
            .get_receipt()
            .await
            .expect("receipt");
        assert!(
            receipt.status(),
            "transferWithAuthorization from a wallet reverted"
        );
        receipt
    }

    /// `owner` approves `spender` for `amount` (ERC-20 `approve`).
    pub async fn approve(&self, owner: Address, spender: Address, amount: U256) -> TransactionReceipt {
        self.contract
            .approve(spender, amount)
            .from(owner)
            .send()
            .await
            .expect("send approve")
            .get_receipt()
            .await
            .expect("approve receipt")
    }

    /// A plain ERC-20 `transfer` from `from` (no authorization: not an x402 payment).
    pub async fn transfer(&self, from: Address, to: Address, amount: u64) -> TransactionReceipt {
        self.contract
            .transfer(to, U256::from(amount))
            .from(from)
            .send()
            .await
            .expect("send transfer")
            .get_receipt()
            .await
            .expect("transfer receipt")
    }
}

/// Payment number `i` of a series: from payer `1 + i % payers` to account 5, of
/// `100 + i`, nonce `i + 1` repeated, settled by account 6; one block each.
pub async fn pay_in_turn(chain: &Chain, token: &Token, i: u8, payers: u8) -> TransactionReceipt {
    token
        .pay(
            &chain.signer(1 + usize::from(i % payers)),
            chain.account(5),
            100 + u64::from(i),
            B256::repeat_byte(i + 1),
            chain.account(6),
        )
        .await
}

/// Payers of [`send_payments`].
pub const PAYERS: std::ops::Range<usize> = 1..9;
/// The seller of [`send_payments`].
pub const SELLER: usize = 9;
/// The facilitator of [`send_payments`].
pub const FACILITATOR: usize = 0;
/// The gas limit of one payment's transaction (`transferWithAuthorization`) as the
/// benchmarks send it.
pub const PAYMENT_GAS: u64 = 150_000;

/// Sends `count` real EIP-3009 payments from eight payers to one seller, submitted by
/// one facilitator in batches of blocks (automine off while they are submitted), and mines
/// two blocks on top.
pub async fn send_payments(chain: &Chain, token: &Token, count: usize) {
    let started = Instant::now();
    let calls = payment_calls(chain, token, count).await;
    chain
        .send_all(chain.account(FACILITATOR), calls, PAYMENT_GAS)
        .await;
    eprintln!(
        "sent {count} payments in {:.1} s, chain head {}",
        started.elapsed().as_secs_f64(),
        chain.block_number().await
    );
}

/// Funds the eight payers and returns the settling calls of `count` EIP-3009 payments from
/// them to [`SELLER`], `(token, calldata)`, signed with real keys.
pub async fn payment_calls(
    chain: &Chain,
    token: &Token,
    count: usize,
) -> Vec<(Address, alloy::primitives::Bytes)> {
    for payer in PAYERS {
        token.mint(chain.account(payer), u64::MAX / 16).await;
    }
    let mut calls = Vec::with_capacity(count);
    for i in 0..count {
        let payer = chain.signer(PAYERS.start + i % PAYERS.len());
        let nonce: B256 = keccak256(format!("bench payment {i}"));
        let auth = token
            .authorize(&payer, chain.account(SELLER), 1_000 + i as u64, nonce)
            .await;
        calls.push((token.address, token.settle_calldata(&auth)));
    }
    calls
}

/// The calldata of a plain ERC-20 `transfer(to, value)` of this token's ABI.
pub fn transfer_calldata(to: Address, value: u64) -> alloy::primitives::Bytes {
    use alloy::sol_types::SolCall;
    Eip3009Token::transferCall {
        to,
        value: U256::from(value),
    }
    .abi_encode()
    .into()
}
