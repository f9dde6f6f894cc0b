#!/usr/bin/env python3
"""test_reference.py — xgrd as a client of the public endpoint reference calls it, from the outside.

A real xgrd (--auth none, a temporary SQLite store) on 127.0.0.1. Checked:
  - docs/RPC.md's table "The public endpoint reference, method by method": every row is called on
    xgrd under both names; an "implemented" row must not answer -32601, a "-32601" row must answer
    exactly -32601 with the row's reason in the message. When ../shared is there (XGR_SHARED), the
    table must also list exactly the methods of the reference's endpoint index (skipped otherwise,
    with a line saying so; the rest of the test needs nothing outside the repository);
  - session-level kill, pause and resume answer the pid asked ("R"), a process-level one "R:I";
  - every time of the join view, getSession and the sessions view is in ms; the raw view's
    `updated` is Unix seconds (the reference's shape);
  - validateDataTransfer: `payload` is the sanitized input (defaults applied, no outcome keys),
    `outputPayload` the outcome;
  - a PID-mode wake by someone other than the owner is -32007 (also when the request names no
    owner), a pid nobody has -32004, a wake naming neither processId nor stepId (no permit) -32602.

  test_reference.py XGRD SRC_DIR
"""
import json
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from xgrd_harness import Xgrd, check, fail, wait_for  # noqa: E402

XGRD, SRC = sys.argv[1], sys.argv[2]
DIR = tempfile.mkdtemp(prefix="xgr-reference-")
OWNER = "0x00000000000000000000000000000000000000c1"
OTHER = "0x00000000000000000000000000000000000000c2"
x = Xgrd(XGRD, "sqlite:" + os.path.join(DIR, "s.db"), DIR)
ok = x.ok


def code(method, params):
    """The error code of a call (None when it succeeded) and its message."""
    r = x.rpc(method, params)
    e = r.get("error")
    return (e["code"], e.get("message", "")) if e else (None, "")


def refused(what, want, method, params, path=None):
    """The call must fail with exactly JSON-RPC code `want` (and data.path `path` when given)."""
    r = x.rpc(method, params)
    e = r.get("error")
    if not e or e["code"] != want or (path and e.get("data", {}).get("path") != path):
        fail("%s: expected %d%s, got %s" % (what, want, " at " + path if path else "", json.dumps(r)))
    check(True, "%s: %d %s" % (what, want, e["message"][:90]))


def table():
    """The rows (method, answer, text) of docs/RPC.md's public reference table; backticks dropped."""
    doc = open(os.path.join(SRC, "docs", "RPC.md")).read()
    m = re.search(r"^## The public endpoint reference, method by method\n(.*?)^## ", doc, re.S | re.M)
    if not m:
        fail("docs/RPC.md has no section \"The public endpoint reference, method by method\"")
    rows = re.findall(r"^\| `(xgr_\w+)` \| (implemented|-32601) \| (.+?) \|$", m.group(1), re.M)
    if not rows:
        fail("the public reference table of docs/RPC.md has no rows")
    return [(name, answer, text.replace("`", "")) for name, answer, text in rows]


def reference_methods():
    """The methods of the public reference's endpoint index, or None without ../shared."""
    shared = os.environ.get("XGR_SHARED", os.path.join(SRC, "..", "shared"))
    ref = os.path.join(shared, "specs", "xgr-public", "XDaLa_XGR_Endpoint_Reference.md")
    if not os.path.exists(ref):
        return None
    index = re.search(r"^## 3\. Endpoint Index\n(.*?)^## ", open(ref).read(), re.S | re.M)
    if not index:
        fail("%s: no endpoint index (section 3)" % ref)
    return set(re.findall(r"^\| `(xgr_\w+)` \|", index.group(1), re.M))


def check_table():
    rows = table()
    names = [r[0] for r in rows]
    check(len(names) == len(set(names)), "the table lists each method once (%d rows)" % len(rows))
    ref = reference_methods()
    if ref is None:
        print("skip the table against the reference's endpoint index: ../shared is not there", flush=True)
    else:
        check(set(names) == ref, "the table lists exactly the reference's %d methods (missing %s, extra %s)" %
              (len(ref), sorted(ref - set(names)), sorted(set(names) - ref)))
    for name, answer, text in rows:
        for asked in (name, "xgr." + name[4:]):
            c, msg = code(asked, [{}])
            if answer == "implemented":
                if c == -32601:
                    fail("%s is in the table as implemented but answers -32601: %s" % (asked, msg))
                check(True, "%s is implemented (answers %s)" % (asked, c if c else "a result"))
            else:
                if c != -32601:
                    fail("%s: expected -32601, got %s %s" % (asked, c, msg))
                if text not in msg:
                    fail("%s: the message %r does not give the table's reason %r" % (asked, msg, text))
                check(True, "%s: -32601 with the table's reason" % asked)


