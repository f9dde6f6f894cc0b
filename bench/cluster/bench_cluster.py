#!/usr/bin/env python3
"""bench_cluster.py — xgrd nodes on one PostgreSQL (issue 18; docs/CLUSTER.md): durable steps per
second of a fan-out workload with one node and with three, and failover time.

Run under tests/pg/pg_cluster.sh (XGR_PG_URL: a throwaway PostgreSQL 15; the benchmark keeps fsync
on). Each measurement uses a fresh schema.

  throughput  SESSIONS sessions of a 32-way fan-out into an `all` join (34 steps each), enqueued in
              batches of 100 spread round-robin over the nodes by six concurrent clients; steps/s =
              proc_steps rows / the time from the first enqueue until no session runs; also the
              CPU the xgrd processes spent per step (/proc). Run on PostgreSQL with one and three
              cluster nodes (--node-id), with one single writer (no --node-id: the schema's only
              writer, the usual one-machine deployment), and as the reference, one xgrd on SQLite
              (synchronous=FULL, a file in the temp directory) with the same workload.
  failover    two nodes (--lease-ms LEASE); 200 sessions waiting on a long timer are started on
              node A, then A is SIGKILLed (or SIGSTOPped): the time until node B holds every one of
              them (B's xgr_cluster{kind="leases_held"}: the nodes hibernate by default, so B claims
              sessions that sleep long without loading them; its due poller loads them in time).

  bench_cluster.py XGRD [SESSIONS] [LEASE_MS] [CASES] [FAILOVERS]

CASES: a comma-separated choice of sqlite, single, node1, node3, kill, stop (default: all of them,
in that order), e.g. "sqlite,single" to compare two builds' CPU per step quickly. FAILOVERS
(default 1): how many times each failover case runs, each in a fresh schema with fresh nodes;
with more than one, the median and the worst are printed as well.
"""
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from xgrd_harness import Xgrd, pg_schema_url, psql  # noqa: E402

XGRD = sys.argv[1]
SESSIONS = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
LEASE = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
CASES = sys.argv[4].split(",") if len(sys.argv) > 4 else ["sqlite", "single", "node1", "node3", "kill", "stop"]
FAILOVERS = int(sys.argv[5]) if len(sys.argv) > 5 else 1
PG = os.environ["XGR_PG_URL"]
DIR = tempfile.mkdtemp(prefix="xgr-bench-cluster-")
OWNER = "0x00000000000000000000000000000000000000bb"
procs = []

FAN = {"orchestration": {"id": "fan32", "structure": dict(
    [("Start", {"rule": "fs", "onValid": {"spawns": ["W%d" % i for i in range(32)],
                                          "join": {"joinid": "Gather", "mode": "all", "waitonjoin": "drain",
                                                   "from": [{"node": "W%d" % i, "when": "any"} for i in range(32)]}}}),
     ("Gather", {"rule": "fg"})] + [("W%d" % i, {"rule": "fw"}) for i in range(32)])},
       "rules": {"fs": {"payload": {}, "onValid": {"payload": {"n": 0}}},
                 "fw": {"payload": {"n": {"type": "int64", "default": 0}}, "onValid": {"payload": {"n": "[n] + 1"}}},
                 "fg": {"payload": {}, "onValid": {"payload": {"done": True}}}}}
SLEEP = {"orchestration": {"id": "sleep", "structure": {"S": {"rule": "sl", "onValid": {"spawns": ["T"]}},
                                                        "T": {"rule": "st"}}},
         "rules": {"sl": {"payload": {}, "onValid": {"waitSec": 3600}}, "st": {"payload": {}, "onValid": {}}}}


def start(schema, node):
    """An xgrd on schema: a cluster node named node, the single writer (node None) or, with schema
    None, one xgrd on an SQLite file."""
    x = Xgrd(XGRD, pg_schema_url(PG, schema) if schema else os.path.join(DIR, "fan.db"), DIR,
             ["--node-id", node, "--lease-ms", str(LEASE)] if node else [], "%s-%s" % (schema, node))
    x.start(30)
    procs.append(x)
    return x


def enqueue_batches(nodes, ostc, roots, step, clients=6):
    """Batches of 100 enqueues, batch i to node i % len(nodes), sent by `clients` concurrent clients."""
    batches = [roots[i:i + 100] for i in range(0, len(roots), 100)]

    def client(k):
        for i in range(k, len(batches), clients):
            nodes[i % len(nodes)].ok_batch([("xgr.enqueue", {"owner": OWNER, "rootPid": r, "xrc729": "local",
                                                             "ostcId": ostc, "init": {"stepId": step}})
                                            for r in batches[i]], timeout=120)
    ts = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def stop_all():
    for x in procs:
        x.stop()
    procs.clear()


