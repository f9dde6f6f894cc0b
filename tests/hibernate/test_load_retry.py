#!/usr/bin/env python3
"""test_load_retry.py — a hibernated session whose load fails when it is due is loaded again later.

The due poller reads the due index after a cursor and moves the cursor past every session it
tried; before, a load that failed (a store error) left that session in the store until the next
start of xgrd, its timer never fired. Now a failed load goes on a bounded retry list and is tried
again with a growing delay (src/engine/hibernate.c).

Against a real xgrd on the PostgreSQL database of tests/pg/pg_cluster.sh (XGR_PG_URL), with
--hibernate-after 0 and --time-scale 20: the sleeper session (three waits of 60 s = 3 s each)
hibernates; the test renames proc_rt away so that loading it fails at its due time, checks that the
load failed (xgr_engine_events_total{kind="session_loads_failed"}), renames the table back and checks
that the session still completes (and that session_loads_retried counted the retry).

  test_load_retry.py XGRD SRC_DIR
"""
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from xgrd_harness import Xgrd, check, pg_schema_url, psql, wait_for  # noqa: E402

XGRD, SRC = sys.argv[1], sys.argv[2]
PG = os.environ.get("XGR_PG_URL", "")
if not PG:
    print("test_load_retry: skipped (no XGR_PG_URL; run it under tests/pg/pg_cluster.sh)")
    sys.exit(77)
DIR = tempfile.mkdtemp(prefix="xgr-retry-")
OWNER = "0x00000000000000000000000000000000000000aa"
SCHEMA = "load_retry"
x = Xgrd(XGRD, pg_schema_url(PG, SCHEMA), DIR, ["--hibernate-after", "0", "--time-scale", "20"])
ok, metric = x.ok, x.metric


rc = 1
renamed = False
try:
    psql(PG, "CREATE SCHEMA " + SCHEMA)
    x.start()
    x.deploy(json.load(open(os.path.join(SRC, "tests", "hibernate", "sleeper.json"))))
    ok("xgr.enqueue", {"owner": OWNER, "rootPid": 1, "xrc729": "local", "ostcId": "sleeper", "init": {"stepId": "S"}})
    wait_for("the sleeper hibernates",
             lambda: ok("xgr.getSession", {"owner": OWNER, "rootPid": 1})["session"].get("hibernated") is True, 10)
    # its load at the due time (3 s on) fails: the table it reads is not there
    psql(PG, "ALTER TABLE %s.proc_rt RENAME TO proc_rt_away" % SCHEMA)
    renamed = True
    wait_for("the due load fails", lambda: metric("session_loads_failed") >= 1, 15)
    check(True, "the load of the due session failed (session_loads_failed %g)" % metric("session_loads_failed"))
    time.sleep(0.5)
    psql(PG, "ALTER TABLE %s.proc_rt_away RENAME TO proc_rt" % SCHEMA)
    renamed = False
    wait_for("the sleeper completes after the store is back",
             lambda: ok("xgr.getSession", {"owner": OWNER, "rootPid": 1})["session"]["status"] == "completed", 20)
    check(True, "the session completes once its load works again")
    check(metric("session_loads_retried") >= 1, "the failed load was tried again (session_loads_retried %g)"
          % metric("session_loads_retried"))
    steps = psql(PG, "SELECT count(*) FROM %s.proc_steps WHERE root_pid = 1" % SCHEMA)
    check(steps == "4", "four steps in its history, none twice (%s)" % steps)
    rc = 0
finally:
    if renamed:
        psql(PG, "ALTER TABLE %s.proc_rt_away RENAME TO proc_rt" % SCHEMA)
    if x.proc:
        x.stop(timeout=20)
    if rc:
        print(x.log_tail(4000))
    shutil.rmtree(DIR, ignore_errors=True)
sys.exit(rc)
