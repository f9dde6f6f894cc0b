#!/usr/bin/env bash
# http.sh XGR XGRD — the console's HTTP surface from the outside (curl against xgrd on 127.0.0.1):
# /ui redirects, assets and their types, unknown pages, the graph endpoint's refusals, the event
# stream (filtering, resuming with Last-Event-ID, `event: reset` once the ring has moved past the
# browser), and the console methods' parameter errors (the exact JSON-RPC code, the field path,
# the value and what was expected).
set -u
XGR=$1 XGRD=$2
tmp=$(mktemp -d /tmp/xgr-console-http.XXXXXX)
"$XGRD" --listen 127.0.0.1:0 --auth none --timeout 1 --port-file "$tmp/port" --log-level warn 2>"$tmp/log" &
dpid=$!
trap 'kill $dpid 2>/dev/null; wait $dpid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
U="http://127.0.0.1:$(cat "$tmp/port")"
O=0x00000000000000000000000000000000000000d1
fail=0
pass() { echo "PASS $1"; }
bad() { echo "FAIL $1: $2"; fail=1; }
expect() {  # expect NAME GOT WANT-SUBSTRING
  if grep -qF -- "$3" <<<"$2"; then pass "$1"; else bad "$1" "$(head -c 400 <<<"$2")"; fi
}
rpc() { curl -s -H 'Content-Type: application/json' "$U" -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$1\",\"params\":$2}"; }
. "$(dirname "$0")/../lib/expect.sh"   # rpc_err, rpc_ok: the answer in $tmp/out
call() { rpc "$@" > "$tmp/out"; }      # call METHOD PARAMS: the answer in $tmp/out

# the per-request deadline (--timeout 1 here) cuts slow requests, never an event stream
curl -sN --max-time 3 "$U/ui/events?owner=$O" >/dev/null; rc=$?
if [ $rc -eq 28 ]; then pass "an event stream outlives --timeout"; else bad "event stream cut by the request deadline" "curl exit $rc"; fi
expect "/ui redirects to /ui/" "$(curl -si "$U/ui")" "Location: /ui/"
expect "/ui/ is the page" "$(curl -si "$U/ui/")" "Content-Type: text/html; charset=utf-8"
expect "app.js is JavaScript" "$(curl -si "$U/ui/app.js")" "Content-Type: text/javascript"
expect "assets carry a CSP" "$(curl -si "$U/ui/style.css")" "Content-Security-Policy: default-src 'self'"
expect "unknown page 404" "$(curl -si "$U/ui/nope.html")" "404 Not Found"
expect "/uix is not the console" "$(curl -si "$U/uix")" "404 Not Found"
expect "graph without hash 400" "$(curl -si "$U/ui/graph.svg")" "400 Bad Request"
expect "graph of an unknown hash 404" "$(curl -si "$U/ui/graph.svg?hash=0x$(printf '%064d' 0)")" "404 Not Found"
expect "events: bad owner 400" "$(curl -si "$U/ui/events?owner=zz")" "400 Bad Request"

# a loop of 3000 steps makes more than the ring's 8192 events
cat > "$tmp/loop.json" <<'JSON'
{"orchestration":{"id":"loop","structure":{"L":{"rule":"L","onValid":{"spawns":["L"]}}}},
 "rules":{"L":{"payload":{"n":{"type":"int64","default":0}},"rules":["[n] < 3000"],"onValid":{"payload":{"n":"[n] + 1"}},"onInvalid":{}}}}
JSON
"$XGR" deploy "$tmp/loop.json" --registry loop --url "$U" >/dev/null
hash=$(rpc xgr.getOrchestration '{"xrc729":"loop"}' | sed -n 's/.*"hash":"\(0x[0-9a-f]*\)".*/\1/p')
expect "graph of a registered hash" "$(curl -s "$U/ui/graph.svg?hash=$hash")" '<g id="step&#45;L" class="node">'
(curl -sN --max-time 4 "$U/ui/events?owner=$O&rootPid=1" > "$tmp/live.txt" &)
(curl -sN --max-time 4 "$U/ui/events?owner=0x00000000000000000000000000000000000000ff" > "$tmp/other.txt" &)
sleep 0.3
"$XGR" enqueue --url "$U" --owner $O --root 1 --registry loop --step L >/dev/null
for _ in $(seq 200); do
  rpc xgr.console.session "{\"owner\":\"$O\",\"rootPid\":\"1\",\"procLimit\":1,\"histLimit\":1}" | grep -q '"status":"completed"' && break
  sleep 0.05
