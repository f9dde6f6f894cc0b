#!/usr/bin/env python3
"""bench_migrate.py XGRD XGR [N] — `xgr migrate-check` over N (default 1,000) live sessions of the
shipped examples (issue 36; the goal: under 10 s on the project's 2-core machine).

An xgrd (--auth none) on a fresh SQLite store in a temporary directory runs N sessions of
examples/bundles/kyc_onboarding.json (each waits an hour at `ship`; the other shipped examples end
within a moment or wait on APIs), every one with its own payload, so no two sessions have the same state and the check's cache of equal states does
not help: every session costs its own pair of explorations. xgrd is stopped, and `xgr migrate-check
OLD NEW --store FILE --hash H` is timed for each example (OLD = NEW = the example: the full work of a
check, both explorations complete). Prints sessions, explorations and seconds per example and in
total."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.realpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.dont_write_bytecode = True
from xgrd_harness import Xgrd, wait_for  # noqa: E402

XGRD, XGR = sys.argv[1], sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
A = "0x00000000000000000000000000000000000000a1"
EXAMPLES = [("kyc_onboarding", "order", "ship")]


def main():
    d = tempfile.mkdtemp(prefix="xgr-bench-migrate-")
    db = os.path.join(d, "bench.db")
    x = Xgrd(XGRD, "sqlite:" + db, d)
    hashes = {}
    try:
        x.start()
        root = 0
        for name, start, wait in EXAMPLES:
            b = json.load(open(os.path.join(ROOT, "examples", "bundles", name + ".json")))
            x.deploy(b, name, **{"from": A})
            calls = []
            for i in range(N // len(EXAMPLES)):
                root += 1
                calls.append(("xgr.enqueue", {"owner": A, "xrc729": name, "rootPid": str(root),
                                              "init": {"stepId": start, "payload": {"Customer": "c%d" % root, "Tag": root}}}))
                if len(calls) == 100:
                    x.ok_batch(calls, timeout=120)
                    calls = []
            if calls:
                x.ok_batch(calls, timeout=120)
            hashes[name] = x.ok("xgr.getSession", {"owner": A, "rootPid": str(root)})["session"]["bundleHash"]
            last = root
            wait_for("%s sessions wait at %s" % (name, wait), lambda: any(
                p.get("resumeStep") == wait and p["status"] == "waiting"
                for p in x.ok("xgr.getSession", {"owner": A, "rootPid": str(last)})["processes"]), secs=120, every=0.2)
        time.sleep(1)   # the last batches committed
    finally:
        x.stop()
    total_t, total_n = 0.0, 0
    for name, _, _ in EXAMPLES:
        f = os.path.join(ROOT, "examples", "bundles", name + ".json")
        t0 = time.time()
        r = subprocess.run([XGR, "migrate-check", f, f, "--store", "sqlite:" + db, "--hash", hashes[name], "--json"],
                           capture_output=True, text=True)
        t = time.time() - t0
        j = json.loads(r.stdout)
        total_t += t
        total_n += j["checked"]
        print("migrate-check %-15s %4d live sessions, %4d explored, %d safe, %d unsafe: %.2f s" % (
            name, j["checked"], j["explored"], j["safe"], j["unsafe"], t))
    print("migrate-check: %d live sessions of the shipped examples in %.2f s (goal: under 10 s)" % (total_n, total_t))
    shutil.rmtree(d, ignore_errors=True)


main()
