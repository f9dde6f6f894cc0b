#!/usr/bin/env bash
# tsan_restart.sh — xgrd restarted with live sessions while clients keep calling it, for the
# ThreadSanitizer build (suite 'tsan', make tsan). xgrd on a SQLite file runs SESSIONS ticker
# sessions (a step that spawns itself after a timer, so every session stays live and writes a
# batch every few ms); it is stopped with SIGTERM and started again ROUNDS times on the same store.
# Each restart recovers every session — the engine runs them and commits their batches — while
# the main thread finishes starting the service (methods, metrics) and four clients hammer it from
# the moment it listens: /metrics, /ui (the console), xgr.listSessions, xgr_sessionAlive,
# xgr.enqueue (new sessions and already-queued ones) and xgr.wake; they go on until xgrd has
# stopped, so SIGTERM also comes with calls in flight. Any ThreadSanitizer report fails the test: xgrd runs with
# halt_on_error=1 and exitcode=66, and its log must hold no "ThreadSanitizer" line. In a build
# without TSan the same run checks the restart itself (every session recovered, exit 0).
#
#   tsan_restart.sh XGRD [SESSIONS ROUNDS]      bounded to about 20 s (XGR_TSAN_BUDGET seconds, 60)
set -euo pipefail
XGRD=$1
N=${2:-200}
ROUNDS=${3:-3}
DIR=$(mktemp -d /tmp/xgr-tsanrs-XXXXXX)
# later options win: whatever the caller set, a report stops xgrd with 66
export TSAN_OPTIONS="${TSAN_OPTIONS:-} halt_on_error=1 exitcode=66"
O=0x00000000000000000000000000000000000000a7
PID= CPIDS=()
cleanup() {
  for c in "${CPIDS[@]}"; do kill "$c" 2>/dev/null || true; done
  if [ -n "$PID" ]; then kill -9 "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  [ -n "${XGR_TSAN_KEEP:-}" ] && { echo "kept $DIR"; return; }; rm -rf "$DIR"
}
trap cleanup EXIT
T0=$(date +%s)
budget() { [ $(( $(date +%s) - T0 )) -lt "${XGR_TSAN_BUDGET:-60}" ] || { echo "FAIL: time budget exceeded"; exit 1; }; }
tsan_check() {
  if grep -q 'ThreadSanitizer' "$DIR/xgrd.log"; then
    echo "FAIL: ThreadSanitizer report:"; grep -A40 -m1 'WARNING: ThreadSanitizer' "$DIR/xgrd.log" | head -60; exit 1
  fi
}

# start_xgrd: xgrd in the background on 127.0.0.1, port 0; sets PID and URL as soon as it listens
# (before recovery: the port comes from its msg=listening line, not the port file)
start_xgrd() {
  : >"$DIR/xgrd.log"
  "$XGRD" --listen 127.0.0.1:0 --auth none --store "sqlite:$DIR/s.db" --workers 2 --time-scale 50 \
    --log-level info 2>"$DIR/xgrd.log" &
  PID=$!
  local port=
  for _ in $(seq 1 2000); do
    port=$(sed -n 's/.*msg=listening addr=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$DIR/xgrd.log" | sed -n 1p)
    [ -n "$port" ] && break
    kill -0 "$PID" 2>/dev/null || { echo "FAIL: xgrd exited at start:"; tail -20 "$DIR/xgrd.log"; exit 1; }
    sleep 0.005
  done
  [ -n "$port" ] || { echo "FAIL: xgrd never listened"; exit 1; }
  URL="http://127.0.0.1:$port"
}
wait_ready() {
  for _ in $(seq 1 2000); do
    grep -q 'msg=ready' "$DIR/xgrd.log" && return 0
    kill -0 "$PID" 2>/dev/null || { tsan_check; echo "FAIL: xgrd died:"; tail -20 "$DIR/xgrd.log"; exit 1; }
    sleep 0.01
  done
  echo "FAIL: xgrd not ready after 20 s"; exit 1
}
stop_xgrd() {
  kill -TERM "$PID"
  local rc=0
  wait "$PID" || rc=$?
  PID=
  tsan_check
  [ "$rc" = 0 ] || { echo "FAIL: xgrd exited with $rc after SIGTERM:"; tail -20 "$DIR/xgrd.log"; exit 1; }
}
rpc() { curl -s --max-time 10 -H 'Content-Type: application/json' --data-binary "$1" "$URL/" || true; }

# client K: calls of every kind until $DIR/stop exists (each answer or refusal is fine; what counts
# is what TSan sees inside xgrd)
client() {
  local k=$1 i=0
  while [ ! -e "$DIR/stop" ]; do
    i=$((i + 1))
    local r=$(( (k * 7919 + i) % N + 1 ))
    case $(( (k + i) % 5 )) in
      0) curl -s --max-time 10 "$URL/metrics" >/dev/null || true
         curl -s --max-time 10 "$URL/ui" >/dev/null || true ;;
      1) rpc '{"jsonrpc":"2.0","id":1,"method":"xgr.listSessions","params":{"owner":"'$O'"}}' >/dev/null ;;
      2) rpc '{"jsonrpc":"2.0","id":2,"method":"xgr_sessionAlive","params":{"owner":"'$O'","rootPid":'$r'}}' >/dev/null ;;
      3) rpc '[{"jsonrpc":"2.0","id":3,"method":"xgr.enqueue","params":{"owner":"'$O'","rootPid":'$r',"init":{"stepId":"T"}}},
              {"jsonrpc":"2.0","id":4,"method":"xgr.enqueue","params":{"owner":"'$O'","rootPid":'$((N + k * 100000 + i))',"init":{"stepId":"T"}}}]' >/dev/null ;;
      4) rpc '{"jsonrpc":"2.0","id":5,"method":"xgr.wake","params":{"owner":"'$O'","sessionId":'$r',"stepId":"T"}}' >/dev/null ;;
    esac
  done
}
start_clients() {
  rm -f "$DIR/stop"
  CPIDS=()
  for k in 1 2 3 4; do client "$k" & CPIDS+=($!); done
}
stop_clients() {
  touch "$DIR/stop"
  for c in "${CPIDS[@]}"; do wait "$c" 2>/dev/null || true; done
  CPIDS=()
}

