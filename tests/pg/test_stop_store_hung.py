#!/usr/bin/env python3
"""test_stop_store_hung.py — xgrd stops cleanly while answers wait for a store that does not answer.

Run under tests/pg/pg_cluster.sh (XGR_PG_URL names a throwaway PostgreSQL 15; XGR_PG_DIR its
directory). xgrd on PostgreSQL; every PostgreSQL process is SIGSTOPped, so the next session's first
batch never commits and its `xgr.enqueue` waits (a deferred answer, its connection suspended);
xgrd gets SIGTERM. It must end within its shutdown bounds with an exit status of its own, and the
waiting client must get an answer or a closed connection — not a crash: libmicrohttpd aborts the
process (SIGABRT, "MHD_stop_daemon() called while we have suspended connections") when its
listener is stopped with an answer still suspended, which is what xgrd did (fault suite seed
1316: a node stopped while PostgreSQL restarted). PostgreSQL is SIGCONTed afterwards.

  test_stop_store_hung.py XGRD
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
import xgrd_harness  # noqa: E402
from xgrd_harness import Xgrd, check, fail, pg_schema_url  # noqa: E402

XGRD = sys.argv[1]
DIR = tempfile.mkdtemp(prefix="xgr-stop-hung-")
OWNER = "0x00000000000000000000000000000000000000cf"
GATE = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "gate_bundle.json")))


def pg_pids():
    """Every process of the throwaway PostgreSQL (the postmaster and its children)."""
    pm = int(open(os.path.join(os.environ["XGR_PG_DIR"], "data", "postmaster.pid")).readline())
    kids = subprocess.run(["pgrep", "-P", str(pm)], capture_output=True, text=True).stdout.split()
    return [pm] + [int(k) for k in kids]


x = Xgrd(XGRD, pg_schema_url(os.environ["XGR_PG_URL"], "hung"), DIR, ["--shutdown-timeout", "3000"])
stopped = []
try:
    xgrd_harness.psql(os.environ["XGR_PG_URL"], "CREATE SCHEMA hung")
    x.start(30)
    x.deploy(GATE)
    x.ok("xgr.enqueue", {"owner": OWNER, "xrc729": "local", "ostcId": "gate", "init": {"stepId": "A"}})
    stopped = pg_pids()
    for p in stopped:
        os.kill(p, signal.SIGSTOP)
    answer = {}

    def enqueue():
        try:
            # a rootPid of its own: nothing read before the start, whose answer waits for its commit
            answer["a"] = x.rpc("xgr.enqueue", {"owner": OWNER, "xrc729": "local", "ostcId": "gate", "rootPid": "77",
                                                "init": {"stepId": "A"}}, timeout=120)
        except Exception as e:   # the connection closed unanswered: allowed
            answer["a"] = {"closed": str(e)}
    t = threading.Thread(target=enqueue, daemon=True)
    t.start()
    time.sleep(1.5)
    check(t.is_alive(), "the enqueue waits for its first commit (PostgreSQL is stopped): %s" % answer)
    t0 = time.time()
    x.proc.send_signal(signal.SIGTERM)
    try:
        rc = x.proc.wait(90)
    except subprocess.TimeoutExpired:
        fail("xgrd did not stop within 90 s of SIGTERM with its store hung: %s" % x.log_tail(800))
    log = open(x.log, errors="replace").read()
    check(rc >= 0, "xgrd ended with an exit status of its own, not a signal (%d): %s" % (rc, log[-800:]))
    check("Fatal error" not in log, "no libmicrohttpd panic: %s" % log[-800:])
    t.join(10)
    check(not t.is_alive(), "the waiting client got an answer or a closed connection")
    print("test_stop_store_hung: ok (exit %d after %.1f s; the waiting client: %s)" %
          (rc, time.time() - t0, json.dumps(answer.get("a"))[:200]))
finally:
    for p in stopped:
        try:
            os.kill(p, signal.SIGCONT)
        except ProcessLookupError:
            pass
    x.kill()
    shutil.rmtree(DIR, ignore_errors=True)
