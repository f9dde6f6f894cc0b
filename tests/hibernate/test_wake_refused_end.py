#!/usr/bin/env python3
"""test_wake_refused_end.py — a session whose last step sends an internal wake-up to a session that
does not exist ends completed, in memory and with hibernation (found by scenarios_hibernate).

The refusal ("no such session here") is recorded after the producing step's batch committed, in a
batch of its own. That batch used to carry a session state entry saying "running", which turned the
finished session's row back to running: getSession, listSessions and a restart then saw a live
session with no live process. Checked against a real xgrd on 127.0.0.1 (SQLite store), once with
--hibernate-after off and once with 0: the producer's row says completed, its refused wake-up is
listed, and it stays completed after a restart.

  test_wake_refused_end.py XGRD SRC_DIR
"""
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from xgrd_harness import Xgrd, check, until  # noqa: E402

XGRD, SRC = sys.argv[1], sys.argv[2]
OWNER = "0x0000000000000000000000000000000000000001"


# pre (waits 1 s) -> bid, whose rule wakes step settle of session [Target] of [Runner]: never enqueued
sc = json.load(open(os.path.join(SRC, "tests", "scenarios", "wakeups_internal_object_form_fromxrc137.json")))
for mode in ("off", "0"):
    d = tempfile.mkdtemp(prefix="xgr-wre-")
    x = Xgrd(XGRD, "sqlite:" + os.path.join(d, "s.db"), d, ["--time-scale", "100", "--hibernate-after", mode])
    try:
        x.start()
        x.deploy(sc["bundle"], "wre", **{"from": OWNER})
        x.ok("xgr.enqueue", {"owner": OWNER, "rootPid": 1, "xrc729": "wre", "init": {"stepId": "pre",
                             "payload": {"Runner": "0x00000000000000000000000000000000000000b0", "Target": 9}}})
        until(lambda: x.ok("xgr.getSession", {"owner": OWNER, "rootPid": 1}).get("wakeUpsRefused"), 10)
        time.sleep(0.3)   # the refusal's own batch has committed by now
        v = x.ok("xgr.getSession", {"owner": OWNER, "rootPid": 1})
        check(any("no such session" in w["reason"] for w in v.get("wakeUpsRefused") or []),
              "[hibernate-after %s] the wake-up to a missing session is refused" % mode)
        check(v["session"]["status"] == "completed" and not v["session"]["alive"],
              "[hibernate-after %s] the producer ends completed (status %s)" % (mode, v["session"]["status"]))
        x.stop()
        x.start()
        v = x.ok("xgr.getSession", {"owner": OWNER, "rootPid": 1})
        check(v["session"]["status"] == "completed", "[hibernate-after %s] and stays completed after a restart" % mode)
        x.stop()
    finally:
        x.kill()
        shutil.rmtree(d, ignore_errors=True)
print("test_wake_refused_end: all passed")