done
sleep 0.5
expect "the live stream got the session's events" "$(cat "$tmp/live.txt")" '"kind":"finished"'
expect "events carry ids" "$(head -c 2000 "$tmp/live.txt")" "id: 1"
if grep -q '"owner":"0x0000000000000000000000000000000000000d1"' "$tmp/other.txt" || grep -q 'data: {' "$tmp/other.txt"; then
  bad "another owner's stream stays empty" "$(head -c 300 "$tmp/other.txt")"; else pass "another owner's stream stays empty"; fi
expect "a stream resuming after the ring moved on gets a reset" \
  "$(curl -sN --max-time 1 -H 'Last-Event-ID: 5' "$U/ui/events" | head -c 3000)" "event: reset"
last=$(rpc xgr.console.info '{}' | sed -n 's/.*"eventId":\([0-9]*\).*/\1/p')
out=$(curl -sN --max-time 1 -H "Last-Event-ID: $((last - 2))" "$U/ui/events")
n=$(grep -c '^id: ' <<<"$out")
if [ "$n" = 2 ] && ! grep -q 'event: reset' <<<"$out"; then pass "Last-Event-ID resumes with the 2 events missed"; else bad "resume" "$n events: $(head -c 300 <<<"$out")"; fi

now_ms=$(($(date +%s) * 1000))
expect "sessions: created in the last hour" "$(rpc xgr.console.sessions "{\"owner\":\"$O\",\"since\":$((now_ms - 3600000)),\"until\":$((now_ms + 60000))}")" '"rootPid":"1"'
expect "sessions: none created after now" "$(rpc xgr.console.sessions "{\"owner\":\"$O\",\"since\":$((now_ms + 60000))}")" '"items":[]'
expect "sessions: none created before an hour ago" "$(rpc xgr.console.sessions "{\"owner\":\"$O\",\"until\":$((now_ms - 3600000))}")" '"items":[]'
# no owner under --auth none: every owner's sessions, each row saying whose
expect "sessions: no owner lists every owner's (--auth none)" "$(rpc xgr.console.sessions '{}')" "\"owner\":\"$O\""
call xgr.console.sessions '{"owner":"0x12"}'; rpc_err "sessions: owner malformed" -32602 owner
expect "sessions: owner malformed, the message" "$(cat "$tmp/out")" 'is \"0x12\"; expected an address'
call xgr.console.sessions "{\"owner\":\"$O\",\"limit\":500}"; rpc_err "sessions: limit over the cap" -32005 limit
is "sessions: limit over the cap, the message" .error.message '"is 500; expected at most 200"'
call xgr.console.sessions "{\"owner\":\"$O\",\"from\":\"0x00000000000000000000000000000000000000ff\"}"
rpc_err "sessions: another owner's are not readable" -32007
call xgr.console.sessions "{\"owner\":\"$O\",\"status\":\"odd\"}"; rpc_err "sessions: bad status" -32602 status
call xgr.console.sessions "{\"owner\":\"$O\",\"since\":-1}"; rpc_err "sessions: bad since" -32602 since
call xgr.console.session "{\"owner\":\"$O\",\"rootPid\":\"99\"}"; rpc_err "session: no such session" -32004
call xgr.console.session "{\"owner\":\"$O\",\"rootPid\":\"x\"}"; rpc_err "session: malformed pid" -32602 rootPid
call xgr.console.session "{\"owner\":\"$O\",\"rootPid\":\"1\",\"procLimit\":501}"; rpc_err "session: page over the cap" -32005 procLimit
call xgr.console.session "{\"owner\":\"$O\",\"rootPid\":\"1\",\"histOrder\":\"up\"}"; rpc_err "session: bad histOrder" -32602 histOrder
call xgr.console.process "{\"owner\":\"$O\",\"pid\":\"1\"}"; rpc_err "process: a session id is not a pid" -32602 pid
call xgr.console.process "{\"owner\":\"$O\",\"pid\":\"1:99999\"}"; rpc_err "process: no such process" -32004
expect "process: found" "$(rpc xgr.console.process "{\"owner\":\"$O\",\"pid\":\"1:3001\"}")" '"pid":"1:3001"'
expect "owners: none live after the loop" "$(rpc xgr.console.owners '{}')" '"items":[]'
call xgr.console.registry '{}'; rpc_err "registry: nothing named" -32602 registry
call xgr.console.registry '{"registry":"nope"}'; rpc_err "registry: unknown" -32004
expect "registry: found" "$(rpc xgr.console.registry '{"registry":"loop"}')" '"steps":[{"step":"L","rule":"L","ruleKey":"L","ruleVersions":[{"version":1'
kill -TERM $dpid; wait $dpid; rc=$?
if [ $rc -eq 0 ]; then pass "xgrd stopped cleanly"; else bad "xgrd stop" "exit $rc: $(grep -v 'level=info' "$tmp/log" | head -20)"; fi
exit $fail
