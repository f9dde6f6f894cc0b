#!/usr/bin/env bash
# scripts/demo.sh — the main job on the examples: check the example orchestrations and bundles,
# draw them, run sessions end to end on the deterministic driver (among them a price feed and a
# 2-of-3 price quorum against a stand-in price API on 127.0.0.1, examples/price_api.py), then
# register the bundles in xgrd (a throwaway SQLite store) and run sessions through JSON-RPC,
# printing their timelines, and finally print the console's address with sessions left to look at
# (an open 2-of-3 join, a KYC order waiting for its check, a price feed polling every minute).
# Uses only the repository's files. `make demo` runs it after `make deps build`.
set -uo pipefail
cd "$(dirname "$0")/.."
X=build/xgr
out=build/demo
mkdir -p "$out"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# a report of `xgr run --json` as one line per process: pid, step, status, outcome, the named keys
table() {
  python3 -c '
import json, sys
keys = sys.argv[1:]
for p in json.load(sys.stdin)["processes"]:
    outcome = {True: "valid", False: "invalid", None: ""}[p["valid"]]
    pl = p["payload"] or {}
    val = lambda v: ("%.6g" % v) if isinstance(v, float) else str(v)
    shown = "  ".join("%s=%s" % (k, val(pl[k])) for k in keys if k in pl)
    print("  %-6s %-10s %-8s %-8s %s" % (p["pid"], p["step"], p["status"], outcome, shown))
' "$@"
}

