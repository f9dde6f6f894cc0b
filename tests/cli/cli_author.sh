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
. "$(dirname "$0")/../lib/expect.sh"   # t, has, lacks, is_err, is, json, start_xgrd
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
echo '[{"at":3000000,"wake":{"step":"W"},"caller":"'$OTHER'"}]' > "$tmp/s.json"
t "script stranger wake refused (engine)" 0 "$X" run "$D/wait_hour.json" --start A --time-scale 10000 --script "$tmp/s.json" --json
has "stranger wake message (engine)" 'is not on the rpc allow list'
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
echo '{"Y":"from a file"}' > "$tmp/p.json"
t "run --payload @FILE" 0 "$X" run "$D/wait_hour.json" --start A --virtual-time --payload "@$tmp/p.json" --json
[ "$(json "d['processes'][0]['payload']['Y']")" = "from a file" ] || { echo "FAIL run --payload @FILE"; fail=1; }
t "run --payload @missing" 2 "$X" run "$D/wait_hour.json" --start A --virtual-time --payload @/nonexistent/p.json
t "run --help names --max-running" 0 "$X" run --help
has "max-running documented" '--max-running N    at most N processes of the session run at once'
t "json keeps numbers" 0 "$X" run "$D/wait_hour.json" --start A --virtual-time --json
[ "$(json "d['clockMs']")" = 3600000 ] || { echo "FAIL json clockMs"; fail=1; }

# ---- why did it do that: xgr step prints each rule and why the invalid branch ran ---------------
t "step per-rule results" 1 "$X" step "$D/three_rules.json" --payload '{"n":5}'
has "rule true" 'rule[0]    true     [n] > 1'
has "rule missing key" "rule[1]    missing  [q] == 2   (missing key 'q')"
has "rule abortStep false" 'rule[2]    false    abortStep [m] > 5'
t "step missing input" 1 "$X" step "$D/three_rules.json" --payload '{}'
has "missing input named" 'missing    input n: required (no default)'
has "skipped validate rules" 'rule[0]    skipped  [n] > 1   (a required input is missing)'
t "step --json rules" 1 "$X" step "$D/three_rules.json" --payload '{"n":5}' --json
[ "$(json "[r['result'] for r in d['rules']]")" = "['true', 'missing', 'false']" ] || { echo "FAIL step --json rules"; cat "$tmp/out"; fail=1; }

# ---- errors that mislead: document kinds, typos, template traps, failed rule loads --------------
t "step of a bundle needs --rule" 2 "$X" step "$D/typos_bundle.json"
has "step bundle hint" 'is a bundle; name the rule to run with --rule NAME, a key of its rules (a, b)'
t "step BUNDLE --rule by step id" 0 "$X" step "$D/template_trap_bundle.json" --rule B --payload '{"x":3}'
t "step BUNDLE --rule by key" 0 "$X" step "$D/template_trap_bundle.json" --rule b --payload '{"x":3}'
t "step of an orchestration" 2 "$X" step "$D/../../orch/docs/mode_any.json"
has "step orchestration hint" 'is an orchestration (XRC-729), not a rule document; for an orchestration: xgr check'
t "check of a rule document" 0 "$X" check "$D/three_rules.json"
has "check rule ok" 'ok, rule document, 2 inputs, 3 rules'
lacks "check rule no structure error" 'structure'
t "put-orchestration of a bundle" 2 "$X" put-orchestration "$D/typos_bundle.json"
has "put-orchestration hint" 'is a bundle ({"orchestration", "rules"}), not an orchestration (XRC-729); for a bundle:'
t "put-rule of an orchestration" 2 "$X" put-rule --address 0x00000000000000000000000000000000000000aa "$D/../../orch/docs/mode_any.json"
has "put-rule hint" 'is an orchestration (XRC-729), not a rule document (XRC-137)'
t "check typos in rules" 1 "$X" check "$D/typos_bundle.json"
has "typo paylod" 'rules.a.paylod: warning: unknown key `paylod` in a rule document is ignored — did you mean `payload`?'
has "typo rulez" 'did you mean `rules`?'
has "typo waitsec" 'rules.a.onValid.waitsec: warning: unknown key `waitsec` in a branch is ignored — did you mean `waitSec`?'
has "typo defualt" 'did you mean `default`?'
has "template minus" 'rules.a.onValid.payload.d: warning: "[x]-[y]" is a template, not arithmetic'
lacks "no template warning for [n]+1" 'payload.u: warning'
lacks "no template warning for kyc-valid-[x]" 'payload.t: warning'
has "failed rule load reported" 'rules.b.rules[0]: error:'
lacks "failed rule load not also unresolved" 'orchestration.structure.B.rule: error'
t "template trap error" 1 "$X" check "$D/template_trap_bundle.json"
has "template trap explained" 'is read as an expression, not a template, because `=` appears outside placeholders and quotes'

