//! x402's auth-capture path on anvil: paywatch's own stand-ins for commerce-payments'
//! `AuthCaptureEscrow` and its ERC-3009 payment and operator refund collectors
//! (`contracts/AuthCaptureEscrow.sol`: same ABI, events and behaviour), placed at the
//! x402 SDK's v1.1 addresses, and payments the SDK's auth-capture client signs
//! (`tests/sdk/auth_capture.js`) that an operator authorizes, charges, captures, voids
//! and refunds.

use alloy::primitives::{Address, B256, Bytes, U256, address};
use alloy::providers::Provider;
use alloy::rpc::types::TransactionReceipt;
use alloy::sol;
use alloy::sol_types::{SolCall, SolValue};
use paywatch_core::ids::lower_hex;
use paywatch_core::method::AUTH_CAPTURE_ESCROW_V1_1;

use crate::chain::Chain;
use crate::permit2::{place, send_call};
use crate::token::Token;
use crate::tools::{node_json, repo_root};

/// The escrow the x402 SDK settles through by default (v1.1).
pub const ESCROW: Address = AUTH_CAPTURE_ESCROW_V1_1;
/// v1.1's ERC-3009 payment collector (the SDK's `EIP3009_TOKEN_COLLECTOR_ADDRESS`).
pub const EIP3009_COLLECTOR: Address = address!("8612dfdc421f80336cd14e8ef9cb1e765db5ab88");
/// v1.1's operator refund collector (the SDK's `OPERATOR_REFUND_COLLECTOR_ADDRESS`).
pub const REFUND_COLLECTOR: Address = address!("7a03443724d14798c4ab4622f1daaca761fea486");

sol! {
    /// The escrow's `PaymentInfo`.
    #[derive(Debug)]
    struct PaymentInfo {
        address operator;
        address payer;
        address receiver;
        address token;
        uint120 maxAmount;
        uint48 preApprovalExpiry;
        uint48 authorizationExpiry;
        uint48 refundExpiry;
        uint16 minFeeBps;
        uint16 maxFeeBps;
        address feeReceiver;
        uint256 salt;
    }

    /// The escrow's operations, as commerce-payments declares them.
    interface Escrow {
        function authorize(PaymentInfo paymentInfo, uint256 amount, address tokenCollector, bytes collectorData);
        function charge(PaymentInfo paymentInfo, uint256 amount, address tokenCollector, bytes collectorData, uint16 feeBps, address feeReceiver);
        function capture(PaymentInfo paymentInfo, uint256 amount, uint16 feeBps, address feeReceiver);
        function void(PaymentInfo paymentInfo);
        function reclaim(PaymentInfo paymentInfo);
        function refund(PaymentInfo paymentInfo, uint256 amount, address tokenCollector, bytes collectorData);
        function getHash(PaymentInfo paymentInfo) external view returns (bytes32);
    }
}

/// One payment the SDK's client signed: its terms, the payer's signature and the nonce.
#[derive(Debug, Clone)]
pub struct SignedPayment {
    /// The terms, as the escrow hashes them.
    pub info: PaymentInfo,
    /// The payer's ERC-3009 `ReceiveWithAuthorization` signature (65 bytes).
    pub signature: Bytes,
    /// The nonce the payer signed: the payer-agnostic hash of `info`.
    pub nonce: B256,
}

impl SignedPayment {
    /// The escrow's hash of these terms on `chain_id`, as the events' topic carries it.
    pub fn hash(&self, chain_id: u64) -> B256 {
        paywatch_evm::decode::payment_info_hash(chain_id, ESCROW, &self.decoded())
    }

    /// The terms as paywatch's decoder types them.
    pub fn decoded(&self) -> paywatch_evm::decode::PaymentInfo {
        SolValue::abi_decode(&self.info.abi_encode()).expect("the same PaymentInfo layout")
    }
}

