//! The EVM network a command names (`backfill`, `audit`), and its endpoints.

use anyhow::{Context, bail};
use paywatch_core::config::{ChainsConfig, NetworkConfig};
use paywatch_core::network::Namespace;
use paywatch_evm::rpc::EvmRpc;

/// The EVM network `name` (CAIP-2 id or alias) of `chains`, for the command `command`.
pub(crate) fn evm_network(chains: &ChainsConfig, name: &str, command: &str) -> anyhow::Result<NetworkConfig> {
    let Some(network) = chains.network(name) else {
        bail!("network {name} is not in chains.toml: name one of its networks by CAIP-2 id or alias");
    };
    if network.id.namespace() != Namespace::Eip155 {
        bail!(
            "{command} reads EVM block ranges; {} is a Solana network, whose history paywatch run reads by signature pages",
            network.id
        );
    }
    Ok(network.clone())
}

/// The network's RPC endpoints, and its verifier's when `verify_rpc_urls` names one.
pub(crate) async fn endpoints(network: &NetworkConfig) -> anyhow::Result<(EvmRpc, Option<EvmRpc>)> {
    let name = network.id.to_string();
    let rpc = EvmRpc::connect_network(network, &network.rpc_urls)
        .await
        .with_context(|| format!("cannot reach an RPC endpoint of {name}"))?;
    let verifier = if network.verify_rpc_urls.is_empty() {
        None
    } else {
        Some(
            EvmRpc::connect_network(network, &network.verify_rpc_urls)
                .await
                .with_context(|| format!("cannot reach a verifier endpoint of {name} (verify_rpc_urls)"))?,
        )
    };
    Ok((rpc, verifier))
}
