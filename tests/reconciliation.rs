//! Reconciliation for finance teams through the real HTTP API, on SQLite and Postgres:
//! filtered listings paged with keyset cursors while new payments arrive, CSV parsed back,
//! exact totals by pay_to, asset and day, and bad parameters refused with reasons.

use alloy::primitives::{Address, B256, TxHash};
use alloy::signers::local::PrivateKeySigner;
use paywatch_core::ids::lower_hex;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{ApiServer, LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;
use serde_json::Value;

const FACILITATOR: usize = 3;

/// Every payment id of a listing, following `next_cursor` from `start` while `has_more`;
/// with the cursor where the listing ended.
async fn page_through(api: &ApiServer, query: &str, start: Option<String>) -> (Vec<String>, Option<String>) {
    let mut ids = Vec::new();
    let mut cursor = start;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/payments?{query}&cursor={c}"),
            None => format!("/v1/payments?{query}"),
        };
        let (status, page) = api.get(&path).await;
        assert_eq!(status, 200, "{page}");
        for p in page["payments"].as_array().unwrap() {
            ids.push(p["payment"].as_str().unwrap().to_string());
        }
        cursor = page["next_cursor"].as_str().map(str::to_string);
        if page["has_more"] == false {
            return (ids, cursor);
        }
    }
}