/// Terms an operator offers the payer (the requirement's `extra`).
#[derive(Debug, Clone, Copy)]
pub struct Terms {
    /// The operator (the SDK's `captureAuthorizer`).
    pub operator: Address,
    /// The seller.
    pub receiver: Address,
    /// Where fees go.
    pub fee_receiver: Address,
    /// The most the payer authorizes.
    pub max_amount: u64,
    /// Seconds from now until captures end and the payer may reclaim.
    pub capture_within: u64,
    /// Seconds from now until refunds end.
    pub refund_within: u64,
    /// Fee bounds, basis points.
    pub fee_bps: (u16, u16),
    /// The salt nonce the client uses instead of drawing 32 random bytes (an intent
    /// commitment); `None`: the SDK's own draw.
    pub salt_nonce: Option<B256>,
    /// The requirements' `receiverAuthorizer` and `policy`, which turn on the SDK's salt
    /// binding; `None`: neither.
    pub salt_binding: Option<(Address, Address)>,
}

impl Terms {
    /// The tests' usual terms: `operator`, `receiver` and `fee_receiver`, up to
    /// `max_amount`, captures within an hour, refunds within two, fees up to 5 %, the
    /// SDK's own salt.
    pub fn usual(operator: Address, receiver: Address, fee_receiver: Address, max_amount: u64) -> Self {
        Self {
            operator,
            receiver,
            fee_receiver,
            max_amount,
            capture_within: 3_600,
            refund_within: 7_200,
            fee_bps: (0, 500),
            salt_nonce: None,
            salt_binding: None,
        }
    }
}

/// The escrow and collectors installed on one anvil chain, for one token.
pub struct EscrowKit<'a> {
    chain: &'a Chain,
    token: &'a Token,
}

impl<'a> EscrowKit<'a> {
    /// Deploys the stand-ins (the collectors with the canonical escrow as constructor
    /// argument) and places their runtime code at the SDK's v1.1 addresses. The escrow
    /// keeps no address of its own in its code, so its token stores are created at the
    /// canonical address's CREATE2 addresses.
    pub async fn install(chain: &'a Chain, token: &'a Token) -> Self {
        place(
            chain,
            include_str!("../contracts/AuthCaptureEscrow.json"),
            &[],
            ESCROW,
        )
        .await;
        let argument = ESCROW.into_word();
        place(
            chain,
            include_str!("../contracts/ERC3009PaymentCollector.json"),
            argument.as_slice(),
            EIP3009_COLLECTOR,
        )
        .await;
        place(
            chain,
            include_str!("../contracts/OperatorRefundCollector.json"),
            argument.as_slice(),
            REFUND_COLLECTOR,
        )
        .await;
        Self { chain, token }
    }

    /// The chain's clock: the latest block's timestamp.
    pub async fn now(&self) -> u64 {
        let block = self
            .chain
            .provider
            .get_block_by_number(alloy::eips::BlockNumberOrTag::Latest)
            .await
            .expect("eth_getBlockByNumber")
            .expect("a latest block");
        block.header.timestamp
    }

