#!/usr/bin/env bash
# crash_daemon.sh — the crash test on the real engine (issue 8): xgrd (the concurrent engine, the
# SQLite store with group commit, recovery on start) on a temporary file store and an ephemeral
# loopback port runs hundreds of concurrent sessions of tests/stress/crash/daemon_bundle.json —
# fan-outs into an `all` join, a loop with a timer wait between rounds, a k-of-n `kill` join — and
# is killed with kill -9 at random moments several times, restarted each time on the same store
# (enqueues are sent again after every restart: sessions that exist answer already_queued, the
# missing ones start). At the end every session must be complete and the store must hold exactly
# the proc_steps rows of an uninterrupted reference run, with the same payloads: nothing lost,
# nothing twice.
#
# What is compared (crash_run canon): per session its status and every proc_steps row — step path
# from the start process, status, valid, effective payload, error — but not iters or times. On the
# concurrent engine the order in which two results that spawn children are applied may vary, which
# numbers processes differently (SEMANTICS §6); the step path names a process independently of that.
# The k-of-n kill join is built so that its outcome does not depend on timing either (SEMANTICS
# §3.4): its third producer R3 only exists after a timer of 10^8 s (H's waitSec), so whenever the
# join closes (R1 and R2 valid) R3 is waiting on its timer or not created yet, and is never run.
# Whether R3 was created before the kill (an aborted proc_rt row) is timing, so proc_rt is not
# compared; proc_steps and the final payloads are.
#
#   crash_daemon.sh XGRD XGR CRASH_RUN BUNDLE [SESSIONS KILLS ROUNDS]
#   crash_daemon.sh XGRD XGR CRASH_RUN BUNDLE soak   long run; skipped (exit 77) unless XGR_SOAK=1
# The engine clock runs at --time-scale 250 (the loop's waitSec 60 is 240 ms; XGR_CRASHD_SCALE overrides).
# With XGR_PG_URL set (tests/pg/pg_cluster.sh run ...: crash_daemon_pg) the two stores are schemas
# `ref` and `crash` of that PostgreSQL database instead of SQLite files.
#
# Internal wake-ups (issue 14): PINGPONG (a bundle next to BUNDLE, pingpong_bundle.json) adds N/4
# pairs of sessions (rootPids after the N above) that wake each other internally, one at a time,
# PP_ROUNDS times: a "pong" session waits at Box, its "ping" partner wakes that Box, which wakes the
# ping's Box back with the round + 1, and so on; the last round ends both. A lost wake-up leaves a
# Box waiting (the session never completes: wait_done fails); one applied twice runs a Box twice
# (an extra proc_steps row: the comparison fails); the outbox must be empty at the end. Pongs are
# enqueued before pings, so every wake-up has a live target.
set -euo pipefail
XGRD=$1 XGR=$2 RUN=$3 BUNDLE=$4
shift 4
if [ "${1:-}" = soak ]; then
  [ "${XGR_SOAK:-}" = 1 ] || { echo "crash daemon soak: skipped (make soak sets XGR_SOAK=1)"; exit 77; }
  set --
  N=${SOAK_SESSIONS:-1000} KILLS=${SOAK_KILLS:-20} ROUNDS=${SOAK_ROUNDS:-5}
else
  N=${1:-200} KILLS=${2:-5} ROUNDS=${3:-3}