echo "tsan restart: $N live sessions, $ROUNDS restarts with traffic during recovery"
start_xgrd
wait_ready
# the ticker: T counts to 10^9, one tick per waitSec 1 (20 ms at time scale 50): always live
rpc '[{"jsonrpc":"2.0","id":1,"method":"xgr_putRule","params":[{"address":"T","rule":{"payload":{"n":{"type":"int64","default":0}},
      "rules":["[n] < 1000000000"],"onValid":{"payload":{"n":"[n] + 1"},"waitSec":1},"onInvalid":{}}}]}]' >"$DIR/put.out"
rpc '{"jsonrpc":"2.0","id":2,"method":"xgr.putOrchestration","params":{"xrc729":"local","orchestration":{"id":"t",
      "structure":{"T":{"rule":"T","onValid":{"spawns":["T"]}}}}}}' >>"$DIR/put.out"
# both answers (the batch of one and the single call) are results, none an error
ok=$(jq -s '[.[] | if type == "array" then .[] else . end | has("result") and (has("error") | not)] == [true, true]' "$DIR/put.out" 2>&1)
[ "$ok" = true ] || { echo "FAIL: deploy:"; cat "$DIR/put.out"; exit 1; }
batch='['
for i in $(seq 1 "$N"); do
  [ "$i" -gt 1 ] && batch+=','
  batch+='{"jsonrpc":"2.0","id":'$i',"method":"xgr.enqueue","params":{"owner":"'$O'","rootPid":'$i',"init":{"stepId":"T"}}}'
done
batch+=']'
rpc "$batch" >"$DIR/enq.out"
# N answers, each a result
got=$(jq '[.[] | select(has("result") and (has("error") | not))] | length' "$DIR/enq.out" 2>&1)
[ "$got" = "$N" ] || { echo "FAIL: enqueue: $got of $N answers are results:"; head -c 600 "$DIR/enq.out"; exit 1; }
sleep 0.5
for round in $(seq 1 "$ROUNDS"); do
  budget
  stop_xgrd      # SIGTERM with the clients' calls in flight (from the second round on)
  stop_clients
  start_xgrd
  start_clients
  wait_ready
  sleep 1
  rec=$(sed -n 's/.*msg=ready.* recovered=\([0-9]*\).*/\1/p' "$DIR/xgrd.log" | sed -n 1p)
  echo "restart $round: recovered ${rec:-?} sessions ($(( $(date +%s) - T0 )) s)"
  [ "${rec:-0}" -ge "$N" ] || { echo "FAIL: expected at least $N sessions recovered"; tail -5 "$DIR/xgrd.log"; exit 1; }
  tsan_check
done
stop_xgrd
stop_clients
if grep -q 'level=error' "$DIR/xgrd.log"; then echo "FAIL: errors in the xgrd log:"; grep 'level=error' "$DIR/xgrd.log" | head -5; exit 1; fi
echo "no ThreadSanitizer report in $ROUNDS restarts ($(( $(date +%s) - T0 )) s)"
echo "1 passed, 0 failed"
