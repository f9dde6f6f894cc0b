#!/usr/bin/env python3
"""test_quota.py — one small request cannot fill the disk (issue 38, finding 3).

A real xgrd (--auth none, a temporary SQLite store) with small quotas: --max-session-bytes 200000
and --max-owner-bytes 1000000. A 3 KB payload enqueued into a two-level 32-way fan-out (1 + 32 +
1,024 processes, each carrying the payload; without a quota some 10 MB of rows) by owner A.
Checked:
  - the session ends "killed"; its aborted processes carry "session aborted: stored bytes N exceed
    the quota of 200000 per session"; its storedBytes (xgr.getSession) stays below the quota plus
    the abort's own small rows, and so does the store file; the metrics count it
    (xgr_engine_events_total{kind="sessions_over_quota"}, xgr_quota_refusals_total{what="batch"});
  - owner B's session, started next to it, completes with its payloads stored;
  - owner A's further fan-outs end the same way until A's stored bytes reach --max-owner-bytes: then
    a new xgr.enqueue and a new xgr_validateDataTransfer of A are refused with -32005 naming the quota
    and its value, data.path "from" (xgr_quota_refusals_total{what="start"}); B still starts;
  - after a restart of xgrd the counts are the same: storedBytes unchanged; A's next fan-out is
    aborted by the owner quota at its first large write, and A's next enqueue is refused;
  - a store written before the quotas (its sessions table without stored_bytes, made so by SQL)
    opens, migrates and counts from 0.
Before the quotas xgrd did not know --max-session-bytes (and the fan-out stored all of it).

  test_quota.py XGRD
"""
import json
import os
import shutil
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from xgrd_harness import Xgrd, check, fail, until  # noqa: E402

XGRD = sys.argv[1]
SESSION_Q, OWNER_Q = 200000, 1000000
A = "0x00000000000000000000000000000000000000a1"
B = "0x00000000000000000000000000000000000000b1"
DIR = tempfile.mkdtemp(prefix="xgr-quota-")
DB = os.path.join(DIR, "s.db")
RULE = "0x00000000000000000000000000000000000000f3"
# every step passes its payload on; A spawns 32 B, each B spawns 32 C
bundle = {"orchestration": {"id": "fan32", "structure": {
              "A": {"rule": RULE, "onValid": {"spawns": ["B"] * 32}},
              "B": {"rule": RULE, "onValid": {"spawns": ["C"] * 32}},
              "C": {"rule": RULE}}},
          "rules": {RULE: {"payload": {"D": {"type": "string", "default": ""}},
                           "rules": ["true"], "onValid": {"payload": {"D": "[D]"}}, "onInvalid": {}}}}
PAYLOAD = {"D": "x" * 3000}
ABORT_BOUND = 1057 * 400   # the abort's rows: status, times, the reason; no payload


def session(x, owner, root):
    return x.ok("xgr.getSession", {"owner": owner, "rootPid": str(root)})


def wait_ended(x, owner, root):
    if not until(lambda: session(x, owner, root)["session"]["status"] != "running", 20):
        fail("session %s/%d still running: %s" % (owner, root, json.dumps(session(x, owner, root)["session"])))
    return session(x, owner, root)


def errors(s):
    return {p.get("error") for p in s["processes"] if p.get("error")}


def store_size():
    return sum(os.path.getsize(DB + ext) for ext in ("", "-wal") if os.path.exists(DB + ext))


def enqueue(x, owner, root):
    return x.rpc("xgr.enqueue", {"owner": owner, "xrc729": "fan32", "rootPid": str(root), "init": {"payload": PAYLOAD}})


def refused(r, what):
    e = r.get("error") or {}
    if e.get("code") != -32005 or (e.get("data") or {}).get("path") != "from" or what not in e.get("message", ""):
        fail("expected -32005 at \"from\" naming %r, got %s" % (what, json.dumps(r)[:400]))
    return e["message"]


