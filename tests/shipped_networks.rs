//! Every EVM network shipped in `chains.toml` works once enabled with one flag and an RPC
//! URL: each table, switched on (`enabled = true`, its `rpc_url_env` pointing at an anvil
//! node started with that network's chain id, every token's contract put at its shipped
//! address with its shipped decimals), passes the worker's start checks (chain id, token
//! contracts and decimals), indexes a real EIP-3009 payment in its first token, and calls
//! it `paid` only when the node's block for the network's shipped finality rule
//! (`finalized` for every family, see the table in docs/src/finality.md) reaches it — on one store
//! holding every network.
use alloy::eips::BlockNumberOrTag;
use alloy::primitives::{Address, B256};
use alloy::providers::Provider;
use paywatch_core::config::parse_chains;
use paywatch_core::ids::lower_hex;
use paywatch_core::state::{FinalityRule, PaymentState};
use paywatch_tests::chain::Chain;
use paywatch_tests::harness::{sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;
use paywatch_tests::tools::repo_root;
use tokio_util::sync::CancellationToken;

/// The local anvil network, enabled in the shipped file; every other EVM table is a real
/// network, disabled.
const LOCAL: &str = "eip155:31337";

/// The shipped file with only network `id` enabled.
fn enabled_alone(shipped: &toml::Table, id: &str) -> String {
    let mut file = shipped.clone();
    let networks = file["networks"].as_table_mut().expect("[networks] tables");
    for (name, table) in networks.iter_mut() {
        let table = table.as_table_mut().expect("a network table");
        table.insert("enabled".into(), toml::Value::Boolean(name == id));
    }
    toml::to_string(&file).expect("chains.toml as TOML")
}

async fn every_shipped_evm_network_runs_once_enabled(kind: Kind) {
    let text = std::fs::read_to_string(repo_root().join("chains.toml")).expect("read chains.toml");
    let shipped: toml::Table = text.parse().expect("chains.toml is TOML");
    let ids: Vec<String> = shipped["networks"]
        .as_table()
        .expect("[networks] tables")
        .keys()
        .filter(|id| id.starts_with("eip155:") && *id != LOCAL)
        .cloned()
        .collect();
    assert!(ids.len() >= 20, "the SDK's EVM networks: {ids:?}");
    let db = TestDb::create(kind).await;
    let store = db.open().await;
    for id in &ids {
        let chain_id: u64 = id["eip155:".len()..].parse().expect("an EIP-155 chain id");
        let chain = Chain::start_as(chain_id).await;
        let table = &shipped["networks"][id.as_str()];
        let env_name = table["rpc_url_env"].as_str().expect("rpc_url_env").to_string();
        let endpoint = chain.endpoint();
        let chains = parse_chains(&enabled_alone(&shipped, id), "chains.toml", |name| {
            (name == env_name).then(|| endpoint.clone())
        })
        .unwrap_or_else(|error| panic!("{id}: {error}"));
        assert_eq!(chains.networks.len(), 1, "{id} alone is enabled");
        let network = &chains.networks[0];
        assert_eq!(
            network.rpc_urls[0].as_str().trim_end_matches('/'),
            endpoint,
            "{id}"
        );
        // Every token of the network at its shipped address; the first one pays.
        let mut tokens = Vec::new();
        for shipped_token in &network.tokens {
            let address: Address = shipped_token.address.evm().expect("an EVM token");
            tokens.push(
                Token::deploy_at(
                    &chain,
                    address,
                    shipped_token.decimals,
                    shipped_token.eip712.as_ref(),
                )
                .await,
            );
        }
        let token = &tokens[0];

        let mut worker = worker(&chains, &store).await;
        worker
            .verify_chain(&CancellationToken::new())
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        // `start_block = "latest"`: the first step starts at the head.
        sync(&mut worker).await;
        token.mint(chain.account(1), 1_000_000).await;
        let receipt = token
            .pay(
                &chain.signer(1),
                chain.account(9),
                250_000,
                B256::repeat_byte(9),
                chain.account(0),
            )
            .await;
        let block = receipt.block_number.expect("mined");
        let tx = lower_hex(receipt.transaction_hash);
        let net = network.id.to_string();
        let state = async || store.payments_by_id(&net, &tx).await.unwrap()[0].state;
        let tag = match network.finality {
            FinalityRule::Finalized => BlockNumberOrTag::Finalized,
            FinalityRule::Safe => BlockNumberOrTag::Safe,
            other => panic!("{id}: every shipped EVM network uses a block tag, not {other}"),
        };
        let tagged = async || {
            let block = chain.provider.get_block_by_number(tag).await.unwrap().unwrap();
            block.header.number
        };
        chain.mine(4).await;
        sync(&mut worker).await;
        assert_eq!(
            state().await,
            PaymentState::Pending,
            "{id}: below the {tag} block"
        );
        while tagged().await < block {
            chain.mine(16).await;
        }
        sync(&mut worker).await;
        assert_eq!(state().await, PaymentState::Paid, "{id}: at the {tag} block");
        let head = store.chain_head(&net).await.unwrap().expect("a head");
        assert_eq!(
            head.final_block,
            Some(tagged().await),
            "{id}: the rule's block is the final one"
        );
    }
    store.close().await;
}
on_both_stores!(
    every_shipped_evm_network_runs_once_enabled,
    every_shipped_evm_network_runs_once_enabled
);
