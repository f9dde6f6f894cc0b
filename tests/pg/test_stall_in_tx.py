#!/usr/bin/env python3
"""test_stall_in_tx.py — a cluster node that stalls inside a store transaction (docs/CLUSTER.md,
"Failure cases") does not keep its sessions from moving.

Run under tests/pg/pg_cluster.sh (XGR_PG_URL). Two nodes (--lease-ms 1000) on one schema; n1 runs
150 looping fan-out sessions (tests/stress/crash/daemon_bundle.json), so its writer commits all the
time. n1 is SIGSTOPped, again and again for a moment, until the server shows its writer backend
(application_name "xgr writer n1") idle inside a transaction: the rows its fence locked there are
skipped by every claim. Checked: the server ends that connection after max(3 leases, 5 s) (the
writer's idle_in_transaction_session_timeout), n2 then claims every session n1 held and runs all
of them to their end while n1 stays stopped; resumed, n1 finds its writer's connection gone before
the group's COMMIT was made, or asks the server (txid_status) and learns it was not: the server had
ended the session, connects again and tries the group once
more, and the fence refuses every batch of the sessions n2 took: no step is applied twice, n1 goes
on (/readyz 200) and both stop cleanly.

  test_stall_in_tx.py XGRD SRC_DIR
"""
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from xgrd_harness import Xgrd, check, fail, pg_schema_url, psql, until, wait_for  # noqa: E402

XGRD, SRC = sys.argv[1], sys.argv[2]
STORE = pg_schema_url(os.environ["XGR_PG_URL"], "stall")
DIR = tempfile.mkdtemp(prefix="xgr-stall-")
OWNER = "0x00000000000000000000000000000000000000cd"
SESSIONS, ROUNDS = 150, 40
LEASE_MS = 1000
IDLE_TX_S = 5.0                  # max(3 leases, 5 s)


def sql(q):
    return psql(STORE, q)


def writer_state():
    return sql("SELECT state FROM pg_stat_activity WHERE application_name = 'xgr writer n1'")


def main():
    psql(os.environ["XGR_PG_URL"], "CREATE SCHEMA stall")
    nodes = [Xgrd(XGRD, STORE, DIR, ["--time-scale", "250", "--node-id", n, "--lease-ms", str(LEASE_MS)], n)
             for n in ("n1", "n2")]
    try:
        nodes[0].start(30)
        nodes[0].deploy(json.load(open(os.path.join(SRC, "tests", "stress", "crash", "daemon_bundle.json"))))
        nodes[0].ok_batch([("xgr.enqueue", {"owner": OWNER, "rootPid": r, "xrc729": "local", "ostcId": "crash_daemon",
                                            "init": {"stepId": "Start", "payload": {"Rounds": ROUNDS, "Seed": r}}})
                           for r in range(1, SESSIONS + 1)], timeout=60)
        nodes[1].start(30)
        check(writer_state() != "", "n1's writer is named in pg_stat_activity")
        # stop n1 for a moment at a time until its writer is caught idle inside a transaction
        p = nodes[0].proc
        caught = False
        for attempt in range(400):
            p.send_signal(signal.SIGSTOP)
            time.sleep(0.003)
            if writer_state() == "idle in transaction":
                caught = True
                break
            p.send_signal(signal.SIGCONT)
            time.sleep(0.01)
        if not caught:
            fail("n1's writer was never seen idle inside a transaction (400 tries)")
        t0 = time.time()
        held = sql("SELECT count(*) FROM sessions WHERE status = 0 AND lease_owner = 'n1'")
        check(True, "n1 stopped inside a transaction after %d tries, holding %s running sessions" % (attempt + 1, held))
        wait_for("the server did not end n1's idle transaction",
                 lambda: writer_state() == "", IDLE_TX_S + 10, 0.1)
        check(time.time() - t0 >= IDLE_TX_S - 0.5,
              "the server ended n1's writer connection after %.1f s idle in a transaction" % (time.time() - t0))
        wait_for("n2 did not run every session to its end while n1 stayed stopped",
                 lambda: sql("SELECT count(*) FROM sessions WHERE status = 0") == "0", 120, 0.2)
        check(sql("SELECT count(*) FROM sessions WHERE status <> 0") == str(SESSIONS),
              "all %d sessions ended on n2 (%.1f s after the stop)" % (SESSIONS, time.time() - t0))
        check(sql("SELECT count(*) FROM proc_steps WHERE step_id = 'Start'") == str(SESSIONS),
              "each session's first step is in the history once")
        # resumed: its group finds the connection gone before its COMMIT was sent, so nothing of it
        # was committed; the writer connects again and tries the group once more, and the fence
        # refuses every batch of the sessions n2 took (late writes), none is applied
        p.send_signal(signal.SIGCONT)
        wait_for("resumed, n1 did not make its writer connection again",
                 lambda: nodes[0].metric(None, "xgr_store_writer_reconnects_total") >= 1, 30, 0.1)
        wait_for("resumed, n1 did not find its leases lost",
                 lambda: nodes[0].metric("leases_held", "xgr_cluster") == 0, 30, 0.1)
        # (how many of its late writes the fence refuses depends on where the stop caught the
        # writer — a commit group or retention — and on whether n1's heartbeat finds the sessions
        # ended by n2 first; what must hold is below)
        refused = nodes[0].metric("late_writes_refused", "xgr_cluster_events_total")
        check(True, "resumed, n1 connected again; the fence refused %d of its late batches" % refused)
        twice = sql("SELECT count(*) FROM (SELECT owner, root_pid, iter FROM proc_steps GROUP BY 1, 2, 3"
                    " HAVING count(*) > 1) d")
        check(twice == "0", "no step is in the history twice (%s)" % twice)
        check(sql("SELECT count(*) FROM proc_steps WHERE step_id = 'Start'") == str(SESSIONS),
              "each session's first step is still in the history once")
        try:
            ready = urllib.request.urlopen(nodes[0].url + "readyz", timeout=5).status
        except urllib.error.HTTPError as e:
            ready = e.code
        check(ready == 200, "resumed, n1 works on: /readyz answers %s" % ready)
        check(nodes[0].stop() == 0, "n1 stops cleanly")
        check(nodes[1].stop() == 0, "n2 stops cleanly")
    except SystemExit as e:
        for n in nodes:
            if os.path.exists(n.log):
                sys.stderr.write("== %s\n%s\n" % (n.name, "".join(
                    l for l in open(n.log, errors="replace").readlines()[-15:])))
        raise e
    finally:
        for n in nodes:
            n.kill()
    shutil.rmtree(DIR, ignore_errors=True)


main()