x = Xgrd(XGRD, "sqlite:" + DB, DIR, ["--max-session-bytes", str(SESSION_Q), "--max-owner-bytes", str(OWNER_Q)])
try:
    x.start()
    x.deploy(bundle, "fan32", **{"from": A})
    x.deploy(bundle, "fan32", **{"from": B})   # each owner runs its own registry's documents (docs/SEMANTICS.md)
    # B's small session: a single C step with a 3 KB payload, next to A's fan-out
    x.ok("xgr.enqueue", {"owner": A, "xrc729": "fan32", "rootPid": "1", "init": {"payload": PAYLOAD}})
    x.ok("xgr.enqueue", {"owner": B, "xrc729": "fan32", "rootPid": "1", "init": {"stepId": "C", "payload": PAYLOAD}})
    s = wait_ended(x, A, 1)
    check(s["session"]["status"] == "killed", "A's fan-out session ends killed (%s)" % s["session"]["status"])
    errs = errors(s)
    want = "exceed the quota of %d per session" % SESSION_Q
    check(any(e.startswith("session aborted: stored bytes ") and want in e for e in errs),
          "its processes carry the quota's reason: %s" % sorted(errs)[:2])
    stored = s["session"]["storedBytes"]
    check(stored <= SESSION_Q + ABORT_BOUND, "its storedBytes %d stay below the quota + the abort's rows" % stored)
    check(len(s["processes"]) < 1057, "it did not make all 1,057 processes (%d)" % len(s["processes"]))
    size = store_size()
    check(size < 4 << 20, "the store file stays small: %d bytes (the fan-out's rows are some 10 MB)" % size)
    check(x.metric("sessions_over_quota") >= 1, "xgr_engine_events_total{kind=\"sessions_over_quota\"} counts it")
    check(x.metric(None, 'xgr_quota_refusals_total{what="batch"}') >= 1, "xgr_quota_refusals_total{what=\"batch\"}")
    sb = wait_ended(x, B, 1)
    check(sb["session"]["status"] == "completed" and not errors(sb), "B's session completes untouched")
    check(PAYLOAD["D"] in json.dumps(sb), "B's payload is stored: %s" % json.dumps(sb)[:300])

    # A's further fan-outs until A's stored bytes reach the owner quota; then A starts nothing
    reasons, root, msg = set(), 2, None
    while root < 12:
        r = enqueue(x, A, root)
        if "error" in r:
            msg = refused(r, "the quota --max-owner-bytes is %d" % OWNER_Q)
            break
        s = wait_ended(x, A, root)
        check(s["session"]["status"] == "killed", "A's fan-out %d ends killed" % root)
        reasons |= {e.split(" exceed ")[1] for e in errors(s) if e.startswith("session aborted:")}
        root += 1
    if msg is None:
        fail("A's enqueues were never refused for --max-owner-bytes")
    print("     the reasons: %s" % sorted(reasons))
    print("     the refusal: %s" % msg)
    v = x.rpc("xgr_validateDataTransfer", [{"from": A, "orchestration": "fan32", "stepId": "C", "sessionId": "99",
                                            "payload": PAYLOAD}])
    refused(v, "--max-owner-bytes")
    check(x.metric(None, 'xgr_quota_refusals_total{what="start"}') == 2, "xgr_quota_refusals_total{what=\"start\"} is 2")
    x.ok("xgr.enqueue", {"owner": B, "xrc729": "fan32", "rootPid": "2", "init": {"stepId": "C", "payload": PAYLOAD}})
    check(wait_ended(x, B, 2)["session"]["status"] == "completed", "B still starts and completes")

    # the counts survive a restart
    before = session(x, A, 1)["session"]["storedBytes"]
    check(x.stop() == 0, "xgrd stops")
    x.start()
    check(session(x, A, 1)["session"]["storedBytes"] == before, "A's session 1 has %d stored bytes after a restart" % before)
    # A's count is back from the store: its next fan-out is stopped by the owner quota at its first
    # large write (not by the session quota, as it would be from 0), and then A starts nothing
    x.ok("xgr.enqueue", {"owner": A, "xrc729": "fan32", "rootPid": "50", "init": {"payload": PAYLOAD}})
    s = wait_ended(x, A, 50)
    check(s["session"]["status"] == "killed" and any("per owner" in e for e in errors(s)),
          "after the restart A's next fan-out is aborted by the owner quota: %s" % sorted(errors(s)))
    refused(enqueue(x, A, 51), "the quota --max-owner-bytes is %d" % OWNER_Q)
    check(x.stop() == 0, "xgrd stops")

    # a store from before the quotas: schema version 12, without stored_bytes (13), bundle_hash (14)
    # the audit trail (15), forks (17) and grants (18)
    db = sqlite3.connect(DB)
    db.execute("ALTER TABLE sessions DROP COLUMN stored_bytes")
    db.execute("ALTER TABLE sessions DROP COLUMN bundle_hash")
    db.execute("DROP TABLE session_audit")
    db.execute("ALTER TABLE sessions DROP COLUMN forked_from")   # (17: forks)
    db.execute("DROP TABLE session_grants")
    db.execute("DELETE FROM schema_version WHERE version >= 13")
    db.commit()
    db.close()
    x.start()
    ver = sqlite3.connect(DB).execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
    check(ver == 18, "the old store was migrated to the current schema version, 18 (%s)" % ver)
    check(session(x, A, 1)["session"]["storedBytes"] == 0, "its sessions count from 0")
    x.ok("xgr.enqueue", {"owner": A, "xrc729": "fan32", "rootPid": "60", "init": {"stepId": "C", "payload": PAYLOAD}})
    s = wait_ended(x, A, 60)
    check(s["session"]["status"] == "completed" and s["session"]["storedBytes"] > 3000,
          "A starts again and its new session counts (%d)" % s["session"]["storedBytes"])
    print("PASS")
finally:
    x.kill()
    shutil.rmtree(DIR, ignore_errors=True)
