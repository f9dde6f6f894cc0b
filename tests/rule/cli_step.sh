#!/usr/bin/env bash
# cli_step.sh XGR RULE_SERVER — the `xgr step` command: exit codes (0 valid, 1 invalid, 2 usage,
# 3 hard error), readable and JSON output, and the public price-feed examples against a local
# server standing in for the three price APIs through --api-map.
set -u
XGR=$1
SERVER=$2
EX="$XGR_SHARED/specs/xgr-public/examples"
FIX="$XGR_SRC/tests/rule"
fail=0
check() {  # check NAME WANT_EXIT GOT_EXIT
  if [ "$2" != "$3" ]; then echo "FAIL $1: exit $3, want $2"; fail=1; else echo "ok   $1"; fi
}
has() {  # has NAME TEXT NEEDLE
  if ! grep -qF -- "$3" <<<"$2"; then echo "FAIL $1: output lacks $3"; echo "$2" | head -40; fail=1; fi
}

out=$("$XGR" step "$FIX/IterationOfPi.json" --payload @"$FIX/IterationOfPi.payload.json" --json); rc=$?
check "IterationOfPi valid" 0 $rc
has "IterationOfPi Iter" "$out" '"Iter": 1'
out=$("$XGR" step "$FIX/IterationOfPi.json" --payload '{"Iter":0}'); rc=$?
check "missing input invalid" 1 $rc
has "readable invalid" "$out" "invalid"
"$XGR" step >/dev/null 2>&1; check "no args usage" 2 $?
"$XGR" step "$FIX/IterationOfPi.json" --payload '[1' >/dev/null 2>&1; check "bad payload usage" 2 $?
"$XGR" step "$FIX/IterationOfPi.json" --api-map nonsense >/dev/null 2>&1; check "bad api-map usage" 2 $?
"$XGR" step /nonexistent.json >/dev/null 2>&1; check "unreadable usage" 2 $?
out=$("$XGR" step "$EX/IterationOfPi/XRC137Json/Iterationstep.json" 2>&1); rc=$?
check "truncated public file: hard error" 3 $rc
has "parse error named" "$out" "parse_error"
out=$("$XGR" step "$FIX/IterationOfPi.json" --payload '{"Iter":"x","S":0,"Pi":0}' --json); rc=$?
check "bad input hard error" 3 $rc
has "error path" "$out" '"path": "payload.Iter"'
"$XGR" step --help >/dev/null; check "help" 0 $?

# price feeds against the local server
run_feed() {  # run_feed CB BS GK RULE WANT NAME
  coproc SRV { "$SERVER" "$1" "$2" "$3"; }
  read -r base <&"${SRV[0]}"
  out=$("$XGR" step "$4" --json --api-map "https://api.coinbase.com=$base" \
        --api-map "https://www.bitstamp.net=$base" --api-map "https://api.coingecko.com=$base"); rc=$?
  exec {SRV[1]}>&-
  wait "$SRV_PID" 2>/dev/null
  check "$6" "$5" $rc
}
Q="$EX/ApiPriceFeedQuorum/XRC137Json/ApiPriceFeedQuorumStep_3Sources.json"
F="$EX/ApiPriceFeed/XRC137Json/ApiPriceFeedStep_CoinbaseSpot.json"
run_feed 65000 65100 70000 "$Q" 0 "quorum 2 of 3 within 1%"
has "quorum price" "$out" '"Price": 65050.0'
run_feed 65000 67000 70000 "$Q" 1 "quorum no agreement"
has "quorum error text" "$out" "Quorum failed"
run_feed 65000 0 0 "$F" 0 "coinbase spot"
has "coinbase price" "$out" '"PrevPrice": 65000.0'
run_feed -1 0 0 "$F" 1 "coinbase down"
has "coinbase 503" "$out" '"status": 503'
exit $fail
