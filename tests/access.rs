//! Access to the HTTP API through a real client: bearer tokens per client (401
//! `unauthorized` without a valid one, `/healthz` open), a per-client rate limit (429
//! `rate_limited` with `Retry-After`, one client's burst not limiting another), and the
//! body size limit (413 `payload_too_large`); and the OpenAPI document of every route.

use alloy::primitives::Address;
use paywatch_core::config::{ApiAccess, Secret};
use paywatch_core::health::WorkerState;
use paywatch_core::listing::{TotalsKey, TransferRole};
use paywatch_core::records::EscrowEventKind;
use paywatch_core::refunds::RefundRule;
use paywatch_core::state::{EventKind, HistoryCause, PaymentState};
use paywatch_core::vocabulary::spellings;
use paywatch_core::{PaymentMethod, Reason};
use paywatch_tests::harness::{ApiServer, LocalNetwork};
use paywatch_tests::stores::{Kind, TestDb};
use serde_json::Value;

const FINANCE: &str = "finance-token-0123456789abcdef";
const DAEMON: &str = "daemon-token-fedcba9876543210";

async fn get(api: &ApiServer, path: &str, token: Option<&str>) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = reqwest::Client::new().get(format!("{}{path}", api.base_url));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("GET");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rate_limits_and_body_size() {
    let db = TestDb::create(Kind::Sqlite).await;
    let store = db.open().await;
    let mut chains = LocalNetwork::new(31337, "http://127.0.0.1:1", &[Address::repeat_byte(0x11)]).chains();
    chains.api = ApiAccess {
        clients: [("finance", FINANCE), ("daemon", DAEMON)]
            .map(|(c, t)| (c.to_string(), Secret::new(t)))
            .into(),
        requests_per_second: Some(3),
    };
    let api = ApiServer::start(&store, &chains).await;
    let lookup = format!("/v1/payments/local/0x{}", "ab".repeat(32));

    // Without a token, or with one of no client: 401 with a reason and a challenge.
    for token in [None, Some("not-a-token-of-anyone-at-all")] {
        let (status, headers, body) = get(&api, &lookup, token).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (401, Some("unauthorized")),
            "{body}"
        );
        assert_eq!(headers["www-authenticate"], "Bearer");
    }
    let (status, _, _) = get(&api, "/healthz", None).await;
    assert_eq!(status, 200, "health checks need no token");
    // A client's token: the route answers as usual.
    let (status, _, body) = get(&api, &lookup, Some(FINANCE)).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (404, Some("payment_not_found"))
    );
    // The scheme is case-insensitive (RFC 7235): `bearer` and `BEARER` name it too.
    for scheme in ["bearer", "BEARER"] {
        let response = reqwest::Client::new()
            .get(format!("{}{lookup}", api.base_url))
            .header("authorization", format!("{scheme} {FINANCE}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 404, "{scheme}");
    }

    // A burst from one client runs into its limit; the other client is not slowed.
    let mut limited = None;
    for _ in 0..20 {
        let (status, headers, body) = get(&api, &lookup, Some(FINANCE)).await;
        if status == 429 {
            limited = Some((headers, body));
            break;
        }
    }
    let (headers, body) = limited.expect("20 requests at once exceed 3 per second");
    assert_eq!(body["reason"], "rate_limited", "{body}");
    let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry), "Retry-After {retry}");
    let (status, _, _) = get(&api, &lookup, Some(DAEMON)).await;
    assert_eq!(status, 404, "another client's bucket is its own");

    // A body over the limit.
    let huge = serde_json::json!({
        "message": "x".repeat(2 * 1024 * 1024),
        "signature": "0x00",
        "note": "",
        "provider_host": "reviews.example",
    });
    let response = reqwest::Client::new()
        .post(format!("{}/v1/reviews/verify", api.base_url))
        .bearer_auth(DAEMON)
        .json(&huge)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 413);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["reason"], "payload_too_large", "{body}");
}

