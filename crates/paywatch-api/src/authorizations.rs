//! `GET /v1/authorizations/{network}/{asset}/{payer}/{nonce}`: what became of an
//! authorization, for a settlement that timed out.

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use paywatch_query::{AuthorizationView, lookup_authorization};

use crate::AppState;
use crate::error::{ApiError, ErrorBody};

/// The authorization lookup handler.
#[utoipa::path(get, path = "/v1/authorizations/{network}/{asset}/{payer}/{nonce}", tag = "facilitators",
    params(("network" = String, Path, description = "CAIP-2 id or alias"), ("asset" = String, Path, description = "Token contract"),
        ("payer" = String, Path, description = "The authorizer"), ("nonce" = String, Path, description = "EIP-3009 nonce (0x + 64 hex) or Permit2 nonce (decimal uint256)")),
    responses((status = 200, body = AuthorizationView), (status = 400, description = "Malformed payer, asset or nonce", body = ErrorBody),
        (status = 404, description = "Network or asset not watched", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 429, description = "Over the client's rate limit", body = ErrorBody),
        (status = 503, description = "The store or the chain did not answer, or the network has no final block recorded yet", body = ErrorBody)))]
pub(crate) async fn lookup(
    State(state): State<AppState>,
    path: Result<Path<(String, String, String, String)>, PathRejection>,
) -> Result<Json<AuthorizationView>, ApiError> {
    let Path((network, asset, payer, nonce)) = path?;
    lookup_authorization(&state.queries, &network, &asset, &payer, &nonce)
        .await
        .map(Json)
        .map_err(ApiError::from)
}
