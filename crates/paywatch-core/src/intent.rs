//! Intent-committed nonces: a payer sets the EIP-3009 nonce to
//! `keccak256(canonical_intent || salt)`, binding what it decided to buy (method, URL,
//! body, class, cap, asset, pay_to) to the payment, with nothing changed on the wire.
//! Revealing the intent and the 32-byte salt later lets anyone check the binding.
//!
//! The canonical intent is eight lines, each ending in `\n`, in this order:
//!
//! ```text
//! x402-intent/1
//! method: GET
//! url: https://api.example.com/premium-data
//! body-sha256: -
//! class: market-data
//! max-atomic: 20000
//! asset: eip155:84532/0x036cbd53842c5426634e7929541ec2318f3dcf7e
//! payTo: 0x209693bc6afc0c5328ba36faf03c514ef312287c
//! ```
//!
//! URL normalization: the scheme (`http` or `https`) and host are lowercased, the default
//! port (80, 443) is removed, the fragment is removed; path and query are kept byte for
//! byte. A URL with user info, without a host, with another scheme, or with whitespace,
//! control or non-ASCII characters is refused.
//!
//! An escrowed payment (x402's auth-capture) cannot commit through its nonce: the token
//! collector's authorization signs the payer-agnostic hash of the escrow's `PaymentInfo`.
//! The one value of it the client chooses is the salt (the x402 SDK draws 32 random
//! bytes), and the hash — so the payer's signature — commits to it; the commitment goes
//! there instead ([`escrow_salt`]).

use alloy_primitives::{Address, B256, U256, keccak256};

use crate::ids::{lower_hex, parse_evm_address};
use crate::network::{Namespace, NetworkId};

/// What a payer decided to buy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    /// HTTP method; uppercased in the canonical text.
    pub method: String,
    /// The resource URL, normalized in the canonical text.
    pub url: String,
    /// SHA-256 of the request body, 64 lowercase hex digits; `None` for no body.
    pub body_sha256: Option<String>,
    /// The payer's resource class (a name of its own policy).
    pub resource_class: String,
    /// The most the payer agreed to pay, in the asset's smallest unit.
    pub max_atomic: U256,
    /// The network.
    pub network: NetworkId,
    /// Token contract.
    pub asset: String,
    /// The seller.
    pub pay_to: String,
}

/// Why an intent cannot be made canonical.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntentError {
    /// The URL cannot be normalized.
    #[error("url `{url}` cannot be normalized: {reason}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        reason: &'static str,
    },
    /// A field has the wrong shape.
    #[error("{field}: {reason}")]
    Field {
        /// The field.
        field: &'static str,
        /// Why.
        reason: String,
    },
}

fn url_error(url: &str, reason: &'static str) -> IntentError {
    IntentError::Url {
        url: url.to_string(),
        reason,
    }
}

/// Normalizes a resource URL (see the module documentation).
pub fn normalize_url(url: &str) -> Result<String, IntentError> {
    if !url.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(url_error(url, "only printable ASCII without spaces is allowed"));
    }
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| url_error(url, "no `scheme://`"))?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => "80",
        "https" => "443",
        _ => return Err(url_error(url, "the scheme must be http or https")),
    };
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path_and_query) = rest.split_at(split);
    if authority.contains('@') {
        return Err(url_error(url, "user info is not allowed"));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || authority.starts_with('[') => (host, Some(port)),
        _ => (authority, None),
    };
    if host.is_empty() {
        return Err(url_error(url, "no host"));
    }
    let port = match port {
        Some(p) if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) => {
            return Err(url_error(url, "the port must be a number"));
        }
        Some(p) if p == default_port => None,
        other => other,
    };
    let mut out = format!("{scheme}://{}", host.to_ascii_lowercase());
    if let Some(port) = port {
        out.push(':');
        out.push_str(port);
    }
    out.push_str(path_and_query);
    Ok(out)
}

