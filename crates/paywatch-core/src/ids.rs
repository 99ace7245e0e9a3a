//! Identifier spellings: EVM addresses and hashes are `0x` + lowercase hex on output;
//! Solana addresses and signatures are base58, exactly as the chain shows them. Each is
//! parsed with an error that says exactly what is wrong.

use alloy_primitives::{Address, B256, U256};

/// Why a string is not a valid EVM or Solana identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The `0x` prefix is missing.
    #[error("`{input}` is not {what}: it must start with `0x`")]
    MissingPrefix {
        /// The rejected input.
        input: String,
        /// What was expected, with its article, e.g. "a transaction hash".
        what: &'static str,
    },
    /// Wrong number of hex digits.
    #[error("`{input}` is not {what}: expected {expected} hex digits after `0x`, got {got}")]
    WrongLength {
        /// The rejected input.
        input: String,
        /// What was expected.
        what: &'static str,
        /// Hex digits expected.
        expected: usize,
        /// Hex digits found.
        got: usize,
    },
    /// A character outside `0-9a-fA-F`.
    #[error("`{input}` is not {what}: it contains a character that is not a hex digit")]
    NotHex {
        /// The rejected input.
        input: String,
        /// What was expected.
        what: &'static str,
    },
    /// Not base58, or not the one base58 spelling of the right number of bytes.
    #[error("`{input}` is not {what}: expected the base58 spelling of {bytes} bytes")]
    NotBase58 {
        /// The rejected input.
        input: String,
        /// What was expected.
        what: &'static str,
        /// Bytes expected.
        bytes: usize,
    },
}

fn parse_hex<const N: usize>(input: &str, what: &'static str) -> Result<[u8; N], IdError> {
    let digits = input.strip_prefix("0x").ok_or_else(|| IdError::MissingPrefix {
        input: input.to_string(),
        what,
    })?;
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(IdError::NotHex {
            input: input.to_string(),
            what,
        });
    }
    if digits.len() != 2 * N {
        return Err(IdError::WrongLength {
            input: input.to_string(),
            what,
            expected: 2 * N,
            got: digits.len(),
        });
    }
    let mut out = [0u8; N];
    alloy_primitives::hex::decode_to_slice(digits, &mut out).map_err(|_| IdError::NotHex {
        input: input.to_string(),
        what,
    })?;
    Ok(out)
}

/// Parses an EVM transaction hash (`0x` + 64 hex digits, any case).
pub fn parse_evm_tx_hash(input: &str) -> Result<B256, IdError> {
    parse_hex::<32>(input, "a transaction hash").map(B256::from)
}

/// Parses an EVM address (`0x` + 40 hex digits, any case; the checksum is not required).
pub fn parse_evm_address(input: &str) -> Result<Address, IdError> {
    parse_hex::<20>(input, "an EVM address").map(Address::from)
}

/// Parses a 32-byte EVM word such as an EIP-3009 nonce.
pub fn parse_evm_word(input: &str) -> Result<B256, IdError> {
    parse_hex::<32>(input, "a 32-byte hex value").map(B256::from)
}

fn parse_base58<const N: usize>(input: &str, what: &'static str) -> Result<[u8; N], IdError> {
    let err = || IdError::NotBase58 {
        input: input.to_string(),
        what,
        bytes: N,
    };
    let decoded = bs58::decode(input).into_vec().map_err(|_| err())?;
    // Leading zero bytes have one spelling ("1" each): re-encoding must give the input back.
    let bytes: [u8; N] = decoded.try_into().map_err(|_| err())?;
    if bs58::encode(bytes).into_string() != input {
        return Err(err());
    }
    Ok(bytes)
}

/// Parses a Solana address (a public key): base58 of 32 bytes, case as the chain spells it.
pub fn parse_solana_address(input: &str) -> Result<[u8; 32], IdError> {
    parse_base58::<32>(input, "a Solana address")
}

/// Parses a Solana transaction signature: base58 of 64 bytes.
pub fn parse_solana_signature(input: &str) -> Result<[u8; 64], IdError> {
    parse_base58::<64>(input, "a Solana transaction signature")
}

/// An amount in an asset's smallest unit written as a decimal integer: one or more ASCII
/// digits, no sign, no decimal point, at most 2^256 − 1. `None` otherwise (`""` is not 0).
pub fn parse_decimal_amount(input: &str) -> Option<U256> {
    if input.is_empty() || !input.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    U256::from_str_radix(input, 10).ok()
}

/// An address on a watched chain, parsed once (from `chains.toml`): an EVM address, or a
/// Solana address (a public key). It displays in the chain's canonical spelling — `0x` +
/// lowercase hex, or base58 — which is how the store keys and the APIs answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChainAddress {
    /// 20 bytes.
    Evm(Address),
    /// 32 bytes.
    Solana([u8; 32]),
}

impl ChainAddress {
    /// Parses `input` as an address of `namespace`.
    pub fn parse(namespace: crate::Namespace, input: &str) -> Result<Self, IdError> {
        match namespace {
            crate::Namespace::Eip155 => parse_evm_address(input).map(Self::Evm),
            crate::Namespace::Solana => parse_solana_address(input).map(Self::Solana),
        }
    }

