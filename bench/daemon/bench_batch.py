#!/usr/bin/env python3
"""bench_batch.py — a batch kill of many hibernated sessions, and its effect on live traffic (issue 35).

One xgrd (`--auth none`, SQLite store on /dev/shm when there is one, `--hibernate-after 200`, the
default `--batch-rate` unless BATCH_RATE is set) with N sessions of owner 0x…a1, each waiting an
hour at a step (so they hibernate: they are rows of the store, not actors in memory). Then:

  1. baseline: a steady enqueue load of owner 0x…c1 (RATE single-step sessions a second, each
     xgr.enqueue waits for its commit) for SECS seconds: the median, p90 and p99 of its latency;
  2. the batch: xgr.batchStart kills all N sessions of 0x…a1 while the same load runs; its latency
     percentiles under the batch, the ratios to the baseline (the issue's goal: p99 within 2x), and
     the operation's own duration (finishedAt - startedAt) and rate;
  3. with --sigkill: xgrd is SIGKILLed when the operation is about half done and started again; the
     operation must finish by itself, and every one of the N sessions must be killed with exactly
     one audit entry naming the operation (none skipped, none twice) — checked session by session.

  bench_batch.py XGRD [N] [--sigkill]     (default N = 10000; RATE=50 SECS=10 BATCH_RATE=)

Prints one block of results; exits 1 when a check of step 3 fails.
"""
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "lib"))
sys.dont_write_bytecode = True
from xgrd_harness import Xgrd, fail, wait_for  # noqa: E402

XGRD = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 10000
SIGKILL = "--sigkill" in sys.argv
RATE = float(os.environ.get("RATE", "50"))
SECS = float(os.environ.get("SECS", "10"))
BATCH_RATE = os.environ.get("BATCH_RATE")
A = "0x00000000000000000000000000000000000000a1"   # the sessions the batch kills
C = "0x00000000000000000000000000000000000000c1"   # the live traffic
DIR = tempfile.mkdtemp(prefix="xgr-bench-batch-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
# main waits an hour before it spawns settle; one is the load's single step
BUNDLE = {"orchestration": {"id": "bb", "structure": {"main": {"rule": "rwait", "onValid": {"spawns": ["settle"]}},
                                                      "settle": {"rule": "rone"}, "one": {"rule": "rone"}}},
          "rules": {"rwait": {"payload": {}, "rules": [], "onValid": {"waitSec": 3600}, "onInvalid": {}},
                    "rone": {"payload": {}, "rules": [], "onValid": {}, "onInvalid": {}}}}


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))] if xs else float("nan")


class Load:
    """RATE enqueues a second of single-step sessions of C, each timed, from one thread (open loop:
    a late answer does not delay the schedule of the next ones beyond one in flight)."""

    def __init__(self, x, first_root):
        self.x, self.root, self.lat, self.errors, self.stop = x, first_root, [], 0, threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self):
        nxt = time.monotonic()
        while not self.stop.is_set():
            nxt += 1.0 / RATE
            t0 = time.monotonic()
            try:
                r = self.x.rpc("xgr.enqueue", {"owner": C, "xrc729": "bb", "registryOwner": A, "rootPid": str(self.root),
                                               "init": {"stepId": "one"}}, timeout=30)
                if "error" in r:
                    self.errors += 1
                else:
                    self.lat.append(time.monotonic() - t0)
            except Exception:
                self.errors += 1
            self.root += 1
            d = nxt - time.monotonic()
            if d > 0:
                time.sleep(d)

    def run_for(self, secs):
        self.t.start()
        time.sleep(secs)
        self.stop.set()
        self.t.join()
        return self


def summary(lat):
    return {"n": len(lat), "p50_ms": 1000 * pct(lat, 50), "p90_ms": 1000 * pct(lat, 90), "p99_ms": 1000 * pct(lat, 99)}


def op_of(x, bid):
    return x.ok("xgr.batchGet", {"from": A, "id": bid})


def main():
    args = ["--hibernate-after", "200", "--sync", "full"]
    if BATCH_RATE:
        args += ["--batch-rate", BATCH_RATE]
    x = Xgrd(XGRD, "sqlite:" + os.path.join(DIR, "b.db"), DIR, args, name="bench")
    try:
        x.start()
        x.deploy(BUNDLE, "bb", **{"from": A})
        t0 = time.time()
        for i in range(0, N, 500):
            x.ok_batch([("xgr.enqueue", {"owner": A, "xrc729": "bb", "rootPid": str(r), "init": {"stepId": "main"}})
                        for r in range(i + 1, min(N, i + 500) + 1)], timeout=120)
        print("started %d waiting sessions in %.1f s" % (N, time.time() - t0))
        time.sleep(1.5)   # they hibernate (--hibernate-after 200)
        base = Load(x, 1).run_for(SECS)
        b = summary(base.lat)
        print("baseline enqueue latency (%g/s for %g s): p50 %.1f ms  p90 %.1f ms  p99 %.1f ms  (%d errors)" %
              (RATE, SECS, b["p50_ms"], b["p90_ms"], b["p99_ms"], base.errors))
        n = x.ok("xgr.batchPreview", {"selection": {"owner": A}})["count"]
        if n != N:
            fail("the dry run counts %d sessions, not %d" % (n, N))
        load = Load(x, 10 ** 6)
        load.t.start()
        r = x.ok("xgr.batchStart", {"selection": {"owner": A}, "action": "kill"})
        bid = r["id"]
        killed_midway = False
        while True:
            op = op_of(x, bid)
            if op["state"] != "running":
                break
            if SIGKILL and not killed_midway and op["done"] >= N // 2:
                load.stop.set()
                load.t.join()
                x.stop(signal.SIGKILL)
                x.start()
                killed_midway = True
                print("SIGKILLed xgrd at %d/%d done; restarted" % (op["done"], N))
                load = Load(x, 2 * 10 ** 6)
                load.t.start()
            time.sleep(0.5)
        load.stop.set()
        load.t.join()
        u = summary(load.lat)
        span = (op["finishedAt"] - op["startedAt"]) / 1000.0
        print("batch kill of %d hibernated sessions: state %s, done %d, failed %d, skipped %d, %.1f s (%.0f sessions/s)" %
              (N, op["state"], op["done"], op["failed"], op["skipped"], span, op["done"] / span if span else 0))
        print("enqueue latency during the batch: p50 %.1f ms  p90 %.1f ms  p99 %.1f ms  (%d errors); "
              "p99 ratio to baseline %.2f (goal <= 2)" % (u["p50_ms"], u["p90_ms"], u["p99_ms"], load.errors,
                                                          u["p99_ms"] / b["p99_ms"] if b["p99_ms"] else float("nan")))
        bad = 0
        if SIGKILL or op["done"] != N:
            for root in range(1, N + 1):
                s = x.ok("xgr.getSession", {"owner": A, "rootPid": str(root)})
                kills = [e for e in s["audit"] if e["kind"] == "kill" and (e.get("detail") or {}).get("batch") == bid]
                if s["session"]["status"] != "killed" or len(kills) != 1:
                    bad += 1
            print("sessions checked one by one: %d of %d killed exactly once by the operation" % (N - bad, N))
        if op["state"] != "done" or op["done"] != N or bad:
            fail("the batch did not kill every session exactly once")
    finally:
        x.kill()
        shutil.rmtree(DIR, ignore_errors=True)


main()
