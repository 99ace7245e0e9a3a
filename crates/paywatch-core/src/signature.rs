//! Strict signature checks for signed messages. Stock libraries accept malleated forms
//! that paywatch refuses: on EVM (EIP-191 `personal_sign`), a signature must be `0x` + 130
//! lowercase hex digits, with `0 < r`, `0 < s <= n/2` and `v` exactly 27 or 28 (never
//! normalized); on Solana, Ed25519 is checked with `verify_strict`, which refuses
//! small-order and non-canonical points.
//!
//! A smart-contract wallet's signature is the wallet's to judge (ERC-1271), and may be
//! wrapped for a wallet not yet deployed (ERC-6492); this module only reads its encoding
//! ([`decode_contract_signature`], [`is_erc6492_wrapped`]); the chain answers the rest.

use alloy_primitives::{Address, U256, eip191_hash_message};
use ed25519_dalek::{Signature as EdSignature, VerifyingKey};

/// Half the order of secp256k1: a larger `s` is the malleated twin of a valid signature.
const HALF_ORDER: U256 = U256::from_be_slice(&[
    0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x5D,
    0x57, 0x6E, 0x73, 0x57, 0xA4, 0x50, 0x1D, 0xDF, 0xE9, 0x2F, 0x46, 0x68, 0x1B, 0x20, 0xA0,
]);

/// Why a signature is refused; `code()` is its machine-readable reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// Not `0x` + 130 hex digits (EVM) or not 64 bytes of base58 (Solana).
    #[error("wrong length or encoding: {0}")]
    Encoding(&'static str),
    /// Hex digits in upper or mixed case.
    #[error("the signature hex must be lowercase")]
    UppercaseHex,
    /// `v` other than 27 or 28.
    #[error("v is {0}; only 27 or 28 are accepted")]
    BadV(u8),
    /// `r` or `s` is zero.
    #[error("r and s must not be zero")]
    ZeroComponent,
    /// `s` above n/2.
    #[error("s is above n/2 (a malleated signature)")]
    HighS,
    /// No key recovers, or the Ed25519 equation fails (including small-order or
    /// non-canonical points).
    #[error("the signature does not verify")]
    Invalid,
    /// Valid, but by another key.
    #[error("the signature is by {recovered}, not by the payer")]
    WrongSigner {
        /// Who signed.
        recovered: String,
    },
}

impl SignatureError {
    /// Stable snake_case reason.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Encoding(_) => "signature_encoding",
            Self::UppercaseHex => "signature_uppercase_hex",
            Self::BadV(_) => "signature_bad_v",
            Self::ZeroComponent => "signature_zero_component",
            Self::HighS => "signature_high_s",
            Self::Invalid => "signature_invalid",
            Self::WrongSigner { .. } => "signature_wrong_signer",
        }
    }
}

/// Checks an EIP-191 `personal_sign` signature over `message` by `signer`, strictly.
pub fn verify_eip191_strict(message: &[u8], signature: &str, signer: Address) -> Result<(), SignatureError> {
    let hex = signature
        .strip_prefix("0x")
        .ok_or(SignatureError::Encoding("expected 0x + 130 hex digits"))?;
    if hex.len() != 130 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(SignatureError::Encoding("expected 0x + 130 hex digits"));
    }
    if hex.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(SignatureError::UppercaseHex);
    }
    let bytes = alloy_primitives::hex::decode(hex).map_err(|_| SignatureError::Encoding("not hex"))?;
    let r = U256::from_be_slice(&bytes[..32]);
    let s = U256::from_be_slice(&bytes[32..64]);
    let parity = match bytes[64] {
        27 => false,
        28 => true,
        v => return Err(SignatureError::BadV(v)),
    };
    if r.is_zero() || s.is_zero() {
        return Err(SignatureError::ZeroComponent);
    }
    if s > HALF_ORDER {
        return Err(SignatureError::HighS);
    }
    let recovered = alloy_primitives::Signature::new(r, s, parity)
        .recover_address_from_prehash(&eip191_hash_message(message))
        .map_err(|_| SignatureError::Invalid)?;
    if recovered != signer {
        return Err(SignatureError::WrongSigner {
            recovered: crate::ids::lower_hex(recovered),
        });
    }
    Ok(())
}

