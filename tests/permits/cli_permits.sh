#!/usr/bin/env bash
# cli_permits.sh XGR XGRD — the CLI as a signer against a real xgrd in permit mode (loopback,
# throwaway SQLite store): `xgr key new` (mode 0600, never replaces a file), a key file readable by
# others refused, every client command signing with XGR_KEY_FILE / --key (deploy, enqueue, show,
# sessions, wake in step mode, pause, resume, kill), `deploy` saying when it replaces a version and
# refusing another owner's registry, `xgr permit` + curl (a control permit works once), forty control commands in a row,, and calls
# without a key refused (-32007, exit 1). Exit statuses and JSON-RPC codes are compared exactly;
# one PASS/FAIL line per check, exit 1 when any failed.
set -uo pipefail
X=$(realpath "$1") D=$(realpath "$2")
SRC=${XGR_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d /tmp/xgr-cli-permits.XXXXXX)
fail=0
. "$(dirname "$0")/../lib/expect.sh"   # t, has, is, rpc_ok, rpc_err, cli_err
"$D" --listen 127.0.0.1:0 --store "sqlite:$tmp/store.db" --port-file "$tmp/port" --log-level warn 2>"$tmp/xgrd.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 200); do [ -s "$tmp/port" ] && break; sleep 0.05; done
[ -s "$tmp/port" ] || { echo "FAIL xgrd wrote no port file:"; tail -5 "$tmp/xgrd.log"; exit 1; }
URL="http://127.0.0.1:$(cat "$tmp/port")"

# keys
t "key new" 0 "$X" key new "$tmp/owner.key"
OWNER=$out
[ "$(stat -c %a "$tmp/owner.key")" = 600 ] && echo "PASS key file mode 600" || { echo "FAIL key file mode"; fail=1; }
t "key new never replaces a key" 2 "$X" key new "$tmp/owner.key"
t "key address" 0 "$X" key address "$tmp/owner.key"
[ "$out" = "$OWNER" ] && echo "PASS key address" || { echo "FAIL key address $out, expected $OWNER"; fail=1; }
t "key new other" 0 "$X" key new "$tmp/other.key"
cp "$tmp/owner.key" "$tmp/loose.key"; chmod 644 "$tmp/loose.key"
t "a loose key is refused" 2 "$X" sessions --key "$tmp/loose.key" --url "$URL"
has "loose key message" "chmod 600"
owner=$(echo "$OWNER" | tr 'A-F' 'a-f')

# without a key: refused
t "unsigned deploy" 1 "$X" deploy "$SRC/tests/daemon/gate.json" --registry gate --url "$URL"
cli_err "unsigned deploy refused with -32007" -32007

export XGR_KEY_FILE="$tmp/owner.key"
t "deploy" 0 "$X" deploy "$SRC/tests/daemon/gate.json" --registry gate --url "$URL"
t "enqueue" 0 "$X" enqueue --registry gate --step A --url "$URL"
has "enqueue gets rootPid 1" "queued  session $owner/1 "
t "second enqueue" 0 "$X" enqueue --registry gate --step A --url "$URL"
has "second enqueue gets rootPid 2" "$owner/2 "
sleep 0.5
t "show" 0 "$X" show 1 --url "$URL"
has "show: W waits" "waiting"
t "pause" 0 "$X" pause 1 --url "$URL"
t "resume" 0 "$X" resume 1 --url "$URL"
t "wake" 0 "$X" wake --step W --root 1 --payload '{"n":5}' --url "$URL"
has "wake woke one process" "woke 1 process"
t "kill" 0 "$X" kill 2 --url "$URL"
t "sessions" 0 "$X" sessions --url "$URL"

# registries: a new version says what it replaces; another owner is refused
sed 's/"n": {"type": "int64", "default": 0}, "ok"/"n": {"type": "int64", "default": 1}, "ok"/' \
  "$SRC/tests/daemon/gate.json" > "$tmp/gate2.json"
t "deploy version 2" 0 "$X" deploy "$tmp/gate2.json" --registry gate --url "$URL"
has "deploy says it replaces version 1" "replaces version 1"
# another signer's deploy of the same names lands in its own namespace (issue 38, finding 8): a
# version 1 of its own, the owner's registry unchanged
t "another owner's deploy" 0 "$X" deploy "$tmp/gate2.json" --registry gate --url "$URL" --key "$tmp/other.key"
has "another owner's deploy is its own version 1" "orchestration gate/gate version 1"

# xgr permit + curl: a control permit works once
t "enqueue rootPid 3" 0 "$X" enqueue --registry gate --step A --url "$URL"
t "xgr permit control" 0 "$X" permit control --url "$URL" --action pause --session-id 3
P=$out
body='{"jsonrpc":"2.0","id":1,"method":"xgr.pause","params":{"pid":"3","permit":'"$P"'}}'
t "curl pause with the permit" 0 curl -s "$URL" -H 'Content-Type: application/json' -d "$body"
rpc_ok "pause with an xgr permit answers a result"
is "pause with an xgr permit: ok" .result.ok true
t "curl pause with the same permit again" 0 curl -s "$URL" -H 'Content-Type: application/json' -d "$body"
rpc_err "a reused control permit is refused" -32007
has "a reused control permit: already used" "already used"

# twenty CLI control commands in a row on one session (issue 34): the same action on the same
# session in the same second signs the same message; the CLI signs again a second later when xgrd
# finds its permit used, so every command works, and each permit still works once
ok=0
for i in $(seq 20); do
  if [ $((i % 2)) = 1 ]; then a=resume; else a=pause; fi
  "$X" $a 3 --url "$URL" >"$tmp/burst.out" 2>&1 && ok=$((ok + 1)) || cat "$tmp/burst.out"
  "$X" $a 3 --url "$URL" >"$tmp/burst.out" 2>&1 && ok=$((ok + 1)) || cat "$tmp/burst.out"
done
[ "$ok" = 40 ] && echo "PASS forty control commands in a row all work" || { echo "FAIL only $ok of 40 control commands worked"; fail=1; }
t "the captured permit is still refused" 0 curl -s "$URL" -H 'Content-Type: application/json' -d "$body"
rpc_err "the captured permit after the burst: -32007" -32007
exit $fail
