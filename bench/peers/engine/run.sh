#!/usr/bin/env bash
# bench/peers/engine/run.sh BUILD_DIR — the engine's 32-way fan-out + all join against the npm
# package bpmn-engine (a BPMN parallel gateway split into 32 tasks and a joining parallel
# gateway, fanout.js). Installs bpmn-engine here (package.json, npm) on first use. Prints both
# rates and the ratio xgr steps/s : bpmn-engine activities/s. INSTANCES (default 200) sets the
# number of BPMN instances; the engine runs 10,000 sessions on 2 workers.
set -euo pipefail
B=${1:-build-release}
HERE=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "$HERE/node_modules/bpmn-engine" ]; then
  (cd "$HERE" && npm install --no-audit --no-fund --silent)
fi
XGR=$("$B/bench/engine/bench_engine" fanout --sessions 10000 --workers 2)
PEER=$(node "$HERE/fanout.js" "${INSTANCES:-200}")
echo "$XGR"
echo "$PEER"
X=$(echo "$XGR" | sed -n 's/.* = \([0-9]*\) steps\/s.*/\1/p')
P=$(echo "$PEER" | sed -n 's/.* = \([0-9]*\) activities\/s.*/\1/p')
awk -v x="$X" -v p="$P" 'BEGIN { printf "engine fanout: xgr / bpmn-engine = %.0fx (goal >= 100x)\n", x / p }'