/// The 32 bytes that end an ERC-6492 wrapped signature.
pub const ERC6492_SUFFIX: [u8; 32] = [
    0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64,
    0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92,
];

/// Decodes a signature for a smart-contract wallet, whose length the wallet decides:
/// `0x` + a non-zero, even number of hex digits, lowercase like every EVM spelling.
pub fn decode_contract_signature(signature: &str) -> Result<Vec<u8>, SignatureError> {
    let hex = signature
        .strip_prefix("0x")
        .ok_or(SignatureError::Encoding("expected 0x + hex digits"))?;
    if hex.is_empty() || hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(SignatureError::Encoding(
            "expected 0x + an even number of hex digits",
        ));
    }
    if hex.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(SignatureError::UppercaseHex);
    }
    alloy_primitives::hex::decode(hex).map_err(|_| SignatureError::Encoding("not hex"))
}

/// Whether `signature` is ERC-6492 wrapped: `abi.encode(factory, factoryCalldata,
/// innerSignature)` followed by [`ERC6492_SUFFIX`], for a wallet its factory has not
/// deployed yet.
pub fn is_erc6492_wrapped(signature: &[u8]) -> bool {
    signature.len() > ERC6492_SUFFIX.len() && signature.ends_with(&ERC6492_SUFFIX)
}

