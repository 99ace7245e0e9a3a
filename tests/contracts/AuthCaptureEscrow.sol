// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.30;

/// @notice The ERC-20 and ERC-3009 calls the contracts below make.
interface IEscrowToken {
    function transfer(address to, uint256 value) external returns (bool);
    function transferFrom(address from, address to, uint256 value) external returns (bool);
    function balanceOf(address owner) external view returns (uint256);
    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes calldata signature
    ) external;
}

/// @title TokenStore
/// @notice Holds one operator's escrowed tokens; only the escrow that created it moves them.
contract TokenStore {
    address public immutable authCaptureEscrow;

    error OnlyAuthCaptureEscrow();

    constructor() {
        authCaptureEscrow = msg.sender;
    }

    function sendTokens(address token, address recipient, uint256 amount) external returns (bool) {
        if (msg.sender != authCaptureEscrow) revert OnlyAuthCaptureEscrow();
        require(IEscrowToken(token).transfer(recipient, amount), "TokenStore: transfer failed");
        return true;
    }
}

/// @title AuthCaptureEscrow
/// @notice paywatch's own stand-in for the commerce-payments `AuthCaptureEscrow`
/// (github.com/base/commerce-payments, src/AuthCaptureEscrow.sol) that x402's auth-capture
/// scheme settles through: the same `PaymentInfo`, hash (`getHash`), functions, events,
/// errors and state rules — authorize/charge collect through a token collector into the
/// operator's token store, capture up to the authorized amount with a fee, void (operator)
/// and reclaim (payer, after `authorizationExpiry`) return the uncaptured hold, refund
/// returns captured money until `refundExpiry`. It keeps no immutable of its own, so tests
/// can place its runtime code at the canonical address the x402 SDK uses; an operator's
/// token store is a CREATE2 `TokenStore` (salt: the operator) instead of a clone.
contract AuthCaptureEscrow {
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

    struct PaymentState {
        bool hasCollectedPayment;
        uint120 capturableAmount;
        uint120 refundableAmount;
    }

    bytes32 public constant PAYMENT_INFO_TYPEHASH = keccak256(
        "PaymentInfo(address operator,address payer,address receiver,address token,uint120 maxAmount,uint48 preApprovalExpiry,uint48 authorizationExpiry,uint48 refundExpiry,uint16 minFeeBps,uint16 maxFeeBps,address feeReceiver,uint256 salt)"
    );

    uint16 internal constant _MAX_FEE_BPS = 10_000;

    mapping(bytes32 paymentInfoHash => PaymentState state) public paymentState;

    event PaymentCharged(
        bytes32 indexed paymentInfoHash,
        PaymentInfo paymentInfo,
        uint256 amount,
        address tokenCollector,
        uint16 feeBps,
        address feeReceiver
    );
    event PaymentAuthorized(
        bytes32 indexed paymentInfoHash, PaymentInfo paymentInfo, uint256 amount, address tokenCollector
    );
    event PaymentCaptured(bytes32 indexed paymentInfoHash, uint256 amount, uint16 feeBps, address feeReceiver);
    event PaymentVoided(bytes32 indexed paymentInfoHash, uint256 amount);
    event PaymentReclaimed(bytes32 indexed paymentInfoHash, uint256 amount);
    event PaymentRefunded(bytes32 indexed paymentInfoHash, uint256 amount, address tokenCollector);
    event TokenStoreCreated(address indexed operator, address tokenStore);

    error InvalidSender(address sender, address expected);
    error ZeroAmount();
    error AmountOverflow(uint256 amount, uint256 limit);
    error ExceedsMaxAmount(uint256 amount, uint256 maxAmount);
    error AfterPreApprovalExpiry(uint48 timestamp, uint48 expiry);
    error InvalidExpiries(uint48 preApproval, uint48 authorization, uint48 refund);
    error FeeBpsOverflow(uint16 feeBps);
    error InvalidFeeBpsRange(uint16 minFeeBps, uint16 maxFeeBps);
    error FeeBpsOutOfRange(uint16 feeBps, uint16 minFeeBps, uint16 maxFeeBps);
    error ZeroFeeReceiver();
    error InvalidFeeReceiver(address attempted, address expected);
    error InvalidCollectorForOperation();
    error TokenCollectionFailed();
    error PaymentAlreadyCollected(bytes32 paymentInfoHash);
    error AfterAuthorizationExpiry(uint48 timestamp, uint48 expiry);
    error InsufficientAuthorization(bytes32 paymentInfoHash, uint256 authorizedAmount, uint256 requestedAmount);
    error ZeroAuthorization(bytes32 paymentInfoHash);
    error BeforeAuthorizationExpiry(uint48 timestamp, uint48 expiry);
    error AfterRefundExpiry(uint48 timestamp, uint48 expiry);
    error RefundExceedsCapture(uint256 refund, uint256 captured);

    modifier onlySender(address sender) {
        if (msg.sender != sender) revert InvalidSender(msg.sender, sender);
        _;
    }

    modifier validAmount(uint256 amount) {
        if (amount == 0) revert ZeroAmount();
        if (amount > type(uint120).max) revert AmountOverflow(amount, type(uint120).max);
        _;
    }

    function charge(
        PaymentInfo calldata paymentInfo,
        uint256 amount,
        address tokenCollector,
        bytes calldata collectorData,
        uint16 feeBps,
        address feeReceiver
    ) external onlySender(paymentInfo.operator) validAmount(amount) {
        _validatePayment(paymentInfo, amount);
        _validateFee(paymentInfo, feeBps, feeReceiver);
        bytes32 paymentInfoHash = getHash(paymentInfo);
        if (paymentState[paymentInfoHash].hasCollectedPayment) revert PaymentAlreadyCollected(paymentInfoHash);
        paymentState[paymentInfoHash] =
            PaymentState({hasCollectedPayment: true, capturableAmount: 0, refundableAmount: uint120(amount)});
        emit PaymentCharged(paymentInfoHash, paymentInfo, amount, tokenCollector, feeBps, feeReceiver);
        _collectTokens(paymentInfo, amount, tokenCollector, collectorData, 0);
        _distributeTokens(paymentInfo.token, paymentInfo.receiver, amount, feeBps, feeReceiver);
    }

    function authorize(
        PaymentInfo calldata paymentInfo,
        uint256 amount,
        address tokenCollector,
        bytes calldata collectorData
    ) external onlySender(paymentInfo.operator) validAmount(amount) {
        _validatePayment(paymentInfo, amount);
        bytes32 paymentInfoHash = getHash(paymentInfo);
        if (paymentState[paymentInfoHash].hasCollectedPayment) revert PaymentAlreadyCollected(paymentInfoHash);
        paymentState[paymentInfoHash] =
            PaymentState({hasCollectedPayment: true, capturableAmount: uint120(amount), refundableAmount: 0});
        emit PaymentAuthorized(paymentInfoHash, paymentInfo, amount, tokenCollector);
        _collectTokens(paymentInfo, amount, tokenCollector, collectorData, 0);
    }

    function capture(PaymentInfo calldata paymentInfo, uint256 amount, uint16 feeBps, address feeReceiver)
        external
        onlySender(paymentInfo.operator)
        validAmount(amount)
    {
        _validateFee(paymentInfo, feeBps, feeReceiver);
        if (block.timestamp >= paymentInfo.authorizationExpiry) {
            revert AfterAuthorizationExpiry(uint48(block.timestamp), paymentInfo.authorizationExpiry);
        }
        bytes32 paymentInfoHash = getHash(paymentInfo);
        PaymentState memory state = paymentState[paymentInfoHash];
        if (state.capturableAmount < amount) {
            revert InsufficientAuthorization(paymentInfoHash, state.capturableAmount, amount);
        }
        state.capturableAmount -= uint120(amount);
        state.refundableAmount += uint120(amount);
        paymentState[paymentInfoHash] = state;
        emit PaymentCaptured(paymentInfoHash, amount, feeBps, feeReceiver);
        _distributeTokens(paymentInfo.token, paymentInfo.receiver, amount, feeBps, feeReceiver);
    }

    function void(PaymentInfo calldata paymentInfo) external onlySender(paymentInfo.operator) {
        bytes32 paymentInfoHash = getHash(paymentInfo);
        uint256 authorizedAmount = paymentState[paymentInfoHash].capturableAmount;
        if (authorizedAmount == 0) revert ZeroAuthorization(paymentInfoHash);
        paymentState[paymentInfoHash].capturableAmount = 0;
        emit PaymentVoided(paymentInfoHash, authorizedAmount);
        _sendTokens(paymentInfo.operator, paymentInfo.token, paymentInfo.payer, authorizedAmount);
    }

    function reclaim(PaymentInfo calldata paymentInfo) external onlySender(paymentInfo.payer) {
        if (block.timestamp < paymentInfo.authorizationExpiry) {
            revert BeforeAuthorizationExpiry(uint48(block.timestamp), paymentInfo.authorizationExpiry);
        }
        bytes32 paymentInfoHash = getHash(paymentInfo);
        uint256 authorizedAmount = paymentState[paymentInfoHash].capturableAmount;
        if (authorizedAmount == 0) revert ZeroAuthorization(paymentInfoHash);
        paymentState[paymentInfoHash].capturableAmount = 0;
        emit PaymentReclaimed(paymentInfoHash, authorizedAmount);
        _sendTokens(paymentInfo.operator, paymentInfo.token, paymentInfo.payer, authorizedAmount);
    }

    function refund(
        PaymentInfo calldata paymentInfo,
        uint256 amount,
        address tokenCollector,
        bytes calldata collectorData
    ) external onlySender(paymentInfo.operator) validAmount(amount) {
        if (block.timestamp >= paymentInfo.refundExpiry) {
            revert AfterRefundExpiry(uint48(block.timestamp), paymentInfo.refundExpiry);
        }
        bytes32 paymentInfoHash = getHash(paymentInfo);
        uint120 captured = paymentState[paymentInfoHash].refundableAmount;
        if (captured < amount) revert RefundExceedsCapture(amount, captured);
        paymentState[paymentInfoHash].refundableAmount = captured - uint120(amount);
        emit PaymentRefunded(paymentInfoHash, amount, tokenCollector);
        _collectTokens(paymentInfo, amount, tokenCollector, collectorData, 1);
        _sendTokens(paymentInfo.operator, paymentInfo.token, paymentInfo.payer, amount);
    }

    function getHash(PaymentInfo calldata paymentInfo) public view returns (bytes32) {
        bytes32 paymentInfoHash = keccak256(abi.encode(PAYMENT_INFO_TYPEHASH, paymentInfo));
        return keccak256(abi.encode(block.chainid, address(this), paymentInfoHash));
    }

    function getTokenStore(address operator) public view returns (address) {
        bytes32 codeHash = keccak256(type(TokenStore).creationCode);
        bytes32 salt = bytes32(bytes20(operator));
        return address(uint160(uint256(keccak256(abi.encodePacked(bytes1(0xff), address(this), salt, codeHash)))));
    }

    function _collectTokens(
        PaymentInfo calldata paymentInfo,
        uint256 amount,
        address tokenCollector,
        bytes calldata collectorData,
        uint8 collectorType
    ) internal {
        if (TokenCollector(tokenCollector).collectorType() != collectorType) revert InvalidCollectorForOperation();
        address tokenStore = getTokenStore(paymentInfo.operator);
        uint256 before = IEscrowToken(paymentInfo.token).balanceOf(tokenStore);
        TokenCollector(tokenCollector).collectTokens(paymentInfo, tokenStore, amount, collectorData);
        if (IEscrowToken(paymentInfo.token).balanceOf(tokenStore) != before + amount) revert TokenCollectionFailed();
    }

    function _sendTokens(address operator, address token, address recipient, uint256 amount) internal {
        address tokenStore = getTokenStore(operator);
        if (tokenStore.code.length == 0) {
            tokenStore = address(new TokenStore{salt: bytes32(bytes20(operator))}());
            emit TokenStoreCreated(operator, tokenStore);
        }
        TokenStore(tokenStore).sendTokens(token, recipient, amount);
    }

    function _distributeTokens(address token, address receiver, uint256 amount, uint16 feeBps, address feeReceiver)
        internal
    {
        uint256 feeAmount = amount * feeBps / _MAX_FEE_BPS;
        if (feeAmount > 0) _sendTokens(msg.sender, token, feeReceiver, feeAmount);
        if (amount > feeAmount) _sendTokens(msg.sender, token, receiver, amount - feeAmount);
    }

    function _validatePayment(PaymentInfo calldata paymentInfo, uint256 amount) internal view {
        uint48 currentTime = uint48(block.timestamp);
        if (amount > paymentInfo.maxAmount) revert ExceedsMaxAmount(amount, paymentInfo.maxAmount);
        if (currentTime >= paymentInfo.preApprovalExpiry) {
            revert AfterPreApprovalExpiry(currentTime, paymentInfo.preApprovalExpiry);
        }
        if (
            paymentInfo.preApprovalExpiry > paymentInfo.authorizationExpiry
                || paymentInfo.authorizationExpiry > paymentInfo.refundExpiry
        ) {
            revert InvalidExpiries(
                paymentInfo.preApprovalExpiry, paymentInfo.authorizationExpiry, paymentInfo.refundExpiry
            );
        }
        if (paymentInfo.maxFeeBps > _MAX_FEE_BPS) revert FeeBpsOverflow(paymentInfo.maxFeeBps);
        if (paymentInfo.minFeeBps > paymentInfo.maxFeeBps) {
            revert InvalidFeeBpsRange(paymentInfo.minFeeBps, paymentInfo.maxFeeBps);
        }
    }

    function _validateFee(PaymentInfo calldata paymentInfo, uint16 feeBps, address feeReceiver) internal pure {
        if (feeBps < paymentInfo.minFeeBps || feeBps > paymentInfo.maxFeeBps) {
            revert FeeBpsOutOfRange(feeBps, paymentInfo.minFeeBps, paymentInfo.maxFeeBps);
        }
        if (feeReceiver == address(0) && feeBps > 0) revert ZeroFeeReceiver();
        if (paymentInfo.feeReceiver != address(0) && paymentInfo.feeReceiver != feeReceiver) {
            revert InvalidFeeReceiver(feeReceiver, paymentInfo.feeReceiver);
        }
    }
}

