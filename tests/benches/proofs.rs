//! Proof benchmark: one anvil block holding N transactions (default 1,000;
//! `PAYWATCH_BENCH_PROOF_RECEIPTS`) — plain token transfers and one EIP-3009 payment — then
//! the time to build the payment's receipt proof from the node (the header, the block's
//! receipts and transactions, both tries) and to check it offline, best of five.
//!
//! Run: `cargo bench -p paywatch-tests --bench proofs`

use std::time::{Duration, Instant};

use alloy::primitives::B256;
use alloy::providers::Provider;
use alloy::rpc::types::TransactionRequest;
use paywatch_evm::proof::{build_receipt_proof, verify_receipt_proof};
use paywatch_evm::rpc::EvmRpc;
use paywatch_tests::chain::Chain;
use paywatch_tests::token::{Token, transfer_calldata};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let count: usize = std::env::var("PAYWATCH_BENCH_PROOF_RECEIPTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let chain = Chain::start().await;
    let token = Token::deploy(&chain).await;
    let (payer, seller) = (chain.signer(1), chain.account(2));
    token.mint(payer.address(), 1_000_000).await;
    for sender in 4..10 {
        token.mint(chain.account(sender), 1_000_000).await;
    }
    let auth = token
        .authorize(&payer, seller, 10_000, B256::repeat_byte(1))
        .await;
    // Room for every transfer in one block (anvil's default gas limit holds about 870).
    let _: bool = chain
        .provider
        .raw_request(
            "evm_setBlockGasLimit".into(),
            (alloy::primitives::U256::from(1_000_000_000u64),),
        )
        .await
        .expect("evm_setBlockGasLimit");
    chain.set_automine(false).await;
    let mut payment = None;
    for i in 0..count {
        if i == count / 2 {
            payment = Some(*token.submit(&auth, chain.account(3)).await.tx_hash());
            continue;
        }
        let _pending = chain
            .provider
            .send_transaction(
                TransactionRequest::default()
                    .from(chain.account(4 + i % 6))
                    .to(token.address)
                    .input(transfer_calldata(chain.account(0), 1).into()),
            )
            .await
            .expect("send a transfer");
    }
    chain.mine(1).await;
    chain.set_automine(true).await;
    let payment = payment.expect("the payment was sent");
    let receipt = chain
        .provider
        .get_transaction_receipt(payment)
        .await
        .unwrap()
        .expect("mined");
    let block_hash = receipt.block_hash.expect("a block hash");
    let in_block = chain
        .provider
        .get_block_transaction_count_by_hash(block_hash)
        .await
        .unwrap()
        .unwrap_or_default();
    assert_eq!(in_block, count as u64, "every transaction in one block");

    let rpc = EvmRpc::connect(
        "local",
        &[chain.endpoint().parse().unwrap()],
        Duration::from_secs(60),
    )
    .await
    .expect("connect");
    let (mut build, mut check) = (f64::MAX, f64::MAX);
    let mut proof = None;
    for _ in 0..5 {
        let started = Instant::now();
        let built = build_receipt_proof(&rpc, block_hash, payment)
            .await
            .expect("a proof");
        build = build.min(started.elapsed().as_secs_f64());
        let started = Instant::now();
        verify_receipt_proof(&built, block_hash).expect("the proof holds");
        check = check.min(started.elapsed().as_secs_f64());
        proof = Some(built);
    }
    let proof = proof.expect("five runs");
    println!(
        "\npaywatch proof benchmark: a block of {count} transactions on a local anvil node, best of five"
    );
    println!("| receipts | build (ms) | check (ms) | receipt trie nodes | proof bytes |");
    println!("| ---: | ---: | ---: | ---: | ---: |");
    let bytes: usize = proof.header_rlp.len()
        + proof.receipt.len()
        + proof.transaction.len()
        + proof
            .nodes
            .iter()
            .chain(&proof.transaction_nodes)
            .map(|n| n.len())
            .sum::<usize>();
    println!(
        "| {count} | {:.1} | {:.2} | {} | {bytes} |",
        build * 1e3,
        check * 1e3,
        proof.nodes.len()
    );
}
