#!/usr/bin/env python3
"""test_load_retry.py — a hibernated session whose load fails when it is due is loaded again later.

The due poller reads the due index after a cursor and moves the cursor past every session it
tried; before, a load that failed (a store error) left that session in the store until the next
start of xgrd, its timer never fired. Now a failed load goes on a bounded retry list and is tried
again with a growing delay (src/engine/hibernate.c).

Against a real xgrd on the PostgreSQL database of tests/pg/pg_cluster.sh (XGR_PG_URL), with
--hibernate-after 0 and --time-scale 20: the sleeper session (three waits of 60 s = 3 s each)
hibernates; the test renames proc_rt away so that loading it fails at its due time, checks that the
load failed (xgr_engine_events{kind="session_loads_failed"}), renames the table back and checks
that the session still completes (and that session_loads_retried counted the retry).

  test_load_retry.py XGRD SRC_DIR
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

XGRD, SRC = sys.argv[1], sys.argv[2]
PG = os.environ.get("XGR_PG_URL", "")
if not PG:
    print("test_load_retry: skipped (no XGR_PG_URL; run it under tests/pg/pg_cluster.sh)")
    sys.exit(77)
DIR = tempfile.mkdtemp(prefix="xgr-retry-")
OWNER = "0x00000000000000000000000000000000000000aa"
SCHEMA = "load_retry"
STORE = PG + ("&" if "?" in PG else "?") + "options=-csearch_path%3D" + SCHEMA
proc = None
url = None


def psql(sql):
    out = subprocess.run(["psql", "-Atq", PG, "-c", sql], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit("FAIL: psql %s: %s" % (sql, out.stderr))
    return out.stdout.strip()


def start():
    global proc, url
    port = os.path.join(DIR, "port")
    log = open(os.path.join(DIR, "log"), "a")
    proc = subprocess.Popen([XGRD, "--listen", "127.0.0.1:0", "--store", STORE, "--port-file", port,
                             "--workers", "2", "--auth", "none", "--hibernate-after", "0", "--time-scale", "20",
                             "--log-level", "warn"], stderr=log)
    t0 = time.time()
    while time.time() - t0 < 20:
        if os.path.exists(port) and open(port).read().strip():
            url = "http://127.0.0.1:%s/" % open(port).read().strip()
            try:
                if urllib.request.urlopen(url + "readyz").status == 200:
                    return
            except Exception:
                pass
        time.sleep(0.02)
    raise SystemExit("FAIL: xgrd not ready")


def ok(method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    rq = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    r = json.loads(urllib.request.urlopen(rq).read())
    if "error" in r:
        raise SystemExit("FAIL: %s: %s" % (method, json.dumps(r["error"])))
    return r["result"]


def metric(name):
    text = urllib.request.urlopen(url + "metrics").read().decode()
    m = re.search(r'^xgr_engine_events\{kind="%s"\} (\S+)$' % name, text, re.M)
    return float(m.group(1)) if m else 0.0


def wait_for(what, cond, secs):
    t0 = time.time()
    while time.time() - t0 < secs:
        if cond():
            return
        time.sleep(0.05)
    raise SystemExit("FAIL: " + what)


def check(cond, what):
    if not cond:
        raise SystemExit("FAIL: " + what)
    print("ok  ", what)


rc = 1
renamed = False
try:
    psql("CREATE SCHEMA " + SCHEMA)
    start()
    b = json.load(open(os.path.join(SRC, "tests", "hibernate", "sleeper.json")))
    for k, r in b["rules"].items():
        ok("xgr_putRule", [{"address": k, "rule": r}])
    ok("xgr.putOrchestration", {"xrc729": "local", "orchestration": b["orchestration"]})
    ok("xgr.enqueue", {"owner": OWNER, "rootPid": 1, "xrc729": "local", "ostcId": "sleeper", "init": {"stepId": "S"}})
    wait_for("the sleeper hibernates",
             lambda: ok("xgr.getSession", {"owner": OWNER, "rootPid": 1})["session"].get("hibernated") is True, 10)
    # its load at the due time (3 s on) fails: the table it reads is not there
    psql("ALTER TABLE %s.proc_rt RENAME TO proc_rt_away" % SCHEMA)
    renamed = True
    wait_for("the due load fails", lambda: metric("session_loads_failed") >= 1, 15)
    check(True, "the load of the due session failed (session_loads_failed %g)" % metric("session_loads_failed"))
    time.sleep(0.5)
    psql("ALTER TABLE %s.proc_rt_away RENAME TO proc_rt" % SCHEMA)
    renamed = False
    wait_for("the sleeper completes after the store is back",
             lambda: ok("xgr.getSession", {"owner": OWNER, "rootPid": 1})["session"]["status"] == "completed", 20)
    check(True, "the session completes once its load works again")
    check(metric("session_loads_retried") >= 1, "the failed load was tried again (session_loads_retried %g)"
          % metric("session_loads_retried"))
    steps = psql("SELECT count(*) FROM %s.proc_steps WHERE root_pid = 1" % SCHEMA)
    check(steps == "4", "four steps in its history, none twice (%s)" % steps)
    rc = 0
finally:
    if renamed:
        psql("ALTER TABLE %s.proc_rt_away RENAME TO proc_rt" % SCHEMA)
    if proc:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if rc:
        print(open(os.path.join(DIR, "log")).read()[-4000:])
    shutil.rmtree(DIR, ignore_errors=True)
sys.exit(rc)
