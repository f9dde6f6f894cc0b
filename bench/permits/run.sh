#!/usr/bin/env bash
# bench/permits/run.sh BUILD_DIR — permits (issue 16):
#   1. verifications per second of each permit kind on one core, in CPU time (bench_permits verify):
#      from JSON text, from parsed JSON (what xgrd adds per request) and ecrecover alone (the floor);
#   2. xgr.enqueue with a SessionPermit each, durable (SQLite synchronous=FULL), over loopback:
#      xgrd in permit mode verifies every request (types, domain, keccak, ecrecover, the
#      rootPid/ostcHash/owner binding) before the group commit. The bodies are signed before any
#      timed phase (bench_permits bodies), one rootPid each, and sent once each by bench_load
#      (C, PERMITS_BENCH_CONNECTIONS keep-alive connections, one thread);
#   3. the same requests unsigned on xgrd --auth none, as the baseline of the same moment;
#   4. the signed requests again with wrk (2 threads, same connections, keep-alive; Lua builds
#      each request, so the client costs more).
# Each run starts a fresh xgrd (--threads PERMITS_BENCH_THREADS, default 8 as xgrd's own: a single
# xgr.enqueue does not hold its thread during the group commit, so a few threads serve all the
# connections) on a fresh store and
# reports answers/s and xgrd's CPU time (user + system, /proc/PID/stat) per answered enqueue; the
# machine is shared, so the CPU figures are the ones to compare, and the summary projects them
# onto two idle cores: 2 × 10^6 µs / (xgrd µs + client µs per enqueue).
# Bounded: PERMITS_BENCH_SECONDS (default 10) per run, loopback only; xgrd is stopped by pid.
set -euo pipefail
B=${1:-build-release}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SECS=${PERMITS_BENCH_SECONDS:-10}
N=${PERMITS_BENCH_BODIES:-200000}
CONNS=${PERMITS_BENCH_CONNECTIONS:-128}
THREADS=${PERMITS_BENCH_THREADS:-8}
GOAL=10000
"$B/bench/permits/bench_permits" verify 2
command -v wrk >/dev/null || { echo "bench/permits: wrk is missing (make deps installs it)"; exit 1; }
dir=$(mktemp -d /tmp/xgr-bench-permits.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
"$B/xgr" key new "$dir/k" > /dev/null
ticks=$(getconf CLK_TCK)

start_xgrd() {   # MODE: a fresh xgrd on a fresh store, the orchestration deployed; sets pid and url
  rm -f "$dir/port" "$dir"/store.db*
  "$B/xgrd" --listen 127.0.0.1:0 --auth "$1" --store "sqlite:$dir/store.db" --port-file "$dir/port" \
    --log-level warn --threads "$THREADS" 2>"$dir/xgrd.log" &
  pid=$!
  for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
  url="http://127.0.0.1:$(cat "$dir/port")/"
  XGR_KEY_FILE="$dir/k" "$B/xgr" deploy "$SRC/tests/daemon/short.json" --registry bench --url "$url" --json > "$dir/deploy.json"
}
stop_xgrd() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }

