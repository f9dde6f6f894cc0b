#!/usr/bin/env bash
# bench/permits/run.sh BUILD_DIR — permits (issue 16):
#   1. verifications per second of each permit kind on one core (bench_permits verify);
#   2. xgr.enqueue with a SessionPermit each, durable (SQLite synchronous=FULL), over loopback with
#      wrk (2 threads x 128 connections, keep-alive): xgrd in permit mode verifies every request
#      (JSON, types, domain, keccak, ecrecover, the rootPid/ostcHash/owner binding) before the
#      group commit. The bodies are signed beforehand (bench_permits bodies), one rootPid each.
# Bounded: PERMITS_BENCH_SECONDS (default 10), loopback only; xgrd is stopped by pid.
set -euo pipefail
B=${1:-build-release}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SECS=${PERMITS_BENCH_SECONDS:-10}
N=${PERMITS_BENCH_BODIES:-120000}
"$B/bench/permits/bench_permits" verify 2
command -v wrk >/dev/null || { echo "bench/permits: wrk is missing (make deps installs it)"; exit 1; }
dir=$(mktemp -d /tmp/xgr-bench-permits.XXXXXX)
"$B/xgrd" --listen 127.0.0.1:0 --store "sqlite:$dir/store.db" --port-file "$dir/port" \
  --log-level warn --threads 16 2>"$dir/xgrd.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat "$dir/port")/"
owner=$("$B/xgr" key new "$dir/k" | tr 'A-F' 'a-f')
hash=$(XGR_KEY_FILE="$dir/k" "$B/xgr" deploy "$SRC/tests/daemon/short.json" --registry bench --url "$url" --json |
       grep -A3 '"orchestration"' | grep -o '0x[0-9a-f]\{64\}' | head -1)
chain=$(curl -s "$url" -H 'Content-Type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"xgr_getCoreAddrs"}' |
        grep -o '"chainId": *"0x[0-9a-f]*"' | grep -o '0x[0-9a-f]*')
# two wrk threads, each its own half of the bodies (rootPids 1..N/2 and N/2+1..N)
"$B/bench/permits/bench_permits" bodies "$N" "$dir/k" "$chain" bench S "$hash" 1 > "$dir/bodies"
echo "permits: $N signed enqueue bodies for owner $owner (rootPid 1..$N)"
echo "permits: xgr.enqueue with a SessionPermit (verified, durable, SQLite synchronous=FULL), wrk 2 threads x 128 connections, ${SECS}s"
wrk -t2 -c128 -d"${SECS}s" -s "$SRC/bench/permits/enqueue.lua" "$url" -- "$dir/bodies" "$N" | grep -E "Requests/sec|Latency|answers|bodies"
curl -s "${url}metrics" | grep -E "^xgr_enqueue_total|^xgr_store_max_batches_per_tx"
