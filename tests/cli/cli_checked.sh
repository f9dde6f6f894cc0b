#!/usr/bin/env bash
# cli_checked.sh XGR XGRD — issue 32 from the outside: the command line checks what it is given
# and never guesses. A mistyped option names the nearest one (every subcommand and xgrd), JSON
# option values and script files that are not what they must be end with exit 2 and say where,
# xgrd's operator settings (--max-running, --session-ttl, --history-retention, as flags and as
# --config keys) take effect, and xgrd's start log counts what it recovered and left hibernated.
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

. "$(dirname "$0")/../lib/expect.sh"   # t, has, lacks, is_err, is, json, start_xgrd

# ---- a mistyped option: the nearest option, one line, exit 2, not the usage ----------------------
t "run --strat" 2 "$X" run "$D/wait_hour.json" --strat A
is_err "run --strat message" "xgr run: unknown option --strat; did you mean --start?"
t "run --strat=A" 2 "$X" run "$D/wait_hour.json" --strat=A
is_err "run --strat=A message" "xgr run: unknown option --strat; did you mean --start?"
t "run --start without value" 2 "$X" run "$D/wait_hour.json" --start
is_err "run missing value" "xgr run: --start needs a value (xgr run --help)"
t "run ambiguous prefix" 2 "$X" run "$D/wait_hour.json" --st A
is_err "run ambiguous message" "xgr run: option --st is ambiguous; it could be --start, --store"
t "run flag given a value" 2 "$X" run "$D/wait_hour.json" --start A --json=yes
is_err "run flag value message" "xgr run: --json takes no value; give it as --json"
t "check --jsonn" 2 "$X" check --jsonn "$D/wait_hour.json"
is_err "check message" "xgr check: unknown option --jsonn; did you mean --json?"
t "explore --paylod" 2 "$X" explore "$D/wait_hour.json" --start A --paylod '{}'
is_err "explore message" "xgr explore: unknown option --paylod; did you mean --payload?"
t "step --paylod" 2 "$X" step "$D/three_rules.json" --paylod '{}'
is_err "step message" "xgr step: unknown option --paylod; did you mean --payload?"
t "eval --varz" 2 "$X" eval --varz '{}' 1
is_err "eval message" "xgr eval: unknown option --varz; did you mean --vars?"
t "eval keeps a leading minus" 0 "$X" eval -- -1
t "eval -1 + 2 as one argument" 0 "$X" eval --mode plain '-1 + 2'
has "eval negative expression" "1 (int)"
# --api-map values: one parser for run, step and xgrd (FROM=TO, both sides non-empty)
t "run --api-map without =" 2 "$X" run "$D/wait_hour.json" --start A --api-map foo
is_err "run --api-map message" 'xgr run: --api-map "foo": expected FROM=TO with both non-empty (at most 32)'
t "step --api-map empty TO" 2 "$X" step "$D/three_rules.json" --api-map http://a=
is_err "step --api-map message" 'xgr step: --api-map "http://a=": expected FROM=TO with both non-empty (at most 32)'
t "xgrd --api-map empty FROM" 2 "$XD" --api-map =http://b
is_err "xgrd --api-map message" 'xgrd: --api-map "=http://b": expected FROM=TO with both non-empty (at most 32)'
# --chain values: one parser for run, step and xgrd
t "run --chain not a URL" 2 "$X" run "$D/wait_hour.json" --start A --chain bogus
is_err "run --chain message" 'xgr run: --chain "bogus": expected URL or NAME=URL with an http:// or https:// URL'
t "step --chain not http" 2 "$X" step "$D/three_rules.json" --chain a=ftp://x
is_err "step --chain message" 'xgr step: --chain "a=ftp://x": expected URL or NAME=URL with an http:// or https:// URL'
t "xgrd --chain not a URL" 2 "$XD" --chain bogus
is_err "xgrd --chain message" 'xgrd: --chain "bogus": expected URL or NAME=URL with an http:// or https:// URL'
t "enqueue --ownr" 2 "$X" enqueue --ownr $O --step A
is_err "enqueue message" "xgr enqueue: unknown option --ownr; did you mean --owner?"
t "sessions --proceses" 2 "$X" sessions --owner $O --proceses
is_err "sessions message" "xgr sessions: unknown option --proceses; did you mean --processes?"
t "kill --onwer" 2 "$X" kill 1 --onwer $O
is_err "kill message" "xgr kill: unknown option --onwer; did you mean --owner?"
t "wake --paylaod" 2 "$X" wake 1:2 --owner $O --paylaod '{}'
is_err "wake message" "xgr wake: unknown option --paylaod; did you mean --payload?"
t "deploy --registy" 2 "$X" deploy "$D/wait_hour.json" --registy x
is_err "deploy message" "xgr deploy: unknown option --registy; did you mean --registry?"
t "put-rule --adress" 2 "$X" put-rule "$D/three_rules.json" --adress x
is_err "put-rule message" "xgr put-rule: unknown option --adress; did you mean --address?"
t "permit --chain-di" 2 "$X" permit session --chain-di 1
is_err "permit message" "xgr permit: unknown option --chain-di; did you mean --chain-id?"
t "graph --fromat" 2 "$X" graph --fromat dot "$D/wait_hour.json"
is_err "graph message" "xgr graph: unknown option --fromat; did you mean --format?"
t "history --stroe" 2 "$X" history --stroe x $O 1
is_err "history message" "xgr history: unknown option --stroe; did you mean --store?"
t "publish --chian" 2 "$X" publish "$D/wait_hour.json" --chian http://127.0.0.1:1 --key k
is_err "publish message" "xgr publish: unknown option --chian; did you mean --chain?"
t "unknown option without a near one" 2 "$X" run "$D/wait_hour.json" --frobnicate
is_err "no near option" "xgr run: unknown option --frobnicate (xgr run --help lists the options)"
# xgr grant / xgr grants: what they are given is checked before anything is sent
t "grant --rights bogus" 2 "$X" grant 1 --to "$O" --rights bogus --from "$O"
is_err "grant --rights message" "xgr grant: --rights is 'bogus'; expected read, write, manage joined by commas, or 1..7"
t "grant --expires 3x" 2 "$X" grant 1 --to "$O" --rights read --expires 3x --from "$O"
is_err "grant --expires message" "xgr grant: --expires is '3x'; expected a number and s, m, h or d (e.g. 30d)"
t "grant --revoke with --rights" 2 "$X" grant 1 --to "$O" --revoke --rights read --from "$O"
has "grant --revoke with --rights message" "xgr grant: --revoke takes no --rights, --expires, --until or --dek"
t "grant without --to" 2 "$X" grant 1 --rights read --from "$O"
has "grant without --to message" "xgr grant: give --to ADDR"
t "grant --tto" 2 "$X" grant 1 --tto "$O"
is_err "grant --tto message" "xgr grant: unknown option --tto; did you mean --to?"
t "grants --limit 0" 2 "$X" grants --limit 0 --from "$O"
is_err "grants --limit message" "xgr grants: --limit is '0'; expected 1 to 10000"
t "grant --help" 0 "$X" grant --help
has "grant --help text" "READ reads the session, WRITE also wakes its processes, MANAGE also grants"
t "mistyped command" 2 "$X" chekc "$D/wait_hour.json"
is_err "command message" "xgr: unknown command 'chekc'; did you mean 'check'?"
t "xgrd --max-runing" 2 "$XD" --max-runing 1
is_err "xgrd message" "xgrd: unknown option --max-runing; did you mean --max-running?"
t "xgrd --sesion-ttl" 2 "$XD" --sesion-ttl=5
is_err "xgrd = message" "xgrd: unknown option --sesion-ttl; did you mean --session-ttl?"
t "xgrd stray argument" 2 "$XD" --listen 127.0.0.1:0 extra
t "xgrd --help documents the settings" 0 "$XD" --help
has "help --max-running" "--max-running N        at most N processes of a session run at once (default 32"
has "help --session-ttl" "--session-ttl SECONDS  how long a finished process's row"
has "help --history-retention" "--history-retention SECONDS  how long step history"
has "help --batch-retention" "--batch-retention SECONDS  how long a finished (done, cancelled, failed) batch operation"
t "xgrd --batch-retention not a number" 2 "$XD" --batch-retention soon

