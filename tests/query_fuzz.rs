//! Property test of the HTTP query surface: random paths and query strings (bad dates,
//! huge or negative numbers, unknown fields, odd encodings), payment and authorization
//! lookups among them, against a running API on a SQLite store never get a 5xx (but the
//! 503 of a network that has no final block yet), and every refusal carries a reason code.

use std::sync::OnceLock;

use alloy::primitives::Address;
use paywatch_tests::harness::{ApiServer, LocalNetwork};
use paywatch_tests::stores::{Kind, TestDb};
use proptest::prelude::*;

/// One API server (and its runtime) for every generated case.
struct Fixture {
    runtime: tokio::runtime::Runtime,
    api: ApiServer,
    _db: TestDb,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let (api, db) = runtime.block_on(async {
            let db = TestDb::create(Kind::Sqlite).await;
            let store = db.open().await;
            let chains =
                LocalNetwork::new(31337, "http://127.0.0.1:1", &[Address::repeat_byte(0x11)]).chains();
            (ApiServer::start(&store, &chains).await, db)
        });
        Fixture {
            runtime,
            api,
            _db: db,
        }
    })
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[0-9]{1,30}",
        "-[0-9]{1,5}",
        "0x[0-9a-fA-F]{0,70}",
        "[1-9A-HJ-NP-Za-km-z]{20,90}",
        "20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(Z|\\+0[0-9]:00)?",
        "(local|eip155:31337|eip155:0x1|solana:x|base|%00|%FF|..)",
        "(pending|paid|refunded|dropped|settled|day|asset|pay_to|week|method|eip3009|permit2|upto|spl)",
        "[ -~]{0,40}",
    ]
}

fn query() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("network"),
        Just("payer"),
        Just("pay_to"),
        Just("asset"),
        Just("state"),
        Just("method"),
        Just("from"),
        Just("to"),
        Just("limit"),
        Just("cursor"),
        Just("group_by"),
        Just("since"),
        Just("index"),
        Just("amount"),
        Just("bogus"),
    ];
    prop::collection::vec((key, value()), 0..6).prop_map(|pairs| {
        pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", v.replace(['&', '#', ' '], "%20")))
            .collect::<Vec<_>>()
            .join("&")
    })
}

fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("/v1/payments".to_string()),
        Just("/v1/totals".to_string()),
        (value(), value()).prop_map(|(n, p)| format!(
            "/v1/payments/{}/{}",
            n.replace(['/', '?', '#', ' '], "_"),
            p.replace(['/', '?', '#', ' '], "_")
        )),
        (value(), value(), value(), value()).prop_map(|(n, asset, payer, nonce)| {
            let segment = |s: String| s.replace(['/', '?', '#', ' '], "_");
            format!(
                "/v1/authorizations/{}/{}/{}/{}",
                segment(n),
                segment(asset),
                segment(payer),
                segment(nonce)
            )
        }),
    ]
}

/// The refusals that may be 503 here: the fixture's network has no final block and its
/// RPC does not answer, which a well-formed authorization lookup runs into.
const EXPECTED_UNAVAILABLE: [&str; 2] = ["network_not_synced", "rpc_unavailable"];

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_query_gets_a_server_error(path in path(), query in query()) {
        let fixture = fixture();
        let url = format!("{}{path}?{query}", fixture.api.base_url);
        let (status, body) = fixture.runtime.block_on(async {
            let response = reqwest::get(&url).await.expect("GET");
            let status = response.status().as_u16();
            (status, response.text().await.unwrap_or_default())
        });
        let reason = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["reason"].as_str().map(str::to_string));
        prop_assert!(
            status < 500
                || (status == 503 && reason.as_deref().is_some_and(|r| EXPECTED_UNAVAILABLE.contains(&r))),
            "{url} answered {status}: {body}"
        );
        if status >= 400 {
            prop_assert!(reason.is_some(), "{url} answered {status} without a reason: {body}");
        }
    }
}
