//! Crash safety: `paywatch run` is killed with SIGKILL at random moments of a backfill
//! (EIP-3009, Permit2, upto and ERC-7710 payments, refunds and escrowed payments), many times, then restarted until it
//! catches up; the store must end up identical to a run that was never killed (and never
//! cross-checked: the killed runs read through a verifier that leaves logs out). On SQLite
//! and on Postgres.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use paywatch_store::Store;
use paywatch_tests::chain::Chain;
use paywatch_tests::delegation::pay_by_every_other_method;
use paywatch_tests::escrow::{EscrowKit, Terms};
use paywatch_tests::harness::{LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::proxy::{Faults, LogLies, RpcProxy};
use paywatch_tests::stores::{Kind, TestDb, dump};
use paywatch_tests::token::{Token, pay_in_turn};
use paywatch_tests::tools::{free_port, wait_serving};

/// A small deterministic generator (xorshift64), so every run kills at the same offsets.
struct Xorshift(u64);

impl Xorshift {
    fn next_below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

async fn killed_many_times_ends_identical_to_a_clean_run(kind: Kind) {
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    for payer in 1..=3 {
        token.mint(chain.account(payer), 1_000_000_000).await;
    }
    for i in 0..40u8 {
        pay_in_turn(&chain, &token, i, 3).await;
    }
    // Two plain transfers back from the seller: refunds by the matching rule.
    token.transfer(chain.account(5), chain.account(1), 100).await;
    token.transfer(chain.account(5), chain.account(2), 50).await;
    // Escrowed payments: a hold captured in part, a charge refunded in part, a void.
    let kit = EscrowKit::install(&chain, &token).await;
    token.mint(chain.account(6), 1_000_000).await;
    let terms = |max_amount| Terms {
        operator: chain.account(6),
        receiver: chain.account(7),
        fee_receiver: chain.account(8),
        max_amount,
        capture_within: 3_600,
        refund_within: 7_200,
        fee_bps: (0, 500),
        salt_nonce: None,
        salt_binding: None,
    };
    let held = kit.sign(1, terms(1_000)).await;
    kit.authorize(&held, 1_000).await;
    kit.capture(&held, 600, 100).await;
    let charged = kit.sign(2, terms(500)).await;
    kit.charge(&charged, 500, 0).await;
    kit.refund(&charged, 200).await;
    let voided = kit.sign(3, terms(300)).await;
    kit.authorize(&voided, 300).await;
    kit.void(&voided).await;
    // Permit2 exact and upto, and ERC-7710 redemptions (three payments in two transactions).
    pay_by_every_other_method(&chain, &token, (4, 5, 0)).await;
    chain.mine(400).await;
    let head = chain.block_number().await;
    let mut network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[token.address]);
    network.max_block_range = 1;
    let net = format!("eip155:{}", chain.chain_id());

    let clean_db = TestDb::create(kind).await;
    let clean_store = clean_db.open().await;
    sync(&mut worker(&network.chains(), &clean_store).await).await;
    clean_store.close().await;
    let expected = dump(&clean_db.url, &net).await;
    assert_eq!(expected.iter().filter(|l| l.starts_with("payments ")).count(), 48);
    // The two plain transfers back, and the escrow's refund.
    assert_eq!(expected.iter().filter(|l| l.starts_with("refunds ")).count(), 3);
    assert_eq!(
        expected
            .iter()
            .filter(|l| l.starts_with("escrow_events "))
            .count(),
        6
    );

    // The killed runs cross-check every range with a verifier that leaves out the logs of
    // a block in seven: the cross-check settles each difference by receipts, kill or not.
    let lies = LogLies {
        omit_blocks: (1..head).step_by(7).collect(),
        ..LogLies::default()
    };
    let verifier = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            log_lies: lies,
            ..Faults::default()
        },
    )
    .await;
    network.verify_rpc_url = Some(verifier.url.clone());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("chains.toml"), network.toml()).unwrap();
    let killed_db = TestDb::create(kind).await;
    let spawn = |stderr: Stdio, listen: &str| {
        Command::new(env!("CARGO_BIN_EXE_paywatch"))
            .current_dir(dir.path())
            .args(["--database-url", &killed_db.url, "run", "--listen", listen])
            .env("RUST_LOG", "warn")
            .env("PAYWATCH_GRPC_LISTEN", "127.0.0.1:0")
            // One replica restarted again and again: it takes its lease back at once.
            .env("PAYWATCH_REPLICA_ID", "crash-test")
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap()
    };
    let store = Store::open(&killed_db.url, &Default::default()).await.unwrap();
    let cursor = || async {
        store
            .cursors(&net)
            .await
            .unwrap()
            .first()
            .map_or(0, |c| c.next_block)
    };
    let mut random = Xorshift(0x5eed_1234_abcd_0042);
    let (mut kills, mut mid_backfill_kills, mut last_cursor) = (0, 0, 0);
    // 25 kills (more, up to 60, until 5 landed mid-backfill). Each run lives 40–300 ms
    // past `startup`; a run killed before it committed anything (a busy machine starts
    // paywatch slowly) lets the next ones live 100 ms longer.
    let mut startup = 0;
    while kills < 25 || (mid_backfill_kills < 5 && kills < 60) {
        let mut child = spawn(Stdio::null(), "127.0.0.1:0");
        tokio::time::sleep(Duration::from_millis(startup + 40 + random.next_below(260))).await;
        child.kill().unwrap();
        child.wait().unwrap();
        kills += 1;
        let now = cursor().await;
        if now > last_cursor && now <= head {
            mid_backfill_kills += 1;
        } else if now == last_cursor {
            startup = (startup + 100).min(2_000);
        }
        last_cursor = now;
    }
    assert!(
        mid_backfill_kills >= 5,
        "only {mid_backfill_kills} kills landed mid-backfill"
    );

    // Restart for good, wait until it serves and has read up to the head, then stop it.
    let listen = format!("127.0.0.1:{}", free_port());
    let child = spawn(Stdio::piped(), &listen);
    let deadline = Instant::now() + Duration::from_secs(120);
    wait_serving(&listen, Duration::from_secs(120)).await;
    loop {
        let caught_up = store
            .cursors(&net)
            .await
            .map(|c| c.first().map(|c| c.next_block) == Some(head + 1));
        let head_recorded = store.chain_head(&net).await.ok().flatten().map(|h| h.head_block) == Some(head);
        if caught_up.unwrap_or(false) && head_recorded {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "paywatch did not catch up after {kills} kills"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    store.close().await;

    let actual = dump(&killed_db.url, &net).await;
    assert_eq!(
        actual.len(),
        expected.len(),
        "same number of rows after {kills} kills"
    );
    assert_eq!(actual, expected, "identical store after {kills} kills");
    assert!(
        verifier.stats.logs_left_out() > 0,
        "the verifier's lies were read"
    );
}
on_both_stores!(
    killed_many_times_ends_identical_to_a_clean_run,
    killed_many_times_ends_identical_to_a_clean_run
);
