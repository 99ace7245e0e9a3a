//! Smart-contract wallet signatures, answered by the chain: ERC-1271 `isValidSignature`
//! for a deployed wallet, and ERC-6492 wrapped signatures for a wallet its factory has not
//! deployed yet. Both go through one `eth_call` that simulates paywatch's validator
//! contract (`contracts/Erc6492Validator.sol`, compiled artifact beside it); nothing is
//! ever sent to the chain.

use alloy::primitives::{Address, B256, Bytes};
use alloy::sol;
use alloy::sol_types::SolConstructor;

sol!(Erc6492Validator, "contracts/Erc6492Validator.json");

/// The creation code, with its constructor arguments, that answers `0x01` when run by
/// `eth_call` if `signature` is the contract wallet `signer`'s over `hash`.
pub fn validator_creation_code(signer: Address, hash: B256, signature: &[u8]) -> Bytes {
    let arguments = Erc6492Validator::constructorCall {
        signer,
        hash,
        signature: Bytes::copy_from_slice(signature),
    }
    .abi_encode();
    [Erc6492Validator::BYTECODE.as_ref(), &arguments].concat().into()
}
