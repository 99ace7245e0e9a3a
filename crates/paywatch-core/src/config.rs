//! `chains.toml`: which networks to watch, through which RPCs, which tokens, and when a
//! block is final. Parsing is pure: the caller supplies the text, the file name for error
//! messages and a way to read environment variables.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use alloy_primitives::Address;
use serde::Deserialize;
use url::Url;

use crate::ids::{ChainAddress, parse_evm_address};
use crate::method::{
    AUTH_CAPTURE_ESCROW_V1_0, AUTH_CAPTURE_ESCROW_V1_1, DELEGATION_MANAGER, EXACT_PERMIT2_PROXY, PERMIT2,
    PaymentMethod, UPTO_PERMIT2_PROXY,
};
use crate::network::{Namespace, NetworkId};
use crate::review::Freshness;
use crate::state::{EventKind, FinalityRule};
use crate::vocabulary::spellings;

/// A Solana commitment level paywatch reads at, as `chains.toml` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::Display, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum Commitment {
    /// A supermajority of the cluster has voted on the block.
    Confirmed,
    /// The block is rooted: 31 or more confirmed blocks are built on it.
    Finalized,
}

/// When the verifier (`verify_rpc_urls`) checks what the primary provider answered, as
/// `chains.toml` spells it (`verification`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, strum::Display, strum::EnumString, serde::Serialize)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum Verification {
    /// Before a range commits: each range is read from both, and only what they agree on
    /// (or what receipts settle) is stored.
    #[default]
    Inline,
    /// After: ranges commit as the primary answers them, and the scheduled audit
    /// (`audit_interval_secs`) cross-checks them with the verifier later. A payment is
    /// `verified: false` until an audit has covered its block, and stays so when an audit
    /// found a difference about it.
    Lagging,
}

/// Which transfers a network keeps besides those that moved a payment's money and those
/// that can refund one, as `chains.toml` spells it (`keep_transfers`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, strum::Display, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum KeepTransfers {
    /// Nothing else: the store grows with payments, not with the token's traffic.
    #[default]
    Refunds,
    /// Also every transfer into or out of the `pay_to` wallets, for a seller who
    /// reconciles all the money its wallets moved; never pruned.
    PayTo,
}

/// Ranges of final blocks an EVM worker reads at once during a backfill, unless
/// `chains.toml` sets `ranges_in_flight`.
pub const RANGES_IN_FLIGHT: usize = 8;

/// The largest `eth_getLogs` answer an EVM worker reads, in KiB, unless `chains.toml` sets
/// `max_logs_answer_kib`: 16 MiB, about 24,000 logs, a little above what the density rule
/// asks one range to hold; a range whose blocks suddenly hold far more is read in halves
/// instead of whole, so memory stays bounded whatever the chain's density.
pub const MAX_LOGS_ANSWER_KIB: usize = 16 * 1024;

/// A configuration error: which file, which key, what is wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {key}: {message}")]
pub struct ConfigError {
    /// The file being read.
    pub file: String,
    /// The key path, e.g. `networks."eip155:8453".tokens[0].address`.
    pub key: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// Where a worker starts reading a chain when it has no cursor yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartBlock {
    /// A fixed block number, e.g. the token's deployment block.
    Number(u64),
    /// The chain head at first start: only payments from now on.
    Latest,
}

impl StartBlock {
    /// The block number, when one is configured (`None` for `latest`).
    pub fn number(self) -> Option<u64> {
        match self {
            Self::Number(n) => Some(n),
            Self::Latest => None,
        }
    }
}

/// One token to watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenConfig {
    /// Contract address or Solana mint.
    pub address: ChainAddress,
    /// Display symbol, e.g. `USDC`.
    pub symbol: String,
    /// Decimals of the smallest unit.
    pub decimals: u8,
    /// Overrides the network's start block for this token.
    pub start_block: StartBlock,
    /// EVM only: the EIP-712 domain the token's authorizations are signed in, when
    /// configured; checked against the token's `DOMAIN_SEPARATOR()` at start.
    pub eip712: Option<Eip712Name>,
}

/// The `name` and `version` of a token's EIP-712 domain (the rest of the domain is the
/// chain id and the token's address). Payers sign EIP-3009 authorizations in it; x402
/// payment requirements carry it as `extra.name` and `extra.version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eip712Name {
    /// The domain's `name`, e.g. `USD Coin`.
    pub name: String,
    /// The domain's `version`, e.g. `2`.
    pub version: String,
}

/// Blocks (slots) behind the head past which `status` calls a network `lagging`, unless
/// `lagging_blocks` says otherwise.
pub const DEFAULT_LAGGING_BLOCKS: u64 = 100;

/// One network to watch. Its `Debug` shows each RPC endpoint's scheme and host only: an
/// RPC URL often carries an API key in its path or query.
#[derive(Clone, PartialEq, Eq)]
pub struct NetworkConfig {
    /// CAIP-2 id.
    pub id: NetworkId,
    /// Optional short name usable wherever a network is named.
    pub alias: Option<String>,
    /// RPC endpoints, tried in order; `ws://`/`wss://` URLs also wake the worker on new heads.
    pub rpc_urls: Vec<Url>,
    /// EVM only: an independent provider's endpoints (tried in order) that every range read
    /// from `rpc_urls` is cross-checked with; empty: no cross-check.
    pub verify_rpc_urls: Vec<Url>,
    /// When the verifier checks the primary's answers: before they commit (`inline`, the
    /// default) or after, by the scheduled audit (`lagging`).
    pub verification: Verification,
    /// EVM only: read again, from their receipts, the blocks for which `eth_getLogs`
    /// returned nothing although their header's bloom may hold a wanted log.
    pub bloom_check: bool,
    /// Tokens whose logs are read (EVM) or mints whose transfers are read (Solana).
    pub tokens: Vec<TokenConfig>,
    /// The sellers' wallets. Solana: the token account owners whose payments are watched
    /// (required unless `facilitators` are). EVM (optional): the node is asked only for
    /// transfers into or out of these wallets, so payments to other sellers are not seen.
    pub pay_to: Vec<ChainAddress>,
    /// Whether every transfer into or out of the `pay_to` wallets is kept too.
    pub keep_transfers: KeepTransfers,
    /// x402 facilitators. Solana: fee payers; every transfer of a watched mint in a
    /// transaction whose fee one of them paid is a payment, whoever the seller. EVM: the
    /// senders of settlement transactions; a payment whose transaction one of them sent
    /// carries it as its `facilitator` (each payment transaction's sender is then read).
    pub facilitators: Vec<String>,
    /// EVM only: the x402 Permit2 proxies whose settlements are payments (the canonical
    /// exact and upto proxies unless `chains.toml` lists others).
    pub permit2_proxies: Vec<ProxyConfig>,
    /// EVM only: Permit2, whose `nonceBitmap` answers authorization lookups (the canonical
    /// address unless `chains.toml` names another); `None` on Solana.
    pub permit2: Option<Address>,
    /// EVM only: the `AuthCaptureEscrow` contracts whose escrowed payments are indexed
    /// (the x402 SDK's v1.0 and v1.1 deployments unless `chains.toml` lists others).
    pub escrows: Vec<Address>,
    /// EVM only: the ERC-7710 delegation managers whose redemptions are payments
    /// (MetaMask's `DelegationManager` unless `chains.toml` lists others).
    pub delegation_managers: Vec<Address>,
    /// When a block counts as final.
    pub finality: FinalityRule,
    /// Solana only: the commitment transactions are listed and read at (`pending` until
    /// the finality rule's); `confirmed` unless `chains.toml` says `finalized`.
    pub commitment: Commitment,
    /// Most blocks asked for in one `eth_getLogs`.
    pub max_block_range: u64,
    /// EVM only: most ranges of final blocks read at once during a backfill (committed in
    /// chain order); 1 reads one range at a time.
    pub ranges_in_flight: usize,
    /// EVM only: the largest `eth_getLogs` answer read over HTTP, in KiB; a larger one is
    /// refused as too large and its range read in halves.
    pub max_logs_answer_kib: usize,
    /// Pause between polls once caught up with the head.
    pub poll_interval: Duration,
    /// Per-request RPC timeout.
    pub rpc_timeout: Duration,
    /// How many blocks (slots) behind the head the worker may read before `status` calls
    /// the network `lagging` (`lagging_blocks`).
    pub lagging_blocks: u64,
    /// How long after a payment a plain transfer back may be matched to it as a refund.
    pub refund_window: Duration,
    /// EVM only: how often `paywatch run` audits the final blocks committed since its last
    /// scheduled audit (`audit_interval_secs`); `None`: no scheduled audits.
    pub audit_interval: Option<Duration>,
}

impl NetworkConfig {
    /// How long its worker may go without completing a step before it counts as stalled.
    pub fn stall_after(&self) -> Duration {
        crate::health::stall_after(self.poll_interval, self.rpc_timeout)
    }

    /// Whether each range is cross-checked with the verifier before it commits: a
    /// verifier is configured and `verification` is `inline`.
    pub fn verifies_inline(&self) -> bool {
        !self.verify_rpc_urls.is_empty() && self.verification == Verification::Inline
    }

