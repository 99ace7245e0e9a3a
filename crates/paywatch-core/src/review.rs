//! The x402 review v1 message: twelve exact lines a payer signs about one payment.
//!
//! Byte rules: UTF-8, lines joined by one `\n`, no `\r`, no trailing newline, no byte order
//! mark; the fixed first line `x402 review v1`, ten `key: value` lines in fixed order, and
//! a fixed last line. Our copy of the spec lacks its example message, so the last line is
//! [`DEFAULT_LAST_LINE`] unless the configuration sets another.

use alloy_primitives::U256;
use sha2::{Digest, Sha256};

use crate::network::{Namespace, NetworkId};

/// The fixed first line.
pub const FIRST_LINE: &str = "x402 review v1";

/// The fixed last line used when the configuration sets none. The published example of
/// the v1 spec was not available to us: set the exact line with `[review] last_line` in
/// `chains.toml` (or `PAYWATCH_REVIEW_LAST_LINE`) before relying on signature checks.
pub const DEFAULT_LAST_LINE: &str =
    "Signing this message posts a review of this payment. It is not a transaction and moves no funds.";

/// The field keys, in order.
pub const KEYS: [&str; 10] = [
    "provider",
    "network",
    "payment",
    "payer",
    "pay_to",
    "amount",
    "asset",
    "stars",
    "note_sha256",
    "issued_at",
];

/// A parsed (or to-be-built) review message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewMessage {
    /// Host of the provider's write URL, lowercase, no scheme, port or path.
    pub provider: String,
    /// The payment's network.
    pub network: NetworkId,
    /// Transaction hash (EVM) or signature (Solana).
    pub payment: String,
    /// The wallet that paid and signs.
    pub payer: String,
    /// The seller.
    pub pay_to: String,
    /// Amount in the asset's smallest unit.
    pub amount: U256,
    /// Token contract or mint.
    pub asset: String,
    /// 1 to 5.
    pub stars: u8,
    /// SHA-256 of the note, 64 lowercase hex digits.
    pub note_sha256: String,
    /// `YYYY-MM-DDTHH:MM:SSZ`.
    pub issued_at: String,
}

/// Which byte rule a message breaks; `code()` is the machine-readable detail of
/// `v1_malformed_message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewFormatError {
    /// Not valid UTF-8.
    #[error("the message is not valid UTF-8")]
    NotUtf8,
    /// Starts with a byte order mark.
    #[error("the message starts with a byte order mark")]
    ByteOrderMark,
    /// Contains `\r`.
    #[error("the message contains a carriage return; join lines with \\n only")]
    CarriageReturn,
    /// Ends with `\n`.
    #[error("the message ends with a newline; there is none after the last line")]
    TrailingNewline,
    /// Not twelve lines.
    #[error("the message has {0} lines, not 12")]
    LineCount(usize),
    /// The first line is not `x402 review v1`.
    #[error("the first line is not `x402 review v1`")]
    FirstLine,
    /// The last line is not the fixed one.
    #[error("the last line is not the fixed v1 last line")]
    LastLine,
    /// A field line is not `key: value` with one space, or has a tab or extra spaces.
    #[error("line {0} is not `key: value` with exactly one space")]
    LineShape(usize),
    /// A key is missing, unknown or out of order.
    #[error("line {line} has key `{found}` where `{expected}` belongs")]
    KeyOrder {
        /// 1-based line.
        line: usize,
        /// Expected key.
        expected: &'static str,
        /// Found key.
        found: String,
    },
    /// A value is not in shape.
    #[error("{key}: {reason}")]
    Field {
        /// The key.
        key: &'static str,
        /// What is wrong.
        reason: String,
    },
}

impl ReviewFormatError {
    /// Stable snake_case detail code.
    pub fn code(&self) -> String {
        match self {
            Self::NotUtf8 => "not_utf8".into(),
            Self::ByteOrderMark => "byte_order_mark".into(),
            Self::CarriageReturn => "carriage_return".into(),
            Self::TrailingNewline => "trailing_newline".into(),
            Self::LineCount(_) => "line_count".into(),
            Self::FirstLine => "first_line".into(),
            Self::LastLine => "last_line".into(),
            Self::LineShape(_) => "line_shape".into(),
            Self::KeyOrder { .. } => "key_order".into(),
            Self::Field { key, .. } => format!("bad_{key}"),
        }
    }
}

