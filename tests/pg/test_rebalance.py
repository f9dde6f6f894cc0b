#!/usr/bin/env python3
"""test_rebalance.py — nodes that join a cluster take a share of the waiting sessions (docs/CLUSTER.md
"Rebalancing").

Run under tests/pg/pg_cluster.sh (XGR_PG_URL names a throwaway PostgreSQL 15). Every node runs with
--lease-ms 1000 and --hibernate-after 0 (a waiting session leaves memory at once; its node keeps the
lease). N gate sessions (A runs, its child W then waits 10^8 s for a wake-up) are started on n1 alone
and hibernate there. Then:
  - n2 joins: within 20 s it holds at least its share less the slack (N/2 - max(8, N/20)), n1 no
    more than its share plus the slack, and every session is leased to exactly one of them;
  - n3 joins: the same with three nodes (each holds N/3 within the slack); every node counts 3 live
    nodes (xgr_cluster{kind="nodes_live"});
  - n1 stops (SIGTERM): n2 and n3 take its sessions (its node row goes, so they count 2 nodes);
  - every W is woken by a call to a random live node (forwarded to the holder, which loads the
    hibernated session): every session ends, each with exactly one row of A and one of W in its
    history, W with the wake's payload;
  - the nodes that handed sessions over logged it, and all stop cleanly (exit 0).

  test_rebalance.py XGRD
XGR_REBALANCE_N sets N (default 300); XGR_REBALANCE_SECS the time allowed for each balancing (20 s);
XGR_REBALANCE_NO_WAKE=1 stops after the balancing (waking 20,000 sessions one call at a time is slow).
"""
import json
import os
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
import xgrd_harness  # noqa: E402
from xgrd_harness import Xgrd, check, fail, pg_schema_url, until, wait_for  # noqa: E402

XGRD = sys.argv[1]
PG = pg_schema_url(os.environ["XGR_PG_URL"], "rb")
DIR = tempfile.mkdtemp(prefix="xgr-rebalance-")
OWNER = "0x00000000000000000000000000000000000000cd"
N = int(os.environ.get("XGR_REBALANCE_N", "300"))   # more for a measurement (docs/CLUSTER.md)
LEASE_MS = 1000
SECS = float(os.environ.get("XGR_REBALANCE_SECS", "20"))
rnd = random.Random(int(os.environ.get("XGR_REBALANCE_SEED", str(int(time.time())))))
nodes = []

GATE = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "gate_bundle.json")))


def psql(sql):
    return xgrd_harness.psql(PG, sql)


class Node(Xgrd):
    def __init__(self, node_id):
        super().__init__(XGRD, PG, DIR, ["--node-id", node_id, "--lease-ms", str(LEASE_MS), "--hibernate-after", "0"],
                         node_id)
        self.start(30)
        nodes.append(self)

    def held(self):
        return int(self.metric("leases_held", "xgr_cluster"))


def by_owner():
    """{lease_owner: running sessions} from the database."""
    out = {}
    for line in psql("SELECT COALESCE(lease_owner, '-'), count(*) FROM sessions WHERE status = 0"
                     " GROUP BY 1").splitlines():
        k, v = line.split("|")
        out[k] = int(v)
    return out


