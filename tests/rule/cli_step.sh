#!/usr/bin/env bash
# cli_step.sh XGR RULE_SERVER [--public] — the `xgr step` command: exit codes (0 valid, 1 invalid,
# 2 usage, 3 hard error), readable and JSON output, and the project's price examples
# (examples/bundles/price_feed.json, price_quorum.json) against a local server standing in for
# the three price sources through --api-map (loopback, which the outbound policy refuses unless
# --allow-outbound allows it: the runs allow it, and one checks the refusal). With --public (the test cli_step_shared): the public
# price-feed examples and the truncated public IterationOfPi file of $XGR_SHARED instead; skipped
# (exit 77) when that folder is absent.
set -u
XGR=$1
SERVER=$2
FIX="$XGR_SRC/tests/rule"
BUNDLES="$XGR_SRC/examples/bundles"
fail=0
check() {  # check NAME WANT_EXIT GOT_EXIT
  if [ "$2" != "$3" ]; then echo "FAIL $1: exit $3, want $2"; fail=1; else echo "ok   $1"; fi
}
has() {  # has NAME TEXT NEEDLE
  if ! grep -qF -- "$3" <<<"$2"; then echo "FAIL $1: output lacks $3"; echo "$2" | head -40; fail=1; fi
}

# price feeds against the local server (prices of its three sources: alpha, beta, gamma)
serve() {  # serve ALPHA BETA GAMMA: start the server, its address in $base
  coproc SRV { "$SERVER" "$1" "$2" "$3"; }
  read -r base <&"${SRV[0]}"
}
unserve() { exec {SRV[1]}>&-; wait "$SRV_PID" 2>/dev/null; }

if [ "${3:-}" = "--public" ]; then
  if [ ! -d "${XGR_SHARED:-/nonexistent}" ]; then
    echo "SKIP cli_step_shared: xgr step on the public examples not checked: ${XGR_SHARED:-XGR_SHARED (unset)} is not there (the public specification material, beside the project's CI checkout only; README.md, \"Tests against ../shared\")"
    exit 77
  fi
  EX="$XGR_SHARED/specs/xgr-public/examples"
  out=$("$XGR" step "$EX/IterationOfPi/XRC137Json/Iterationstep.json" 2>&1); rc=$?
  check "truncated public file: hard error" 3 $rc
  has "parse error named" "$out" "parse_error"
  run_feed() {  # run_feed ALPHA BETA GAMMA RULE WANT NAME
    serve "$1" "$2" "$3"
    out=$("$XGR" step "$4" --json --allow-outbound loopback --api-map "https://api.coinbase.com=$base" \
          --api-map "https://www.bitstamp.net=$base" --api-map "https://api.coingecko.com=$base"); rc=$?
    unserve
    check "$6" "$5" $rc
  }
  Q="$EX/ApiPriceFeedQuorum/XRC137Json/ApiPriceFeedQuorumStep_3Sources.json"
  F="$EX/ApiPriceFeed/XRC137Json/ApiPriceFeedStep_CoinbaseSpot.json"
  run_feed 65000 65100 70000 "$Q" 0 "public quorum 2 of 3 within 1%"
  has "quorum price" "$out" '"Price": 65050.0'
  run_feed 65000 67000 70000 "$Q" 1 "public quorum no agreement"
  has "quorum error text" "$out" "Quorum failed"
  run_feed 65000 0 0 "$F" 0 "public coinbase spot"
  has "coinbase price" "$out" '"PrevPrice": 65000.0'
  run_feed -1 0 0 "$F" 1 "public coinbase down"
  has "coinbase 503" "$out" '"status": 503'
  exit $fail
fi

# the command itself
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
out=$("$XGR" step "$FIX/truncated_rule.json" 2>&1); rc=$?
check "truncated file: hard error" 3 $rc
has "parse error named" "$out" "parse_error"
out=$("$XGR" step "$FIX/IterationOfPi.json" --payload '{"Iter":"x","S":0,"Pi":0}' --json); rc=$?
check "bad input hard error" 3 $rc
has "error path" "$out" '"path": "payload.Iter"'
"$XGR" step --help >/dev/null; check "help" 0 $?

# the project's price examples against the local server
run_rule() {  # run_rule ALPHA BETA GAMMA BUNDLE RULE PAYLOAD WANT NAME
  serve "$1" "$2" "$3"
  out=$("$XGR" step "$BUNDLES/$4" --rule "$5" --payload "$6" --json --allow-outbound 127.0.0.0/8 \
        --api-map "https://alpha.prices.example=$base/alpha" --api-map "https://beta.prices.example=$base/beta" \
        --api-map "https://gamma.prices.example=$base/gamma"); rc=$?
  unserve
  check "$8" "$7" $rc
}
# issue 38, finding 5: without --allow-outbound the call to loopback is refused, and says why
serve 65000 0 0
out=$("$XGR" step "$BUNDLES/price_feed.json" --rule poll_alpha_ticker --payload '{}' --json \
      --api-map "https://alpha.prices.example=$base/alpha"); rc=$?
unserve
check "loopback refused without --allow-outbound" 1 $rc
has "refusal names address, host and flag" "$out" \
  'outbound address 127.0.0.1 (loopback) of host \"127.0.0.1\" is not allowed by the outbound policy; --allow-outbound 127.0.0.1/32 permits it'
"$XGR" step "$BUNDLES/price_feed.json" --rule poll_alpha_ticker --allow-outbound 10.0.0.0/99 >/dev/null 2>&1
check "bad --allow-outbound usage" 2 $?
run_rule 65000 0 0 price_feed.json poll_alpha_ticker '{}' 0 "price feed: first price"
has "price feed last" "$out" '"Last": 65000.0'
has "price feed url" "$out" '/alpha/v1/ticker/BTC-USD'
run_rule 80000 0 0 price_feed.json Poll '{"Last":65000}' 1 "price feed: jump rejected (rule by step id)"
has "price feed rejected" "$out" '"Rejected": 80000.0'
run_rule -1 0 0 price_feed.json poll_alpha_ticker '{"Last":65000}' 1 "price feed: source down"
has "price feed 503" "$out" '"status": 503'
run_rule 0 65020.5 0 price_quorum.json beta '{"Base":"BTC","Quote":"USD"}' 0 "quorum: beta's shape"
has "beta price" "$out" '"BetaPrice": 65020.5'
run_rule 0 0 64990 price_quorum.json FromGamma '{"Base":"BTC","Quote":"USD"}' 0 "quorum: gamma's shape"
has "gamma price" "$out" '"GammaPrice": 64990.0'
out=$("$XGR" step "$BUNDLES/price_quorum.json" --rule agree --payload '{"AlphaPrice":65000,"GammaPrice":65050}' --json); rc=$?
check "quorum: two prices agree" 0 $rc
has "quorum price" "$out" '"Price": 65025.0'
out=$("$XGR" step "$BUNDLES/price_quorum.json" --rule agree --payload '{"AlphaPrice":65000,"GammaPrice":68000}'); rc=$?
check "quorum: two prices disagree" 1 $rc
exit $fail
