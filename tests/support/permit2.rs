//! x402's Permit2 path on anvil: paywatch's own stand-ins for Permit2 and x402's exact and
//! upto proxies (`contracts/Permit2Settlement.sol`: same ABI, events and behaviour),
//! deployed and then placed at the canonical addresses the x402 SDK uses, and Permit2
//! witness transfers signed by payers with real EIP-712 signatures.

use alloy::network::TransactionBuilder;
use alloy::primitives::{Address, Bytes, U256, address};
use alloy::providers::Provider;
use alloy::rpc::types::{TransactionReceipt, TransactionRequest};
use alloy::signers::Signer;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol;
use alloy::sol_types::{SolCall, SolStruct, eip712_domain};

use crate::chain::Chain;
use crate::token::Token;

/// Uniswap's Permit2, at the same address on every chain.
pub const PERMIT2: Address = address!("000000000022d473030f116ddee9f6b43ac78ba3");
/// x402's exact Permit2 proxy, at the same address on every chain.
pub const EXACT_PROXY: Address = address!("402085c248eea27d92e8b30b2c58ed07f9e20001");
/// x402's upto Permit2 proxy, at the same address on every chain.
pub const UPTO_PROXY: Address = address!("4020a4f3b7b90cca423b9fabcc0ce57c6c240002");

sol! {
    #[derive(Debug)]
    struct TokenPermissions { address token; uint256 amount; }
    #[derive(Debug)]
    struct PermitTransferFrom { TokenPermissions permitted; uint256 nonce; uint256 deadline; }
    struct ExactWitness { address to; uint256 validAfter; }
    struct UptoWitness { address to; address facilitator; uint256 validAfter; }

    /// The exact proxy's `settle`, as x402's source declares it.
    interface ExactProxy {
        function settle(PermitTransferFrom permit, address owner, ExactWitness witness, bytes signature);
    }

    /// The upto proxy's `settle`, as x402's source declares it.
    interface UptoProxy {
        function settle(PermitTransferFrom permit, uint256 amount, address owner, UptoWitness witness, bytes signature);
    }
}

/// The EIP-712 message a payer signs for the exact proxy (Permit2's
/// `PermitWitnessTransferFrom` with x402's exact witness).
mod exact_message {
    alloy::sol! {
        struct TokenPermissions { address token; uint256 amount; }
        struct Witness { address to; uint256 validAfter; }
        struct PermitWitnessTransferFrom {
            TokenPermissions permitted;
            address spender;
            uint256 nonce;
            uint256 deadline;
            Witness witness;
        }
    }
}

/// The EIP-712 message a payer signs for the upto proxy (its witness names the facilitator).
mod upto_message {
    alloy::sol! {
        struct TokenPermissions { address token; uint256 amount; }
        struct Witness { address to; address facilitator; uint256 validAfter; }
        struct PermitWitnessTransferFrom {
            TokenPermissions permitted;
            address spender;
            uint256 nonce;
            uint256 deadline;
            Witness witness;
        }
    }
}

/// The hex field `key` of a compiled artifact (JSON text).
fn artifact_hex<T: std::str::FromStr>(artifact: &str, key: &str) -> T {
    let artifact: serde_json::Value = serde_json::from_str(artifact).expect("a compiled artifact");
    artifact[key]
        .as_str()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| panic!("artifact field {key} is not hex"))
}

/// A payer's signed Permit2 transfer for one of the proxies.
#[derive(Debug, Clone)]
pub struct SignedPermit {
    /// The permit (token, maximum, nonce, deadline).
    pub permit: PermitTransferFrom,
    /// The payer.
    pub owner: Address,
    /// The seller.
    pub to: Address,
    /// Upto only: who may settle it.
    pub facilitator: Option<Address>,
    /// The payer's EIP-712 signature, 65 bytes.
    pub signature: Bytes,
}

/// Permit2 and x402's proxies installed on one anvil chain.
pub struct Permit2Kit {
    /// Where the exact proxy landed.
    pub exact: Address,
    /// Where the upto proxy landed.
    pub upto: Address,
    chain_id: u64,
}

