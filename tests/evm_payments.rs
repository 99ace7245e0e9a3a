//! x402 payments on a real anvil node, read by the EVM worker, answered by the HTTP API,
//! on SQLite and on Postgres.

use std::time::Duration;

use alloy::primitives::{Address, B256};
use paywatch_core::ids::lower_hex;
use paywatch_evm::worker::StepOutcome;
use paywatch_tests::batch::Batcher;
use paywatch_tests::chain::Chain;
use paywatch_tests::delegation::pay_by_every_other_method;
use paywatch_tests::harness::{ApiServer, LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::proxy::{Faults, RpcProxy, fault_seed};
use paywatch_tests::stores::{Kind, TestDb, chain_facts, dump};
use paywatch_tests::token::Token;

const PAYER: usize = 1;
const SELLER: usize = 2;
const FACILITATOR: usize = 3;
const OTHER_PAYER: usize = 4;

fn path(chain_id: u64, tx: impl AsRef<[u8]>) -> String {
    format!("/v1/payments/eip155:{chain_id}/{}", lower_hex(tx))
}

async fn funded_token(chain: &Chain) -> Token {
    let token = Token::deploy(chain).await;
    token.mint(chain.account(PAYER), 1_000_000_000).await;
    token.mint(chain.account(OTHER_PAYER), 1_000_000_000).await;
    token
}

async fn lookup_answers_exactly_what_moved(kind: Kind) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    let payer = chain.signer(PAYER);
    let nonce = B256::repeat_byte(0x42);
    let receipt = token
        .pay(
            &payer,
            chain.account(SELLER),
            10_000,
            nonce,
            chain.account(FACILITATOR),
        )
        .await;
    let plain = token
        .transfer(chain.account(PAYER), chain.account(SELLER), 777)
        .await;

    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    let chains = network.chains();
    let mut worker = worker(&chains, &store).await;
    sync(&mut worker).await;
    let api = ApiServer::start(&store, &chains).await;

    // The plain transfer was mined in the next block, so the payment has 2 confirmations:
    // exactly what `paid` needs in this configuration.
    let (status, body) = api.get(&path(chain.chain_id(), receipt.transaction_hash)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["network"], format!("eip155:{}", chain.chain_id()));
    assert_eq!(body["payment"], lower_hex(receipt.transaction_hash));
    assert_eq!(body["payer"], lower_hex(chain.account(PAYER)));
    assert_eq!(body["pay_to"], lower_hex(chain.account(SELLER)));
    assert_eq!(body["amount"], "10000");
    assert_eq!(body["asset"], lower_hex(token.address));
    assert_eq!(body["asset_symbol"], "USDC");
    assert_eq!(body["asset_decimals"], 6);
    assert_eq!(body["nonce"], lower_hex(nonce));
    assert_eq!(body["block_number"], receipt.block_number.unwrap());
    assert_eq!(body["block_hash"], lower_hex(receipt.block_hash.unwrap()));
    assert_eq!(body["confirmations"], 2);
    assert_eq!(body["payment_state"], "paid");
    assert!(body["block_time"].as_str().unwrap().ends_with('Z'), "{body}");

    // A plain transfer moved money but is no x402 payment.
    let (status, body) = api.get(&path(chain.chain_id(), plain.transaction_hash)).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (404, Some("payment_not_found")),
        "{body}"
    );

    // The same lookup through the alias, with the hash in upper case.
    let upper = format!("0x{}", alloy::hex::encode_upper(receipt.transaction_hash));
    let (status, body) = api.get(&format!("/v1/payments/local/{upper}")).await;
    assert_eq!((status, body["amount"].as_str()), (200, Some("10000")), "{body}");
}
on_both_stores!(
    lookup_answers_exactly_what_moved,
    lookup_answers_exactly_what_moved
);

