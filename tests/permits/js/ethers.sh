# ethers.sh — sourced by the tests that run ethers (ethers_live.sh, wake_ethers.sh). `ethers_ready
# NAME` makes the pinned ethers of package-lock.json ready in this folder's node_modules: it skips
# the test (exit 77, one line saying why) when Node.js or npm is not installed or `npm ci` cannot
# install it (offline), and runs `npm ci` once (again when the lock file changes), one test at a
# time (the install is serialized by flock, so tests that start together do not race).
ethers_js="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ethers_ready() {
  local name=$1 stamp="$ethers_js/node_modules/.xgr-lock"
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "$name: Node.js/npm not installed; skipped"; exit 77
  fi
  (
    flock 9
    if ! cmp -s "$ethers_js/package-lock.json" "$stamp" 2>/dev/null; then
      (cd "$ethers_js" && npm ci --no-audit --no-fund --loglevel=error) || exit 77
      cp "$ethers_js/package-lock.json" "$stamp"
    fi
  ) 9>"${TMPDIR:-/tmp}/xgr-ethers-npm.lock" || { echo "$name: npm ci could not install ethers (offline?); skipped"; exit 77; }
}
