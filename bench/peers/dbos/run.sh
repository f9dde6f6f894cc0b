#!/usr/bin/env bash
# bench/peers/dbos/run.sh BUILD_DIR — xgr's durable fan-out on PostgreSQL against DBOS Transact
# (issue 18). One throwaway PostgreSQL 15 cluster from tests/pg/pg_cluster.sh (unix socket,
# fsync=on, synchronous_commit=on, 16 MB WAL segments) holds both: xgr's bench_store in the
# database `xgr`, then fanout.js (the same 32-way fan-out + join as DBOS durable workflows, DBOS's
# system database `dbos_bench`, created by DBOS). bench_store on SQLite (synchronous=FULL, a
# temporary file) runs right before them for the SQLite : PostgreSQL ratio. Prints the three rates
# and the ratios xgr-PG : DBOS (goal >= 100x) and SQLite : xgr-PG (goal <= 3x).
#
# Skipped with a message (exit 0) without Node.js/npm or PostgreSQL 15 (scripts/deps.sh installs
# both; `make bench` runs this script). The pinned DBOS SDK is installed here with `npm ci` from
# package-lock.json on first use and again when the lock file changes (not in scripts/deps.sh).
# Bounded: SESSIONS (6000) sessions at LIVE (2048) live for xgr; DBOS_SESSIONS (2000) workflows at
# DBOS_LIVE (256) in flight on a pool of DBOS_POOL (50) connections for at most DBOS_SECONDS (60) s.
set -euo pipefail
B=$(realpath "${1:-build-release}")
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "dbos peer: skipped (no Node.js/npm; scripts/deps.sh installs them)"; exit 0
fi
if [ ! -x "${XGR_PG_BIN:-/usr/lib/postgresql/15/bin}/pg_ctl" ]; then
  echo "dbos peer: skipped (no PostgreSQL 15; scripts/deps.sh installs it)"; exit 0
fi
stamp="$HERE/node_modules/.xgr-lock"
if ! cmp -s "$HERE/package-lock.json" "$stamp" 2>/dev/null; then
  (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error) || { echo "dbos peer: npm ci failed in $HERE"; exit 1; }
  cp "$HERE/package-lock.json" "$stamp"
fi

export SESSIONS=${SESSIONS:-6000} LIVE=${LIVE:-2048}
export DBOS_SESSIONS=${DBOS_SESSIONS:-2000} DBOS_LIVE=${DBOS_LIVE:-256} DBOS_POOL=${DBOS_POOL:-50} DBOS_SECONDS=${DBOS_SECONDS:-60}
export XGR_STORE_BENCH="$B/bench/store/bench_store" XGR_DBOS_FANOUT="$HERE/fanout.js"
echo "dbos peer: load before: $(uptime | sed 's/.*load/load/')"

# inside the cluster: XGR_PG_URL is the database `xgr`, XGR_PG_DIR the socket's directory
inner() {
  set -euo pipefail
  sq=$("$XGR_STORE_BENCH" --sync full --sessions "$SESSIONS" --live "$LIVE")
  echo "$sq"
  pg=$("$XGR_STORE_BENCH" --sync full --sessions "$SESSIONS" --live "$LIVE" --file "$XGR_PG_URL")
  echo "$pg"
  db=$(node --no-deprecation "$XGR_DBOS_FANOUT" "postgresql://xgr@localhost/dbos_bench?host=$XGR_PG_DIR" \
         --sessions "$DBOS_SESSIONS" --live "$DBOS_LIVE" --pool "$DBOS_POOL" --seconds "$DBOS_SECONDS")
  echo "$db"
  rate() { sed -n 's/.* = \([0-9]*\) durable steps\/s.*/\1/p'; }
  s=$(echo "$sq" | rate) p=$(echo "$pg" | rate) d=$(echo "$db" | rate)
  awk -v s="$s" -v p="$p" -v d="$d" 'BEGIN {
    printf "postgresql peers: xgr on PostgreSQL %d, DBOS Transact %d durable steps/s: xgr / DBOS = %.0fx (goal >= 100x)\n", p, d, p / d
    printf "postgresql peers: xgr on SQLite FULL %d, on PostgreSQL %d durable steps/s: SQLite / PostgreSQL = %.2fx (goal <= 3x)\n", s, p, s / p }'
}
export -f inner
rc=0
XGR_PG_WAL_SEGSIZE=16 "$ROOT/tests/pg/pg_cluster.sh" run bash -c inner || rc=$?
echo "dbos peer: load after: $(uptime | sed 's/.*load/load/')"
if [ "$rc" = 77 ]; then echo "dbos peer: skipped (no PostgreSQL 15)"; exit 0; fi
exit "$rc"
