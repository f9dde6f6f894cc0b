#!/usr/bin/env python3
"""test_cluster_clock.py — a cluster node whose clock is off does not stamp times other nodes misread
(docs/CLUSTER.md, "Time").

Run under tests/pg/pg_cluster.sh (XGR_PG_URL names a throwaway PostgreSQL 15). Two nodes with
--lease-ms 1000: n1 on the machine's clock, n2 under libfaketime (Debian's `faketime`) one hour
ahead (its monotonic clock untouched, as an NTP step leaves it). n2 starts 10 sessions whose first
step A spawns W with a 6 s timer, and n2 is SIGKILLed once every A ran: n1 claims the sessions and
must run each W about 6 s after its A. Before cluster nodes took their session clock from the store,
n2 stamped W's due time one hour ahead of n1's clock (fault suite seed 1307: a session woken on such
a node waited for an hour) and no W ran here. Also checked: n2 logged how far off its clock is, n1
did not, and every session ends with one row of A and one of W.
Exit 77 when libfaketime is not installed.

  test_cluster_clock.py XGRD
"""
import json
import os
import re
import shutil
import signal
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
import xgrd_harness  # noqa: E402
from xgrd_harness import Xgrd, check, fail, pg_schema_url, until  # noqa: E402

XGRD = sys.argv[1]
PG = pg_schema_url(os.environ["XGR_PG_URL"], "clk")
DIR = tempfile.mkdtemp(prefix="xgr-cluster-clock-")
OWNER = "0x00000000000000000000000000000000000000ce"
N = 10
WAIT = 6
FAKETIME = next((p for p in ("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
                             "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1") if os.path.exists(p)), None)
if not FAKETIME:
    print("test_cluster_clock: skipped, no libfaketime (Debian's faketime; scripts/deps.sh installs it)")
    sys.exit(77)

GATE = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "gate_bundle.json")))
GATE["rules"]["ga"]["onValid"]["waitSec"] = WAIT   # W runs WAIT s after A


def node(name):
    x = Xgrd(XGRD, PG, DIR, ["--node-id", name, "--lease-ms", "1000"], name)
    if name == "n2":
        # an ASan build wants its runtime first in the library list; libfaketime only wraps clock
        # calls, so the check is turned off for it (the sanitizers still run)
        asan = ":".join(o for o in (os.environ.get("ASAN_OPTIONS", ""), "verify_asan_link_order=0") if o)
        x.env = dict(os.environ, LD_PRELOAD=FAKETIME, FAKETIME="+1h", FAKETIME_DONT_FAKE_MONOTONIC="1", ASAN_OPTIONS=asan)
    x.start(30)
    return x


def steps():
    """{rootPid: [step ids in iter order]} of every session."""
    out = {r: [] for r in range(1, N + 1)}
    for line in xgrd_harness.psql(PG, "SELECT root_pid, step_id FROM proc_steps WHERE owner = '%s' ORDER BY root_pid, iter"
                                  % OWNER).splitlines():
        r, s = line.split("|")
        out[int(r)].append(s)
    return out


nodes = []
try:
    xgrd_harness.psql(os.environ["XGR_PG_URL"], "CREATE SCHEMA clk")
    n1 = node("n1")
    nodes.append(n1)
    n2 = node("n2")
    nodes.append(n2)
    n2.deploy(GATE)
    for r in range(1, N + 1):
        n2.ok("xgr.enqueue", {"owner": OWNER, "xrc729": "local", "ostcId": "gate", "rootPid": str(r),
                              "init": {"stepId": "A"}})
    until(lambda: all(v == ["A"] for v in steps().values()), 5, 0.1) or fail("every A ran on n2: %s" % steps())
    n2.stop(signal.SIGKILL)
    # n1 claims them once n2's lease has lapsed (about a second) and runs W when its WAIT s are up
    ok = until(lambda: all(v == ["A", "W"] for v in steps().values()), 15, 0.2)
    late = [r for r, v in steps().items() if v != ["A", "W"]]
    check(ok, "n1 ran every W within 15 s of n2's death (still waiting: %s; n2 stamped its own clock, one hour "
          "ahead?)" % late)
    check(until(lambda: xgrd_harness.psql(PG, "SELECT count(*) FROM sessions WHERE status = 0").strip() == "0", 10, 0.2),
          "every session ended")
    log2, log1 = open(n2.log).read(), open(n1.log).read()
    off = re.search(r"clock is off the store.* offset_ms=(-?\d+)", log2)
    check(off and abs(int(off.group(1)) - 3600000) < 10000,
          "n2 logged its clock's offset, about 3,600,000 ms: %s" % (off.group(0) if off else "no such line"))
    check("clock is off the store" not in log1, "n1's clock agrees with the store's")
    check(n1.stop() == 0, "n1 stops cleanly")
    print("test_cluster_clock: ok (%d sessions started on a node one hour ahead, finished by another on time)" % N)
finally:
    for x in nodes:
        x.kill()
    shutil.rmtree(DIR, ignore_errors=True)
