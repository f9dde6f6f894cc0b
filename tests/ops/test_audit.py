#!/usr/bin/env python3
"""test_audit.py — every change to a session is in its history (issue 35, the audit trail).

A real xgrd (--auth none, then --auth permits) on a temporary SQLite store, or with `pg` on a
schema of the throwaway PostgreSQL that tests/pg/pg_cluster.sh names in XGR_PG_URL. Checked:
  - each kind of audit entry appears once, with the right actor, node and detail: kill, pause and
    resume of a session and of a process, a PID-mode and a step-mode wake (the payload's keys, not
    its values), an internal wake-up (the waking session and step) and a refused internal wake-up
    (its reason), in xgr.getSession's `audit` array, in session-clock order;
  - refused actions leave none: a kill by another caller, a PID-mode wake by another caller, a kill
    of a session nobody has, a control permit used twice, a permit signed for another session;
  - the entries are the same after xgrd restarts (they are in the store, written in the commit of
    the change: no entry without its change);
  - `xgr history` and `xgr show` print them among the step rows; the console's session view
    (xgr.console.session) has them in its timeline and counts "woken" per step from them;
  - the request log line names the caller and the session of every call that changes something
    (--log-level info) and holds no permit or signature;
  - under --auth permits the actor is the permit's signer and permitDigest the 0x + 64 hex digest
    of the permit (not its signature);
  - (pg) on a cluster of two nodes a call forwarded to the holding node is recorded once, naming
    the node it came through.

  test_audit.py XGRD XGR [sqlite|pg]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from xgrd_harness import Xgrd, check, fail, pg_schema_url, psql, wait_for  # noqa: E402

XGRD, XGR = sys.argv[1], sys.argv[2]
MODE = sys.argv[3] if len(sys.argv) > 3 else "sqlite"
DIR = tempfile.mkdtemp(prefix="xgr-audit-")
A = "0x00000000000000000000000000000000000000a1"    # the sessions' owner
B = "0x00000000000000000000000000000000000000b2"    # the owner of the waking sessions
OTHER = "0x00000000000000000000000000000000000000c3"
RBID = "0x00000000000000000000000000000000000000ee"
# main spawns settle, which waits an hour or for a wake-up; bid wakes [Runner]/[Target] at settle
BUNDLE = {"orchestration": {"id": "aud", "structure": {
              "main": {"rule": "rmain", "onValid": {"spawns": ["settle"]}},
              "settle": {"rule": "rsettle"},
              "bid": {"rule": RBID}}},
          "rules": {"rmain": {"payload": {}, "rules": [], "onValid": {"waitSec": 3600}, "onInvalid": {}},
                    "rsettle": {"payload": {}, "rules": [], "onValid": {}, "onInvalid": {}},
                    RBID: {"payload": {"Runner": {"type": "address"}, "Target": {"type": "uint64"}}, "rules": [],
                           "onValid": {"wakeUps": [{"runner": "[Runner]", "sessionId": "[Target]", "stepId": "settle",
                                                    "payload": {"Bidder": "[from]", "Secret": "v4lue"}}]}}}}
ALLOW = {"__wakeUp": {"default": {"internal": ["*"]}}}


def store_url(name):
    if MODE == "pg":
        psql(os.environ["XGR_PG_URL"], "CREATE SCHEMA IF NOT EXISTS audit_" + name)
        return pg_schema_url(os.environ["XGR_PG_URL"], "audit_" + name)
    return "sqlite:" + os.path.join(DIR, name + ".db")


def sess(x, owner, root):
    return x.ok("xgr.getSession", {"owner": owner, "rootPid": str(root)})


def audit(x, owner, root):
    return sess(x, owner, root)["audit"]


def start(x, owner, root, step="main", payload=None):
    # the documents are A's (deployed in A's namespace): other owners name it (docs/SEMANTICS.md, "Names and pins")
    p = {"owner": owner, "xrc729": "aud", "registryOwner": A, "rootPid": str(root), "init": {"stepId": step}}
    if payload:
        p["init"]["payload"] = payload
    x.ok("xgr.enqueue", p)


def waiting(x, owner, root, step="settle"):
    wait_for("%s/%d waits at %s" % (owner, root, step),
             lambda: any(p.get("resumeStep") == step and p["status"] == "waiting" for p in sess(x, owner, root)["processes"]))


def refused(x, method, params, code, what):
    r = x.rpc(method, params)
    e = r.get("error") or {}
    if e.get("code") != code:
        fail("%s: expected %d, got %s" % (what, code, json.dumps(r)[:300]))
    check(True, "%s is refused (%d)" % (what, code))


def one(entries, kind, what):
    got = [e for e in entries if e["kind"] == kind]
    if len(got) != 1:
        fail("%s: %d %r entries in %s" % (what, len(got), kind, json.dumps(entries)))
    return got[0]


def auth_none():
    x = Xgrd(XGRD, store_url("none"), DIR, ["--log-level", "info", "--node-name", "audit-node"], name="none")
    try:
        x.start()
        x.deploy(BUNDLE, "aud", **{"from": A})
        # ---- control actions by RPC on session 1 (paused, resumed, a process paused and resumed,
        # woken by pid) and session 2 (woken at a step), 3 (killed)
        for r in (1, 2, 3):
            start(x, A, r)
        for r in (1, 2, 3):
            waiting(x, A, r)
        x.ok("xgr.pause", {"owner": A, "pid": "1"})
        x.ok("xgr.resume", {"owner": A, "pid": "1"})
        x.ok("xgr.pause", {"owner": A, "pid": "1:2"})
        x.ok("xgr.resume", {"owner": A, "pid": "1:2"})
        r = x.ok("xgr_wakeUpProcess", {"owner": A, "processId": "1:2", "payload": {"k": 1, "Secret": "v4lue"}})
        check(r["woken"] == 1, "PID-mode wake of 1:2")
        r = x.ok("xgr_wakeUpProcess", {"runner": A, "sessionId": "2", "stepId": "settle", "payload": {"a": 1, "b": 2}})
        check(r["woken"] == 1, "step-mode wake of session 2 at settle")
        x.ok("xgr.kill", {"owner": A, "pid": "3"})
        # ---- refused: by another caller, of nobody's session; none leaves an entry
        refused(x, "xgr.kill", {"from": OTHER, "owner": A, "pid": "2"}, -32007, "a kill by another caller")
        start(x, A, 4)
        waiting(x, A, 4)
        refused(x, "xgr_wakeUpProcess", {"from": OTHER, "processId": "4:2"}, -32007, "a PID-mode wake by another caller")
        refused(x, "xgr.kill", {"owner": A, "pid": "99"}, -32004, "a kill of a session nobody has")
        check(audit(x, A, 4) == [], "the refused actions left no entry on session 4")
        # ---- internal wake-ups: session 5 allows them (woken by B's session 1), session 6 does not
        start(x, A, 5, payload=ALLOW)
        start(x, A, 6)
        waiting(x, A, 5)
        waiting(x, A, 6)
        start(x, B, 1, "bid", {"Runner": A, "Target": 5})
        start(x, B, 2, "bid", {"Runner": A, "Target": 6})
        wait_for("session 5 completes after its wake-up", lambda: sess(x, A, 5)["session"]["status"] == "completed")
        wait_for("session 6 records the refusal", lambda: audit(x, A, 6) != [])

        def expect():
            a1 = audit(x, A, 1)
            check([e["kind"] for e in a1] == ["pause", "resume", "pause", "resume", "wake"],
                  "session 1: pause, resume, pause, resume, wake in order (%s)" % [e["kind"] for e in a1])
            check(all(e["actor"] == "auth-none" and e["node"] == "audit-node" and "permitDigest" not in e for e in a1),
                  "... each by auth-none through node audit-node, without a permit")
            check("detail" not in a1[0] and a1[2]["detail"] == {"iter": 2}, "... the session's and the process's")
            check(a1[4]["detail"] == {"iter": 2, "step": "settle", "keys": ["k", "Secret"]},
                  "... the PID wake names the process, its step and the payload's keys (%s)" % a1[4]["detail"])
            check(all(a1[i]["sessionAt"] <= a1[i + 1]["sessionAt"] for i in range(4)) and
                  all(abs(e["at"] - a1[0]["at"]) < 600000 for e in a1), "... in session-clock order, at in ms")
            w = one(audit(x, A, 2), "wake", "session 2")
            check(w["detail"] == {"step": "settle", "keys": ["a", "b"], "woken": 1},
                  "session 2: the step-mode wake, its keys and count (%s)" % w["detail"])
            a3 = audit(x, A, 3)
            check(len(a3) == 1 and a3[0]["kind"] == "kill", "session 3: one kill entry")
            check(sess(x, A, 3)["session"]["status"] == "killed", "... and it is killed")
            check(audit(x, A, 4) == [], "session 4: no entry")
            wi = one(audit(x, A, 5), "wake-internal", "session 5")
            check(wi["actor"] == B and wi["detail"]["from"] == {"owner": B, "rootPid": 1, "iter": 1, "step": "bid"} and
                  wi["detail"]["step"] == "settle" and sorted(wi["detail"]["keys"]) == ["Bidder", "Secret"],
                  "session 5: the internal wake-up names B's session 1, step bid, and the keys (%s)" % wi)
            wr = one(audit(x, A, 6), "wake-refused", "session 6")
            check(wr["actor"] == B and wr["detail"]["from"]["rootPid"] == 2 and wr["detail"].get("reason") and
                  "keys" not in wr["detail"], "session 6: the refused wake-up, from B's session 2, why (%s)" %
                  wr["detail"]["reason"])
            text = json.dumps([audit(x, A, r) for r in (1, 2, 5)])
            check("v4lue" not in text, "no payload value in any entry")
            return [audit(x, A, r) for r in range(1, 7)]

        before = expect()
        # ---- readers: the console's timeline and woken count, xgr history and xgr show
        c = x.ok("xgr.console.session", {"owner": A, "rootPid": "5", "histLimit": 50})
        rows = [h for h in c["history"]["items"] if h.get("status") == "audit"]
        check(len(rows) == 1 and rows[0]["audit"]["kind"] == "wake-internal", "the console's timeline of session 5 "
              "has its wake-up")
        check(c.get("woken") == {"settle": 1}, "the console counts woken x1 at settle from the store (%s)" % c.get("woken"))
        c = x.ok("xgr.console.session", {"owner": A, "rootPid": "1", "histLimit": 50})
        check(c.get("woken") == {"settle": 1}, "... and one PID-mode wake at settle on session 1 (%s)" % c.get("woken"))
        out = subprocess.run([XGR, "history", "--store", x.store, A, "1"], capture_output=True, text=True)
        check(out.returncode == 0 and out.stdout.count("auth-none") == 5 and "wake" in out.stdout,
              "xgr history prints the 5 entries of session 1:\n" + out.stdout + out.stderr)
        out = subprocess.run([XGR, "show", "3", "--url", x.url, "--owner", A], capture_output=True, text=True)
        check(out.returncode == 0 and re.search(r"kill\b.*auth-none", out.stdout),
              "xgr show prints who killed session 3:\n" + out.stdout + out.stderr)
        # ---- the request log
        log = open(x.log, errors="replace").read()
        lines = [ln for ln in log.splitlines() if "msg=request" in ln or "request" in ln]
        kill = [ln for ln in lines if "rpc=xgr.kill" in ln and "code=0" in ln]
        check(kill and "caller=auth-none" in kill[0] and ("owner=" + A) in kill[0] and "rootPid=3" in kill[0],
              "the log line of the kill names the caller and the session: " + (kill[0] if kill else log[-500:]))
        wake = [ln for ln in lines if "rpc=xgr_wakeUpProcess" in ln and "code=0" in ln]
        check(len(wake) == 2 and all("caller=auth-none" in ln and "rootPid=" in ln for ln in wake),
              "... and those of the wakes")
        check("v4lue" not in log, "... and no payload")
        # ---- after a restart, the same
        x.stop()
        x.start()
        check([audit(x, A, r) for r in range(1, 7)] == before, "after a restart every entry is the same")
        expect()
    finally:
        x.kill()


def permit(key, kind, x, *args):
    out = subprocess.run([XGR, "permit", kind, "--key", key, "--url", x.url] + list(args),
                         capture_output=True, text=True)
    if out.returncode:
        fail("xgr permit: %s" % out.stderr)
    return json.loads(out.stdout)


def permits():
    key = os.path.join(DIR, "owner.key")
    owner = subprocess.run([XGR, "key", "new", key], capture_output=True, text=True, check=True).stdout.strip().lower()
    x = Xgrd(XGRD, store_url("permits"), DIR, ["--log-level", "info", "--auth", "permits", "--chain-id", "1887"],
             name="permits")
    try:
        x.start()
        xd = permit(key, "xdala", x)
        for k, r in BUNDLE["rules"].items():
            x.ok("xgr_putRule", {"address": k, "rule": r, "permit": xd})
        h = x.ok("xgr.putOrchestration", {"xrc729": "aud", "orchestration": BUNDLE["orchestration"], "permit": xd})["hash"]
        for r in (1, 2):
            sp = permit(key, "session", x, "--session-id", str(r), "--ostc-id", "aud", "--ostc-hash", h)
            x.ok("xgr.enqueue", {"owner": owner, "xrc729": "aud", "rootPid": str(r), "ostcId": "aud", "init": {"stepId": "main"},
                                 "permit": sp})
        for r in (1, 2):
            wait_for("session %d waits" % r, lambda: any(
                p.get("resumeStep") == "settle" and p["status"] == "waiting" for p in
                x.ok("xgr.getSession", {"owner": owner, "rootPid": str(r), "permit": xd})["processes"]))
        kp = permit(key, "control", x, "--action", "kill", "--session-id", "1")
        x.ok("xgr.kill", {"owner": owner, "pid": "1", "permit": kp})
        pp = permit(key, "control", x, "--action", "pause", "--session-id", "2")
        x.ok("xgr.pause", {"owner": owner, "pid": "2", "permit": pp})
        refused(x, "xgr.resume", {"owner": owner, "pid": "2", "permit": pp}, -32007,
                "a resume with the pause permit")
        refused(x, "xgr.pause", {"owner": owner, "pid": "2", "permit": pp}, -32007, "the same control permit again")
        other = permit(key, "control", x, "--action", "kill", "--session-id", "1")
        refused(x, "xgr.kill", {"owner": owner, "pid": "2", "permit": other}, -32007,
                "a kill of session 2 with a permit for session 1")
        a1 = x.ok("xgr.getSession", {"owner": owner, "rootPid": "1", "permit": xd})["audit"]
        a2 = x.ok("xgr.getSession", {"owner": owner, "rootPid": "2", "permit": xd})["audit"]
        check(len(a1) == 1 and a1[0]["kind"] == "kill" and a1[0]["actor"] == owner,
              "the kill's entry names the permit's signer (%s)" % json.dumps(a1))
        check(re.fullmatch(r"0x[0-9a-f]{64}", a1[0].get("permitDigest", "")) and
              a1[0]["permitDigest"][2:] not in kp["signature"], "... and the permit's digest, not its signature")
        check([e["kind"] for e in a2] == ["pause"] and a2[0]["permitDigest"] != a1[0]["permitDigest"],
              "session 2 has its pause only: the refused calls left no entry")
        log = open(x.log, errors="replace").read()
        kill = [ln for ln in log.splitlines() if "rpc=xgr.kill" in ln and "code=0" in ln]
        check(kill and ("caller=" + owner) in kill[0] and "rootPid=1" in kill[0],
              "the log line names the signer and the session: " + (kill[0] if kill else ""))
        sigs = [p["signature"] for p in (xd, kp, pp, other)]
        check(not any(s in log or s[2:] in log for s in sigs) and a1[0]["permitDigest"] not in log,
              "the request log holds no permit, signature or digest")
    finally:
        x.kill()


def cluster():
    """Two cluster nodes on one PostgreSQL schema: a kill sent to the node that does not hold the
    session is forwarded to the one that does; the entry (one) names the node it came through."""
    url = store_url("cluster")
    n1 = Xgrd(XGRD, url, DIR, ["--node-id", "n1", "--lease-ms", "1000", "--log-level", "info"], name="n1")
    n2 = Xgrd(XGRD, url, DIR, ["--node-id", "n2", "--lease-ms", "1000", "--log-level", "info"], name="n2")
    try:
        n1.start()
        n2.start()
        n1.deploy(BUNDLE, "aud", **{"from": A})
        start(n1, A, 1)
        waiting(n1, A, 1)
        n2.ok("xgr.pause", {"owner": A, "pid": "1:2"})
        n1.ok("xgr.kill", {"owner": A, "pid": "1"})
        a = audit(n2, A, 1)
        check([(e["kind"], e["node"], e["actor"]) for e in a] == [("pause", "n2", "auth-none"), ("kill", "n1", "auth-none")],
              "cluster: the pause through n2 and the kill through n1, once each (%s)" % json.dumps(a))
        check(audit(n1, A, 1) == a, "... the same read on either node")
    finally:
        n1.kill()
        n2.kill()


try:
    auth_none()
    permits()
    if MODE == "pg":
        cluster()
    print("PASS")
finally:
    shutil.rmtree(DIR, ignore_errors=True)