/// With `facilitators` on an EVM network, a payment whose transaction one of them sent
/// names it (lookup, listing `facilitator=`, totals by facilitator); a payment another
/// account sent names none; and a network without them reads no sender at all.
async fn payments_name_the_facilitator_that_sent_them(kind: Kind) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    let (ours, theirs) = (chain.account(FACILITATOR), chain.account(7));
    let by_ours = token
        .pay(
            &chain.signer(PAYER),
            chain.account(SELLER),
            10_000,
            B256::repeat_byte(1),
            ours,
        )
        .await;
    let by_theirs = token
        .pay(
            &chain.signer(OTHER_PAYER),
            chain.account(SELLER),
            20_000,
            B256::repeat_byte(2),
            theirs,
        )
        .await;
    chain.mine(2).await;
    let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    network.facilitators = vec![ours];
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = network.chains();
    let mut labelling = worker(&chains, &store).await;
    sync(&mut labelling).await;
    let api = ApiServer::start(&store, &chains).await;

    let (_, body) = api.get(&path(chain.chain_id(), by_ours.transaction_hash)).await;
    assert_eq!(body["facilitator"], lower_hex(ours), "{body}");
    let (_, body) = api.get(&path(chain.chain_id(), by_theirs.transaction_hash)).await;
    assert!(body["facilitator"].is_null(), "{body}");
    let (status, body) = api
        .get(&format!(
            "/v1/payments?network=local&facilitator={}",
            lower_hex(ours)
        ))
        .await;
    assert_eq!(status, 200, "{body}");
    let listed: Vec<&str> = body["payments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["payment"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [lower_hex(by_ours.transaction_hash)]);
    let (status, body) = api.get("/v1/totals?network=local&group_by=facilitator").await;
    assert_eq!(status, 200, "{body}");
    let ours_total = body["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["key"] == lower_hex(ours))
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(ours_total["final_amount"], "10000", "{body}");

    // Without facilitators no sender is read: the same payments name none.
    let plain = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let mut plain_worker = worker(&plain.chains(), &store).await;
    sync(&mut plain_worker).await;
    let net = format!("eip155:{}", chain.chain_id());
    let stored = store
        .payments_by_id(&net, &lower_hex(by_ours.transaction_hash))
        .await
        .unwrap();
    assert_eq!(stored[0].facilitator, None);
}
on_both_stores!(
    payments_name_the_facilitator_that_sent_them,
    payments_name_the_facilitator_that_sent_them
);

async fn pending_until_deep_enough_then_paid(kind: Kind) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    network.confirmations = 3;
    let chains = network.chains();
    let mut worker = worker(&chains, &store).await;
    let api = ApiServer::start(&store, &chains).await;

    let receipt = token
        .pay(
            &chain.signer(PAYER),
            chain.account(SELLER),
            2_500,
            B256::repeat_byte(1),
            chain.account(FACILITATOR),
        )
        .await;
    let lookup = path(chain.chain_id(), receipt.transaction_hash);
    sync(&mut worker).await;
    let (_, body) = api.get(&lookup).await;
    assert_eq!(
        (body["payment_state"].as_str(), body["confirmations"].as_u64()),
        (Some("pending"), Some(1))
    );

    chain.mine(1).await;
    sync(&mut worker).await;
    let (_, body) = api.get(&lookup).await;
    assert_eq!(
        (body["payment_state"].as_str(), body["confirmations"].as_u64()),
        (Some("pending"), Some(2))
    );

    chain.mine(1).await;
    sync(&mut worker).await;
    let (_, body) = api.get(&lookup).await;
    assert_eq!(
        (body["payment_state"].as_str(), body["confirmations"].as_u64()),
        (Some("paid"), Some(3))
    );
}
on_both_stores!(
    pending_until_deep_enough_then_paid,
    pending_until_deep_enough_then_paid
);