/// @title TokenCollector
/// @notice Moves tokens into an operator's token store for the escrow (collector type 0:
/// payments, 1: refunds), as commerce-payments' `TokenCollector`.
abstract contract TokenCollector {
    AuthCaptureEscrow public immutable authCaptureEscrow;

    error OnlyAuthCaptureEscrow();

    constructor(address authCaptureEscrow_) {
        authCaptureEscrow = AuthCaptureEscrow(authCaptureEscrow_);
    }

    function collectTokens(
        AuthCaptureEscrow.PaymentInfo calldata paymentInfo,
        address tokenStore,
        uint256 amount,
        bytes calldata collectorData
    ) external {
        if (msg.sender != address(authCaptureEscrow)) revert OnlyAuthCaptureEscrow();
        _collectTokens(paymentInfo, tokenStore, amount, collectorData);
    }

    function collectorType() external view virtual returns (uint8);

    function _collectTokens(
        AuthCaptureEscrow.PaymentInfo calldata paymentInfo,
        address tokenStore,
        uint256 amount,
        bytes calldata collectorData
    ) internal virtual;

    /// @notice The escrow's hash of `paymentInfo` with the payer zeroed: the EIP-3009 nonce
    /// x402's auth-capture client signs.
    function _getHashPayerAgnostic(AuthCaptureEscrow.PaymentInfo memory paymentInfo) internal view returns (bytes32) {
        address payer = paymentInfo.payer;
        paymentInfo.payer = address(0);
        bytes32 hashPayerAgnostic = authCaptureEscrow.getHash(paymentInfo);
        paymentInfo.payer = payer;
        return hashPayerAgnostic;
    }
}

