// Signs one x402 `auth-capture` payment with the real x402 SDK's client
// (`@x402/evm/auth-capture/client` AuthCaptureEvmScheme, ERC-3009 transfer method) and
// prints what an operator needs to put it in the escrow, as JSON: the PaymentInfo the
// client built (every field as a string), the payer's signature, the payer-agnostic
// nonce it signed, and the escrow and collector the SDK chose.
//
//   node tests/sdk/auth_capture.js CHAIN_ID TOKEN PAYER_KEY OPERATOR PAY_TO MAX_AMOUNT \
//        FEE_RECEIVER CAPTURE_DEADLINE REFUND_DEADLINE MIN_FEE_BPS MAX_FEE_BPS \
//        [SALT_NONCE [RECEIVER_AUTHORIZER POLICY]]
//
// The token is a local EIP-3009 token named "USD Coin", version "2".
//
// SALT_NONCE (0x + 64 hex, or "-") stands in for the 32 random bytes the client draws for
// the salt nonce — what a payer committing to its intent chooses instead (paywatch's
// intent commitment); the SDK builds and signs everything else as it always does.
// RECEIVER_AUTHORIZER and POLICY go into the requirements' `extra`, which turns on the
// SDK's salt binding (the salt is then derived from the salt nonce and the two).
const { privateKeyToAccount } = require("viem/accounts");
const { AuthCaptureEvmScheme } = require("@x402/evm/auth-capture/client");

async function main() {
  const [chainId, token, payerKey, operator, payTo, maxAmount, feeReceiver, captureDeadline, refundDeadline, minFeeBps, maxFeeBps, saltNonce, receiverAuthorizer, policy] =
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
      ...(receiverAuthorizer ? { receiverAuthorizer, policy } : {}),
    },
  };
  const { payload } = await withSaltNonce(saltNonce, () => scheme.createPaymentPayload(2, requirements));
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

// Runs `build` with the client's one draw of random bytes (its salt nonce) answered by
// `saltNonce`, when one is given.
async function withSaltNonce(saltNonce, build) {
  if (!saltNonce || saltNonce === "-") {
    return build();
  }
  const bytes = Buffer.from(saltNonce.replace(/^0x/, ""), "hex");
  if (bytes.length !== 32) {
    throw new Error(`SALT_NONCE must be 32 bytes, got ${bytes.length}`);
  }
  const real = globalThis.crypto;
  const chosen = {
    getRandomValues(array) {
      array.set(bytes.subarray(0, array.length));
      return array;
    },
  };
  Object.defineProperty(globalThis, "crypto", { value: chosen, configurable: true, writable: true });
  try {
    return await build();
  } finally {
    Object.defineProperty(globalThis, "crypto", { value: real, configurable: true, writable: true });
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