/// The canonical intent bytes that are hashed with the salt.
pub fn canonical_intent(intent: &Intent) -> Result<Vec<u8>, IntentError> {
    let field = |field: &'static str, reason: String| IntentError::Field { field, reason };
    let method = intent.method.to_ascii_uppercase();
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(field(
            "method",
            format!("`{}` is not an HTTP method", intent.method),
        ));
    }
    let body = match &intent.body_sha256 {
        None => "-".to_string(),
        Some(hex) if hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) => {
            hex.clone()
        }
        Some(other) => {
            return Err(field(
                "body_sha256",
                format!("`{other}` is not 64 lowercase hex digits"),
            ));
        }
    };
    let class = &intent.resource_class;
    if class.is_empty() || class.contains(['\n', '\r']) {
        return Err(field("class", "must be one non-empty line".to_string()));
    }
    let (asset, pay_to) = match intent.network.namespace() {
        Namespace::Eip155 => (
            lower_hex(parse_evm_address(&intent.asset).map_err(|e| field("asset", e.to_string()))?),
            lower_hex(parse_evm_address(&intent.pay_to).map_err(|e| field("pay_to", e.to_string()))?),
        ),
        Namespace::Solana => (intent.asset.clone(), intent.pay_to.clone()),
    };
    let text = format!(
        "x402-intent/1\nmethod: {method}\nurl: {}\nbody-sha256: {body}\nclass: {class}\nmax-atomic: {}\nasset: {}/{asset}\npayTo: {pay_to}\n",
        normalize_url(&intent.url)?,
        intent.max_atomic,
        intent.network,
    );
    Ok(text.into_bytes())
}

/// `keccak256(canonical_intent || salt)`: the nonce a payer signs.
pub fn intent_nonce(intent: &Intent, salt: &B256) -> Result<B256, IntentError> {
    let mut preimage = canonical_intent(intent)?;
    preimage.extend_from_slice(salt.as_slice());
    Ok(keccak256(preimage))
}

/// The x402 SDK's salt binding for auth-capture payments: when the requirements name a
/// `receiverAuthorizer` or a `policy`, the client's random salt nonce is bound to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaltBinding {
    /// The requirements' `receiverAuthorizer` (the zero address when absent).
    pub receiver_authorizer: Address,
    /// The requirements' `policy` (the zero address when absent).
    pub policy: Address,
}

/// The EIP-712-style type string the x402 SDK hashes a bound salt with.
const SALT_BINDING_TYPE: &str =
    "x402AuthCaptureSaltBinding(address receiverAuthorizer,address policy,uint256 saltNonce)";

impl SaltBinding {
    /// The salt bound from `salt_nonce`:
    /// `keccak256(abi.encode(keccak256(SALT_BINDING_TYPE), receiverAuthorizer, policy, saltNonce))`
    /// (four static words, so the encoding is their concatenation).
    pub fn bind(&self, salt_nonce: B256) -> B256 {
        let mut encoded = Vec::with_capacity(4 * 32);
        encoded.extend_from_slice(keccak256(SALT_BINDING_TYPE).as_slice());
        encoded.extend_from_slice(self.receiver_authorizer.into_word().as_slice());
        encoded.extend_from_slice(self.policy.into_word().as_slice());
        encoded.extend_from_slice(salt_nonce.as_slice());
        keccak256(encoded)
    }
}