    /// Payer `payer` (a dev account) signs `terms` with the x402 SDK's auth-capture client.
    pub async fn sign(&self, payer: usize, terms: Terms) -> SignedPayment {
        let now = self.now().await;
        let signed = node_json(
            &[
                repo_root()
                    .join("tests/sdk/auth_capture.js")
                    .display()
                    .to_string(),
                self.chain.chain_id().to_string(),
                lower_hex(self.token.address),
                alloy::hex::encode_prefixed(self.chain.signer(payer).to_bytes()),
                lower_hex(terms.operator),
                lower_hex(terms.receiver),
                terms.max_amount.to_string(),
                lower_hex(terms.fee_receiver),
                (now + terms.capture_within).to_string(),
                (now + terms.refund_within).to_string(),
                terms.fee_bps.0.to_string(),
                terms.fee_bps.1.to_string(),
                terms.salt_nonce.map_or("-".to_string(), lower_hex),
            ]
            .into_iter()
            .chain(
                terms
                    .salt_binding
                    .into_iter()
                    .flat_map(|(authorizer, policy)| [lower_hex(authorizer), lower_hex(policy)]),
            )
            .collect::<Vec<_>>(),
        );
        let field = |key: &str| {
            signed["paymentInfo"][key]
                .as_str()
                .unwrap_or_else(|| panic!("{key}"))
        };
        let number = |key: &str| {
            field(key)
                .parse::<U256>()
                .unwrap_or_else(|_| panic!("{key} is a number"))
        };
        let address = |key: &str| {
            field(key)
                .parse::<Address>()
                .unwrap_or_else(|_| panic!("{key} is an address"))
        };
        let info = PaymentInfo {
            operator: address("operator"),
            payer: address("payer"),
            receiver: address("receiver"),
            token: address("token"),
            maxAmount: number("maxAmount").to(),
            preApprovalExpiry: number("preApprovalExpiry").to(),
            authorizationExpiry: number("authorizationExpiry").to(),
            refundExpiry: number("refundExpiry").to(),
            minFeeBps: number("minFeeBps").to(),
            maxFeeBps: number("maxFeeBps").to(),
            feeReceiver: address("feeReceiver"),
            salt: number("salt"),
        };
        let collector: Address = signed["collector"]
            .as_str()
            .and_then(|a| a.parse().ok())
            .expect("collector");
        assert_eq!(
            collector, EIP3009_COLLECTOR,
            "the SDK signs for v1.1's ERC-3009 collector"
        );
        SignedPayment {
            info,
            signature: signed["signature"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .expect("signature"),
            nonce: signed["nonce"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .expect("nonce"),
        }
    }

    /// The operator puts `amount` of a signed payment on hold.
    pub async fn authorize(&self, signed: &SignedPayment, amount: u64) -> TransactionReceipt {
        let call = Escrow::authorizeCall {
            paymentInfo: signed.info.clone(),
            amount: U256::from(amount),
            tokenCollector: EIP3009_COLLECTOR,
            collectorData: signed.signature.clone(),
        };
        self.operate(signed, call.abi_encode()).await
    }

    /// The operator authorizes and captures `amount` in one step, with a fee.
    pub async fn charge(&self, signed: &SignedPayment, amount: u64, fee_bps: u16) -> TransactionReceipt {
        let call = Escrow::chargeCall {
            paymentInfo: signed.info.clone(),
            amount: U256::from(amount),
            tokenCollector: EIP3009_COLLECTOR,
            collectorData: signed.signature.clone(),
            feeBps: fee_bps,
            feeReceiver: signed.info.feeReceiver,
        };
        self.operate(signed, call.abi_encode()).await
    }

    /// The operator captures `amount` of the hold, with a fee.
    pub async fn capture(&self, signed: &SignedPayment, amount: u64, fee_bps: u16) -> TransactionReceipt {
        let call = Escrow::captureCall {
            paymentInfo: signed.info.clone(),
            amount: U256::from(amount),
            feeBps: fee_bps,
            feeReceiver: signed.info.feeReceiver,
        };
        self.operate(signed, call.abi_encode()).await
    }

    /// The operator voids what is left of the hold.
    pub async fn void(&self, signed: &SignedPayment) -> TransactionReceipt {
        let call = Escrow::voidCall {
            paymentInfo: signed.info.clone(),
        };
        self.operate(signed, call.abi_encode()).await
    }

    /// The payer takes back what is left of the hold (after the capture deadline).
    pub async fn reclaim(&self, signed: &SignedPayment) -> TransactionReceipt {
        let call = Escrow::reclaimCall {
            paymentInfo: signed.info.clone(),
        };
        send_call(self.chain, signed.info.payer, (ESCROW, call.abi_encode().into())).await
    }

    /// The operator refunds `amount` of what was captured from its own balance, through
    /// the operator refund collector (which it approves for the amount first).
    pub async fn refund(&self, signed: &SignedPayment, amount: u64) -> TransactionReceipt {
        self.token
            .approve(signed.info.operator, REFUND_COLLECTOR, U256::from(amount))
            .await;
        let call = Escrow::refundCall {
            paymentInfo: signed.info.clone(),
            amount: U256::from(amount),
            tokenCollector: REFUND_COLLECTOR,
            collectorData: Bytes::new(),
        };
        self.operate(signed, call.abi_encode()).await
    }

    /// The escrow's own `getHash` of the terms.
    pub async fn hash_on_chain(&self, signed: &SignedPayment) -> B256 {
        let call = Escrow::getHashCall {
            paymentInfo: signed.info.clone(),
        };
        let request = alloy::rpc::types::TransactionRequest::default()
            .to(ESCROW)
            .input(Bytes::from(call.abi_encode()).into());
        let answer = self.chain.provider.call(request).await.expect("eth_call getHash");
        B256::abi_decode(&answer).expect("a bytes32")
    }

    async fn operate(&self, signed: &SignedPayment, calldata: Vec<u8>) -> TransactionReceipt {
        send_call(self.chain, signed.info.operator, (ESCROW, calldata.into())).await
    }
}
