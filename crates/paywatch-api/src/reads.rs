//! Which database answers a read: the middleware takes the `consistency` query parameter
//! off a read route's request, routes the read (`Queries::read_answer`), and says on the
//! answer where it was read (`Paywatch-Read-From`), at most how far the read replica
//! lagged (`Paywatch-Replica-Lag-Ms`) and why a read went to the primary instead
//! (`Paywatch-Replica-Fallback`). Read handlers take their queries with [`Reads`].

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{FromRequestParts, Query, Request, State};
use axum::http::request::Parts;
use axum::http::uri::PathAndQuery;
use axum::http::{HeaderName, HeaderValue, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use paywatch_core::Reason;
use paywatch_query::{Consistency, Queries, QueryError};

use crate::error::ApiError;
use crate::{AppState, MAX_BODY_BYTES};

/// The query parameter every read route accepts; the middleware takes it off the request
/// before the handler reads its own parameters.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ReadParams {
    /// `replica` (default): the read replica while it lags at most `--read-max-lag`, else
    /// the primary; `primary`: every committed fact. Without a replica, always the primary.
    consistency: Option<String>,
}

/// The queries a read handler runs, on the database the middleware chose.
pub(crate) struct Reads(pub(crate) Arc<Queries>);

/// The chosen queries, as the middleware leaves them for the handler.
#[derive(Clone)]
struct RoutedQueries(Arc<Queries>);

impl FromRequestParts<AppState> for Reads {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        Ok(Self(match parts.extensions.remove::<RoutedQueries>() {
            Some(RoutedQueries(queries)) => queries,
            None => Arc::clone(&state.queries),
        }))
    }
}

/// The middleware of the read routes. With a replica, a read it fails (`store_unavailable`:
/// it went away since its last sample) is read again on the primary
/// ([`Queries::read_answer`]), so the request is kept whole until it is answered.
pub(crate) async fn route(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let consistency = match take_consistency(request.uri_mut()) {
        Ok(consistency) => consistency,
        Err(refusal) => return ApiError::from(refusal).into_response(),
    };
    if state.queries.replica.is_none() {
        // Every read is the primary's: `Reads` takes the state's queries.
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(body) => body,
        Err(_) => {
            let refusal = QueryError::new(
                Reason::PayloadTooLarge,
                format!("the body is larger than the {MAX_BODY_BYTES} bytes the API takes"),
            );
            return ApiError::from(refusal).into_response();
        }
    };
    let on = |queries: Arc<Queries>| {
        let mut request = Request::from_parts(parts.clone(), Body::from(body.clone()));
        request.extensions_mut().insert(RoutedQueries(queries));
        request
    };
    let (mut response, route) = state
        .queries
        .read_answer(
            consistency,
            |queries| next.clone().run(on(queries)),
            |response: &Response| response.extensions().get::<Reason>() == Some(&Reason::StoreUnavailable),
        )
        .await;
    for (name, value) in route.described() {
        if let Ok(value) = HeaderValue::try_from(value) {
            response
                .headers_mut()
                .insert(HeaderName::from_static(name), value);
        }
    }
    response
}

/// Removes `consistency` from `uri`'s query and reads it (absent: the default).
fn take_consistency(uri: &mut Uri) -> Result<Consistency, QueryError> {
    let Query(ReadParams { consistency }) = Query::try_from_uri(uri).map_err(|e| {
        QueryError::new(
            Reason::MalformedQuery,
            format!("{}: give consistency once", e.body_text()),
        )
    })?;
    let Some(consistency) = consistency else {
        return Ok(Consistency::default());
    };
    let consistency = Consistency::parse(&consistency)?;
    let kept: Vec<&str> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|pair| pair.split('=').next() != Some("consistency"))
        .collect();
    let path_and_query = match kept.as_slice() {
        [] => uri.path().to_string(),
        kept => format!("{}?{}", uri.path(), kept.join("&")),
    };
    let mut parts = std::mem::take(uri).into_parts();
    parts.path_and_query = Some(PathAndQuery::try_from(path_and_query).map_err(|e| {
        QueryError::new(
            Reason::MalformedQuery,
            format!("the query string cannot be read: {e}"),
        )
    })?);
    *uri = Uri::from_parts(parts).map_err(|e| QueryError::new(Reason::MalformedQuery, e.to_string()))?;
    Ok(consistency)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(uri: &str) -> (Result<Consistency, Reason>, String) {
        let mut uri: Uri = uri.parse().unwrap();
        let consistency = take_consistency(&mut uri).map_err(|e| e.reason);
        (consistency, uri.to_string())
    }

    #[test]
    fn consistency_is_taken_off_the_query_and_the_rest_kept() {
        assert_eq!(
            taken("/v1/payments/base/0xab?index=1&consistency=primary&payer=0x1"),
            (
                Ok(Consistency::Primary),
                "/v1/payments/base/0xab?index=1&payer=0x1".into()
            )
        );
        assert_eq!(
            taken("/v1/payments?consistency=replica"),
            (Ok(Consistency::Replica), "/v1/payments".into())
        );
        assert_eq!(
            taken("/v1/payments?network=base"),
            (Ok(Consistency::Replica), "/v1/payments?network=base".into())
        );
        assert_eq!(
            taken("/v1/totals"),
            (Ok(Consistency::Replica), "/v1/totals".into())
        );
    }

    #[test]
    fn an_unknown_or_repeated_consistency_is_refused() {
        assert_eq!(
            taken("/v1/payments?consistency=fresh").0,
            Err(Reason::MalformedQuery)
        );
        assert_eq!(taken("/v1/payments?consistency").0, Err(Reason::MalformedQuery));
        assert_eq!(
            taken("/v1/payments?consistency=primary&consistency=replica").0,
            Err(Reason::MalformedQuery)
        );
    }
}
