// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.30;

/// @title Erc6492Validator
/// @notice Never deployed: paywatch sends its creation code with `eth_call` (no `to`), and
/// the constructor answers one byte, 0x01 when `signature` is `signer`'s over `hash` and
/// 0x00 otherwise, for a smart-contract wallet:
///   - deployed: ERC-1271 `isValidSignature(hash, signature)` must return 0x1626ba7e;
///   - not yet deployed, with an ERC-6492 wrapped signature
///     `abi.encode(factory, factoryCalldata, innerSignature) ++ 0x6492…6492`:
///     the factory call deploys the wallet inside the simulated call, then ERC-1271 is
///     asked about `innerSignature`.
/// An address with no code after that is not a contract wallet: 0x00 (paywatch checks
/// EOA signatures itself, under its strict rules). Nothing is written to the chain.
contract Erc6492Validator {
    bytes32 private constant ERC6492_SUFFIX = 0x6492649264926492649264926492649264926492649264926492649264926492;
    bytes4 private constant ERC1271_MAGIC = 0x1626ba7e;

    constructor(address signer, bytes32 hash, bytes memory signature) {
        bool valid = _isValid(signer, hash, signature);
        assembly {
            mstore(0, valid)
            return(31, 1)
        }
    }

    function _isValid(address signer, bytes32 hash, bytes memory signature) private returns (bool) {
        bytes memory inner = signature;
        if (_isWrapped(signature)) {
            address factory;
            bytes memory factoryCalldata;
            (factory, factoryCalldata, inner) = abi.decode(_withoutSuffix(signature), (address, bytes, bytes));
            if (signer.code.length == 0) {
                (bool deployed,) = factory.call(factoryCalldata);
                if (!deployed) {
                    return false;
                }
            }
        }
        if (signer.code.length == 0) {
            return false;
        }
        try IERC1271(signer).isValidSignature(hash, inner) returns (bytes4 magic) {
            return magic == ERC1271_MAGIC;
        } catch {
            return false;
        }
    }

    function _isWrapped(bytes memory signature) private pure returns (bool) {
        if (signature.length < 32) {
            return false;
        }
        bytes32 tail;
        assembly {
            tail := mload(add(signature, mload(signature)))
        }
        return tail == ERC6492_SUFFIX;
    }

    function _withoutSuffix(bytes memory signature) private pure returns (bytes memory body) {
        body = new bytes(signature.length - 32);
        for (uint256 i = 0; i < body.length; i++) {
            body[i] = signature[i];
        }
    }
}

interface IERC1271 {
    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4);
}
