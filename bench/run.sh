#!/usr/bin/env bash
# bench/run.sh BUILD_DIR — run every benchmark of the project against a release build and print
# their results. Each module's benchmark is one line below.
set -euo pipefail
B=${1:-build-release}
echo "# xgr benchmarks — $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores, $(uname -m)"
# runtime (issue 5): spawn-tree and ping-pong throughput (peers: make bench-peers)
"$B/bench/runtime/bench_runtime" spawn-tree --depth 22; "$B/bench/runtime/bench_runtime" ping-pong --pairs 1000 --msgs 1000
# cel (issue 3): compile time and evaluations per second of the expression engine, one core
"$B/bench/cel/bench_cel" 2
# session core + step engine (issue 6): deterministic driver, one core
"$B/bench/session/bench_session" loop --steps 1000000; "$B/bench/session/bench_session" fanout --sessions 10000
# rule (issue 4): XRC-137 step engine, IterationOfPi steps per second, one core, no I/O
XGR_SRC=${XGR_SRC:-$(cd "$(dirname "$0")/.." && pwd)} "$B/bench/rule/bench_rule" --steps 2000000
# store (issue 8): durable steps/s of the fan-out workload on SQLite, synchronous=FULL and NORMAL
"$B/bench/store/bench_store" --sync full --sessions 6000 --live 2048; "$B/bench/store/bench_store" --sync normal --sessions 6000 --live 2048; "$B/bench/store/bench_store" --sync full --sessions 3000 --live 256
# store on PostgreSQL (issue 18): the same fan-out, one node, on a throwaway PostgreSQL 15 cluster (tests/pg/pg_cluster.sh:
# unix socket, fsync on, data on disk), SQLite FULL right before it for the ratio
"$B/bench/store/bench_store" --sync full --sessions 6000 --live 2048; XGR_PG_WAL_SEGSIZE=16 "$(dirname "$0")/../tests/pg/pg_cluster.sh" run sh -c '"$0" --sync full --sessions 6000 --live 2048 --file "$XGR_PG_URL"' "$B/bench/store/bench_store" || { rc=$?; [ "$rc" = 77 ] && echo "store on PostgreSQL: skipped (no PostgreSQL 15; scripts/deps.sh installs it)"; [ "$rc" = 77 ]; }
# concurrent engine (issue 7): fan-out + join and IterationOfPi loops, 1 and 2 workers; an open-loop fan-out for latency
# (--compare 5: five rounds alternating 1 and 2 workers, then the medians and the scaling ratio)
"$B/bench/engine/bench_engine" fanout --sessions 10000 --workers 2 --compare 5
"$B/bench/engine/bench_engine" loop --sessions 10000 --steps 20 --workers 2 --compare 5
"$B/bench/engine/bench_engine" fanout --sessions 2000 --workers 2 --rate 1000
# xgrd (issue 9): JSON-RPC requests per second over loopback with wrk (sessionAlive, durable enqueue)
"$(dirname "$0")/daemon/run.sh" "$B"
# permits (issue 16): verifications/s on one core; permit-verified durable enqueues/s with wrk
"$(dirname "$0")/permits/run.sh" "$B"
# xgr run text output (issue 15): a 20,000-step loop and a 2,337-process fan-out, each under 2 s
"$(dirname "$0")/cli/run_text.sh" "$B"
# chain (issue 17): one eth_call's latency, then 1,000 sessions at once with one contract read each on anvil
XGR_SRC=${XGR_SRC:-$(cd "$(dirname "$0")/.." && pwd)} "$B/bench/chain/bench_chain" --sessions 1000 --workers 2
XGR_SRC=${XGR_SRC:-$(cd "$(dirname "$0")/.." && pwd)} "$B/bench/chain/bench_chain" --sessions 1000 --workers 2 --latency-ms 20
# explore (issue 21): complete explorations of the seeds' examples and a 6-branch 3-of-6 kill join with backloops
XGR_SRC=${XGR_SRC:-$(cd "$(dirname "$0")/.." && pwd)} "$B/bench/explore/bench_explore"
# migrate-check (issue 36): 1,000 live sessions of the shipped examples, each its own state, checked from a store file
python3 "$(dirname "$0")/migrate/bench_migrate.py" "$B/xgrd" "$B/xgr" 1000
# PostgreSQL peers (issue 18): xgr's fan-out on PostgreSQL vs DBOS Transact (npm) on one throwaway cluster, fsync on;
# prints xgr-PG / DBOS (goal >= 100x) and SQLite / PostgreSQL (goal <= 3x); skipped without Node.js or PostgreSQL 15
"$(dirname "$0")/peers/dbos/run.sh" "$B"
# cluster (issue 18): xgrd nodes on one PostgreSQL (fsync on): fan-out steps/s with one node and with three,
# failover time after SIGKILL and SIGSTOP of a node (bench/cluster/bench_cluster.py; docs/CLUSTER.md)
XGR_PG_WAL_SEGSIZE=16 "$(dirname "$0")/../tests/pg/pg_cluster.sh" run python3 "$(dirname "$0")/cluster/bench_cluster.py" "$B/xgrd" 2000 2000 || { rc=$?; [ "$rc" = 77 ] && echo "cluster: skipped (no PostgreSQL 15)"; [ "$rc" = 77 ]; }
# hostile tenants (issue 38): a victim's enqueue + getSession + listSessions rounds, alone and while another tenant
# runs every attack of the issue at once (streams, batched validates, API calls that never answer, fan-outs, junk)
python3 "$(dirname "$0")/daemon/bench_hostile.py" "$B/xgrd" 1000
# batch operations (issue 35): a batch kill of 10,000 hibernated sessions at the default --batch-rate while a steady
# enqueue load runs (its p99 against the unloaded p99; goal <= 2x), then the same with xgrd SIGKILLed halfway
# (the operation resumes; every session killed exactly once, checked one by one)
python3 "$(dirname "$0")/daemon/bench_batch.py" "$B/xgrd" 10000
python3 "$(dirname "$0")/daemon/bench_batch.py" "$B/xgrd" 10000 --sigkill