# ---- JSON option values and script files ---------------------------------------------------------
printf '{"a":1,\n' >"$tmp/bad.json"
echo '[1,2]' >"$tmp/arr.json"
t "run --payload not JSON" 2 "$X" run "$D/wait_hour.json" --start A --payload '{a'
is_err "run --payload position" "xgr run: --payload: invalid JSON at line 1, column 2: expected a string key"
t "run --payload @FILE not JSON" 2 "$X" run "$D/wait_hour.json" --start A --payload "@$tmp/bad.json"
is_err "run --payload file position" "xgr run: --payload @$tmp/bad.json: invalid JSON at line 2, column 1: expected a string key"
t "run --payload @FILE an array" 2 "$X" run "$D/wait_hour.json" --start A --payload "@$tmp/arr.json"
is_err "run --payload array" "xgr run: --payload @$tmp/arr.json: expected a JSON object, got an array"
t "run --payload @missing" 2 "$X" run "$D/wait_hour.json" --start A --payload "@$tmp/none.json"
has "run --payload missing file named" "xgr run: --payload @$tmp/none.json: cannot open"
t "eval --vars not an object" 2 "$X" eval --vars '[1]' x
is_err "eval --vars array" "xgr eval: --vars: expected a JSON object, got an array"
t "eval --vars @FILE not JSON" 2 "$X" eval --vars "@$tmp/bad.json" x
is_err "eval --vars file position" "xgr eval: --vars @$tmp/bad.json: invalid JSON at line 2, column 1: expected a string key"
t "eval --vars @FILE" 0 "$X" eval --vars "@$D/../data/wait_hour.json" 'has(orchestration.id)'
t "step --payload a string" 2 "$X" step "$D/three_rules.json" --payload '"x"'
is_err "step --payload string" "xgr step: --payload: expected a JSON object, got a string"
t "explore --payload @FILE an array" 2 "$X" explore "$D/wait_hour.json" --start A --payload "@$tmp/arr.json"
is_err "explore --payload array" "xgr explore: --payload @$tmp/arr.json: expected a JSON object, got an array"
t "enqueue --payload @FILE not JSON" 2 "$X" enqueue --owner $O --step A --payload "@$tmp/bad.json"
has "enqueue --payload file named" "xgr enqueue: --payload @$tmp/bad.json: invalid JSON at line"
t "wake --payload an array" 2 "$X" wake 1:2 --owner $O --payload '[1]'
is_err "wake --payload array" "xgr wake: --payload: expected a JSON object, got an array"

