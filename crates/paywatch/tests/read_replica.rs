//! Reads served by a Postgres streaming replica: a real hot standby of the test server
//! (`pg_basebackup`, streaming replication) behind `paywatch run --role api
//! --read-database-url`. Lookups, listings and gRPC calls are answered by the replica
//! while it is fresh, say so and how far it lags; `consistency=primary` reads the
//! primary; a replica whose replay is paused answers from what it has until it lags more
//! than `--read-max-lag`, then reads go to the primary until it catches up; a replica
//! that goes away sends reads to the primary, and answers again when it is back; an API
//! started while it is down reads from the primary until it answers. A read database
//! that is not a standby of the primary, or that the server does not know, is refused at
//! start.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use alloy::primitives::Address;
use paywatch_core::ids::lower_hex;
use paywatch_grpc::proto::GetPaymentRequest;
use paywatch_grpc::proto::payments_client::PaymentsClient;
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{LocalNetwork, sync, worker};
use paywatch_tests::standby::Standby;
use paywatch_tests::stores::{Kind, TEST_TIMEOUT, TestDb};
use paywatch_tests::token::{Token, pay_in_turn};
use paywatch_tests::tools::{free_port, output_text, paywatch_on, wait_serving};

/// The most the replica may lag in these tests.
const MAX_LAG: Duration = Duration::from_secs(1);

/// A `paywatch run --role api` process reading from a replica.
struct ApiProcess {
    child: Child,
    http: String,
    grpc: String,
}

impl ApiProcess {
    fn start(dir: &std::path::Path, primary: &str, replica: &str) -> Self {
        let (http, grpc) = (
            format!("127.0.0.1:{}", free_port()),
            format!("127.0.0.1:{}", free_port()),
        );
        let max_lag = MAX_LAG.as_secs_f64().to_string();
        let child = paywatch_on(env!("CARGO_BIN_EXE_paywatch"), dir, primary, &[])
            .args(["run", "--role", "api", "--listen", &http, "--grpc-listen", &grpc])
            .args(["--read-database-url", replica, "--read-max-lag", &max_lag])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self { child, http, grpc }
    }
}

impl Drop for ApiProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP answer: status, where it was read, the lag it reported, the fallback reason.
#[derive(Debug)]
struct Answer {
    status: u16,
    read_from: String,
    lag_ms: Option<u64>,
    fallback: Option<String>,
    body: serde_json::Value,
}

async fn get(api: &ApiProcess, path: &str) -> Answer {
    let response = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
        .get(format!("http://{}{path}", api.http))
        .send()
        .await
        .unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    let (read_from, lag_ms, fallback) = (
        header("paywatch-read-from").unwrap_or_default(),
        header("paywatch-replica-lag-ms").map(|v| v.parse().unwrap()),
        header("paywatch-replica-fallback"),
    );
    Answer {
        status: response.status().as_u16(),
        read_from,
        lag_ms,
        fallback,
        body: response.json().await.unwrap_or_default(),
    }
}

