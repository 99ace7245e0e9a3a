//! Postgres going away under a running worker: every connection is cut, and new ones are
//! refused for a while, several times in the middle of a backfill (through a TCP proxy in
//! front of the real server). The worker retries and recovers by itself, and the store
//! ends identical to an undisturbed run: nothing lost, nothing doubled.

use std::time::{Duration, Instant};

use paywatch_evm::EvmWorker;
use paywatch_evm::rpc::EvmRpc;
use paywatch_store::Store;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, sync, worker};
use paywatch_tests::proxy::{Faults, RpcProxy};
use paywatch_tests::stores::{Kind, TEST_TIMEOUT, TestDb, dump};
use paywatch_tests::tcp_proxy::TcpProxy;
use paywatch_tests::token::{Token, pay_in_turn};
use tokio_util::sync::CancellationToken;

async fn restarts_during_ingest_lose_and_double_nothing() {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    for payer in 1..=2 {
        token.mint(chain.account(payer), 1_000_000).await;
    }
    for i in 0..30u8 {
        pay_in_turn(&chain, &token, i, 2).await;
    }
    token.transfer(chain.account(5), chain.account(1), 100).await;
    chain.mine(200).await;
    let head = chain.block_number().await;
    let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    network.max_block_range = 2;
    let net = format!("eip155:{}", chain.chain_id());
    // The restarted run reads one range at a time through a node 10 ms away, so the
    // backfill lasts long enough for the restarts to strike it (reading ahead on a local
    // node, it can end before the first).
    let slow_rpc = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            latency: Duration::from_millis(10),
            ..Faults::default()
        },
    )
    .await;
    let mut slow = network.clone();
    slow.rpc_url = slow_rpc.url.clone();
    slow.ranges_in_flight = Some(1);

    let clean_db = TestDb::create(Kind::Postgres).await;
    let clean_store = clean_db.open().await;
    sync(&mut worker(&network.chains(), &clean_store).await).await;
    clean_store.close().await;
    let expected = dump(&clean_db.url, &net).await;

    let db = TestDb::create(Kind::Postgres).await;
    let direct = db.open().await;
    let (proxy, through) = TcpProxy::in_front_of(&db.url).await;
    let store = Store::connect(&through, &Default::default()).await.unwrap();
    let config = slow.chains().networks[0].clone();
    let rpc = EvmRpc::connect(&net, &config.rpc_urls, config.rpc_timeout)
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(EvmWorker::new(config, store, rpc).run(shutdown.clone()));

    let cursor = async || {
        direct
            .cursors(&net)
            .await
            .unwrap()
            .first()
            .map_or(0, |c| c.next_block)
    };
    let mut restarts_mid_ingest = 0;
    for down_ms in [0, 300, 0, 800, 100, 0, 500] {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if cursor().await <= head {
            restarts_mid_ingest += 1;
        }
        proxy.restart(Duration::from_millis(down_ms));
    }
    assert!(
        restarts_mid_ingest >= 3,
        "only {restarts_mid_ingest} restarts hit the ingest"
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while cursor().await <= head {
        assert!(Instant::now() < deadline, "the worker did not recover");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shutdown.cancel();
    running.await.unwrap().unwrap();
    direct.close().await;
    assert_eq!(dump(&db.url, &net).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarts_during_ingest_lose_and_double_nothing() {
    tokio::time::timeout(TEST_TIMEOUT, restarts_during_ingest_lose_and_double_nothing())
        .await
        .expect("test timed out");
}
