//! Who may call the API and how often: an optional bearer token per client (from
//! `[api] token_env`), checked on every route but `/healthz`, and an optional per-client
//! rate limit (`[api] requests_per_second`, a token bucket per client; without tokens
//! every caller shares one bucket). Refusals are 401 `unauthorized` and 429
//! `rate_limited` with `Retry-After`.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use paywatch_core::Reason;
use paywatch_core::config::ApiAccess;
use sha2::{Digest, Sha256};

use crate::AppState;
use crate::error::ApiError;

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
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<String, ApiError> {
        if self.clients.is_empty() {
            return Ok(ANONYMOUS.to_string());
        }
        let unauthorized = |message: &str| ApiError::new(Reason::Unauthorized, message);
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
    pub fn count_request(&self, client: &str) -> Result<(), (ApiError, u64)> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        limiter.check_key(&client.to_string()).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            let refusal = ApiError::new(
                Reason::RateLimited,
                format!("client {client} is over its rate limit; retry in {seconds} s"),
            );
            (refusal, seconds)
        })
    }
}

/// The middleware: authenticates, then counts the request against its client's bucket.
pub(crate) async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if request.uri().path() == "/healthz" {
        return next.run(request).await;
    }
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let client = match state.access.authenticate(authorization) {
        Ok(client) => client,
        Err(refusal) => {
            let mut response = refusal.into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    };
    if let Err((refusal, seconds)) = state.access.count_request(&client) {
        let mut response = refusal.into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        return response;
    }
    next.run(request).await
}