# script files: every level
S=$tmp/s.json
script() { echo "$1" >"$S"; t "script $2" 2 "$X" run "$D/wait_hour.json" --start A --virtual-time --script "$S"; is_err "script $2 message" "xgr run: --script $S$3"; }
script '{"at":1}' "not an array" ": a script is an array of actions"
script '[{"at":1,"wake":{"step":"W"},' "not JSON" ": invalid JSON at line 2, column 0: string or '}' expected near end of file"
script '[{"at":1,"wak":{"step":"W"}}]' "unknown action key" ' [0].wak: unknown key "wak" (did you mean "wake"?); expected one of at, wake, kill, pause, resume, retry, caller, payload, session'
script '[{"at":1,"wake":{"ste":"W"}}]' "unknown wake key" ' [0].wake.ste: unknown key "ste" (did you mean "step"?); expected one of pid, step'
script '[{"at":1,"wake":{"pid":"1:2","step":"W"}}]' "pid and step" ' [0].wake: give "pid" (PID mode) or "step" (step mode), not both'
script '[{"at":1,"kill":"1","session":2}]' "session on a kill" ' [0].session: only a step-mode wake ({"wake":{"step":...}}) names a session; a pid names its own'
script '[{"at":1,"pause":"1","payload":{}}]' "payload on a pause" ' [0].payload: only a wake or a retry carries a payload'
script '[{"at":1,"wake":{"step":"W"},"payload":[1]}]' "payload an array" ' [0].payload: expected an object'
script '[{"at":-1,"wake":{"step":"W"}}]' "negative at" ' [0].at: expected a non-negative integer (milliseconds on the session clock)'

