//! `devnet`: a local anvil chain on port 8545 with the test EIP-3009 token at the address
//! `chains.toml` watches, and a real x402 payment every few seconds, for trying paywatch
//! by hand (`./run-local.sh` starts it next to `paywatch run`).

use std::time::Duration;

use alloy::primitives::keccak256;
use paywatch_core::ids::lower_hex;
use paywatch_tests::chain::Chain;
use paywatch_tests::token::Token;
use tokio::signal::unix::SignalKind;

/// Where `chains.toml` expects the token: the first contract dev account 0 deploys.
const EXPECTED_TOKEN: &str = "0x5fbdb2315678afecb367f032d93f642f64180aa3";

#[tokio::main]
async fn main() {
    let chain = Chain::start_on(8545).await;
    let token = Token::deploy(&chain).await;
    assert_eq!(
        lower_hex(token.address),
        EXPECTED_TOKEN,
        "the token must be the first deployment of a fresh chain"
    );
    let payers = [1, 2, 3];
    for &payer in &payers {
        token.mint(chain.account(payer), 1_000_000_000_000).await;
    }
    let seller = chain.account(5);
    let facilitator = chain.account(6);
    eprintln!(
        "devnet: anvil at {} (chain id {}), token {EXPECTED_TOKEN}, seller {}",
        chain.endpoint(),
        chain.chain_id(),
        lower_hex(seller)
    );
    let mut interval = tokio::time::interval(Duration::from_secs(3));
    // Stopped by Ctrl-C, or by run-local.sh's SIGTERM when paywatch exits: either way the
    // chain is dropped, which stops anvil.
    let mut terminate = tokio::signal::unix::signal(SignalKind::terminate()).expect("a SIGTERM handler");
    for n in 1u64.. {
        tokio::select! {
            _ = interval.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
            _ = terminate.recv() => break,
        }
        let payer = chain.signer(payers[(n % 3) as usize]);
        let amount = 10_000 * (1 + n % 5);
        let nonce = keccak256(format!(
            "devnet payment {n} at {:?}",
            std::time::SystemTime::now()
        ));
        let receipt = token.pay(&payer, seller, amount, nonce, facilitator).await;
        eprintln!(
            "devnet: payment {} of {amount} from {} in block {}; look it up with\n  curl http://127.0.0.1:8402/v1/payments/local/{}",
            lower_hex(receipt.transaction_hash),
            lower_hex(payer.address()),
            receipt.block_number.unwrap_or_default(),
            lower_hex(receipt.transaction_hash),
        );
    }
}
