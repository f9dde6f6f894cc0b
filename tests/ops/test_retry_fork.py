#!/usr/bin/env python3
"""test_retry_fork.py — retry and fork through a real xgrd (issue 36; docs/SEMANTICS.md "Retry and fork").

A real xgrd (--auth none, then --auth permits) on a temporary SQLite store, or with `pg` on a schema
of the throwaway PostgreSQL that tests/pg/pg_cluster.sh names in XGR_PG_URL, and an HTTP API on
127.0.0.1 that the test controls. Checked:
  - a producer of an open 2-of-3 join whose API answers 503 aborts with a hard error; once the API
    answers again, `xgr retry` runs its step as a new process of the same scope, its piece satisfies
    the join (the waiting third producer is killed by the join), and the retry is in the audit trail;
  - a retry of the same process after the join closed is refused (-32008 at pid), and after the
    session ended (-32008 at sessionId); refused ones leave no entry;
  - `xgr fork` from the middle step of an ended session runs the original tail again with the same
    payloads, on the same bundle (also at a join target: its input has the pieces its join took); the new session shows forkedFrom (getSession, `xgr show`), and both
    sessions have their audit entry (fork / forked);
  - after a rule changed, a fork onto the orchestration's version runs the new rule, and a fork pinned
    to the old bundle is refused (-32006: the pinned rules changed);
  - the same after a restart (the store holds forkedFrom and the entries); a fork onto a rootPid that
    runs is refused (-32008 at newRootPid) and records nothing; SIGKILL among 40 concurrent forks:
    after a restart each forked session has forkedFrom and its entry, and the source's entries name
    exactly the forks that exist (one commit: the new row with its record);
  - under --auth permits, retry and fork with a ControlPermit (action retry / fork) work once; the
    same permit again is refused (-32007 at permit);
  - an operator (xgrd --operator) retries and forks the owner's session with a ControlPermitV2 (runner
    the owner): both work and the audit entries name the operator; a non-operator that is not the
    owner — even one holding a READ+WRITE+MANAGE grant on the session — is refused (-32007 at
    permit.message.from) and nothing is stored (no process, no audit entry, no new session);
  - the console decides the same for a signed-in address (`xgr console --key`, POST /ui/rpc): a
    stranger's retry is refused (-32007 at owner), the operator's kill works and is recorded with
    the operator as actor.

  test_retry_fork.py XGRD XGR [sqlite|pg]
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from xgrd_harness import Xgrd, check, fail, pg_schema_url, psql, wait_for  # noqa: E402

XGRD, XGR = sys.argv[1], sys.argv[2]
MODE = sys.argv[3] if len(sys.argv) > 3 else "sqlite"
DIR = tempfile.mkdtemp(prefix="xgr-retry-")
A = "0x00000000000000000000000000000000000000a1"


class Api:
    """GET answers `status` with {"v": 7}; the test switches status between 503 and 200."""

    def __init__(self):
        api = self
        self.status = 503

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = b'{"v": 7}' if api.status == 200 else b'{"error": "down"}'
                self.send_response(api.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def plain(out=None, wait=None):
    r = {"payload": {}, "rules": [], "onValid": {}, "onInvalid": {}}
    if out:
        r["onValid"]["payload"] = out
    if wait:
        r["onValid"]["waitSec"] = wait
    return r


def join_bundle(port):
    """S spawns P1 (calls the API: a hard error unless it answers 200) and P2; P2 spawns P3, which
    waits an hour. J collects 2 of P1, P2, P3 (kill); J spawns W, which waits an hour, so that the
    session lives on after its join closed."""
    p1 = {"payload": {},
          "apiCalls": [{"name": "quote", "method": "GET", "urlTemplate": "http://127.0.0.1:%d/q" % port,
                        "extractMap": {"v": {"type": "int64", "expr": "resp.v", "default": -1}}}],
          "rules": ["[v] != -1 || 1 / 0 == 1", "[v] == 7"], "onValid": {"payload": {"quote": "[v]"}}, "onInvalid": {}}
    return {"orchestration": {"id": "rj", "structure": {
        "S": {"rule": "rs", "onValid": {"spawns": ["P1", "P2"], "join": {
            "joinid": "J", "mode": "kofn", "k": 2, "waitonjoin": "kill",
            "from": [{"node": "P1", "when": "valid"}, {"node": "P2", "when": "valid"}, {"node": "P3", "when": "valid"}]}}},
        "P1": {"rule": "rp1"}, "P2": {"rule": "rp2", "onValid": {"spawns": ["P3"]}}, "P3": {"rule": "rp3"},
        "J": {"rule": "rj", "onValid": {"spawns": ["W"]}}, "W": {"rule": "rw"}}},
        "rules": {"rs": plain(), "rp1": p1, "rp2": plain({"p2": "1"}, 3600), "rp3": plain(), "rj": plain({"joined": "1"}, 3600),
                  "rw": plain()}}


def chain_bundle(c_out):
    """A -> B -> C -> D, each step adding to the payload (C's rule is the one that changes)."""
    return {"orchestration": {"id": "ch", "structure": {
        "A": {"rule": "ca", "onValid": {"spawns": ["B"]}}, "B": {"rule": "cb", "onValid": {"spawns": ["C"]}},
        "C": {"rule": "cc", "onValid": {"spawns": ["D"]}}, "D": {"rule": "cd"}}},
        "rules": {"ca": {"payload": {"n": {"type": "int64", "default": 0}}, "rules": [], "onValid": {"payload": {"n": "[n] + 1", "a": "1"}}, "onInvalid": {}},
                  "cb": {"payload": {"n": {"type": "int64"}}, "rules": [], "onValid": {"payload": {"n": "[n] * 10", "b": "1"}}, "onInvalid": {}},
                  "cc": {"payload": {"n": {"type": "int64"}}, "rules": [], "onValid": {"payload": c_out}, "onInvalid": {}},
                  "cd": {"payload": {"n": {"type": "int64"}}, "rules": [], "onValid": {"payload": {"n": "[n] + 3", "d": "1"}}, "onInvalid": {}}}}


def store_url(name):
    if MODE == "pg":
        psql(os.environ["XGR_PG_URL"], "CREATE SCHEMA IF NOT EXISTS retry_" + name)
        return pg_schema_url(os.environ["XGR_PG_URL"], "retry_" + name)
    return "sqlite:" + os.path.join(DIR, name + ".db")


def sess(x, root, owner=A, permit=None):
    p = {"owner": owner, "rootPid": str(root)}
    if permit:
        p["permit"] = permit
    return x.ok("xgr.getSession", p)


def hist(x, root, step, **kw):
    return [h for h in sess(x, root, **kw)["history"] if h["step"] == step]


def refused(x, method, params, code, path, what):
    r = x.rpc(method, params)
    e = r.get("error") or {}
    got_path = (e.get("data") or {}).get("path", "")
    if e.get("code") != code or not got_path.endswith(path):
        fail("%s: expected %d at %s, got %s" % (what, code, path, json.dumps(r)[:400]))
    check(True, "%s is refused (%d at %s)" % (what, code, got_path))


def cli(x, *args):
    out = subprocess.run([XGR] + list(args) + ["--url", x.url, "--from", A], capture_output=True, text=True)
    if out.returncode:
        fail("xgr %s: %s%s" % (" ".join(args), out.stdout, out.stderr))
    return out.stdout


def auth_none(api):
    x = Xgrd(XGRD, store_url("none"), DIR, ["--allow-outbound", "loopback"], name="none")
    try:
        x.start()
        # ---- retry: a hard-error producer of an open 2-of-3 join
        x.deploy(join_bundle(api.port), "rj", **{"from": A})
        x.ok("xgr.enqueue", {"owner": A, "xrc729": "rj", "rootPid": "1", "init": {"stepId": "S"}})
        wait_for("P1 aborts on the API's 503", lambda: any(h["status"] == "aborted" for h in hist(x, 1, "P1")), 10)
        wait_for("P2 ran", lambda: hist(x, 1, "P2"), 10)
        p1 = hist(x, 1, "P1")[0]["pid"]
        v = sess(x, 1)
        j = [p for p in v["processes"] if p.get("resumeStep") == "J"]
        check(j and j[0]["join"]["closed"] is False, "the join is open: P3 can still deliver (%s)" % json.dumps(j)[:300])
        api.status = 200
        out = cli(x, "retry", "1", p1.split(":")[1])
        check("retried %s as 1:" % p1 in out, "xgr retry 1 %s: %s" % (p1, out.strip()))
        new = out.strip().split(" as ")[1]
        wait_for("J runs", lambda: hist(x, 1, "J"), 10)
        v = sess(x, 1)
        byp = {h["pid"]: h for h in v["history"]}
        check(byp[new]["step"] == "P1" and byp[new]["status"] == "done" and byp[new]["valid"] is True,
              "the retried P1 (%s) is done and valid" % new)
        jrow = hist(x, 1, "J")[0]
        check(jrow["payload"].get("quote") == 7 and jrow["payload"].get("p2") == 1,
              "J ran with the retried P1's piece and P2's (%s)" % json.dumps(jrow["payload"]))
        p3 = [p for p in v["processes"] if p["pid"] != p1 and p["status"] == "aborted" and p["pid"] not in byp]
        check(p3, "P3, waiting, was killed by the satisfied join")
        ents = [e for e in v["audit"] if e["kind"] == "retry"]
        check(len(ents) == 1 and ents[0]["actor"] == "auth-none" and ents[0]["detail"]["iter"] == int(p1.split(":")[1])
              and ents[0]["detail"]["newIter"] == int(new.split(":")[1]) and ents[0]["detail"]["step"] == "P1",
              "the retry is in the audit trail (%s)" % json.dumps(ents))
        refused(x, "xgr.retry", {"owner": A, "pid": p1}, -32008, "pid", "a retry after the join closed")
        x.ok("xgr.kill", {"owner": A, "pid": "1"})
        refused(x, "xgr.retry", {"owner": A, "pid": p1}, -32008, "sessionId", "a retry after the session ended")
        refused(x, "xgr.retry", {"owner": A, "pid": "1"}, -32602, "pid", "a retry naming no process")
        check(len([e for e in sess(x, 1)["audit"] if e["kind"] == "retry"]) == 1, "refused retries left no entry")
        # a fork at the join target J of the ended session 1: its input is S's payload with the pieces
        # its join took (the retried P1's and P2's), so J runs with the same payload again
        r = x.ok("xgr.fork", {"owner": A, "sessionId": "1", "stepId": "J", "newRootPid": "2"})
        check(r["forkedFrom"]["step"] == "J", "a fork at the join target J")
        wait_for("the fork's J ran", lambda: hist(x, 2, "J"), 10)
        check(hist(x, 2, "J")[0]["payload"] == jrow["payload"],
              "the fork's J ran with the original J's payload (%s)" % json.dumps(hist(x, 2, "J")[0]["payload"]))
        forks_of_1 = len([e for e in sess(x, 1)["audit"] if e["kind"] == "fork"])
        refused(x, "xgr.fork", {"owner": A, "sessionId": "1", "stepId": "J", "newRootPid": "2"}, -32008, "newRootPid",
                "a fork onto a session that runs (2)")
        check(len([e for e in sess(x, 2)["audit"] if e["kind"] == "forked"]) == 1 and
              len([e for e in sess(x, 1)["audit"] if e["kind"] == "fork"]) == forks_of_1,
              "the refused fork recorded nothing (no second forked / fork entry)")
        x.ok("xgr.kill", {"owner": A, "pid": "2"})

        # ---- fork: the tail of an ended session, then onto a newer rule
        b1 = chain_bundle({"n": "[n] + 2", "c": "1"})
        x.deploy(b1, "ch", **{"from": A})
        x.ok("xgr.enqueue", {"owner": A, "xrc729": "ch", "rootPid": "10", "init": {"stepId": "A", "payload": {"n": 1}}})
        wait_for("session 10 completes", lambda: sess(x, 10)["session"]["status"] == "completed", 10)
        orig = {h["step"]: h for h in sess(x, 10)["history"]}
        b_pid = orig["B"]["pid"]
        out = cli(x, "fork", "10", b_pid, "--root", "11")
        check("forked session %s/11 from step B of session 10" % A in out, "xgr fork 10 %s: %s" % (b_pid, out.strip()))
        wait_for("the fork completes", lambda: sess(x, 11)["session"]["status"] == "completed", 10)
        v11 = sess(x, 11)
        tail = {h["step"]: h for h in v11["history"]}
        check(sorted(tail) == ["B", "C", "D"], "the fork ran B, C, D (%s)" % sorted(tail))
        for s in "BCD":
            check(tail[s]["payload"] == orig[s]["payload"] and tail[s]["valid"] == orig[s]["valid"],
                  "fork: %s has the original's payload %s" % (s, json.dumps(orig[s]["payload"])))
        ff = v11["session"]["forkedFrom"]
        check(ff["rootPid"] == 10 and ff["iter"] == int(b_pid.split(":")[1]) and ff["step"] == "B" and ff["owner"] == A
              and ff["bundleHash"] == sess(x, 10)["session"]["bundleHash"], "getSession shows forkedFrom (%s)" % json.dumps(ff))
        check(v11["session"]["bundleHash"] == sess(x, 10)["session"]["bundleHash"], "the fork runs the source's bundle")
        check(sess(x, 10)["session"]["forkedFrom"] is None, "the source is no fork")
        fa = [e for e in v11["audit"] if e["kind"] == "forked"]
        sa = [e for e in sess(x, 10)["audit"] if e["kind"] == "fork"]
        check(len(fa) == 1 and fa[0]["detail"]["from"]["rootPid"] == 10 and len(sa) == 1 and
              sa[0]["detail"]["forkedTo"]["rootPid"] == 11 and sa[0]["detail"]["step"] == "B",
              "audit entries on both sessions (%s / %s)" % (json.dumps(fa), json.dumps(sa)))
        show = cli(x, "show", "11")
        check("forked from %s/10 at %s (step B" % (A, b_pid) in show, "xgr show prints the fork")
        # a newer rule for C
        b2 = chain_bundle({"n": "[n] + 200", "c": "2"})
        x.ok("xgr_putRule", [{"from": A, "address": "cc", "rule": b2["rules"]["cc"]}])
        refused(x, "xgr.fork", {"owner": A, "sessionId": "10", "stepId": "B"}, -32006, "ostcHash",
                "a fork pinned to the old bundle after its rule changed")
        r = x.ok("xgr.fork", {"owner": A, "sessionId": "10", "stepId": "B", "version": 1, "newRootPid": "12"})
        check(r["forkedFrom"]["step"] == "B" and r["bundleHash"] != sess(x, 10)["session"]["bundleHash"],
              "a fork onto version 1 of the orchestration runs a newer bundle")
        wait_for("the fork on the new rule completes", lambda: sess(x, 12)["session"]["status"] == "completed", 10)
        c12 = hist(x, 12, "C")[0]["payload"]
        check(c12.get("c") == 2 and c12.get("n") == orig["C"]["payload"]["n"] + 198, "the new rule of C ran (%s)" % json.dumps(c12))
        r = x.ok("xgr.fork", {"owner": A, "pid": b_pid, "payload": {"n": 5}, "version": 1, "newRootPid": "13"})
        wait_for("a fork with a given payload completes", lambda: sess(x, 13)["session"]["status"] == "completed", 10)
        check(hist(x, 13, "B")[0]["payload"]["n"] == 50, "a fork with a given payload starts with it")
        refused(x, "xgr.fork", {"owner": A, "sessionId": "10", "pid": "10:1"}, -32004, "payload",
                "a fork of the start step without a payload (its input is not recorded)")
        refused(x, "xgr.fork", {"owner": A, "sessionId": "10", "stepId": "Z"}, -32004, "stepId",
                "a fork from a step that never ran")
        # ---- after a restart: the same
        before = (sess(x, 11)["session"]["forkedFrom"], sess(x, 11)["audit"], sess(x, 10)["audit"], sess(x, 1)["audit"])
        x.stop()
        x.start()
        after = (sess(x, 11)["session"]["forkedFrom"], sess(x, 11)["audit"], sess(x, 10)["audit"], sess(x, 1)["audit"])
        check(before == after, "after a restart forkedFrom and the audit entries are the same")
        # ---- SIGKILL among 40 forks: the new session, its forkedFrom and both entries are one commit, so
        # after a restart every fork that exists has its record and no record names a fork that does not
        answered = []

        def fork_one(r):
            try:
                res = x.rpc("xgr.fork", {"owner": A, "sessionId": "10", "stepId": "B", "version": 1, "newRootPid": str(r)},
                            timeout=10)
                if "result" in res:
                    answered.append(r)
            except Exception:   # the daemon is killed under it
                pass
        ts = [threading.Thread(target=fork_one, args=(r,), daemon=True) for r in range(200, 240)]
        for t in ts:
            t.start()
        wait_for("a first fork answered", lambda: answered, secs=20, every=0.002)
        x.stop(signal.SIGKILL)
        for t in ts:
            t.join(15)
        x.start()
        named = sorted(e["detail"]["forkedTo"]["rootPid"] for e in sess(x, 10)["audit"]
                       if e["kind"] == "fork" and e["detail"]["forkedTo"]["rootPid"] >= 200)
        exists = []
        for r in range(200, 240):
            res = x.rpc("xgr.getSession", {"owner": A, "rootPid": str(r)})
            if "error" in res:
                continue
            exists.append(r)
            v = res["result"]
            ff = v["session"]["forkedFrom"] or {}
            fa = [e for e in v["audit"] if e["kind"] == "forked"]
            if ff.get("rootPid") != 10 or ff.get("step") != "B" or len(fa) != 1:
                fail("fork %d after SIGKILL: forkedFrom %s, %d forked entries" % (r, json.dumps(ff), len(fa)))
        check(exists and set(answered) <= set(exists) and named == exists,
              "after SIGKILL among 40 forks: %d exist, each with forkedFrom and its entry, and the source's fork entries "
              "name exactly them (%d answered before the kill)" % (len(exists), len(answered)))
    finally:
        x.kill()


def permit(key, kind, x, *args):
    out = subprocess.run([XGR, "permit", kind, "--key", key, "--url", x.url] + list(args), capture_output=True, text=True)
    if out.returncode:
        fail("xgr permit: %s" % out.stderr)
    return json.loads(out.stdout)


def console_rpc(x, key, method, params):
    """Sign in to x's console with key (`xgr console --key`, POST /ui/auth/signin) and call method
    at POST /ui/rpc with the session's cookie and CSRF token: the whole answer."""
    out = subprocess.run([XGR, "console", "--key", key, "--url", x.url, "--json"], capture_output=True, text=True)
    if out.returncode:
        fail("xgr console: %s" % out.stderr)
    link = json.loads(out.stdout)
    rq = urllib.request.Request(x.url + "ui/auth/signin", json.dumps({"message": link["message"], "signature":
                                link["signature"]}).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(rq, timeout=10) as r:
        cookie = r.headers["Set-Cookie"].split(";")[0]
        csrf = json.loads(r.read())["csrf"]
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    rq = urllib.request.Request(x.url + "ui/rpc", json.dumps(body).encode(),
                                {"Content-Type": "application/json", "Cookie": cookie, "X-XGR-CSRF": csrf})
    try:
        with urllib.request.urlopen(rq, timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return json.loads(e.read())


def permits():
    def new_key(name):
        path = os.path.join(DIR, name + ".key")
        return path, subprocess.run([XGR, "key", "new", path], capture_output=True, text=True, check=True).stdout.strip().lower()
    key, owner = new_key("owner")
    okey, op = new_key("operator")
    skey, stranger = new_key("stranger")
    x = Xgrd(XGRD, store_url("permits"), DIR, ["--auth", "permits", "--chain-id", "1887", "--operator", op], name="permits")
    # X spawns Y (a hard error unless its payload says Y = "ok") and V, which spawns W waiting an hour
    # (so the session lives)
    b = {"orchestration": {"id": "pr", "structure": {"X": {"rule": "px", "onValid": {"spawns": ["Y", "V"]}},
                                                     "Y": {"rule": "py"}, "V": {"rule": "pv", "onValid": {"spawns": ["W"]}},
                                                     "W": {"rule": "pw"}}},
         "rules": {"px": plain(), "pv": plain(None, 3600), "pw": plain(),
                   "py": {"payload": {"Y": {"type": "string", "default": "error"}}, "rules": ["[Y] == 'ok' || 1 / 0 == 1"],
                          "onValid": {}, "onInvalid": {}}}}
    try:
        x.start()
        xd = permit(key, "xdala", x)
        for k, r in b["rules"].items():
            x.ok("xgr_putRule", {"address": k, "rule": r, "permit": xd})
        h = x.ok("xgr.putOrchestration", {"xrc729": "pr", "orchestration": b["orchestration"], "permit": xd})["hash"]
        sp = permit(key, "session", x, "--session-id", "1", "--ostc-id", "pr", "--ostc-hash", h)
        x.ok("xgr.enqueue", {"owner": owner, "xrc729": "pr", "rootPid": "1", "ostcId": "pr", "init": {"stepId": "X"},
                             "permit": sp})
        wait_for("Y aborts", lambda: any(h["step"] == "Y" and h["status"] == "aborted"
                                         for h in sess(x, 1, owner, xd)["history"]), 10)
        y = [h["pid"] for h in sess(x, 1, owner, xd)["history"] if h["step"] == "Y"][0]
        rp = permit(key, "control", x, "--action", "retry", "--session-id", "1")
        r = x.ok("xgr.retry", {"owner": owner, "pid": y, "payload": {"Y": "ok"}, "permit": rp})
        wait_for("the retried Y is done", lambda: any(h["pid"] == r["newPid"] and h["status"] == "done"
                                                      for h in sess(x, 1, owner, xd)["history"]), 10)
        refused(x, "xgr.retry", {"owner": owner, "pid": y, "payload": {"Y": "ok"}, "permit": rp}, -32007, "permit",
                "the same retry permit again")
        kp = permit(key, "control", x, "--action", "kill", "--session-id", "1")
        refused(x, "xgr.retry", {"owner": owner, "pid": y, "permit": kp}, -32007, "permit.message.action",
                "a retry with a kill permit")
        fp = permit(key, "control", x, "--action", "fork", "--session-id", "1")
        x.ok("xgr.fork", {"owner": owner, "sessionId": "1", "pid": r["newPid"], "newRootPid": "2", "permit": fp})
        refused(x, "xgr.fork", {"owner": owner, "sessionId": "1", "pid": r["newPid"], "newRootPid": "3", "permit": fp},
                -32007, "permit", "the same fork permit again")
        a = [e for e in sess(x, 1, owner, xd)["audit"] if e["kind"] in ("retry", "fork")]
        check([e["kind"] for e in a] == ["retry", "fork"] and all(e["actor"] == owner and e.get("permitDigest") for e in a),
              "the retry and the fork are recorded once each with the signer and the permit's digest")

        # ---- an operator retries and forks the owner's session; anyone else cannot (not even a grantee)
        def v2(k, action):   # a ControlPermitV2 signed by k on behalf of the owner
            return permit(k, "control", x, "--action", action, "--session-id", "1", "--runner", owner)
        x.ok("xgr_manageGrants", {"owner": owner, "sessionId": "1", "permit": permit(key, "xdala", x),
                                  "entries": [{"grantee": stranger, "rights": 7, "expireAt": int(time.time()) + 3600}]})
        before = sess(x, 1, owner, xd)
        refused(x, "xgr.retry", {"owner": owner, "pid": y, "payload": {"Y": "ok"}, "permit": v2(skey, "retry")}, -32007,
                "permit.message.from", "a grantee's (READ+WRITE+MANAGE) retry of the owner's process")
        refused(x, "xgr.fork", {"owner": owner, "sessionId": "1", "pid": r["newPid"], "newRootPid": "4",
                                "permit": v2(skey, "fork")}, -32007, "permit.message.from", "a grantee's fork of the owner's session")
        after = sess(x, 1, owner, xd)
        check(after["processes"] == before["processes"] and after["audit"] == before["audit"],
              "the refused retry and fork changed nothing (processes and audit trail as before)")
        gone = x.rpc("xgr.getSession", {"owner": owner, "rootPid": "4", "permit": xd})
        check(gone.get("error", {}).get("code") == -32004, "the refused fork started no session 4 (%s)" % json.dumps(gone)[:200])
        r2 = x.ok("xgr.retry", {"owner": owner, "pid": y, "payload": {"Y": "ok"}, "permit": v2(okey, "retry")})
        wait_for("the operator's retry of Y is done", lambda: any(h["pid"] == r2["newPid"] and h["status"] == "done"
                                                                  for h in sess(x, 1, owner, xd)["history"]), 10)
        f = x.ok("xgr.fork", {"owner": owner, "sessionId": "1", "pid": r["newPid"], "newRootPid": "3", "permit": v2(okey, "fork")})
        check(f["owner"] == owner and int(f["forkedFrom"]["rootPid"]) == 1, "the operator's fork is a session of the owner's")
        a = [e for e in sess(x, 1, owner, xd)["audit"] if e["kind"] in ("retry", "fork")]
        mine = sorted((e for e in a if e["actor"] == op), key=lambda e: e["kind"])
        check(len(a) == 4 and [e["kind"] for e in mine] == ["fork", "retry"] and
              mine[1]["detail"]["newIter"] == int(r2["newPid"].split(":")[1]),
              "the operator's retry and fork are recorded with the operator as actor (%s)" % json.dumps(a))
        fa = [e for e in sess(x, 3, owner, xd)["audit"] if e["kind"] == "forked"]
        check(len(fa) == 1 and fa[0]["actor"] == op, "the forked session's entry names the operator (%s)" % json.dumps(fa))
        # ---- the console: the signed-in address goes to the same decision
        before = sess(x, 1, owner, xd)
        r = console_rpc(x, skey, "xgr.retry", {"owner": owner, "pid": y, "payload": {"Y": "ok"}})
        e = r.get("error") or {}
        check(e.get("code") == -32007 and (e.get("data") or {}).get("path") == "owner",
              "a signed-in stranger's retry in the console is refused (-32007 at owner): %s" % json.dumps(r)[:300])
        check(sess(x, 1, owner, xd)["audit"] == before["audit"], "the refused console retry stored nothing")
        r = console_rpc(x, okey, "xgr.kill", {"owner": owner, "pid": "1"})
        check(r.get("result", {}).get("ok") is True, "a signed-in operator kills the owner's session 1: %s" % json.dumps(r)[:300])
        v = sess(x, 1, owner, xd)
        check(v["session"]["status"] == "killed" and [e["actor"] for e in v["audit"] if e["kind"] == "kill"] == [op],
              "session 1 is killed, its audit entry names the signed-in operator")
    finally:
        x.kill()


api = Api()
try:
    auth_none(api)
    permits()
finally:
    api.close()
    shutil.rmtree(DIR, ignore_errors=True)
print("test_retry_fork: all passed")
