// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.30;

/// The delegation framework's types (MetaMask/delegation-framework `src/utils/Types.sol`).
struct Caveat {
    address enforcer;
    bytes terms;
    bytes args;
}

struct Delegation {
    address delegate;
    address delegator;
    bytes32 authority;
    Caveat[] caveats;
    uint256 salt;
    bytes signature;
}

/// What a delegator account offers its delegation manager (ERC-7579 execution).
interface IDeleGatorCore {
    function executeFromExecutor(bytes32 mode, bytes calldata executionCalldata) external returns (bytes[] memory);
}

/// @title DelegationManager
/// @notice paywatch's test stand-in for MetaMask's ERC-7710 `DelegationManager` (delegation
/// framework v1.3.0): the same `redeemDelegations` ABI, EIP-712 delegation hashes and domain
/// ("DelegationManager", "1"), signature checks (ECDSA for accounts without code, ERC-1271
/// otherwise), authority chains, disabled delegations, execution by the root delegator's
/// account, and one `RedeemedDelegation` per delegation of each chain, logged after every
/// execution. It enforces no caveats (a delegation carrying one is refused) and has no owner
/// or pause. Its domain separator is computed per call, so its code works at any address
/// (tests place it at the canonical one).
contract DelegationManager {
    event RedeemedDelegation(address indexed rootDelegator, address indexed redeemer, Delegation delegation);
    event DisabledDelegation(
        bytes32 indexed delegationHash, address indexed delegator, address indexed delegate, Delegation delegation
    );

    error BatchDataLengthMismatch();
    error InvalidDelegate();
    error InvalidDelegator();
    error InvalidEOASignature();
    error InvalidERC1271Signature();
    error InvalidAuthority();
    error CannotUseADisabledDelegation();
    error CaveatsNotEnforced();

    bytes32 public constant ROOT_AUTHORITY = 0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff;
    address public constant ANY_DELEGATE = address(0xa11);
    bytes32 constant EIP712_DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 constant DELEGATION_TYPEHASH = keccak256(
        "Delegation(address delegate,address delegator,bytes32 authority,Caveat[] caveats,uint256 salt)Caveat(address enforcer,bytes terms)"
    );
    bytes32 constant CAVEAT_TYPEHASH = keccak256("Caveat(address enforcer,bytes terms)");

    mapping(bytes32 delegationHash => bool isDisabled) public disabledDelegations;

    function getDomainHash() public view returns (bytes32) {
        return keccak256(
            abi.encode(
                EIP712_DOMAIN_TYPEHASH, keccak256("DelegationManager"), keccak256("1"), block.chainid, address(this)
            )
        );
    }

    function getDelegationHash(Delegation memory delegation) public pure returns (bytes32) {
        bytes32[] memory caveatHashes = new bytes32[](delegation.caveats.length);
        for (uint256 i = 0; i < delegation.caveats.length; ++i) {
            caveatHashes[i] = keccak256(
                abi.encode(CAVEAT_TYPEHASH, delegation.caveats[i].enforcer, keccak256(delegation.caveats[i].terms))
            );
        }
        return keccak256(
            abi.encode(
                DELEGATION_TYPEHASH,
                delegation.delegate,
                delegation.delegator,
                delegation.authority,
                keccak256(abi.encodePacked(caveatHashes)),
                delegation.salt
            )
        );
    }

    function disableDelegation(Delegation calldata delegation) external {
        if (delegation.delegator != msg.sender) revert InvalidDelegator();
        bytes32 delegationHash = getDelegationHash(delegation);
        disabledDelegations[delegationHash] = true;
        emit DisabledDelegation(delegationHash, delegation.delegator, delegation.delegate, delegation);
    }

    function redeemDelegations(
        bytes[] calldata permissionContexts,
        bytes32[] calldata modes,
        bytes[] calldata executionCallDatas
    ) external {
        uint256 batchSize = permissionContexts.length;
        if (batchSize != executionCallDatas.length || batchSize != modes.length) revert BatchDataLengthMismatch();
        Delegation[][] memory batch = new Delegation[][](batchSize);
        for (uint256 b = 0; b < batchSize; ++b) {
            Delegation[] memory chain = abi.decode(permissionContexts[b], (Delegation[]));
            batch[b] = chain;
            if (chain.length == 0) continue;
            if (chain[0].delegate != msg.sender && chain[0].delegate != ANY_DELEGATE) revert InvalidDelegate();
            bytes32[] memory hashes = new bytes32[](chain.length);
            for (uint256 i = 0; i < chain.length; ++i) {
                if (chain[i].caveats.length != 0) revert CaveatsNotEnforced();
                hashes[i] = getDelegationHash(chain[i]);
                _checkSignature(chain[i], hashes[i]);
            }
            for (uint256 i = 0; i < chain.length; ++i) {
                if (disabledDelegations[hashes[i]]) revert CannotUseADisabledDelegation();
                if (i != chain.length - 1) {
                    if (chain[i].authority != hashes[i + 1]) revert InvalidAuthority();
                    address nextDelegate = chain[i + 1].delegate;
                    if (nextDelegate != ANY_DELEGATE && chain[i].delegator != nextDelegate) revert InvalidDelegate();
                } else if (chain[i].authority != ROOT_AUTHORITY) {
                    revert InvalidAuthority();
                }
            }
        }
        for (uint256 b = 0; b < batchSize; ++b) {
            address executor = batch[b].length == 0 ? msg.sender : batch[b][batch[b].length - 1].delegator;
            IDeleGatorCore(executor).executeFromExecutor(modes[b], executionCallDatas[b]);
        }
        for (uint256 b = 0; b < batchSize; ++b) {
            for (uint256 i = 0; i < batch[b].length; ++i) {
                emit RedeemedDelegation(batch[b][batch[b].length - 1].delegator, msg.sender, batch[b][i]);
            }
        }
    }

    function _checkSignature(Delegation memory delegation, bytes32 delegationHash) private view {
        bytes32 typedDataHash = keccak256(abi.encodePacked("\x19\x01", getDomainHash(), delegationHash));
        if (delegation.delegator.code.length == 0) {
            if (_recover(typedDataHash, delegation.signature) != delegation.delegator) revert InvalidEOASignature();
        } else if (
            DeleGatorAccount(delegation.delegator).isValidSignature(typedDataHash, delegation.signature) != 0x1626ba7e
        ) {
            revert InvalidERC1271Signature();
        }
    }

    function _recover(bytes32 hash, bytes memory signature) private pure returns (address) {
        if (signature.length != 65) return address(0);
        bytes32 r;
        bytes32 s;
        uint8 v;
        assembly {
            r := mload(add(signature, 0x20))
            s := mload(add(signature, 0x40))
            v := byte(0, mload(add(signature, 0x60)))
        }
        return ecrecover(hash, v, r, s);
    }
}