async fn two_payments_in_one_block(kind: Kind) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    chain.set_automine(false).await;
    let first = token
        .authorize(
            &chain.signer(PAYER),
            chain.account(SELLER),
            1_000,
            B256::repeat_byte(0xa1),
        )
        .await;
    let second = token
        .authorize(
            &chain.signer(OTHER_PAYER),
            chain.account(SELLER),
            2_000,
            B256::repeat_byte(0xa2),
        )
        .await;
    let first_hash = *token.submit(&first, chain.account(FACILITATOR)).await.tx_hash();
    let second_hash = *token.submit(&second, chain.account(FACILITATOR)).await.tx_hash();
    chain.mine(1).await;
    chain.set_automine(true).await;
    chain.mine(2).await;

    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]).chains();
    let mut worker = worker(&chains, &store).await;
    sync(&mut worker).await;
    let api = ApiServer::start(&store, &chains).await;

    let (_, a) = api.get(&path(chain.chain_id(), first_hash)).await;
    let (_, b) = api.get(&path(chain.chain_id(), second_hash)).await;
    assert_eq!(a["block_number"], b["block_number"], "both in one block");
    assert_eq!(
        (a["payer"].as_str(), a["amount"].as_str()),
        (Some(lower_hex(chain.account(PAYER)).as_str()), Some("1000"))
    );
    assert_eq!(
        (b["payer"].as_str(), b["amount"].as_str()),
        (Some(lower_hex(chain.account(OTHER_PAYER)).as_str()), Some("2000"))
    );
    assert_eq!(
        (a["payment_state"].as_str(), b["payment_state"].as_str()),
        (Some("paid"), Some("paid"))
    );
    assert_eq!(
        store
            .row_counts(&chains.networks[0].id.to_string())
            .await
            .unwrap()
            .2,
        2
    );
}
on_both_stores!(two_payments_in_one_block, two_payments_in_one_block);

/// Makes `n` payments, one block each, from alternating payers; returns their tx hashes.
async fn spread_payments(chain: &Chain, token: &Token, n: u8) -> Vec<B256> {
    let mut hashes = Vec::new();
    for i in 0..n {
        let payer = if i % 2 == 0 { PAYER } else { OTHER_PAYER };
        let receipt = token
            .pay(
                &chain.signer(payer),
                chain.account(SELLER),
                100 + u64::from(i),
                B256::repeat_byte(i + 1),
                chain.account(FACILITATOR),
            )
            .await;
        hashes.push(receipt.transaction_hash);
        chain.mine(2).await;
    }
    hashes
}

async fn assert_all_indexed(api: &ApiServer, chain_id: u64, hashes: &[B256]) {
    for (i, hash) in hashes.iter().enumerate() {
        let (status, body) = api.get(&path(chain_id, hash)).await;
        assert_eq!(status, 200, "payment {i}: {body}");
        assert_eq!(body["amount"], (100 + i).to_string());
    }
}

async fn refused_ranges_are_still_indexed_completely(kind: Kind) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    let hashes = spread_payments(&chain, &token, 12).await;
    let proxy = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            max_log_range: Some(4),
            ..Faults::default()
        },
    )
    .await;

    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = LocalNetwork::new(chain.chain_id(), &proxy.url, &[token.address]).chains();
    let mut worker = worker(&chains, &store).await;
    sync(&mut worker).await;
    let api = ApiServer::start(&store, &chains).await;

    assert!(
        proxy
            .stats
            .refused_ranges
            .load(std::sync::atomic::Ordering::SeqCst)
            > 0,
        "the proxy refused wide ranges"
    );
    assert_all_indexed(&api, chain.chain_id(), &hashes).await;
    let (transfers, authorizations, payments) = store
        .row_counts(&chains.networks[0].id.to_string())
        .await
        .unwrap();
    assert_eq!(
        (transfers, authorizations, payments),
        (12, 0, 12),
        "12 payments (the mints can refund nothing and are not kept)"
    );
}
on_both_stores!(
    refused_ranges_are_still_indexed_completely,
    refused_ranges_are_still_indexed_completely
);

