#!/usr/bin/env bash
# run.sh XGR XGRD OUTDIR [TEST.mjs [nobrowser]] — the console's browser tests (default console.test.mjs; scale.test.mjs
# for the 100,000-session store): headless Debian chromium
# driven by puppeteer-core against a real xgrd on 127.0.0.1. Installs the pinned npm packages
# (package-lock.json) with `npm ci` when they are missing or older than the lock file. Exits 77
# (skipped) when node, npm or chromium is not installed (scripts/deps.sh installs them); a test run
# with `nobrowser` (siwe.test.mjs) needs node and npm only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
XGR=$1 XGRD=$2 OUT=$3 TEST=${4:-console.test.mjs}
CHROMIUM=${XGR_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ "${5:-}" = nobrowser ] && CHROMIUM=${CHROMIUM:-none}
if ! command -v node >/dev/null || ! command -v npm >/dev/null || [ -z "$CHROMIUM" ]; then
  echo "skip: the console tests need node, npm and chromium (scripts/deps.sh)"; exit 77
fi
if [ ! -d "$here/node_modules/puppeteer-core" ] || [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
fi
mkdir -p "$OUT"
exec node "$here/$TEST" "$XGR" "$XGRD" "$OUT" "$CHROMIUM"