fn field(key: &'static str, reason: impl Into<String>) -> ReviewFormatError {
    ReviewFormatError::Field {
        key,
        reason: reason.into(),
    }
}

fn is_lower_hex(s: &str, digits: usize) -> bool {
    s.len() == digits && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn check_evm_hex(key: &'static str, value: &str, bytes: usize) -> Result<(), ReviewFormatError> {
    match value.strip_prefix("0x") {
        Some(hex) if is_lower_hex(hex, bytes * 2) => Ok(()),
        _ => Err(field(
            key,
            format!("expected 0x + {} lowercase hex digits", bytes * 2),
        )),
    }
}

fn check_base58(key: &'static str, value: &str, bytes: usize) -> Result<(), ReviewFormatError> {
    match bs58::decode(value).into_vec() {
        Ok(decoded) if decoded.len() == bytes && bs58::encode(&decoded).into_string() == value => Ok(()),
        _ => Err(field(
            key,
            format!("expected the base58 spelling of {bytes} bytes"),
        )),
    }
}

fn check_provider(value: &str) -> Result<(), ReviewFormatError> {
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-'))
        && !value.starts_with(['.', '-'])
        && !value.ends_with(['.', '-'])
        && !value.contains("..");
    if ok {
        Ok(())
    } else {
        Err(field(
            "provider",
            "expected a lowercase host name, without scheme, port or path",
        ))
    }
}

/// `issued_at` as Unix seconds, when it has the message's shape.
fn issued_at_unix(value: &str) -> Option<i64> {
    let format = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    (value.len() == 20)
        .then(|| time::PrimitiveDateTime::parse(value, &format).ok())
        .flatten()
        .map(|at| at.assume_utc().unix_timestamp())
}

fn check_issued_at(value: &str) -> Result<(), ReviewFormatError> {
    match issued_at_unix(value) {
        Some(_) => Ok(()),
        None => Err(field(
            "issued_at",
            "expected UTC to the second, YYYY-MM-DDTHH:MM:SSZ",
        )),
    }
}

/// `unix` (seconds) spelled as a message's `issued_at`, `YYYY-MM-DDTHH:MM:SSZ`; `None`
/// outside the years 0000–9999.
pub fn issued_at_of(unix: i64) -> Option<String> {
    let format = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    time::OffsetDateTime::from_unix_timestamp(unix)
        .ok()
        .and_then(|at| at.format(&format).ok())
        .filter(|text| text.len() == 20)
}

/// How old, or how far ahead of the provider's clock, a message's `issued_at` may be
/// (`[review] max_age_secs`, `max_future_secs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freshness {
    /// The oldest message taken, in seconds before now.
    pub max_age_secs: u64,
    /// How far in the future `issued_at` may be (clock skew), in seconds.
    pub max_future_secs: u64,
}

impl Default for Freshness {
    /// A day old at most, five minutes of clock skew.
    fn default() -> Self {
        Self {
            max_age_secs: 24 * 3600,
            max_future_secs: 300,
        }
    }
}

/// Why a message's `issued_at` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Staleness {
    /// Older than the provider takes.
    #[error(
        "issued_at {issued_at} is {age_secs} s old; this provider takes messages up to {max_age_secs} s old"
    )]
    TooOld {
        /// The message's `issued_at`.
        issued_at: String,
        /// Its age at the check.
        age_secs: u64,
        /// The configured bound.
        max_age_secs: u64,
    },
    /// Further ahead of the provider's clock than the skew it allows.
    #[error(
        "issued_at {issued_at} is {ahead_secs} s in the future; this provider allows {max_future_secs} s of clock skew"
    )]
    InFuture {
        /// The message's `issued_at`.
        issued_at: String,
        /// How far ahead of now it is.
        ahead_secs: u64,
        /// The configured bound.
        max_future_secs: u64,
    },
}

