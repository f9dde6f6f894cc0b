#!/usr/bin/env python3
"""test_pg_restart.py — a cluster goes on after its PostgreSQL restarts while it is idle (issue 37,
the fault suite's first finding: seed 25 of `tests/faults/run --nodes 4 --sessions 40 --window 15`).

Before the fix, a restart of the database while a node's writer and lease thread had nothing to do
left the node's lease connection and its listening connection dead for good: every heartbeat,
claim, due poll and outbox poll failed from then on, /readyz still answered 200, waiting sessions
stayed leased and were never loaded, and SIGTERM exited 0 after "cannot release the leases". The
writer's idle connection was dead too, so the first commit afterwards failed the store.

Here: a throwaway PostgreSQL (tests/faults/cluster.py), two nodes (--lease-ms 1000,
--hibernate-after 200, --time-scale 20), 20 sleeper sessions (tests/hibernate/sleeper.json: three
rounds of waitSec 60, 3 s each at this scale) started through both nodes. Once all of them are
asleep and hibernated, the database is restarted (immediate: as a crash). Checked: every session
runs to its end; both nodes made their lease connection and their writer connection again
(xgr_cluster_events_total{kind="reconnects"}, xgr_store_writer_reconnects_total) and answer /readyz 200; no step ran
twice; SIGTERM exits 0 and the leases are released.

  test_pg_restart.py XGRD SRC_DIR
"""
import json
import os
import re
import shutil
import signal
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from cluster import throwaway  # noqa: E402
from xgrd_harness import Xgrd, check, wait_for  # noqa: E402

XGRD, SRC = sys.argv[1], sys.argv[2]
OWNER = "0x00000000000000000000000000000000000000ab"
SESSIONS = 20


def readyz(n):
    try:
        return urllib.request.urlopen(n.url + "readyz", timeout=2).status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def main():
    top, pg, store = throwaway("xgr-pgrestart-")
    nodes = []
    try:
        nodes = [Xgrd(XGRD, store, top, ["--node-id", n, "--lease-ms", "1000", "--hibernate-after", "200",
                                         "--time-scale", "20"], n) for n in ("n1", "n2")]
        for n in nodes:
            n.start(30)
        nodes[0].deploy(json.load(open(os.path.join(SRC, "tests", "hibernate", "sleeper.json"))))
        for r in range(1, SESSIONS + 1):
            nodes[r % 2].ok("xgr.enqueue", {"owner": OWNER, "rootPid": r, "xrc729": "local", "ostcId": "sleeper",
                                            "init": {"stepId": "S", "payload": {}}})
        # every session asleep after its first step, and evicted from memory
        wait_for("the sessions did not all take their first step",
                 lambda: pg.sql("t", "SELECT count(*) FROM proc_steps") == str(SESSIONS), 20, 0.05)
        wait_for("the sessions were not all hibernated",
                 lambda: sum(n.metric("sessions_evicted") for n in nodes) >= SESSIONS, 10, 0.05)
        time.sleep(0.3)   # nothing left to write: the writers and the lease threads are idle
        t0 = time.time()
        pg.restart()
        check(True, "PostgreSQL restarted (immediate) in %.1f s with every session asleep" % (time.time() - t0))
        wait_for("not every session ran to its end after the restart (before the fix: none did)",
                 lambda: pg.sql("t", "SELECT count(*) FROM sessions WHERE status = 0") == "0", 60, 0.2)
        check(True, "all %d sessions ended %.1f s after the restart" % (SESSIONS, time.time() - t0))
        for n in nodes:
            check(n.metric("reconnects", "xgr_cluster_events_total") >= 1, "%s made its lease connection again" % n.name)
            check(readyz(n) == 200, "%s answers /readyz 200" % n.name)
        check(sum(n.metric(None, "xgr_store_writer_reconnects_total") for n in nodes) >= 1,
              "the writers made their connections again instead of failing the store")
        twice = pg.sql("t", "SELECT count(*) FROM (SELECT owner, root_pid, iter FROM proc_steps GROUP BY 1, 2, 3"
                            " HAVING count(*) > 1) d")
        check(twice == "0", "no step ran twice (%s)" % twice)
        steps = pg.sql("t", "SELECT count(*) FROM proc_steps")
        check(steps == str(SESSIONS * 4), "each session took its 4 steps (%s of %d)" % (steps, SESSIONS * 4))
        for n in nodes:
            rc = n.stop(signal.SIGTERM)
            check(rc == 0, "%s stopped with exit 0 (%s)" % (n.name, rc))
            log = open(n.log, errors="replace").read()
            check("cannot release the leases" not in log, "%s released its leases" % n.name)
            msgs = [m for m in re.findall(r'level=error msg="([^"]*)"', log)]
            worst = max([msgs.count(m) for m in set(msgs)] or [0])
            check(worst <= 3, "%s logged each failure during the outage at most 3 times (%d error lines, the most "
                              "of one kind %d)" % (n.name, len(msgs), worst))
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