# --payload keys: a key the start step's rule does not declare, next to an input it lacks
t "payload key typo warned" 0 "$X" run "$D/payload_keys.json" --start A --virtual-time --quiet \
  --payload '{"Iterr":3,"__wakeUp":{"x":1},"Label":"y","note":"z"}'
is_err "payload key typo message" 'xgr run: --payload: key "Iterr" is not declared by rule "count" of step "A", so it is not read as an input (it is passed on); did you mean "Iter"?'
t "payload key present beside its typo: quiet" 0 "$X" run "$D/payload_keys.json" --start A --virtual-time --quiet \
  --payload '{"Iterr":3,"Iter":1}'
[ -z "$err" ] || { echo "FAIL payload quiet: stderr: $err"; fail=1; }
t "explore warns too" 0 "$X" explore "$D/payload_keys.json" --start A --payload '{"Labl":"y"}'
has "explore payload key" 'xgr explore: --payload: key "Labl" is not declared by rule "count" of step "A"'

# ---- xgrd: flags and --config keys take effect ---------------------------------------------------
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

echo '{"max-runing": 2}' >"$tmp/c1.json"
t "config unknown key" 2 "$XD" --config "$tmp/c1.json"
is_err "config unknown key message" "xgrd: --config $tmp/c1.json: unknown key \"max-runing\"; did you mean \"max-running\"? (the keys are xgrd's options without dashes; xgrd --help)"
echo '{"max-running": 0}' >"$tmp/c2.json"
t "config value refused" 2 "$XD" --config "$tmp/c2.json"
has "config value message" "xgrd: --max-running is 0; expected 1 to 100000"
t "--session-ttl 0 refused" 2 "$XD" --session-ttl 0
t "bad \$XGR_SESSION_TTL_SECS refused" 2 env XGR_SESSION_TTL_SECS=soon "$XD"
is_err "env message" 'xgrd: $XGR_SESSION_TTL_SECS is "soon"; expected a whole number up to 3153600000'

# --max-running: three steps that each call a slow API; the API counts the calls in flight
rm -f "$tmp/api.port"
python3 "$HERE/slow_api.py" "$tmp/api.port" &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/api.port" ] && break; sleep 0.05; done
API=http://127.0.0.1:$(cat "$tmp/api.port")
peak_after() {  # peak_after NAME XGRD-ARGS...: run fan_slow on a fresh xgrd, the API's peak of concurrent calls
  local name=$1; shift
  start_xgrd "$name" --api-map "http://slow.test=$API" --allow-outbound loopback "$@"   # the API is on loopback
  "$X" deploy "$D/fan_slow.json" --from $O >/dev/null
  "$X" enqueue --owner $O --from $O --ostc-id fan --step S >/dev/null
  local end=$((SECONDS + 20))
  while [ $SECONDS -lt $end ]; do
    "$X" sessions --owner $O --from $O --json >"$tmp/out" 2>/dev/null
    [ "$(json "d['sessions'][0]['status']" 2>/dev/null)" = completed ] && break
    sleep 0.2
  done
  stop_xgrd
  python3 -c "import json,urllib.request; print(json.load(urllib.request.urlopen('$API/peak'))['peak'])"
}
p=$(peak_after mr1 --max-running 1)
[ "$p" = 1 ] && echo "PASS --max-running 1: one step at a time" || { echo "FAIL --max-running 1: $p calls at once"; fail=1; }
grep -q "max_running=1 " "$tmp/mr1.log" && echo "PASS start log max_running=1" || { echo "FAIL start log lacks max_running=1"; cat "$tmp/mr1.log"; fail=1; }
echo '{"max-running": 3}' >"$tmp/c3.json"
p=$(peak_after mr3 --config "$tmp/c3.json")
[ "$p" = 3 ] && echo "PASS config max-running 3: three at once" || { echo "FAIL config max-running 3: peak $p"; fail=1; }