# ---- small things that misled ------------------------------------------------------------------
t "k:-1 reported as -1" 1 "$X" check "$D/k_minus_one.json"
has "k:-1 message" 'k is -1 but the join has 2 `from` entries'
lacks "no citation of seeds" 'seed 003'
t "pitfall cites the project's docs" 1 "$X" check "$D/../../orch/docs/seed003_7_4_pitfall.json"
has "pitfall cites docs/SEMANTICS.md" '(docs/SEMANTICS.md, "Join scopes")'
t "run --root-pid beyond int64" 2 "$X" run "$D/wait_hour.json" --start A --virtual-time --root-pid 18446744073709551616
has "root-pid refused" "--root-pid is '18446744073709551616'"
t "step --session-id beyond uint64" 2 "$X" step "$D/three_rules.json" --session-id 18446744073709551616
t "run --owner validated" 2 "$X" run "$D/wait_hour.json" --start A --virtual-time --owner nope
has "owner message" "--owner is 'nope'; expected an address"
t "step --owner validated" 2 "$X" step "$D/three_rules.json" --owner nope
t "history owner validated" 2 "$X" history --store "$tmp/st.db" nope 1
has "history owner message" "OWNER is 'nope'; expected an address"
t "history owner lowercased" 0 "$X" history --store "$tmp/st.db" 0X0000000000000000000000000000000000000001 1
has "history UTC created" 'created 20'
has "history human times" '+1h'
t "eval --json NaN" 0 "$X" eval --json '1.0/0.0'
has "eval Infinity" '"value":null,"nonFinite":"Infinity"'
t "eval invalid UTF-8 refused" 2 "$X" eval --json $'ab\xffc'
has "eval UTF-8 message" 'EXPR is not valid UTF-8'

# ---- API outcomes are kept: status, time, final URL (credentials masked), error ------------------
t "step shows the API call" 1 "$X" step "$D/api_dns.json"
has "step api url masked" 'http://***@quotes.invalid/v1/price?apikey=***&symbol=ETH'
has "step api error" 'error: transport error: Could not resolve host: quotes.invalid'
lacks "step hides the secret" 'SECRET123'
lacks "step hides the password" 'user:pw'
for vt in --virtual-time ""; do
  t "run history apiCalls $vt" 0 "$X" run "$D/api_dns_bundle.json" --start Q $vt --json
  [ "$(json "d['history'][0]['apiCalls'][0]['url']")" = 'http://***@quotes.invalid/v1/price?apikey=***&symbol=ETH' ] \
    || { echo "FAIL run history apiCalls $vt"; cat "$tmp/out"; fail=1; }
  [ "$(json "'Could not resolve host' in d['history'][0]['apiCalls'][0]['error']")" = True ] \
    || { echo "FAIL run history api error $vt"; fail=1; }
done
t "run --store keeps API outcomes" 0 "$X" run "$D/api_dns_bundle.json" --start Q --virtual-time --store "$tmp/api.db" --quiet
t "history shows API outcomes" 0 "$X" history --store "$tmp/api.db" $OWN 1
has "history api line" 'api quote: status 0,'
has "history api error" 'Could not resolve host: quotes.invalid'
lacks "history hides the secret" 'SECRET123'

# ---- docs/SEMANTICS.md stays in step with the tests: every scenario it names exists -------------
SC=$D/../../scenarios
for name in $(grep -o '`[a-z0-9_*]*\.json`' "$D/../../../docs/SEMANTICS.md" | tr -d '`' | sort -u); do
  # shellcheck disable=SC2086
  if ! ls $SC/$name >/dev/null 2>&1; then echo "FAIL SEMANTICS.md names scenario $name, which does not exist"; fail=1; fi
