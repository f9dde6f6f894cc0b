#!/usr/bin/env bash
# bench/peers/run.sh BUILD_DIR — run the project's benchmarks next to peer implementations in
# other systems and print ratios (`make bench-peers`, after `make bench` built BUILD_DIR).
# Installs the peers' toolchains first (scripts/deps.sh --peers). One section per module below.
set -euo pipefail
B=${1:-build-release}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
"$ROOT/scripts/deps.sh" --peers
echo "# xgr vs peers — $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores, $(uname -m)"

# runtime (issue 5): spawn-tree and ping-pong vs oneTBB task_group and Go goroutines
"$ROOT/bench/peers/runtime/run.sh" "$B"

# expressions (issue 3): CEL evaluations/s vs the JavaScript CEL engines (npm)
"$ROOT/bench/peers/cel/run.sh" "$B"

# engine (issue 7): 32-way fan-out + all join vs bpmn-engine (npm) parallel gateways
"$ROOT/bench/peers/engine/run.sh" "$B"