/// Checks an Ed25519 signature (base58) over `message` by the base58 public key `signer`,
/// with `verify_strict`.
pub fn verify_ed25519_strict(message: &[u8], signature: &str, signer: &str) -> Result<(), SignatureError> {
    let signature: [u8; 64] = bs58::decode(signature)
        .into_vec()
        .ok()
        .and_then(|v| v.try_into().ok())
        .ok_or(SignatureError::Encoding("expected 64 bytes in base58"))?;
    let key: [u8; 32] = bs58::decode(signer)
        .into_vec()
        .ok()
        .and_then(|v| v.try_into().ok())
        .ok_or(SignatureError::Encoding("the payer is not 32 bytes in base58"))?;
    let key = VerifyingKey::from_bytes(&key).map_err(|_| SignatureError::Invalid)?;
    key.verify_strict(message, &EdSignature::from_bytes(&signature))
        .map_err(|_| SignatureError::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::hex;
    use alloy_signer::SignerSync;
    use alloy_signer_local::PrivateKeySigner;
    use ed25519_dalek::{Signer as _, SigningKey, Verifier as _};

    const MESSAGE: &[u8] = b"x402 review v1\nprovider: reviews.example";
    /// secp256k1 group order n.
    const N: U256 = U256::from_be_slice(&[
        0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0xBA,
        0xAE, 0xDC, 0xE6, 0xAF, 0x48, 0xA0, 0x3B, 0xBF, 0xD2, 0x5E, 0x8C, 0xD0, 0x36, 0x41, 0x41,
    ]);

    fn signed() -> (Address, Vec<u8>) {
        let signer = PrivateKeySigner::from_bytes(&alloy_primitives::B256::repeat_byte(0x42)).unwrap();
        let signature = signer.sign_message_sync(MESSAGE).unwrap();
        (signer.address(), signature.as_bytes().to_vec())
    }

    fn spell(bytes: &[u8]) -> String {
        format!("0x{}", hex::encode(bytes))
    }

    #[test]
    fn accepts_a_well_formed_signature() {
        let (address, bytes) = signed();
        assert_eq!(bytes[64], 27 + (bytes[64] - 27), "alloy writes v as 27/28");
        verify_eip191_strict(MESSAGE, &spell(&bytes), address).unwrap();
        let other = Address::repeat_byte(1);
        assert!(matches!(
            verify_eip191_strict(MESSAGE, &spell(&bytes), other),
            Err(SignatureError::WrongSigner { .. })
        ));
        assert_eq!(
            verify_eip191_strict(b"another message", &spell(&bytes), address)
                .unwrap_err()
                .code(),
            "signature_wrong_signer"
        );
    }

    #[test]
    fn refuses_malleated_forms_each_with_its_reason() {
        let (address, bytes) = signed();
        // High s: s' = n - s with v flipped recovers the same key in stock libraries.
        let s = U256::from_be_slice(&bytes[32..64]);
        let mut high = bytes.clone();
        high[32..64].copy_from_slice(&(N - s).to_be_bytes::<32>());
        high[64] = if bytes[64] == 27 { 28 } else { 27 };
        assert_eq!(
            verify_eip191_strict(MESSAGE, &spell(&high), address),
            Err(SignatureError::HighS)
        );
        // v written as 0/1.
        let mut v01 = bytes.clone();
        v01[64] -= 27;
        assert_eq!(
            verify_eip191_strict(MESSAGE, &spell(&v01), address),
            Err(SignatureError::BadV(v01[64]))
        );
        // Uppercase hex.
        let upper = format!("0x{}", hex::encode_upper(&bytes));
        assert_eq!(
            verify_eip191_strict(MESSAGE, &upper, address),
            Err(SignatureError::UppercaseHex)
        );
        // Wrong length.
        assert_eq!(
            verify_eip191_strict(MESSAGE, &spell(&bytes[..64]), address)
                .unwrap_err()
                .code(),
            "signature_encoding"
        );
        // Zero r.
        let mut zero = bytes;
        zero[..32].fill(0);
        assert_eq!(
            verify_eip191_strict(MESSAGE, &spell(&zero), address),
            Err(SignatureError::ZeroComponent)
        );
    }

    #[test]
    fn ed25519_strict() {
        let key = SigningKey::from_bytes(&[9u8; 32]);
        let public = bs58::encode(key.verifying_key().to_bytes()).into_string();
        let signature = bs58::encode(key.sign(MESSAGE).to_bytes()).into_string();
        verify_ed25519_strict(MESSAGE, &signature, &public).unwrap();
        assert_eq!(
            verify_ed25519_strict(b"other", &signature, &public),
            Err(SignatureError::Invalid)
        );

        // A small-order R: the identity point (y = 1), with S = 0. Against the identity as
        // public key the cofactorless equation [S]B = R + [k]A holds; verify_strict refuses it.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let mut forged = [0u8; 64];
        forged[..32].copy_from_slice(&identity);
        let forged = bs58::encode(forged).into_string();
        let weak_key = bs58::encode(identity).into_string();
        assert_eq!(
            verify_ed25519_strict(MESSAGE, &forged, &weak_key),
            Err(SignatureError::Invalid)
        );
        assert!(
            VerifyingKey::from_bytes(&identity)
                .unwrap()
                .verify(
                    MESSAGE,
                    &EdSignature::from_bytes(&[&identity[..], &[0u8; 32]].concat().try_into().unwrap())
                )
                .is_ok(),
            "the lax check accepts this forgery; the strict one must not"
        );
        assert_eq!(
            verify_ed25519_strict(MESSAGE, "3x", &public).unwrap_err().code(),
            "signature_encoding"
        );
    }

    #[test]
    fn contract_signatures_keep_the_encoding_rules() {
        let wrapped = [vec![0xabu8; 96], ERC6492_SUFFIX.to_vec()].concat();
        let spelled = spell(&wrapped);
        assert_eq!(decode_contract_signature(&spelled).unwrap(), wrapped);
        assert!(is_erc6492_wrapped(&wrapped));
        assert!(
            !is_erc6492_wrapped(&ERC6492_SUFFIX),
            "the suffix alone wraps nothing"
        );
        assert!(!is_erc6492_wrapped(&[7u8; 65]));
        assert_eq!(
            decode_contract_signature(&spelled.to_uppercase().replacen("0X", "0x", 1)),
            Err(SignatureError::UppercaseHex)
        );
        for bad in ["", "0x", "0xabc", "abcd", "0xzz"] {
            assert_eq!(
                decode_contract_signature(bad).unwrap_err().code(),
                "signature_encoding",
                "{bad}"
            );
        }
    }
}
