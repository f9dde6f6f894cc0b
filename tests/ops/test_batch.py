#!/usr/bin/env python3
"""test_batch.py — actions on many sessions (issue 35): xgr.batchPreview / batchStart / batchGet /
batchCancel / batchList on a real xgrd (--auth none) with a temporary SQLite store, or with `pg` on
a schema of the throwaway PostgreSQL that tests/pg/pg_cluster.sh names in XGR_PG_URL. Checked:
  - each selection filter alone (owner, registry, ostcId, hash, status, step, createdFrom/To,
    rootFrom/To) counts what it should, and bad filters are refused naming selection.<key>;
  - a non-owner cannot select (preview or start) another owner's sessions, nor leave the owner out:
    -32007 at selection.owner, and nothing changes;
  - the dry run's count is what the operation acts on: a batch kill, pause, resume and step-mode
    wake (with a payload) act on exactly the previewed sessions, one audit entry each naming the
    operation (detail.batch) with the caller as actor (auth-none);
  - the rate limit: --batch-rate R over N sessions takes at least (N - 1) / R seconds by the
    operation's own recorded start and end times (no timing assert on the test's side);
  - cancel: the operation ends cancelled and acts on nothing after (its count stops, and exactly
    that many sessions were killed);
  - durability: xgrd SIGKILLed while an operation runs goes on after a restart from its cursor, and
    every selected session is acted on exactly once (one audit entry each, none twice);
  - `xgr batch preview|start|status|list|cancel` (--json) drive the same methods;
  - bounds and retention (--batch-retention 3): a caller has at most 16 operations running (a 17th
    start is -32005 and writes nothing; another caller is not held back); a finished operation is
    gone once it ended more than the retention ago, while one running longer than that and one
    finished just now stay;
  - --auth permits: an XDaLa permit's signer is the caller; another signer is refused (-32007 at
    selection.owner, nothing written), a start's permit works once, the audit entries name the
    signer, and `xgr batch --key` signs its permit;
  - (pg) two nodes on one store: an operation started on one is driven by one node at a time and
    acts on the sessions both hold, each once; when the driving node is SIGKILLed the other takes
    the operation over after its claim runs out and finishes it, every session acted on once.

  test_batch.py XGRD XGR [sqlite|pg]
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from xgrd_harness import Xgrd, check, fail, pg_schema_url, psql, wait_for  # noqa: E402

XGRD, XGR = sys.argv[1], sys.argv[2]
MODE = sys.argv[3] if len(sys.argv) > 3 else "sqlite"
DIR = tempfile.mkdtemp(prefix="xgr-batch-")
A = "0x00000000000000000000000000000000000000a1"
B = "0x00000000000000000000000000000000000000b2"
# main spawns settle, which waits an hour (or for a wake-up at settle)
BUNDLE = {"orchestration": {"id": "bat", "structure": {
              "main": {"rule": "rmain", "onValid": {"spawns": ["settle"]}},
              "settle": {"rule": "rsettle"}}},
          "rules": {"rmain": {"payload": {}, "rules": [], "onValid": {"waitSec": 3600}, "onInvalid": {}},
                    "rsettle": {"payload": {}, "rules": [], "onValid": {}, "onInvalid": {}}}}


def store_url(name):
    if MODE == "pg":
        psql(os.environ["XGR_PG_URL"], "CREATE SCHEMA IF NOT EXISTS batch_" + name)
        return pg_schema_url(os.environ["XGR_PG_URL"], "batch_" + name)
    return "sqlite:" + os.path.join(DIR, name + ".db")


def start_many(x, owner, roots):
    calls = [("xgr.enqueue", {"owner": owner, "xrc729": "bat", "registryOwner": A, "rootPid": str(r),
                              "init": {"stepId": "main"}}) for r in roots]
    res = []
    for i in range(0, len(calls), 200):
        res += x.ok_batch(calls[i:i + 200], timeout=60)
    return res


def sess(x, owner, root):
    return x.ok("xgr.getSession", {"owner": owner, "rootPid": str(root)})


def waiting(x, owner, roots):
    for r in roots:
        wait_for("%s/%d waits at settle" % (owner, r),
                 lambda: any(p.get("resumeStep") == "settle" and p["status"] == "waiting"
                             for p in sess(x, owner, r)["processes"]), secs=20)


def count(x, sel, **extra):
    return x.ok("xgr.batchPreview", dict(extra, selection=sel))["count"]


def refused(x, method, params, code, path, what):
    r = x.rpc(method, params)
    e = r.get("error") or {}
    if e.get("code") != code or (path and path not in json.dumps(e)):
        fail("%s: expected %d at %s, got %s" % (what, code, path, json.dumps(r)[:400]))
    check(True, "%s is refused (%d at %s)" % (what, code, path))


def finish(x, bid, secs=30):
    out = {}

    def ended():
        out["op"] = x.ok("xgr.batchGet", {"id": bid, "from": A})
        return out["op"]["state"] != "running"
    wait_for("batch %s ends" % bid, ended, secs=secs)
    return out["op"]


def batch_audits(x, owner, root, bid):
    return [e for e in sess(x, owner, root)["audit"] if (e.get("detail") or {}).get("batch") == bid]


def filters_and_actions():
    x = Xgrd(XGRD, store_url("main"), DIR, ["--batch-rate", "1000"], name="main")
    try:
        x.start()
        x.deploy(BUNDLE, "bat", **{"from": A})
        t0 = int(time.time() * 1000) - 1
        acks = start_many(x, A, range(1, 9))
        start_many(x, B, [1, 2])
        waiting(x, A, range(1, 9))
        waiting(x, B, [1, 2])
        x.ok("xgr.pause", {"owner": A, "pid": "2"})
        row = sess(x, A, 1)["session"]
        bundle_hash = acks[0].get("bundleHash") or row.get("bundleHash")
        ostc_hash = row.get("ostcHash")
        # ---- every filter alone
        check(count(x, {"owner": A}) == 8, "owner: 8 live sessions of A")
        check(count(x, {"owner": B}) == 2, "owner: 2 of B")
        check(count(x, {"owner": A, "rootFrom": 3, "rootTo": "5"}) == 3, "rootFrom/rootTo: 3..5")
        check(count(x, {"owner": A, "status": "paused"}) == 1, "status paused: 1")
        check(count(x, {"owner": A, "status": ["waiting"]}) == 7, "status waiting: 7")
        check(count(x, {"owner": A, "status": ["running"]}) == 0, "status running: none runs a step now")
        check(count(x, {"owner": A, "step": "settle"}) == 8, "step settle: 8")
        check(count(x, {"owner": A, "step": "main"}) == 0, "step main: nobody waits there")
        check(count(x, {"owner": A, "registry": row["registry"]}) == 8, "registry %s: 8" % row["registry"])
        check(count(x, {"owner": A, "registry": "elsewhere"}) == 0, "another registry: 0")
        if row.get("ostcId"):
            check(count(x, {"owner": A, "ostcId": row["ostcId"]}) == 8, "ostcId: 8")
        check(count(x, {"owner": A, "hash": bundle_hash}) == 8, "bundle hash: 8")
        if ostc_hash:
            check(count(x, {"owner": A, "hash": ostc_hash}) == 8, "orchestration hash: 8")
        check(count(x, {"owner": A, "hash": "0x" + "ab" * 32}) == 0, "another hash: 0")
        check(count(x, {"owner": A, "createdFrom": t0}) == 8, "createdFrom before the starts: 8")
        check(count(x, {"owner": A, "createdFrom": t0 + 3600000}) == 0, "createdFrom in the future: 0")
        check(count(x, {"owner": A, "createdTo": t0 - 3600000}) == 0, "createdTo an hour before: 0")
        p = x.ok("xgr.batchPreview", {"selection": {"owner": A}, "sample": 3})
        check([s["rootPid"] for s in p["sample"]] == ["8", "7", "6"] or [s["rootPid"] for s in p["sample"]] == [8, 7, 6],
              "the sample: the first three in the driver's order (rootPid descending)")
        # ---- bad selections name the key
        refused(x, "xgr.batchPreview", {"selection": {"owner": A, "status": "sleeping"}}, -32602, "selection.status",
                "an unknown status")
        refused(x, "xgr.batchPreview", {"selection": {"owner": A, "colour": 1}}, -32602, "selection.colour",
                "an unknown key")
        refused(x, "xgr.batchPreview", {"selection": {"owner": A, "rootFrom": 5, "rootTo": 2}}, -32602,
                "selection.rootTo", "an empty rootPid range")
        refused(x, "xgr.batchStart", {"selection": {"owner": A}, "action": "explode"}, -32602, "action",
                "an unknown action")
        refused(x, "xgr.batchStart", {"selection": {"owner": A}, "action": "wake"}, -32602, "stepId",
                "a wake without a step")
        # ---- permission: another owner's sessions, or every owner's, are not selectable by a non-owner
        refused(x, "xgr.batchPreview", {"from": B, "selection": {"owner": A}}, -32007, "selection.owner",
                "B previewing A's sessions")
        refused(x, "xgr.batchStart", {"from": B, "selection": {"owner": A}, "action": "kill"}, -32007,
                "selection.owner", "B killing A's sessions")
        refused(x, "xgr.batchStart", {"from": B, "selection": {}, "action": "kill"}, -32007, "selection.owner",
                "B killing every owner's sessions")
        check(count(x, {"owner": A}) == 8 and count(x, {"owner": B}) == 2, "the refused batches changed nothing")
        check(x.ok("xgr.batchList", {"from": B})["operations"] == [], "no operation was written for B")
        # ---- the dry run's count is what is acted on: kill 1..3
        sel = {"owner": A, "rootFrom": 1, "rootTo": 3}
        n = count(x, sel)
        r = x.ok("xgr.batchStart", {"selection": sel, "action": "kill"})
        check(r["total"] == n == 3, "batchStart counts what the preview counted (%d)" % n)
        op = finish(x, r["id"])
        check(op["state"] == "done" and op["done"] == 3 and op["failed"] == 0 and op["skipped"] == 0,
              "the kill acted on 3 (%s)" % json.dumps(op))
        for root in (1, 2, 3):
            s = sess(x, A, root)
            check(s["session"]["status"] == "killed", "A/%d killed" % root)
            e = batch_audits(x, A, root, r["id"])
            check(len(e) == 1 and e[0]["kind"] == "kill" and e[0]["actor"] == "auth-none",
                  "A/%d: one kill entry naming the operation (%s)" % (root, json.dumps(e)))
        check(sess(x, A, 4)["session"]["status"] == "running", "A/4 outside the selection is untouched")
        # ---- pause, resume, wake with a payload: 4..5
        sel = {"owner": A, "rootFrom": 4, "rootTo": 5}
        rp = x.ok("xgr.batchStart", {"selection": sel, "action": "pause"})
        check(finish(x, rp["id"])["done"] == 2, "pause acted on 2")
        check(count(x, dict(sel, status="paused")) == 2, "4 and 5 are paused")
        rr = x.ok("xgr.batchStart", {"selection": dict(sel, status="paused"), "action": "resume"})
        check(finish(x, rr["id"])["done"] == 2, "resume acted on 2")
        check(count(x, dict(sel, status="waiting")) == 2, "4 and 5 wait again")
        rw = x.ok("xgr.batchStart", {"selection": dict(sel, step="settle"), "action": "wake", "stepId": "settle",
                                     "payload": {"note": "x"}})
        opw = finish(x, rw["id"])
        check(opw["done"] == 2 and opw["payloadKeys"] == ["note"], "wake acted on 2 (%s)" % json.dumps(opw))
        for root in (4, 5):
            kinds = [(e["kind"], e["detail"].get("batch")) for e in sess(x, A, root)["audit"]]
            check(kinds == [("pause", rp["id"]), ("resume", rr["id"]), ("wake", rw["id"])],
                  "A/%d: pause, resume, wake, once each, naming their operations (%s)" % (root, kinds))
            e = batch_audits(x, A, root, rw["id"])[0]
            check(e["detail"].get("keys") == ["note"] and e["detail"].get("step") == "settle",
                  "the wake entry names the step and the payload's keys")
        wait_for("the woken settle processes end", lambda: count(x, dict(sel, step="settle")) == 0, secs=10)
        # ---- list, and who sees what
        ids = [o["id"] for o in x.ok("xgr.batchList", {"from": A})["operations"]]
        check(ids == [rw["id"], rr["id"], rp["id"], r["id"]], "batchList: A's operations, newest first")
        refused(x, "xgr.batchGet", {"from": B, "id": r["id"]}, -32004, "id", "B reading A's operation")
        refused(x, "xgr.batchCancel", {"from": B, "id": r["id"]}, -32004, "id", "B cancelling A's operation")
        c = x.ok("xgr.batchCancel", {"from": A, "id": r["id"]})
        check(c["cancelled"] is False and c["state"] == "done", "cancelling a finished operation changes nothing")
        # ---- the CLI drives the same methods
        env = dict(os.environ, XGR_URL=x.url.rstrip("/"))
        out = subprocess.run([XGR, "batch", "preview", "--owner", A, "--step", "settle", "--json"],
                             capture_output=True, text=True, env=env, timeout=30)
        check(out.returncode == 0 and json.loads(out.stdout)["count"] == 3,
              "xgr batch preview --json counts 6..8 (%s %s)" % (out.stdout, out.stderr))
        out = subprocess.run([XGR, "batch", "start", "--owner", A, "--root-from", "6", "--root-to",
                              "6", "--action", "pause", "--wait", "--json"], capture_output=True, text=True, env=env,
                             timeout=60)
        check(out.returncode == 0, "xgr batch start --wait (%s %s)" % (out.stdout, out.stderr))
        op = json.loads(out.stdout)
        check(op["state"] == "done" and op["done"] == 1, "xgr batch start --wait answers the finished operation")
        out = subprocess.run([XGR, "batch", "status", "--from", A, op["id"], "--json"],
                             capture_output=True, text=True, env=env, timeout=30)
        check(out.returncode == 0 and json.loads(out.stdout)["id"] == op["id"], "xgr batch status --json")
        out = subprocess.run([XGR, "batch", "list", "--from", A], capture_output=True, text=True,
                             env=env, timeout=30)
        check(out.returncode == 0 and op["id"] in out.stdout, "xgr batch list names it")
        out = subprocess.run([XGR, "batch", "start", "--from", B, "--owner", A, "--action", "kill"],
                             capture_output=True, text=True, env=env, timeout=30)
        check(out.returncode != 0 and "selection.owner" in out.stderr, "xgr batch start refused for B: %s" % out.stderr)
        out = subprocess.run([XGR, "batch", "preview", "--ownr", A], capture_output=True, text=True, env=env, timeout=30)
        check(out.returncode == 2 and "did you mean --owner?" in out.stderr, "a mistyped option names the nearest")
        out = subprocess.run([XGR, "batch", "start", "--owner", A, "--action", "wake", "--step", "settle", "--payload",
                              "[1]"], capture_output=True, text=True, env=env, timeout=30)
        check(out.returncode == 2 and "--payload: expected a JSON object" in out.stderr, "a payload that is not an object")
        m = x.metric(None, 'xgr_batch_sessions_total{outcome="done"}')
        check(m == 10, "xgr_batch_sessions_total{outcome=\"done\"} counts the sessions (%s)" % m)
    finally:
        x.kill()


def rate_cancel_restart():
    rate, n = 25, 60
    x = Xgrd(XGRD, store_url("dur"), DIR, ["--batch-rate", str(rate)], name="dur")
    try:
        x.start()
        x.deploy(BUNDLE, "bat", **{"from": A})
        start_many(x, A, range(1, n + 1))
        waiting(x, A, range(1, n + 1))
        # ---- the rate limit, by the operation's own times: n sessions at rate/s take >= (n-1)/rate s
        r = x.ok("xgr.batchStart", {"selection": {"owner": A, "rootFrom": 1, "rootTo": 30}, "action": "pause"})
        op = finish(x, r["id"])
        span = op["finishedAt"] - op["startedAt"]
        check(op["done"] == 30 and span >= (30 - 1) * 1000 // rate,
              "30 pauses at %d/s took %d ms >= %d ms" % (rate, span, (30 - 1) * 1000 // rate))
        # ---- cancel: the operation stops; what it did is what it counts
        r = x.ok("xgr.batchStart", {"selection": {"owner": A, "rootFrom": 31, "rootTo": 60}, "action": "kill"})
        c = x.ok("xgr.batchCancel", {"from": A, "id": r["id"]})
        check(c["cancelled"] is True and c["state"] == "cancelled", "batchCancel cancels a running operation")
        time.sleep(1.5)   # let the driver notice (it stops before its next session) and write its count
        op1 = x.ok("xgr.batchGet", {"from": A, "id": r["id"]})
        time.sleep(1.5)
        op2 = x.ok("xgr.batchGet", {"from": A, "id": r["id"]})
        killed = sum(1 for root in range(31, 61) if sess(x, A, root)["session"]["status"] == "killed")
        check(op2["state"] == "cancelled" and op1["done"] == op2["done"] == killed,
              "after cancel nothing more is done, and %d killed = its count %d" % (killed, op2["done"]))
        # ---- durability: SIGKILL mid-operation, restart, every selected session resumed exactly once
        sel = {"owner": A, "rootFrom": 1, "rootTo": 30, "status": "paused"}
        total = count(x, sel)
        check(total == 30, "30 paused sessions to resume")
        r = x.ok("xgr.batchStart", {"selection": sel, "action": "resume"})
        wait_for("the resume is under way", lambda: x.ok("xgr.batchGet", {"from": A, "id": r["id"]})["done"] >= 5,
                 secs=20)
        x.stop(signal.SIGKILL)
        x.start()
        op = finish(x, r["id"], secs=60)
        check(op["state"] == "done" and op["done"] == 30 and op["failed"] == 0,
              "after the restart the operation finished: %s" % json.dumps(op))
        for root in range(1, 31):
            e = batch_audits(x, A, root, r["id"])
            check(len(e) == 1 and e[0]["kind"] == "resume", "A/%d resumed exactly once (%d entries)" % (root, len(e)))
        check(count(x, {"owner": A, "rootFrom": 1, "rootTo": 30, "status": "waiting"}) == 30, "all 30 wait again")
        # ---- sessions that end while the operation runs are skipped and counted: five are killed one
        # by one right after the start; whichever the driver had reached are done, the rest skipped
        r = x.ok("xgr.batchStart", {"selection": {"owner": A, "rootFrom": 1, "rootTo": 30}, "action": "pause"})
        for root in range(1, 6):
            x.ok("xgr.kill", {"owner": A, "pid": str(root)})
        op = finish(x, r["id"], secs=60)
        acted = [root for root in range(1, 31) if batch_audits(x, A, root, r["id"])]
        check(op["done"] == len(acted) and op["skipped"] == 30 - len(acted) and op["failed"] == 0 and op["total"] == 30,
              "done %d = sessions with its entry (%d), skipped %d = the ones killed before it reached them (%s)"
              % (op["done"], len(acted), op["skipped"], json.dumps(op)))
        check(all(root in acted for root in range(6, 31)), "every session that stayed live was paused")
    finally:
        x.kill()


def bounds_retention():
    x = Xgrd(XGRD, store_url("ret"), DIR, ["--batch-rate", "1", "--batch-retention", "3"], name="ret")
    try:
        x.start()
        x.deploy(BUNDLE, "bat", **{"from": A})
        start_many(x, A, range(1, 11))
        waiting(x, A, range(1, 11))
        old = x.ok("xgr.batchStart", {"selection": {"owner": A, "rootFrom": 1, "rootTo": 2}, "action": "pause"})
        old_op = finish(x, old["id"])
        check(old_op["state"] == "done", "the first operation is done")
        # one operation driven at 1 session a second over 10 sessions (9 s at least), 15 waiting behind it
        sel = {"owner": A, "rootFrom": 1, "rootTo": 10}
        ids = [x.ok("xgr.batchStart", {"selection": sel, "action": "pause"})["id"] for _ in range(16)]
        before = len(x.ok("xgr.batchList", {"from": A, "limit": 1000})["operations"])
        refused(x, "xgr.batchStart", {"selection": sel, "action": "pause"}, -32005, None,
                "a 17th running operation of the same caller")
        after = x.ok("xgr.batchList", {"from": A, "limit": 1000})["operations"]
        check(len(after) == before, "the refused start wrote nothing (%d operations)" % len(after))
        b = x.ok("xgr.batchStart", {"from": B, "selection": {"owner": B}, "action": "kill"})
        check(b["state"] == "running", "another caller still starts one")
        for bid in ids[1:]:
            x.ok("xgr.batchCancel", {"from": A, "id": bid})

        def gone(bid, who=A):
            r = x.rpc("xgr.batchGet", {"from": who, "id": bid})
            return (r.get("error") or {}).get("code") == -32004
        wait_for("the operation done more than 3 s ago is deleted", lambda: gone(old["id"]), secs=20)
        fresh = x.ok("xgr.batchStart", {"from": B, "selection": {"owner": B}, "action": "kill"})
        x.ok("xgr.batchCancel", {"from": B, "id": fresh["id"]})
        time.sleep(1.5)   # a retention step or more (every second) after it ended
        check(not gone(fresh["id"], B), "an operation finished 1.5 s ago stays")
        wait_for("the first driven operation is older than the retention", lambda: time.time() * 1000 -
                 x.ok("xgr.batchGet", {"from": A, "id": ids[0]})["createdAt"] > 4500, secs=10)
        op = x.ok("xgr.batchGet", {"from": A, "id": ids[0]})
        check(op["state"] == "running", "a running operation created %d ms ago stays: %s"
              % (time.time() * 1000 - op["createdAt"], json.dumps(op)[:300]))
        wait_for("the cancelled ones go", lambda: all(gone(bid) for bid in ids[1:]), secs=20)
    finally:
        x.kill()


def permit(key, x, ttl):
    out = subprocess.run([XGR, "permit", "xdala", "--key", key, "--url", x.url, "--ttl", str(ttl)],
                         capture_output=True, text=True)
    if out.returncode:
        fail("xgr permit: %s" % out.stderr)
    return json.loads(out.stdout)


def permits():
    """--auth permits: the batch methods take an XDaLa permit; its signer is the caller and must own
    the sessions; start and cancel use their permit up."""
    key, okey = os.path.join(DIR, "owner.key"), os.path.join(DIR, "other.key")
    owner = subprocess.run([XGR, "key", "new", key], capture_output=True, text=True, check=True).stdout.strip().lower()
    other = subprocess.run([XGR, "key", "new", okey], capture_output=True, text=True, check=True).stdout.strip().lower()
    x = Xgrd(XGRD, store_url("permits"), DIR, ["--auth", "permits", "--chain-id", "1887"], name="permits")
    try:
        x.start()
        xd = permit(key, x, 300)
        for k, r in BUNDLE["rules"].items():
            x.ok("xgr_putRule", {"address": k, "rule": r, "permit": xd})
        x.ok("xgr.putOrchestration", {"xrc729": "bat", "orchestration": BUNDLE["orchestration"], "permit": xd})
        env = dict(os.environ, XGR_URL=x.url.rstrip("/"))
        for r in (1, 2, 3):
            out = subprocess.run([XGR, "enqueue", "--key", key, "--owner", owner, "--root", str(r), "--registry", "bat",
                                  "--step", "main"], capture_output=True, text=True, env=env, timeout=30)
            check(out.returncode == 0, "session %d started with a signed permit (%s)" % (r, out.stderr.strip()))
        wait_for("three sessions wait", lambda: x.ok("xgr.batchPreview", {"selection": {"owner": owner, "step": "settle"},
                                                                         "permit": xd})["count"] == 3, secs=20)
        oxd = permit(okey, x, 300)
        refused(x, "xgr.batchPreview", {"selection": {"owner": owner}, "permit": oxd}, -32007, "selection.owner",
                "another signer previewing the owner's sessions")
        refused(x, "xgr.batchStart", {"selection": {"owner": owner}, "action": "kill", "permit": oxd}, -32007,
                "selection.owner", "another signer killing the owner's sessions")
        refused(x, "xgr.batchStart", {"selection": {}, "action": "kill", "permit": oxd}, -32007, "selection.owner",
                "another signer killing every owner's sessions")
        check(x.ok("xgr.batchList", {"permit": oxd})["operations"] == [], "nothing was written for the other signer")
        sp = permit(key, x, 301)
        r = x.ok("xgr.batchStart", {"selection": {"owner": owner, "rootTo": 2}, "action": "pause", "permit": sp})
        refused(x, "xgr.batchStart", {"selection": {"owner": owner, "rootTo": 2}, "action": "pause", "permit": sp}, -32007,
                "permit", "the same permit for a second start")
        op = {}
        wait_for("the signed pause ends", lambda: op.update(x.ok("xgr.batchGet", {"id": r["id"], "permit": xd})) or
                 op["state"] != "running")
        check(op["state"] == "done" and op["done"] == 2 and op["caller"] == owner, "the signer's pause of 2 (%s)" % op)
        refused(x, "xgr.batchGet", {"id": r["id"], "permit": oxd}, -32004, "id", "another signer reading it")
        a = x.ok("xgr.getSession", {"owner": owner, "rootPid": "1", "permit": xd})["audit"]
        check(len(a) == 1 and a[0]["actor"] == owner and a[0]["detail"]["batch"] == r["id"],
              "the audit entry names the permit's signer as actor (%s)" % json.dumps(a))
        out = subprocess.run([XGR, "batch", "preview", "--key", key, "--owner", owner, "--status", "paused", "--json"],
                             capture_output=True, text=True, env=env, timeout=30)
        check(out.returncode == 0 and json.loads(out.stdout)["count"] == 2,
              "xgr batch preview --key signs its XDaLa permit (%s %s)" % (out.stdout, out.stderr))
    finally:
        x.kill()


def two_nodes():
    url = store_url("two")
    n1 = Xgrd(XGRD, url, DIR, ["--node-id", "n1", "--batch-rate", "100"], name="n1")
    n2 = Xgrd(XGRD, url, DIR, ["--node-id", "n2", "--batch-rate", "100"], name="n2")
    try:
        n1.start()
        n2.start()
        n1.deploy(BUNDLE, "bat", **{"from": A})
        start_many(n1, A, range(1, 21))
        start_many(n2, A, range(21, 41))
        waiting(n1, A, range(1, 41))
        r = n2.ok("xgr.batchStart", {"selection": {"owner": A}, "action": "kill"})
        check(r["total"] == 40, "40 sessions on two nodes selected")
        op = finish(n1, r["id"], secs=60)
        check(op["state"] == "done" and op["done"] == 40, "both nodes' sessions killed: %s" % json.dumps(op))
        for root in range(1, 41):
            check(len(batch_audits(n1, A, root, r["id"])) == 1, "A/%d killed once" % root)
    finally:
        n1.kill()
        n2.kill()
    # ---- the driving node dies: the other takes the operation over once its claim runs out (a
    # lease), goes on from the cursor, and every session is acted on once
    m1 = Xgrd(XGRD, url, DIR, ["--node-id", "m1", "--batch-rate", "10", "--lease-ms", "2000"], name="m1")
    m2 = Xgrd(XGRD, url, DIR, ["--node-id", "m2", "--batch-rate", "10", "--lease-ms", "2000"], name="m2")
    try:
        m1.start()
        m2.start()
        start_many(m1, A, range(101, 131))
        waiting(m1, A, range(101, 131))
        r = m1.ok("xgr.batchStart", {"selection": {"owner": A, "rootFrom": 101}, "action": "pause"})
        op = {}
        wait_for("the pause is under way", lambda: op.update(m1.ok("xgr.batchGet", {"from": A, "id": r["id"]})) or
                 op["done"] >= 5, secs=20)
        driver, other = (m1, m2) if op["driver"] == "m1" else (m2, m1)
        driver.stop(signal.SIGKILL)
        op = finish(other, r["id"], secs=90)
        check(op["state"] == "done" and op["done"] == 30 and op["driver"] == other.name,
              "%s took the operation over and finished it: %s" % (other.name, json.dumps(op)))
        for root in range(101, 131):
            e = batch_audits(other, A, root, r["id"])
            check(len(e) == 1 and e[0]["kind"] == "pause", "A/%d paused exactly once (%d entries)" % (root, len(e)))
    finally:
        m1.kill()
        m2.kill()


try:
    filters_and_actions()
    rate_cancel_restart()
    bounds_retention()
    permits()
    if MODE == "pg":
        two_nodes()
    print("test_batch (%s): all checks passed" % MODE)
finally:
    shutil.rmtree(DIR, ignore_errors=True)
