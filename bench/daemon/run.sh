#!/usr/bin/env bash
# bench/daemon/run.sh BUILD_DIR — xgrd over loopback HTTP with wrk (keep-alive, 2 client threads):
#   1. xgr_sessionAlive on a live session (read path: HTTP + JSON-RPC + engine lookup);
#   2. xgr.enqueue of a one-step session with the SQLite store (synchronous=FULL): every answer
#      comes after the session row and its start process are committed (group commit), and the
#      engine then runs the step and persists its result.
# Bounded: DAEMON_BENCH_SECONDS (default 10) per run, loopback only; xgrd is stopped by pid.
set -euo pipefail
B=${1:-build-release}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SECS=${DAEMON_BENCH_SECONDS:-10}
command -v wrk >/dev/null || { echo "bench/daemon: wrk is missing (make deps installs it)"; exit 1; }
dir=$(mktemp -d /tmp/xgr-bench-daemon.XXXXXX)
"$B/xgrd" --listen 127.0.0.1:0 --auth none --store "sqlite:$dir/store.db" --port-file "$dir/port" \
  --log-level warn --threads 16 2>"$dir/xgrd.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat "$dir/port")/"
"$B/xgr" deploy "$SRC/tests/daemon/short.json" --registry bench --url "$url" >/dev/null
"$B/xgr" enqueue --owner 0x00000000000000000000000000000000000000c1 --root 1 --registry bench --step S --url "$url" >/dev/null
"$B/xgr" deploy "$SRC/tests/daemon/gate.json" --registry gate --url "$url" >/dev/null
# a session that stays alive (W waits for a wake-up): rootPid 2
"$B/xgr" enqueue --owner 0x00000000000000000000000000000000000000c1 --root 2 --registry gate --step A --url "$url" >/dev/null
sed 's/"1"\]/"2"]/' "$SRC/bench/daemon/alive.lua" > "$dir/alive.lua"
echo "daemon: xgr_sessionAlive, wrk 2 threads x 64 connections, ${SECS}s"
wrk -t2 -c64 -d"${SECS}s" -s "$dir/alive.lua" "$url" | grep -E "Requests/sec|Latency|answers"
echo "daemon: xgr.enqueue (durable, SQLite synchronous=FULL), wrk 2 threads x 128 connections, ${SECS}s"
wrk -t2 -c128 -d"${SECS}s" -s "$SRC/bench/daemon/enqueue.lua" "$url" | grep -E "Requests/sec|Latency|answers"
curl -s "${url}metrics" | grep -E "^xgr_store_(transactions|max_batches_per_tx)|^xgr_store_commit_seconds_(sum|count)|^xgr_enqueue_total"
