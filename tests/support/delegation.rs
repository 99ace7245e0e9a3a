//! x402's ERC-7710 path on anvil: paywatch's own stand-in for MetaMask's
//! `DelegationManager` (`contracts/DelegationManager.sol`: same ABI, events and behaviour),
//! placed at the canonical address, delegator accounts, and delegations signed by their
//! owners with real EIP-712 signatures, redeemed as an x402 facilitator does:
//! `redeemDelegations([context], [single mode], [token ‖ 0 ‖ transfer(payTo, amount)])`.

use alloy::primitives::{Address, B256, Bytes, U256, address};
use alloy::signers::Signer;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol;
use alloy::sol_types::{SolCall, SolStruct, SolValue, eip712_domain};
pub use paywatch_evm::decode::Delegation;
use paywatch_evm::settle_calls::{DelegationManager, Erc20};

use crate::chain::Chain;
use crate::permit2::{deploy, place};

/// MetaMask's `DelegationManager` v1.3.0, at the same address on every chain it is on.
pub const DELEGATION_MANAGER: Address = address!("db9b1e94b5b69df7e401ddbede43491141047db3");
/// The root delegation's `authority`.
pub const ROOT_AUTHORITY: B256 = B256::repeat_byte(0xff);

sol! {
    /// The delegator account's direct call by its owner.
    interface Account {
        function execute(address target, bytes data) returns (bytes);
    }
}

/// The EIP-712 message a delegator signs (the signature and caveat `args` left out).
mod signed {
    alloy::sol! {
        struct Caveat { address enforcer; bytes terms; }
        struct Delegation {
            address delegate;
            address delegator;
            bytes32 authority;
            Caveat[] caveats;
            uint256 salt;
        }
    }
}

/// The manager installed on one anvil chain.
pub struct DelegationKit {
    chain_id: u64,
}

/// One redemption: a chain of delegations (leaf first, root last) and the transfer the
/// root delegator's account executes.
pub struct Redemption {
    /// The chain, leaf first.
    pub chain: Vec<Delegation>,
    /// The token called.
    pub token: Address,
    /// The recipient.
    pub to: Address,
    /// The amount.
    pub amount: u64,
}

impl DelegationKit {
    /// Deploys the stand-in and places its runtime code at the canonical address.
    pub async fn install(chain: &Chain) -> Self {
        place(
            chain,
            include_str!("../contracts/DelegationManager.json"),
            &[],
            DELEGATION_MANAGER,
        )
        .await;
        Self {
            chain_id: chain.chain_id(),
        }
    }

    /// Deploys a delegator account owned by `owner` that trusts the canonical manager.
    pub async fn account(&self, chain: &Chain, owner: Address) -> Address {
        deploy(
            chain,
            include_str!("../contracts/DeleGatorAccount.json"),
            &(owner, DELEGATION_MANAGER).abi_encode(),
        )
        .await
    }

    /// The EIP-712 type of the delegation a delegator signs.
    pub fn signed_type() -> String {
        signed::Delegation::eip712_encode_type().into_owned()
    }

    /// A delegation from `delegator` to `delegate` under `authority` (the parent
    /// delegation's hash, or [`ROOT_AUTHORITY`]), signed with EIP-712 by `signer` (the
    /// delegator itself, or its account's owner).
    pub async fn delegate(
        &self,
        signer: &PrivateKeySigner,
        delegator: Address,
        delegate: Address,
        authority: B256,
        salt: u64,
    ) -> Delegation {
        let message = signed::Delegation {
            delegate,
            delegator,
            authority,
            caveats: Vec::new(),
            salt: U256::from(salt),
        };
        let domain = eip712_domain! {
            name: "DelegationManager",
            version: "1",
            chain_id: self.chain_id,
            verifying_contract: DELEGATION_MANAGER,
        };
        let signature = signer
            .sign_hash(&message.eip712_signing_hash(&domain))
            .await
            .expect("sign delegation");
        Delegation {
            delegate,
            delegator,
            authority,
            caveats: Vec::new(),
            salt: U256::from(salt),
            signature: signature.as_bytes().to_vec().into(),
        }
    }