impl Permit2Kit {
    /// Deploys the stand-ins for Permit2 and the two proxies (the proxies with the
    /// canonical Permit2 as constructor argument) and places their runtime code at the
    /// canonical addresses (`anvil_setCode`), where the x402 SDK looks for them. None of
    /// them keeps state or an address of its own in its code but the proxies' Permit2.
    pub async fn install(chain: &Chain) -> Self {
        let permit2 = include_str!("../contracts/Permit2SignatureTransfer.json");
        place(chain, permit2, &[], PERMIT2).await;
        let argument = PERMIT2.into_word();
        place(
            chain,
            include_str!("../contracts/X402ExactPermit2Proxy.json"),
            argument.as_slice(),
            EXACT_PROXY,
        )
        .await;
        place(
            chain,
            include_str!("../contracts/X402UptoPermit2Proxy.json"),
            argument.as_slice(),
            UPTO_PROXY,
        )
        .await;
        Self {
            exact: EXACT_PROXY,
            upto: UPTO_PROXY,
            chain_id: chain.chain_id(),
        }
    }

    fn domain(&self) -> alloy::sol_types::Eip712Domain {
        eip712_domain! {
            name: "Permit2",
            chain_id: self.chain_id,
            verifying_contract: PERMIT2,
        }
    }

    /// `payer`'s 65-byte EIP-712 signature of `message` in Permit2's domain.
    async fn sign(&self, payer: &PrivateKeySigner, message: &impl SolStruct) -> Bytes {
        let signature = payer
            .sign_hash(&message.eip712_signing_hash(&self.domain()))
            .await
            .expect("sign permit");
        signature.as_bytes().to_vec().into()
    }

    /// `payer` signs a transfer of exactly `amount` of `token` to `to` through the exact proxy.
    pub async fn sign_exact(
        &self,
        payer: &PrivateKeySigner,
        token: Address,
        to: Address,
        amount: u64,
        nonce: U256,
    ) -> SignedPermit {
        let message = exact_message::PermitWitnessTransferFrom {
            permitted: exact_message::TokenPermissions {
                token,
                amount: U256::from(amount),
            },
            spender: self.exact,
            nonce,
            deadline: U256::from(u64::MAX),
            witness: exact_message::Witness {
                to,
                validAfter: U256::ZERO,
            },
        };
        SignedPermit {
            permit: permit(token, amount, nonce),
            owner: payer.address(),
            to,
            facilitator: None,
            signature: self.sign(payer, &message).await,
        }
    }

    /// `payer` signs a transfer of up to `max` of `token` to `to` through the upto proxy,
    /// which only `facilitator` may settle.
    pub async fn sign_upto(
        &self,
        payer: &PrivateKeySigner,
        token: Address,
        to: Address,
        facilitator: Address,
        max: u64,
        nonce: U256,
    ) -> SignedPermit {
        let message = upto_message::PermitWitnessTransferFrom {
            permitted: upto_message::TokenPermissions {
                token,
                amount: U256::from(max),
            },
            spender: self.upto,
            nonce,
            deadline: U256::from(u64::MAX),
            witness: upto_message::Witness {
                to,
                facilitator,
                validAfter: U256::ZERO,
            },
        };
        SignedPermit {
            permit: permit(token, max, nonce),
            owner: payer.address(),
            to,
            facilitator: Some(facilitator),
            signature: self.sign(payer, &message).await,
        }
    }

    /// The exact proxy's `settle` call for `signed`: (proxy, calldata).
    pub fn exact_settle(&self, signed: &SignedPermit) -> (Address, Bytes) {
        let call = ExactProxy::settleCall {
            permit: signed.permit.clone(),
            owner: signed.owner,
            witness: ExactWitness {
                to: signed.to,
                validAfter: U256::ZERO,
            },
            signature: signed.signature.clone(),
        };
        (self.exact, call.abi_encode().into())
    }

    /// The upto proxy's `settle` call for `signed`, settling `amount`: (proxy, calldata).
    pub fn upto_settle(&self, signed: &SignedPermit, amount: u64) -> (Address, Bytes) {
        let call = UptoProxy::settleCall {
            permit: signed.permit.clone(),
            amount: U256::from(amount),
            owner: signed.owner,
            witness: UptoWitness {
                to: signed.to,
                facilitator: signed.facilitator.expect("an upto permit names its facilitator"),
                validAfter: U256::ZERO,
            },
            signature: signed.signature.clone(),
        };
        (self.upto, call.abi_encode().into())
    }
}

