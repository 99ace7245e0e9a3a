#!/usr/bin/env bash
# Runs paywatch on the embedded SQLite store (./paywatch.db) against a local anvil chain
# that receives a real x402 payment every few seconds. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --silent
cargo build --release --locked -p paywatch -p paywatch-tests --bin paywatch --bin devnet
bin="${CARGO_TARGET_DIR:-target}/release"
"$bin/devnet" &
devnet=$!
trap 'kill "$devnet" 2>/dev/null || true' EXIT
sleep 3
"$bin/paywatch" run "$@"
