#!/usr/bin/env bash
# grants_ethers.sh XGR XGRD — grants and operators (docs/SEMANTICS.md "Access") as wallets use them:
# a real xgrd in permit mode (loopback, throwaway SQLite store) with an --operator and a
# --grant-fee-wei, the owner's three KYC sessions (tests/permits/data/kyc.json: step K's branch
# grants READ to an auditor, READ+WRITE to a writer, READ+MANAGE to a manager) started with the CLI,
# then js/grants.js (ethers signs every permit) checks reads, listings, events, wakes, kills,
# manageGrants, listGrants paging and expiry; xgrd restarts on the same store and the grants are
# still there (phase 2). The CLI's `xgr sessions` shows a grantee the sessions granted to it; `xgr
# history --url` reads a session through xgrd as a READ grantee and prints the same table and the
# same --json as `xgr history --store` on the store file, and a stranger's is refused (-32007, exit 1).
# Skipped (exit 77) without Node.js/npm or when the pinned ethers cannot be installed (js/ethers.sh).
set -euo pipefail
X=$(realpath "$1") D=$(realpath "$2")
SRC=${XGR_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
js="$(dirname "$(realpath "$0")")/js"
# shellcheck source=js/ethers.sh
. "$js/ethers.sh"
ethers_ready grants_ethers
dir=$(mktemp -d /tmp/xgr-grants-ethers.XXXXXX)
pid=
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi; }
trap 'stop; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; cat "$dir/out" 2>/dev/null; tail -20 "$dir/xgrd.log"; exit 1; }

OWNER_KEY=0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318
AUDITOR_KEY=0x$(printf 'a1%.0s' $(seq 32))
WRITER_KEY=0x$(printf 'b2%.0s' $(seq 32))
MANAGER_KEY=0x$(printf 'c3%.0s' $(seq 32))
NEWBIE_KEY=0x$(printf 'd4%.0s' $(seq 32))
STRANGER_KEY=0x$(printf '33%.0s' $(seq 32))
OPERATOR_KEY=0x$(printf '5e%.0s' $(seq 32))
addr() { node -e 'const {ethers}=require(process.argv[1]); console.log(new ethers.Wallet(process.argv[2]).address.toLowerCase())' \
  "$js/node_modules/ethers" "$1"; }
AUDITOR=$(addr "$AUDITOR_KEY") WRITER=$(addr "$WRITER_KEY") MANAGER=$(addr "$MANAGER_KEY") OPERATOR=$(addr "$OPERATOR_KEY")
OWNER=$(addr "$OWNER_KEY")
(umask 077; echo "$OWNER_KEY" > "$dir/owner.key"; echo "$MANAGER_KEY" > "$dir/manager.key"; echo "$NEWBIE_KEY" > "$dir/newbie.key"
 echo "$STRANGER_KEY" > "$dir/stranger.key")
# the operator comes from --config (an array), the fee from the command line
printf '{"operator": ["%s"]}\n' "$OPERATOR" > "$dir/xgrd.json"

start() {
  rm -f "$dir/port"
  "$D" --listen 127.0.0.1:0 --store "sqlite:$dir/store.db" --port-file "$dir/port" --log-level warn \
    --config "$dir/xgrd.json" --grant-fee-wei 42 2>>"$dir/xgrd.log" &
  pid=$!
  for _ in $(seq 200); do [ -s "$dir/port" ] && break; sleep 0.05; done
  [ -s "$dir/port" ] || fail "xgrd did not start"
  URL="http://127.0.0.1:$(cat "$dir/port")"
}
start

"$X" deploy "$SRC/tests/permits/data/kyc.json" --registry kyc --url "$URL" --key "$dir/owner.key" > "$dir/out" 2>&1 ||
  fail "deploy"
for n in 1 2 3; do
  "$X" enqueue --registry kyc --step K --url "$URL" --key "$dir/owner.key" \
    --payload "{\"Auditor\":\"$AUDITOR\",\"Writer\":\"$WRITER\",\"Manager\":\"$MANAGER\"}" > "$dir/out" 2>&1 ||
    fail "enqueue $n"
