//! How a payment's money moved: the settlement methods of x402 that paywatch reads.

use alloy_primitives::{Address, B256, U256, address};
use strum::{Display, EnumString, IntoStaticStr, VariantArray};

use crate::ids::lower_hex;

/// x402's exact Permit2 proxy (`x402ExactPermit2Proxy`), at this address on every chain.
pub const EXACT_PERMIT2_PROXY: Address = address!("402085c248eea27d92e8b30b2c58ed07f9e20001");
/// x402's upto Permit2 proxy (`x402UptoPermit2Proxy`), at this address on every chain.
pub const UPTO_PERMIT2_PROXY: Address = address!("4020a4f3b7b90cca423b9fabcc0ce57c6c240002");
/// Uniswap's Permit2, at this address on every chain.
pub const PERMIT2: Address = address!("000000000022d473030f116ddee9f6b43ac78ba3");
/// The commerce-payments `AuthCaptureEscrow` of x402's auth-capture scheme, v1.0, at this
/// address on every chain (the x402 SDK's `AUTH_CAPTURE_ESCROW_V1_0_ADDRESS`).
pub const AUTH_CAPTURE_ESCROW_V1_0: Address = address!("bdea0d1bcc5966192b070fdf62ab4ef5b4420cff");
/// The same escrow, v1.1: the x402 SDK's default (`AUTH_CAPTURE_ESCROW_V1_1_ADDRESS`).
pub const AUTH_CAPTURE_ESCROW_V1_1: Address = address!("f96815976523e00e65be8f34ca5e64b4f41eb19c");

/// MetaMask's ERC-7710 `DelegationManager` (delegation framework v1.3.0), at this address
/// on every chain it is deployed to; x402 names no canonical manager, and this is the one
/// its specification cites.
pub const DELEGATION_MANAGER: Address = address!("db9b1e94b5b69df7e401ddbede43491141047db3");

/// The asset-transfer method that settled a payment; stored and answered in snake_case.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Display,
    EnumString,
    IntoStaticStr,
    VariantArray,
    serde::Serialize,
    serde::Deserialize,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum PaymentMethod {
    /// EVM `exact`: EIP-3009 `transferWithAuthorization` on the token, which emits
    /// `AuthorizationUsed(authorizer, nonce)` before the `Transfer` it releases.
    Eip3009,
    /// EVM `exact`: Permit2's `permitWitnessTransferFrom` through x402's exact proxy,
    /// which emits `Settled()` or `SettledWithPermit()` after the token's `Transfer`.
    Permit2,
    /// EVM `upto`: Permit2 through x402's upto proxy; the payer signed a maximum and the
    /// facilitator settled an amount up to it.
    Upto,
    /// EVM `exact`: an ERC-7710 delegation redeemed through a `DelegationManager`.
    Erc7710,
    /// EVM `auth-capture`: held in commerce-payments' `AuthCaptureEscrow` and captured,
    /// voided, reclaimed or refunded by its events; the payment's id is its
    /// `paymentInfoHash`.
    AuthCapture,
    /// Solana `exact`: an SPL Token or Token-2022 `transfer`/`transferChecked`.
    Spl,
}

impl PaymentMethod {
    /// The method as stored and answered.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// How a payment of this method spells a 32-byte nonce: EIP-3009's `bytes32` as `0x`
    /// + 64 lowercase hex, Permit2's `uint256` (the same 32 bytes, big-endian) in decimal.
    pub fn spell_nonce(self, nonce: B256) -> String {
        match self {
            Self::Permit2 | Self::Upto => U256::from_be_bytes(nonce.0).to_string(),
            Self::Eip3009 | Self::Erc7710 | Self::AuthCapture | Self::Spl => lower_hex(nonce),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip() {
        for method in PaymentMethod::VARIANTS {
            assert_eq!(method.as_str().parse::<PaymentMethod>(), Ok(*method));
        }
        assert_eq!(PaymentMethod::Eip3009.as_str(), "eip3009");
        assert_eq!(PaymentMethod::Erc7710.as_str(), "erc7710");
        assert_eq!(PaymentMethod::AuthCapture.as_str(), "auth_capture");
        assert!("EIP3009".parse::<PaymentMethod>().is_err());
    }

    #[test]
    fn nonces_are_spelled_as_each_method_signs_them() {
        let nonce = B256::with_last_byte(0x2a);
        assert_eq!(PaymentMethod::Permit2.spell_nonce(nonce), "42");
        assert_eq!(
            PaymentMethod::Upto.spell_nonce(B256::repeat_byte(0xff)),
            U256::MAX.to_string()
        );
        assert_eq!(
            PaymentMethod::Eip3009.spell_nonce(nonce),
            format!("0x{}2a", "0".repeat(62))
        );
    }
}
