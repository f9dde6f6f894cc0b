#!/usr/bin/env bash
# outbound.sh XGR XGRD — issue 38, findings 5 and 6, from the outside: a rule's API calls reach no
# loopback, link-local (cloud metadata) or private address unless the operator allows it
# (--allow-outbound, also as a --config key), by address or by a name that resolves to one
# (`localhost`: the check is on the resolved address when connecting), with the refusal named in
# the step's history and counted in /metrics; xgrd never has more API calls in flight than
# --max-outbound (in total) and --max-outbound-per-owner (per owner): 10 sessions of 3 calls each to
# a slow stand-in API (tests/cli/slow_api.py counts the calls in flight at once) all complete with
# at most 2 calls at the API at any moment; xgrd out of file descriptors (ulimit -n 64, 120
# connections held) logs it once and counts it, and accepts again once they are back. `xgr run`
# refuses the same way as xgrd.
# One PASS/FAIL line per check; exit 1 when any failed. Servers listen on 127.0.0.1, port 0.
set -u
X=$1
XD=$2
HERE=$(cd "$(dirname "$0")" && pwd)
D=$HERE/data
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
O=0x00000000000000000000000000000000000000c1
O2=0x00000000000000000000000000000000000000c2

. "$HERE/../lib/expect.sh"   # t, has, lacks, is_err

# start_xgrd NAME ARGS...: xgrd on 127.0.0.1:0, stderr in $tmp/NAME.log, pid in $XP, URL in $XGR_URL
start_xgrd() {
  local name=$1; shift
  rm -f "$tmp/$name.port"
  "$XD" --listen 127.0.0.1:0 --auth none --port-file "$tmp/$name.port" --log-level warn "$@" 2>"$tmp/$name.log" &
  XP=$!
  pids+=("$XP")
  for _ in $(seq 100); do [ -s "$tmp/$name.port" ] && break; sleep 0.05; done
  export XGR_URL="http://127.0.0.1:$(cat "$tmp/$name.port" 2>/dev/null)"
}
stop_xgrd() { kill "$XP" 2>/dev/null; wait "$XP" 2>/dev/null; }

# wait_done OWNER N: until OWNER's N sessions are all completed (at most 30 s); prints how many are
wait_done() {
  local n=0 end=$((SECONDS + 30))
  while [ $SECONDS -lt $end ]; do
    "$X" sessions --owner "$1" --from "$1" --json >"$tmp/out" 2>/dev/null
    n=$(jq '[.sessions[] | select(.status == "completed")] | length' "$tmp/out" 2>/dev/null || echo 0)
    [ "$n" = "$2" ] && break
    sleep 0.2
  done
  echo "$n"
}
api() { curl -sf "$API/$1" | jq -r "${2:-.}"; }   # api PATH [JQ]: the stand-in API's answer

rm -f "$tmp/api.port"
python3 "$HERE/slow_api.py" "$tmp/api.port" &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/api.port" ] && break; sleep 0.05; done
PORT=$(cat "$tmp/api.port")
API=http://127.0.0.1:$PORT

# ---- finding 5: the address policy -------------------------------------------------------------
# xgrd with the default policy: the call to 127.0.0.1 is refused, never made, and says why
start_xgrd deny --api-map "http://slow.test=$API"
t "deploy (default policy)" 0 "$X" deploy "$D/fan_slow.json" --from $O
t "enqueue (default policy)" 0 "$X" enqueue --owner $O --from $O --ostc-id fan --step S
[ "$(wait_done $O 1)" = 1 ] && echo "PASS session completes" || { echo "FAIL session did not complete"; fail=1; }
t "the session shows the refusal" 0 "$X" show 1 --owner $O --from $O --json
has "refusal names address, class, host and flag" \
  'outbound address 127.0.0.1 (loopback) of host \"127.0.0.1\" is not allowed by the outbound policy; --allow-outbound 127.0.0.1/32 permits it'
[ "$(api peak .total)" = 0 ] && echo "PASS no request reached the API" || { echo "FAIL the API got requests"; fail=1; }
t "metrics count the refusals" 0 curl -sf "$XGR_URL/metrics"
has "xgr_outbound refused_by_policy 3" 'xgr_outbound_refused_total 3'
has "xgr_outbound in_flight gauge" 'xgr_outbound_in_flight 0'
has "xgr_outbound waiting gauge" 'xgr_outbound_waiting 0'
stop_xgrd

