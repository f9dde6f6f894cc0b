#!/usr/bin/env bash
# tests/pg/pg_cluster.sh — a throwaway PostgreSQL 15 cluster for tests and benchmarks (issue 18).
#
#   pg_cluster.sh run CMD [ARGS...]   start a cluster, run CMD with XGR_PG_URL (a libpq URI of an
#                                     empty database `xgr`) and XGR_PG_DIR set, stop and delete the
#                                     cluster, exit with CMD's status
#   pg_cluster.sh start DIR           start a cluster under DIR (created; must not exist) and print
#                                     its URI; `stop DIR` stops it and removes DIR
#   pg_cluster.sh url DIR             the URI of the cluster under DIR
#
# The cluster is made with initdb and run with pg_ctl from /usr/lib/postgresql/15/bin (Debian
# `postgresql`, installed by scripts/deps.sh; XGR_PG_BIN overrides the directory). It listens on
# a unix socket in DIR only (no TCP port: listen_addresses=''), trusts local connections and has
# the superuser `xgr`. PostgreSQL refuses to run as root, so when this script runs as root the
# server runs as the unprivileged user XGR_PG_USER (default `postgres`, created by the Debian
# package; created with useradd when missing) and DIR is handed to it. XGR_PG_FSYNC=off turns
# fsync off (tests: faster, nothing durable needed); the default is on (benchmarks measure
# durable commits). initdb runs once into a template directory (XGR_PG_TEMPLATE, default
# /tmp/xgr-pg-template-15-UID-walN) that each cluster copies, so a start takes about one second.
# XGR_PG_OPTS adds server options (e.g. "-c shared_preload_libraries=pg_stat_statements" to see
# where a benchmark's server time goes).
# `run` makes its directory under XGR_PG_TMP (default /tmp; the tests use /dev/shm with fsync off).
# WAL segments are 1 MB (XGR_PG_WAL_SEGSIZE, in MB: a small template to copy); benchmarks use 16,
# PostgreSQL's default, since with fsync on every segment switch costs an fsync of its own. When the binaries are missing the `run`
# command exits 77 (meson's "skipped").
set -euo pipefail

BIN=${XGR_PG_BIN:-/usr/lib/postgresql/15/bin}
FSYNC=${XGR_PG_FSYNC:-on}

as_owner() {   # run a command as the cluster's owner
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "${XGR_PG_USER:-postgres}" -- "$@"
  else
    "$@"
  fi
}

pg_url() { echo "postgresql:///xgr?host=$1&user=xgr"; }

# initdb runs once per machine into a template (several seconds on a loaded machine: it bootstraps
# the catalogs); every cluster is a copy of it. Made under a lock, moved into place when complete.
WALSEG=${XGR_PG_WAL_SEGSIZE:-1}
TEMPLATE=${XGR_PG_TEMPLATE:-/tmp/xgr-pg-template-15-$(id -u)-wal$WALSEG}
pg_template() {
  [ -f "$TEMPLATE/data/PG_VERSION" ] && return 0
  exec 9>"$TEMPLATE.lock"
  flock 9
  if [ ! -f "$TEMPLATE/data/PG_VERSION" ]; then
    local tmp
    tmp=$(mktemp -d "$TEMPLATE.new.XXXXXX")
    if [ "$(id -u)" -eq 0 ]; then chown "${XGR_PG_USER:-postgres}" "$tmp"; chmod 0755 "$tmp"; fi
    as_owner "$BIN/initdb" -D "$tmp/data" -U xgr -A trust -E UTF8 --no-locale --no-sync --no-instructions \
      --wal-segsize="$WALSEG" >"$tmp/initdb.log" 2>&1 || { cat "$tmp/initdb.log" >&2; rm -rf "$tmp"; flock -u 9; return 1; }
    # the database `xgr` is part of the template too (CREATE DATABASE copies files: not per start)
    as_owner "$BIN/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w -t 60 -o "-k $tmp -c listen_addresses=" \
      start >/dev/null || { cat "$tmp/server.log" >&2; rm -rf "$tmp"; flock -u 9; return 1; }
    as_owner "$BIN/createdb" -h "$tmp" -U xgr xgr
    as_owner "$BIN/pg_ctl" -D "$tmp/data" -m fast -w -t 60 stop >/dev/null
    rm -f "$tmp/data/postmaster.opts" "$tmp/data/log"/* 2>/dev/null || true
    rm -rf "$TEMPLATE"
    mv "$tmp" "$TEMPLATE"
  fi
  flock -u 9
}

pg_start() {
  local dir=$1
  if [ ! -x "$BIN/initdb" ] || [ ! -x "$BIN/pg_ctl" ]; then
    echo "pg_cluster: no PostgreSQL 15 binaries under $BIN (scripts/deps.sh installs postgresql)" >&2
    return 77
  fi
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then
    local u=${XGR_PG_USER:-postgres}
    if ! id "$u" >/dev/null 2>&1; then useradd --system --no-create-home --shell /usr/sbin/nologin "$u"; fi
    chown "$u" "$dir"
    chmod 0755 "$dir"
  fi
  pg_template
  cp -a "$TEMPLATE/data" "$dir/data"
  as_owner "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
    -o "-k $dir -c listen_addresses= -c fsync=$FSYNC -c max_connections=200 -c shared_buffers=64MB ${XGR_PG_OPTS:-}" \
    start >/dev/null || { cat "$dir/server.log" >&2; return 1; }
}

pg_stop() {
  local dir=$1
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$BIN/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

cmd=${1:-}
shift || true
case "$cmd" in
  start)
    pg_start "$1"
    pg_url "$1"
    ;;
  stop)
    pg_stop "$1"
    ;;
  url)
    pg_url "$1"
    ;;
  run)
    dir=$(mktemp -d "${XGR_PG_TMP:-/tmp}/xgr-pg-XXXXXX")
    rc=0
    pg_start "$dir" || rc=$?
    if [ "$rc" -ne 0 ]; then
      rm -rf "$dir"
      exit "$rc"
    fi
    trap 'pg_stop "$dir"' EXIT
    XGR_PG_URL=$(pg_url "$dir") XGR_PG_DIR=$dir "$@" || rc=$?
    exit "$rc"
    ;;
  *)
    echo "usage: pg_cluster.sh run CMD... | start DIR | stop DIR | url DIR" >&2
    exit 2
    ;;
esac
