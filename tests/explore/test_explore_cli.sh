#!/usr/bin/env bash
# test_explore_cli.sh XGR — `xgr explore` on bundles built to have each finding: the expected kinds
# and severities, the exit code, and every trace written by --emit replayed with
# `xgr run --virtual-time --replay FILE` to the finding it names. Every command's exit status is
# compared exactly (a replay's: 0 when its report says completed, else 1).
set -u
XGR=$1
HERE=$(cd "$(dirname "$0")" && pwd)
B=$HERE/bundles
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
tmp=$TMP
. "$HERE/../lib/expect.sh"   # t (exact exit status; stdout in $tmp/out), lacks, has

# replayed REPORT RC — a replay's exit status is the one its report's result gives (xgr run: 0
# completed, 1 killed, stalled or step limit)
replayed() {
  local want
  want=$(jq -r 'if .result == "completed" then 0 else 1 end' "$1" 2>/dev/null)
  [ "$2" = "$want" ] || bad "$1: replay exited $2, expected ${want:-?} for its result"
}

# expect FILE START OUTCOMES EXIT "kind:severity ..." — findings must be exactly these (as a set)
expect() {
  local file=$1 start=$2 outcomes=$3 code=$4 want=$5 name
  name=$(basename "$file" .json)-$outcomes
  "$XGR" explore "$B/$file" --start "$start" --outcomes "$outcomes" --json --emit "$TMP/$name" > "$TMP/$name.json"
  local rc=$?
  [ "$rc" = "$code" ] || bad "$name: exit $rc, expected $code"
  local got
  got=$(jq -r '[.findings[] | "\(.kind):\(.severity)"] | unique | join(" ")' "$TMP/$name.json")
  [ "$got" = "$want" ] || bad "$name: findings '$got', expected '$want'"
  jq -e '.complete == true' "$TMP/$name.json" > /dev/null || bad "$name: exploration not complete"
  # every emitted trace replays to its finding
  for t in "$TMP/$name"/*.json; do
    [ -e "$t" ] || continue
    local kind step join which rep
    kind=$(jq -r .finding.kind "$t"); step=$(jq -r '.finding.step // ""' "$t"); join=$(jq -r '.finding.join // ""' "$t")
    which=$(jq -r .which "$t")
    rep=$t.report
    "$XGR" run "$B/$file" --virtual-time --replay "$t" --json > "$rep" 2> "$rep.err"
    local rrc=$?
    jq -e . "$rep" > /dev/null 2>&1 || { bad "$t: replay gave no report: $(cat "$rep.err")"; continue; }
    replayed "$rep" $rrc
    case $kind in
      join_unfulfillable)
        jq -e --arg j "$join" '[.processes[] | select(.step == $j and .join.outcome == "unfulfillable")] | length > 0' "$rep" > /dev/null ||
          bad "$t: the replay has no unfulfillable join $join" ;;
      join_undecided)
        jq -e --arg j "$join" '[.processes[] | select(.step == $j and .join.outcome == "open" and .status == "waiting")] | length > 0' "$rep" > /dev/null ||
          bad "$t: the replay has no open join $join" ;;
      unbounded_loop)
        jq -e --arg s "$step" '([.history[] | select(.step == $s)] | length) >= 2 and .result != "completed"' "$rep" > /dev/null ||
          bad "$t: the replay does not repeat $step" ;;
      stall)
        jq -e '.result == "stalled"' "$rep" > /dev/null || bad "$t: the replay does not stall" ;;
      timing_dependent)
        jq -e '.result == "completed" or .result == "killed"' "$rep" > /dev/null || bad "$t: the replay does not end" ;;
    esac
  done
  # the two traces of a timing finding end differently
  for t in "$TMP/$name"/*timing_dependent.json; do
    [ -e "$t" ] || continue
    local o=${t%.json}-other.json
    local a b sig='[.result, ([.processes[] | select(.join) | [.step, .join.outcome, (.join.inbox | keys)]] | sort), ([.processes[] | [.step, .status, .valid]] | sort)]'
    a=$(jq -c "$sig" "$t.report")
    b=$(jq -c "$sig" "$o.report")
    [ "$a" != "$b" ] || bad "$t: trace and otherTrace replay to the same result $a"
  done
}

# seed 003 §7.4 pitfall: J2 waits for P1 and Q1, but only one of G1/H1 runs before J1 kills: never
# satisfied (errors). J1 (any of G1, H1) is unfulfillable only if both end invalid, and which of
# them J1 takes is the race it declares: both info
expect pitfall.json A1 valid,invalid,error 1 "join_unfulfillable:error join_unfulfillable:info step_unreachable:error timing_dependent:info"
expect pitfall.json A1 valid 1 "join_unfulfillable:error step_unreachable:error timing_dependent:info"
# a loop without waitSec: L spawns L while valid
expect loop_nowait.json L valid,invalid,error 0 "unbounded_loop:warning"
expect loop_nowait.json L valid 1 "step_unreachable:error unbounded_loop:error"
# the same loop with waitSec 3600 in L's rule: no finding (a timer between the runs)
expect loop_wait.json L valid,invalid,error 0 ""
# a join waiting for an invalid C while B and C loop valid forever
expect undecided.json A valid 1 "join_undecided:error step_unreachable:error unbounded_loop:error"
expect undecided.json A valid,invalid,error 0 "join_unfulfillable:info unbounded_loop:warning"
# 2-of-3 kill join: which producers finish first decides the pieces (the race k of n declares)
expect kofn_kill_race.json A valid 0 "timing_dependent:info"
expect kofn_kill_race.json A valid,invalid 0 "join_unfulfillable:info timing_dependent:info"
# a join on B with when "any": it is unfulfillable only if B fails
expect join_any_fails.json A valid,invalid,error 0 "join_unfulfillable:info"
expect join_any_fails.json A valid,error 0 "join_unfulfillable:info"

# the wording of a finding only a forced outcome shows: which steps, which outcome
msg() {
  "$XGR" explore "$B/$1" --start "$2" --outcomes "$3" --json > "$TMP/msg.json"; local rc=$?
  [ $rc = 0 ] || bad "explore $1 --outcomes $3: exit $rc, expected 0"
  jq -r '[.findings[] | select(.kind == "join_unfulfillable")][0] | "\(.message)|\(.onlyIf | tostring)"' "$TMP/msg.json"
}
got=$(msg join_any_fails.json A valid,invalid,error)
[ "$got" = 'join J (k=1 of 1, drain) can end unfulfillable, only if step B fails (a hard error)|[{"step":"B","outcome":"error"}]' ] ||
  bad "only-if-fails wording: $got"
got=$(msg kofn_kill_race.json A valid,invalid,error)
[ "$got" = 'join J (k=2 of 3, kill) can end unfulfillable, only if steps B and C end invalid|[{"step":"B","outcome":"invalid"},{"step":"C","outcome":"invalid"}]' ] ||
  bad "only-if-invalid wording: $got"
# its trace is the run that forces exactly those outcomes
t "explore join_any_fails" 0 "$XGR" explore "$B/join_any_fails.json" --start A --json
jq -e '[.findings[0].trace[] | select(.finish) | .outcome] == ["valid", "error"]' "$tmp/out" > /dev/null || bad "only-if trace"

# a plain orchestration: explored with forced outcomes, its traces replay on the orchestration alone
O=${XGR_SRC:-$HERE/../..}/tests/orch/docs/seed003_7_4_pitfall.json
if [ -f "$O" ]; then
  "$XGR" explore "$O" --start A1 --emit "$TMP/orch" --json > "$TMP/orch.json"; rc=$?
  [ $rc = 1 ] || bad "orchestration pitfall: exit $rc, expected 1"
  for t in "$TMP/orch"/*join_unfulfillable*.json; do
    j=$(jq -r .finding.join "$t")
    "$XGR" run "$O" --virtual-time --replay "$t" --json > "$t.report"; rrc=$?
    replayed "$t.report" $rrc
    jq -e --arg j "$j" '[.processes[] | select(.step == $j and .join.outcome == "unfulfillable")] | length > 0' "$t.report" > /dev/null ||
      bad "$t: replay on the plain orchestration does not show $j unfulfillable"
  done
else
  bad "missing $O"
fi

# kill races both ways: each pair of pieces is reached with the third producer killed while waiting
# and with it started and finishing (two final states per result)
t "explore kofn_kill_race" 0 "$XGR" explore "$B/kofn_kill_race.json" --start A --outcomes valid --json
jq -e '[.results[] | .count] == [2,2,2] and (.results | length) == 3' "$tmp/out" > /dev/null || bad "kofn kill race: expected 3 results x 2 final states"

# usage errors
"$XGR" explore "$B/pitfall.json" --start NOPE > /dev/null 2>&1; [ $? = 2 ] || bad "unknown start step: expected exit 2"
"$XGR" explore "$B/pitfall.json" --start A1 --outcomes valid,maybe > /dev/null 2>&1; [ $? = 2 ] || bad "bad --outcomes: expected exit 2"
t "explore --help" 0 "$XGR" explore --help
has "--help lists the findings" "join_undecided"
# a cut exploration says so
t "explore --max-states 5" 0 "$XGR" explore "$B/kofn_kill_race.json" --start A --max-states 5 --json
jq -e '.complete == false' "$tmp/out" > /dev/null || bad "--max-states 5 did not cut"

# xgr check reports what xgr explore finds, with the same severity (info stays info)
for f in loop_nowait.json:L loop_wait.json:L join_any_fails.json:A kofn_kill_race.json:A undecided.json:A; do
  t "explore ${f%%:*}" 0 "$XGR" explore "$B/${f%%:*}" --start "${f##*:}" --json
  ex=$(jq -c '[.findings[] | {code: ("explore_" + .kind), sev: (if .severity == "info" then "info" else "warning" end)}] | sort' "$tmp/out")
  t "check ${f%%:*}" 0 "$XGR" check --json "$B/${f%%:*}"
  ck=$(jq -c '[(.warnings[] | {code, sev: "warning"}), (.info[] | {code, sev: "info"})] | map(select(.code | startswith("explore_"))) | sort' "$tmp/out")
  [ "$ex" = "$ck" ] || bad "check and explore disagree on ${f%%:*}: explore $ex, check $ck"
done
t "check loop_wait" 0 "$XGR" check "$B/loop_wait.json"
lacks "check does not warn on a loop with waitSec" ": warning:"
has "check of loop_wait: a summary of 0 warnings" "0 warnings"

# xgr check explores by default (warnings explore_<kind>, exit unchanged) and not with --no-explore
"$XGR" check "$B/loop_nowait.json" > "$TMP/check.txt" 2>&1; rc=$?
[ $rc = 0 ] || bad "check of loop_nowait: exit $rc, expected 0 (explore findings are warnings)"
grep -q "warning: .*\[explore_unbounded_loop\]" "$TMP/check.txt" || bad "check does not report the loop: $(cat "$TMP/check.txt")"
t "check --no-explore" 0 "$XGR" check --no-explore "$B/loop_nowait.json"
lacks "check --no-explore does not explore" "explore_"
t "check --json pitfall" 1 "$XGR" check --json "$B/pitfall.json"
jq -e '[.warnings[] | select(.code == "explore_join_unfulfillable")] | length > 0' "$tmp/out" > /dev/null ||
  bad "check --json has no explore_join_unfulfillable warning"

[ $fail = 0 ] && echo "ok: xgr explore findings and replays"
exit $fail
