#!/usr/bin/env bash
# Recompiles contracts/src/*.sol with the pinned solc-js and compares with the committed build
# output (contracts/build/*.json), which is what the C tests deploy. Skipped (77) without node or
# without contracts/node_modules (scripts/deps.sh runs `npm ci` there when node exists).
set -euo pipefail
src="${XGR_SRC:?XGR_SRC not set}"
command -v node >/dev/null || { echo "node not found: skipped"; exit 77; }
[ -d "$src/contracts/node_modules/solc" ] || { echo "contracts/node_modules missing (run scripts/deps.sh): skipped"; exit 77; }
cd "$src/contracts"
node build.js --check
echo "contracts/build matches a fresh compile"
