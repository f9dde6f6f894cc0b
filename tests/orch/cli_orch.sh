#!/usr/bin/env bash
# cli_orch.sh XGR [--public] — the orchestration commands from the outside: exit codes, --json
# shape, check/graph/hash on the project's examples, seed documents and the §7.4 pitfall.
# With --public (the test cli_orch_shared): check and hash on the public examples of
# $XGR_SHARED/specs/xgr-public/examples instead; skipped (exit 77) when that folder is absent.
set -u
X=$1
D=$(cd "$(dirname "$0")" && pwd)/docs
R=$(cd "$(dirname "$0")/../.." && pwd)
fail=0
t() {  # t NAME EXPECTED_EXIT CMD... ; output kept in $out
  local name=$1 want=$2; shift 2
  out=$("$@" 2>&1); local rc=$?
  if [ "$rc" -ne "$want" ]; then echo "FAIL $name: exit $rc, expected $want"; echo "$out" | head -20; fail=1; else echo "PASS $name"; fi
}
has() { if ! grep -qF -- "$2" <<<"$out"; then echo "FAIL $1: output lacks: $2"; echo "$out" | head -20; fail=1; fi; }

if [ "${2:-}" = "--public" ]; then
  EX=${XGR_SHARED:-}/specs/xgr-public/examples
  if [ ! -d "${XGR_SHARED:-/nonexistent}" ]; then
    echo "SKIP cli_orch_shared: xgr check and hash on the public examples not checked: ${XGR_SHARED:-XGR_SHARED (unset)} is not there (the public specification material, beside the project's CI checkout only; README.md, \"Tests against ../shared\")"
    exit 77
  fi
  t "public examples pass check" 0 "$X" check "$EX"/*/XRC729Json/*.json
  has "public examples: no error" 'checked 3 files: 0 errors'
  t "hash" 0 "$X" hash "$EX"/IterationOfPi/XRC729Json/IterationofPiOSTC.json
  [[ "$out" =~ ^0x[0-9a-f]{64}$ ]] || { echo "FAIL hash format: $out"; fail=1; }
  exit $fail
fi

t "examples pass check" 0 "$X" check "$R"/examples/bundles/*.json "$R"/examples/orchestrations/kofn_*.json \
  "$R"/examples/orchestrations/nested_joins.json
has "examples: no error" ': 0 errors'
t "pitfall example fails" 1 "$X" check "$R"/examples/orchestrations/pitfall_unfulfillable_join.json
t "seed documents pass check" 0 "$X" check "$D"/seed001_*.json "$D"/seed003_13_minimal_join.json "$D"/seed003_4_structure.json "$D"/seed003_6_1_kofn.json "$D"/seed003_7_4_nested_joins.json
t "pitfall fails" 1 "$X" check "$D"/seed003_7_4_pitfall.json
has "pitfall message" 'join "J2" needs 2 of 2 pieces'
has "pitfall path" 'structure.J1.onValid.join: error:'
t "warnings exit 0" 0 "$X" check "$D"/warn_waitonjoin_default.json
has "warning printed" 'warning: `waitonjoin` is missing'
t "json output" 1 "$X" check --json "$D"/bad_k_too_big.json
has "json ok false" '"ok":false'
has "json error entry" '{"path":"structure.A1.onValid.join.k","code":"k_out_of_range","message":"k is 3 but the join has 2 `from` entries; expected 1 <= k <= 2"}'
t "json clean" 0 "$X" check --json "$D"/mode_any.json
has "json ok true" '"ok":true,"hash":"0x'
t "unreadable file" 2 "$X" check /nonexistent/file.json
t "no file" 2 "$X" check
t "bad flag" 2 "$X" check --bogus "$D"/mode_any.json
t "unknown command" 2 "$X" frobnicate
t "help" 0 "$X" --help
t "check help" 0 "$X" check --help
t "graph mermaid" 0 "$X" graph "$D"/seed003_7_4_nested_joins.json
has "graph join node" 'join J2 · 2 of 2 · kill'
t "graph dot" 0 "$X" graph --format dot "$D"/seed001_6_3_kofn_backloop.json
has "graph dot join" 'join J1 · 2 of 2 · kill'
t "graph bad format" 2 "$X" graph --format png "$D"/mode_any.json
t "graph svg" 0 "$X" graph --format svg "$D"/seed003_7_4_nested_joins.json
has "svg root" '<svg width='
has "svg step id" '<g id="step&#45;A1" class="node">'
has "svg join id" '<g id="join&#45;A1&#45;valid" class="node">'
has "svg join label" 'join J2 · 2 of 2 · kill'
has "svg from edge id" 'id="from&#45;'
has "svg target edge id" 'id="target&#45;A1&#45;valid"'
t "graph svg to file" 0 "$X" graph --format svg -o "${TMPDIR:-/tmp}/xgr_cli_orch_$$.svg" "$D"/seed001_6_3_kofn_backloop.json
if ! grep -q '</svg>' "${TMPDIR:-/tmp}/xgr_cli_orch_$$.svg"; then echo "FAIL svg file incomplete"; fail=1; else echo "PASS svg file"; fi
rm -f "${TMPDIR:-/tmp}/xgr_cli_orch_$$.svg"
t "graph of broken doc" 1 "$X" graph "$D"/bad_types.json
t "hash" 0 "$X" hash "$R"/examples/orchestrations/kofn_race.json
[[ "$out" =~ ^0x[0-9a-f]{64}$ ]] || { echo "FAIL hash format: $out"; fail=1; }
want=$("$X" check --json --no-explore "$R"/examples/orchestrations/kofn_race.json | grep -o '"hash":"0x[0-9a-f]*"' | cut -d'"' -f4)
[ "$out" = "$want" ] || { echo "FAIL hash differs from check --json's: $out vs $want"; fail=1; }
# a bundle: the orchestration member is checked, paths are relative to the bundle
tmp=$(mktemp -d)
printf '{"orchestration": {"id":"b","structure":{"A":{"rule":"r","onValid":{"spawns":["Q"]}}}}, "rules": {}}' > "$tmp/b.json"
t "bundle check" 1 "$X" check "$tmp/b.json"
has "bundle path" 'orchestration.structure.A.onValid.spawns[0]'
printf '{"orchestration":{"structure":{"A":{"rule":"x","onValid":{"spawns":["A"]}}}},"rules":{"y":{"payload":{},"rules":["[a] +"]}}}' > "$tmp/r.json"
t "bundle rules checked" 1 "$X" check "$tmp/r.json"
has "bundle rule parse error" 'rules.y.rules[0]: error:'
has "bundle rule unresolved" 'orchestration.structure.A.rule: error: rule "x" of this step is not in the bundle'
rm -rf "$tmp"
exit $fail
