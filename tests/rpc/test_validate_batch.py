#!/usr/bin/env python3
"""test_validate_batch.py — batched xgr_validateDataTransfer calls hold no HTTP thread (issue 38, finding 4).

A real xgrd (--auth none, a temporary SQLite store, 8 HTTP threads, --first-step-timeout 20000,
--max-validates-per-client 100) on 127.0.0.1 and a rule whose API is a server on 127.0.0.1 that
accepts connections and never answers, so no first step ends before the timeout. 9 batches of 20
validates are sent at once from one client address (before the fix each validate of a batch waited
on its HTTP thread, one after the other: 9 batches blocked all 8 threads for minutes). Checked:
  - while the 100 admitted validates wait, a plain xgr_getCoreAddrs and an xgr.getSession answer
    (each must answer within 5 s; the validates' timeout is 20 s: a functional check with a
    4x margin, not a latency measurement) and the waiting batches are still unanswered;
  - the per-client cap refuses exactly the 80 over it with -32005 naming --max-validates-per-client
    and its value; xgr_validates_refused_total counts them;
  - every admitted validate is answered after the timeout ("status":"running", no first step),
    and xgr_validates_in_flight is back to 0.

EXTRA_ARGS holds the flags this xgrd needs besides: the outbound address policy denies loopback by
default (docs/SECURITY.md), so the never-answering API on 127.0.0.1 is allowed explicitly.

  test_validate_batch.py XGRD
"""
import json
import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from xgrd_harness import Hang, Xgrd, check, fail, wait_for  # noqa: E402

XGRD = sys.argv[1]
EXTRA_ARGS = ["--allow-outbound", "127.0.0.1/32"]   # the never-answering API is on loopback, denied by default
CAP, BATCHES, PER_BATCH, TIMEOUT_MS = 100, 9, 20, 20000
OWNER = "0x00000000000000000000000000000000000000e1"
DIR = tempfile.mkdtemp(prefix="xgr-validate-batch-")


hang = Hang()
x = Xgrd(XGRD, "sqlite:" + os.path.join(DIR, "s.db"), DIR,
         ["--threads", "8", "--first-step-timeout", str(TIMEOUT_MS), "--max-validates-per-client", str(CAP)] + EXTRA_ARGS)
bundle = {"orchestration": {"id": "hang", "structure": {"S": {"rule": "0x00000000000000000000000000000000000000b7"}}},
          "rules": {"0x00000000000000000000000000000000000000b7": {
              "payload": {"n": {"type": "int64", "default": 0}},
              "apiCalls": [{"name": "never", "method": "GET", "timeoutMs": 120000,
                            "urlTemplate": "http://127.0.0.1:%d/never" % hang.port,
                            "extractMap": {"v": {"type": "int64", "expr": "resp.v", "default": 0}}}],
              "rules": ["[n] >= 0"], "onValid": {}, "onInvalid": {}}}}
answers = [None] * BATCHES


def send(b):
    body = [{"jsonrpc": "2.0", "id": i, "method": "xgr_validateDataTransfer",
             "params": [{"from": OWNER, "orchestration": "hang", "stepId": "S", "sessionId": str(b * PER_BATCH + i + 1)}]}
            for i in range(PER_BATCH)]
    try:
        answers[b] = x.call(body, timeout=TIMEOUT_MS / 1000 + 40)
    except Exception as e:  # reported below as a missing answer
        answers[b] = {"exception": repr(e)}


try:
    x.start()
    x.deploy(bundle, "hang", **{"from": OWNER})
    t0 = time.time()
    threads = [threading.Thread(target=send, args=(b,)) for b in range(BATCHES)]
    for t in threads:
        t.start()
    wait_for("%d validates in flight" % CAP, lambda: x.metric(None, "xgr_validates_in_flight") == CAP,
             secs=TIMEOUT_MS / 1000 / 2)
    # the probes: while every admitted validate waits for its first step
    for method, params in (("xgr_getCoreAddrs", {}), ("xgr.getSession", {"owner": OWNER, "rootPid": "1"})):
        try:
            r = x.rpc(method, params, timeout=5)
        except Exception as e:
            fail("%s did not answer within 5 s while %d validates wait: %r" % (method, CAP, e))
        check("result" in r or "error" in r, "%s answers while %d batched validates wait (%s)" %
              (method, CAP, json.dumps(r)[:80]))
    waiting = sum(1 for a in answers if a is None)
    check(time.time() - t0 < TIMEOUT_MS / 1000, "the probes answered before the validates' timeout (%.1f s)" %
          (time.time() - t0))
    check(waiting >= CAP // PER_BATCH, "the batches holding admitted validates are still waiting (%d of %d)" %
          (waiting, BATCHES))
    for t in threads:
        t.join()
    ok, refused = 0, 0
    for b, ans in enumerate(answers):
        if not isinstance(ans, list) or len(ans) != PER_BATCH:
            fail("batch %d: expected %d answers, got %s" % (b, PER_BATCH, json.dumps(ans)[:300]))
        for a in ans:
            if "error" in a:
                e = a["error"]
                if e["code"] != -32005 or "--max-validates-per-client is %d" % CAP not in e["message"]:
                    fail("batch %d: a refusal other than the per-client cap: %s" % (b, json.dumps(e)))
                refused += 1
            else:
                if a["result"]["status"] != "running" or a["result"]["executedSteps"]:
                    fail("batch %d: a validate whose first step cannot end answered %s" % (b, json.dumps(a)[:300]))
                ok += 1
    check(ok == CAP and refused == BATCHES * PER_BATCH - CAP,
          "%d validates admitted and answered after the timeout, %d refused with -32005 naming the cap" % (ok, refused))
    print("     the refusal: %s" % next(a["error"]["message"] for ans in answers for a in ans if "error" in a))
    check(x.metric(None, "xgr_validates_refused_total") == refused, "xgr_validates_refused_total counts them")
    check(x.metric(None, "xgr_validates_in_flight") == 0, "xgr_validates_in_flight is back to 0")
    print("PASS")
finally:
    hang.close()   # the API calls fail at once, so the steps end and xgrd stops promptly
    if x.proc:
        x.stop(timeout=20)
    shutil.rmtree(DIR, ignore_errors=True)
