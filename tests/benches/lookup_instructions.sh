#!/usr/bin/env bash
# Instructions per lookup, counted by callgrind: a measure of the API's lookup path that a
# busy or noisy machine does not move (runs of the same binary agree to a few per cent:
# thread scheduling and hash seeds differ), for comparing commits where wall-clock
# benchmarks cannot tell a tenth apart.
#
#   tests/benches/lookup_instructions.sh [--payments N] BINARY...
#
# For each `paywatch` BINARY (e.g. release builds of two commits) and each store (SQLite,
# and Postgres on the server of $PAYWATCH_TEST_POSTGRES_URL, as the tests use it):
# a fresh store migrated by that binary and seeded as `cargo bench --bench lookups` seeds
# it (N payments, default 1,000,000), `paywatch run --role api` under callgrind, then over
# one keep-alive connection 300 single lookups and 20 batches uncounted (warm-up), then
# counted: 2,000 single lookups of random payments and 100 batches of 100. Prints the
# instructions per lookup of the whole process (on Postgres, paywatch's side only; the
# database server is another process) and the answer bytes. Needs valgrind, python3,
# sqlite3 and psql. The callgrind files stay in $OUT (default /tmp/paywatch-instructions)
# for `callgrind_annotate`.
set -euo pipefail

payments=1000000
if [ "${1:-}" = "--payments" ]; then payments=$2; shift 2; fi
[ $# -ge 1 ] || { echo "usage: $0 [--payments N] BINARY..." >&2; exit 2; }
admin=${PAYWATCH_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}
postgres=${admin%/*}
out=${OUT:-/tmp/paywatch-instructions}
port=18402
mkdir -p "$out"
for tool in valgrind callgrind_control python3 sqlite3 psql curl; do
  command -v $tool > /dev/null || { echo "$0 needs $tool" >&2; exit 2; }
done

cat > "$out/chains.toml" <<'EOF'
[networks."eip155:8453"]
alias = "local"
rpc_urls = ["http://127.0.0.1:1"]
confirmations = 2

[[networks."eip155:8453".tokens]]
address = "0x1111111111111111111111111111111111111111"
symbol = "USDC"
decimals = 6
start_block = 0
EOF

columns="network, payment_id, index_in_tx, event_index, block_number, block_hash, block_time, payer, pay_to, amount, asset, nonce, state, first_seen_ms, state_changed_ms"
asset=0x1111111111111111111111111111111111111111

# seed KIND NAME BINARY: prints the URL of a fresh store holding the seeded payments.
seed() {
  local kind=$1 name=$2 binary=$3 url
  if [ "$kind" = sqlite ]; then
    rm -f "$out/$name.db"*
    url="sqlite://$out/$name.db"
    "$binary" --chains "$out/chains.toml" --database-url "$url" migrate > /dev/null
    sqlite3 "$out/$name.db" "WITH RECURSIVE seq(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM seq WHERE g < $payments) \
      INSERT INTO payments ($columns) SELECT 'eip155:8453', printf('0x%064x', g), 0, 1, g / 10, printf('0x%064x', g / 10), \
      1764547200 + g, printf('0x%040x', g % 5000), printf('0x%040x', g % 50), CAST(g % 100000 AS TEXT), '$asset', NULL, \
      'paid', 0, 0 FROM seq"
  else
    psql -q "$admin" -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name"
    url="$postgres/$name"
    "$binary" --chains "$out/chains.toml" --database-url "$url" migrate > /dev/null
    psql -q "$url" -c "INSERT INTO payments ($columns) SELECT 'eip155:8453', '0x' || lpad(to_hex(g), 64, '0'), 0, 1, g / 10, \
      '0x' || lpad(to_hex(g / 10), 64, '0'), 1764547200 + g, '0x' || lpad(to_hex(g % 5000), 40, '0'), \
      '0x' || lpad(to_hex(g % 50), 40, '0'), (g % 100000)::text, '$asset', NULL, 'paid', 0, 0 \
      FROM generate_series(1, $payments) AS g" -c "ANALYZE payments"
  fi
  echo "$url"
}

# drive MODE COUNT: COUNT single lookups or batches of 100 over one connection; prints the
# answer bytes.
drive() {
  python3 - "$port" "$1" "$2" "$payments" <<'EOF'
import http.client, json, random, sys
port, mode, count, payments = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng, conn, total = random.Random(7), http.client.HTTPConnection("127.0.0.1", port), 0
for _ in range(count):
    if mode == "single":
        conn.request("GET", "/v1/payments/eip155:8453/0x%064x" % rng.randint(1, payments))
    else:
        lookups = [{"network": "eip155:8453", "payment": "0x%064x" % rng.randint(1, payments)} for _ in range(100)]
        conn.request("POST", "/v1/payments:lookup", json.dumps({"lookups": lookups}), {"content-type": "application/json"})
    answer = conn.getresponse()
    body = answer.read()
    assert answer.status == 200, (answer.status, body[:300])
    total += len(body)
print(total)
EOF
}

# instructions FILE: the total a callgrind dump counted.
instructions() { sed -n 's/^summary: //p' "$1"; }

printf '| binary | store | single lookup (instructions) | batched lookup (instructions) | single answer bytes |\n'
printf '| --- | --- | ---: | ---: | ---: |\n'
for binary in "$@"; do
  name=paywatch_instructions_$(basename "$binary" | tr -c 'a-zA-Z0-9\n' '_')
  for kind in sqlite postgres; do
    url=$(seed $kind "$name" "$binary")
    dumps="$out/$name-$kind"
    rm -f "$dumps".*
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dumps.%p" \
      "$binary" --chains "$out/chains.toml" --database-url "$url" --log-format json \
      run --role api --listen 127.0.0.1:$port --grpc-listen 127.0.0.1:$((port + 1)) 2> "$dumps.log" &
    server=$!
    for _ in $(seq 1 600); do curl -sf http://127.0.0.1:$port/healthz > /dev/null && break; sleep 1; done
    drive single 300 > /dev/null
    drive batch 20 > /dev/null
    callgrind_control -i on $server > /dev/null 2>&1
    callgrind_control -z $server > /dev/null 2>&1
    bytes=$(drive single 2000)
    callgrind_control -d single $server > /dev/null 2>&1
    callgrind_control -z $server > /dev/null 2>&1
    drive batch 100 > /dev/null
    callgrind_control -d batch $server > /dev/null 2>&1
    kill -INT $server
    wait $server || true
    single=$(instructions "$(ls "$dumps".*.1)")
    batch=$(instructions "$(ls "$dumps".*.2)")
    printf '| %s | %s | %d | %d | %d |\n' "$(basename "$binary")" $kind $((single / 2000)) $((batch / 10000)) $((bytes / 2000))
  done
done
