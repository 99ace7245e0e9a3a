// Prints, as JSON, the default assets the installed x402 SDK ships for each network named
// on the command line (CAIP-2 ids): `@x402/evm`'s DEFAULT_ASSETS for eip155 networks,
// `@x402/svm`'s DEFAULT_ASSETS for solana networks; null for a network the SDK does not
// know. Each asset: address, symbol, decimals, and for EVM assets the EIP-712 domain name
// and version payers sign in. paywatch's tests compare chains.toml against this output.
const sdks = { eip155: require("@x402/evm"), solana: require("@x402/svm") };

const out = {};
for (const network of process.argv.slice(2)) {
  const sdk = sdks[network.split(":")[0]];
  const assets = sdk && sdk.DEFAULT_ASSETS[network];
  out[network] = assets
    ? assets.map((a) => ({
        address: a.asset,
        symbol: a.symbol,
        decimals: a.decimals,
        eip712_name: a.name,
        eip712_version: a.version,
      }))
    : null;
}
process.stdout.write(JSON.stringify(out));