/// An `eth_getLogs` answer over `max_logs_answer_kib` is never read whole: paywatch stops
/// reading it and takes it as the node's "response too large", so a range whose blocks hold
/// more logs than expected is read in halves — memory bounded whatever the chain's
/// density — and the store holds exactly what an unlimited read stores. Other answers
/// (a block with its transactions) are read whole.
async fn logs_answers_over_the_limit_are_read_in_halves(kind: Kind) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    let hashes = spread_payments(&chain, &token, 12).await;
    let head = chain.block_number().await;

    // The transport itself: the whole chain's transfers are over 4 KiB, one block's are not.
    let limited = paywatch_evm::rpc::EvmRpc::connect(
        "limited",
        &[chain.endpoint().parse().unwrap()],
        Duration::from_secs(5),
    )
    .await
    .unwrap()
    .limit_logs_answers(4);
    let whole = limited
        .logs(
            &[token.address],
            &[paywatch_evm::decode::transfer_topic()],
            0,
            head,
        )
        .await;
    assert!(
        matches!(whole, Err(paywatch_evm::rpc::RpcFault::RangeTooLarge(ref why)) if why.contains("max_logs_answer_kib")),
        "{whole:?}"
    );
    let unlimited = paywatch_evm::rpc::EvmRpc::connect(
        "unlimited",
        &[chain.endpoint().parse().unwrap()],
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    let all = unlimited
        .logs(
            &[token.address],
            &[paywatch_evm::decode::transfer_topic()],
            0,
            head,
        )
        .await
        .unwrap();
    assert!(all.len() > 12, "every mint and payment: {}", all.len());
    let calls = limited.transaction_calls(&hashes).await.unwrap();
    assert!(
        calls.len() == hashes.len() && calls.iter().all(Option::is_some),
        "a batch answer over 4 KiB that is no eth_getLogs is read whole"
    );

    // The worker over the limit, and one without it, each behind a proxy that counts.
    let mut runs = Vec::new();
    for limit in [Some(4), None] {
        let proxy = RpcProxy::start(&chain.endpoint(), Faults::default()).await;
        let db = TestDb::create(kind).await;
        let store = db.open().await;
        let mut network = LocalNetwork::new(chain.chain_id(), &proxy.url, &[token.address]);
        network.max_logs_answer_kib = limit;
        let chains = network.chains();
        sync(&mut worker(&chains, &store).await).await;
        let api = ApiServer::start(&store, &chains).await;
        assert_all_indexed(&api, chain.chain_id(), &hashes).await;
        store.close().await;
        let requests = proxy.stats.requests.load(std::sync::atomic::Ordering::SeqCst);
        let facts = chain_facts(dump(&db.url, &chains.networks[0].id.to_string()).await);
        runs.push((requests, facts, db));
    }
    let (limited_requests, limited_facts, _) = &runs[0];
    let (unlimited_requests, unlimited_facts, _) = &runs[1];
    assert_eq!(limited_facts, unlimited_facts, "the same rows whatever the limit");
    assert!(
        limited_requests > unlimited_requests,
        "the limited worker read the chain in smaller ranges: {limited_requests} requests against {unlimited_requests}"
    );
}
on_both_stores!(
    logs_answers_over_the_limit_are_read_in_halves,
    logs_answers_over_the_limit_are_read_in_halves
);

async fn rate_limits_errors_and_stalls_lose_nothing(kind: Kind) {
    faults_lose_nothing(kind, false).await;
}

/// The same faults, with every range cross-checked by a verifier behind a faulty proxy of
/// its own (another seed): retries on either side never lose, double or invent a row.
async fn faults_lose_nothing_with_a_faulty_verifier(kind: Kind) {
    faults_lose_nothing(kind, true).await;
}

