#!/usr/bin/env bash
# Runs paywatch's tests on this machine, after installing or starting what they need:
# the npm tools (anvil, solc, the x402 SDK), libclang-dev (for the local Solana
# validator's first build), and a Postgres server at 127.0.0.1:5432 with a `test`
# database that accepts replication connections from 127.0.0.1 (the read-replica tests
# start a hot standby of it), unless PAYWATCH_TEST_POSTGRES_URL names another server.
#
#   ./test.sh                 everything, then `cargo test --workspace --locked`
#   ./test.sh --prepare       only the set-up (CI calls this before its lint steps)
#   ./test.sh -- ARGS…        passes ARGS to cargo test (e.g. -- --test reviews)
set -euo pipefail
cd "$(dirname "$0")"

say() { printf '==> %s\n' "$*"; }

# A command as root, or through sudo; says what to do by hand when neither works.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; return; fi
    if command -v sudo >/dev/null; then sudo "$@"; return; fi
    echo "test.sh: need root or sudo for: $*" >&2
    exit 1
}

# apt-get as root, or through sudo; says what to install by hand when neither works.
apt_install() {
    local runner=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null; then runner=(sudo); else
            echo "test.sh: need the Debian package(s) $*; install them as root (apt-get install $*)" >&2
            exit 1
        fi
    fi
    if ! command -v apt-get >/dev/null; then
        echo "test.sh: need $* (no apt-get here); install them with your system's package manager" >&2
        exit 1
    fi
    "${runner[@]}" apt-get update -q
    "${runner[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
}

prepare() {
    say "npm tools (package-lock.json)"
    command -v npm >/dev/null || apt_install nodejs npm
    if [ ! -x node_modules/.bin/anvil ] || [ ! -f node_modules/@x402/evm/package.json ] \
        || [ ! -f node_modules/@x402/svm/package.json ]; then
        npm ci --no-audit --no-fund
    fi

    say "libclang-dev (the local Solana validator's rocksdb)"
    if command -v dpkg >/dev/null && ! dpkg -s libclang-dev >/dev/null 2>&1; then
        apt_install libclang-dev
    fi

    if [ -n "${PAYWATCH_TEST_POSTGRES_URL:-}" ]; then
        say "Postgres: using PAYWATCH_TEST_POSTGRES_URL"
        return
    fi
    say "Postgres at 127.0.0.1:5432"
    if ! command -v pg_isready >/dev/null; then
        apt_install postgresql
    fi
    if ! pg_isready -q -h 127.0.0.1 -p 5432; then
        if ! command -v pg_ctlcluster >/dev/null; then
            apt_install postgresql
        fi
        version="$(ls /etc/postgresql | sort -V | tail -1)"
        pg_ctlcluster --skip-systemctl-redirect "$version" main start
        for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
    fi
    pg_isready -h 127.0.0.1 -p 5432
    psql -h 127.0.0.1 -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1 \
        || psql -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE test"

    say "Postgres accepts replication connections from 127.0.0.1 (a hot standby for the read-replica tests)"
    hba="$(psql -h 127.0.0.1 -U postgres -d postgres -tAc "SHOW hba_file")"
    line="host replication all 127.0.0.1/32 trust"
    if ! as_root grep -qxF "$line" "$hba"; then
        echo "$line" | as_root tee -a "$hba" >/dev/null
        psql -q -h 127.0.0.1 -U postgres -d postgres -tAc "SELECT pg_reload_conf()" >/dev/null
    fi
}

case "${1:-}" in
    --prepare)
        prepare
        ;;
    --)
        shift
        prepare
        exec cargo test --workspace --locked "$@"
        ;;
    "")
        prepare
        exec cargo test --workspace --locked
        ;;
    *)
        echo "usage: ./test.sh [--prepare | -- CARGO_TEST_ARGS…]" >&2
        exit 2
        ;;
esac