impl Freshness {
    /// Checks a parsed message's `issued_at` against `now` (Unix seconds).
    pub fn check(&self, review: &ReviewMessage, now: i64) -> Result<(), Staleness> {
        let Some(at) = issued_at_unix(&review.issued_at) else {
            // `parse_review` only builds messages whose issued_at has the shape.
            return Ok(());
        };
        let issued_at = review.issued_at.clone();
        if at > now {
            let ahead_secs = at.abs_diff(now);
            if ahead_secs > self.max_future_secs {
                return Err(Staleness::InFuture {
                    issued_at,
                    ahead_secs,
                    max_future_secs: self.max_future_secs,
                });
            }
        } else {
            let age_secs = now.abs_diff(at);
            if age_secs > self.max_age_secs {
                return Err(Staleness::TooOld {
                    issued_at,
                    age_secs,
                    max_age_secs: self.max_age_secs,
                });
            }
        }
        Ok(())
    }
}

/// Parses a message with every byte rule, against the fixed `last_line`.
pub fn parse_review(bytes: &[u8], last_line: &str) -> Result<ReviewMessage, ReviewFormatError> {
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Err(ReviewFormatError::ByteOrderMark);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| ReviewFormatError::NotUtf8)?;
    if text.contains('\r') {
        return Err(ReviewFormatError::CarriageReturn);
    }
    if text.ends_with('\n') {
        return Err(ReviewFormatError::TrailingNewline);
    }
    let lines: Vec<&str> = text.split('\n').collect();
    if lines.len() != 12 {
        return Err(ReviewFormatError::LineCount(lines.len()));
    }
    if lines[0] != FIRST_LINE {
        return Err(ReviewFormatError::FirstLine);
    }
    if lines[11] != last_line {
        return Err(ReviewFormatError::LastLine);
    }
    let mut values = Vec::with_capacity(10);
    for (i, (line, expected)) in lines[1..11].iter().zip(KEYS).enumerate() {
        let number = i + 2;
        let (key, value) = line
            .split_once(": ")
            .ok_or(ReviewFormatError::LineShape(number))?;
        if key != expected {
            return Err(ReviewFormatError::KeyOrder {
                line: number,
                expected,
                found: key.to_string(),
            });
        }
        if value.is_empty() || value.contains([' ', '\t']) || key.contains([' ', '\t']) {
            return Err(ReviewFormatError::LineShape(number));
        }
        values.push(value);
    }
    let [
        provider,
        network,
        payment,
        payer,
        pay_to,
        amount,
        asset,
        stars,
        note_sha256,
        issued_at,
    ] = values[..]
    else {
        unreachable!("ten values were collected");
    };
    check_provider(provider)?;
    let network: NetworkId = network.parse().map_err(|e| field("network", format!("{e}")))?;
    match network.namespace() {
        Namespace::Eip155 => {
            check_evm_hex("payment", payment, 32)?;
            check_evm_hex("payer", payer, 20)?;
            check_evm_hex("pay_to", pay_to, 20)?;
            check_evm_hex("asset", asset, 20)?;
        }
        Namespace::Solana => {
            check_base58("payment", payment, 64)?;
            check_base58("payer", payer, 32)?;
            check_base58("pay_to", pay_to, 32)?;
            check_base58("asset", asset, 32)?;
        }
    }
    let amount_ok = !amount.is_empty()
        && amount.bytes().all(|b| b.is_ascii_digit())
        && (amount == "0" || !amount.starts_with('0'));
    let amount = amount_ok
        .then(|| U256::from_str_radix(amount, 10).ok())
        .flatten()
        .ok_or_else(|| {
            field(
                "amount",
                "expected a plain integer without sign, decimal point or leading zeros",
            )
        })?;
    let stars = match stars.as_bytes() {
        [d @ b'1'..=b'5'] => d - b'0',
        _ => return Err(field("stars", "expected one digit from 1 to 5")),
    };
    if !is_lower_hex(note_sha256, 64) {
        return Err(field("note_sha256", "expected 64 lowercase hex digits"));
    }
    check_issued_at(issued_at)?;
    Ok(ReviewMessage {
        provider: provider.to_string(),
        network,
        payment: payment.to_string(),
        payer: payer.to_string(),
        pay_to: pay_to.to_string(),
        amount,
        asset: asset.to_string(),
        stars,
        note_sha256: note_sha256.to_string(),
        issued_at: issued_at.to_string(),
    })
}