fi
SCALE=${XGR_CRASHD_SCALE:-250}
PINGPONG=$(dirname "$BUNDLE")/pingpong_bundle.json
PAIRS=$(( N / 4 )) PP_ROUNDS=${XGR_CRASHD_PP_ROUNDS:-6}
TOTAL=$(( N + 2 * PAIRS ))
DIR=$(mktemp -d /tmp/xgr-crashd-XXXXXX)
# xgrd runs in permit mode (issue 16): the owner has a key, deploys are signed, and every enqueue
# carries a SessionPermit for its rootPid (re-sent unchanged after each restart: it binds the same
# session, which then answers already_queued)
"$XGR" key new "$DIR/owner.key" >"$DIR/owner.addr"
OWNER=$(tr 'A-F' 'a-f' <"$DIR/owner.addr")
export XGR_KEY_FILE="$DIR/owner.key"
PID=
cleanup() {
  if [ -n "$PID" ]; then kill -9 "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$DIR"
}
trap cleanup EXIT
T0=$(date +%s)
deadline() { [ $(( $(date +%s) - T0 )) -lt "${XGR_CRASHD_BUDGET:-1500}" ] || { echo "FAIL: time budget exceeded"; exit 1; }; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }
# store NAME: the store URL of the reference (ref) or crash run (crash)
store() {
  if [ -n "${XGR_PG_URL:-}" ]; then echo "$XGR_PG_URL&options=-csearch_path%3D$1"; else echo "sqlite:$DIR/$1.db"; fi
}
if [ -n "${XGR_PG_URL:-}" ]; then
  psql -q "$XGR_PG_URL" -c "CREATE SCHEMA ref; CREATE SCHEMA crash" || { echo "FAIL: cannot make the schemas"; exit 1; }
fi

# start_xgrd STORE LOG: xgrd in the background on 127.0.0.1, port 0; sets PID and URL
start_xgrd() {
  rm -f "$DIR/port"
  "$XGRD" ${XGR_CRASHD_HIBERNATE:+--hibernate-after "$XGR_CRASHD_HIBERNATE"} --listen 127.0.0.1:0 --store "$1" --port-file "$DIR/port" --workers 2 \
    --time-scale "$SCALE" --log-level warn --first-step-timeout 100 2>>"$2" &
  PID=$!
  for _ in $(seq 1 1000); do
    [ -s "$DIR/port" ] && break
    kill -0 "$PID" 2>/dev/null || { echo "FAIL: xgrd exited at start:"; tail -5 "$2"; exit 1; }
    sleep 0.01
  done
  [ -s "$DIR/port" ] || { echo "FAIL: xgrd wrote no port file"; exit 1; }
  URL="http://127.0.0.1:$(cat "$DIR/port")"
}

# stop_xgrd: SIGTERM, expect exit 0
stop_xgrd() {
  kill -TERM "$PID"
  local rc=0
  wait "$PID" || rc=$?
  PID=
  [ "$rc" = 0 ] || { echo "FAIL: xgrd exited with $rc after SIGTERM"; exit 1; }
}

# the enqueue requests: 8 JSON-RPC batches, sent concurrently (group commit); made after the first
# deploy, which tells the orchestration's hash the permits sign
make_enqueues() {
  local hash=$1
  for c in 0 1 2 3 4 5 6 7; do
    {
      printf '['
      sep=
      for i in $(seq $((c + 1)) 8 "$N"); do
        permit=$("$XGR" permit session --chain-id 1887 --ostc-hash "$hash" --session-id "$i" --ttl 7200)
        printf '%s{"jsonrpc":"2.0","id":%d,"method":"xgr.enqueue","params":{"rootPid":%d,"xrc729":"crash","init":{"stepId":"Start","payload":{"Rounds":%d,"Seed":%d}},"permit":%s}}' \
          "$sep" "$i" "$i" "$ROUNDS" "$i" "$permit"
        sep=,
      done
      printf ']'
    } >"$DIR/enq$c.json"
  done
}
# the ping-pong pairs: pongs (even offset) in one batch, pings in another, sent in that order
make_pingpong() {
  local hash=$1 role
  for role in pong ping; do
    {
      printf '['
      sep=
      for k in $(seq 1 "$PAIRS"); do
        local ping=$(( N + 2 * k - 1 )) pong=$(( N + 2 * k )) me partner
        if [ "$role" = ping ]; then me=$ping partner=$pong; else me=$pong partner=$ping; fi
        permit=$("$XGR" permit session --chain-id 1887 --ostc-hash "$hash" --session-id "$me" --ttl 7200)
        printf '%s{"jsonrpc":"2.0","id":%d,"method":"xgr.enqueue","params":{"rootPid":%d,"xrc729":"pingpong","init":{"stepId":"Start","payload":{"Role":"%s","Partner":%d,"Rounds":%d}},"permit":%s}}' \
          "$sep" "$me" "$me" "$role" "$partner" "$PP_ROUNDS" "$permit"
        sep=,
      done
      printf ']'
    } >"$DIR/pp_$role.json"
  done
}
enqueue_pingpong() {
  [ "$PAIRS" -gt 0 ] || return 0
  curl -s --max-time 60 -H 'Content-Type: application/json' --data-binary "@$DIR/pp_pong.json" "$URL/" \
    >"$DIR/pp_pong.out" 2>/dev/null || return 1
  curl -s --max-time 60 -H 'Content-Type: application/json' --data-binary "@$DIR/pp_ping.json" "$URL/" \
    >"$DIR/pp_ping.out" 2>/dev/null
}
enqueue_all() {
  local pids=()
  for c in 0 1 2 3 4 5 6 7; do
    curl -s --max-time 60 -H 'Content-Type: application/json' --data-binary "@$DIR/enq$c.json" "$URL/" \
      >"$DIR/enq$c.out" 2>/dev/null &
    pids+=($!)
  done
  enqueue_pingpong &
  pids+=($!)
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}