# a name that resolves to loopback is refused when connecting (the DNS-rebinding case)
start_xgrd rebind --api-map "http://slow.test=http://localhost:$PORT"
"$X" deploy "$D/fan_slow.json" --from $O >/dev/null
"$X" enqueue --owner $O --from $O --ostc-id fan --step S >/dev/null
wait_done $O 1 >/dev/null
t "session (localhost)" 0 "$X" show 1 --owner $O --from $O --json
has "localhost refused at connect time" '(loopback) of host \"localhost\" is not allowed by the outbound policy'
[ "$(api peak .total)" = 0 ] && echo "PASS localhost: no request reached the API" || { echo "FAIL localhost: the API got requests"; fail=1; }
stop_xgrd

# cloud metadata and private ranges: refused without a packet sent
start_xgrd meta --api-map "http://slow.test=http://169.254.169.254" --max-outbound 1
"$X" deploy "$D/fan_slow.json" --from $O >/dev/null
"$X" enqueue --owner $O --from $O --ostc-id fan --step S >/dev/null
wait_done $O 1 >/dev/null
t "session (metadata)" 0 "$X" show 1 --owner $O --from $O --json
has "metadata refused" 'outbound address 169.254.169.254 (link-local) of host \"169.254.169.254\" is not allowed'
stop_xgrd
start_xgrd private --api-map "http://slow.test=http://10.20.30.40:8080"
"$X" deploy "$D/fan_slow.json" --from $O >/dev/null
"$X" enqueue --owner $O --from $O --ostc-id fan --step S >/dev/null
wait_done $O 1 >/dev/null
t "session (private)" 0 "$X" show 1 --owner $O --from $O --json
has "private refused" 'outbound address 10.20.30.40 (private) of host \"10.20.30.40\" is not allowed'
stop_xgrd

# allowed explicitly: the calls are made and the session's steps are valid
start_xgrd allow --api-map "http://slow.test=$API" --allow-outbound 127.0.0.1/32
"$X" deploy "$D/fan_slow.json" --from $O >/dev/null
"$X" enqueue --owner $O --from $O --ostc-id fan --step S >/dev/null
wait_done $O 1 >/dev/null
t "session (allowed)" 0 "$X" show 1 --owner $O --from $O --json
lacks "no refusal when allowed" 'outbound address'
[ "$(api peak .total)" = 3 ] && echo "PASS allowed: the three calls were made" || { echo "FAIL allowed: $(api peak .total) calls"; fail=1; }
stop_xgrd

# flags checked; the --config key works like the flag
t "xgrd --allow-outbound nonsense" 2 "$XD" --allow-outbound nonsense
is_err "xgrd --allow-outbound message" 'xgrd: --allow-outbound "nonsense": expected a CIDR (10.0.0.0/8, fd00::/8), an address, or one of loopback, link-local, private, cgnat, unspecified, multicast, reserved, any'
t "xgrd --max-outbound 0" 2 "$XD" --max-outbound 0
is_err "xgrd --max-outbound message" 'xgrd: --max-outbound is 0; expected 1 to 100000'
t "xgrd --max-outbound-per-owner x" 2 "$XD" --max-outbound-per-owner x
has "xgrd --max-outbound-per-owner message" 'xgrd: --max-outbound-per-owner is "x"; expected a whole number up to 100000'
t "xgrd --help names the flags" 0 "$XD" --help
has "help: --allow-outbound" '--allow-outbound CIDR'
has "help: --max-outbound default" '(default 256; 1 to 100000)'

# ---- finding 6: the cap on calls in flight -------------------------------------------------------
# 10 sessions x 3 calls of 0.4 s, --max-outbound 2 (as a --config key): never more than 2 at the API
api reset >/dev/null
echo '{"allow-outbound": "loopback", "max-outbound": 2}' >"$tmp/cap.json"
start_xgrd cap --api-map "http://slow.test=$API" --config "$tmp/cap.json"
"$X" deploy "$D/fan_slow.json" --from $O >/dev/null
for i in $(seq 10); do "$X" enqueue --owner $O --from $O --ostc-id fan --step S >/dev/null; done
t "metrics while capped" 0 curl -sf "$XGR_URL/metrics"
has "in_flight gauge exported" 'xgr_outbound_in_flight'
n=$(wait_done $O 10)
[ "$n" = 10 ] && echo "PASS --max-outbound 2: all 10 sessions completed" || { echo "FAIL --max-outbound 2: $n of 10 completed"; fail=1; }
peak=$(api peak .peak); total=$(api peak .total)
[ "$peak" -le 2 ] && echo "PASS --max-outbound 2: at most 2 calls at once (peak $peak)" || { echo "FAIL --max-outbound 2: $peak calls at once"; fail=1; }
[ "$total" = 30 ] && echo "PASS --max-outbound 2: every call made" || { echo "FAIL --max-outbound 2: $total calls, want 30"; fail=1; }
t "the last session" 0 "$X" show 10 --owner $O --from $O --json
lacks "capped calls are not errors" '"valid": false'
has "capped calls answered" '"valid": true'
stop_xgrd

