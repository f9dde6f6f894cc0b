#!/usr/bin/env bash
# cli_author.sh XGR XGRD — issue 15 from the outside: each item a new user ran into, as a check of
# exit code and output. One PASS/FAIL line per check; exit 1 when any failed.
set -u
X=$1
XD=${2:-}
D=$(cd "$(dirname "$0")" && pwd)/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
t() {  # t NAME EXPECTED_EXIT CMD... ; stdout in $out, stderr in $err
  local name=$1 want=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
  if [ "$rc" -ne "$want" ]; then echo "FAIL $name: exit $rc, expected $want"; head -20 "$tmp/out" "$tmp/err"; fail=1; else echo "PASS $name"; fi
}
has() { if ! grep -qF -- "$2" <<<"$out$err"; then echo "FAIL $1: output lacks: $2"; printf '%s\n%s\n' "$out" "$err" | head -20; fail=1; fi; }
lacks() { if grep -qF -- "$2" <<<"$out$err"; then echo "FAIL $1: output has: $2"; printf '%s\n%s\n' "$out" "$err" | head -20; fail=1; fi; }
json() { python3 -c "import json,sys; d=json.load(open('$tmp/out')); print($1)"; }
OTHER=0x00000000000000000000000000000000000000bb

# ---- --script: unknown keys are errors, on one line, before the session starts --------------
echo '[{"at":10,"wake":{"step":"W"},"from":"'$OTHER'"}]' > "$tmp/s.json"
for vt in --virtual-time ""; do
  t "script unknown key $vt" 2 "$X" run "$D/wait_hour.json" --start A $vt --script "$tmp/s.json"
  has "script unknown key names it $vt" '[0].from: unknown key "from"'
  [ -z "$out" ] || { echo "FAIL script error before start $vt: stdout not empty"; fail=1; }
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { echo "FAIL script error on one line $vt"; cat "$tmp/err"; fail=1; }
done
echo '[{"at":10,"wake":{"stp":"W"}}]' > "$tmp/s.json"
t "script nearest key" 2 "$X" run "$D/wait_hour.json" --start A --virtual-time --script "$tmp/s.json"
has "script nearest key named" 'unknown key "stp" (did you mean "step"?)'
echo '[{"at":10,"wake":{"step":"W"},"caller":"nope"}]' > "$tmp/s.json"
t "script caller checked" 2 "$X" run "$D/wait_hour.json" --start A --virtual-time --script "$tmp/s.json"
has "script caller message" '[0].caller: expected an address'

# ---- --script: the caller is honoured like an RPC caller ---------------------------------------
echo '[{"at":10,"wake":{"step":"W"},"caller":"'$OTHER'"}]' > "$tmp/s.json"
t "script stranger wake refused" 0 "$X" run "$D/wait_hour.json" --start A --virtual-time --script "$tmp/s.json" --json
[ "$(json "d['actions'][0]['ok']")" = False ] || { echo "FAIL stranger wake applied"; fail=1; }
has "stranger wake message" 'is not on the rpc allow list'
echo '[{"at":10,"kill":"1","caller":"'$OTHER'"}]' > "$tmp/s.json"
for vt in --virtual-time "--time-scale 1000"; do
  t "script stranger kill refused $vt" 0 "$X" run "$D/wait_hour.json" --start A $vt --script "$tmp/s.json" --json
  has "stranger kill message $vt" 'only the owner may kill it'
done

# ---- xgr run --store FILE: a local run leaves an audit trail for xgr history --------------------
OWN=0x0000000000000000000000000000000000000001
t "run --store driver" 0 "$X" run "$D/wait_hour.json" --start A --virtual-time --store "$tmp/st.db" --quiet
has "run --store takes rootPid 1" "session $OWN/1: completed"
t "run --store engine" 0 "$X" run "$D/wait_hour.json" --start A --time-scale 1000000 --store "$tmp/st.db" --quiet
has "run --store takes the next rootPid" "session $OWN/2: completed"
t "history of a --store run" 0 "$X" history --store "$tmp/st.db" --json $OWN 1
[ "$(json "len(d['history'])")" = 2 ] || { echo "FAIL history rows of --store run"; cat "$tmp/out"; fail=1; }
t "history of an engine --store run" 0 "$X" history --store "$tmp/st.db" --json $OWN 2
[ "$(json "[h['step'] for h in d['history']]")" = "['A', 'W']" ] || { echo "FAIL engine --store rows"; cat "$tmp/out"; fail=1; }
t "run --store refuses a stored session" 2 "$X" run "$D/wait_hour.json" --start A --virtual-time --store "$tmp/st.db" --root-pid 2
has "run --store conflict message" "holds session $OWN/2 already"
t "run bad --start" 2 "$X" run "$D/wait_hour.json" --start Nope --virtual-time
has "run bad --start message" '"Nope" is not a step of orchestration'

# ---- text output scales: a loop's chain and a fan-out's leaves collapse; times in human units ------
t "loop text output" 0 "$X" run "$D/loop20000.json" --start S --virtual-time --max-steps 0 --quiet
has "loop chain collapsed" '→ 1:2 … 1:20001 ×20000 A  done valid'
[ "$(wc -l <"$tmp/out")" -le 8 ] || { echo "FAIL loop tree is not one line per run"; fail=1; }
t "fan-out text output" 0 "$X" run "$D/fan2000.json" --start S --virtual-time --quiet
has "fan-out leaves collapsed" '        1:290 … 1:297 ×8 W  done valid'
[ "$(wc -c <"$tmp/out")" -lt 20000 ] || { echo "FAIL fan-out tree too big"; fail=1; }
echo '[{"at":2500,"pause":"1:2"},{"at":90061001,"resume":"1:2"}]' > "$tmp/s.json"
t "human durations" 0 "$X" run "$D/wait_hour.json" --start A --virtual-time --script "$tmp/s.json"
has "duration until" 'until 1h'
has "duration seconds" '      2.5s  {"at":2500'
has "duration days" 'clock 1d1h1m1.001s'
lacks "no raw ms" '3600000ms'
t "json keeps numbers" 0 "$X" run "$D/wait_hour.json" --start A --virtual-time --json
[ "$(json "d['clockMs']")" = 3600000 ] || { echo "FAIL json clockMs"; fail=1; }

exit $fail
