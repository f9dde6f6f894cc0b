#!/usr/bin/env bash
# wake_ethers.sh XGR XGRD — xgr_wakeUpProcess as a wallet calls it (public reference §12): a real
# xgrd in permit mode (loopback, throwaway SQLite store), the owner's key shared by the CLI (setup)
# and ethers (js/wake.js: signs with Wallet.signTypedData the permit whose chain id and control
# contract xgr_getCoreAddrs gives, and sends {payload, permit} alone). Skipped (exit 77) without
# Node.js/npm or when the pinned ethers cannot be installed (js/ethers.sh).
set -euo pipefail
X=$(realpath "$1") D=$(realpath "$2")
SRC=${XGR_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
js="$(dirname "$(realpath "$0")")/js"
# shellcheck source=js/ethers.sh
. "$js/ethers.sh"
ethers_ready wake_ethers
dir=$(mktemp -d /tmp/xgr-wake-ethers.XXXXXX)
"$D" --listen 127.0.0.1:0 --store "sqlite:$dir/store.db" --port-file "$dir/port" --log-level warn 2>"$dir/xgrd.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 200); do [ -s "$dir/port" ] && break; sleep 0.05; done
[ -s "$dir/port" ] || { echo "FAIL: xgrd did not start"; cat "$dir/xgrd.log"; exit 1; }
URL="http://127.0.0.1:$(cat "$dir/port")"
fail() { echo "FAIL: $*"; cat "$dir/out" 2>/dev/null; exit 1; }

# three fixed wallets: the owner (its key also in a file for the CLI), a helper, a stranger
OWNER_KEY=0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318
HELPER_KEY=0x8da4ef21b864d2cc526dbdb2a120bd2874c36c9d0a1fb7f8c63d7f7a8b41de8f
STRANGER_KEY=0x$(printf '33%.0s' $(seq 32))
(umask 077; echo "$OWNER_KEY" > "$dir/owner.key")
helper=$(node -e 'const {ethers}=require(process.argv[1]); console.log(new ethers.Wallet(process.argv[2]).address.toLowerCase())' \
  "$js/node_modules/ethers" "$HELPER_KEY")

# the owner's sessions 1 and 2 of tests/daemon/gate.json wait at W; 2 lets the helper wake W
"$X" deploy "$SRC/tests/daemon/gate.json" --registry gate --url "$URL" --key "$dir/owner.key" > "$dir/out" 2>&1 ||
  fail "deploy"
"$X" enqueue --registry gate --step A --url "$URL" --key "$dir/owner.key" > "$dir/out" 2>&1 || fail "enqueue 1"
"$X" enqueue --registry gate --step A --url "$URL" --key "$dir/owner.key" \
  --payload "{\"__wakeUp\":{\"steps\":{\"W\":{\"rpc\":[\"$helper\"]}}}}" > "$dir/out" 2>&1 || fail "enqueue 2"
for _ in $(seq 200); do
  "$X" show 2 --url "$URL" --key "$dir/owner.key" > "$dir/out" 2>&1 && grep -q "waiting" "$dir/out" &&
    "$X" show 1 --url "$URL" --key "$dir/owner.key" > "$dir/out" 2>&1 && grep -q "waiting" "$dir/out" && break
  sleep 0.05
done
grep -q "waiting" "$dir/out" || fail "W does not wait"

node "$js/wake.js" "$URL" "$OWNER_KEY" "$HELPER_KEY" "$STRANGER_KEY"
echo "wake_ethers: ok"
