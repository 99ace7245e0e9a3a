// Signs one x402 `auth-capture` payment with the real x402 SDK's client
// (`@x402/evm/auth-capture/client` AuthCaptureEvmScheme, ERC-3009 transfer method) and
// prints what an operator needs to put it in the escrow, as JSON: the PaymentInfo the
// client built (every field as a string), the payer's signature, the payer-agnostic
// nonce it signed, and the escrow and collector the SDK chose.
//
//   node tests/sdk/auth_capture.js CHAIN_ID TOKEN PAYER_KEY OPERATOR PAY_TO MAX_AMOUNT \
//        FEE_RECEIVER CAPTURE_DEADLINE REFUND_DEADLINE MIN_FEE_BPS MAX_FEE_BPS
//
// The token is a local EIP-3009 token named "USD Coin", version "2".
const { privateKeyToAccount } = require("viem/accounts");
const { AuthCaptureEvmScheme } = require("@x402/evm/auth-capture/client");

async function main() {
  const [chainId, token, payerKey, operator, payTo, maxAmount, feeReceiver, captureDeadline, refundDeadline, minFeeBps, maxFeeBps] =
    process.argv.slice(2);
  const payer = privateKeyToAccount(payerKey);
  const scheme = new AuthCaptureEvmScheme(payer);
  const requirements = {
    scheme: "auth-capture",
    network: `eip155:${chainId}`,
    asset: token,
    amount: maxAmount,
    payTo,
    maxTimeoutSeconds: 300,
    extra: {
      name: "USD Coin",
      version: "2",
      captureAuthorizer: operator,
      feeRecipient: feeReceiver,
      captureDeadline: Number(captureDeadline),
      refundDeadline: Number(refundDeadline),
      minFeeBps: Number(minFeeBps),
      maxFeeBps: Number(maxFeeBps),
    },
  };
  const { payload } = await scheme.createPaymentPayload(2, requirements);
  const { authorization, signature, salt } = payload;
  const paymentInfo = {
    operator,
    payer: payer.address,
    receiver: payTo,
    token,
    maxAmount,
    preApprovalExpiry: authorization.validBefore,
    authorizationExpiry: String(captureDeadline),
    refundExpiry: String(refundDeadline),
    minFeeBps: String(minFeeBps),
    maxFeeBps: String(maxFeeBps),
    feeReceiver,
    salt: BigInt(salt).toString(),
  };
  process.stdout.write(
    JSON.stringify({ paymentInfo, signature, nonce: authorization.nonce, collector: authorization.to }),
  );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