/// @title ERC3009PaymentCollector
/// @notice Collects a payment with the payer's ERC-3009 `receiveWithAuthorization` of the
/// whole `maxAmount` (nonce: the payer-agnostic hash), returns the excess to the payer and
/// sends the amount to the token store, as commerce-payments' collector of that name.
contract ERC3009PaymentCollector is TokenCollector {
    constructor(address authCaptureEscrow_) TokenCollector(authCaptureEscrow_) {}

    function collectorType() external pure override returns (uint8) {
        return 0;
    }

    function _collectTokens(
        AuthCaptureEscrow.PaymentInfo calldata paymentInfo,
        address tokenStore,
        uint256 amount,
        bytes calldata collectorData
    ) internal override {
        address token = paymentInfo.token;
        uint256 maxAmount = paymentInfo.maxAmount;
        IEscrowToken(token).receiveWithAuthorization(
            paymentInfo.payer,
            address(this),
            maxAmount,
            0,
            paymentInfo.preApprovalExpiry,
            _getHashPayerAgnostic(paymentInfo),
            collectorData
        );
        if (maxAmount > amount) {
            require(IEscrowToken(token).transfer(paymentInfo.payer, maxAmount - amount), "collector: refund excess");
        }
        require(IEscrowToken(token).transfer(tokenStore, amount), "collector: to token store");
    }
}

/// @title OperatorRefundCollector
/// @notice Collects a refund from the operator (who approved this collector), as
/// commerce-payments' collector of that name.
contract OperatorRefundCollector is TokenCollector {
    constructor(address authCaptureEscrow_) TokenCollector(authCaptureEscrow_) {}

    function collectorType() external pure override returns (uint8) {
        return 1;
    }

    function _collectTokens(
        AuthCaptureEscrow.PaymentInfo calldata paymentInfo,
        address tokenStore,
        uint256 amount,
        bytes calldata
    ) internal override {
        require(
            IEscrowToken(paymentInfo.token).transferFrom(paymentInfo.operator, tokenStore, amount),
            "collector: from operator"
        );
    }
}