# per owner: two owners, one call each at a time
api reset >/dev/null
start_xgrd per --api-map "http://slow.test=$API" --allow-outbound loopback --max-outbound-per-owner 1
"$X" deploy "$D/fan_slow.json" --from $O >/dev/null
for i in 1 2 3; do
  "$X" enqueue --owner $O --from $O --ostc-id fan --step S >/dev/null
  "$X" enqueue --owner $O2 --from $O2 --registry local --registry-owner $O --ostc-id fan --step S >/dev/null   # $O's documents
done
a=$(wait_done $O 3); b=$(wait_done $O2 3)
[ "$a/$b" = 3/3 ] && echo "PASS --max-outbound-per-owner 1: every session completed" || { echo "FAIL --max-outbound-per-owner 1: $a/$b of 3/3"; fail=1; }
peak=$(api peak .peak)
[ "$peak" -le 2 ] && echo "PASS --max-outbound-per-owner 1: at most one call per owner (peak $peak for 2 owners)" || { echo "FAIL --max-outbound-per-owner 1: $peak at once"; fail=1; }
stop_xgrd

# out of file descriptors: xgrd says so (once per 10 s), counts it, and accepts again afterwards
rm -f "$tmp/fds.port"
(ulimit -n 64; exec "$XD" --listen 127.0.0.1:0 --auth none --port-file "$tmp/fds.port" --log-level warn --threads 2 \
   --workers 1 2>"$tmp/fds.log") &
XP=$!
pids+=("$XP")
for _ in $(seq 100); do [ -s "$tmp/fds.port" ] && break; sleep 0.05; done
FPORT=$(cat "$tmp/fds.port")
python3 - "$FPORT" <<'PY'
import socket, sys, time
port = int(sys.argv[1])
held = [socket.create_connection(('127.0.0.1', port)) for _ in range(120)]   # more than 64 descriptors
time.sleep(1.0)
for c in held:
    c.close()
PY
got=""
for _ in $(seq 50); do got=$(curl -sf "http://127.0.0.1:$FPORT/metrics" 2>/dev/null) && break; sleep 0.1; done
out=$got; err=""
has "accepts again after the descriptors came back" 'xgr_http_accept_failures_total'
n=$(grep '^xgr_http_accept_failures_total ' <<<"$got" | awk '{print $2}')
[ "${n:-0}" -ge 1 ] && echo "PASS accept failures counted ($n)" || { echo "FAIL accept failures not counted: ${n:-none}"; fail=1; }
lines=$(grep -c 'msg="cannot accept connections" error="Error accepting connection: Too many open files"' "$tmp/fds.log")
[ "$lines" = 1 ] && echo "PASS one log line for the burst (at most one per 10 s)" || { echo "FAIL $lines log lines:"; cat "$tmp/fds.log"; fail=1; }
stop_xgrd

# ---- xgr run and xgr step: the same policy --------------------------------------------------------
api reset >/dev/null
for vt in "" --virtual-time; do
  t "run ${vt:-engine}: refused by default" 0 "$X" run "$D/fan_slow.json" --start S $vt --json --api-map "http://slow.test=$API"
  has "run ${vt:-engine}: the refusal" 'outbound address 127.0.0.1 (loopback) of host \"127.0.0.1\" is not allowed'
  t "run ${vt:-engine}: allowed" 0 "$X" run "$D/fan_slow.json" --start S $vt --json --api-map "http://slow.test=$API" --allow-outbound loopback
  lacks "run ${vt:-engine}: no refusal" 'outbound address'
done
[ "$(api peak .total)" = 6 ] && echo "PASS run: only the allowed runs reached the API" || { echo "FAIL run: $(api peak .total) calls"; fail=1; }
t "run --allow-outbound bad" 2 "$X" run "$D/fan_slow.json" --start S --allow-outbound 300.1.1.1
is_err "run --allow-outbound message" 'xgr run: --allow-outbound "300.1.1.1": expected a CIDR (10.0.0.0/8, fd00::/8), an address, or one of loopback, link-local, private, cgnat, unspecified, multicast, reserved, any'

exit $fail
