#!/usr/bin/env bash
# bench/peers/cel/run.sh BUILD_DIR — the expression engine against two JavaScript CEL engines
# (@marcbachmann/cel-js and cel-js from npm, installed here on first use): same expressions, same
# inputs, compile time and evaluations per second on one core, then the ratios.
set -euo pipefail
B=${1:-build-release}
HERE=$(cd "$(dirname "$0")" && pwd)
SECS=${SECS:-2}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "cel peers: node/npm not installed (apt-get install nodejs npm); skipped"
  exit 0
fi
[ -d "$HERE/node_modules/@marcbachmann/cel-js" ] && [ -d "$HERE/node_modules/cel-js" ] ||
  (cd "$HERE" && npm install --no-audit --no-fund --silent)
echo "## cel: xgr vs JavaScript CEL engines (node $(node --version)), ${SECS} s per case"
xgr_out=$("$B/bench/cel/bench_cel" "$SECS")
js_out=$(cd "$HERE" && node bench_cel.mjs "$SECS")
echo "$xgr_out"
echo "$js_out"
# ratios: xgr evals/s divided by each peer's, per case
awk -v X="$xgr_out" '
  BEGIN { n = split(X, L, "\n"); for (i = 2; i <= n; i++) { split(L[i], f, " +"); x[f[1]] = f[3] } }
  NR > 1 && $0 !~ /failed|Error/ && ($2 in x) { printf "ratio xgr/%s %s: %.1fx\n", $1, $2, x[$2] / $4 }
' <<< "$js_out"