/// Builds the exact message text for `review`.
pub fn build_review(review: &ReviewMessage, last_line: &str) -> String {
    format!(
        "{FIRST_LINE}\nprovider: {}\nnetwork: {}\npayment: {}\npayer: {}\npay_to: {}\namount: {}\nasset: {}\nstars: {}\nnote_sha256: {}\nissued_at: {}\n{last_line}",
        review.provider,
        review.network,
        review.payment,
        review.payer,
        review.pay_to,
        review.amount,
        review.asset,
        review.stars,
        review.note_sha256,
        review.issued_at,
    )
}

/// SHA-256 of a note's UTF-8 bytes, as 64 lowercase hex digits.
pub fn note_sha256(note: &str) -> String {
    alloy_primitives::hex::encode(Sha256::digest(note.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOTE: &str = "Answered in two seconds, and the data matched its description.";

    fn example() -> ReviewMessage {
        ReviewMessage {
            provider: "reviews.example".to_string(),
            network: "eip155:8453".parse().unwrap(),
            payment: format!("0x{}", "ab".repeat(32)),
            payer: "0x12455b6a0e4c6d24ba72c0b3c3daeee7c3e49393".to_string(),
            pay_to: format!("0x{}", "cd".repeat(20)),
            amount: U256::from(10_000u64),
            asset: "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913".to_string(),
            stars: 5,
            note_sha256: note_sha256(NOTE),
            issued_at: "2026-10-02T12:00:00Z".to_string(),
        }
    }

    #[test]
    fn note_hash_matches_the_spec_example() {
        assert_eq!(
            note_sha256(NOTE),
            "5c0d6428ba73cb7797ee07e5b2f87f277e992d2f6fe89b4b7099dbe2591498ba"
        );
    }

    #[test]
    fn builds_and_parses_back() {
        let text = build_review(&example(), DEFAULT_LAST_LINE);
        assert_eq!(text.split('\n').count(), 12);
        assert_eq!(
            parse_review(text.as_bytes(), DEFAULT_LAST_LINE).unwrap(),
            example()
        );
    }

    #[test]
    fn solana_spellings() {
        let mut review = example();
        review.network = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp".parse().unwrap();
        review.payment = bs58::encode([7u8; 64]).into_string();
        review.payer = bs58::encode([1u8; 32]).into_string();
        review.pay_to = bs58::encode([2u8; 32]).into_string();
        review.asset = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v".to_string();
        let text = build_review(&review, DEFAULT_LAST_LINE);
        assert_eq!(parse_review(text.as_bytes(), DEFAULT_LAST_LINE).unwrap(), review);
        let bad = text.replace(&review.payer, &format!("0x{}", "11".repeat(20)));
        assert_eq!(
            parse_review(bad.as_bytes(), DEFAULT_LAST_LINE)
                .unwrap_err()
                .code(),
            "bad_payer"
        );
    }

    /// Every byte rule, broken one at a time, refused with its own code.
    #[test]
    fn each_byte_rule_has_its_code() {
        let good = build_review(&example(), DEFAULT_LAST_LINE);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                [&[0xEF, 0xBB, 0xBF][..], good.as_bytes()].concat(),
                "byte_order_mark",
            ),
            ([good.as_bytes(), &[0xFF]].concat(), "not_utf8"),
            (good.replace('\n', "\r\n").into_bytes(), "carriage_return"),
            (format!("{good}\n").into_bytes(), "trailing_newline"),
            (good.replacen('\n', "\n\n", 1).into_bytes(), "line_count"),
            (
                good.replace(FIRST_LINE, "x402 review v2").into_bytes(),
                "first_line",
            ),
            (
                good.replace(DEFAULT_LAST_LINE, "Sign here.").into_bytes(),
                "last_line",
            ),
            (good.replace("stars: 5", "stars:5").into_bytes(), "line_shape"),
            (good.replace("stars: 5", "stars:  5").into_bytes(), "line_shape"),
            (good.replace("stars: 5", "stars: 5\t").into_bytes(), "line_shape"),
            (
                {
                    let mut lines: Vec<String> = good.split('\n').map(str::to_string).collect();
                    lines.swap(6, 7);
                    lines.join("\n").into_bytes()
                },
                "key_order",
            ),
            (
                good.replace("reviews.example", "https://reviews.example")
                    .into_bytes(),
                "bad_provider",
            ),
            (
                good.replace("reviews.example", "Reviews.example").into_bytes(),
                "bad_provider",
            ),
            (
                good.replace("reviews.example", "reviews.example:443")
                    .into_bytes(),
                "bad_provider",
            ),
            (good.replace("eip155:8453", "base").into_bytes(), "bad_network"),
            (
                good.replace(&"ab".repeat(32), &"AB".repeat(32)).into_bytes(),
                "bad_payment",
            ),
            (good.replace("0x12455b6a", "0x12455B6A").into_bytes(), "bad_payer"),
            (
                good.replace(&"cd".repeat(20), &"cd".repeat(19)).into_bytes(),
                "bad_pay_to",
            ),
            (
                good.replace("amount: 10000", "amount: 010000").into_bytes(),
                "bad_amount",
            ),
            (
                good.replace("amount: 10000", "amount: 0.01").into_bytes(),
                "bad_amount",
            ),
            (
                good.replace("amount: 10000", "amount: +10000").into_bytes(),
                "bad_amount",
            ),
            (good.replace("0x833589", "833589").into_bytes(), "bad_asset"),
            (good.replace("stars: 5", "stars: 6").into_bytes(), "bad_stars"),
            (good.replace("stars: 5", "stars: 0").into_bytes(), "bad_stars"),
            (
                good.replace("5c0d6428", "5C0D6428").into_bytes(),
                "bad_note_sha256",
            ),
            (
                good.replace("2026-10-02T12:00:00Z", "2026-10-02T12:00:00.5Z")
                    .into_bytes(),
                "bad_issued_at",
            ),
            (
                good.replace("2026-10-02T12:00:00Z", "2026-10-02T12:00:00+00:00")
                    .into_bytes(),
                "bad_issued_at",
            ),
            (
                good.replace("2026-10-02T12:00:00Z", "2026-02-30T12:00:00Z")
                    .into_bytes(),
                "bad_issued_at",
            ),
        ];
        for (bytes, code) in cases {
            let error = parse_review(&bytes, DEFAULT_LAST_LINE).unwrap_err();
            assert_eq!(error.code(), code, "{}: {error}", String::from_utf8_lossy(&bytes));
        }
    }

    #[test]
    fn any_built_message_parses_back_to_its_fields() {
        // A deterministic sweep over field values (a property test without a framework).
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..500 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut review = example();
            review.amount = U256::from(seed >> (seed % 64));
            review.stars = 1 + (seed % 5) as u8;
            review.payment = format!("0x{:064x}", seed);
            review.pay_to = format!("0x{:040x}", seed as u128 * 3);
            review.note_sha256 = note_sha256(&seed.to_string());
            review.issued_at = format!(
                "20{:02}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
                seed % 100,
                1 + seed % 12,
                1 + seed % 28,
                seed % 24,
                seed % 60,
                (seed >> 8) % 60
            );
            review.provider = format!("r{}.example", seed % 1000);
            let text = build_review(&review, "custom last line.");
            assert_eq!(
                parse_review(text.as_bytes(), "custom last line.").unwrap(),
                review,
                "{text}"
            );
        }
    }

    #[test]
    fn freshness_bounds_issued_at_both_ways() {
        let review = example();
        let at = issued_at_unix(&review.issued_at).unwrap();
        assert_eq!(issued_at_of(at).as_deref(), Some(review.issued_at.as_str()));
        let policy = Freshness::default();
        assert_eq!(policy.check(&review, at), Ok(()));
        assert_eq!(policy.check(&review, at + 24 * 3600), Ok(()));
        assert!(matches!(
            policy.check(&review, at + 24 * 3600 + 1),
            Err(Staleness::TooOld { age_secs: 86_401, .. })
        ));
        assert_eq!(policy.check(&review, at - 300), Ok(()));
        assert!(matches!(
            policy.check(&review, at - 301),
            Err(Staleness::InFuture { ahead_secs: 301, .. })
        ));
    }
}

