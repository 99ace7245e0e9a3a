// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.30;

/// @title OwnerWallet
/// @notice A minimal smart-contract wallet for paywatch's tests: one owner key, ERC-1271
/// signatures (the owner's ECDSA signature over the hash, low s, v 27 or 28), and `execute`
/// so the owner can move its tokens. Deployed at a CREATE2 address by OwnerWalletFactory,
/// so an ERC-6492 signature can name it before it exists.
contract OwnerWallet {
    address public immutable owner;

    uint256 private constant HALF_CURVE_ORDER = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    constructor(address owner_) {
        owner = owner_;
    }

    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        if (signature.length != 65) {
            return 0xffffffff;
        }
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        if (uint256(s) > HALF_CURVE_ORDER || (v != 27 && v != 28)) {
            return 0xffffffff;
        }
        address recovered = ecrecover(hash, v, r, s);
        return recovered != address(0) && recovered == owner ? bytes4(0x1626ba7e) : bytes4(0xffffffff);
    }

    function execute(address target, bytes calldata data) external returns (bytes memory) {
        require(msg.sender == owner, "OwnerWallet: caller is not the owner");
        (bool ok, bytes memory result) = target.call(data);
        require(ok, "OwnerWallet: call failed");
        return result;
    }
}

/// @title OwnerWalletFactory
/// @notice Deploys OwnerWallets with CREATE2, so their addresses are known in advance.
contract OwnerWalletFactory {
    function deployWallet(address owner, bytes32 salt) external returns (address wallet) {
        wallet = address(new OwnerWallet{salt: salt}(owner));
    }

    function addressOf(address owner, bytes32 salt) external view returns (address) {
        bytes32 codeHash = keccak256(abi.encodePacked(type(OwnerWallet).creationCode, abi.encode(owner)));
        return address(uint160(uint256(keccak256(abi.encodePacked(bytes1(0xff), address(this), salt, codeHash)))));
    }
}
