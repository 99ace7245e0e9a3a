// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.30;

/// @title BatchSettler
/// @notice Settles several calls in one transaction, as a facilitator batching x402
/// settlements does: each `calls[i]` (a `transferWithAuthorization`) is sent to
/// `targets[i]`, and the whole transaction reverts if any of them does.
contract BatchSettler {
    error CallFailed(uint256 index, bytes reason);

    function settle(address[] calldata targets, bytes[] calldata calls) external {
        require(targets.length == calls.length, "lengths differ");
        for (uint256 i = 0; i < targets.length; i++) {
            (bool ok, bytes memory reason) = targets[i].call(calls[i]);
            if (!ok) {
                revert CallFailed(i, reason);
            }
        }
    }
}
