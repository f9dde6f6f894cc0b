#!/usr/bin/env bash
# cli_permits.sh XGR XGRD — the CLI as a signer against a real xgrd in permit mode (loopback,
# throwaway SQLite store): `xgr key new` (mode 0600, never replaces a file), a key file readable by
# others refused, every client command signing with XGR_KEY_FILE / --key (deploy, enqueue, show,
# sessions, wake in step mode, pause, resume, kill), `deploy` saying when it replaces a version and
# refusing another owner's registry, `xgr permit` + curl (a control permit works once), and calls
# without a key refused (-32007, exit 1).
set -uo pipefail
X=$(realpath "$1") D=$(realpath "$2")
SRC=${XGR_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
dir=$(mktemp -d /tmp/xgr-cli-permits.XXXXXX)
"$D" --listen 127.0.0.1:0 --store "sqlite:$dir/store.db" --port-file "$dir/port" --log-level warn 2>"$dir/xgrd.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 200); do [ -s "$dir/port" ] && break; sleep 0.05; done
URL="http://127.0.0.1:$(cat "$dir/port")"
fail() { echo "FAIL: $*"; cat "$dir/out" 2>/dev/null; exit 1; }
expect_exit() { local want=$1; shift; "$@" >"$dir/out" 2>&1; local got=$?; [ $got -eq "$want" ] || fail "$* exited $got, expected $want"; }

# keys
OWNER=$("$X" key new "$dir/owner.key") || fail "key new"
[ "$(stat -c %a "$dir/owner.key")" = 600 ] || fail "key file mode"
expect_exit 2 "$X" key new "$dir/owner.key"                      # never replaces a key
[ "$("$X" key address "$dir/owner.key")" = "$OWNER" ] || fail "key address"
OTHER=$("$X" key new "$dir/other.key") || fail "key new other"
cp "$dir/owner.key" "$dir/loose.key"; chmod 644 "$dir/loose.key"
expect_exit 2 "$X" sessions --key "$dir/loose.key" --url "$URL"
grep -q "chmod 600" "$dir/out" || fail "loose key message"
owner=$(echo "$OWNER" | tr 'A-F' 'a-f')

# without a key: refused
expect_exit 1 "$X" deploy "$SRC/tests/daemon/gate.json" --registry gate --url "$URL"
grep -q "32007" "$dir/out" || fail "unsigned deploy not refused with -32007"

export XGR_KEY_FILE="$dir/owner.key"
expect_exit 0 "$X" deploy "$SRC/tests/daemon/gate.json" --registry gate --url "$URL"
expect_exit 0 "$X" enqueue --registry gate --step A --url "$URL"
grep -q "queued  session $owner/1 " "$dir/out" || fail "enqueue: $(cat "$dir/out")"
expect_exit 0 "$X" enqueue --registry gate --step A --url "$URL"
grep -q "$owner/2 " "$dir/out" || fail "second enqueue gets rootPid 2"
sleep 0.5
expect_exit 0 "$X" show 1 --url "$URL"
grep -q "waiting" "$dir/out" || fail "show: W waits"
expect_exit 0 "$X" pause 1 --url "$URL"
expect_exit 0 "$X" resume 1 --url "$URL"
expect_exit 0 "$X" wake --step W --root 1 --payload '{"n":5}' --url "$URL"
grep -q "woke 1 process" "$dir/out" || fail "wake: $(cat "$dir/out")"
expect_exit 0 "$X" kill 2 --url "$URL"
expect_exit 0 "$X" sessions --url "$URL"

# registries: a new version says what it replaces; another owner is refused
sed 's/"n": {"type": "int64", "default": 0}, "ok"/"n": {"type": "int64", "default": 1}, "ok"/' \
  "$SRC/tests/daemon/gate.json" > "$dir/gate2.json"
expect_exit 0 "$X" deploy "$dir/gate2.json" --registry gate --url "$URL"
grep -q "replaces version 1" "$dir/out" || fail "deploy did not say it replaces version 1: $(cat "$dir/out")"
expect_exit 1 "$X" deploy "$dir/gate2.json" --registry gate --url "$URL" --key "$dir/other.key"
grep -q "owned by $owner" "$dir/out" || fail "another owner's deploy: $(cat "$dir/out")"

# xgr permit + curl: a control permit works once
expect_exit 0 "$X" enqueue --registry gate --step A --url "$URL"     # rootPid 3
P=$("$X" permit control --url "$URL" --action pause --session-id 3) || fail "xgr permit control"
body='{"jsonrpc":"2.0","id":1,"method":"xgr.pause","params":{"pid":"3","permit":'"$P"'}}'
curl -s "$URL" -H 'Content-Type: application/json' -d "$body" > "$dir/out"
grep -q '"ok": *true' "$dir/out" || fail "curl pause with xgr permit: $(cat "$dir/out")"
curl -s "$URL" -H 'Content-Type: application/json' -d "$body" > "$dir/out"
grep -q 'already used' "$dir/out" || fail "a reused control permit was accepted: $(cat "$dir/out")"
echo "cli_permits: ok"
