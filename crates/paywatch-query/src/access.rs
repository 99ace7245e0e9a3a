//! Who may call the APIs and how often: an optional bearer token per client (from
//! `[api] token_env`) and an optional per-client rate limit (`[api] requests_per_second`,
//! a token bucket per client; without tokens every caller shares one bucket). Refusals
//! are `unauthorized` and `rate_limited` (with the seconds to wait); both APIs apply them.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use paywatch_core::Reason;
use paywatch_core::config::ApiAccess;
use sha2::{Digest, Sha256};

use crate::QueryError;

/// The client name of callers of an API without tokens.
const ANONYMOUS: &str = "anonymous";

/// The access rules in force.
#[derive(Clone, Default)]
pub struct AccessControl {
    /// SHA-256 of each token → its client. Looking up digests, not tokens, keeps the
    /// comparison's timing independent of how much of a guessed token is right.
    clients: Arc<HashMap<[u8; 32], String>>,
    limiter: Option<Arc<DefaultKeyedRateLimiter<String>>>,
}

impl AccessControl {
    /// The rules of `[api]`.
    pub fn new(access: &ApiAccess) -> Self {
        let clients = access
            .clients
            .iter()
            .map(|(client, token)| (Sha256::digest(token.expose().as_bytes()).into(), client.clone()))
            .collect();
        let limiter = access
            .requests_per_second
            .and_then(NonZeroU32::new)
            .map(|rate| Arc::new(RateLimiter::keyed(Quota::per_second(rate))));
        Self {
            clients: Arc::new(clients),
            limiter,
        }
    }

    /// The client a bearer `Authorization` value names, or why it is refused (HTTP
    /// headers and gRPC metadata alike).
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<String, QueryError> {
        if self.clients.is_empty() {
            return Ok(ANONYMOUS.to_string());
        }
        let unauthorized = |message: &str| QueryError::new(Reason::Unauthorized, message);
        // The auth scheme is case-insensitive (RFC 7235 §2.1): `bearer`, `BEARER` alike.
        let token = authorization
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token)
            .ok_or_else(|| unauthorized("send Authorization: Bearer <your client token>"))?;
        let digest: [u8; 32] = Sha256::digest(token.trim().as_bytes()).into();
        self.clients
            .get(&digest)
            .cloned()
            .ok_or_else(|| unauthorized("this bearer token belongs to no client in [api] token_env"))
    }

    /// Counts one request against `client`'s bucket; over the limit, the refusal and
    /// the whole seconds to wait.
    pub fn count_request(&self, client: &str) -> Result<(), (QueryError, u64)> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        limiter.check_key(&client.to_string()).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            let refusal = QueryError::new(
                Reason::RateLimited,
                format!("client {client} is over its rate limit; retry in {seconds} s"),
            );
            (refusal, seconds)
        })
    }
}