async fn faults_lose_nothing(kind: Kind, verified: bool) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    let hashes = spread_payments(&chain, &token, 8).await;
    // Permit2 exact and upto, and ERC-7710 redemptions: five payments in four transactions.
    pay_by_every_other_method(&chain, &token, (OTHER_PAYER + 1, SELLER, FACILITATOR)).await;
    let faults = |seed| Faults {
        max_log_range: Some(6),
        ..Faults::all(seed, 0.07, Duration::from_millis(1500))
    };
    let proxy = RpcProxy::start(&chain.endpoint(), faults(fault_seed())).await;
    let verifier = RpcProxy::start(&chain.endpoint(), faults(fault_seed().wrapping_add(1))).await;

    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let mut network = LocalNetwork::new(chain.chain_id(), &proxy.url, &[token.address]);
    network.verify_rpc_url = verified.then(|| verifier.url.clone());
    network.rpc_timeout_ms = 1000;
    network.max_block_range = 5;
    let chains = network.chains();
    let mut worker = worker(&chains, &store).await;
    sync(&mut worker).await;
    // Keep the worker reading new blocks until each kind of fault has struck.
    proxy
        .drive_until_every_fault(async || {
            chain.mine(1).await;
            let _ = worker.step().await;
        })
        .await;
    if verified {
        verifier
            .drive_until_every_fault(async || {
                chain.mine(1).await;
                let _ = worker.step().await;
            })
            .await;
    }
    sync(&mut worker).await;
    let api = ApiServer::start(&store, &chains).await;
    assert_all_indexed(&api, chain.chain_id(), &hashes).await;
    let counts = store
        .row_counts(&chains.networks[0].id.to_string())
        .await
        .unwrap();
    assert_eq!(
        counts,
        (13, 0, 13),
        "the payments' transfers, not the mints; no authorization but the payments' own"
    );

    // The store equals a run without faults.
    store.close().await;
    let clean_db = TestDb::create(kind).await;
    let clean_store = clean_db.open().await;
    let clean_chains = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]).chains();
    sync(&mut paywatch_tests::harness::worker(&clean_chains, &clean_store).await).await;
    clean_store.close().await;
    let net = chains.networks[0].id.to_string();
    assert_eq!(
        chain_facts(dump(&db.url, &net).await),
        chain_facts(dump(&clean_db.url, &net).await)
    );
}
on_both_stores!(
    rate_limits_errors_and_stalls_lose_nothing,
    rate_limits_errors_and_stalls_lose_nothing
);
on_both_stores!(
    faults_with_a_faulty_verifier,
    faults_lose_nothing_with_a_faulty_verifier
);

/// A backfill that reads several ranges of final blocks at once (through a provider that
/// answers slowly and refuses ranges over 4 blocks) stores exactly what one reading one
/// range at a time stores.
async fn reading_ahead_equals_reading_one_range_at_a_time(kind: Kind) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    let hashes = spread_payments(&chain, &token, 12).await;
    pay_by_every_other_method(&chain, &token, (OTHER_PAYER + 1, SELLER, FACILITATOR)).await;
    chain.mine(10).await;
    let faults = Faults {
        max_log_range: Some(4),
        latency: Duration::from_millis(5),
        ..Faults::default()
    };
    let mut runs = Vec::new();
    for ranges_in_flight in [1, 8] {
        let proxy = RpcProxy::start(&chain.endpoint(), faults.clone()).await;
        let db = TestDb::create(kind).await;
        let store = db.open().await;
        let mut network = LocalNetwork::new(chain.chain_id(), &proxy.url, &[token.address]);
        // Wider than the provider allows: the first range is refused and halved.
        network.max_block_range = 8;
        network.ranges_in_flight = Some(ranges_in_flight);
        let chains = network.chains();
        sync(&mut worker(&chains, &store).await).await;
        let api = ApiServer::start(&store, &chains).await;
        assert_all_indexed(&api, chain.chain_id(), &hashes).await;
        let net = chains.networks[0].id.to_string();
        assert_eq!(store.row_counts(&net).await.unwrap(), (17, 0, 17));
        store.close().await;
        runs.push((chain_facts(dump(&db.url, &net).await), proxy));
    }
    let (serial, ahead) = (&runs[0], &runs[1]);
    assert_eq!(serial.0, ahead.0, "the same rows, numbers and states");
    let most = |run: &(Vec<String>, RpcProxy)| {
        run.1
            .stats
            .most_in_flight
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    assert!(
        most(ahead) > most(serial),
        "requests in flight at once: {} against {}",
        most(ahead),
        most(serial)
    );
}
on_both_stores!(
    reading_ahead_equals_reading_one_range_at_a_time,
    reading_ahead_equals_reading_one_range_at_a_time
);

