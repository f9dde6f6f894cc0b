#!/usr/bin/env bash
# scripts/demo.sh — the main job on the examples: check every example orchestration (the public
# xDaLa examples and the project's own) and draw them. `make demo` runs it after `make deps build`.
set -uo pipefail
cd "$(dirname "$0")/.."
X=build/xgr
SHARED=../shared/specs/xgr-public/examples
out=build/demo
mkdir -p "$out"
echo "== xgr check: the public examples and the project's example orchestrations"
$X check "$SHARED"/*/XRC729Json/*.json examples/orchestrations/nested_joins.json \
  examples/orchestrations/kofn_backloop.json examples/orchestrations/kofn_race.json || exit 1
echo
echo "== xgr check on a broken orchestration (the join-scope pitfall of seed 003 §7.4) — expected to fail"
$X check examples/orchestrations/pitfall_unfulfillable_join.json
[ $? -eq 1 ] || { echo "demo: the pitfall was not caught"; exit 1; }
echo
echo "== xgr graph: diagrams written to $out/"
for f in examples/orchestrations/*.json "$SHARED"/*/XRC729Json/*.json; do
  name=$(basename "$f" .json)
  $X graph "$f" > "$out/$name.mmd" 2>/dev/null && $X graph --format dot "$f" > "$out/$name.dot" 2>/dev/null && echo "  $out/$name.mmd  $out/$name.dot"
done
echo
echo "== examples/orchestrations/nested_joins.json as Mermaid:"
cat "$out/nested_joins.mmd"
