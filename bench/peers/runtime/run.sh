#!/usr/bin/env bash
# bench/peers/runtime/run.sh BUILD_DIR — the runtime's workloads (spawn-tree, ping-pong) run by
# xgr (BUILD_DIR/bench/runtime/bench_runtime), oneTBB task_group and Go goroutines + channels,
# interleaved (xgr, tbb, go, xgr, tbb, go, ...) so that load from elsewhere hits all three alike.
# Prints the median rate and peak RSS of each and the ratios xgr/tbb and xgr/go.
#
# Environment: REPS (default 5), TREE_DEPTH (22), PP_PAIRS (1000), PP_MSGS (1000).
# Needs g++, libtbb-dev and golang-go: scripts/deps.sh --peers.
set -euo pipefail
B=${1:-build-release}
HERE=$(cd "$(dirname "$0")" && pwd)
REPS=${REPS:-5}
TREE_DEPTH=${TREE_DEPTH:-22}
PP_PAIRS=${PP_PAIRS:-1000}
PP_MSGS=${PP_MSGS:-1000}
OUT="$B/peers/runtime"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

XGR="$B/bench/runtime/bench_runtime"
[ -x "$XGR" ] || { echo "runtime peers: $XGR missing (build $B first)"; exit 1; }
if [ ! -x "$OUT/tbb_runtime" ] || [ "$HERE/tbb_runtime.cpp" -nt "$OUT/tbb_runtime" ]; then
  g++ -O2 -std=c++17 -o "$OUT/tbb_runtime" "$HERE/tbb_runtime.cpp" -ltbb -lpthread
fi
if [ ! -x "$OUT/go_runtime" ] || [ "$HERE/go_runtime.go" -nt "$OUT/go_runtime" ]; then
  (cd "$HERE" && GOCACHE="$OUT/gocache" go build -o "$OUT/go_runtime" go_runtime.go)
fi

declare -A CMD=([xgr]="$XGR" [tbb]="$OUT/tbb_runtime" [go]="$OUT/go_runtime")
RAW="$OUT/raw.txt"
: > "$RAW"
echo "## runtime vs peers: $REPS interleaved rounds, $(nproc) cores"
for w in "spawn-tree --depth $TREE_DEPTH" "ping-pong --pairs $PP_PAIRS --msgs $PP_MSGS"; do
  for r in $(seq "$REPS"); do
    for impl in xgr tbb go; do
      line=$(${CMD[$impl]} $w | head -1)
      echo "$line" >> "$RAW"
    done
  done
done

# median rate and peak RSS per workload and implementation, then ratios
awk '
  function median(s,   n, a, i, j, t) {
    n = split(s, a, " ");
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2;
  }
  {
    impl = $1; wl = $2; rate = ""; rss = "";
    for (i = 3; i <= NF; i++) {
      if ($i ~ /^rate=/) { rate = substr($i, 6); sub(/M$/, "", rate); unit = $(i + 1) }
      if ($i ~ /^peak_rss=/) { rss = substr($i, 10); sub(/MB$/, "", rss) }
    }
    R[wl, impl] = R[wl, impl] " " rate; M[wl, impl] = M[wl, impl] " " rss; U[wl] = unit; seen[wl] = 1
  }
  END {
    for (wl in seen) {
      x = median(R[wl, "xgr"]); t = median(R[wl, "tbb"]); g = median(R[wl, "go"]);
      printf "%-10s  median M %-7s  xgr %8.2f  tbb %8.2f  go %8.2f   xgr/tbb %5.2f  xgr/go %6.2f\n", wl, U[wl], x, t, g, x / t, x / g;
      printf "%-10s  median peak RSS MB     xgr %8.1f  tbb %8.1f  go %8.1f\n", wl, median(M[wl, "xgr"]), median(M[wl, "tbb"]), median(M[wl, "go"]);
    }
  }' "$RAW"
echo "goals: spawn-tree xgr/tbb >= 0.5; ping-pong xgr/go >= 1.0 (raw lines: $RAW)"