/// @title DeleGatorAccount
/// @notice A minimal ERC-7710 delegator account for paywatch's tests: one owner key signs
/// its delegations (ERC-1271), the delegation manager it trusts executes for it (ERC-7579
/// single and batch call modes), and the owner can call out directly.
contract DeleGatorAccount {
    struct Execution {
        address target;
        uint256 value;
        bytes callData;
    }

    address public immutable owner;
    address public immutable delegationManager;

    constructor(address owner_, address delegationManager_) {
        owner = owner_;
        delegationManager = delegationManager_;
    }

    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        if (signature.length != 65) return 0xffffffff;
        address recovered = ecrecover(
            hash, uint8(signature[64]), bytes32(signature[0:32]), bytes32(signature[32:64])
        );
        return recovered != address(0) && recovered == owner ? bytes4(0x1626ba7e) : bytes4(0xffffffff);
    }

    function executeFromExecutor(bytes32 mode, bytes calldata executionCalldata)
        external
        returns (bytes[] memory results)
    {
        require(msg.sender == delegationManager, "DeleGatorAccount: not the delegation manager");
        bytes1 callType = mode[0];
        if (callType == 0x00) {
            results = new bytes[](1);
            results[0] = _call(
                address(bytes20(executionCalldata[0:20])), uint256(bytes32(executionCalldata[20:52])), executionCalldata[52:]
            );
        } else if (callType == 0x01) {
            Execution[] memory executions = abi.decode(executionCalldata, (Execution[]));
            results = new bytes[](executions.length);
            for (uint256 i = 0; i < executions.length; ++i) {
                results[i] = _call(executions[i].target, executions[i].value, executions[i].callData);
            }
        } else {
            revert("DeleGatorAccount: unsupported call type");
        }
    }

    function execute(address target, bytes calldata data) external returns (bytes memory) {
        require(msg.sender == owner, "DeleGatorAccount: caller is not the owner");
        return _call(target, 0, data);
    }

    function _call(address target, uint256 value, bytes memory data) private returns (bytes memory result) {
        bool ok;
        (ok, result) = target.call{value: value}(data);
        require(ok, "DeleGatorAccount: call failed");
    }
}