async fn restart_resumes_from_cursor_without_duplicates(kind: Kind) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    let hashes = spread_payments(&chain, &token, 10).await;
    // More blocks than one step reads (eight ranges of three).
    chain.mine(40).await;
    let db = TestDb::create(kind).await;
    let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    network.max_block_range = 3;
    let chains = network.chains();
    let net = chains.networks[0].id.to_string();

    // First run: a few batches, then the process "stops".
    let cursor = {
        let store = db.open().await;
        let mut first = worker(&chains, &store).await;
        let StepOutcome::Committed { to: committed_to, .. } = first.step().await.unwrap() else {
            panic!("expected a committed step");
        };
        let cursor = store.cursors(&net).await.unwrap()[0].next_block;
        assert_eq!(
            cursor,
            committed_to + 1,
            "the cursor follows the last range committed"
        );
        assert!(cursor < chain.block_number().await, "stopped before the head");
        store.close().await;
        cursor
    };
    // Second run, new store handle: resumes at the cursor.
    let store = db.open().await;
    let mut second = worker(&chains, &store).await;
    let outcomes = sync(&mut second).await;
    let StepOutcome::Committed { from, .. } = outcomes[0] else {
        panic!("expected a committed batch first, got {:?}", outcomes[0]);
    };
    assert_eq!(from, cursor, "resumed at the committed cursor");
    // A third pass over everything (cursor reset by hand) must not duplicate anything either.
    store.rollback_after(&net, 0).await.unwrap();
    sync(&mut second).await;

    let api = ApiServer::start(&store, &chains).await;
    assert_all_indexed(&api, chain.chain_id(), &hashes).await;
    assert_eq!(
        store.row_counts(&net).await.unwrap(),
        (10, 0, 10),
        "the payments' transfers, not the mints"
    );
}
on_both_stores!(
    restart_resumes_from_cursor_without_duplicates,
    restart_resumes_from_cursor_without_duplicates
);

async fn bad_requests_get_reasons(kind: Kind) {
    let chain = Chain::start().await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[Address::repeat_byte(7)]).chains();
    let api = ApiServer::start(&store, &chains).await;
    let good = "0x".to_string() + &"ab".repeat(32);
    for (path, status, reason) in [
        (format!("/v1/payments/8453/{good}"), 400, "malformed_network"),
        (
            format!("/v1/payments/eip155:0x1/{good}"),
            400,
            "malformed_network",
        ),
        (format!("/v1/payments/base/{good}"), 404, "network_not_watched"),
        (
            format!("/v1/payments/eip155:1/{good}"),
            404,
            "network_not_watched",
        ),
        ("/v1/payments/local/0x1234".to_string(), 400, "malformed_payment"),
        (
            format!("/v1/payments/local/{}", &good[2..]),
            400,
            "malformed_payment",
        ),
        (
            format!("/v1/payments/local/0x{}", "zz".repeat(32)),
            400,
            "malformed_payment",
        ),
        (
            format!("/v1/payments/local/{good}?index=x"),
            400,
            "malformed_query",
        ),
        (
            format!("/v1/payments/local/{good}?colour=red"),
            400,
            "malformed_query",
        ),
        (format!("/v1/payments/local/{good}"), 404, "payment_not_found"),
        ("/v2/anything".to_string(), 404, "route_not_found"),
    ] {
        let (got, body) = api.get(&path).await;
        assert_eq!(
            (got, body["reason"].as_str()),
            (status, Some(reason)),
            "{path}: {body}"
        );
        assert!(
            !body["message"].as_str().unwrap_or_default().is_empty(),
            "{path}: message"
        );
    }
    let health = reqwest::get(format!("{}/healthz", api.base_url)).await.unwrap();
    assert_eq!(health.status().as_u16(), 200);
}
on_both_stores!(bad_requests_get_reasons, bad_requests_get_reasons);