done
echo "PASS SEMANTICS.md scenario names"
grep -q 'docs/SEMANTICS.md' "$D/../../../README.md" || { echo "FAIL README does not point at docs/SEMANTICS.md"; fail=1; }
if grep -q '\.\./shared/SEMANTICS' "$D/../../../README.md"; then echo "FAIL README points outside the repository"; fail=1; fi

# ---- README's sample `xgr check` output is what xgr prints -----------------------------------------
R=$D/../../..
want=$(awk '/^\$ build\/xgr check examples\/orchestrations\/pitfall_unfulfillable_join.json$/{on=1; next} on && /^```/{exit} on' "$R/README.md" | sort)
got=$(cd "$R" && "$X" check examples/orchestrations/pitfall_unfulfillable_join.json 2>&1 | sort)
if [ -n "$want" ] && [ "$want" = "$got" ]; then echo "PASS README check sample"; else
  echo "FAIL README check sample differs:"; diff <(echo "$want") <(echo "$got"); fail=1; fi

# ---- against a real xgrd on loopback -------------------------------------------------------------
if [ -n "$XD" ]; then
  start_xgrd "$XD"
  O=0x00000000000000000000000000000000000000c1
  t "deploy" 0 "$X" deploy "$D/wait_hour.json" --from $O
  t "enqueue 1" 0 "$X" enqueue --owner $O --from $O --ostc-id w --step A
  t "enqueue 2" 0 "$X" enqueue --owner $O --from $O --ostc-id w --step A
  sleep 0.3
  t "kill session 2" 0 "$X" kill 2 --owner $O --from $O
  t "sessions: one row per session" 0 "$X" sessions --owner $O --from $O
  has "sessions header" 'ROOTPID  STATUS     ORCHESTRATION'
  has "session 1 running with one live process" '1        running    local/w'
  has "session 2 killed" 'killed'
  [ "$(grep -c '^[0-9]' "$tmp/out")" -eq 2 ] || { echo "FAIL sessions: expected 2 rows"; cat "$tmp/out"; fail=1; }
  t "sessions --json" 0 "$X" sessions --owner $O --from $O --json
  [ "$(json "[(s['rootPid'], s['live'], s.get('abortReason')) for s in d['sessions']]")" = "[('2', 0, 'killed'), ('1', 1, None)]" ] \
    || { echo "FAIL sessions json rows"; cat "$tmp/out"; fail=1; }
  [ "$(json "d['sessions'][1]['nextWakeAt'] is not None")" = True ] || { echo "FAIL sessions nextWakeAt"; fail=1; }
  t "sessions --processes" 0 "$X" sessions --owner $O --from $O --processes
  has "process rows" 'PID            PARENT'
  has "process 1:2" '1:2'
  t "sessions --runner" 0 "$X" sessions --runner $O --from 0x00000000000000000000000000000000000000c2
  has "runner view header" 'PID            PARENT'
  t "sessions --owner validated" 2 "$X" sessions --owner nope --from $O
  t "show a session" 0 "$X" show 1 --owner $O --from $O
  t "show a missing process" 1 "$X" show 1:99 --owner $O --from $O
  has "show missing process message" 'has no process 1:99'
  t "show an existing process" 0 "$X" show 1:2 --owner $O --from $O
  t "putRule name no step can use" 1 "$X" put-rule --address 0x123 "$D/three_rules.json" --from $O
  has "putRule 0x123 refused" 'looks like an address but has 3 hex digits; expected 40'
  t "putRule with white space" 1 "$X" put-rule --address 'my rule' "$D/three_rules.json" --from $O
  t "putRule alias ok" 0 "$X" put-rule --address my_rule "$D/three_rules.json" --from $O
  t "deploy the API bundle" 0 "$X" deploy "$D/api_dns_bundle.json" --from $O
  t "enqueue the API bundle" 0 "$X" enqueue --owner $O --from $O --ostc-id api --step Q
  sleep 0.5
  t "show keeps API outcomes" 0 "$X" show 3 --owner $O --from $O
  has "show api line" 'api quote: status 0,'
  has "show api url masked" 'http://***@quotes.invalid/v1/price?apikey=***&symbol=ETH'
  has "show api error" 'Could not resolve host'
  lacks "show hides the secret" 'SECRET123'

fi

exit $fail
