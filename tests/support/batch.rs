//! The batch settler (`contracts/BatchSettler.sol`, compiled artifact beside it): several
//! settling calls (`transferWithAuthorization`, the Permit2 proxies' `settle`), of one
//! token or several, in one transaction; and, holding the token itself, a router that
//! sprays it to many addresses, for traffic shaped like a busy mainnet token's.

use std::time::Instant;

use alloy::primitives::{Address, Bytes, keccak256};
use alloy::providers::DynProvider;
use alloy::rpc::types::TransactionReceipt;
use alloy::sol;
use alloy::sol_types::SolCall;

use crate::chain::Chain;
use crate::token::{
    Authorization, Eip3009Token, FACILITATOR, PAYMENT_GAS, Token, payment_calls, transfer_calldata,
};

sol!(
    #[sol(rpc)]
    BatchSettler,
    "contracts/BatchSettler.json"
);

/// A deployed batch settler.
pub struct Batcher {
    contract: BatchSettler::BatchSettlerInstance<DynProvider>,
}

impl Batcher {
    /// Deploys the settler from dev account 0.
    pub async fn deploy(chain: &Chain) -> Self {
        let contract = BatchSettler::deploy(chain.provider.clone())
            .await
            .expect("deploy BatchSettler");
        Self { contract }
    }

    /// Its address.
    pub fn address(&self) -> Address {
        *self.contract.address()
    }

    /// Sends every `(target, calldata)` in one transaction from `facilitator`, in order,
    /// and waits for its receipt.
    pub async fn settle_calls(
        &self,
        calls: Vec<(Address, Bytes)>,
        facilitator: Address,
    ) -> TransactionReceipt {
        let (targets, calls): (Vec<Address>, Vec<Bytes>) = calls.into_iter().unzip();
        let receipt = self
            .contract
            .settle(targets, calls)
            .from(facilitator)
            .send()
            .await
            .expect("send settle")
            .get_receipt()
            .await
            .expect("receipt");
        assert!(receipt.status(), "the batch settlement reverted");
        receipt
    }

    /// Settles every `(token, authorization)` in one transaction sent by `facilitator`, in
    /// order, and waits for its receipt.
    pub async fn settle(
        &self,
        settlements: &[(&Token, &Authorization)],
        facilitator: Address,
    ) -> TransactionReceipt {
        let calls = settlements
            .iter()
            .map(|(token, auth)| (token.address, token.settle_calldata(auth)))
            .collect();
        self.settle_calls(calls, facilitator).await
    }
}

/// Router-like contracts whose transfers make the unrelated traffic of
/// [`send_busy_token_traffic`].
const ROUTERS: usize = 8;

/// Two chains for the busy-token benchmarks, each with its own token: the busy one carries
/// `count` payments amid `noise` unrelated transfers each ([`send_busy_token_traffic`]),
/// the quiet one the same payments alone, each block holding as many of them as the busy
/// chain's block did ([`send_payments_in_blocks`]) — so that the two stores differ by what
/// the unrelated traffic costs, not by how densely payments sit in blocks (indexes keyed by
/// block, which Postgres deduplicates, are smaller where blocks hold more payments).
pub async fn busy_and_quiet_chains(count: usize, noise: usize) -> ((Chain, Token), (Chain, Token)) {
    let busy = Chain::start_for_load().await;
    let busy_token = Token::deploy(&busy).await;
    send_busy_token_traffic(&busy, &busy_token, count, noise).await;
    let shape = payments_per_block(&busy, &busy_token).await;
    let quiet = Chain::start_for_load().await;
    let quiet_token = Token::deploy(&quiet).await;
    send_payments_in_blocks(&quiet, &quiet_token, count, &shape).await;
    ((busy, busy_token), (quiet, quiet_token))
}

/// How many payments (transactions in which `token` logged `AuthorizationUsed`) each block
/// of `chain` holds, in block order, leaving out blocks that hold none.
async fn payments_per_block(chain: &Chain, token: &Token) -> Vec<usize> {
    use alloy::providers::Provider;
    use alloy::sol_types::SolEvent;
    let authorization_used = Eip3009Token::AuthorizationUsed::SIGNATURE_HASH;
    let mut shape = Vec::new();
    for number in 0..=chain.block_number().await {
        let receipts = chain
            .provider
            .get_block_receipts(number.into())
            .await
            .expect("eth_getBlockReceipts")
            .expect("a mined block");
        let payments = receipts
            .iter()
            .filter(|receipt| {
                receipt.inner.logs().iter().any(|log| {
                    log.address() == token.address && log.topics().first() == Some(&authorization_used)
                })
            })
            .count();
        if payments > 0 {
            shape.push(payments);
        }
    }
    shape
}

/// Sends the `count` payments of [`payment_calls`], `shape[i]` of them mined alone into the
/// i-th block.
pub async fn send_payments_in_blocks(chain: &Chain, token: &Token, count: usize, shape: &[usize]) {
    let started = Instant::now();
    let mut payments = payment_calls(chain, token, count).await.into_iter();
    let blocks: Vec<Vec<(Address, Bytes)>> = shape
        .iter()
        .map(|&n| payments.by_ref().take(n).collect())
        .collect();
    assert!(
        payments.next().is_none(),
        "the shape holds fewer than {count} payments"
    );
    chain
        .send_in_blocks(chain.account(FACILITATOR), blocks, PAYMENT_GAS)
        .await;
    eprintln!(
        "sent {count} payments alone in {} blocks shaped like the busy chain's in {:.1} s, chain head {}",
        shape.len(),
        started.elapsed().as_secs_f64(),
        chain.block_number().await
    );
}

/// Sends `count` real EIP-3009 payments (as [`crate::token::send_payments`] does), each
/// followed by a transaction of `noise` unrelated transfers: one of eight router-like
/// contracts holding the token sends it to `noise` fresh addresses, as a DEX router or an
/// exchange's hot wallet does on a busy mainnet token. Mines two blocks on top.
pub async fn send_busy_token_traffic(chain: &Chain, token: &Token, count: usize, noise: usize) {
    let started = Instant::now();
    let payments = payment_calls(chain, token, count).await;
    let mut routers = Vec::with_capacity(ROUTERS);
    for _ in 0..ROUTERS {
        let router = Batcher::deploy(chain).await;
        token.mint(router.address(), u64::MAX / 64).await;
        routers.push(router.address());
    }
    let mut calls = Vec::with_capacity(count * 2);
    for (i, payment) in payments.into_iter().enumerate() {
        calls.push(payment);
        if noise == 0 {
            continue;
        }
        let targets = vec![token.address; noise];
        let sprays = (0..noise)
            .map(|j| {
                let to = Address::from_word(keccak256(format!("noise {i} {j}")));
                transfer_calldata(to, 1 + (i * noise + j) as u64 % 1_000_000)
            })
            .collect();
        let call = BatchSettler::settleCall {
            targets,
            calls: sprays,
        };
        calls.push((routers[i % ROUTERS], call.abi_encode().into()));
    }
    let gas = PAYMENT_GAS + 60_000 * noise as u64;
    chain.send_all(chain.account(FACILITATOR), calls, gas).await;
    eprintln!(
        "sent {count} payments amid {} unrelated transfers in {:.1} s, chain head {}",
        count * noise,
        started.elapsed().as_secs_f64(),
        chain.block_number().await
    );
}