    /// The refund window in whole seconds, as the store's refund rules take it (a window
    /// too long for an `i64` counts as endless).
    pub fn refund_window_secs(&self) -> i64 {
        i64::try_from(self.refund_window.as_secs()).unwrap_or(i64::MAX)
    }

    /// The wallets all of whose transfers are kept (`keep_transfers = "pay_to"`), in the
    /// store's spelling; empty otherwise.
    pub fn kept_wallets(&self) -> Vec<String> {
        match self.keep_transfers {
            KeepTransfers::Refunds => Vec::new(),
            KeepTransfers::PayTo => self.pay_to.iter().map(ToString::to_string).collect(),
        }
    }
}

impl std::fmt::Debug for NetworkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |urls: &[Url]| -> Vec<String> {
            urls.iter()
                .map(|url| format!("{}://{}/…", url.scheme(), url.host_str().unwrap_or("?")))
                .collect()
        };
        f.debug_struct("NetworkConfig")
            .field("id", &self.id)
            .field("alias", &self.alias)
            .field("rpc_urls", &redacted(&self.rpc_urls))
            .field("verify_rpc_urls", &redacted(&self.verify_rpc_urls))
            .field("verification", &self.verification)
            .field("bloom_check", &self.bloom_check)
            .field("tokens", &self.tokens)
            .field("pay_to", &self.pay_to)
            .field("keep_transfers", &self.keep_transfers)
            .field("facilitators", &self.facilitators)
            .field("permit2_proxies", &self.permit2_proxies)
            .field("permit2", &self.permit2)
            .field("escrows", &self.escrows)
            .field("delegation_managers", &self.delegation_managers)
            .field("finality", &self.finality)
            .field("commitment", &self.commitment)
            .field("max_block_range", &self.max_block_range)
            .field("ranges_in_flight", &self.ranges_in_flight)
            .field("max_logs_answer_kib", &self.max_logs_answer_kib)
            .field("poll_interval", &self.poll_interval)
            .field("lagging_blocks", &self.lagging_blocks)
            .field("rpc_timeout", &self.rpc_timeout)
            .field("refund_window", &self.refund_window)
            .field("audit_interval", &self.audit_interval)
            .finish()
    }
}

/// A watched x402 Permit2 proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyConfig {
    /// Its address.
    pub address: Address,
    /// `Permit2` for an exact proxy, `Upto` for an upto proxy.
    pub method: PaymentMethod,
}

/// The whole `chains.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainsConfig {
    /// Enabled networks, in file order of their ids.
    pub networks: Vec<NetworkConfig>,
    /// The fixed last line of review v1 messages (`[review] last_line`).
    pub review_last_line: String,
    /// How old or how far ahead a review's `issued_at` may be (`[review] max_age_secs`,
    /// `max_future_secs`).
    pub review_freshness: Freshness,
    /// Who may call the HTTP API, and how often (`[api]`).
    pub api: ApiAccess,
    /// Where payment state changes are pushed (`[[webhooks]]`).
    pub webhooks: Vec<WebhookConfig>,
}

/// A secret read from the environment (a bearer token, an HMAC key): kept out of `Debug`
/// output, so a logged or printed configuration never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that uses it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret(redacted, {} bytes)", self.0.len())
    }
}

/// A webhook sink: every payment state change POSTed to `url`, signed with HMAC-SHA256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// Its name: the key of its delivery cursor and dead letters.
    pub name: String,
    /// Where events are POSTed.
    pub url: Url,
    /// The HMAC-SHA256 key (read from the environment variable the file names).
    pub secret: Secret,
    /// Only this network's events; `None`: every network's.
    pub network: Option<NetworkId>,
    /// Attempts per event before it goes to the dead-letter table.
    pub max_attempts: u32,
    /// The kinds of events it receives (`events = [...]`; default `payment_state` only,
    /// so a refund daemon never mistakes a review's published state for a payment change).
    pub events: Vec<EventKind>,
}

/// Access to the HTTP API: bearer tokens per client and a per-client rate limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiAccess {
    /// Client name → its bearer token (read from the environment variable the file names;
    /// tokens never sit in the file). Empty: the API is open.
    pub clients: BTreeMap<String, Secret>,
    /// Requests per second each client may make (the open API counts everyone as one
    /// client); `None`: no limit.
    pub requests_per_second: Option<u32>,
}