async fn websocket_heads_wake_the_worker(kind: Kind) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let ws_url = chain.endpoint().replace("http://", "ws://");
    let mut network = LocalNetwork::new(chain.chain_id(), &ws_url, &[token.address]);
    // Polling alone would not look again for a minute: only the newHeads subscription can
    // make the worker see the payment within the deadline below.
    network.poll_interval_ms = 60_000;
    let chains = network.chains();
    let net = chains.networks[0].id.to_string();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(worker(&chains, &store).await.run(shutdown.clone()));
    while store.chain_head(&net).await.unwrap().is_none() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let receipt = token
        .pay(
            &chain.signer(PAYER),
            chain.account(SELLER),
            31,
            B256::repeat_byte(3),
            chain.account(FACILITATOR),
        )
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let hash = lower_hex(receipt.transaction_hash);
    while store.payments_by_id(&net, &hash).await.unwrap().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the new head did not wake the worker"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(store.payments_by_id(&net, &hash).await.unwrap()[0].amount, "31");
    shutdown.cancel();
    task.await.unwrap().unwrap();
}
on_both_stores!(websocket_heads_wake_the_worker, websocket_heads_wake_the_worker);

/// The provider forms of the lookup: the `expect` form answers which facts match, with the
/// review v1 reason codes, and the batch form answers many lookups in one call.
async fn expect_form_and_batch_lookup(kind: Kind) {
    let chain = Chain::start().await;
    let token = funded_token(&chain).await;
    let (payer, seller) = (chain.account(PAYER), chain.account(SELLER));
    let paid = token
        .pay(
            &chain.signer(PAYER),
            seller,
            10_000,
            B256::repeat_byte(1),
            chain.account(FACILITATOR),
        )
        .await;
    chain.mine(2).await;
    let pending = token
        .pay(
            &chain.signer(PAYER),
            seller,
            500,
            B256::repeat_byte(2),
            chain.account(FACILITATOR),
        )
        .await;
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let chains = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]).chains();
    let mut worker = worker(&chains, &store).await;
    sync(&mut worker).await;
    let api = ApiServer::start(&store, &chains).await;
    let expect = |tx: B256, query: String| {
        let api = &api;
        let path = format!("{}?{query}", path(chain.chain_id(), tx));
        async move { api.get(&path).await }
    };

    // Everything as expected (addresses in any case).
    let all_four = format!(
        "payer={payer}&pay_to={}&amount=10000&asset={}",
        lower_hex(seller),
        lower_hex(token.address)
    );
    let (status, body) = expect(paid.transaction_hash, all_four).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["expectation"]["matches"], true, "{body}");
    assert_eq!(body["expectation"]["reasons"], serde_json::json!([]));
    // Each wrong fact with its code, and both values.
    let (_, body) = expect(
        paid.transaction_hash,
        format!(
            "payer={}&pay_to={}&amount=9999&asset={}",
            lower_hex(seller),
            lower_hex(payer),
            lower_hex(seller)
        ),
    )
    .await;
    assert_eq!(
        body["expectation"]["reasons"],
        serde_json::json!([
            "payer_mismatch",
            "v1_pay_to_mismatch",
            "v1_amount_mismatch",
            "v1_asset_mismatch"
        ]),
        "{body}"
    );
    assert_eq!(body["expectation"]["mismatches"][2]["chain"], "10000");
    assert_eq!(body["expectation"]["mismatches"][2]["expected"], "9999");
    // Right facts, not final yet.
    let (_, body) = expect(pending.transaction_hash, "amount=500".to_string()).await;
    assert_eq!(
        body["expectation"]["reasons"],
        serde_json::json!(["payment_not_final"]),
        "{body}"
    );
    // No expectation asked: none answered.
    let (_, body) = api.get(&path(chain.chain_id(), paid.transaction_hash)).await;
    assert!(body.get("expectation").is_none(), "{body}");
    // Malformed expectations are refused.
    for query in ["amount=010000", "amount=1.5", "payer=0x12", "pay_to=bob"] {
        let (status, body) = expect(paid.transaction_hash, query.to_string()).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (400, Some("malformed_query")),
            "{query}: {body}"
        );
    }

    // Batch: answers in request order, each found or with its reason.
    let missing = B256::repeat_byte(0xee);
    let request = serde_json::json!({"lookups": [
        {"network": "local", "payment": lower_hex(paid.transaction_hash)},
        {"network": format!("eip155:{}", chain.chain_id()), "payment": lower_hex(missing)},
        {"network": "local", "payment": "0x1234"},
        {"network": "eip155:999", "payment": lower_hex(paid.transaction_hash)},
        {"network": "local", "payment": lower_hex(pending.transaction_hash), "index": 0},
    ]});
    let (status, body) = api.post("/v1/payments:lookup", &request).await;
    assert_eq!(status, 200, "{body}");
    let results = body["results"].as_array().unwrap();
    let summary: Vec<(Option<&str>, Option<&str>)> = results
        .iter()
        .map(|r| (r["payment"]["payment_state"].as_str(), r["reason"].as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            (Some("paid"), None),
            (None, Some("payment_not_found")),
            (None, Some("malformed_payment")),
            (None, Some("network_not_watched")),
            (Some("pending"), None),
        ]
    );
    assert_eq!(results[0]["payment"]["amount"], "10000");
    let too_many: Vec<serde_json::Value> = (0..1001)
        .map(|_| serde_json::json!({"network": "local", "payment": lower_hex(missing)}))
        .collect();
    let (status, body) = api
        .post("/v1/payments:lookup", &serde_json::json!({ "lookups": too_many }))
        .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (413, Some("payload_too_large")),
        "{body}"
    );
    let (status, body) = api
        .post("/v1/payments:lookup", &serde_json::json!({"lookup": []}))
        .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("malformed_body")),
        "{body}"
    );
}
on_both_stores!(expect_form_and_batch_lookup, expect_form_and_batch_lookup);