# load MODE BODIES NAME: bench_load against a fresh xgrd; keeps its figures in $dir/NAME
load() {
  start_xgrd "$1"
  "$B/bench/permits/bench_load" "$url" "$2" "$CONNS" "$SECS" "$pid" | tee "$dir/$3"
  stop_xgrd
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
stop_xgrd
rm -f "$dir/port"
"$B/bench/permits/bench_permits" bodies "$N" "$dir/k" "$chain" bench S "$hash" 1 > "$dir/signed"
"$B/bench/permits/bench_permits" bodies "$N" "$dir/k" "$chain" bench S "$hash" 1 unsigned > "$dir/plain"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "permits: xgr.enqueue with a SessionPermit (verified, durable, SQLite synchronous=FULL), bench_load $CONNS connections, xgrd --threads $THREADS, ${SECS}s"
load permits "$dir/signed" signed.out
echo "permits: the same enqueues unsigned on xgrd --auth none (baseline), ${SECS}s"
load none "$dir/plain" plain.out
echo "permits: the signed enqueues again with wrk (2 threads x $CONNS connections), ${SECS}s"
start_xgrd permits
cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
wrk -t2 -c"$CONNS" -d"${SECS}s" -s "$SRC/bench/permits/enqueue.lua" "$url" -- "$dir/signed" "$N" > "$dir/wrk.out"
cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
grep -E "Requests/sec|Latency|answers" "$dir/wrk.out"
# wrk's Requests/sec would count the filler calls of a thread that ran out of bodies: the rate
# of the goal is the enqueues xgrd queued (its own counter) over wrk's timed run ("N requests in
# 10.01s"; the Lua scripts' reading of the bodies before it is not part of it)
queued=$(curl -s "${url}metrics" | awk '/^xgr_enqueue_total\{ack="queued"\}/ {print $2}')
awk -v c=$((cpu1 - cpu0)) -v t="$ticks" -v q="$queued" -v w="$(grep -o 'requests in [0-9.]*s' "$dir/wrk.out" | grep -o '[0-9.]*')" \
  'BEGIN { printf "wrk: %d queued enqueues in %.2f s = %.0f /s; xgrd CPU: %.1f s = %.1f us per enqueue\n", q, w, q / w, c / t, q ? c / t / q * 1e6 : 0 }' \
  | tee "$dir/wrk.sum"
stop_xgrd
load1=$(cut -d' ' -f1-3 /proc/loadavg)

# the summary: measured rates, CPU per enqueue, the projection onto two idle cores, the goal
fig() { awk -v k="$2" '$0 ~ k { for (i = 1; i <= NF; i++) if ($i == "us" || $i == "/s") { print $(i - 1); exit } }' "$dir/$1"; }
rs=$(fig signed.out "answers in"); xs=$(fig signed.out "xgrd CPU"); cs=$(fig signed.out "client CPU")
ru=$(fig plain.out "answers in"); xu=$(fig plain.out "xgrd CPU"); cu=$(fig plain.out "client CPU")
rw=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "/s;") { print $(i - 1); exit } }' "$dir/wrk.sum")
xw=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "us") { print $(i - 1); exit } }' "$dir/wrk.sum")
awk -v rs="$rs" -v xs="$xs" -v cs="$cs" -v ru="$ru" -v xu="$xu" -v cu="$cu" -v rw="$rw" -v xw="$xw" -v g="$GOAL" \
    -v l0="$load0" -v l1="$load1" -v cores="$(nproc)" 'BEGIN {
  ps = 2e6 / (xs + cs); pu = 2e6 / (xu + cu)
  printf "permits: summary on %d cores, load average %s before and %s after (other jobs share the machine)\n", cores, l0, l1
  printf "permits:   signed   %6.0f /s measured; xgrd %5.1f us CPU per enqueue, client %4.1f us; projected on 2 idle cores %6.0f /s\n", rs, xs, cs, ps
  printf "permits:   unsigned %6.0f /s measured; xgrd %5.1f us CPU per enqueue, client %4.1f us; projected on 2 idle cores %6.0f /s\n", ru, xu, cu, pu
  printf "permits:   signed, wrk %6.0f /s measured; xgrd %5.1f us CPU per enqueue\n", rw, xw
  printf "permits:   permits cost %.1f us of xgrd CPU per enqueue (%+.0f %%)\n", xs - xu, (xs - xu) / xu * 100
  if (rw >= g) printf "permits: GOAL MET: %.0f permit-verified durable enqueues/s measured with wrk, %.0f /s with bench_load (goal %d/s)\n", rw, rs, g
  else if (ps >= g) printf "permits: goal met by projection only: %.0f /s on 2 idle cores from the CPU figures; measured %.0f /s with wrk and %.0f /s with bench_load on the shared machine (goal %d/s)\n", ps, rw, rs, g
  else printf "permits: GOAL NOT MET: %.0f /s measured with wrk, %.0f /s with bench_load, %.0f /s projected on 2 idle cores (goal %d/s)\n", rw, rs, ps, g
}'
