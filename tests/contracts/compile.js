// Compiles paywatch's Solidity sources with the pinned solc from npm and writes one
// artifact ({ compiler, source, abi, bytecode }) per contract next to its source:
//   tests/contracts/Eip3009Token.sol       -> Eip3009Token.json (the test token)
//   tests/contracts/OwnerWallet.sol        -> OwnerWallet.json, OwnerWalletFactory.json
//   tests/contracts/BatchSettler.sol       -> BatchSettler.json (several settlements, one tx)
//   tests/contracts/Permit2Settlement.sol  -> Permit2SignatureTransfer.json, X402ExactPermit2Proxy.json,
//                                            X402UptoPermit2Proxy.json (paywatch's own stand-ins for
//                                            Permit2 and x402's two proxies: same ABI, events, behaviour)
//   tests/contracts/AuthCaptureEscrow.sol  -> AuthCaptureEscrow.json, ERC3009PaymentCollector.json,
//                                            OperatorRefundCollector.json (paywatch's own stand-ins for
//                                            commerce-payments' escrow and two token collectors)
//   tests/contracts/DelegationManager.sol  -> DelegationManager.json, DeleGatorAccount.json (paywatch's
//                                            own stand-in for MetaMask's ERC-7710 DelegationManager and a
//                                            delegator account)
//   crates/paywatch-evm/contracts/Erc6492Validator.sol -> Erc6492Validator.json
// Run: `npm run compile-contracts` from the repository root. CI checks the committed
// artifacts are what their sources compile to.
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const root = path.join(__dirname, "..", "..");
const units = [
  { file: "tests/contracts/Eip3009Token.sol", contracts: ["Eip3009Token"] },
  { file: "tests/contracts/OwnerWallet.sol", contracts: ["OwnerWallet", "OwnerWalletFactory"] },
  { file: "tests/contracts/BatchSettler.sol", contracts: ["BatchSettler"] },
  {
    file: "tests/contracts/Permit2Settlement.sol",
    contracts: ["Permit2SignatureTransfer", "X402ExactPermit2Proxy", "X402UptoPermit2Proxy"],
  },
  {
    file: "tests/contracts/AuthCaptureEscrow.sol",
    contracts: ["AuthCaptureEscrow", "ERC3009PaymentCollector", "OperatorRefundCollector"],
  },
  { file: "tests/contracts/DelegationManager.sol", contracts: ["DelegationManager", "DeleGatorAccount"] },
  { file: "crates/paywatch-evm/contracts/Erc6492Validator.sol", contracts: ["Erc6492Validator"] },
];

for (const unit of units) {
  const name = path.basename(unit.file);
  const input = {
    language: "Solidity",
    sources: { [name]: { content: fs.readFileSync(path.join(root, unit.file), "utf8") } },
    settings: {
      optimizer: { enabled: true, runs: 200 },
      evmVersion: "cancun",
      outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  const errors = (output.errors || []).filter((e) => e.severity === "error");
  if (errors.length > 0) {
    for (const e of errors) console.error(e.formattedMessage);
    process.exit(1);
  }
  for (const contractName of unit.contracts) {
    const contract = output.contracts[name][contractName];
    const artifact = {
      compiler: `solc ${solc.version()}`,
      source: name,
      abi: contract.abi,
      bytecode: "0x" + contract.evm.bytecode.object,
    };
    const out = path.join(root, path.dirname(unit.file), `${contractName}.json`);
    fs.writeFileSync(out, JSON.stringify(artifact, null, 2) + "\n");
    console.log(`compiled ${contractName} with solc ${solc.version()}`);
  }
}