/// The `PaymentInfo` salt that commits an escrowed payment to an intent: the commitment
/// `keccak256(canonical_intent || salt)` itself, read as a `uint256`, or, with the SDK's
/// salt binding, the salt bound from it as the salt nonce.
pub fn escrow_salt(commitment: B256, binding: Option<&SaltBinding>) -> U256 {
    let salt = binding.map_or(commitment, |b| b.bind(commitment));
    U256::from_be_bytes(salt.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buy_a() -> Intent {
        Intent {
            method: "get".to_string(),
            url: "https://api.example.com/premium-data".to_string(),
            body_sha256: None,
            resource_class: "market-data".to_string(),
            max_atomic: U256::from(20_000u64),
            network: "eip155:84532".parse().unwrap(),
            asset: "0x036CbD53842c5426634e7929541eC2318f3dCF7e".to_string(),
            pay_to: "0x209693Bc6afc0C5328bA36FaF03C514EF312287C".to_string(),
        }
    }

    #[test]
    fn canonical_text_is_the_specs() {
        let expected = "x402-intent/1\nmethod: GET\nurl: https://api.example.com/premium-data\nbody-sha256: -\nclass: market-data\nmax-atomic: 20000\nasset: eip155:84532/0x036cbd53842c5426634e7929541ec2318f3dcf7e\npayTo: 0x209693bc6afc0c5328ba36faf03c514ef312287c\n";
        assert_eq!(
            String::from_utf8(canonical_intent(&buy_a()).unwrap()).unwrap(),
            expected
        );
    }

    #[test]
    fn nonce_binds_every_field_and_the_salt() {
        let salt = B256::repeat_byte(7);
        let nonce = intent_nonce(&buy_a(), &salt).unwrap();
        // Computed independently with js-sha3 over the canonical text above and 32 bytes of 0x07.
        assert_eq!(
            nonce.to_string(),
            "0xe021482586cad6d308377b4621baf8f5d5c90886ca79c806df00f7b4484e0522"
        );
        let mut evil = buy_a();
        evil.url = "https://evil.example.net/premium-data".to_string();
        assert_ne!(intent_nonce(&evil, &salt).unwrap(), nonce);
        let mut raised = buy_a();
        raised.max_atomic = U256::from(30_000u64);
        assert_ne!(intent_nonce(&raised, &salt).unwrap(), nonce);
        assert_ne!(intent_nonce(&buy_a(), &B256::repeat_byte(8)).unwrap(), nonce);
    }

    #[test]
    fn an_escrow_salt_is_the_commitment_or_bound_from_it() {
        let commitment = B256::repeat_byte(7);
        assert_eq!(escrow_salt(commitment, None), U256::from_be_bytes([7; 32]));
        let binding = SaltBinding {
            receiver_authorizer: Address::repeat_byte(0x11),
            policy: Address::ZERO,
        };
        // Computed independently with viem's encodeAbiParameters and keccak256, as the
        // x402 SDK's deriveBoundSalt does.
        assert_eq!(
            escrow_salt(commitment, Some(&binding)),
            "56558806567220273163970281691625208785027523703851796385391770298379183462287"
                .parse::<U256>()
                .unwrap()
        );
    }

    #[test]
    fn normalizes_urls() {
        for (input, expected) in [
            (
                "HTTPS://API.Example.COM:443/a/../B?x=1&Y=%2f#frag",
                "https://api.example.com/a/../B?x=1&Y=%2f",
            ),
            ("http://example.com:80", "http://example.com"),
            ("http://example.com:8080/p", "http://example.com:8080/p"),
            ("https://example.com?q", "https://example.com?q"),
        ] {
            assert_eq!(normalize_url(input).unwrap(), expected, "{input}");
        }
        for bad in [
            "ftp://example.com/",
            "https://user@example.com/",
            "https:///path",
            "https://example.com/a b",
            "https://example.com:x/",
            "example.com/path",
            "https://exämple.com/",
        ] {
            assert!(normalize_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn refuses_malformed_fields() {
        let mut i = buy_a();
        i.body_sha256 = Some("ABC".to_string());
        assert!(matches!(
            canonical_intent(&i),
            Err(IntentError::Field {
                field: "body_sha256",
                ..
            })
        ));
        let mut i = buy_a();
        i.resource_class = "a\nb".to_string();
        assert!(matches!(
            canonical_intent(&i),
            Err(IntentError::Field { field: "class", .. })
        ));
        let mut i = buy_a();
        i.pay_to = "0x12".to_string();
        assert!(matches!(
            canonical_intent(&i),
            Err(IntentError::Field { field: "pay_to", .. })
        ));
    }
}