    /// The EIP-712 struct hash of `delegation`, which a child delegation names as its
    /// authority (computed as the framework's `EncoderLib` does).
    pub fn hash(delegation: &Delegation) -> B256 {
        signed::Delegation {
            delegate: delegation.delegate,
            delegator: delegation.delegator,
            authority: delegation.authority,
            caveats: Vec::new(),
            salt: delegation.salt,
        }
        .eip712_hash_struct()
    }

    /// The facilitator's `redeemDelegations` call for `redemptions`, each in ERC-7579
    /// single call mode: `token ‖ value 0 ‖ transfer(to, amount)`.
    pub fn redeem(redemptions: &[Redemption]) -> (Address, Bytes) {
        let call = DelegationManager::redeemDelegationsCall {
            _permissionContexts: redemptions.iter().map(|r| r.chain.abi_encode().into()).collect(),
            _modes: vec![B256::ZERO; redemptions.len()],
            _executionCallDatas: redemptions
                .iter()
                .map(|r| {
                    let transfer = Erc20::transferCall {
                        to: r.to,
                        amount: U256::from(r.amount),
                    }
                    .abi_encode();
                    [r.token.as_slice(), &[0u8; 32], &transfer].concat().into()
                })
                .collect(),
        };
        (DELEGATION_MANAGER, call.abi_encode().into())
    }

    /// The owner's direct call making `account` send `amount` of `token` to `to` (a
    /// transfer outside any redemption).
    pub fn account_transfer(account: Address, token: Address, to: Address, amount: u64) -> (Address, Bytes) {
        let transfer = Erc20::transferCall {
            to,
            amount: U256::from(amount),
        }
        .abi_encode();
        let call = Account::executeCall {
            target: token,
            data: transfer.into(),
        };
        (account, call.abi_encode().into())
    }
}

/// Settles, on `token`, one Permit2 `exact` payment, one `upto` payment (settling less
/// than its maximum) and three ERC-7710 payments (one redemption, then two in one call)
/// from `payer`'s wallet and a delegator account it owns, to `seller`, sent by
/// `facilitator`; installs Permit2, x402's proxies and the delegation manager first.
/// Returns the five payments' transactions (the last holds two payments).
pub async fn pay_by_every_other_method(
    chain: &Chain,
    token: &crate::token::Token,
    (payer, seller, facilitator): (usize, usize, usize),
) -> Vec<B256> {
    use crate::permit2::{PERMIT2, Permit2Kit, send_call};
    let (signer, to, sender) = (
        chain.signer(payer),
        chain.account(seller),
        chain.account(facilitator),
    );
    token.mint(signer.address(), 1_000_000).await;
    token.approve(signer.address(), PERMIT2, U256::MAX).await;
    let permit2 = Permit2Kit::install(chain).await;
    let exact = permit2
        .sign_exact(&signer, token.address, to, 1_100, U256::from(0xe1u64))
        .await;
    let upto = permit2
        .sign_upto(&signer, token.address, to, sender, 5_000, U256::from(0xe2u64))
        .await;
    let mut sent = vec![
        send_call(chain, sender, permit2.exact_settle(&exact))
            .await
            .transaction_hash,
        send_call(chain, sender, permit2.upto_settle(&upto, 1_200))
            .await
            .transaction_hash,
    ];
    let kit = DelegationKit::install(chain).await;
    let account = kit.account(chain, signer.address()).await;
    token.mint(account, 1_000_000).await;
    let delegation = kit.delegate(&signer, account, sender, ROOT_AUTHORITY, 1).await;
    let pays = |amount: u64| Redemption {
        chain: vec![delegation.clone()],
        token: token.address,
        to,
        amount,
    };
    for redemptions in [vec![pays(1_300)], vec![pays(1_400), pays(1_500)]] {
        let call = DelegationKit::redeem(&redemptions);
        sent.push(send_call(chain, sender, call).await.transaction_hash);
    }
    sent
}