done
for n in 1 2 3; do
  for _ in $(seq 200); do
    "$X" show "$n" --url "$URL" --key "$dir/owner.key" > "$dir/out" 2>&1 && grep -q "waiting" "$dir/out" && break
    sleep 0.05
  done
  grep -q "waiting" "$dir/out" || fail "W of session $n does not wait"
done
# the owner's own session 4 grants nothing to anyone
"$X" enqueue --registry kyc --step K --url "$URL" --key "$dir/owner.key" --payload \
  "{\"Auditor\":\"$OWNER\",\"Writer\":\"$OWNER\",\"Manager\":\"$OWNER\"}" > "$dir/out" 2>&1 || fail "enqueue 4"

keys=("$OWNER_KEY" "$AUDITOR_KEY" "$WRITER_KEY" "$MANAGER_KEY" "$NEWBIE_KEY" "$STRANGER_KEY" "$OPERATOR_KEY")
node "$js/grants.js" "$URL" 1 "${keys[@]}"

# the CLI through xgrd: a grantee's `xgr sessions` lists what was granted to it, marked
"$X" sessions --url "$URL" --key "$dir/manager.key" > "$dir/out" 2>&1 || fail "xgr sessions --key manager"
grep -q "ACCESS" "$dir/out" && grep -q "grant:5 of $OWNER" "$dir/out" || fail "xgr sessions does not mark the granted sessions"
[ "$(grep -c "grant:5 of $OWNER" "$dir/out")" = 3 ] || fail "xgr sessions should list the manager's three granted sessions"
"$X" show 3 --owner "$OWNER" --url "$URL" --key "$dir/manager.key" > "$dir/out" 2>&1 || fail "xgr show as a grantee"
grep -q "waiting" "$dir/out" || fail "xgr show as a grantee does not show W waiting"

# xgr history through xgrd (the node decides) and from the store file (the file's owner's view):
# the same session gives the same --json and the same table
for fmt in --json ""; do
  # shellcheck disable=SC2086 # $fmt is one option or none
  "$X" history --url "$URL" --key "$dir/manager.key" $fmt "$OWNER" 3 > "$dir/via-xgrd" 2>&1 ||
    fail "xgr history --url as a READ grantee: $(cat "$dir/via-xgrd")"
  # shellcheck disable=SC2086
  "$X" history --store "$dir/store.db" $fmt "$OWNER" 3 > "$dir/via-store" 2>&1 || fail "xgr history --store"
  cmp -s "$dir/via-xgrd" "$dir/via-store" ||
    fail "xgr history ${fmt:-(table)}: --url and --store differ: $(diff "$dir/via-xgrd" "$dir/via-store" | head -20 | tr "\n" " ")"
  if [ -n "$fmt" ]; then cp "$dir/via-xgrd" "$dir/history.json"; fi
done
python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["session"]["rootPid"] == "3" and d["session"]["status"] == "running"
assert [h["step"] for h in d["history"]] == ["K"] and d["history"][0]["parentPid"] is None
assert [a["kind"] for a in d["audit"]].count("revoke") == 1' "$dir/history.json" ||
  fail "xgr history --json lacks the session, its step K or the revoke in its audit trail: $(cat "$dir/history.json")"
grep -q "audit.*revoke" "$dir/via-xgrd" || fail "the table of xgr history shows no revoke: $(cat "$dir/via-xgrd")"
rc=0
"$X" history --url "$URL" --key "$dir/stranger.key" "$OWNER" 3 > "$dir/out" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "code -32007" "$dir/out" && grep -q "may not read" "$dir/out" ||
  fail "xgr history --url as a stranger should exit 1 with -32007 (exit $rc)"

stop   # grants survive a restart
start
node "$js/grants.js" "$URL" 2 "${keys[@]}"
echo "grants_ethers: ok"
