#!/usr/bin/env bash
# reports.sh XGR XGRD — what the reports show (issue 32), from the outside against a real xgrd on
# 127.0.0.1: a session's next wake is the earliest timer of a process that can wake (not an open
# join target's timer, which lies in the past), the same in xgr sessions, xgr show, the listing
# and the console; xgr show names why each aborted process ended; xgr sessions --status filters
# (paused sessions show as paused) and refuses an unknown status with the nearest one.
set -u
X=$1
XD=$2
D=$(cd "$(dirname "$0")" && pwd)/data
tmp=$(mktemp -d)
O=0x00000000000000000000000000000000000000e1
fail=0
. "$(dirname "$0")/../lib/expect.sh"   # t, has, lacks, is_err, is, json, start_xgrd
start_xgrd "$XD"
rpc() { curl -s -H 'Content-Type: application/json' "$XGR_URL" -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$1\",\"params\":$2}" > "$tmp/out"; }

t "deploy" 0 "$X" deploy "$D/join_wait_bundle.json" --from $O
# session 1: A opens join T (its timer: when A ran) and spawns B; B waits an hour before C, the
# producer T waits for. The only timer that can fire is C's, an hour after B ran.
# settled(ROOT): A and B ran, T (iter 2) waits for its join and C (iter 4) for its timer
settled() {
  for _ in $(seq 200); do
    "$X" sessions --owner $O --from $O --root "$1" --processes --json > "$tmp/p.json" 2>/dev/null
    [ "$(jq -r '[.items[] | select(.resumeStep == "C" and .status == "waiting")] | length' "$tmp/p.json")" = 1 ] && return 0
    sleep 0.05
  done
  echo "FAIL session $1 did not settle"; fail=1
}
t "enqueue 1" 0 "$X" enqueue --owner $O --from $O --ostc-id joinwait --step A
settled 1
t "sessions --json" 0 "$X" sessions --owner $O --from $O --json
created=$(jq '.sessions[] | select(.rootPid == "1") | .createdAt' "$tmp/out")
next=$(jq '.sessions[] | select(.rootPid == "1") | .nextWakeAt' "$tmp/out")
# the join target's timer (when A ran) is not the session's next wake; C's is, an hour on
if [ "$next" != null ] && [ "$next" -ge $((created + 3590000)) ] && [ "$next" -le $((created + 3700000)) ]; then
  echo "PASS sessions: next wake is C's timer"; else echo "FAIL sessions: nextWakeAt $next, createdAt $created"; fail=1; fi
t "show --json" 0 "$X" show 1 --owner $O --from $O --json
is "show: the session's next wake" '.session.nextWakeAt' "$next"
is "show: the open join target does not wake on a timer" '[.processes[] | select(.resumeStep == "T") | [.nextWakeAt, .waitsFor]]' '[[null,"join"]]'
is "show: C wakes on its timer" '[.processes[] | select(.resumeStep == "C") | [.nextWakeAt, .waitsFor]]' "[[$next,\"timer\"]]"
t "show text" 0 "$X" show 1 --owner $O --from $O
utc=$(python3 -c "import datetime; t=$next; print(datetime.datetime.fromtimestamp(t//1000, datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%S') + '.%03dZ' % (t % 1000))")
has "show text: next wake" "next wake $utc"
has "show text: the join target waits for its join" "waits for its join to close"
has "show text: C's wake" "wakes $utc"
rpc xgr.listSessions "{\"owner\":\"$O\",\"from\":\"$O\",\"rootPid\":\"1\"}"
is "listSessions: the join target" '[.result.items[] | select(.resumeStep == "T") | .nextWakeAt]' '[null]'
rpc xgr.console.session "{\"owner\":\"$O\",\"rootPid\":\"1\"}"
is "console: the session's next wake" '.result.session.nextWakeAt' "$next"
is "console: the join target" '[.result.processes.items[] | select(.step == "T") | [.nextWakeAt, .waitsFor]]' '[[null,"join"]]'

# session 2 paused, session 3 killed, session 4 ends with a hard error in E
t "enqueue 2" 0 "$X" enqueue --owner $O --from $O --ostc-id joinwait --step A
settled 2
t "pause 2" 0 "$X" pause 2 --owner $O --from $O
t "enqueue 3" 0 "$X" enqueue --owner $O --from $O --ostc-id joinwait --step A
settled 3
t "kill 3" 0 "$X" kill 3 --owner $O --from $O
t "enqueue 4" 0 "$X" enqueue --owner $O --from $O --ostc-id joinwait --step E
for _ in $(seq 100); do
  "$X" sessions --owner $O --from $O --root 4 --json > "$tmp/s.json" 2>/dev/null
  [ "$(jq -r '.sessions[0].status' "$tmp/s.json")" = completed ] && break
  sleep 0.05
done
t "sessions --status paused" 0 "$X" sessions --owner $O --from $O --status paused --json
is "only the paused session" '[.sessions[] | [.rootPid, .paused, .nextWakeAt]]' '[["2",true,null]]'
t "sessions --status paused (text)" 0 "$X" sessions --owner $O --from $O --status paused
has "paused shown as paused" '2        paused'
[ "$(grep -c '^[0-9]' "$tmp/out")" -eq 1 ] && echo "PASS one paused row" || { echo "FAIL paused rows: $out"; fail=1; }
t "sessions --status running" 0 "$X" sessions --owner $O --from $O --status running --json
is "running: not the paused one" '[.sessions[] | .rootPid]' '["1"]'
t "sessions --status waiting" 0 "$X" sessions --owner $O --from $O --status waiting --json
is "waiting: running, no step running" '[.sessions[] | .rootPid]' '["1"]'
t "sessions --status killed" 0 "$X" sessions --owner $O --from $O --status killed --json
is "killed" '[.sessions[] | .rootPid]' '["3"]'
t "sessions --status finished" 0 "$X" sessions --owner $O --from $O --status finished --json
is "finished" '[.sessions[] | .rootPid]' '["4","3"]'
t "sessions --processes --status aborted" 0 "$X" sessions --owner $O --from $O --processes --status aborted --json
is "aborted processes" '[.items[] | [.pid, .abortReason]] | sort' '[["3:2","killed"],["3:4","killed"],["4:1","error"]]'
t "sessions --status typo" 1 "$X" sessions --owner $O --from $O --status pasued
has "typo: nearest status" 'is "pasued"; expected a session status: running, waiting, paused, live, completed, killed, stalled, limit or finished (did you mean "paused"?) (code -32602, at status)'
t "sessions --status done (a process status)" 1 "$X" sessions --owner $O --from $O --status done
has "done is not a session status" 'expected a session status'
t "sessions --processes --status done" 0 "$X" sessions --owner $O --from $O --processes --status done --json
is "done processes: A and B of sessions 1-3" '[.items[] | .pid] | sort' '["1:1","1:3","2:1","2:3","3:1","3:3"]'

# xgr show names why each aborted process ended
t "show killed session" 0 "$X" show 3 --owner $O --from $O
has "show: killed reason" 'aborted: killed'
[ "$(grep -c 'aborted: killed' <<<"$out")" -eq 2 ] && echo "PASS show: both killed processes" || { echo "FAIL show killed rows"; fail=1; }
t "show hard error" 0 "$X" show 4 --owner $O --from $O
has "show: error reason and message" 'aborted: error: rules[0]: at 2: division by zero'
exit $fail
