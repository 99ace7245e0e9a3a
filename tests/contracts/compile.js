// Compiles Eip3009Token.sol with the pinned solc from npm and writes Eip3009Token.json
// ({ abi, bytecode }). Run: `npm run compile-contracts` from the repository root.
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const source = fs.readFileSync(path.join(__dirname, "Eip3009Token.sol"), "utf8");
const input = {
  language: "Solidity",
  sources: { "Eip3009Token.sol": { content: source } },
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
const contract = output.contracts["Eip3009Token.sol"].Eip3009Token;
const artifact = {
  compiler: `solc ${solc.version()}`,
  source: "Eip3009Token.sol",
  abi: contract.abi,
  bytecode: "0x" + contract.evm.bytecode.object,
};
fs.writeFileSync(path.join(__dirname, "Eip3009Token.json"), JSON.stringify(artifact, null, 2) + "\n");
console.log(`compiled Eip3009Token with solc ${solc.version()}`);
