// Creates and settles one x402 `exact` payment with the real x402 SDK — the client
// (`@x402/core` x402Client with `@x402/evm`'s exact scheme) signs the payment payload, the
// facilitator (`@x402/core` x402Facilitator with `@x402/evm`'s exact scheme) verifies and
// settles it on chain — and prints the facilitator's settle response as JSON.
//
//   node tests/sdk/settle.js RPC_URL CHAIN_ID TOKEN PAYER_KEY FACILITATOR_KEY PAY_TO AMOUNT METHOD
//
// METHOD is `eip3009` or `permit2` (the requirement's `extra.assetTransferMethod`). The
// token is a local EIP-3009 token named "USD Coin", version "2"; it is not one of the SDK's
// default assets, so the requirement names it in full.
const { createWalletClient, createPublicClient, http, publicActions, defineChain } = require("viem");
const { privateKeyToAccount } = require("viem/accounts");
const { x402Client } = require("@x402/core/client");
const { x402Facilitator } = require("@x402/core/facilitator");
const { toFacilitatorEvmSigner, toClientEvmSigner } = require("@x402/evm");
const { registerExactEvmScheme: registerClient } = require("@x402/evm/exact/client");
const { ExactEvmScheme: ExactFacilitator } = require("@x402/evm/exact/facilitator");

async function main() {
  const [rpcUrl, chainId, token, payerKey, facilitatorKey, payTo, amount, method] = process.argv.slice(2);
  const network = `eip155:${chainId}`;
  const chain = defineChain({
    id: Number(chainId),
    name: "anvil",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl) });

  const payer = privateKeyToAccount(payerKey);
  // A token that is not one of the SDK's default assets must be allowed explicitly.
  const client = new x402Client().setSpendControls({ allowedAssets: [{ network, asset: token }] });
  registerClient(client, { signer: toClientEvmSigner(payer, publicClient), networks: [network] });

  const facilitatorAccount = privateKeyToAccount(facilitatorKey);
  const wallet = createWalletClient({ account: facilitatorAccount, chain, transport: http(rpcUrl) }).extend(
    publicActions,
  );
  const facilitatorSigner = toFacilitatorEvmSigner({
    address: facilitatorAccount.address,
    getCode: (args) => wallet.getCode(args),
    readContract: (args) => wallet.readContract({ ...args, args: args.args || [] }),
    verifyTypedData: (args) => wallet.verifyTypedData(args),
    writeContract: (args) => wallet.writeContract({ ...args, args: args.args || [] }),
    sendTransaction: (args) => wallet.sendTransaction(args),
    waitForTransactionReceipt: (args) => wallet.waitForTransactionReceipt(args),
  });
  const facilitator = new x402Facilitator();
  facilitator.register(network, new ExactFacilitator(facilitatorSigner));

  const extra = { name: "USD Coin", version: "2" };
  if (method === "permit2") extra.assetTransferMethod = "permit2";
  const requirements = {
    scheme: "exact",
    network,
    asset: token,
    amount,
    payTo,
    maxTimeoutSeconds: 300,
    extra,
  };
  const paymentRequired = {
    x402Version: 2,
    resource: { url: "http://127.0.0.1/premium", description: "paywatch test resource", mimeType: "application/json" },
    accepts: [requirements],
  };
  const payload = await client.createPaymentPayload(paymentRequired);
  const verified = await facilitator.verify(payload, requirements);
  if (!verified.isValid) throw new Error(`verify: ${JSON.stringify(verified)}`);
  const settled = await facilitator.settle(payload, requirements);
  process.stdout.write(JSON.stringify(settled));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