impl ChainsConfig {
    /// Finds a network by CAIP-2 id, configured alias or built-in alias.
    pub fn network(&self, name: &str) -> Option<&NetworkConfig> {
        if let Some(found) = self.networks.iter().find(|n| n.alias.as_deref() == Some(name)) {
            return Some(found);
        }
        let id = NetworkId::parse_or_alias(name).ok()?;
        self.networks.iter().find(|n| n.id == id)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    networks: BTreeMap<String, RawNetwork>,
    review: Option<RawReview>,
    api: Option<RawApi>,
    #[serde(default)]
    webhooks: Vec<RawWebhook>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebhook {
    name: String,
    url: String,
    secret_env: String,
    network: Option<String>,
    max_attempts: Option<u32>,
    events: Option<Vec<EventKind>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApi {
    /// Client name → name of the environment variable holding its token.
    #[serde(default)]
    token_env: BTreeMap<String, String>,
    requests_per_second: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReview {
    last_line: Option<String>,
    max_age_secs: Option<u64>,
    max_future_secs: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    alias: Option<String>,
    #[serde(default = "default_true")]
    enabled: bool,
    #[serde(default)]
    rpc_urls: Vec<String>,
    rpc_url_env: Option<String>,
    #[serde(default)]
    verify_rpc_urls: Vec<String>,
    verify_rpc_url_env: Option<String>,
    verification: Option<String>,
    bloom_check: Option<bool>,
    #[serde(default)]
    tokens: Vec<RawToken>,
    #[serde(default)]
    pay_to: Vec<String>,
    keep_transfers: Option<String>,
    #[serde(default)]
    facilitators: Vec<String>,
    exact_permit2_proxies: Option<Vec<String>>,
    upto_permit2_proxies: Option<Vec<String>>,
    permit2: Option<String>,
    auth_capture_escrows: Option<Vec<String>>,
    delegation_managers: Option<Vec<String>>,
    start_block: Option<toml::Value>,
    finality: Option<String>,
    confirmations: Option<u64>,
    commitment: Option<String>,
    max_block_range: Option<u64>,
    ranges_in_flight: Option<usize>,
    max_logs_answer_kib: Option<usize>,
    poll_interval_ms: Option<u64>,
    rpc_timeout_ms: Option<u64>,
    lagging_blocks: Option<u64>,
    refund_window_secs: Option<u64>,
    audit_interval_secs: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToken {
    address: String,
    symbol: Option<String>,
    decimals: Option<u8>,
    start_block: Option<toml::Value>,
    eip712_name: Option<String>,
    eip712_version: Option<String>,
}

fn default_true() -> bool {
    true
}

/// What is wrong with one key: the key path and what to fix.
type Invalid = (String, String);

fn invalid(key: impl Into<String>, message: impl Into<String>) -> Invalid {
    (key.into(), message.into())
}

/// Parses and validates `chains.toml` text. `env` reads environment variables (for
/// `rpc_url_env` overrides, API tokens and webhook keys).
pub fn parse_chains(
    text: &str,
    file: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<ChainsConfig, ConfigError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| ConfigError {
        file: file.to_string(),
        key: e
            .span()
            .map(|span| {
                let before = &text[..span.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!("line {line}, column {column}")
            })
            .unwrap_or_else(|| "(document)".to_string()),
        message: e.message().to_string(),
    })?;
    let parsed = (|| {
        let mut networks = Vec::new();
        let mut aliases = HashSet::new();
        for (name, net) in raw.networks {
            if let Some(network) = parse_network(&name, net, &env, &mut aliases)? {
                networks.push(network);
            }
        }
        let (review_last_line, review_freshness) = parse_review(raw.review)?;
        Ok(ChainsConfig {
            networks,
            review_last_line,
            review_freshness,
            api: parse_api(raw.api, &env)?,
            webhooks: parse_webhooks(raw.webhooks, &env)?,
        })
    })();
    parsed.map_err(|(key, message)| ConfigError {
        file: file.to_string(),
        key,
        message,
    })
}

/// One `[networks."<id>"]` table; `None` when it is disabled.
fn parse_network(
    name: &str,
    net: RawNetwork,
    env: &impl Fn(&str) -> Option<String>,
    aliases: &mut HashSet<String>,
) -> Result<Option<NetworkConfig>, Invalid> {
    let key = format!("networks.\"{name}\"");
    let id: NetworkId = name
        .parse()
        .map_err(|e| invalid(&key, format!("{e}; name each network table by its CAIP-2 id")))?;
    if !net.enabled {
        return Ok(None);
    }
    let solana = id.namespace() == Namespace::Solana;
    if let Some(alias) = &net.alias {
        if alias.contains(':') || alias.is_empty() {
            return Err(invalid(
                format!("{key}.alias"),
                format!("`{alias}` is not a usable alias: use a short name without `:`, e.g. `base`"),
            ));
        }
        if !aliases.insert(alias.clone()) {
            return Err(invalid(
                format!("{key}.alias"),
                format!("alias `{alias}` is used by two networks; give each its own"),
            ));
        }
    }
    let rpc_urls = urls_of(&key, "rpc_urls", &net.rpc_urls, net.rpc_url_env.as_deref(), env)?;
    if rpc_urls.is_empty() {
        return Err(invalid(
            format!("{key}.rpc_urls"),
            "no RPC URL: list at least one in `rpc_urls` or set the variable named by `rpc_url_env`",
        ));
    }
    let verify_rpc_urls = urls_of(
        &key,
        "verify_rpc_urls",
        &net.verify_rpc_urls,
        net.verify_rpc_url_env.as_deref(),
        env,
    )?;
    let bloom_check = net.bloom_check.unwrap_or(false);
    if solana && bloom_check {
        return Err(invalid(
            format!("{key}.bloom_check"),
            "the bloom check is for EVM networks only (a Solana worker reads each transaction whole); remove it",
        ));
    }
    if solana && !verify_rpc_urls.is_empty() {
        return Err(invalid(
            format!("{key}.verify_rpc_urls"),
            "cross-checked reads are built for EVM networks only (a Solana worker reads each transaction whole); remove it",
        ));
    }
    let tokens = tokens_of(&key, name, &id, &net)?;
    let pay_to = pay_to_of(&key, &id, &net.pay_to)?;
    let keep_transfers = keep_transfers_of(&key, net.keep_transfers.as_deref(), pay_to.is_empty())?;
    let facilitators = facilitators_of(&key, &id, &net.facilitators)?;
    if solana && pay_to.is_empty() && facilitators.is_empty() {
        return Err(invalid(
            format!("{key}.pay_to"),
            "no wallet to watch: list the pay_to wallets (token account owners) whose payments paywatch indexes, e.g. `pay_to = [\"9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin\"]`, or the fee payers of the x402 facilitators whose settlements it indexes (`facilitators = [...]`)",
        ));
    }
    let permit2_proxies = permit2_proxies(&key, &net, solana)?;
    let permit2 = permit2_of(&key, &net, solana)?;
    let escrows = evm_contracts(
        &key,
        ("auth_capture_escrows", "escrow"),
        &net.auth_capture_escrows,
        solana,
        &[AUTH_CAPTURE_ESCROW_V1_0, AUTH_CAPTURE_ESCROW_V1_1],
    )?;
    let delegation_managers = evm_contracts(
        &key,
        ("delegation_managers", "delegation manager"),
        &net.delegation_managers,
        solana,
        &[DELEGATION_MANAGER],
    )?;
    let finality = finality_of(&key, &net, solana)?;
    let commitment = commitment_of(&key, &net, solana, finality)?;
    let max_block_range = net.max_block_range.unwrap_or(2_000);
    if max_block_range == 0 {
        return Err(invalid(format!("{key}.max_block_range"), "must be at least 1"));
    }
    let ranges_in_flight = ranges_in_flight_of(&key, net.ranges_in_flight, solana)?;
    let max_logs_answer_kib = max_logs_answer_kib_of(&key, net.max_logs_answer_kib, solana)?;
    let audit_interval = audit_interval_of(&key, net.audit_interval_secs, solana)?;
    let verification = verification_of(
        &key,
        net.verification.as_deref(),
        !verify_rpc_urls.is_empty(),
        audit_interval.is_some(),
    )?;
    let poll_interval_ms = net.poll_interval_ms.unwrap_or(2_000);
    let rpc_timeout_ms = net.rpc_timeout_ms.unwrap_or(20_000);
    if poll_interval_ms == 0 || rpc_timeout_ms == 0 {
        return Err(invalid(
            key,
            "`poll_interval_ms` and `rpc_timeout_ms` must be positive",
        ));
    }
    Ok(Some(NetworkConfig {
        id,
        alias: net.alias,
        rpc_urls,
        verify_rpc_urls,
        verification,
        bloom_check,
        tokens,
        pay_to,
        keep_transfers,
        facilitators,
        permit2_proxies,
        permit2,
        escrows,
        delegation_managers,
        finality,
        commitment,
        max_block_range,
        ranges_in_flight,
        max_logs_answer_kib,
        poll_interval: Duration::from_millis(poll_interval_ms),
        rpc_timeout: Duration::from_millis(rpc_timeout_ms),
        lagging_blocks: net.lagging_blocks.unwrap_or(DEFAULT_LAGGING_BLOCKS),
        refund_window: Duration::from_secs(net.refund_window_secs.unwrap_or(30 * 24 * 3600)),
        audit_interval,
    }))
}

/// A list of RPC endpoints (`field`, e.g. `rpc_urls`): the comma-separated list in the
/// environment variable `env_var` names when it is set, else `texts`.
fn urls_of(
    key: &str,
    field: &str,
    texts: &[String],
    env_var: Option<&str>,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Vec<Url>, Invalid> {
    let mut url_texts = texts.to_vec();
    if let Some(var) = env_var
        && let Some(value) = env(var).filter(|v| !v.trim().is_empty())
    {
        url_texts = value.split(',').map(|s| s.trim().to_string()).collect();
    }
    let mut urls = Vec::new();
    for (i, text) in url_texts.iter().enumerate() {
        let url = Url::parse(text).map_err(|e| {
            invalid(
                format!("{key}.{field}[{i}]"),
                format!("`{text}` is not a URL ({e}); expected e.g. `https://mainnet.base.org`"),
            )
        })?;
        if !matches!(url.scheme(), "http" | "https" | "ws" | "wss") {
            return Err(invalid(
                format!("{key}.{field}[{i}]"),
                format!(
                    "`{text}` has scheme `{}`; use http, https, ws or wss",
                    url.scheme()
                ),
            ));
        }
        urls.push(url);
    }
    Ok(urls)
}

/// A network's `[[tokens]]`, each listed once, with its start block (the network's when
/// it names none).
fn tokens_of(key: &str, name: &str, id: &NetworkId, net: &RawNetwork) -> Result<Vec<TokenConfig>, Invalid> {
    let network_start = parse_start_block(net.start_block.as_ref())
        .map_err(|m| invalid(format!("{key}.start_block"), m))?
        .unwrap_or(StartBlock::Number(0));
    if net.tokens.is_empty() {
        return Err(invalid(
            format!("{key}.tokens"),
            format!(
                "no tokens to watch: add a [[networks.\"{name}\".tokens]] table with an `address`, or set `enabled = false`"
            ),
        ));
    }
    let mut tokens: Vec<TokenConfig> = Vec::new();
    for (i, token) in net.tokens.iter().enumerate() {
        let tkey = format!("{key}.tokens[{i}]");
        let address = ChainAddress::parse(id.namespace(), &token.address)
            .map_err(|e| invalid(format!("{tkey}.address"), e.to_string()))?;
        if tokens.iter().any(|t| t.address == address) {
            return Err(invalid(
                format!("{tkey}.address"),
                format!("token {address} is listed twice"),
            ));
        }
        let start_block = parse_start_block(token.start_block.as_ref())
            .map_err(|m| invalid(format!("{tkey}.start_block"), m))?
            .unwrap_or(network_start);
        let decimals = token.decimals.ok_or_else(|| {
            invalid(
                format!("{tkey}.decimals"),
                "missing: set the token's decimals (6 for USDC) so amounts can be shown in whole units",
            )
        })?;
        let eip712 = eip712_of(&tkey, id, token)?;
        tokens.push(TokenConfig {
            address,
            symbol: token.symbol.clone().unwrap_or_else(|| "TOKEN".to_string()),
            decimals,
            start_block,
            eip712,
        });
    }
    Ok(tokens)
}

/// A token's EIP-712 domain name and version: both or neither, EVM only.
fn eip712_of(tkey: &str, id: &NetworkId, token: &RawToken) -> Result<Option<Eip712Name>, Invalid> {
    match (&token.eip712_name, &token.eip712_version) {
        (None, None) => Ok(None),
        _ if id.namespace() != Namespace::Eip155 => Err(invalid(
            format!("{tkey}.eip712_name"),
            "EIP-712 domains apply to EVM tokens only (a Solana mint signs nothing); remove eip712_name and eip712_version",
        )),
        (Some(name), Some(version)) if !name.is_empty() && !version.is_empty() => Ok(Some(Eip712Name {
            name: name.clone(),
            version: version.clone(),
        })),
        (Some(name), Some(_)) => Err(invalid(
            format!(
                "{tkey}.{}",
                if name.is_empty() {
                    "eip712_name"
                } else {
                    "eip712_version"
                }
            ),
            "empty: set the token's EIP-712 domain name and version as its DOMAIN_SEPARATOR uses them (e.g. \"USD Coin\" and \"2\" for Circle's USDC), or remove both",
        )),
        (None, Some(_)) => Err(invalid(
            format!("{tkey}.eip712_name"),
            "missing: eip712_version is set, so set the domain's name too (e.g. \"USD Coin\"), or remove both",
        )),
        (Some(_), None) => Err(invalid(
            format!("{tkey}.eip712_version"),
            "missing: eip712_name is set, so set the domain's version too (e.g. \"2\"), or remove both",
        )),
    }
}

/// Permit2's address on an EVM network (the canonical one unless `permit2` names another);
/// `None` on Solana.
fn permit2_of(key: &str, net: &RawNetwork, solana: bool) -> Result<Option<Address>, Invalid> {
    match (&net.permit2, solana) {
        (Some(_), true) => Err(invalid(
            format!("{key}.permit2"),
            "`permit2` applies to EVM networks only (Solana has no Permit2); remove it",
        )),
        (None, true) => Ok(None),
        (None, false) => Ok(Some(PERMIT2)),
        (Some(text), false) => parse_evm_address(text)
            .map(Some)
            .map_err(|e| invalid(format!("{key}.permit2"), e.to_string())),
    }
}

/// Ranges read at once during a backfill, by default [`RANGES_IN_FLIGHT`]: at least 1, and
/// EVM only (a Solana worker already reads its transactions concurrently).
fn ranges_in_flight_of(key: &str, configured: Option<usize>, solana: bool) -> Result<usize, Invalid> {
    let field = format!("{key}.ranges_in_flight");
    match configured {
        Some(_) if solana => Err(invalid(
            field,
            "reading ranges ahead is for EVM networks only (a Solana worker reads its transactions concurrently already); remove it",
        )),
        Some(0) => Err(invalid(field, "must be at least 1 (1 reads one range at a time)")),
        Some(ranges) => Ok(ranges),
        None => Ok(RANGES_IN_FLIGHT),
    }
}

/// The largest `eth_getLogs` answer read, in KiB, by default [`MAX_LOGS_ANSWER_KIB`]: at
/// least 1, and EVM only.
fn max_logs_answer_kib_of(key: &str, configured: Option<usize>, solana: bool) -> Result<usize, Invalid> {
    let field = format!("{key}.max_logs_answer_kib");
    match configured {
        Some(_) if solana => Err(invalid(
            field,
            "bounds EVM `eth_getLogs` answers only (a Solana worker reads transactions one by one); remove it",
        )),
        Some(0) => Err(invalid(field, "must be at least 1 (KiB)")),
        Some(kib) => Ok(kib),
        None => Ok(MAX_LOGS_ANSWER_KIB),
    }
}

/// Which transfers are kept besides payments' and possible refunds' (`keep_transfers`):
/// `refunds` unless told; `pay_to` needs the `pay_to` wallets it keeps.
fn keep_transfers_of(
    key: &str,
    configured: Option<&str>,
    no_wallets: bool,
) -> Result<KeepTransfers, Invalid> {
    let field = format!("{key}.keep_transfers");
    let Some(text) = configured else {
        return Ok(KeepTransfers::Refunds);
    };
    let keep = text.parse::<KeepTransfers>().map_err(|_| {
        invalid(
            field.clone(),
            format!("unknown keep_transfers {text:?}: `refunds` (the default: payments' transfers and possible refunds) or `pay_to` (also every transfer into or out of the pay_to wallets)"),
        )
    })?;
    if keep == KeepTransfers::PayTo && no_wallets {
        return Err(invalid(
            field,
            "`pay_to` keeps the transfers of the pay_to wallets, and none is listed: list them in `pay_to`, or remove `keep_transfers`",
        ));
    }
    Ok(keep)
}

/// When the verifier checks the primary's answers (`verification`): `inline` unless told;
/// either needs a verifier, and `lagging` the scheduled audit that does the checking.
fn verification_of(
    key: &str,
    configured: Option<&str>,
    has_verifier: bool,
    audited: bool,
) -> Result<Verification, Invalid> {
    let field = format!("{key}.verification");
    let Some(text) = configured else {
        return Ok(Verification::Inline);
    };
    let verification = text.parse::<Verification>().map_err(|_| {
        invalid(
            field.clone(),
            format!("unknown verification {text:?}: `inline` (before a range commits) or `lagging` (after, by the scheduled audit)"),
        )
    })?;
    if !has_verifier {
        return Err(invalid(
            field,
            "there is no verifier to check with: list an independent provider in `verify_rpc_urls`, or remove `verification`",
        ));
    }
    if verification == Verification::Lagging && !audited {
        return Err(invalid(
            field,
            "`lagging` verification is done by the scheduled audit: set `audit_interval_secs` (e.g. 60), or use `inline`",
        ));
    }
    Ok(verification)
}

/// How often final blocks are audited (`audit_interval_secs`): positive, EVM only (an
/// audit reads block ranges again; a Solana worker reads each transaction whole).
fn audit_interval_of(key: &str, configured: Option<u64>, solana: bool) -> Result<Option<Duration>, Invalid> {
    let field = format!("{key}.audit_interval_secs");
    match configured {
        Some(_) if solana => Err(invalid(
            field,
            "scheduled audits are for EVM networks only (an audit reads block ranges again; a Solana worker reads each transaction whole); remove it",
        )),
        Some(0) => Err(invalid(
            field,
            "must be at least 1 second; remove it for no scheduled audits",
        )),
        Some(secs) => Ok(Some(Duration::from_secs(secs))),
        None => Ok(None),
    }
}

/// When a block of the network is final: on Solana the `finalized` commitment, or
/// `confirmed`; on EVM a number of confirmations (12 by default), or the node's
/// `finalized` or `safe` block.
fn finality_of(key: &str, net: &RawNetwork, solana: bool) -> Result<FinalityRule, Invalid> {
    let default_finality = if solana { "finalized" } else { "confirmations" };
    match (
        net.finality.as_deref().unwrap_or(default_finality),
        net.confirmations,
    ) {
        ("finalized", None) if solana => Ok(FinalityRule::Finalized),
        ("confirmed", None) if solana => Ok(FinalityRule::Confirmed),
        (other, _) if solana => Err(invalid(
            format!("{key}.finality"),
            format!(
                "`{other}`: a Solana payment is final at the `finalized` commitment (the default) or at `confirmed`; `confirmations` does not apply"
            ),
        )),
        ("confirmations", n) => Ok(FinalityRule::Confirmations(n.unwrap_or(12).max(1))),
        ("finalized", None) => Ok(FinalityRule::Finalized),
        ("safe", None) => Ok(FinalityRule::Safe),
        ("finalized" | "safe", Some(_)) => Err(invalid(
            format!("{key}.confirmations"),
            "`confirmations` only applies with `finality = \"confirmations\"`; remove one of them",
        )),
        (other, _) => Err(invalid(
            format!("{key}.finality"),
            format!("`{other}` is not a finality rule; use \"confirmations\", \"finalized\" or \"safe\""),
        )),
    }
}

/// Solana: the commitment transactions are listed and read at — `confirmed` (the default:
/// a payment is `pending` until the finality rule's commitment) or `finalized` (a payment
/// is read once final, and never `pending`); refused on EVM networks and with
/// `finality = "confirmed"` (a payment would be paid before it is read).
fn commitment_of(
    key: &str,
    net: &RawNetwork,
    solana: bool,
    finality: FinalityRule,
) -> Result<Commitment, Invalid> {
    let field = format!("{key}.commitment");
    let Some(commitment) = net.commitment.as_deref() else {
        return Ok(Commitment::Confirmed);
    };
    if !solana {
        return Err(invalid(
            field,
            "`commitment` is for Solana networks; on EVM `finality` says when a payment is paid",
        ));
    }
    match (commitment.parse::<Commitment>(), finality) {
        (Ok(Commitment::Finalized), FinalityRule::Confirmed) => Err(invalid(
            field,
            "`finalized` reads payments only once final, so `finality = \"confirmed\"` would never apply; use `commitment = \"confirmed\"` or remove `finality`",
        )),
        (Ok(commitment), _) => Ok(commitment),
        (Err(_), _) => Err(invalid(
            field,
            format!("`{commitment}` is not a commitment; use \"confirmed\" or \"finalized\""),
        )),
    }
}

/// `[review]`: the fixed last line of review messages and the freshness bounds.
fn parse_review(review: Option<RawReview>) -> Result<(String, Freshness), Invalid> {
    let review = review.unwrap_or(RawReview {
        last_line: None,
        max_age_secs: None,
        max_future_secs: None,
    });
    let defaults = Freshness::default();
    let freshness = Freshness {
        max_age_secs: review.max_age_secs.unwrap_or(defaults.max_age_secs),
        max_future_secs: review.max_future_secs.unwrap_or(defaults.max_future_secs),
    };
    let last_line = review
        .last_line
        .unwrap_or_else(|| crate::review::DEFAULT_LAST_LINE.to_string());
    if last_line.is_empty() || last_line.contains(['\n', '\r']) {
        return Err(invalid(
            "review.last_line",
            "must be one non-empty line, exactly as the review v1 spec fixes it",
        ));
    }
    Ok((last_line, freshness))
}

/// `[api]`: each client's bearer token (from the variable it names) and the rate limit.
fn parse_api(api: Option<RawApi>, env: &impl Fn(&str) -> Option<String>) -> Result<ApiAccess, Invalid> {
    let Some(api) = api else {
        return Ok(ApiAccess::default());
    };
    let mut clients = BTreeMap::new();
    for (client, var) in api.token_env {
        let token = env(&var).filter(|t| !t.trim().is_empty()).ok_or_else(|| {
            invalid(
                format!("api.token_env.{client}"),
                format!("the environment variable {var} is not set: export the client's token in it, or remove the client"),
            )
        })?;
        if token.len() < 16 {
            return Err(invalid(
                format!("api.token_env.{client}"),
                format!("the token in {var} is shorter than 16 characters: use a long random one"),
            ));
        }
        clients.insert(client, Secret::new(token));
    }
    if api.requests_per_second == Some(0) {
        return Err(invalid(
            "api.requests_per_second",
            "must be at least 1 (leave it out for no limit)",
        ));
    }
    Ok(ApiAccess {
        clients,
        requests_per_second: api.requests_per_second,
    })
}

/// `[[webhooks]]`: each sink with its URL, HMAC key (from the variable it names), network
/// filter and attempts.
fn parse_webhooks(
    hooks: Vec<RawWebhook>,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Vec<WebhookConfig>, Invalid> {
    let mut webhooks = Vec::new();
    let mut names = HashSet::new();
    for (i, hook) in hooks.into_iter().enumerate() {
        let key = format!("webhooks[{i}]");
        if hook.name.is_empty() || !names.insert(hook.name.clone()) {
            return Err(invalid(
                format!("{key}.name"),
                "give each webhook its own non-empty name (it keys the delivery cursor)",
            ));
        }
        let url = Url::parse(&hook.url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| {
                invalid(
                    format!("{key}.url"),
                    format!("`{}` is not an http(s) URL", hook.url),
                )
            })?;
        let secret = env(&hook.secret_env).filter(|s| s.len() >= 16).ok_or_else(|| {
            invalid(
                format!("{key}.secret_env"),
                format!(
                    "the environment variable {} must hold the HMAC key, at least 16 characters",
                    hook.secret_env
                ),
            )
        })?;
        let network = hook
            .network
            .map(|n| {
                NetworkId::parse_or_alias(&n).map_err(|e| {
                    invalid(
                        format!("{key}.network"),
                        format!("{e}; name a CAIP-2 id or alias"),
                    )
                })
            })
            .transpose()?;
        let max_attempts = hook.max_attempts.unwrap_or(8);
        if max_attempts == 0 {
            return Err(invalid(format!("{key}.max_attempts"), "must be at least 1"));
        }
        let events = hook.events.unwrap_or_else(|| vec![EventKind::PaymentState]);
        if events.is_empty() {
            return Err(invalid(
                format!("{key}.events"),
                format!("name at least one kind: {}", spellings::<EventKind>().join(", ")),
            ));
        }
        webhooks.push(WebhookConfig {
            name: hook.name,
            url,
            secret: Secret::new(secret),
            network,
            max_attempts,
            events,
        });
    }
    Ok(webhooks)
}

/// The Permit2 proxies of an EVM network: x402's canonical exact and upto proxies unless
/// `exact_permit2_proxies` / `upto_permit2_proxies` list others (an empty list watches
/// none); on error the key and what to fix.
fn permit2_proxies(key: &str, net: &RawNetwork, solana: bool) -> Result<Vec<ProxyConfig>, Invalid> {
    let mut proxies: Vec<ProxyConfig> = Vec::new();
    for (field, listed, canonical, method) in [
        (
            "exact_permit2_proxies",
            &net.exact_permit2_proxies,
            EXACT_PERMIT2_PROXY,
            PaymentMethod::Permit2,
        ),
        (
            "upto_permit2_proxies",
            &net.upto_permit2_proxies,
            UPTO_PERMIT2_PROXY,
            PaymentMethod::Upto,
        ),
    ] {
        if solana {
            if listed.is_some() {
                return Err((
                    format!("{key}.{field}"),
                    format!("`{field}` applies to EVM networks only (Solana has no Permit2); remove it"),
                ));
            }
            continue;
        }
        let Some(listed) = listed else {
            proxies.push(ProxyConfig {
                address: canonical,
                method,
            });
            continue;
        };
        for (i, text) in listed.iter().enumerate() {
            let item = format!("{key}.{field}[{i}]");
            let address = parse_evm_address(text).map_err(|e| (item.clone(), e.to_string()))?;
            if proxies.iter().any(|p| p.address == address) {
                return Err((item, format!("proxy {address} is listed twice")));
            }
            proxies.push(ProxyConfig { address, method });
        }
    }
    Ok(proxies)
}

/// A list of EVM contracts a network watches (`auth_capture_escrows`: the x402 SDK's
/// escrow deployments; `delegation_managers`: MetaMask's `DelegationManager`): `defaults`
/// unless `chains.toml` lists others (an empty list watches none); on error the key and
/// what to fix.
fn evm_contracts(
    key: &str,
    (name, what): (&str, &str),
    listed: &Option<Vec<String>>,
    solana: bool,
    defaults: &[Address],
) -> Result<Vec<Address>, Invalid> {
    let field = format!("{key}.{name}");
    match (listed, solana) {
        (Some(_), true) => Err(invalid(
            field,
            format!("`{name}` applies to EVM networks only; remove it"),
        )),
        (None, true) => Ok(Vec::new()),
        (None, false) => Ok(defaults.to_vec()),
        (Some(listed), false) => {
            let mut contracts = Vec::new();
            for (i, text) in listed.iter().enumerate() {
                let item = format!("{field}[{i}]");
                let address = parse_evm_address(text).map_err(|e| invalid(item.clone(), e.to_string()))?;
                if contracts.contains(&address) {
                    return Err(invalid(item, format!("{what} {address} is listed twice")));
                }
                contracts.push(address);
            }
            Ok(contracts)
        }
    }
}

/// A Solana-only list of base58 addresses (`pay_to`, `facilitators`), each listed once;
/// on error the key (`{key}.{field}[i]`) and what to fix.
/// The `pay_to` wallets, each once, in the network's spelling.
fn pay_to_of(key: &str, id: &NetworkId, values: &[String]) -> Result<Vec<ChainAddress>, Invalid> {
    let mut wallets: Vec<ChainAddress> = Vec::new();
    for (i, text) in values.iter().enumerate() {
        let item = format!("{key}.pay_to[{i}]");
        let wallet = ChainAddress::parse(id.namespace(), text).map_err(|e| (item.clone(), e.to_string()))?;
        if wallets.contains(&wallet) {
            return Err((item, format!("wallet {text} is listed twice")));
        }
        wallets.push(wallet);
    }
    Ok(wallets)
}

/// The facilitators' addresses (Solana fee payers, EVM senders), each once, spelled as
/// stored (EVM lowercase hex).
fn facilitators_of(key: &str, id: &NetworkId, values: &[String]) -> Result<Vec<String>, Invalid> {
    let mut addresses: Vec<String> = Vec::new();
    for (i, text) in values.iter().enumerate() {
        let item = format!("{key}.facilitators[{i}]");
        let address = ChainAddress::parse(id.namespace(), text)
            .map_err(|e| (item.clone(), e.to_string()))?
            .to_string();
        if addresses.contains(&address) {
            return Err((item, format!("facilitator {text} is listed twice")));
        }
        addresses.push(address);
    }
    Ok(addresses)
}

fn parse_start_block(value: Option<&toml::Value>) -> Result<Option<StartBlock>, String> {
    match value {
        None => Ok(None),
        Some(toml::Value::Integer(n)) if *n >= 0 => Ok(Some(StartBlock::Number(*n as u64))),
        Some(toml::Value::String(s)) if s == "latest" => Ok(Some(StartBlock::Latest)),
        Some(other) => Err(format!(
            "`{other}` is not a start block; use a block number (e.g. 25000000) or \"latest\""
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
[networks."eip155:8453"]
alias = "base"
rpc_urls = ["https://mainnet.base.org"]
rpc_url_env = "PAYWATCH_RPC_BASE"
start_block = "latest"
confirmations = 10

[[networks."eip155:8453".tokens]]
address = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
symbol = "USDC"
decimals = 6
start_block = 2797221
"#;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn parses_a_network() {
        let cfg = parse_chains(BASE, "chains.toml", no_env).unwrap();
        let base = cfg.network("base").unwrap();
        assert_eq!(base.id.to_string(), "eip155:8453");
        assert_eq!(base.finality, FinalityRule::Confirmations(10));
        assert_eq!(
            base.tokens[0].address.to_string(),
            "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913"
        );
        assert_eq!(base.tokens[0].start_block, StartBlock::Number(2797221));
        assert_eq!(base.rpc_urls[0].as_str(), "https://mainnet.base.org/");
        assert!(cfg.network("eip155:8453").is_some());
        assert!(cfg.network("eip155:1").is_none());
    }

    #[test]
    fn env_var_overrides_rpc_urls() {
        let cfg = parse_chains(BASE, "chains.toml", |name| {
            (name == "PAYWATCH_RPC_BASE").then(|| "http://a:1, ws://b:2".to_string())
        })
        .unwrap();
        let urls: Vec<_> = cfg.networks[0].rpc_urls.iter().map(|u| u.as_str()).collect();
        assert_eq!(urls, ["http://a:1/", "ws://b:2/"]);
        assert!(cfg.networks[0].verify_rpc_urls.is_empty());
    }

    #[test]
    fn keeping_the_sellers_transfers_needs_sellers() {
        let cfg = parse_chains(BASE, "chains.toml", no_env).unwrap();
        assert_eq!(cfg.networks[0].keep_transfers, KeepTransfers::Refunds);
        assert!(cfg.networks[0].kept_wallets().is_empty());
        let seller = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C";
        let kept = BASE.replace(
            "confirmations = 10",
            &format!("confirmations = 10\npay_to = [\"{seller}\"]\nkeep_transfers = \"pay_to\""),
        );
        let cfg = parse_chains(&kept, "chains.toml", no_env).unwrap();
        assert_eq!(cfg.networks[0].keep_transfers, KeepTransfers::PayTo);
        assert_eq!(cfg.networks[0].kept_wallets(), [seller.to_lowercase()]);
        let solana = parse_chains(
            &SOLANA.replace("pay_to =", "keep_transfers = \"pay_to\"\npay_to ="),
            "chains.toml",
            no_env,
        )
        .unwrap();
        assert_eq!(
            solana.networks[0].kept_wallets(),
            ["9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"]
        );
        let no_sellers = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\nkeep_transfers = \"pay_to\"",
        );
        let e = error_of(&no_sellers);
        assert_eq!(e.key, "networks.\"eip155:8453\".keep_transfers");
        assert!(e.message.contains("list them in `pay_to`"), "{}", e.message);
        let unknown = kept.replace("keep_transfers = \"pay_to\"", "keep_transfers = \"all\"");
        assert!(error_of(&unknown).message.contains("`refunds`"));
    }

    #[test]
    fn a_verifier_is_an_independent_list_of_endpoints() {
        let text = BASE.replace(
            "rpc_url_env = \"PAYWATCH_RPC_BASE\"",
            "rpc_url_env = \"PAYWATCH_RPC_BASE\"\nverify_rpc_urls = [\"https://verifier.example\"]\nverify_rpc_url_env = \"PAYWATCH_VERIFY_BASE\"",
        );
        let cfg = parse_chains(&text, "chains.toml", no_env).unwrap();
        assert_eq!(
            cfg.networks[0].verify_rpc_urls[0].as_str(),
            "https://verifier.example/"
        );
        let cfg = parse_chains(&text, "chains.toml", |name| {
            (name == "PAYWATCH_VERIFY_BASE").then(|| "https://secret.example/KEY".to_string())
        })
        .unwrap();
        assert_eq!(
            cfg.networks[0].verify_rpc_urls[0].as_str(),
            "https://secret.example/KEY"
        );
        assert!(
            !format!("{cfg:?}").contains("KEY"),
            "endpoints are redacted in logs"
        );
        assert!(!cfg.networks[0].bloom_check, "off unless asked for");
        let bloom = BASE.replace("confirmations = 10", "confirmations = 10\nbloom_check = true");
        assert!(parse_chains(&bloom, "chains.toml", no_env).unwrap().networks[0].bloom_check);
        let solana = SOLANA.replace("pay_to =", "bloom_check = true\npay_to =");
        assert!(error_of(&solana).key.ends_with(".bloom_check"));
        let bad = text.replace("https://verifier.example", "ftp://verifier.example");
        assert_eq!(error_of(&bad).key, "networks.\"eip155:8453\".verify_rpc_urls[0]");
    }

    #[test]
    fn scheduled_audits_are_evm_only_and_positive() {
        assert_eq!(
            parse_chains(BASE, "chains.toml", no_env).unwrap().networks[0].audit_interval,
            None
        );
        let hourly = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\naudit_interval_secs = 3600",
        );
        assert_eq!(
            parse_chains(&hourly, "chains.toml", no_env).unwrap().networks[0].audit_interval,
            Some(Duration::from_secs(3600))
        );
        let never = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\naudit_interval_secs = 0",
        );
        let error = error_of(&never);
        assert_eq!(error.key, "networks.\"eip155:8453\".audit_interval_secs");
        assert!(error.message.contains("at least 1 second"), "{}", error.message);
        let solana = SOLANA.replace("pay_to =", "audit_interval_secs = 60\npay_to =");
        let error = error_of(&solana);
        assert!(error.key.ends_with(".audit_interval_secs"), "{}", error.key);
        assert!(error.message.contains("EVM networks only"), "{}", error.message);
    }

    #[test]
    fn verification_is_inline_unless_lagging_is_asked_with_a_verifier_and_a_schedule() {
        let with_verifier = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\nverify_rpc_urls = [\"https://verifier.example\"]",
        );
        let parsed = |text: &str| parse_chains(text, "chains.toml", no_env).unwrap().networks[0].verification;
        assert_eq!(parsed(BASE), Verification::Inline);
        assert_eq!(parsed(&with_verifier), Verification::Inline);
        let lagging = with_verifier.replace(
            "confirmations = 10",
            "confirmations = 10\nverification = \"lagging\"\naudit_interval_secs = 60",
        );
        assert_eq!(parsed(&lagging), Verification::Lagging);

        let unscheduled = with_verifier.replace(
            "confirmations = 10",
            "confirmations = 10\nverification = \"lagging\"",
        );
        let error = error_of(&unscheduled);
        assert_eq!(error.key, "networks.\"eip155:8453\".verification");
        assert!(error.message.contains("audit_interval_secs"), "{}", error.message);
        let no_verifier = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\nverification = \"lagging\"\naudit_interval_secs = 60",
        );
        assert!(error_of(&no_verifier).message.contains("verify_rpc_urls"));
        let unknown = with_verifier.replace(
            "confirmations = 10",
            "confirmations = 10\nverification = \"later\"",
        );
        let error = error_of(&unknown);
        assert!(
            error.message.contains("`inline`") && error.message.contains("\"later\""),
            "{}",
            error.message
        );
    }

    #[test]
    fn ranges_read_at_once_are_evm_only_and_at_least_one() {
        let cfg = parse_chains(BASE, "chains.toml", no_env).unwrap();
        assert_eq!(cfg.networks[0].ranges_in_flight, RANGES_IN_FLIGHT);
        let serial = BASE.replace("confirmations = 10", "confirmations = 10\nranges_in_flight = 1");
        assert_eq!(
            parse_chains(&serial, "chains.toml", no_env).unwrap().networks[0].ranges_in_flight,
            1
        );
        let none = BASE.replace("confirmations = 10", "confirmations = 10\nranges_in_flight = 0");
        let error = error_of(&none);
        assert_eq!(error.key, "networks.\"eip155:8453\".ranges_in_flight");
        assert!(error.to_string().contains("at least 1"), "{error}");
        let solana = SOLANA.replace("pay_to =", "ranges_in_flight = 4\npay_to =");
        let error = error_of(&solana);
        assert!(error.key.ends_with(".ranges_in_flight"), "{}", error.key);
        assert!(error.to_string().contains("EVM networks only"), "{error}");
    }

    #[test]
    fn logs_answers_are_bounded_on_evm_only_by_at_least_one_kib() {
        let cfg = parse_chains(BASE, "chains.toml", no_env).unwrap();
        assert_eq!(cfg.networks[0].max_logs_answer_kib, MAX_LOGS_ANSWER_KIB);
        let small = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\nmax_logs_answer_kib = 64",
        );
        assert_eq!(
            parse_chains(&small, "chains.toml", no_env).unwrap().networks[0].max_logs_answer_kib,
            64
        );
        let none = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\nmax_logs_answer_kib = 0",
        );
        let error = error_of(&none);
        assert_eq!(error.key, "networks.\"eip155:8453\".max_logs_answer_kib");
        assert!(error.to_string().contains("at least 1"), "{error}");
        let solana = SOLANA.replace("pay_to =", "max_logs_answer_kib = 64\npay_to =");
        let error = error_of(&solana);
        assert!(error.key.ends_with(".max_logs_answer_kib"), "{}", error.key);
        assert!(
            error.to_string().contains("EVM `eth_getLogs` answers only"),
            "{error}"
        );
    }

    #[test]
    fn a_token_names_its_eip712_domain_by_both_name_and_version() {
        let cfg = parse_chains(BASE, "chains.toml", no_env).unwrap();
        assert_eq!(cfg.networks[0].tokens[0].eip712, None, "optional");
        let domain = |lines: &str| BASE.replace("decimals = 6", &format!("decimals = 6\n{lines}"));
        let cfg = parse_chains(
            &domain("eip712_name = \"USD Coin\"\neip712_version = \"2\""),
            "chains.toml",
            no_env,
        )
        .unwrap();
        assert_eq!(
            cfg.networks[0].tokens[0].eip712,
            Some(Eip712Name {
                name: "USD Coin".into(),
                version: "2".into()
            })
        );
        let key = "networks.\"eip155:8453\".tokens[0]";
        let error = error_of(&domain("eip712_name = \"USD Coin\""));
        assert_eq!(error.key, format!("{key}.eip712_version"));
        assert!(error.to_string().contains("or remove both"), "{error}");
        assert_eq!(
            error_of(&domain("eip712_version = \"2\"")).key,
            format!("{key}.eip712_name")
        );
        assert_eq!(
            error_of(&domain("eip712_name = \"USD Coin\"\neip712_version = \"\"")).key,
            format!("{key}.eip712_version")
        );
        let solana = SOLANA.replace(
            "decimals = 6",
            "decimals = 6\neip712_name = \"USD Coin\"\neip712_version = \"2\"",
        );
        let error = error_of(&solana);
        assert!(error.key.ends_with("tokens[0].eip712_name"), "{}", error.key);
        assert!(error.to_string().contains("EVM tokens only"), "{error}");
    }

    #[test]
    fn evm_networks_watch_the_sdks_escrows_unless_told_otherwise() {
        let cfg = parse_chains(BASE, "chains.toml", no_env).unwrap();
        assert_eq!(
            cfg.networks[0].escrows,
            [AUTH_CAPTURE_ESCROW_V1_0, AUTH_CAPTURE_ESCROW_V1_1]
        );
        let listed = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\nauth_capture_escrows = [\"0x00000000000000000000000000000000000000e5\"]",
        );
        let cfg = parse_chains(&listed, "chains.toml", no_env).unwrap();
        assert_eq!(cfg.networks[0].escrows, [Address::with_last_byte(0xe5)]);
        let none = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\nauth_capture_escrows = []",
        );
        assert!(
            parse_chains(&none, "chains.toml", no_env).unwrap().networks[0]
                .escrows
                .is_empty()
        );
        let twice = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\nauth_capture_escrows = [\"0xf96815976523E00e65Be8f34cA5e64b4f41EB19c\", \"0xf96815976523e00e65be8f34ca5e64b4f41eb19c\"]",
        );
        let error = parse_chains(&twice, "chains.toml", no_env).unwrap_err();
        assert_eq!(error.key, "networks.\"eip155:8453\".auth_capture_escrows[1]");
        assert!(error.message.contains("listed twice"), "{}", error.message);
    }

    #[test]
    fn evm_networks_watch_metamasks_delegation_manager_unless_told_otherwise() {
        let cfg = parse_chains(BASE, "chains.toml", no_env).unwrap();
        assert_eq!(cfg.networks[0].delegation_managers, [DELEGATION_MANAGER]);
        let listed = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\ndelegation_managers = [\"0x00000000000000000000000000000000000000d7\", \"0x00000000000000000000000000000000000000D8\"]",
        );
        let cfg = parse_chains(&listed, "chains.toml", no_env).unwrap();
        assert_eq!(
            cfg.networks[0].delegation_managers,
            [Address::with_last_byte(0xd7), Address::with_last_byte(0xd8)]
        );
        let bad = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\ndelegation_managers = [\"0xd7\"]",
        );
        assert_eq!(
            error_of(&bad).key,
            "networks.\"eip155:8453\".delegation_managers[0]"
        );
        let solana = SOLANA.replace("pay_to =", "delegation_managers = []\npay_to =");
        let error = error_of(&solana);
        assert!(error.key.ends_with(".delegation_managers"), "{}", error.key);
        assert!(error.message.contains("EVM networks only"), "{}", error.message);
        assert!(
            parse_chains(SOLANA, "chains.toml", no_env).unwrap().networks[0]
                .delegation_managers
                .is_empty()
        );
    }

    #[test]
    fn evm_networks_watch_the_canonical_permit2_proxies_unless_told_otherwise() {
        let cfg = parse_chains(BASE, "chains.toml", no_env).unwrap();
        let watched: Vec<(Address, PaymentMethod)> = cfg.networks[0]
            .permit2_proxies
            .iter()
            .map(|p| (p.address, p.method))
            .collect();
        assert_eq!(
            watched,
            [
                (EXACT_PERMIT2_PROXY, PaymentMethod::Permit2),
                (UPTO_PERMIT2_PROXY, PaymentMethod::Upto)
            ]
        );
        let elsewhere = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\nexact_permit2_proxies = [\"0x402039B3d6E6BEC5A02c2C9fd937ac17A6940002\"]\nupto_permit2_proxies = []",
        );
        let cfg = parse_chains(&elsewhere, "chains.toml", no_env).unwrap();
        assert_eq!(
            cfg.networks[0].permit2_proxies,
            [ProxyConfig {
                address: alloy_primitives::address!("402039b3d6e6bec5a02c2c9fd937ac17a6940002"),
                method: PaymentMethod::Permit2
            }]
        );
        let twice = BASE.replace(
            "confirmations = 10",
            &format!("confirmations = 10\nexact_permit2_proxies = []\nupto_permit2_proxies = [\"{EXACT_PERMIT2_PROXY}\", \"{EXACT_PERMIT2_PROXY}\"]"),
        );
        assert_eq!(
            error_of(&twice).key,
            "networks.\"eip155:8453\".upto_permit2_proxies[1]"
        );
        let malformed = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\nexact_permit2_proxies = [\"0x40\"]",
        );
        assert_eq!(
            error_of(&malformed).key,
            "networks.\"eip155:8453\".exact_permit2_proxies[0]"
        );
        assert_eq!(cfg.networks[0].permit2, Some(PERMIT2));
        let moved = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\npermit2 = \"0x0000000000225E31D15943971F47AD3022F714FA\"",
        );
        let cfg = parse_chains(&moved, "chains.toml", no_env).unwrap();
        assert_eq!(
            cfg.networks[0].permit2,
            Some(alloy_primitives::address!(
                "0000000000225e31d15943971f47ad3022f714fa"
            ))
        );
        let bad = BASE.replace("confirmations = 10", "confirmations = 10\npermit2 = \"0x22\"");
        assert_eq!(error_of(&bad).key, "networks.\"eip155:8453\".permit2");
    }

    fn error_of(text: &str) -> ConfigError {
        parse_chains(text, "chains.toml", no_env).unwrap_err()
    }

    #[test]
    fn errors_name_the_file_and_key() {
        let e = error_of(&BASE.replace("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", "0x1234"));
        assert_eq!(e.file, "chains.toml");
        assert_eq!(e.key, "networks.\"eip155:8453\".tokens[0].address");
        assert!(e.message.contains("40 hex digits"), "{e}");

        let e = error_of(&BASE.replace("eip155:8453", "base"));
        assert_eq!(e.key, "networks.\"base\"");
        assert!(e.message.contains("CAIP-2"), "{e}");

        let e = error_of(&BASE.replace("https://mainnet.base.org", "ftp://x"));
        assert_eq!(e.key, "networks.\"eip155:8453\".rpc_urls[0]");

        let e = error_of(&BASE.replace("confirmations = 10", "finality = \"soon\""));
        assert_eq!(e.key, "networks.\"eip155:8453\".finality");

        let e = error_of(&BASE.replace("\"latest\"", "-5"));
        assert_eq!(e.key, "networks.\"eip155:8453\".start_block");

        let e = error_of(&BASE.replace("rpc_urls = [\"https://mainnet.base.org\"]", ""));
        assert!(e.message.contains("rpc_url_env"), "{e}");

        let e = error_of("[networks.\"eip155:1\"]\nrpc_urls = [\"http://x\"]\ncolour = 1\n");
        assert!(e.message.contains("colour"), "{e}");

        let e = error_of("[networks.\"eip155:1\"]\nrpc_urls = [\"http://x\"]\n\n[networks.\"eip155:2\"\n");
        assert_eq!(
            (e.file.as_str(), e.key.as_str()),
            ("chains.toml", "line 4, column 21")
        );
    }

    #[test]
    fn api_tokens_come_from_the_environment() {
        let text = format!("[api]\ntoken_env = {{ finance = \"PW_FIN\" }}\nrequests_per_second = 5\n{BASE}");
        let env = |var: &str| (var == "PW_FIN").then(|| "0123456789abcdef-finance".to_string());
        let cfg = parse_chains(&text, "chains.toml", env).unwrap();
        assert_eq!(cfg.api.clients["finance"].expose(), "0123456789abcdef-finance");
        // Printing the configuration never shows a token.
        assert!(!format!("{cfg:?}").contains("0123456789abcdef-finance"));
        assert_eq!(cfg.api.requests_per_second, Some(5));
        let e = parse_chains(&text, "chains.toml", no_env).unwrap_err();
        assert_eq!(e.key, "api.token_env.finance");
        assert!(e.message.contains("PW_FIN is not set"), "{e}");
        let short = |var: &str| (var == "PW_FIN").then(|| "short".to_string());
        assert!(
            parse_chains(&text, "chains.toml", short)
                .unwrap_err()
                .message
                .contains("16 characters")
        );
        let zero = format!("[api]\nrequests_per_second = 0\n{BASE}");
        assert_eq!(error_of(&zero).key, "api.requests_per_second");
        assert_eq!(
            parse_chains(BASE, "chains.toml", no_env).unwrap().api,
            ApiAccess::default()
        );
    }

    #[test]
    fn webhooks_take_their_key_from_the_environment() {
        let text = format!(
            "[[webhooks]]\nname = \"refunds\"\nurl = \"https://hooks.example/x402\"\nsecret_env = \"PW_HOOK\"\nnetwork = \"base\"\n{BASE}"
        );
        let env = |var: &str| (var == "PW_HOOK").then(|| "a-long-webhook-secret".to_string());
        let cfg = parse_chains(&text, "chains.toml", env).unwrap();
        assert_eq!(cfg.webhooks[0].name, "refunds");
        assert_eq!(
            cfg.webhooks[0].network.as_ref().unwrap().to_string(),
            "eip155:8453"
        );
        assert_eq!(cfg.webhooks[0].max_attempts, 8);
        assert_eq!(cfg.webhooks[0].secret.expose(), "a-long-webhook-secret");
        assert!(!format!("{cfg:?}").contains("a-long-webhook-secret"));
        assert_eq!(
            parse_chains(&text, "chains.toml", no_env).unwrap_err().key,
            "webhooks[0].secret_env"
        );
        let ftp = text.replace("https://hooks.example/x402", "ftp://hooks.example");
        assert_eq!(
            parse_chains(&ftp, "chains.toml", env).unwrap_err().key,
            "webhooks[0].url"
        );
        assert_eq!(cfg.webhooks[0].events, [EventKind::PaymentState]);
        let both = text.replace(
            "network = \"base\"",
            "network = \"base\"\nevents = [\"payment_state\", \"review_state\"]",
        );
        assert_eq!(
            parse_chains(&both, "chains.toml", env).unwrap().webhooks[0].events,
            [EventKind::PaymentState, EventKind::ReviewState]
        );
        let none = text.replace("network = \"base\"", "network = \"base\"\nevents = []");
        assert_eq!(
            parse_chains(&none, "chains.toml", env).unwrap_err().key,
            "webhooks[0].events"
        );
    }

    #[test]
    fn review_last_line_is_configurable() {
        let cfg = parse_chains(BASE, "chains.toml", no_env).unwrap();
        assert_eq!(cfg.review_last_line, crate::review::DEFAULT_LAST_LINE);
        let text = format!("[review]\nlast_line = \"Exact line.\"\n{BASE}");
        assert_eq!(
            parse_chains(&text, "chains.toml", no_env)
                .unwrap()
                .review_last_line,
            "Exact line."
        );
        let e = error_of(&format!("[review]\nlast_line = \"\"\n{BASE}"));
        assert_eq!(e.key, "review.last_line");
    }

    #[test]
    fn review_freshness_is_configurable() {
        let cfg = parse_chains(BASE, "chains.toml", no_env).unwrap();
        assert_eq!(cfg.review_freshness, Freshness::default());
        let text = format!("[review]\nmax_age_secs = 600\nmax_future_secs = 0\n{BASE}");
        assert_eq!(
            parse_chains(&text, "chains.toml", no_env)
                .unwrap()
                .review_freshness,
            Freshness {
                max_age_secs: 600,
                max_future_secs: 0
            }
        );
    }

    const SOLANA: &str = r#"
[networks."solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"]
rpc_urls = ["https://api.mainnet-beta.solana.com"]
pay_to = ["9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"]

[[networks."solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp".tokens]]
address = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"
symbol = "USDC"
decimals = 6
"#;

    #[test]
    fn parses_a_solana_network() {
        let cfg = parse_chains(SOLANA, "chains.toml", no_env).unwrap();
        let solana = cfg.network("solana").unwrap();
        assert_eq!(solana.finality, FinalityRule::Finalized);
        assert_eq!(
            solana.tokens[0].address.to_string(),
            "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"
        );
        assert_eq!(
            solana.pay_to[0].to_string(),
            "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"
        );
    }

    #[test]
    fn a_solana_network_reads_and_pays_at_the_commitments_it_names() {
        let at = |extra: &str| {
            parse_chains(
                &SOLANA.replace("pay_to =", &format!("{extra}\npay_to =")),
                "chains.toml",
                no_env,
            )
        };
        let default = at("").unwrap();
        assert_eq!(default.networks[0].commitment, Commitment::Confirmed);
        assert_eq!(default.networks[0].finality, FinalityRule::Finalized);
        let fast = at("finality = \"confirmed\"").unwrap();
        assert_eq!(fast.networks[0].finality, FinalityRule::Confirmed);
        assert_eq!(fast.networks[0].finality.to_string(), "confirmed");
        let slow = at("commitment = \"finalized\"").unwrap();
        assert_eq!(slow.networks[0].commitment, Commitment::Finalized);
        assert_eq!(slow.networks[0].finality, FinalityRule::Finalized);

        let key = |extra: &str| at(extra).unwrap_err().key;
        let contradiction = at("commitment = \"finalized\"\nfinality = \"confirmed\"").unwrap_err();
        assert!(
            contradiction.key.ends_with(".commitment"),
            "{}",
            contradiction.key
        );
        assert!(
            contradiction.to_string().contains("would never apply"),
            "{contradiction}"
        );
        assert!(key("commitment = \"processed\"").ends_with(".commitment"));
        assert!(key("finality = \"safe\"").ends_with(".finality"));
        let evm = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\ncommitment = \"finalized\"",
        );
        assert!(error_of(&evm).key.ends_with(".commitment"));
        let evm = BASE.replace("confirmations = 10", "finality = \"confirmed\"");
        assert!(error_of(&evm).key.ends_with(".finality"));
    }

