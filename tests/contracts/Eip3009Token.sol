// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.30;

/// @title Eip3009Token
/// @notice A small ERC-20 with EIP-3009 transfer-with-authorization, laid out like
/// Circle's FiatToken v2 (USDC): the same EIP-712 domain (name, version — "2" for
/// USDC, given at deployment — chainId, verifyingContract), the same type hashes and
/// the same events, so the logs paywatch reads from it are the logs it reads from USDC.
/// Used only by paywatch's tests and benchmarks on a local chain.
contract Eip3009Token {
    string public name;
    string public symbol;
    string public version;
    uint8 public immutable decimals;
    address public immutable minter;
    uint256 public totalSupply;

    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;
    mapping(address => mapping(bytes32 => bool)) public authorizationState;

    bytes32 public constant TRANSFER_WITH_AUTHORIZATION_TYPEHASH = keccak256(
        "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
    );
    bytes32 public constant RECEIVE_WITH_AUTHORIZATION_TYPEHASH = keccak256(
        "ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
    );
    bytes32 public constant CANCEL_AUTHORIZATION_TYPEHASH =
        keccak256("CancelAuthorization(address authorizer,bytes32 nonce)");

    /// secp256k1n / 2: signatures with a larger s are malleable and refused.
    /// ERC-1271's `isValidSignature(bytes32,bytes)` selector, which is also its answer.
    bytes4 private constant ERC1271_MAGIC = 0x1626ba7e;

    uint256 private constant HALF_CURVE_ORDER = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);
    event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);
    event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce);

    constructor(string memory name_, string memory version_, string memory symbol_, uint8 decimals_) {
        name = name_;
        version = version_;
        symbol = symbol_;
        decimals = decimals_;
        minter = msg.sender;
    }

    function DOMAIN_SEPARATOR() public view returns (bytes32) {
        return keccak256(
            abi.encode(
                keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
                keccak256(bytes(name)),
                keccak256(bytes(version)),
                block.chainid,
                address(this)
            )
        );
    }

    function mint(address to, uint256 value) external {
        require(msg.sender == minter, "Eip3009Token: caller is not the minter");
        totalSupply += value;
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _transfer(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        require(allowed >= value, "Eip3009Token: transfer amount exceeds allowance");
        if (allowed != type(uint256).max) {
            allowance[from][msg.sender] = allowed - value;
        }
        _transfer(from, to, value);
        return true;
    }

    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        _requireValidAuthorization(from, nonce, validAfter, validBefore);
        bytes32 structHash =
            keccak256(abi.encode(TRANSFER_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce));
        _requireSignedBy(from, structHash, v, r, s);
        _markAuthorizationAsUsed(from, nonce);
        _transfer(from, to, value);
    }

    /// USDC v2.2's form, with the signature as bytes: when `from` is a smart-contract
    /// wallet, the wallet approves the signature through ERC-1271 `isValidSignature`.
    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes calldata signature
    ) external {
        _requireValidAuthorization(from, nonce, validAfter, validBefore);
        bytes32 structHash =
            keccak256(abi.encode(TRANSFER_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce));
        if (from.code.length > 0) {
            bytes32 digest = keccak256(abi.encodePacked("\x19\x01", DOMAIN_SEPARATOR(), structHash));
            (bool ok, bytes memory answer) =
                from.staticcall(abi.encodeWithSelector(ERC1271_MAGIC, digest, signature));
            require(
                ok && answer.length == 32 && bytes4(answer) == ERC1271_MAGIC,
                "Eip3009Token: invalid signature"
            );
        } else {
            require(signature.length == 65, "Eip3009Token: invalid signature length");
            _requireSignedBy(
                from, structHash, uint8(signature[64]), bytes32(signature[0:32]), bytes32(signature[32:64])
            );
        }
        _markAuthorizationAsUsed(from, nonce);
        _transfer(from, to, value);
    }

    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        require(to == msg.sender, "Eip3009Token: caller must be the payee");
        _requireValidAuthorization(from, nonce, validAfter, validBefore);
        bytes32 structHash =
            keccak256(abi.encode(RECEIVE_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce));
        _requireSignedBy(from, structHash, v, r, s);
        _markAuthorizationAsUsed(from, nonce);
        _transfer(from, to, value);
    }

    /// USDC v2.2's form, with the signature as bytes (what commerce-payments' ERC-3009
    /// collector calls); an EOA signature only.
    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes calldata signature
    ) external {
        require(to == msg.sender, "Eip3009Token: caller must be the payee");
        require(signature.length == 65, "Eip3009Token: invalid signature length");
        _requireValidAuthorization(from, nonce, validAfter, validBefore);
        bytes32 structHash =
            keccak256(abi.encode(RECEIVE_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce));
        _requireSignedBy(from, structHash, uint8(signature[64]), bytes32(signature[0:32]), bytes32(signature[32:64]));
        _markAuthorizationAsUsed(from, nonce);
        _transfer(from, to, value);
    }

    function cancelAuthorization(address authorizer, bytes32 nonce, uint8 v, bytes32 r, bytes32 s) external {
        require(!authorizationState[authorizer][nonce], "Eip3009Token: authorization is used or canceled");
        bytes32 structHash = keccak256(abi.encode(CANCEL_AUTHORIZATION_TYPEHASH, authorizer, nonce));
        _requireSignedBy(authorizer, structHash, v, r, s);
        authorizationState[authorizer][nonce] = true;
        emit AuthorizationCanceled(authorizer, nonce);
    }

    function _requireValidAuthorization(address authorizer, bytes32 nonce, uint256 validAfter, uint256 validBefore)
        private
        view
    {
        require(block.timestamp > validAfter, "Eip3009Token: authorization is not yet valid");
        require(block.timestamp < validBefore, "Eip3009Token: authorization is expired");
        require(!authorizationState[authorizer][nonce], "Eip3009Token: authorization is used or canceled");
    }

    function _requireSignedBy(address signer, bytes32 structHash, uint8 v, bytes32 r, bytes32 s) private view {
        require(uint256(s) <= HALF_CURVE_ORDER, "Eip3009Token: invalid signature s value");
        require(v == 27 || v == 28, "Eip3009Token: invalid signature v value");
        bytes32 digest = keccak256(abi.encodePacked("\x19\x01", DOMAIN_SEPARATOR(), structHash));
        address recovered = ecrecover(digest, v, r, s);
        require(recovered != address(0) && recovered == signer, "Eip3009Token: invalid signature");
    }

    function _markAuthorizationAsUsed(address authorizer, bytes32 nonce) private {
        authorizationState[authorizer][nonce] = true;
        emit AuthorizationUsed(authorizer, nonce);
    }

    function _transfer(address from, address to, uint256 value) private {
        require(to != address(0), "Eip3009Token: transfer to the zero address");
        uint256 balance = balanceOf[from];
        require(balance >= value, "Eip3009Token: transfer amount exceeds balance");
        balanceOf[from] = balance - value;
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}