fn permit(token: Address, amount: u64, nonce: U256) -> PermitTransferFrom {
    PermitTransferFrom {
        permitted: TokenPermissions {
            token,
            amount: U256::from(amount),
        },
        nonce,
        deadline: U256::from(u64::MAX),
    }
}

/// Deploys `artifact` (a compiled artifact's JSON text) with `constructor_arguments` from
/// dev account 0; returns its address.
pub async fn deploy(chain: &Chain, artifact: &str, constructor_arguments: &[u8]) -> Address {
    let mut code: Vec<u8> = artifact_hex::<Bytes>(artifact, "bytecode").to_vec();
    code.extend_from_slice(constructor_arguments);
    let receipt = chain
        .provider
        .send_transaction(TransactionRequest::default().with_deploy_code(Bytes::from(code)))
        .await
        .expect("send deployment")
        .get_receipt()
        .await
        .expect("deployment receipt");
    receipt.contract_address.expect("a created contract")
}

/// Deploys `artifact` with `constructor_arguments` from dev account 0, then sets its
/// runtime code at `at`.
pub async fn place(chain: &Chain, artifact: &str, constructor_arguments: &[u8], at: Address) {
    let deployed = deploy(chain, artifact, constructor_arguments).await;
    let runtime = chain.provider.get_code_at(deployed).await.expect("eth_getCode");
    assert!(!runtime.is_empty(), "nothing deployed");
    let _: serde_json::Value = chain
        .provider
        .raw_request("anvil_setCode".into(), (at, runtime))
        .await
        .expect("anvil_setCode");
}

/// Sends `calldata` to `target` from `sender` and waits for a successful receipt.
pub async fn send_call(
    chain: &Chain,
    sender: Address,
    (target, calldata): (Address, Bytes),
) -> TransactionReceipt {
    let receipt = chain
        .provider
        .send_transaction(
            TransactionRequest::default()
                .from(sender)
                .to(target)
                .input(calldata.into()),
        )
        .await
        .expect("send settlement")
        .get_receipt()
        .await
        .expect("settlement receipt");
    assert!(receipt.status(), "the settlement reverted");
    receipt
}

/// Sends `count` real payments in equal shares of EIP-3009, Permit2 exact and Permit2 upto
/// (settling 90 % of a signed maximum), from eight payers to one seller, each settled by a
/// direct call of the facilitator, in blocks as [`crate::token::send_payments`] sends them.
pub async fn send_mixed_payments(chain: &Chain, token: &Token, kit: &Permit2Kit, count: usize) {
    use crate::token::{FACILITATOR, PAYERS, SELLER};
    for payer in PAYERS {
        token.mint(chain.account(payer), u64::MAX / 16).await;
        token.approve(chain.account(payer), PERMIT2, U256::MAX).await;
    }
    let (seller, facilitator) = (chain.account(SELLER), chain.account(FACILITATOR));
    let mut calls = Vec::with_capacity(count);
    for i in 0..count {
        let payer = chain.signer(PAYERS.start + i % PAYERS.len());
        let amount = 1_000 + i as u64;
        let nonce = alloy::primitives::keccak256(format!("mixed bench payment {i}"));
        calls.push(match i % 3 {
            0 => {
                let auth = token.authorize(&payer, seller, amount, nonce).await;
                (token.address, token.settle_calldata(&auth))
            }
            1 => {
                let nonce = U256::from_be_bytes(nonce.0);
                kit.exact_settle(&kit.sign_exact(&payer, token.address, seller, amount, nonce).await)
            }
            _ => {
                let nonce = U256::from_be_bytes(nonce.0);
                let signed = kit
                    .sign_upto(
                        &payer,
                        token.address,
                        seller,
                        facilitator,
                        amount * 10 / 9 + 1,
                        nonce,
                    )
                    .await;
                kit.upto_settle(&signed, amount)
            }
        });
    }
    chain.send_all(facilitator, calls, 250_000).await;
}
