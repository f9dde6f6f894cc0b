#!/usr/bin/env bash
# ethers_live.sh XGR PERMIT_CHECK — the live cross-check with ethers v6 (pinned by
# tests/permits/js/package-lock.json), where Node.js is present (skipped otherwise, exit 77):
#   1. `npm ci` installs the pinned ethers (once; again when the lock file changes; js/ethers.sh);
#   2. ethers signs fresh random permits of every kind (random keys, chains, contracts, ids,
#      strings with non-ASCII and escapes) and xgr verifies each (same digest, same signer);
#   3. `xgr permit` signs random permits of every kind with fresh keys (`xgr key new`) and ethers'
#      verifyTypedData recovers the same signer.
set -euo pipefail
xgr=$(realpath "$1") check=$(realpath "$2")
js="$(dirname "$(realpath "$0")")/js"
# shellcheck source=js/ethers.sh
. "$js/ethers.sh"
ethers_ready ethers_live
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# 1. ethers signs, xgr verifies
node "$js/permits.js" random "${XGR_ETHERS_N:-25}" > "$tmp/ethers.json"
"$check" < "$tmp/ethers.json"

# 2. xgr signs, ethers verifies
rnd() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }
n=0
echo "[" > "$tmp/xgr.json"
for i in $(seq 1 "${XGR_XGR_N:-8}"); do
  "$xgr" key new "$tmp/k$i" > /dev/null
  chain=$((RANDOM * 65536 + RANDOM + 1))
  vc="0x$(rnd 20)"
  sid=$((RANDOM * RANDOM))
  exp=$(( $(date +%s) + 3600 + RANDOM ))
  common=(--key "$tmp/k$i" --chain-id "$chain" --expiry "$exp")
  for p in \
    "session --ostc-id ostc-$i-ä --ostc-hash 0x$(rnd 32) --session-id $sid --max-total-gas $RANDOM" \
    "control --control-contract $vc --action kill --session-id $sid" \
    "control --control-contract $vc --action wake --step-id Step$i --session-id $sid" \
    "control --control-contract $vc --action pause --session-id $sid --legacy" \
    "control --control-contract $vc --action wake --step-id S --runner 0x$(rnd 20) --session-id $sid" \
    "xdala --domain-name Team$i --domain-version v$i"; do
    # shellcheck disable=SC2086
    out=$("$xgr" permit $p "${common[@]}")
    [ $n -gt 0 ] && echo "," >> "$tmp/xgr.json"
    echo "$out" >> "$tmp/xgr.json"
    n=$((n + 1))
  done
done
echo "]" >> "$tmp/xgr.json"
node "$js/permits.js" verify < "$tmp/xgr.json" > "$tmp/verdict.json" || { cat "$tmp/verdict.json"; exit 1; }
echo "ethers_live: ethers verifyTypedData recovered the signer of all $n permits signed by xgr permit"
