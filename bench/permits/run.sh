#!/usr/bin/env bash
# bench/permits/run.sh BUILD_DIR — permits (issue 16):
#   1. verifications per second of each permit kind on one core (bench_permits verify);
#   2. xgr.enqueue with a SessionPermit each, durable (SQLite synchronous=FULL), over loopback with
#      wrk (2 threads x 128 connections, keep-alive): xgrd in permit mode verifies every request
#      (JSON, types, domain, keccak, ecrecover, the rootPid/ostcHash/owner binding) before the
#      group commit. The bodies are signed beforehand (bench_permits bodies), one rootPid each;
#   3. the same requests unsigned on xgrd --auth none, as the baseline of the same moment.
# For 2 and 3 it prints req/s and xgrd's CPU time per answered request (user + system, from
# /proc/PID/stat), which a busy machine distorts less than throughput.
# Bounded: PERMITS_BENCH_SECONDS (default 10) per run, loopback only; xgrd is stopped by pid.
set -euo pipefail
B=${1:-build-release}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SECS=${PERMITS_BENCH_SECONDS:-10}
N=${PERMITS_BENCH_BODIES:-120000}
"$B/bench/permits/bench_permits" verify 2
command -v wrk >/dev/null || { echo "bench/permits: wrk is missing (make deps installs it)"; exit 1; }
dir=$(mktemp -d /tmp/xgr-bench-permits.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
"$B/xgr" key new "$dir/k" > /dev/null
ticks=$(getconf CLK_TCK)

# run MODE BODIES: one xgrd (permits or none) on a fresh store, the bodies through wrk
run() {
  local mode=$1 bodies=$2
  rm -f "$dir/port" "$dir"/store.db*
  "$B/xgrd" --listen 127.0.0.1:0 --auth "$mode" --store "sqlite:$dir/store.db" --port-file "$dir/port" \
    --log-level warn --threads 16 2>"$dir/xgrd.log" &
  pid=$!
  for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
  url="http://127.0.0.1:$(cat "$dir/port")/"
  if [ "$mode" = permits ]; then
    XGR_KEY_FILE="$dir/k" "$B/xgr" deploy "$SRC/tests/daemon/short.json" --registry bench --url "$url" --json > "$dir/deploy.json"
  else
    "$B/xgr" deploy "$SRC/tests/daemon/short.json" --registry bench --url "$url" --json > "$dir/deploy.json"
  fi
  local cpu0 cpu1
  cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  wrk -t2 -c128 -d"${SECS}s" -s "$SRC/bench/permits/enqueue.lua" "$url" -- "$bodies" "$N" > "$dir/wrk.out"
  cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  grep -E "Requests/sec|Latency|answers" "$dir/wrk.out"
  local queued
  queued=$(curl -s "${url}metrics" | awk '/^xgr_enqueue_total\{ack="queued"\}/ {print $2}')
  awk -v c=$((cpu1 - cpu0)) -v t="$ticks" -v q="$queued" \
    'BEGIN { printf "xgrd CPU: %.1f s for %d queued enqueues = %.0f us per enqueue\n", c / t, q, q ? c / t / q * 1e6 : 0 }'
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
}

# the orchestration's hash and the chain id, for the permits (a throwaway xgrd)
"$B/xgrd" --listen 127.0.0.1:0 --store "memory:" --port-file "$dir/port" --log-level warn 2>/dev/null &
pid=$!
for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat "$dir/port")/"
hash=$(XGR_KEY_FILE="$dir/k" "$B/xgr" deploy "$SRC/tests/daemon/short.json" --registry bench --url "$url" --json |
       grep -A3 '"orchestration"' | grep -o '0x[0-9a-f]\{64\}' | head -1)
chain=$(curl -s "$url" -H 'Content-Type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"xgr_getCoreAddrs"}' |
        grep -o '"chainId": *"0x[0-9a-f]*"' | grep -o '0x[0-9a-f]*')
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
rm -f "$dir/port"
"$B/bench/permits/bench_permits" bodies "$N" "$dir/k" "$chain" bench S "$hash" 1 > "$dir/signed"
"$B/bench/permits/bench_permits" bodies "$N" "$dir/k" "$chain" bench S "$hash" 1 unsigned > "$dir/plain"
echo "permits: xgr.enqueue with a SessionPermit (verified, durable, SQLite synchronous=FULL), wrk 2 threads x 128 connections, ${SECS}s"
run permits "$dir/signed"
echo "permits: the same enqueues unsigned on xgrd --auth none (baseline), ${SECS}s"
run none "$dir/plain"