# wait until the engine has no live session (all enqueued sessions exist by then) — for half a
# second: a hibernating xgrd (the default) has none in memory for a moment when every waiting
# session is evicted (a loop's 240 ms timer is loaded again 200 ms before it is due)
wait_done() {
  local t=$(ms) zero=0
  while :; do
    local live
    live=$(curl -s --max-time 5 "$URL/metrics" | awk '$1 == "xgr_sessions_live" {print $2}')
    if [ "$live" = 0 ]; then zero=$((zero + 1)); else zero=0; fi
    [ "$zero" -ge 10 ] && return 0
    [ $(( $(ms) - t )) -lt 120000 ] || { echo "FAIL: sessions still live after 120 s ($live)"; exit 1; }
    deadline
    sleep 0.05
  done
}

echo "crash test on xgrd: $N sessions ($ROUNDS rounds each) and $PAIRS ping-pong pairs ($PP_ROUNDS internal wake-ups), $KILLS kills -9, time scale $SCALE"

# ---- the reference: one uninterrupted run
start_xgrd "$(store ref)" "$DIR/ref.log"
"$XGR" deploy "$BUNDLE" --registry crash --url "$URL" --json >"$DIR/deploy.json"
make_enqueues "$(grep -A4 '"orchestration"' "$DIR/deploy.json" | grep -o '0x[0-9a-f]\{64\}' | head -1)"
"$XGR" deploy "$PINGPONG" --registry pingpong --url "$URL" --json >"$DIR/deploy_pp.json"
make_pingpong "$(grep -A4 '"orchestration"' "$DIR/deploy_pp.json" | grep -o '0x[0-9a-f]\{64\}' | head -1)"
t=$(ms)
enqueue_all || { echo "FAIL: enqueue on the reference run"; exit 1; }
# every session enqueued: N + 2 * PAIRS answers that are results (no error, none missing)
got=$(cat "$DIR"/enq*.out "$DIR"/pp_*.out 2>/dev/null |
  jq -s '[.[] | if type == "array" then .[] else . end | select(has("result") and (has("error") | not))] | length' 2>&1)
if [ "$got" != $((N + 2 * PAIRS)) ]; then
  echo "FAIL: $got of $((N + 2 * PAIRS)) enqueues answered a result:"; grep -ho '"error":{[^}]*}' "$DIR"/enq*.out "$DIR"/pp_*.out | head -3; exit 1