/// `/openapi.json` is an OpenAPI 3.1 document of every route, each refusal typed as the
/// `{reason, message}` error body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_documents_every_route() {
    let db = TestDb::create(Kind::Sqlite).await;
    let store = db.open().await;
    let chains = LocalNetwork::new(31337, "http://127.0.0.1:1", &[Address::repeat_byte(0x11)]).chains();
    let api = ApiServer::start(&store, &chains).await;
    let (status, _, doc) = get(&api, "/openapi.json", None).await;
    assert_eq!(status, 200);
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        doc["openapi"]
    );
    for (path, method) in [
        ("/v1/payments/{network}/{payment}", "get"),
        ("/v1/payments/{network}/{payment}/history", "get"),
        ("/v1/payments/{network}/{payment}/proof", "get"),
        ("/v1/payments/{network}/{payment}/evidence", "get"),
        ("/v1/authorizations/{network}/{asset}/{payer}/{nonce}", "get"),
        ("/v1/payments:lookup", "post"),
        ("/v1/payments", "get"),
        ("/v1/totals", "get"),
        ("/v1/events", "get"),
        ("/v1/intents/reveal", "post"),
        ("/v1/reviews/verify", "post"),
        ("/v1/reviews", "get"),
        ("/v1/reviews/{network}/{payment}", "get"),
        ("/healthz", "get"),
        ("/metrics", "get"),
    ] {
        let operation = &doc["paths"][path][method];
        assert!(operation.is_object(), "{method} {path} is not documented");
        for (code, response) in operation["responses"].as_object().unwrap() {
            if code.starts_with('4') {
                let schema = &response["content"]["application/json"]["schema"]["$ref"];
                assert_eq!(schema, "#/components/schemas/ErrorBody", "{method} {path} {code}");
            }
        }
    }
    // Every schema a route or schema refers to is in the document.
    let mut refs = Vec::new();
    let mut todo = vec![&doc];
    while let Some(value) = todo.pop() {
        match value {
            Value::Object(map) => {
                if let Some(target) = map.get("$ref").and_then(|r| r.as_str()) {
                    refs.push(target.to_string());
                }
                todo.extend(map.values());
            }
            Value::Array(items) => todo.extend(items),
            _ => {}
        }
    }
    for target in &refs {
        let name = target.trim_start_matches("#/components/schemas/");
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "{target} is referred to but not in the document"
        );
    }
    let filters: Vec<&str> = doc["paths"]["/v1/payments"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for name in [
        "network", "payer", "pay_to", "asset", "state", "from", "to", "limit", "cursor",
    ] {
        assert!(filters.contains(&name), "{name} missing from {filters:?}");
    }
    // The reads a replica may answer document how to ask for the primary; the event
    // stream does not take it.
    let parameters = |path: &str, method: &str| -> Vec<String> {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .map(|p| p["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    for (path, method) in [
        ("/v1/payments/{network}/{payment}", "get"),
        ("/v1/payments:lookup", "post"),
        ("/v1/payments", "get"),
        ("/v1/totals", "get"),
        ("/v1/reviews/{network}/{payment}", "get"),
    ] {
        assert!(
            parameters(path, method).contains(&"consistency".to_string()),
            "{method} {path}"
        );
    }
    assert!(!parameters("/v1/events", "get").contains(&"consistency".to_string()));
    // The vocabulary (states, methods, causes, kinds, roles, rules, and the refusals'
    // reasons) is core's, listed in the document as enums and referred to by the views,
    // the error body and the listing's filters.
    let vocabulary = [
        ("PaymentState", spellings::<PaymentState>()),
        ("PaymentMethod", spellings::<PaymentMethod>()),
        ("EventKind", spellings::<EventKind>()),
        ("TransferRole", spellings::<TransferRole>()),
        ("RefundRule", spellings::<RefundRule>()),
        ("HistoryCause", spellings::<HistoryCause>()),
        ("EscrowEventKind", spellings::<EscrowEventKind>()),
        ("Reason", spellings::<Reason>()),
        ("TotalsKey", spellings::<TotalsKey>()),
        ("WorkerState", spellings::<WorkerState>()),
    ];
    for (name, expected) in vocabulary {
        let listed: Vec<&str> = doc["components"]["schemas"][name]["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{name} is not an enum in the document"))
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(listed, expected, "{name}");
        assert!(
            refs.contains(&format!("#/components/schemas/{name}")),
            "nothing refers to {name}"
        );
    }
    let listing = &doc["paths"]["/v1/payments"]["get"]["parameters"];
    for (filter, schema) in [("state", "PaymentState"), ("method", "PaymentMethod")] {
        let parameter = listing
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == filter)
            .unwrap();
        assert!(
            parameter["schema"]
                .to_string()
                .contains(&format!("#/components/schemas/{schema}")),
            "{filter}: {parameter}"
        );
    }
}