    /// The EVM address, if it is one.
    pub fn evm(self) -> Option<Address> {
        match self {
            Self::Evm(address) => Some(address),
            Self::Solana(_) => None,
        }
    }
}

impl std::fmt::Display for ChainAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Evm(address) => f.write_str(&lower_hex(address)),
            Self::Solana(bytes) => f.write_str(&bs58::encode(bytes).into_string()),
        }
    }
}

/// Equal to the canonical spelling only (`0x` + lowercase hex, or base58).
impl PartialEq<str> for ChainAddress {
    fn eq(&self, spelled: &str) -> bool {
        match self {
            Self::Evm(address) => {
                // Compared digit by digit: views compare every answered row's asset.
                let digit = |n: u8| b"0123456789abcdef"[usize::from(n)];
                spelled.len() == 42
                    && spelled.starts_with("0x")
                    && address
                        .iter()
                        .zip(spelled.as_bytes()[2..].chunks_exact(2))
                        .all(|(byte, pair)| pair[0] == digit(byte >> 4) && pair[1] == digit(byte & 0x0f))
            }
            Self::Solana(bytes) => parse_solana_address(spelled).is_ok_and(|parsed| parsed == *bytes),
        }
    }
}

impl PartialEq<String> for ChainAddress {
    fn eq(&self, spelled: &String) -> bool {
        self == spelled.as_str()
    }
}

/// `0x` + lowercase hex, the one spelling paywatch stores and answers with.
pub fn lower_hex(bytes: impl AsRef<[u8]>) -> String {
    format!("0x{}", alloy_primitives::hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_addresses_equal_their_canonical_spelling_only() {
        let evm = ChainAddress::parse(
            crate::Namespace::Eip155,
            "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
        )
        .unwrap();
        assert_eq!(evm.to_string(), "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913");
        assert!(evm == *"0x833589fcd6edb6e08f4c7c32d4f71b54bda02913");
        assert!(evm != *"0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913");
        let mint = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";
        let solana = ChainAddress::parse(crate::Namespace::Solana, mint).unwrap();
        assert_eq!(solana.to_string(), mint);
        assert!(solana == *mint);
        assert_eq!(solana.evm(), None);
        assert!(
            ChainAddress::parse(
                crate::Namespace::Solana,
                "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913"
            )
            .is_err()
        );
    }

    #[test]
    fn round_trips_in_lowercase() {
        let hash =
            parse_evm_tx_hash("0xAbCd000000000000000000000000000000000000000000000000000000000001").unwrap();
        assert_eq!(
            lower_hex(hash),
            "0xabcd000000000000000000000000000000000000000000000000000000000001"
        );
        let addr = parse_evm_address("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913").unwrap();
        assert_eq!(lower_hex(addr), "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913");
    }

    #[test]
    fn names_what_is_wrong() {
        assert!(matches!(
            parse_evm_tx_hash("abcd"),
            Err(IdError::MissingPrefix { .. })
        ));
        assert!(matches!(
            parse_evm_tx_hash("0x1234"),
            Err(IdError::WrongLength {
                expected: 64,
                got: 4,
                ..
            })
        ));
        let not_hex = parse_evm_address("0x833589fcd6edb6e08f4c7c32d4f71b54bda0291z").unwrap_err();
        assert!(matches!(not_hex, IdError::NotHex { .. }));
        assert_eq!(
            not_hex.to_string(),
            "`0x833589fcd6edb6e08f4c7c32d4f71b54bda0291z` is not an EVM address: it contains a character that is not a hex digit"
        );
    }

    #[test]
    fn solana_spellings() {
        let usdc = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";
        assert_eq!(
            bs58::encode(parse_solana_address(usdc).unwrap()).into_string(),
            usdc
        );
        // The system program: 32 zero bytes, spelled with one `1` per byte.
        assert_eq!(
            parse_solana_address("11111111111111111111111111111111").unwrap(),
            [0u8; 32]
        );
        // Case matters in base58: a lowercased address is another (here invalid) key.
        assert!(matches!(
            parse_solana_address(&usdc.to_lowercase()),
            Err(IdError::NotBase58 { bytes: 32, .. })
        ));
        assert!(parse_solana_address("0OIl").is_err());
        let signature = bs58::encode([7u8; 64]).into_string();
        assert_eq!(parse_solana_signature(&signature).unwrap(), [7u8; 64]);
        assert!(matches!(
            parse_solana_signature(usdc),
            Err(IdError::NotBase58 { bytes: 64, .. })
        ));
        // A non-canonical spelling (an extra leading `1` is an extra zero byte) is refused.
        assert!(parse_solana_address(&format!("1{usdc}")).is_err());
    }

    #[test]
    fn decimal_amounts_are_digits_only() {
        assert_eq!(parse_decimal_amount("0"), Some(U256::ZERO));
        assert_eq!(parse_decimal_amount("020"), Some(U256::from(20u64)));
        for bad in ["", "+5", "-5", " 5", "5.0", "0x10", "1e3"] {
            assert_eq!(parse_decimal_amount(bad), None, "{bad:?}");
        }
        assert_eq!(parse_decimal_amount(&U256::MAX.to_string()), Some(U256::MAX));
        assert_eq!(parse_decimal_amount(&format!("{}0", U256::MAX)), None);
    }
}
