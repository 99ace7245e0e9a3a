// Prints, as JSON, every network the installed x402 SDK ships default assets for
// (`@x402/evm` and `@x402/svm` DEFAULT_ASSETS), each with its assets and its public RPC
// endpoint: viem's chain definition (a dependency of @x402/evm) for eip155 networks, the
// SDK's own constants for Solana's. paywatch's tests compare chains.toml against this.
const evm = require("@x402/evm");
const svm = require("@x402/svm");
const chains = require("viem/chains");

const byId = {};
for (const chain of Object.values(chains)) {
  if (chain && chain.id && !byId[chain.id]) byId[chain.id] = chain;
}
const solanaRpc = {
  [svm.SOLANA_MAINNET_CAIP2]: svm.MAINNET_RPC_URL,
  [svm.SOLANA_DEVNET_CAIP2]: svm.DEVNET_RPC_URL,
  [svm.SOLANA_TESTNET_CAIP2]: svm.TESTNET_RPC_URL,
};
const out = {};
for (const [network, assets] of Object.entries(evm.DEFAULT_ASSETS)) {
  const chain = byId[Number(network.split(":")[1])];
  out[network] = {
    rpc: chain ? chain.rpcUrls.default.http[0] : null,
    assets: assets.map((a) => ({ address: a.asset, symbol: a.symbol, decimals: a.decimals })),
  };
}
for (const [network, assets] of Object.entries(svm.DEFAULT_ASSETS)) {
  out[network] = {
    rpc: solanaRpc[network] || null,
    assets: assets.map((a) => ({ address: a.asset, symbol: a.symbol, decimals: a.decimals })),
  };
}
process.stdout.write(JSON.stringify(out));