# --session-ttl / --history-retention: a finished session's processes, then its history, go
procs_hist() {  # "PROCESSES HISTORY" of session 1, or "gone" when xgrd no longer knows it
  if "$X" show 1 --owner $O --from $O --json >"$tmp/out" 2>/dev/null; then json "len(d['processes']), len(d['history'])"; else echo gone; fi
}
wait_for() {  # wait_for WANT: poll procs_hist until it says WANT (at most 15 s)
  local got end=$((SECONDS + 15))
  while got=$(procs_hist); [ "$got" != "$1" ] && [ $SECONDS -lt $end ]; do sleep 0.2; done
  echo "$got"
}
retention() {  # retention NAME WANT XGRD-ARGS...
  local name=$1 want=$2; shift 2
  start_xgrd "$name" --store "$tmp/$name.db" "$@"
  "$X" deploy "$D/two_steps.json" --from $O >/dev/null
  "$X" enqueue --owner $O --from $O --ostc-id q --step A >/dev/null
  local first; first=$(wait_for "2 2")
  [ "$first" = "2 2" ] && echo "PASS $name: finished session shown" || { echo "FAIL $name: first $first"; fail=1; }
  local got; got=$(wait_for "$want")
  [ "$got" = "$want" ] && echo "PASS $name: $want" || { echo "FAIL $name: $got, expected $want"; fail=1; }
  stop_xgrd
}
retention ttl_flag "0 2" --session-ttl 1
echo '{"session-ttl": 1, "history-retention": 1}' >"$tmp/c4.json"
retention retention_config gone --config "$tmp/c4.json"
XGR_SESSION_TTL_SECS=1 retention ttl_env "0 2"
grep -q "session_ttl_s=1 history_retention_s=0" "$tmp/ttl_env.log" && echo "PASS \$XGR_SESSION_TTL_SECS is the fallback" \
  || { echo "FAIL env fallback not in the start log"; cat "$tmp/ttl_env.log"; fail=1; }
XGR_SESSION_TTL_SECS=1 start_xgrd ttl_over --session-ttl 7
stop_xgrd
grep -q "session_ttl_s=7 " "$tmp/ttl_over.log" && echo "PASS the flag wins over the environment" || { echo "FAIL flag vs env"; fail=1; }
grep -q "history_retention_s=0 batch_retention_s=2592000\$" "$tmp/ttl_over.log" \
  && echo "PASS --batch-retention defaults to 30 days" || { echo "FAIL batch retention default"; cat "$tmp/ttl_over.log"; fail=1; }
echo '{"batch-retention": 5}' >"$tmp/c5.json"
start_xgrd bret --config "$tmp/c5.json"
stop_xgrd
grep -q "batch_retention_s=5\$" "$tmp/bret.log" && echo "PASS config batch-retention 5" \
  || { echo "FAIL config batch-retention"; cat "$tmp/bret.log"; fail=1; }

# ---- the start log: recovered, hibernated and workers after a restart with waiting sessions -------
start_xgrd r1 --store "$tmp/r.db" --hibernate-after 0
"$X" deploy "$D/wait_hour.json" --from $O >/dev/null
"$X" enqueue --owner $O --from $O --ostc-id w --step A >/dev/null
"$X" enqueue --owner $O --from $O --ostc-id w --step A >/dev/null
end=$((SECONDS + 15))
while [ $SECONDS -lt $end ]; do
  "$X" sessions --owner $O --from $O --processes --json >"$tmp/out" 2>/dev/null
  [ "$(json "sorted(i['status'] for i in d['items'])" 2>/dev/null)" = "['waiting', 'waiting']" ] && break
  sleep 0.1
done
stop_xgrd
start_xgrd r2 --store "$tmp/r.db"
stop_xgrd
n=$(getconf _NPROCESSORS_ONLN)
grep -q "msg=ready .* recovered=0 recover_failed=0 hibernated=2 workers=$n\$" "$tmp/r2.log" \
  && echo "PASS start log: 2 hibernated, $n workers" || { echo "FAIL start log after restart"; cat "$tmp/r2.log"; fail=1; }
grep -q "msg=starting .*workers=$n " "$tmp/r2.log" && echo "PASS starting line: workers=$n" || { echo "FAIL starting workers"; fail=1; }
start_xgrd r3 --store "$tmp/r.db" --hibernate-after off --workers 3
stop_xgrd
grep -q "msg=ready .* recovered=2 recover_failed=0 hibernated=0 workers=3\$" "$tmp/r3.log" \
  && echo "PASS start log without hibernation: 2 recovered, 3 workers" || { echo "FAIL start log r3"; cat "$tmp/r3.log"; fail=1; }

exit $fail