step "xgr check: the project's orchestrations and bundles"
$X check examples/orchestrations/nested_joins.json examples/orchestrations/kofn_backloop.json \
  examples/orchestrations/kofn_race.json examples/bundles/*.json || exit 1

step "xgr check on a broken orchestration (the join-scope pitfall, docs/SEMANTICS.md \"Join scopes\") — expected to fail"
$X check examples/orchestrations/pitfall_unfulfillable_join.json
[ $? -eq 1 ] || { echo "demo: the pitfall was not caught"; exit 1; }

step "xgr graph: diagrams written to $out/"
for f in examples/orchestrations/*.json examples/bundles/*.json; do
  name=$(basename "$f" .json)
  $X graph "$f" > "$out/$name.mmd" 2>/dev/null && $X graph --format dot "$f" > "$out/$name.dot" 2>/dev/null &&
    $X graph --format svg "$f" > "$out/$name.svg" 2>/dev/null && echo "  $out/$name.mmd  $out/$name.dot  $out/$name.svg"
done
echo; echo "examples/bundles/nested_joins.json as Mermaid:"; cat "$out/nested_joins.mmd"

step "xgr run: two joins in series (any + kill, then all + kill)"
$X run examples/bundles/nested_joins.json --start A1 || exit 1

step "xgr run: a 2-of-3 race with kill, where one producer fails (hard error)"
$X run examples/bundles/kofn_race.json --start A --payload '{"B":"error"}' || exit 1

step "xgr run: IterationOfPi, 5 steps of the endless loop (waitSec 3600 on virtual time)"
$X run examples/bundles/iteration_of_pi.json --start PiIterationStep --payload '{"Iter":0,"S":0.0,"Pi":0.0}' --max-steps 5 --quiet --virtual-time
[ $? -eq 1 ] || exit 1   # a step limit ends the run with exit code 1 by design

step "the stand-in price API: three made-up price sources on 127.0.0.1 (examples/price_api.py)"
pdir=$(mktemp -d /tmp/xgr-demo-prices.XXXXXX)
python3 examples/price_api.py "$pdir/port" &
ppid=$!
trap 'kill $ppid 2>/dev/null; wait $ppid 2>/dev/null; rm -rf "$pdir"' EXIT
for _ in $(seq 100); do [ -s "$pdir/port" ] && break; sleep 0.05; done
[ -s "$pdir/port" ] || { echo "demo: the price API did not start"; exit 1; }
API="http://127.0.0.1:$(cat "$pdir/port")"
# the bundles name https://{alpha,beta,gamma}.prices.example; --api-map sends those calls here, on
# loopback, which the outbound policy refuses unless --allow-outbound allows it (docs/SECURITY.md)
MAP=(--api-map "https://alpha.prices.example=$API/alpha" --api-map "https://beta.prices.example=$API/beta"
     --api-map "https://gamma.prices.example=$API/gamma" --allow-outbound loopback)
echo "price API at $API: $(curl -s "$API/health"); the sources answer in three shapes:"
echo "  alpha  GET /alpha/v1/ticker/BTC-USD  {\"pair\": \"BTC-USD\", \"last\": \"65040.00\", \"n\": 1}"
echo "  beta   GET /beta/quote?base=BTC&quote=USD  {\"quote\": {\"base\": \"BTC\", \"quote\": \"USD\", \"price\": 65055.0}}"
echo "  gamma  GET /gamma/rates  {\"rates\": {\"BTC\": {\"USD\": 65020.0}}}"

step "xgr run: a price feed loop, 5 polls a minute apart (virtual time); alpha's 3rd answer jumps 25% and is rejected"
$X run examples/bundles/price_feed.json --start Poll --max-steps 5 --virtual-time --json "${MAP[@]}" >"$out/price_feed.json"
[ $? -eq 1 ] || { echo "demo: the price feed did not stop at its step limit"; exit 1; }
table Round Quoted Last Change Note <"$out/price_feed.json"

step "xgr run: a 2-of-3 price quorum: three sources asked at once, a k-of-n join takes the first two answers"
echo "(beta's first request fails with 503: its step retries after 10 s, and the join closes with alpha and gamma)"
$X run examples/bundles/price_quorum.json --start Ask --virtual-time "${MAP[@]}" || exit 1
$X run examples/bundles/price_quorum.json --start Ask --virtual-time --json "${MAP[@]}" >"$out/price_quorum.json" || exit 1
echo "a second session: alpha and beta answer first, gamma is not needed"
table AlphaPrice BetaPrice GammaPrice Price Sources Agreed <"$out/price_quorum.json"

step "xgrd: the daemon with a throwaway SQLite store, in permit mode (every call signed); the example bundles registered and run through JSON-RPC"
D=build/xgrd
ddir=$(mktemp -d /tmp/xgr-demo.XXXXXX)
$D --listen 127.0.0.1:0 --store "sqlite:$ddir/store.db" --port-file "$ddir/port" --log-level warn "${MAP[@]}" \
  2>"$ddir/xgrd.log" &
dpid=$!
trap 'kill $dpid $ppid 2>/dev/null; wait $dpid $ppid 2>/dev/null; rm -rf "$ddir" "$pdir"' EXIT
for _ in $(seq 100); do [ -s "$ddir/port" ] && break; sleep 0.05; done
URL="http://127.0.0.1:$(cat "$ddir/port")"
echo "xgrd listening at $URL (store $ddir/store.db, --auth permits: EIP-712 permits on every call that acts)"
echo "xgr key new: the owner's signing key (mode 0600); the CLI signs each call's permit with it (XGR_KEY_FILE)"
OWNER=$($X key new "$ddir/owner.key") || exit 1
export XGR_KEY_FILE="$ddir/owner.key"
echo "owner $OWNER"
OWNER=$(echo "$OWNER" | tr 'A-F' 'a-f')
for b in nested_joins kofn_race iteration_of_pi price_quorum; do
  $X deploy examples/bundles/$b.json --registry $b --url "$URL" | tail -1 || exit 1
done
echo "a signed start (SessionPermit: sessionId = the next rootPid, ostcHash = the registered orchestration):"
$X enqueue --url "$URL" --registry nested_joins --step A1 || exit 1
$X enqueue --url "$URL" --registry kofn_race --step A --payload '{"B":"error"}' || exit 1
$X enqueue --url "$URL" --registry iteration_of_pi --step PiIterationStep \
  --payload '{"Iter":0,"S":0.0,"Pi":0.0}' || exit 1
echo "curl without a permit: refused (-32007)"
curl -s -H 'Content-Type: application/json' "$URL" \
  -d '{"jsonrpc":"2.0","id":1,"method":"xgr.listSessions","params":{"owner":"'$OWNER'"}}'; echo
echo "curl with a permit from xgr permit (xdalaPermit), and the public xgr_sessionAlive for the endless IterationOfPi session:"
P=$($X permit xdala --url "$URL") || exit 1
curl -s -H 'Content-Type: application/json' "$URL" \
  -d '{"jsonrpc":"2.0","id":2,"method":"xgr.listSessions","params":{"rootPid":"3","permit":'"$P"'}}' | head -c 300; echo ...
curl -s -H 'Content-Type: application/json' "$URL" \
  -d '{"jsonrpc":"2.0","id":3,"method":"xgr_sessionAlive","params":["'$OWNER'","3"]}'; echo
sleep 1
for r in 1 2; do echo; $X show $r --url "$URL" || exit 1; done
echo; echo "a signed wake (ControlPermit, action wake, step mode): IterationOfPi's next step runs now instead of in 3600 s"
$X wake --step PiIterationStep --root 3 --url "$URL" || exit 1
sleep 0.5
echo; $X sessions --root 3 --url "$URL" || exit 1
echo "a signed kill (ControlPermit, single use):"
$X kill 3 --url "$URL" || exit 1
echo; echo "the price quorum in xgrd (started with the same --api-map):"
$X enqueue --url "$URL" --registry price_quorum --step Ask || exit 1
for _ in $(seq 100); do $X sessions --root 4 --url "$URL" 2>/dev/null | grep -q completed && break; sleep 0.1; done
$X show 4 --url "$URL" || exit 1

step "the console: xgrd serves it at /ui/ (docs/CONSOLE.md)"
# In permit mode the console asks the browser's wallet to sign; so that a browser without one can
# look, the demo gives the console its own xgrd with --auth none on loopback (a second throwaway store).
cdir=$(mktemp -d /tmp/xgr-demo-console.XXXXXX)
$D --listen 127.0.0.1:${XGR_DEMO_CONSOLE_PORT:-0} --auth none --store "sqlite:$cdir/store.db" --port-file "$cdir/port" \
  --log-level warn "${MAP[@]}" 2>"$cdir/xgrd.log" &
cpid=$!
trap 'kill $dpid $cpid $ppid 2>/dev/null; wait $dpid $cpid $ppid 2>/dev/null; rm -rf "$ddir" "$cdir" "$pdir"' EXIT
for _ in $(seq 100); do [ -s "$cdir/port" ] && break; sleep 0.05; done
URL="http://127.0.0.1:$(cat "$cdir/port")"
unset XGR_KEY_FILE
OWNER=0x00000000000000000000000000000000000000d1
for b in kyc_onboarding race_wait price_feed; do
  $X deploy examples/bundles/$b.json --registry $b --url "$URL" | tail -1 || exit 1
done
ALLOW='{"__wakeUp":{"steps":{"ship":{"internal":["*"],"rpc":["'$OWNER'"]}}}}'
# the KYC-like pair: order 1 waits at ship until the KYC session 2 wakes it; order 3 keeps waiting
$X enqueue --url "$URL" --owner $OWNER --root 1 --registry kyc_onboarding --step order --payload "$ALLOW" || exit 1
sleep 0.3
$X enqueue --url "$URL" --owner $OWNER --root 2 --registry kyc_onboarding --step kyc_collect \
  --payload '{"Runner":"'$OWNER'","Target":1}' || exit 1
$X enqueue --url "$URL" --owner $OWNER --root 3 --registry kyc_onboarding --step order --payload "$ALLOW" || exit 1
# a 2-of-3 kill join left open: B fails, C arrives, D waits an hour (wake it from the page)
$X enqueue --url "$URL" --owner $OWNER --root 4 --registry race_wait --step A --payload '{"B":"error"}' || exit 1
# the price feed loop, polling the stand-in API once a minute while the console is up
$X enqueue --url "$URL" --owner $OWNER --root 5 --registry price_feed --step Poll || exit 1
sleep 0.3
echo
echo "  console:              $URL/ui/#/sessions?owner=$OWNER"
echo "  an open 2-of-3 join:  $URL/ui/#/session/$OWNER/4   (wake D from the page to close it)"
echo "  a KYC order waiting:  $URL/ui/#/session/$OWNER/3   (wake ship in step mode with {\"KycOk\": true})"
echo "  a price feed loop:    $URL/ui/#/session/$OWNER/5   (polls the stand-in API at $API once a minute)"
# Interactive runs keep xgrd up for the console (XGR_DEMO_CONSOLE_SECS, default 1800 on a terminal,
# 0 otherwise, so CI does not wait); Ctrl-C stops it.
keep=${XGR_DEMO_CONSOLE_SECS:-$([ -t 1 ] && echo 1800 || echo 0)}
if [ "$keep" -gt 0 ]; then
  echo; echo "xgrd stays up for $keep s so you can look at the console; Ctrl-C stops it."
  for _ in $(seq "$keep"); do kill -0 $cpid 2>/dev/null || break; sleep 1; done
fi
exit 0