def cpu_s(p):
    """User + system CPU seconds of process p so far."""
    f = open("/proc/%d/stat" % p.proc.pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def throughput(nodes, kind="cluster"):
    """kind: "cluster" (nodes cluster nodes), "single" (one single writer) or "sqlite"."""
    schema = None if kind == "sqlite" else "tp%d%s" % (nodes, kind[0])
    if schema:
        psql(PG, "CREATE SCHEMA " + schema)
    started = [start(schema, "n%d" % i if kind == "cluster" else None) for i in range(nodes)]
    started[0].deploy(FAN)
    c0 = sum(cpu_s(p) for p in started)
    t0 = time.time()
    enqueue_batches(started, "fan32", list(range(1, SESSIONS + 1)), "Start")
    if schema:
        while psql(pg_schema_url(PG, schema), "SELECT count(*) FROM sessions WHERE status = 0") != "0":
            time.sleep(0.05)
    else:
        while started[0].metric(None, "xgr_sessions_live") > 0:
            time.sleep(0.02)
    dt = time.time() - t0
    cpu = sum(cpu_s(p) for p in started) - c0
    stop_all()
    kept = ""
    if schema:
        steps = int(psql(pg_schema_url(PG, schema), "SELECT count(*) FROM proc_steps"))
        kept = "; %s of the steps' history rows keep their process's record (no process row written)" % psql(
            pg_schema_url(PG, schema), "SELECT count(*) FROM proc_steps WHERE rt_created_at IS NOT NULL")
    else:
        db = sqlite3.connect(os.path.join(DIR, "fan.db"))
        steps = db.execute("SELECT count(*) FROM proc_steps").fetchone()[0]
        db.close()
    what = {"cluster": "PostgreSQL, %d node%s" % (nodes, "" if nodes == 1 else "s"),
            "single": "PostgreSQL, single writer (no --node-id)", "sqlite": "SQLite (reference)"}[kind]
    print("fan-out on %s: %d sessions, %d durable steps in %.2f s = %.0f steps/s; xgrd CPU %.1f us/step%s"
          % (what, SESSIONS, steps, dt, steps / dt, cpu * 1e6 / steps, kept), flush=True)


def failover(how, k=0):
    schema = "fo_%s_%d" % (how, k)
    psql(PG, "CREATE SCHEMA " + schema)
    a, b = start(schema, "a"), start(schema, "b")
    a.deploy(SLEEP)
    n = 200
    enqueue_batches([a], "sleep", list(range(1, n + 1)), "S")
    while psql(pg_schema_url(PG, schema), "SELECT count(*) FROM proc_steps WHERE step_id = 'S'") != str(n):
        time.sleep(0.05)
    held = lambda: b.metric("leases_held", "xgr_cluster")  # noqa: E731 (sessions b holds, in memory or hibernated)
    held0 = held()
    t0 = time.time()
    a.proc.send_signal(signal.SIGKILL if how == "kill" else signal.SIGSTOP)
    while held() < held0 + n:
        if time.time() - t0 > 60:
            raise SystemExit("failover: node b did not take the sessions over")
        time.sleep(0.005)
    dt = time.time() - t0
    stop_all()
    print("failover (%s of node a, --lease-ms %d): %d sessions held by node b after %.0f ms"
          % ("SIGKILL" if how == "kill" else "SIGSTOP", LEASE, n, dt * 1000), flush=True)
    return dt


def failovers(how):
    ts = sorted(failover(how, k) for k in range(FAILOVERS))
    if FAILOVERS > 1:
        med = ts[len(ts) // 2] if len(ts) % 2 else (ts[len(ts) // 2 - 1] + ts[len(ts) // 2]) / 2
        print("failover (%s, --lease-ms %d) over %d runs: median %.0f ms, worst %.0f ms, best %.0f ms"
              % ("SIGKILL" if how == "kill" else "SIGSTOP", LEASE, FAILOVERS, med * 1000, ts[-1] * 1000, ts[0] * 1000),
              flush=True)


RUNS = {"sqlite": lambda: throughput(1, "sqlite"), "single": lambda: throughput(1, "single"),
        "node1": lambda: throughput(1), "node3": lambda: throughput(3), "kill": lambda: failovers("kill"),
        "stop": lambda: failovers("stop")}
for c in CASES:
    if c not in RUNS:
        raise SystemExit("bench_cluster: unknown case %r; expected some of %s" % (c, ",".join(RUNS)))
try:
    for c in CASES:
        RUNS[c]()
finally:
    stop_all()
    shutil.rmtree(DIR, ignore_errors=True)
