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
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

XGRD, SRC = sys.argv[1], sys.argv[2]
OWNER = "0x0000000000000000000000000000000000000001"


def start(d, hibernate):
    port = os.path.join(d, "port")
    if os.path.exists(port):
        os.remove(port)
    p = subprocess.Popen([XGRD, "--listen", "127.0.0.1:0", "--store", "sqlite:" + os.path.join(d, "s.db"),
                          "--port-file", port, "--workers", "2", "--auth", "none", "--time-scale", "100",
                          "--hibernate-after", hibernate, "--log-level", "warn"],
                         stderr=open(os.path.join(d, "log"), "a"))
    t0 = time.time()
    while time.time() - t0 < 20 and not (os.path.exists(port) and open(port).read().strip()):
        time.sleep(0.01)
    url = "http://127.0.0.1:%s/" % open(port).read().strip()
    while time.time() - t0 < 20:
        try:
            if urllib.request.urlopen(url + "readyz").status == 200:
                return p, url
        except Exception:
            pass
        time.sleep(0.01)
    raise SystemExit("FAIL: xgrd not ready")


def ok(url, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    r = json.loads(urllib.request.urlopen(urllib.request.Request(url, body, {"Content-Type": "application/json"})).read())
    if "error" in r:
        raise SystemExit("FAIL: %s: %s" % (method, json.dumps(r["error"])))
    return r["result"]


def check(cond, what):
    if not cond:
        raise SystemExit("FAIL: " + what)
    print("ok  ", what)


# pre (waits 1 s) -> bid, whose rule wakes step settle of session [Target] of [Runner]: never enqueued
sc = json.load(open(os.path.join(SRC, "tests", "scenarios", "wakeups_internal_object_form_fromxrc137.json")))
for mode in ("off", "0"):
    d = tempfile.mkdtemp(prefix="xgr-wre-")
    p = None
    try:
        p, url = start(d, mode)
        for k, r in sc["bundle"]["rules"].items():
            ok(url, "xgr_putRule", [{"address": k, "rule": r, "from": OWNER}])
        ok(url, "xgr.putOrchestration", {"xrc729": "wre", "orchestration": sc["bundle"]["orchestration"], "from": OWNER})
        ok(url, "xgr.enqueue", {"owner": OWNER, "rootPid": 1, "xrc729": "wre", "init": {"stepId": "pre",
                                "payload": {"Runner": "0x00000000000000000000000000000000000000b0", "Target": 9}}})
        t0 = time.time()
        while time.time() - t0 < 10:
            v = ok(url, "xgr.getSession", {"owner": OWNER, "rootPid": 1})
            if v.get("wakeUpsRefused"):
                break
            time.sleep(0.02)
        time.sleep(0.3)   # the refusal's own batch has committed by now
        v = ok(url, "xgr.getSession", {"owner": OWNER, "rootPid": 1})
        check(any("no such session" in w["reason"] for w in v.get("wakeUpsRefused") or []),
              "[hibernate-after %s] the wake-up to a missing session is refused" % mode)
        check(v["session"]["status"] == "completed" and not v["session"]["alive"],
              "[hibernate-after %s] the producer ends completed (status %s)" % (mode, v["session"]["status"]))
        p.send_signal(signal.SIGTERM)
        p.wait()
        p, url = start(d, mode)
        v = ok(url, "xgr.getSession", {"owner": OWNER, "rootPid": 1})
        check(v["session"]["status"] == "completed", "[hibernate-after %s] and stays completed after a restart" % mode)
        p.send_signal(signal.SIGTERM)
        p.wait()
    finally:
        if p and p.poll() is None:
            p.kill()
            p.wait()
        shutil.rmtree(d, ignore_errors=True)
print("test_wake_refused_end: all passed")
