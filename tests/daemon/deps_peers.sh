#!/usr/bin/env bash
# deps_peers.sh — scripts/deps.sh --peers must not ask apt for npm (nor nodejs) when a node and an
# npm are already on PATH (Node.js from NodeSource brings its own npm, and Debian's npm package
# conflicts with it). Runs deps.sh in dry mode (XGR_DEPS_DRY=1: prints, installs nothing) with a
# PATH whose node and npm are stand-ins; dpkg-query is also a stand-in that reports every package
# missing, so the answer does not depend on what this machine has installed.
set -euo pipefail
SRC=${1:?usage: deps_peers.sh SRC_DIR}
T=$(mktemp -d /tmp/xgr-deps-XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/with" "$T/without"
for d in with without; do
  printf '#!/bin/sh\nexit 1\n' > "$T/$d/dpkg-query"
  chmod +x "$T/$d/dpkg-query"
done
printf '#!/bin/sh\necho v20\n' > "$T/with/node"
printf '#!/bin/sh\necho 10\n' > "$T/with/npm"
chmod +x "$T/with/node" "$T/with/npm"
# only the shell tools deps.sh uses, without the machine's node and npm
for tool in bash grep id; do ln -s "$(command -v $tool)" "$T/without/$tool"; ln -s "$(command -v $tool)" "$T/with/$tool"; done
out=$(XGR_DEPS_DRY=1 PATH="$T/with" bash "$SRC/scripts/deps.sh" --peers)
echo "with node and npm: $out"
case " $out " in *" npm "*|*" nodejs "*) echo "FAIL: asks apt for npm/nodejs although both are there"; exit 1 ;; esac
case "$out" in *golang-go*) ;; *) echo "FAIL: the other peers are missing"; exit 1 ;; esac
out=$(XGR_DEPS_DRY=1 PATH="$T/without" bash "$SRC/scripts/deps.sh" --peers)
echo "without: $out"
case " $out " in *" npm "*) ;; *) echo "FAIL: npm not asked for without one"; exit 1 ;; esac
case " $out " in *" nodejs "*) ;; *) echo "FAIL: nodejs not asked for without one"; exit 1 ;; esac
out=$(XGR_DEPS_DRY=1 PATH="$T/with" bash "$SRC/scripts/deps.sh")
case "$out" in *golang-go*|*npm*) echo "FAIL: peers asked for without --peers: $out"; exit 1 ;; esac
echo ok