async fn listings_totals_and_csv(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let (alice, bob) = (chain.signer(1), chain.signer(5));
    let (shop, cafe) = (chain.account(2), chain.account(4));
    for payer in [&alice, &bob] {
        token.mint(payer.address(), 1_000_000).await;
    }
    let pay = |payer: &PrivateKeySigner, to: Address, amount: u64, nonce: u8| {
        let token = &token;
        let payer = payer.clone();
        let facilitator = chain.account(FACILITATOR);
        async move {
            token
                .pay(&payer, to, amount, B256::repeat_byte(nonce), facilitator)
                .await
                .transaction_hash
        }
    };
    let mut paid: Vec<TxHash> = Vec::new();
    paid.push(pay(&alice, shop, 1_000, 1).await);
    paid.push(pay(&alice, shop, 2_000, 2).await);
    paid.push(pay(&bob, shop, 3_000, 3).await);
    paid.push(pay(&alice, cafe, 4_000, 4).await);
    paid.push(pay(&bob, cafe, 5_000, 5).await);
    // The shop gives Alice 1,500 back: the matching rule ties it to her first payment it
    // fits (2,000), which becomes partially refunded.
    token.transfer(shop, alice.address(), 1_500).await;
    chain.mine(3).await;

    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    network.confirmations = 3;
    let chains = network.chains();
    let mut worker = worker(&chains, &store).await;
    sync(&mut worker).await;
    let api = ApiServer::start(&store, &chains).await;
    let ids: Vec<String> = paid.iter().map(lower_hex).collect();

    // Pages of two, in chain order, each payment once; then new payments arrive and the
    // last cursor picks up exactly them.
    let (listed, last_cursor) = page_through(&api, "network=local&limit=2", None).await;
    assert_eq!(listed, ids);
    let later = pay(&bob, shop, 6_000, 6).await;
    chain.mine(3).await;
    sync(&mut worker).await;
    let (resumed, _) = page_through(&api, "network=local&limit=2", last_cursor).await;
    assert_eq!(resumed, [lower_hex(later)]);

    // Filters, in any spelling of an address.
    let shop_upper = format!("0x{}", alloy::hex::encode_upper(shop));
    let (to_shop, _) = page_through(&api, &format!("network=local&pay_to={shop_upper}"), None).await;
    assert_eq!(
        to_shop,
        [ids[0].clone(), ids[1].clone(), ids[2].clone(), lower_hex(later)]
    );
    let (by_bob, _) = page_through(
        &api,
        &format!("network=eip155:{}&payer={}", chain.chain_id(), bob.address()),
        None,
    )
    .await;
    assert_eq!(by_bob, [ids[2].clone(), ids[4].clone(), lower_hex(later)]);
    let (partial, _) = page_through(&api, "network=local&state=partially_refunded", None).await;
    assert_eq!(partial, [ids[1].clone()]);
    let (none_yet, _) = page_through(
        &api,
        "network=local&from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z",
        None,
    )
    .await;
    assert!(none_yet.is_empty());
    let (all_today, _) = page_through(&api, "network=local&from=2000-01-01T00:00:00Z", None).await;
    assert_eq!(all_today.len(), 6);
    // A page exactly as long as what is left says there is no more.
    let (status, page) = api.get("/v1/payments?network=local&limit=6").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        (page["payments"].as_array().unwrap().len(), &page["has_more"]),
        (6, &Value::Bool(false)),
        "{page}"
    );
    let (_, page) = api.get("/v1/payments?network=local&limit=5").await;
    assert_eq!(page["has_more"], true, "{page}");

    // CSV: every row, parsed back, the same payments and exact amounts.
    let (status, csv) = api
        .get_csv(&format!("/v1/payments?network=local&pay_to={}", lower_hex(shop)))
        .await;
    assert_eq!(status, 200, "{csv}");
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(str::to_string).collect();
    assert_eq!(header[..3], ["network", "payment", "index_in_tx"]);
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let amounts: Vec<(&str, &str, &str)> = rows.iter().map(|r| (&r[1], &r[10], &r[12])).collect();
    assert_eq!(
        amounts,
        [
            (ids[0].as_str(), "1000", "paid"),
            (ids[1].as_str(), "2000", "partially_refunded"),
            (ids[2].as_str(), "3000", "paid"),
            (lower_hex(later).as_str(), "6000", "paid"),
        ]
    );
    let (_, empty) = api.get_csv("/v1/payments?network=local&state=dropped").await;
    assert_eq!(empty.lines().count(), 1, "only the header: {empty}");

    // Totals: exact sums and counts per pay_to, per asset and per day.
    let (status, totals) = api.get("/v1/totals?network=local&group_by=pay_to").await;
    assert_eq!(status, 200, "{totals}");
    let group = |key: Address| -> Value {
        totals["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["key"] == lower_hex(key))
            .cloned()
            .unwrap_or_else(|| panic!("no group {key}: {totals}"))
    };
    let shop_totals = group(shop);
    assert_eq!(shop_totals["payments"], 4);
    assert_eq!(shop_totals["final_amount"], "12000");
    assert_eq!(shop_totals["refunded_amount"], "1500");
    assert_eq!(shop_totals["by_state"]["partially_refunded"], 1);
    assert_eq!(group(cafe)["final_amount"], "9000");
    let (_, by_asset) = api.get("/v1/totals?network=local&group_by=asset").await;
    assert_eq!(by_asset["groups"][0]["key"], lower_hex(token.address));
    assert_eq!(by_asset["groups"][0]["final_amount"], "21000");
    let (_, by_day) = api.get("/v1/totals?network=local&group_by=day").await;
    let days = by_day["groups"].as_array().unwrap();
    assert_eq!(
        days.iter().map(|d| d["payments"].as_u64().unwrap()).sum::<u64>(),
        6
    );
    assert!(
        days.iter().all(|d| d["key"].as_str().unwrap().len() == 10),
        "{by_day}"
    );
    let (status, csv) = api.get_csv("/v1/totals?network=local&group_by=pay_to").await;
    assert_eq!(status, 200);
    assert!(
        csv.starts_with("key,payments,pending,paid,partially_refunded,refunded,dropped,"),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 3, "{csv}");

    // Bad parameters: 400 (or 404 for an unwatched network) with a reason, never a 500.
    for (path, status, reason) in [
        ("/v1/payments", 400, "malformed_query"),
        ("/v1/payments?network=local&limit=0", 400, "malformed_query"),
        ("/v1/payments?network=local&limit=1000000", 400, "malformed_query"),
        ("/v1/payments?network=local&limit=-1", 400, "malformed_query"),
        (
            "/v1/payments?network=local&cursor=12.0xab",
            400,
            "malformed_query",
        ),
        ("/v1/payments?network=local&state=settled", 400, "malformed_query"),
        (
            "/v1/payments?network=local&from=yesterday",
            400,
            "malformed_query",
        ),
        (
            "/v1/payments?network=local&from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z",
            400,
            "malformed_query",
        ),
        ("/v1/payments?network=local&pay_to=0x12", 400, "malformed_query"),
        ("/v1/payments?network=local&sort=amount", 400, "malformed_query"),
        ("/v1/payments?network=eip155:0x1", 400, "malformed_network"),
        ("/v1/payments?network=eip155:999", 404, "network_not_watched"),
        ("/v1/totals?network=local&group_by=week", 400, "malformed_query"),
        ("/v1/totals?network=local&limit=10", 400, "malformed_query"),
    ] {
        let (got, body) = api.get(path).await;
        assert_eq!(
            (got, body["reason"].as_str()),
            (status, Some(reason)),
            "{path}: {body}"
        );
    }
}
on_both_stores!(listings_totals_and_csv, listings_totals_and_csv);