/// One transaction settles a payment in token A, then one in token B (a facilitator's
/// batch). Watching B alone, B's payment is #1: its authorization is the transaction's
/// second `AuthorizationUsed`, whoever emitted the first. Adding A later, on the same store,
/// finds A's payment as #0 and leaves B's as it was: no renumbering, no refusal, the
/// same history.
async fn a_token_added_later_never_renumbers_a_payment(kind: Kind) {
    let chain = Chain::start().await;
    let (usdc, other) = (funded_token(&chain).await, funded_token(&chain).await);
    let payer = chain.signer(PAYER);
    let seller = chain.account(SELLER);
    let batcher = Batcher::deploy(&chain).await;
    let first = usdc.authorize(&payer, seller, 100, B256::repeat_byte(0xa1)).await;
    let second = other
        .authorize(&payer, seller, 200, B256::repeat_byte(0xb2))
        .await;
    let receipt = batcher
        .settle(&[(&usdc, &first), (&other, &second)], chain.account(FACILITATOR))
        .await;
    chain.mine(3).await;
    let tx = path(chain.chain_id(), receipt.transaction_hash);
    let at = |index: u32| format!("{tx}?index={index}");

    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let only_other = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[other.address]).chains();
    let net = only_other.networks[0].id.to_string();
    sync(&mut worker(&only_other, &store).await).await;
    let api = ApiServer::start(&store, &only_other).await;
    let (status, body) = api.get(&tx).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["index_in_tx"], &body["amount"], &body["payment_state"]),
        (
            &serde_json::json!(1),
            &serde_json::json!("200"),
            &serde_json::json!("paid")
        ),
        "{body}"
    );
    let id = lower_hex(receipt.transaction_hash);
    let history_before = store.history_of(&net, &id, 1).await.unwrap();
    drop(api);

    let both = LocalNetwork::new(
        chain.chain_id(),
        &chain.endpoint(),
        &[usdc.address, other.address],
    )
    .chains();
    // Every step commits (a refusal of B's stored payment would fail the step).
    sync(&mut worker(&both, &store).await).await;
    let api = ApiServer::start(&store, &both).await;
    for (index, amount, asset) in [(0, "100", usdc.address), (1, "200", other.address)] {
        let (status, body) = api.get(&at(index)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["amount"], amount, "{body}");
        assert_eq!(body["asset"], lower_hex(asset), "{body}");
    }
    let (status, body) = api.get(&tx).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("one of 0, 1"),
        "{body}"
    );
    assert_eq!(store.history_of(&net, &id, 1).await.unwrap(), history_before);
}
on_both_stores!(
    a_token_added_later_never_renumbers,
    a_token_added_later_never_renumbers_a_payment
);
