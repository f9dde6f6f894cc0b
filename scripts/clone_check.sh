#!/usr/bin/env bash
# scripts/clone_check.sh — proves that the repository stands alone, as a new user meets it: clones
# the committed state (HEAD) into an empty temporary folder, with no ../shared beside it, and there
#   1. runs `make demo` (deps, build, every example; XGR_DEMO_CONSOLE_SECS=0, so it does not wait),
#   2. runs the tests that once read ../shared and now use the project's own files (they must pass),
#   3. runs the suite 'shared' — the tests that check xgr against ../shared — and lists them: each
#      must be skipped (exit 77) with its one line saying what was not checked and why.
# Nothing of the current checkout's build directories is reused. Exit 0 when all of that holds,
# 1 otherwise. .ci/run runs it after `make test`; by hand: `scripts/clone_check.sh` (KEEP=1 keeps
# the temporary folder and prints where it is).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/xgr-clone-check.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
say() { printf '\n\033[1m== clone check: %s\033[0m\n' "$*"; }
fail() { echo "clone check: FAILED: $*"; exit 1; }

say "git clone of $(git -C "$src" rev-parse --short HEAD) into $tmp/xgr (nothing beside it)"
git clone -q --no-hardlinks "$src" "$tmp/xgr" || fail "git clone"
[ ! -e "$tmp/shared" ] || fail "$tmp/shared exists"
cd "$tmp/xgr" || fail "cd"

say "make demo"
XGR_DEMO_CONSOLE_SECS=0 make demo </dev/null || fail "make demo"

# the tests that failed on a clone before the project had its own fixtures (issue 32)
own=(orch_cases cli_orch cel_conformance test_rule cli_step test_rule_http test_published test_xgrd_chain)
say "the tests that read ../shared once, now on the project's own files: ${own[*]}"
meson test -C build --print-errorlogs "${own[@]}" || fail "a test of the project's own files"

say "the suite 'shared' (the checks against ../shared): each skips without it"
log=$tmp/shared.log
meson test -C build --suite shared >"$log" 2>&1
grep -E '^ *[0-9]+/[0-9]+ ' "$log"
echo "why, in each test's own words:"
grep -h '^SKIP ' build/meson-logs/testlog.txt | sed 's/^/  /'
total=$(grep -cE '^ *[0-9]+/[0-9]+ ' "$log")
skipped=$(grep -cE '^ *[0-9]+/[0-9]+ .* SKIP ' "$log")
[ "$total" -gt 0 ] || fail "no test in the suite 'shared'"
[ "$skipped" -eq "$total" ] || fail "$((total - skipped)) of $total tests of the suite 'shared' did not skip without ../shared"
echo "clone check: ok — make demo ran on the repository alone; ${#own[@]} tests passed on its own files; $total tests skipped without ../shared"
[ "${KEEP:-0}" = 1 ] && echo "kept: $tmp"
exit 0