/// Asks `path` until `done` holds of the answer (checking `each` of every answer before),
/// for at most 30 s.
async fn until(
    api: &ApiProcess,
    path: &str,
    mut each: impl FnMut(&Answer),
    done: impl Fn(&Answer) -> bool,
) -> Answer {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = get(api, path).await;
        if done(&answer) {
            return answer;
        }
        each(&answer);
        assert!(Instant::now() < deadline, "still {answer:?} after 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn replica_reads() {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    for payer in 1..=2 {
        token.mint(chain.account(payer), 1_000_000).await;
    }
    let mut paid = Vec::new();
    for i in 0..3u8 {
        paid.push(lower_hex(
            pay_in_turn(&chain, &token, i, 2).await.transaction_hash,
        ));
    }
    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    let net = format!("eip155:{}", chain.chain_id());
    let db = TestDb::create(Kind::Postgres).await;
    let store = db.open().await;
    sync(&mut worker(&network.chains(), &store).await).await;

    let mut standby = match Standby::start().await {
        Ok(standby) => standby,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    standby.catch_up().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();
    let api = ApiProcess::start(dir.path(), &db.url, &standby.url_like(&db.url));
    wait_serving(&api.http, Duration::from_secs(60)).await;

    // Fresh: the replica answers, and says at most how far behind it is.
    let lookup = format!("/v1/payments/{net}/{}", paid[0]);
    let answer = until(&api, &lookup, |_| {}, |a| a.read_from == "replica").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.fallback, None);
    assert!(answer.lag_ms.unwrap() <= MAX_LAG.as_millis() as u64, "{answer:?}");
    let from_primary = get(&api, &format!("{lookup}?consistency=primary")).await;
    assert_eq!(
        (
            from_primary.status,
            from_primary.read_from.as_str(),
            from_primary.fallback
        ),
        (200, "primary", None),
        "asked of the primary"
    );
    assert_eq!(
        from_primary.body, answer.body,
        "both databases answer the same payment"
    );
    let listing = until(
        &api,
        &format!("/v1/payments?network={net}"),
        |_| {},
        |a| a.read_from == "replica",
    )
    .await;
    assert_eq!(
        listing.body["payments"].as_array().unwrap().len(),
        3,
        "{listing:?}"
    );
    let refused = get(&api, &format!("{lookup}?consistency=fresh")).await;
    assert_eq!(
        (refused.status, refused.body["reason"].as_str()),
        (400, Some("malformed_query"))
    );

    // gRPC: the same routing, by metadata.
    let mut client = PaymentsClient::connect(format!("http://{}", api.grpc))
        .await
        .unwrap();
    let mut request = tonic::Request::new(GetPaymentRequest {
        network: net.clone(),
        payment: paid[1].clone(),
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("paywatch-consistency", "primary".parse().unwrap());
    let response = client.get_payment(request).await.unwrap();
    assert_eq!(response.metadata().get("paywatch-read-from").unwrap(), "primary");
    assert_eq!(response.get_ref().payment, paid[1]);
    let response = client
        .get_payment(GetPaymentRequest {
            network: net.clone(),
            payment: paid[1].clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(response.metadata().get("paywatch-read-from").unwrap(), "replica");

    // Replay paused: a payment the primary stores is unknown to the replica, which keeps
    // answering while it lags at most the bound; past it, reads go to the primary.
    standby.pause_replay().await;
    let late = lower_hex(pay_in_turn(&chain, &token, 3, 2).await.transaction_hash);
    sync(&mut worker(&network.chains(), &store).await).await;
    let late_lookup = format!("/v1/payments/{net}/{late}");
    let mut stale_answers = 0;
    let fallen_back = until(
        &api,
        &late_lookup,
        |stale| {
            assert_eq!(
                (stale.status, stale.read_from.as_str(), stale.fallback.as_deref()),
                (404, "replica", None),
                "only the replica, within its bound, does not know the payment yet: {stale:?}"
            );
            assert!(stale.lag_ms.unwrap() <= MAX_LAG.as_millis() as u64, "{stale:?}");
            stale_answers += 1;
        },
        |a| a.status == 200,
    )
    .await;
    assert_eq!(
        (fallen_back.read_from.as_str(), fallen_back.fallback.as_deref()),
        ("primary", Some("lagging")),
        "{fallen_back:?}"
    );
    assert!(
        fallen_back.lag_ms.unwrap() > MAX_LAG.as_millis() as u64,
        "{fallen_back:?}"
    );
    let fresh = get(&api, &format!("{late_lookup}?consistency=primary")).await;
    assert_eq!(
        (fresh.status, fresh.fallback.as_deref()),
        (200, None),
        "{fresh:?}"
    );

    // Caught up: the replica answers again, the late payment too.
    standby.resume_replay().await;
    let caught_up = until(&api, &late_lookup, |_| {}, |a| a.read_from == "replica").await;
    assert_eq!(caught_up.status, 200, "{caught_up:?}");

    // Gone: reads go to the primary.
    standby.stop();
    let gone = until(
        &api,
        &lookup,
        |_| {},
        |a| a.fallback.as_deref() == Some("unreachable"),
    )
    .await;
    assert_eq!(
        (gone.status, gone.read_from.as_str()),
        (200, "primary"),
        "{gone:?}"
    );

    // The next sample finds the replica gone (within its probe's timeout).
    let deadline = Instant::now() + Duration::from_secs(30);
    let metrics = loop {
        let metrics = reqwest::get(format!("http://{}/metrics", api.http))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if metrics.contains("paywatch_replica_up 0") || Instant::now() > deadline {
            break metrics;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for series in [
        "paywatch_reads_total{source=\"replica\"}",
        "paywatch_reads_total{source=\"primary\"}",
        "paywatch_replica_fallbacks_total{reason=\"lagging\"}",
        "paywatch_replica_fallbacks_total{reason=\"unreachable\"}",
        "paywatch_replica_up 0",
        "paywatch_replica_lag_seconds",
    ] {
        assert!(
            metrics.contains(series),
            "{series} missing from /metrics:\n{metrics}"
        );
    }

    // An API started while the standby is down starts, and reads from the primary.
    let started_without = ApiProcess::start(dir.path(), &db.url, &standby.url_like(&db.url));
    wait_serving(&started_without.http, Duration::from_secs(60)).await;
    let without = get(&started_without, &lookup).await;
    assert_eq!(
        (
            without.status,
            without.read_from.as_str(),
            without.fallback.as_deref()
        ),
        (200, "primary", Some("unreachable")),
        "{without:?}"
    );

    // Back: once the standby answers (and, for the API that never reached it, is checked
    // to be a standby of the primary), both read from it again.
    standby.start_server().await;
    standby.catch_up().await;
    for api in [&api, &started_without] {
        let back = until(api, &late_lookup, |_| {}, |a| a.read_from == "replica").await;
        assert_eq!((back.status, back.fallback.as_deref()), (200, None), "{back:?}");
    }
    eprintln!("{stale_answers} stale answers from the replica within its bound before the fallback");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_replica_answers_while_fresh_and_the_primary_otherwise() {
    tokio::time::timeout(TEST_TIMEOUT, replica_reads())
        .await
        .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_database_that_is_not_a_standby_of_the_primary_is_refused() {
    let db = TestDb::create(Kind::Postgres).await;
    db.open().await.close().await;
    let dir = tempfile::tempdir().unwrap();
    let network = LocalNetwork::new(31337, "http://127.0.0.1:1", &[Address::repeat_byte(0x11)]);
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();
    let refused = |args: &[&str]| {
        let output: std::process::Output =
            paywatch_on(env!("CARGO_BIN_EXE_paywatch"), dir.path(), &db.url, &[])
                .args(["run", "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"])
                .args(args)
                .output()
                .unwrap();
        assert!(!output.status.success(), "{args:?} must be refused");
        output_text(&output)
    };
    let itself = refused(&["--role", "api", "--read-database-url", &db.url]);
    assert!(itself.contains("not a hot standby"), "{itself}");
    let unknown_database = format!("{}_no_such_database", db.url);
    let unknown = refused(&["--role", "api", "--read-database-url", &unknown_database]);
    assert!(unknown.contains("does not exist"), "{unknown}");
    let workers = refused(&["--role", "workers", "--read-database-url", &db.url]);
    assert!(
        workers.contains("a --role workers process serves none"),
        "{workers}"
    );
    let lag = refused(&[
        "--role",
        "api",
        "--read-database-url",
        &db.url,
        "--read-max-lag",
        "0",
    ]);
    assert!(lag.contains("not a number of seconds above zero"), "{lag}");
    let sqlite = format!("sqlite://{}", dir.path().join("paywatch.db").display());
    let output = Command::new(env!("CARGO_BIN_EXE_paywatch"))
        .current_dir(dir.path())
        .args([
            "--database-url",
            &sqlite,
            "run",
            "--role",
            "api",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--grpc-listen", "127.0.0.1:0", "--read-database-url", &db.url])
        .env_remove("PAYWATCH_DATABASE_URL")
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        output_text(&output).contains("must name a Postgres streaming replica"),
        "{}",
        output_text(&output)
    );
}