fi
wait_done
span=$(( $(ms) - t ))
if [ -n "${XGR_CRASHD_HIBERNATE:-}" ]; then   # the sessions did leave memory and come back
  ev=$(curl -s --max-time 5 "$URL/metrics" | awk '$1 == "xgr_engine_events_total{kind=\"sessions_evicted\"}" {print $2}')
  ld=$(curl -s --max-time 5 "$URL/metrics" | awk '$1 == "xgr_engine_events_total{kind=\"sessions_loaded\"}" {print $2}')
  [ "${ev:-0}" != 0 ] && [ "${ld:-0}" != 0 ] || { echo "FAIL: no hibernation (evicted ${ev:-0}, loaded ${ld:-0})"; exit 1; }
  echo "reference: $ev evictions, $ld loads"
fi
stop_xgrd
"$RUN" canon "$(store ref)" "$OWNER" "$TOTAL" >"$DIR/ref.txt"
echo "reference: $(tail -1 "$DIR/ref.txt") in ${span} ms"
[ "$span" -ge 50 ] || span=50

# ---- the crash run: kill -9 at random moments, restart on the same store
start_xgrd "$(store crash)" "$DIR/crash.log"
"$XGR" deploy "$BUNDLE" --registry crash --url "$URL" >/dev/null
"$XGR" deploy "$PINGPONG" --registry pingpong --url "$URL" >/dev/null
enqueue_all &
EPID=$!
mid=0
for k in $(seq 1 "$KILLS"); do
  deadline
  delay=$(( RANDOM % (span * 3 / (2 * KILLS) + 1) + 10 ))
  sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
  live=$(curl -s --max-time 2 "$URL/metrics" | awk '$1 == "xgr_sessions_live" {print $2}' || true)
  kill -9 "$PID"
  wait "$PID" 2>/dev/null || true
  PID=
  wait "$EPID" 2>/dev/null || true   # the enqueues in flight may have been cut off
  [ "${live:-0}" != 0 ] && mid=$((mid + 1))
  echo "kill $k: kill -9 after ${delay} ms with ${live:-?} live sessions"
  start_xgrd "$(store crash)" "$DIR/crash.log"
  enqueue_all &
  EPID=$!
done
wait "$EPID" || true
enqueue_all || { echo "FAIL: enqueue after the last restart"; exit 1; }
wait_done
stop_xgrd
"$RUN" canon "$(store crash)" "$OWNER" "$TOTAL" >"$DIR/crash.txt"
rec=$(grep -c 'msg=ready.*recovered=[1-9]' "$DIR/crash.log" || true)
echo "crash run: $(tail -1 "$DIR/crash.txt"); $rec restarts recovered live sessions; $mid kills hit live sessions"

if ! diff -q "$DIR/ref.txt" "$DIR/crash.txt" >/dev/null; then
  echo "FAIL: the store after the crashes differs from the uninterrupted run:"
  diff "$DIR/ref.txt" "$DIR/crash.txt" | head -40
  exit 1
fi
grep -q "^sessions completed: $TOTAL of $TOTAL;" "$DIR/crash.txt" || { echo "FAIL: not every session completed"; exit 1; }
grep -q "^outbox: 0$" "$DIR/crash.txt" || { echo "FAIL: internal wake-ups left in the outbox"; exit 1; }
redelivered=$(grep -c 'msg="outbox redelivered"' "$DIR/crash.log" || true)
echo "internal wake-ups: $(( PAIRS * (PP_ROUNDS + 1) )) per run, none lost or doubled; $redelivered restarts redelivered wake-ups from the outbox"
[ "$mid" -ge 1 ] && [ "$rec" -ge 1 ] || { echo "FAIL: no kill hit a running engine with live sessions"; exit 1; }
if grep -q 'level=error' "$DIR/crash.log"; then echo "FAIL: errors in the xgrd log:"; grep 'level=error' "$DIR/crash.log" | head -5; exit 1; fi
echo "every session completed; proc_steps rows and payloads identical to the uninterrupted run ($(( $(date +%s) - T0 )) s)"
echo "1 passed, 0 failed"