    #[test]
    fn solana_errors_name_the_key() {
        let key = "networks.\"solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp\"";
        let e = error_of(&SOLANA.replace("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v", "0xabc"));
        assert_eq!(e.key, format!("{key}.tokens[0].address"));
        assert!(e.message.contains("base58"), "{e}");
        let e = error_of(&SOLANA.replace("9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin", "9xQe"));
        assert_eq!(e.key, format!("{key}.pay_to[0]"));
        let e = error_of(&SOLANA.replace("pay_to = [\"9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin\"]", ""));
        assert_eq!(e.key, format!("{key}.pay_to"));
        let e = error_of(&SOLANA.replace("pay_to =", "confirmations = 3\npay_to ="));
        assert_eq!(e.key, format!("{key}.finality"));
        let e = error_of(&BASE.replace(
            "confirmations = 10",
            "pay_to = [\"9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin\"]",
        ));
        assert_eq!(e.key, "networks.\"eip155:8453\".pay_to[0]");
        assert!(e.message.contains("EVM address"), "{e}");
        let evm = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\npay_to = [\"0x209693Bc6afc0C5328bA36FaF03C514EF312287C\"]",
        );
        let cfg = parse_chains(&evm, "chains.toml", no_env).unwrap();
        assert_eq!(
            cfg.networks[0].pay_to[0].to_string(),
            "0x209693bc6afc0c5328ba36faf03c514ef312287c"
        );
    }