/// Properties over generated messages: whatever paywatch builds from valid fields parses
/// back to the same fields, and whatever it accepts is spelled exactly as it would build it
/// (one text per review, so a signature covers one meaning).
#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    fn lower_hex(bytes: &[u8]) -> String {
        format!("0x{}", alloy_primitives::hex::encode(bytes))
    }

    fn host() -> impl Strategy<Value = String> {
        "[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?){0,3}"
    }

    fn issued_at() -> impl Strategy<Value = String> {
        (1970u16..=2199, 1u8..=12, 1u8..=28, 0u8..24, 0u8..60, 0u8..60)
            .prop_map(|(y, mo, d, h, mi, s)| format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"))
    }

    /// (network, payment, payer, pay_to, asset) spelled for an EVM chain or a Solana cluster.
    fn chain_fields() -> impl Strategy<Value = (NetworkId, String, String, String, String)> {
        let evm = (
            1u64..=u64::MAX,
            any::<[u8; 32]>(),
            any::<[u8; 20]>(),
            any::<[u8; 20]>(),
            any::<[u8; 20]>(),
        )
            .prop_map(|(chain, payment, payer, pay_to, asset)| {
                (
                    format!("eip155:{chain}").parse().unwrap(),
                    lower_hex(&payment),
                    lower_hex(&payer),
                    lower_hex(&pay_to),
                    lower_hex(&asset),
                )
            });
        let base58 = |bytes: &[u8]| bs58::encode(bytes).into_string();
        let solana = (
            "[1-9A-HJ-NP-Za-km-z]{32}",
            prop::collection::vec(any::<u8>(), 64),
            any::<[u8; 32]>(),
            any::<[u8; 32]>(),
            any::<[u8; 32]>(),
        )
            .prop_map(move |(reference, payment, payer, pay_to, asset)| {
                (
                    format!("solana:{reference}").parse().unwrap(),
                    base58(&payment),
                    base58(&payer),
                    base58(&pay_to),
                    base58(&asset),
                )
            });
        prop_oneof![evm, solana]
    }

    fn review() -> impl Strategy<Value = ReviewMessage> {
        (
            host(),
            chain_fields(),
            any::<[u8; 32]>(),
            1u8..=5,
            any::<[u8; 32]>(),
            issued_at(),
        )
            .prop_map(
                |(provider, (network, payment, payer, pay_to, asset), amount, stars, note, issued_at)| {
                    ReviewMessage {
                        provider,
                        network,
                        payment,
                        payer,
                        pay_to,
                        amount: U256::from_be_bytes(amount),
                        asset,
                        stars,
                        note_sha256: alloy_primitives::hex::encode(note),
                        issued_at,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn a_built_message_parses_back_to_its_fields(review in review()) {
            let text = build_review(&review, DEFAULT_LAST_LINE);
            prop_assert_eq!(parse_review(text.as_bytes(), DEFAULT_LAST_LINE), Ok(review));
        }

        #[test]
        fn an_accepted_message_is_spelled_as_it_would_be_built(
            review in review(),
            position in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let mut bytes = build_review(&review, DEFAULT_LAST_LINE).into_bytes();
            let at = position.index(bytes.len());
            bytes[at] = byte;
            if let Ok(parsed) = parse_review(&bytes, DEFAULT_LAST_LINE) {
                prop_assert_eq!(build_review(&parsed, DEFAULT_LAST_LINE).into_bytes(), bytes);
            }
        }
    }
}
