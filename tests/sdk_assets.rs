//! The token of every network shipped in `chains.toml` is the default asset the x402 SDK
//! (`@x402/evm`, `@x402/svm`, installed from npm) ships for that network: same address,
//! same decimals. The SDK is what payers run, so a token it does not name is one no
//! payment uses; and on EVM the same EIP-712 domain name and version, which payers sign
//! in and paywatch checks each token's `DOMAIN_SEPARATOR()` against. And every network the SDK ships is in `chains.toml`, with all its default
//! assets, its public endpoint as viem (the SDK's chain library) or the SDK names it,
//! disabled, with a finality rule, and valid once enabled.

use std::collections::BTreeMap;

use paywatch_tests::tools::{node_json, repo_root};
use serde_json::Value;

/// The one network shipped without an SDK default: the local anvil chain, whose token is
/// the test contract deployed by `run-local.sh`.
const LOCAL: &str = "eip155:31337";

/// A shipped token: its address, decimals and EIP-712 domain name and version.
struct ShippedToken {
    address: String,
    decimals: u64,
    eip712: Option<(String, String)>,
}

/// Every network table of the shipped file with its tokens, enabled or not.
fn shipped_tokens() -> BTreeMap<String, Vec<ShippedToken>> {
    let text = std::fs::read_to_string(repo_root().join("chains.toml")).expect("read chains.toml");
    let file: toml::Table = text.parse().expect("chains.toml is TOML");
    let networks = file["networks"].as_table().expect("[networks] tables");
    networks
        .iter()
        .map(|(id, table)| {
            let tokens = table
                .get("tokens")
                .and_then(toml::Value::as_array)
                .map(|tokens| {
                    tokens
                        .iter()
                        .map(|t| {
                            let text =
                                |key: &str| t.get(key).and_then(toml::Value::as_str).map(str::to_string);
                            let decimals = t["decimals"].as_integer().expect("token decimals");
                            ShippedToken {
                                address: text("address").expect("token address"),
                                decimals: u64::try_from(decimals).expect("decimals ≥ 0"),
                                eip712: text("eip712_name").zip(text("eip712_version")),
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            (id.clone(), tokens)
        })
        .collect()
}

/// The SDK's default assets per network (`tests/sdk/default-assets.js`).
fn sdk_default_assets(networks: &[&String]) -> BTreeMap<String, Value> {
    let mut args = vec![
        repo_root()
            .join("tests/sdk/default-assets.js")
            .display()
            .to_string(),
    ];
    args.extend(networks.iter().map(|n| n.to_string()));
    serde_json::from_value(node_json(&args)).expect("default-assets.js prints a JSON object")
}

#[test]
fn every_shipped_token_is_the_sdk_default_asset_of_its_network() {
    let shipped = shipped_tokens();
    assert!(shipped.len() >= 5, "chains.toml ships {} networks", shipped.len());
    let ids: Vec<&String> = shipped.keys().collect();
    let sdk = sdk_default_assets(&ids);
    for (network, tokens) in &shipped {
        let defaults = &sdk[network];
        if network == LOCAL {
            assert!(defaults.is_null(), "the SDK now knows {LOCAL}: {defaults}");
            continue;
        }
        let defaults = defaults
            .as_array()
            .unwrap_or_else(|| panic!("the x402 SDK ships no default asset for {network}"));
        assert!(!tokens.is_empty(), "{network} ships no token");
        for ShippedToken {
            address,
            decimals,
            eip712,
        } in tokens
        {
            let evm = network.starts_with("eip155:");
            let matching = defaults.iter().find(|asset| {
                let theirs = asset["address"].as_str().unwrap_or_default();
                if evm {
                    theirs.eq_ignore_ascii_case(address)
                } else {
                    theirs == address
                }
            });
            let asset = matching.unwrap_or_else(|| {
                panic!("{network}: chains.toml ships token {address}, the x402 SDK's default assets are {defaults:?}")
            });
            assert_eq!(
                asset["decimals"].as_u64(),
                Some(*decimals),
                "{network} {address}: decimals differ from the SDK's"
            );
            let sdk_domain = asset["eip712_name"]
                .as_str()
                .map(str::to_string)
                .zip(asset["eip712_version"].as_str().map(str::to_string));
            if evm {
                assert!(
                    sdk_domain.is_some(),
                    "{network} {address}: the SDK names no EIP-712 domain"
                );
            }
            assert_eq!(
                eip712, &sdk_domain,
                "{network} {address}: EIP-712 domain (name, version) differs from the SDK's"
            );
        }
    }
}

#[test]
fn the_sdk_names_mainnet_usdc_by_its_real_mint() {
    // The mint that Circle publishes for USDC on Solana, and every real mainnet transfer
    // carries; the first paywatch shipped a mistyped one.
    let sdk = sdk_default_assets(&[&"solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp".to_string()]);
    let usdc = sdk["solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"]
        .as_array()
        .and_then(|assets| assets.iter().find(|a| a["symbol"] == "USDC"))
        .expect("the SDK ships USDC for Solana mainnet");
    assert_eq!(usdc["address"], "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v");
}

/// The EIP-3009 view paywatch asks about authorizations (`authorizationState`) is the one
/// in the ABI the x402 SDK ships (`@x402/evm`'s `eip3009ABI`).
#[test]
fn authorization_state_is_the_sdks() {
    use alloy::json_abi::JsonAbi;
    use alloy::sol_types::SolCall;
    let abi: JsonAbi = serde_json::from_value(node_json(&[
        "-e",
        "process.stdout.write(JSON.stringify(require('@x402/evm').eip3009ABI))",
    ]))
    .expect("an ABI");
    let sdk: Vec<[u8; 4]> = abi
        .function("authorizationState")
        .expect("the SDK's eip3009ABI has authorizationState")
        .iter()
        .map(|f| f.selector().0)
        .collect();
    assert_eq!(sdk, [paywatch_evm::calls::authorizationStateCall::SELECTOR]);
}

/// Every network the SDK ships (`tests/sdk/networks.js`): its public RPC and its assets.
fn sdk_networks() -> BTreeMap<String, Value> {
    let script = repo_root().join("tests/sdk/networks.js").display().to_string();
    serde_json::from_value(node_json(&[script])).expect("networks.js prints a JSON object")
}

#[test]
fn every_network_the_sdk_ships_is_in_chains_toml() {
    let text = std::fs::read_to_string(repo_root().join("chains.toml")).expect("read chains.toml");
    let file: toml::Table = text.parse().expect("chains.toml is TOML");
    let shipped = file["networks"].as_table().expect("[networks] tables");
    let sdk = sdk_networks();
    assert!(sdk.len() >= 29, "the SDK ships {} networks", sdk.len());
    for (network, facts) in &sdk {
        let table = shipped
            .get(network)
            .unwrap_or_else(|| panic!("the x402 SDK ships {network}; chains.toml does not list it"));
        assert_eq!(
            table.get("enabled").and_then(toml::Value::as_bool),
            Some(false),
            "{network} ships disabled"
        );
        let alias = table["alias"].as_str().expect("an alias");
        let env = format!("PAYWATCH_RPC_{}", alias.to_uppercase().replace('-', "_"));
        assert_eq!(table["rpc_url_env"].as_str(), Some(env.as_str()), "{network}");
        let rpc = facts["rpc"]
            .as_str()
            .unwrap_or_else(|| panic!("no public RPC known for {network}"));
        assert_eq!(
            table["rpc_urls"][0].as_str(),
            Some(rpc),
            "{network}: the public endpoint"
        );
        let evm = network.starts_with("eip155:");
        if evm {
            assert_eq!(
                table["finality"].as_str(),
                Some("finalized"),
                "{network}: the node's finalized block"
            );
        }
        let spell = |address: &str| {
            if evm {
                address.to_lowercase()
            } else {
                address.to_string()
            }
        };
        let mut theirs: Vec<(String, String, i64)> = facts["assets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    spell(a["address"].as_str().unwrap()),
                    a["symbol"].as_str().unwrap().to_string(),
                    a["decimals"].as_i64().unwrap(),
                )
            })
            .collect();
        let mut ours: Vec<(String, String, i64)> = table["tokens"]
            .as_array()
            .unwrap_or_else(|| panic!("{network} lists no token"))
            .iter()
            .map(|t| {
                (
                    t["address"].as_str().unwrap().to_string(),
                    t["symbol"].as_str().unwrap().to_string(),
                    t["decimals"].as_integer().unwrap(),
                )
            })
            .collect();
        theirs.sort();
        ours.sort();
        assert_eq!(
            ours, theirs,
            "{network}: every default asset of the SDK, as it spells it"
        );
    }

    // Every shipped network is valid once enabled (with a wallet on Solana).
    let enabled = text.replace("enabled = false", "enabled = true").replace(
        "pay_to = []",
        "pay_to = [\"9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin\"]",
    );
    let chains = paywatch_core::config::parse_chains(&enabled, "chains.toml", |_| None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(chains.networks.len(), shipped.len());
}
