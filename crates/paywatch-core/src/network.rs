//! CAIP-2 network identifiers (`eip155:8453`, `solana:5eykt4…`) and their short aliases.

use std::fmt;
use std::str::FromStr;

/// The chain family a network belongs to, the part of a CAIP-2 id before the colon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Namespace {
    /// EVM chains, identified by their decimal chain id.
    Eip155,
    /// Solana clusters, identified by the first 32 characters of their genesis hash.
    Solana,
}

impl Namespace {
    /// The namespace as written in a CAIP-2 id.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Eip155 => "eip155",
            Self::Solana => "solana",
        }
    }
}

/// A CAIP-2 network id such as `eip155:8453`, validated and in canonical spelling.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NetworkId {
    namespace: Namespace,
    reference: String,
}

/// Why a string is not a network id paywatch understands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkError {
    /// No colon, or an empty side of it.
    #[error("`{0}` is not a CAIP-2 network id: expected `namespace:reference`, e.g. `eip155:8453`")]
    NotCaip2(String),
    /// A namespace other than `eip155` or `solana`.
    #[error(
        "`{0}` has an unsupported namespace: paywatch watches `eip155:<chain id>` and `solana:<genesis hash>` networks"
    )]
    UnsupportedNamespace(String),
    /// An `eip155` reference that is not a positive decimal chain id without leading zeros.
    #[error(
        "`{0}` has a bad EVM chain id: expected a positive decimal number without leading zeros, e.g. `eip155:8453`"
    )]
    BadChainId(String),
    /// A `solana` reference that is not 32 base58 characters.
    #[error("`{0}` has a bad Solana reference: expected the first 32 base58 characters of the genesis hash")]
    BadSolanaReference(String),
}

/// Built-in short names for well-known networks.
const WELL_KNOWN_ALIASES: &[(&str, &str)] = &[
    ("base", "eip155:8453"),
    ("base-sepolia", "eip155:84532"),
    ("ethereum", "eip155:1"),
    ("solana", "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"),
    ("solana-devnet", "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"),
];

const BASE58_ALPHABET: &str = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

impl NetworkId {
    /// The chain family.
    pub fn namespace(&self) -> Namespace {
        self.namespace
    }

    /// The part after the colon: the chain id on EVM, the genesis hash prefix on Solana.
    pub fn reference(&self) -> &str {
        &self.reference
    }

    /// The EVM chain id, for `eip155` networks.
    pub fn evm_chain_id(&self) -> Option<u64> {
        match self.namespace {
            Namespace::Eip155 => self.reference.parse().ok(),
            Namespace::Solana => None,
        }
    }

    /// Parses a CAIP-2 id, or one of the built-in aliases (`base`, `base-sepolia`, `solana`, …).
    pub fn parse_or_alias(input: &str) -> Result<Self, NetworkError> {
        match WELL_KNOWN_ALIASES.iter().find(|(alias, _)| *alias == input) {
            Some((_, id)) => id.parse(),
            None => input.parse(),
        }
    }
}

impl FromStr for NetworkId {
    type Err = NetworkError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let (namespace, reference) = input
            .split_once(':')
            .filter(|(ns, reference)| !ns.is_empty() && !reference.is_empty())
            .ok_or_else(|| NetworkError::NotCaip2(input.to_string()))?;
        match namespace {
            "eip155" => {
                let valid = reference.bytes().all(|b| b.is_ascii_digit())
                    && !reference.starts_with('0')
                    && reference.parse::<u64>().is_ok();
                if !valid {
                    return Err(NetworkError::BadChainId(input.to_string()));
                }
                Ok(Self {
                    namespace: Namespace::Eip155,
                    reference: reference.to_string(),
                })
            }
            "solana" => {
                let valid = reference.len() == 32 && reference.chars().all(|c| BASE58_ALPHABET.contains(c));
                if !valid {
                    return Err(NetworkError::BadSolanaReference(input.to_string()));
                }
                Ok(Self {
                    namespace: Namespace::Solana,
                    reference: reference.to_string(),
                })
            }
            _ => Err(NetworkError::UnsupportedNamespace(input.to_string())),
        }
    }
}

impl fmt::Display for NetworkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.namespace.as_str(), self.reference)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_evm_and_solana_ids() {
        let base: NetworkId = "eip155:8453".parse().unwrap();
        assert_eq!(base.namespace(), Namespace::Eip155);
        assert_eq!(base.evm_chain_id(), Some(8453));
        assert_eq!(base.to_string(), "eip155:8453");
        let sol: NetworkId = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp".parse().unwrap();
        assert_eq!(sol.namespace(), Namespace::Solana);
        assert_eq!(sol.evm_chain_id(), None);
    }

    #[test]
    fn resolves_aliases() {
        assert_eq!(
            NetworkId::parse_or_alias("base").unwrap().to_string(),
            "eip155:8453"
        );
        assert_eq!(
            NetworkId::parse_or_alias("base-sepolia").unwrap().to_string(),
            "eip155:84532"
        );
        assert_eq!(
            NetworkId::parse_or_alias("solana-devnet").unwrap().to_string(),
            "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"
        );
    }

    #[test]
    fn refuses_malformed_ids_with_the_reason() {
        assert!(matches!(
            "8453".parse::<NetworkId>(),
            Err(NetworkError::NotCaip2(_))
        ));
        assert!(matches!(
            "eip155:".parse::<NetworkId>(),
            Err(NetworkError::NotCaip2(_))
        ));
        assert!(matches!(
            "cosmos:hub".parse::<NetworkId>(),
            Err(NetworkError::UnsupportedNamespace(_))
        ));
        for bad in [
            "eip155:0x2105",
            "eip155:08453",
            "eip155:-1",
            "eip155:99999999999999999999999",
        ] {
            assert!(
                matches!(bad.parse::<NetworkId>(), Err(NetworkError::BadChainId(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            "solana:0OIl".parse::<NetworkId>(),
            Err(NetworkError::BadSolanaReference(_))
        ));
        assert!(matches!(
            "Eip155:8453".parse::<NetworkId>(),
            Err(NetworkError::UnsupportedNamespace(_))
        ));
    }
}
