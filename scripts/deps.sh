#!/usr/bin/env bash
# scripts/deps.sh — install exactly the Debian packages xgr needs to build, test and benchmark.
#
# Idempotent: only packages that are missing are installed. Runs apt-get directly as root and
# through sudo otherwise. Set XGR_DEPS_DRY=1 to print what would be installed without installing.
set -euo pipefail

PKGS=(
  # build
  build-essential pkg-config meson ninja-build clang libclang-rt-14-dev
  # libraries (docs/ARCHITECTURE.md)
  libjansson-dev nettle-dev libgmp-dev libpcre2-dev
  libcurl4-openssl-dev libmicrohttpd-dev libsqlite3-dev
  libsecp256k1-dev
  # tests
  libcmocka-dev
  curl python3 jq
  # the fault suite's clock steps (tests/faults: libfaketime preloaded into one xgrd)
  faketime
  # Graphviz for `xgr graph --format svg` and the console (src/orch/svg.c)
  libgraphviz-dev
  # the console's browser tests (tests/console: headless chromium driven by puppeteer-core)
  chromium
  # the PostgreSQL store (libpq) and its tests' throwaway clusters (issue 18, tests/pg)
  postgresql libpq-dev
  # benchmarks: HTTP load for xgrd (bench/daemon)
  wrk
  # /metrics checked by promtool and scraped by a real Prometheus (tests/ops, docs/OPERATIONS.md)
  prometheus
)

# Node.js and npm for the tests that cross-check with ethers, solc, anvil and puppeteer: only when
# missing (Node.js from NodeSource brings its own npm and conflicts with Debian's `npm` package).
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
command -v npm >/dev/null 2>&1 || PKGS+=(npm)

# Peer implementations for `make bench-peers` (bench/peers/): only with `scripts/deps.sh --peers`,
# so a plain `make deps` stays lean. oneTBB (C++ task_group) and Go (goroutines + channels).
PEERS=(
  g++ libtbb-dev golang-go nodejs npm
)
# Node.js from NodeSource (package `nodejs`) brings its own npm and conflicts with Debian's `npm`
# package: ask apt for npm only when no npm is there at all (and for nodejs only without a node).
if command -v node >/dev/null 2>&1; then
  PEERS=("${PEERS[@]/nodejs}")
fi
if command -v npm >/dev/null 2>&1; then
  PEERS=("${PEERS[@]/npm}")
fi
for arg in "$@"; do
  case "$arg" in
    --peers) for p in "${PEERS[@]}"; do [ -n "$p" ] && PKGS+=("$p"); done ;;
  esac
done

# contracts/: the pinned solc-js and the anvil test node (@foundry-rs/anvil ships the binary),
# from contracts/package-lock.json, whenever node with npm is present (Node 20: /usr/bin/node).
if command -v npm >/dev/null 2>&1 && [ "${XGR_DEPS_DRY:-0}" != 1 ]; then
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  (cd "$here/contracts" && npm ci --no-audit --no-fund --loglevel=error) || echo "deps: npm ci in contracts/ failed (chain tests will be skipped)"
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PKGS[@]} packages present"
  exit 0
fi

echo "deps: installing ${missing[*]}"
if [ "${XGR_DEPS_DRY:-0}" = 1 ]; then exit 0; fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
