#!/usr/bin/env python3
"""test_stuck.py — no session is left waiting with nobody to wake it (issue 37).

Part 1, the cause of the stuck session (fixed by commit 6067311; this test fails before it). A
client that retries an enqueue on another node sends the start of a session that node's engine
does not run: the store holds it, another node runs it. The node started a second actor for it,
which took the session's wake-ups and left when its first batch met the stored row: the wake-up
was acknowledged and lost, and the session stayed waiting for good. Here: n1 starts SESSIONS gate
sessions (tests/pg/gate_bundle.json: W waits 10^8 s), the same enqueues are sent to n2 (answered
from the store as for the running sessions), then each W is woken through n2. Checked: every
session ends on n1, n2 never ran an actor of them, no step twice.

Part 2, the safety net. A session held by n2, hibernated, whose due time in the store lies 10 s in
the past (the state of a row the due poller missed: made here by setting wake_due behind the
poller's cursor with SQL, since no known path leads there any more) is found within about 3 s
and loaded through the engine (xgr_cluster_events_total{kind="overdue_loaded"}); it runs nothing (its real
timer is far away), sleeps again, and the gauge xgr_cluster{kind="sessions_overdue"} is back at 0.

  test_stuck.py XGRD SRC_DIR
"""
import json
import os
import shutil
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from cluster import throwaway  # noqa: E402
from xgrd_harness import Xgrd, check, wait_for  # noqa: E402

XGRD, SRC = sys.argv[1], sys.argv[2]
OWNER = "0x00000000000000000000000000000000000000ac"
SESSIONS = 10


def bundle(oid, wait):
    """S sleeps `wait` s once, then ends: two steps."""
    return {"orchestration": {"id": oid, "structure": {"S": {"rule": oid, "onValid": {"spawns": ["S"]}}}},
            "rules": {oid: {"payload": {"n": {"type": "int64", "default": 0}, "max": {"type": "int64", "default": 1}},
                            "rules": ["[n] < [max]"], "onValid": {"payload": {"n": "[n] + 1"}, "waitSec": wait},
                            "onInvalid": {}}}}


def main():
    top, pg, store = throwaway("xgr-stuck-")
    nodes = []
    try:
        args = ["--lease-ms", "1000", "--hibernate-after", "200"]
        n1 = Xgrd(XGRD, store, top, ["--node-id", "n1"] + args, "n1")
        n2 = Xgrd(XGRD, store, top, ["--node-id", "n2"] + args, "n2")
        nodes = [n1, n2]
        n1.start(30)
        n2.start(30)

        # ---- part 1: enqueues retried on another node, then wake-ups through that node
        gate = json.load(open(os.path.join(SRC, "tests", "pg", "gate_bundle.json")))
        n1.deploy(gate)
        start = lambda r: ("xgr.enqueue", {"owner": OWNER, "rootPid": r, "xrc729": "local", "ostcId": "gate",
                                           "init": {"stepId": "A", "payload": {}}})
        first = n1.ok_batch([start(r) for r in range(1, SESSIONS + 1)])
        wait_for("the gate sessions did not all wait at W",
                 lambda: pg.sql("t", "SELECT count(*) FROM proc_steps WHERE step_id = 'A'") == str(SESSIONS), 10, 0.05)
        again = n2.ok_batch([start(r) for r in range(1, SESSIONS + 1)])
        check([f["ack"] for f in first] == ["queued"] * SESSIONS, "n1 queued the sessions")
        held = n1.ok_batch([start(r) for r in range(1, SESSIONS + 1)])
        check([a["ack"] for a in again] == [h["ack"] for h in held] == ["scheduled"] * SESSIONS,
              "n2 answered the repeated enqueues from the store as n1 does: %s" % again[0]["ack"])
        for r in range(1, SESSIONS + 1):
            n2.ok("xgr_wakeUpProcess", {"from": OWNER, "owner": OWNER, "processId": "%d:2" % r, "payload": {"n": 5}})
        wait_for("a gate session woken through n2 never ended (the wake-up was lost)",
                 lambda: pg.sql("t", "SELECT count(*) FROM sessions WHERE status = 0") == "0", 20, 0.05)
        check(True, "every gate session woken through n2 ended")
        check(n2.metric("sessions_started") == 0, "n2 started no actor of them (%d)" % n2.metric("sessions_started"))
        check(pg.sql("t", "SELECT count(*) FROM proc_steps") == str(2 * SESSIONS), "each session took 2 steps")
        n1.deploy(bundle("longnap", 100000))

        # ---- part 2: the safety net finds a held session behind the poller's cursor
        n2.ok("xgr.enqueue", {"owner": OWNER, "rootPid": 100, "xrc729": "local", "ostcId": "longnap",
                              "init": {"stepId": "S", "payload": {}}})
        wait_for("the long sleeper did not hibernate on n2",
                 lambda: pg.sql("t", "SELECT count(*) FROM sessions WHERE root_pid = 100 AND lease_owner = 'n2'"
                                     " AND wake_due IS NOT NULL") == "1" and
                 n2.metric("sessions_evicted") >= 1, 10, 0.05)
        steps = pg.sql("t", "SELECT count(*) FROM proc_steps")
        past = int(time.time() * 1000) - 10000
        pg.sql("t", "UPDATE sessions SET wake_due = %d WHERE root_pid = 100" % past)
        t0 = time.time()
        wait_for("the safety net did not load the overdue session",
                 lambda: n2.metric("overdue_loaded", "xgr_cluster_events_total") >= 1, 5, 0.05)
        check(True, "the safety net loaded the overdue session after %.1f s" % (time.time() - t0))
        wait_for("the loaded session did not sleep again with its real due time",
                 lambda: int(pg.sql("t", "SELECT COALESCE(wake_due, 0) FROM sessions WHERE root_pid = 100") or 0)
                 > past + 60000, 10, 0.05)
        wait_for("sessions_overdue did not go back to 0",
                 lambda: n2.metric("sessions_overdue", "xgr_cluster") == 0, 5, 0.05)
        check(pg.sql("t", "SELECT count(*) FROM proc_steps") == steps, "loading it ran no step")
        check(pg.sql("t", "SELECT status FROM sessions WHERE root_pid = 100") == "0", "it still sleeps")
        check("overdue sessions loaded" in open(n2.log, errors="replace").read(), "n2 logged the overdue load")
        twice = pg.sql("t", "SELECT count(*) FROM (SELECT owner, root_pid, iter FROM proc_steps GROUP BY 1, 2, 3"
                            " HAVING count(*) > 1) d")
        check(twice == "0", "no step ran twice (%s)" % twice)
        check(n2.stop(signal.SIGTERM) == 0, "n2 stopped with exit 0")
    except BaseException:
        for n in nodes:
            if n.proc:
                print("---- %s log ----\n%s" % (n.name, n.log_tail(3000)), file=sys.stderr)
        raise
    finally:
        for n in nodes:
            n.kill()
        pg.stop()
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