try:
    x.start()
    check_table()
    gate = json.load(open(os.path.join(SRC, "tests", "daemon", "gate.json")))
    x.deploy(gate, "gate", **{"from": OWNER})
    t0 = time.time()

    # ---- validateDataTransfer: payload is the sanitized input, outputPayload the outcome ----
    v = ok("xgr_validateDataTransfer", [{"from": OWNER, "orchestration": "gate", "stepId": "A",
                                         "payload": {"n": "4", "extra": 5}}])
    check(v["payload"] == {"n": 4, "extra": 5}, "validateDataTransfer payload: the input, cast, no outcome (%s)" %
          json.dumps(v["payload"]))
    check(v["outputPayload"] == {"n": 5}, "validateDataTransfer outputPayload: the outcome (%s)" %
          json.dumps(v["outputPayload"]))
    first = int(v["sessionId"])   # its W waits: killed at the end
    v = ok("xgr_validateDataTransfer", [{"from": OWNER, "orchestration": "gate", "stepId": "A"}])
    check(v["payload"] == {"n": 0} and v["outputPayload"] == {"n": 1},
          "validateDataTransfer without a payload: the default in payload, the outcome apart (%s, %s)" %
          (json.dumps(v["payload"]), json.dumps(v["outputPayload"])))
    root = int(v["sessionId"])   # A ran; W waits for a wake-up

    # ---- session-level control answers the pid asked ----
    wait_for("W waits", lambda: any(p["status"] == "waiting" for p in
                                    ok("xgr.getSession", {"owner": OWNER, "rootPid": root})["processes"]))
    for method in ("xgr.pause", "xgr.resume"):
        r = ok(method, {"owner": OWNER, "pid": str(root)})
        check(r["pid"] == str(root), "%s of session %d answers pid %s" % (method, root, json.dumps(r["pid"])))
        r = ok(method, {"owner": OWNER, "rootPid": root})
        check(r["pid"] == str(root), "%s by rootPid answers pid %s" % (method, json.dumps(r["pid"])))
    r = ok("xgr.pause", {"owner": OWNER, "pid": "%d:2" % root})
    check(r["pid"] == "%d:2" % root, "xgr.pause of one process answers %s" % json.dumps(r["pid"]))
    ok("xgr.resume", {"owner": OWNER, "pid": "%d:2" % root})

    # ---- times: ms everywhere, the raw view's `updated` in seconds ----
    now_ms = time.time() * 1000
    s = ok("xgr.getSession", {"owner": OWNER, "rootPid": root})
    times = [("session.createdAt", s["session"]["createdAt"])]
    times += [("processes[%s].updatedAt" % p["pid"], p["updatedAt"]) for p in s["processes"]]
    times += [("processes[%s].nextWakeAt" % p["pid"], p["nextWakeAt"]) for p in s["processes"] if p.get("nextWakeAt")]
    times += [("history[%d].at" % i, h["at"]) for i, h in enumerate(s["history"])]
    times += [("history[%d].finishedAt" % i, h["finishedAt"]) for i, h in enumerate(s["history"])]
    items = ok("xgr.listSessions", {"owner": OWNER})["items"]
    times += [("listSessions items[%s].updatedAt" % it["pid"], it["updatedAt"]) for it in items]
    rows = ok("xgr.listSessions", {"owner": OWNER, "view": "sessions"})["sessions"]
    times += [("sessions[%s].createdAt" % r["rootPid"], r["createdAt"]) for r in rows]
    for what, t in times:
        # waitSec 3600 puts A's next wake an hour ahead; everything else happened in this test
        if not (t0 * 1000 - 60000 <= t <= now_ms + 3700 * 1000):
            fail("%s is %s, not a time in ms near %d" % (what, t, now_ms))
    check(True, "%d times of getSession and listSessions are in ms" % len(times))
    raw = ok("xgr_listSessions", {"owner": OWNER})["sessions"]
    check(raw and all(t0 - 60 <= r["updated"] <= time.time() + 60 for r in raw),
          "the raw view's updated is Unix seconds, as the reference defines it")

    # ---- PID-mode wakes: the owner only ----
    pid = "%d:2" % root
    refused("PID wake by another caller", -32007, "xgr_wakeUpProcess", [{"from": OTHER, "processId": pid}], "processId")
    refused("PID wake by another caller naming the owner", -32007, "xgr_wakeUpProcess",
            [{"from": OTHER, "owner": OWNER, "processId": pid}])
    refused("PID wake of a session nobody has", -32004, "xgr_wakeUpProcess", [{"from": OTHER, "processId": "999:2"}])
    refused("wake with neither processId nor stepId", -32602, "xgr_wakeUpProcess", [{"from": OWNER, "payload": {}}],
            "processId")
    r = ok("xgr_wakeUpProcess", [{"from": OWNER, "processId": pid, "payload": {"n": 7}}])
    check(r["mode"] == "pid" and r["woken"] == 1, "the owner wakes %s by pid" % pid)

    # ---- kill: the session-level answer again ----
    r = ok("xgr.kill", {"owner": OWNER, "pid": str(first)})
    check(r["pid"] == str(first), "xgr.kill of session %d answers pid %s" % (first, json.dumps(r["pid"])))
    print("test_reference: ok")
finally:
    x.kill()
    shutil.rmtree(DIR, ignore_errors=True)