def balanced(live, secs):
    """Wait until each live node holds its share within the slack (by the database and by each node's
    own count); the seconds that took."""
    share = -(-N // len(live))
    slack = max(8, share // 10)
    t0 = time.time()

    def ok():
        rows = by_owner()
        return (sum(rows.values()) == N and rows.get("-", 0) == 0 and
                all(share - slack <= rows.get(n.name, 0) <= share + slack for n in live) and
                all(share - slack <= n.held() <= share + slack for n in live))
    if not until(ok, secs, 0.1):
        fail("not balanced over %s after %d s: rows %s, held %s" %
             ([n.name for n in live], secs, by_owner(), {n.name: n.held() for n in live}))
    return time.time() - t0


def main():
    psql("CREATE SCHEMA rb")
    n1 = Node("n1")
    n1.deploy(GATE)
    for r0 in range(1, N + 1, 1000):
        n1.ok_batch([("xgr.enqueue", {"owner": OWNER, "rootPid": r, "xrc729": "local", "ostcId": "gate",
                                      "init": {"stepId": "A"}}) for r in range(r0, min(r0 + 1000, N + 1))], timeout=60)
    wait_for("A did not run in every session", lambda: psql(
        "SELECT count(*) FROM proc_steps WHERE step_id = 'A'") == str(N), 30 + N / 100, 0.1)
    wait_for("n1 did not hibernate its sessions", lambda: psql(
        "SELECT count(*) FROM sessions WHERE status = 0 AND wake_due IS NOT NULL AND lease_owner = 'n1'") == str(N),
        30 + N / 100, 0.1)
    print("n1 holds %d hibernated sessions" % n1.held(), flush=True)

    n2 = Node("n2")
    took = balanced([n1, n2], SECS)
    print("n2 joined: balanced in %.1f s: %s" % (took, by_owner()), flush=True)
    n3 = Node("n3")
    took = balanced([n1, n2, n3], SECS)
    print("n3 joined: balanced in %.1f s: %s" % (took, by_owner()), flush=True)
    for n in nodes:
        check(n.metric("nodes_live", "xgr_cluster") == 3, "%s counts 3 live nodes" % n.name)
    handed = {n.name: int(n.metric("sessions_handed_over", "xgr_cluster_events_total")) for n in nodes}
    print("handed over: %s" % handed, flush=True)
    check(handed["n1"] > 0 and handed["n3"] == 0, "n1 handed sessions over, n3 none")
    check("sessions handed over to balance the cluster" in open(n1.log).read(), "n1 logged the hand-over")

    check(n1.stop() == 0, "n1 stopped cleanly")
    live = [n2, n3]
    took = balanced(live, SECS)
    print("n1 stopped: balanced in %.1f s: %s" % (took, by_owner()), flush=True)
    for n in live:
        wait_for("%s does not count 2 live nodes" % n.name, lambda: n.metric("nodes_live", "xgr_cluster") == 2, 10)

    if os.environ.get("XGR_REBALANCE_NO_WAKE"):   # a measurement of the balancing only
        return
    for r in range(1, N + 1):
        for attempt in range(6):
            node = rnd.choice(live)
            a = node.rpc("xgr_wakeUpProcess", {"from": OWNER, "processId": "%d:2" % r, "payload": {"n": 41}}, timeout=15)
            if "error" not in a:
                break
            if attempt and "no live session" in json.dumps(a["error"]):
                break
            time.sleep(0.3)
        else:
            fail("wake of session %d kept failing: %s" % (r, json.dumps(a["error"])))
    wait_for("not every session ended", lambda: psql("SELECT count(*) FROM sessions WHERE status = 0") == "0",
             60 + N / 100, 0.1)
    rows = psql("SELECT count(*) FILTER (WHERE step_id = 'A'), count(*) FILTER (WHERE step_id = 'W'),"
                " count(DISTINCT root_pid) FILTER (WHERE step_id = 'W' AND payload::jsonb ->> 'n' = '42')"
                " FROM proc_steps")
    check(rows == "%d|%d|%d" % (N, N, N), "one A and one W (payload n = 42) per session: %s" % rows)
    for n in live:
        check(n.stop() == 0, "%s stopped cleanly" % n.name)
    print("every session ended once; all nodes stopped cleanly", flush=True)


try:
    main()
    print("PASS", flush=True)
except xgrd_harness.Fail as e:
    print("FAIL: %s" % e, flush=True)
    for n in nodes:
        lines = open(n.log, errors="replace").read().splitlines()
        lost = [l for l in lines if "lease lost" in l]
        other = [l for l in lines if "lease lost" not in l]
        print("== %s log: %d lines of \"lease lost\", the last other lines:\n%s" %
              (n.name, len(lost), "\n".join(other[-40:])), flush=True)
    sys.exit(1)
finally:
    for n in nodes:
        n.kill()
    shutil.rmtree(DIR, ignore_errors=True)
