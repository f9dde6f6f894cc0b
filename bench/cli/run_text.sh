#!/usr/bin/env bash
# bench/cli/run_text.sh BUILD_DIR — wall time of `xgr run` with its text output (timeline and
# tree, to a file) for a 20,000-step loop and a 2,337-process fan-out (2,048 leaves under three
# levels of spawns), on the deterministic driver and on the engine. Goal (issue 15): each under
# 2 s. Not a timed test: the numbers go to bench/RESULTS.md.
set -euo pipefail
B=${1:-build-release}
X="$B/xgr"
D=$(cd "$(dirname "$0")/../.." && pwd)/tests/cli/data
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() {  # run LABEL ARGS...
  local label=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$X" run "$@" >"$out" || true
  t1=$(date +%s.%N)
  printf '%-40s %6.2f s  %8d lines  %9d bytes\n' "$label" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" "$(wc -l <"$out")" "$(wc -c <"$out")"
}
echo "# xgr run, text output — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $B"
run "loop 20,000 steps, --virtual-time" "$D/loop20000.json" --start S --max-steps 0 --virtual-time
run "loop 20,000 steps, engine" "$D/loop20000.json" --start S --max-steps 0
run "fan-out 2,337 processes, --virtual-time" "$D/fan2000.json" --start S --virtual-time
run "fan-out 2,337 processes, engine" "$D/fan2000.json" --start S
