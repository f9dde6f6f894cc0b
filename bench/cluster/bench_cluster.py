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

  bench_cluster.py XGRD [SESSIONS] [LEASE_MS]
"""
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

XGRD = sys.argv[1]
SESSIONS = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
LEASE = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
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


def store(schema):
    return PG + "&options=-csearch_path%3D" + schema


def psql(schema, sql):
    out = subprocess.run(["psql", "-Atq", store(schema), "-c", sql], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit("psql: " + out.stderr)
    return out.stdout.strip()


def start(schema, node):
    """An xgrd on schema: a cluster node named node, the single writer (node None) or, with schema
    None, one xgrd on an SQLite file."""
    port = os.path.join(DIR, "%s-%s.port" % (schema, node))
    where = store(schema) if schema else os.path.join(DIR, "fan.db")
    role = ["--node-id", node, "--lease-ms", str(LEASE)] if node else []
    p = subprocess.Popen([XGRD, "--listen", "127.0.0.1:0", "--store", where, "--port-file", port, "--workers",
                          "2", "--auth", "none", "--log-level", "warn"] + role,
                         stderr=open(os.path.join(DIR, "%s-%s.log" % (schema, node)), "a"))
    procs.append(p)
    t0 = time.time()
    while not (os.path.exists(port) and open(port).read().strip()):
        if p.poll() is not None or time.time() - t0 > 30:
            raise SystemExit("xgrd %s did not start" % node)
        time.sleep(0.01)
    url = "http://127.0.0.1:%s/" % open(port).read().strip()
    while True:
        try:
            if urllib.request.urlopen(url + "readyz", timeout=2).status == 200:
                return p, url
        except Exception:
            time.sleep(0.02)


def call(url, body):
    rq = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    r = json.loads(urllib.request.urlopen(rq, timeout=120).read())
    for x in r if isinstance(r, list) else [r]:
        if "error" in x:
            raise SystemExit("call failed: " + json.dumps(x["error"]))
    return r


def deploy(url, b):
    for k, r in b["rules"].items():
        call(url, {"jsonrpc": "2.0", "id": 1, "method": "xgr_putRule", "params": [{"address": k, "rule": r}]})
    call(url, {"jsonrpc": "2.0", "id": 1, "method": "xgr.putOrchestration",
               "params": {"xrc729": "local", "orchestration": b["orchestration"]}})


def enqueue_batches(urls, ostc, roots, step, clients=6):
    """Batches of 100 enqueues, batch i to node i % len(urls), sent by `clients` concurrent clients."""
    batches = [roots[i:i + 100] for i in range(0, len(roots), 100)]

    def client(k):
        for i in range(k, len(batches), clients):
            call(urls[i % len(urls)], [{"jsonrpc": "2.0", "id": r, "method": "xgr.enqueue",
                                       "params": {"owner": OWNER, "rootPid": r, "xrc729": "local", "ostcId": ostc,
                                                  "init": {"stepId": step}}} for r in batches[i]])
    ts = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def live(url):
    """Sessions in the node's engine (xgr_sessions_live)."""
    text = urllib.request.urlopen(url + "metrics", timeout=5).read().decode()
    m = re.search(r'^xgr_sessions_live (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def held(url):
    """Sessions the node holds, in memory or hibernated (xgr_cluster{kind="leases_held"})."""
    text = urllib.request.urlopen(url + "metrics", timeout=5).read().decode()
    m = re.search(r'^xgr_cluster\{kind="leases_held"\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def stop_all():
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    procs.clear()


def cpu_s(p):
    """User + system CPU seconds of process p so far."""
    f = open("/proc/%d/stat" % p.pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def throughput(nodes, kind="cluster"):
    """kind: "cluster" (nodes cluster nodes), "single" (one single writer) or "sqlite"."""
    schema = None if kind == "sqlite" else "tp%d%s" % (nodes, kind[0])
    if schema:
        psql("public", "CREATE SCHEMA " + schema)
    started = [start(schema, "n%d" % i if kind == "cluster" else None) for i in range(nodes)]
    urls = [u for _, u in started]
    deploy(urls[0], FAN)
    c0 = sum(cpu_s(p) for p, _ in started)
    t0 = time.time()
    enqueue_batches(urls, "fan32", list(range(1, SESSIONS + 1)), "Start")
    if schema:
        while psql(schema, "SELECT count(*) FROM sessions WHERE status = 0") != "0":
            time.sleep(0.05)
    else:
        while live(urls[0]) > 0:
            time.sleep(0.02)
    dt = time.time() - t0
    cpu = sum(cpu_s(p) for p, _ in started) - c0
    stop_all()
    if schema:
        steps = int(psql(schema, "SELECT count(*) FROM proc_steps"))
    else:
        db = sqlite3.connect(os.path.join(DIR, "fan.db"))
        steps = db.execute("SELECT count(*) FROM proc_steps").fetchone()[0]
        db.close()
    what = {"cluster": "PostgreSQL, %d node%s" % (nodes, "" if nodes == 1 else "s"),
            "single": "PostgreSQL, single writer (no --node-id)", "sqlite": "SQLite (reference)"}[kind]
    print("fan-out on %s: %d sessions, %d durable steps in %.2f s = %.0f steps/s; xgrd CPU %.1f us/step"
          % (what, SESSIONS, steps, dt, steps / dt, cpu * 1e6 / steps), flush=True)


def failover(how):
    schema = "fo_" + how
    psql("public", "CREATE SCHEMA " + schema)
    pa, ua = start(schema, "a")
    pb, ub = start(schema, "b")
    deploy(ua, SLEEP)
    n = 200
    enqueue_batches([ua], "sleep", list(range(1, n + 1)), "S")
    while psql(schema, "SELECT count(*) FROM proc_steps WHERE step_id = 'S'") != str(n):
        time.sleep(0.05)
    held0 = held(ub)
    t0 = time.time()
    pa.send_signal(signal.SIGKILL if how == "kill" else signal.SIGSTOP)
    while held(ub) < held0 + n:
        if time.time() - t0 > 60:
            raise SystemExit("failover: node b did not take the sessions over")
        time.sleep(0.005)
    dt = time.time() - t0
    stop_all()
    print("failover (%s of node a, --lease-ms %d): %d sessions held by node b after %.0f ms"
          % ("SIGKILL" if how == "kill" else "SIGSTOP", LEASE, n, dt * 1000), flush=True)


try:
    throughput(1, "sqlite")
    throughput(1, "single")
    throughput(1)
    throughput(3)
    failover("kill")
    failover("stop")
finally:
    stop_all()
    subprocess.run(["rm", "-rf", DIR])