    #[test]
    fn facilitators_are_solana_fee_payers_and_evm_senders() {
        let key = "networks.\"solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp\"";
        let fee_payer = "2wKupLR9q6wXYppw8Gr2NvWxKBUqm4PPJKkQfoxHDBg4";
        // A facilitator alone is enough to watch: its settlements name every seller.
        let only = SOLANA.replace(
            "pay_to = [\"9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin\"]",
            &format!("facilitators = [\"{fee_payer}\"]"),
        );
        let cfg = parse_chains(&only, "chains.toml", no_env).unwrap();
        assert_eq!(cfg.networks[0].facilitators, [fee_payer]);
        assert!(cfg.networks[0].pay_to.is_empty());
        let twice = SOLANA.replace(
            "pay_to =",
            &format!("facilitators = [\"{fee_payer}\", \"{fee_payer}\"]\npay_to ="),
        );
        assert_eq!(error_of(&twice).key, format!("{key}.facilitators[1]"));
        let malformed = SOLANA.replace("pay_to =", "facilitators = [\"0xabc\"]\npay_to =");
        assert_eq!(error_of(&malformed).key, format!("{key}.facilitators[0]"));
        let on_evm = BASE.replace(
            "confirmations = 10",
            &format!("confirmations = 10\nfacilitators = [\"{fee_payer}\"]"),
        );
        // On EVM a facilitator is a sender address: a Solana key is refused, an EVM one
        // is kept in lowercase hex.
        assert_eq!(error_of(&on_evm).key, "networks.\"eip155:8453\".facilitators[0]");
        let evm = BASE.replace(
            "confirmations = 10",
            "confirmations = 10\nfacilitators = [\"0x209693Bc6afc0C5328bA36FaF03C514EF312287C\"]",
        );
        let cfg = parse_chains(&evm, "chains.toml", no_env).unwrap();
        assert_eq!(
            cfg.networks[0].facilitators,
            ["0x209693bc6afc0c5328ba36faf03c514ef312287c"]
        );
        let proxies_on_solana = SOLANA.replace("pay_to =", "upto_permit2_proxies = []\npay_to =");
        assert!(
            error_of(&proxies_on_solana)
                .key
                .ends_with(".upto_permit2_proxies")
        );
        assert!(
            parse_chains(SOLANA, "chains.toml", no_env).unwrap().networks[0]
                .permit2_proxies
                .is_empty()
        );
    }

    #[test]
    fn disabled_networks_are_skipped() {
        let text = BASE.replace("alias = \"base\"", "alias = \"base\"\nenabled = false");
        assert!(
            parse_chains(&text, "chains.toml", no_env)
                .unwrap()
                .networks
                .is_empty()
        );
    }

    #[test]
    fn rpc_keys_stay_out_of_debug_output() {
        let env = |var: &str| {
            (var == "PAYWATCH_RPC_BASE")
                .then(|| "https://base-mainnet.g.alchemy.com/v2/secret-api-key-0123".to_string())
        };
        let cfg = parse_chains(BASE, "chains.toml", env).unwrap();
        assert_eq!(
            cfg.networks[0].rpc_urls[0].path(),
            "/v2/secret-api-key-0123",
            "the worker gets the whole URL"
        );
        let printed = format!("{cfg:?}");
        assert!(!printed.contains("secret-api-key"), "{printed}");
        assert!(
            printed.contains("https://base-mainnet.g.alchemy.com/…"),
            "{printed}"
        );
    }
}
