//! A seller who names its wallets (`pay_to` on an EVM network) is served only what can
//! concern them: the node is asked for transfers into or out of those wallets, so other
//! traffic never crosses the wire, payments to other sellers are not seen, and the
//! seller's own payments and refunds are exactly what a run without the filter finds —
//! including a batch where the same payer paid another seller first. Real anvil, real
//! EIP-3009 signatures, both stores.

use alloy::primitives::{Address, B256};
use paywatch_core::ids::lower_hex;
use paywatch_core::listing::PaymentFilter;
use paywatch_grpc::proto::ListTransfersRequest;
use paywatch_grpc::proto::payments_client::PaymentsClient;
use paywatch_tests::batch::Batcher;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{ApiServer, LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::proxy::{Faults, RpcProxy};
use paywatch_tests::stores::{Kind, PaymentFacts, TestDb, payment_facts};
use paywatch_tests::token::Token;
use std::sync::atomic::Ordering;

use serde_json::Value;

/// Indexes the chain through `rpc_url` into a fresh store with `pay_to` (none: every
/// transfer), and lists the payments to `seller`.
async fn payments_to(
    kind: Kind,
    chain: &Chain,
    token: &Token,
    rpc_url: &str,
    pay_to: &[Address],
    seller: Address,
) -> Vec<PaymentFacts> {
    let mut network = LocalNetwork::new(chain.chain_id(), rpc_url, &[token.address]);
    network.pay_to = pay_to.to_vec();
    let chains = network.chains();
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    sync(&mut worker(&chains, &store).await).await;
    let everyone = PaymentFilter::of(chains.networks[0].id.clone());
    let filter = PaymentFilter {
        pay_to: Some(lower_hex(seller)),
        ..everyone.clone()
    };
    let all = store.list_payments(&everyone, None, 1_000).await.unwrap();
    if !pay_to.is_empty() {
        assert!(
            all.iter()
                .all(|p| pay_to.iter().any(|w| lower_hex(w) == p.pay_to)),
            "only payments to the named wallets: {all:?}"
        );
    }
    payment_facts(&store, &filter).await
}

async fn a_seller_reads_only_its_own_traffic(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let (payer, seller, other_seller, facilitator) = (
        chain.signer(1),
        chain.signer(2),
        chain.account(4),
        chain.account(3),
    );
    token.mint(payer.address(), 1_000_000).await;
    token.mint(chain.account(5), 1_000_000).await;
    token
        .pay(
            &payer,
            seller.address(),
            10_000,
            B256::repeat_byte(1),
            facilitator,
        )
        .await;
    token
        .pay(&payer, other_seller, 20_000, B256::repeat_byte(2), facilitator)
        .await;
    // A batch: the payer pays the other seller first, then this seller.
    let batcher = Batcher::deploy(&chain).await;
    let elsewhere = token
        .authorize(&payer, other_seller, 300, B256::repeat_byte(3))
        .await;
    let here = token
        .authorize(&payer, seller.address(), 700, B256::repeat_byte(4))
        .await;
    let batch = batcher
        .settle(&[(&token, &elsewhere), (&token, &here)], facilitator)
        .await;
    // Traffic that concerns neither seller, and a plain refund by this seller.
    for i in 0..20u64 {
        token
            .transfer(chain.account(5), chain.account(6 + (i as usize % 3)), 1 + i)
            .await;
    }
    token.transfer(seller.address(), payer.address(), 10_000).await;
    token.transfer(other_seller, payer.address(), 20_000).await;
    chain.mine(3).await;

    let everything = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
    let unfiltered = payments_to(kind, &chain, &token, &everything.url, &[], seller.address()).await;
    let filtered_proxy = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
    let filtered = payments_to(
        kind,
        &chain,
        &token,
        &filtered_proxy.url,
        &[seller.address()],
        seller.address(),
    )
    .await;
    assert_eq!(
        filtered, unfiltered,
        "the seller's payments and refunds, as without the filter"
    );
    assert_eq!(filtered.len(), 2, "{filtered:?}");
    assert_eq!(
        filtered[0].state, "refunded",
        "the plain transfer back refunds the first: {filtered:?}"
    );
    let in_batch = &filtered[1];
    assert_eq!(in_batch.payment_id, lower_hex(batch.transaction_hash));
    assert_eq!(
        (
            in_batch.index_in_tx,
            in_batch.amount.as_str(),
            in_batch.nonce.as_deref()
        ),
        (1, "700", Some(lower_hex(B256::repeat_byte(4))).as_deref()),
        "its own authorization, number and amount, never the other seller's"
    );
    let served = |proxy: &RpcProxy| proxy.stats.logs_served.load(Ordering::SeqCst);
    assert!(
        served(&filtered_proxy) + 20 <= served(&everything),
        "the unrelated transfers never crossed the wire: {} against {}",
        served(&filtered_proxy),
        served(&everything)
    );
}
on_both_stores!(seller_wallets, a_seller_reads_only_its_own_traffic);

/// With `keep_transfers = "pay_to"` a seller keeps every transfer into or out of its
/// wallets — money in that is no payment, its own payments out — beside its payments and
/// refunds, and reads them back through `GET /v1/transfers` (JSON pages, CSV) and gRPC
/// `ListTransfers`, each with the payment it moved or refunds. Without it the same chain
/// keeps only the payment's transfer and the refund.
async fn a_seller_keeps_and_lists_all_its_transfers(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let (payer, seller, customer, supplier, facilitator) = (
        chain.signer(1),
        chain.signer(2),
        chain.account(5),
        chain.account(6),
        chain.account(3),
    );
    token.mint(payer.address(), 1_000_000).await;
    token.mint(customer, 1_000_000).await;
    let paid = token
        .pay(
            &payer,
            seller.address(),
            10_000,
            B256::repeat_byte(1),
            facilitator,
        )
        .await
        .transaction_hash;
    token.transfer(customer, seller.address(), 777).await;
    token.transfer(seller.address(), supplier, 55).await;
    for i in 0..5u64 {
        token.transfer(customer, chain.account(7), 1 + i).await;
    }
    token.transfer(seller.address(), payer.address(), 10_000).await;
    chain.mine(3).await;

    let kept_by = |keep: Option<&'static str>| {
        let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
        network.pay_to = vec![seller.address()];
        network.keep_transfers = keep;
        network.chains()
    };
    let plain_chains = kept_by(None);
    let plain_db = TestDb::create(kind).await;
    let plain_store = plain_db.open().await;
    sync(&mut worker(&plain_chains, &plain_store).await).await;
    let plain_api = ApiServer::start(&plain_store, &plain_chains).await;
    let (status, page) = plain_api.get("/v1/transfers?network=local").await;
    assert_eq!(status, 200, "{page}");
    let roles = |page: &Value| -> Vec<String> {
        page["transfers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["role"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        roles(&page),
        ["payment", "refund"],
        "the default keeps only these: {page}"
    );

    let chains = kept_by(Some("pay_to"));
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    sync(&mut worker(&chains, &store).await).await;
    let api = ApiServer::start(&store, &chains).await;
    let (status, page) = api.get("/v1/transfers?network=local").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(roles(&page), ["payment", "other", "other", "refund"], "{page}");
    let transfers = page["transfers"].as_array().unwrap();
    let seller_hex = lower_hex(seller.address());
    let facts: Vec<(String, String, String)> = transfers
        .iter()
        .map(|t| {
            (
                t["from"].as_str().unwrap().to_string(),
                t["to"].as_str().unwrap().to_string(),
                t["amount"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        facts,
        [
            (
                lower_hex(payer.address()),
                seller_hex.clone(),
                "10000".to_string()
            ),
            (lower_hex(customer), seller_hex.clone(), "777".to_string()),
            (seller_hex.clone(), lower_hex(supplier), "55".to_string()),
            (
                seller_hex.clone(),
                lower_hex(payer.address()),
                "10000".to_string()
            ),
        ]
    );
    assert_eq!(transfers[0]["payment"], lower_hex(paid));
    assert_eq!(
        transfers[3]["payment"],
        lower_hex(paid),
        "the refund names its payment"
    );
    assert_eq!(transfers[3]["refund_rule"], "matching");
    assert!(transfers.iter().all(|t| t["final"] == true), "{page}");
    assert!(transfers[1]["payment"].is_null() && transfers[1]["refund_rule"].is_null());

    // Filters, in any hex case, and pages of two.
    let (_, to_supplier) = api
        .get(&format!(
            "/v1/transfers?network=local&address={}",
            lower_hex(supplier).to_uppercase().replacen("0X", "0x", 1)
        ))
        .await;
    assert_eq!(roles(&to_supplier), ["other"], "{to_supplier}");
    let (_, into_seller) = api
        .get(&format!("/v1/transfers?network=local&to_address={seller_hex}"))
        .await;
    assert_eq!(roles(&into_seller), ["payment", "other"], "{into_seller}");
    let (_, first) = api.get("/v1/transfers?network=local&limit=2").await;
    assert_eq!((roles(&first).len(), &first["has_more"]), (2, &Value::Bool(true)));
    let cursor = first["next_cursor"].as_str().unwrap();
    let (_, second) = api
        .get(&format!("/v1/transfers?network=local&limit=2&cursor={cursor}"))
        .await;
    assert_eq!(roles(&second), ["other", "refund"]);
    assert_eq!(second["has_more"], false);

    // The CSV: every kept transfer, the same columns as JSON.
    let (status, csv) = api.get_csv("/v1/transfers?network=local").await;
    assert_eq!(status, 200, "{csv}");
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(str::to_string).collect();
    assert_eq!(
        header.join(","),
        "network,transaction,event_index,block_number,block_time,from,to,asset,asset_symbol,asset_decimals,amount,memo,final,role,payment,index_in_tx,refund_rule"
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let csv_roles: Vec<&str> = rows.iter().map(|r| &r[13]).collect();
    assert_eq!(csv_roles, ["payment", "other", "other", "refund"]);
    assert_eq!((&rows[3][10], &rows[3][16]), ("10000", "matching"));
    let (_, empty) = api
        .get_csv(&format!(
            "/v1/transfers?network=local&from_address={}",
            lower_hex(chain.account(9))
        ))
        .await;
    assert_eq!(empty, format!("{}\n", header.join(",")));

    // gRPC: the same page.
    let mut client = PaymentsClient::connect(api.grpc_url.clone())
        .await
        .expect("connect");
    let listed = client
        .list_transfers(ListTransfersRequest {
            network: "local".into(),
            ..Default::default()
        })
        .await
        .expect("ListTransfers")
        .into_inner();
    let grpc: Vec<(String, String, Option<String>)> = listed
        .transfers
        .iter()
        .map(|t| (t.transaction.clone(), t.role.clone(), t.payment.clone()))
        .collect();
    let http: Vec<(String, String, Option<String>)> = transfers
        .iter()
        .map(|t| {
            (
                t["transaction"].as_str().unwrap().to_string(),
                t["role"].as_str().unwrap().to_string(),
                t["payment"].as_str().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(grpc, http);

    // Bad input: a reason and how to fix it.
    for (path, reason) in [
        ("/v1/transfers", "malformed_query"),
        ("/v1/transfers?network=local&cursor=bogus", "malformed_query"),
        ("/v1/transfers?network=local&limit=0", "malformed_query"),
        ("/v1/transfers?network=local&payer=0x00", "malformed_query"),
    ] {
        let (status, body) = api.get(path).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (400, Some(reason)),
            "{path}: {body}"
        );
    }
    let (status, body) = api.get("/v1/transfers?network=local&address=0xnothex").await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("address"), "{body}");
}
on_both_stores!(kept_seller_transfers, a_seller_keeps_and_lists_all_its_transfers);
