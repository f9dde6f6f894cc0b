#!/usr/bin/env python3
"""test_names.py — names that cannot be squatted, and sessions that pin their rules (issue 38, finding 8).

Against real xgrds on 127.0.0.1 (docs/SEMANTICS.md, "Names and pins"):

(a) squatting, permit mode, through the CLI a victim uses: tenant B registers registry `local`
    with orchestration `job` and the rule address A's orchestration names — before A does. A then
    deploys its own; A's `xgr enqueue` (default registry, no owner named) runs A's documents and B's
    runs B's (A's rule adds 1, B's adds 1000: the first step's result says whose rule ran). B's
    registry can still be started by naming it (registryOwner), and a read without an owner
    resolves in the caller's namespace.
(b) pins: a session of `gate` (A runs, W waits for a wake-up) on SQLite; W's rule is replaced
    (n + 1 -> n + 1000) and xgrd restarted in between (the session comes back hibernated); the
    wake runs the pinned rule (5 -> 6), a session started after the change runs the new one
    (5 -> 1005); getSession and the listing show bundleHash beside ostcHash, and the pinned one
    differs from the new one. With XGR_PG_URL set (tests/pg/pg_cluster.sh run ...) the same on that
    PostgreSQL database.
(c) a SessionPermit whose ostcHash is the bundle hash (`xgr enqueue --pin-bundle`): accepted while the
    rules are unchanged, refused with -32006 at `ostcHash` once the orchestration's owner replaced a
    rule it resolves; a permit for the orchestration hash is still accepted then.
(d) migration: a store in the layout before namespaces (schema 13: documents under global keys, the
    per-owner alias form "<owner>/<alias>", no bundle_hash column), made by SQL from a store this
    build wrote, opens; its documents are read in their owners' namespaces, the ownerless one in the
    empty namespace, and its session (from before pins) is shown and finishes on the migrated rules.

  test_names.py XGRD XGR SRC_DIR
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from xgrd_harness import Xgrd, check, fail, wait_for  # noqa: E402

XGRD, XGR, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
DIR = tempfile.mkdtemp(prefix="xgr-names-")
PG = os.environ.get("XGR_PG_URL", "")
RULE = "0x00000000000000000000000000000000000000ab"


def rule(add):
    return {"payload": {"n": {"type": "int64", "default": 0}}, "rules": ["[n] >= 0"],
            "onValid": {"payload": {"n": "[n] + %d" % add}}, "onInvalid": {}}


def job_bundle(add, reordered=False):
    """Orchestration `job` (one step A naming RULE) and RULE adding `add`; reordered: other bytes."""
    orch = {"id": "job", "structure": {"A": {"rule": RULE}}}
    if reordered:
        orch = {"structure": {"A": {"rule": RULE}}, "id": "job"}
    return {"orchestration": orch, "rules": {RULE: rule(add)}}


def write(name, doc):
    path = os.path.join(DIR, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def xgr(*args, ok=True):
    out = subprocess.run([XGR] + list(args), capture_output=True, text=True, timeout=60)
    if ok and out.returncode:
        fail("xgr %s: %s%s" % (" ".join(args), out.stdout, out.stderr))
    return out


def new_key(name):
    path = os.path.join(DIR, name + ".key")
    addr = xgr("key", "new", path).stdout.strip().lower()
    return path, addr


def part_a():
    x = Xgrd(XGRD, "memory:", DIR, ["--auth", "permits"], name="a")
    ka, a = new_key("tenant-a")
    kb, b = new_key("tenant-b")
    try:
        x.start()
        url = ["--url", x.url]
        # B squats: registry `local`, orchestration `job`, the rule address A will name
        xgr("deploy", write("b.json", job_bundle(1000, reordered=True)), "--key", kb, *url)
        out = xgr("deploy", write("a.json", job_bundle(1)), "--key", ka, "--json", *url)
        dep = json.loads(out.stdout)
        check(dep["orchestration"]["owner"] == a and dep["rules"][0]["owner"] == a,
              "A's deploy after B's lands in A's namespace (version 1, owner A), not refused as B's")
        check(dep["orchestration"]["version"] == 1 and dep["orchestration"]["bundleHash"].startswith("0x"),
              "... as version 1, answering its bundleHash")
        ea = json.loads(xgr("enqueue", "--key", ka, "--json", *url).stdout)
        eb = json.loads(xgr("enqueue", "--key", kb, "--json", *url).stdout)
        check(ea["owner"] == a and eb["owner"] == b, "both tenants start a session of `local`")
        xp = ["--key", ka]
        wait_for("A's session ends", lambda: json.loads(xgr("show", ea["rootPid"], "--owner", a, "--json", *xp,
                                                            *url).stdout)["session"]["status"] == "completed")
        na = json.loads(xgr("show", ea["rootPid"], "--owner", a, "--json", *xp, *url).stdout)
        nb = json.loads(xgr("show", eb["rootPid"], "--owner", b, "--json", "--key", kb, *url).stdout)
        wait_for("B's session ends", lambda: json.loads(xgr("show", eb["rootPid"], "--owner", b, "--json", "--key", kb,
                                                            *url).stdout)["session"]["status"] == "completed")
        nb = json.loads(xgr("show", eb["rootPid"], "--owner", b, "--json", "--key", kb, *url).stdout)
        pa, pb = step_n(na, "A"), step_n(nb, "A")
        check(pa == 1, "A's session ran A's rule (n = %s; B's rule would make 1000)" % pa)
        check(pb == 1000, "B's session ran B's rule (n = %s)" % pb)
        check(na["session"]["ostcHash"] == dep["orchestration"]["hash"], "A's session runs A's orchestration")
        check(na["session"]["bundleHash"] == dep["orchestration"]["bundleHash"], "... and pins A's bundle")
        # reads: the caller's namespace by default, another's when named
        ga = x.ok("xgr.getOrchestration", {"from": a})
        gb = x.ok("xgr.getOrchestration", {"owner": b})
        check(ga["owner"] == a and gb["owner"] == b and ga["hash"] != gb["hash"], "reads resolve per namespace")
        r = x.rpc("xgr.getRule", {"address": RULE})
        check("error" in r and r["error"]["code"] == -32004, "a read naming nobody finds neither tenant's rule")
        # A may start B's orchestration only as one of its executors: named, then refused by B's list
        out = xgr("enqueue", "--key", ka, "--registry-owner", b, "--json", *url, ok=False)
        check(out.returncode and "executors" in out.stderr, "A naming B's registry is refused: not B's executor")
    finally:
        x.kill()


def step_n(s, step):
    """n in the payload of step's result in the history of session answer s (None: not run yet)."""
    h = [e for e in s["history"] if e["step"] == step and e["status"] == "done" and "payload" in e]
    return h[-1]["payload"].get("n") if h else None


def gate_rules(w_add):
    g = json.load(open(os.path.join(SRC, "tests", "daemon", "gate.json")))
    g["rules"]["W"]["onValid"]["payload"]["n"] = "[n] + %d" % w_add
    return g


def part_b(store, label):
    owner = "0x00000000000000000000000000000000000000aa"
    x = Xgrd(XGRD, store, DIR, ["--hibernate-after", "0"], name="b" + label)
    try:
        x.start()
        x.deploy(gate_rules(1), **{"from": owner})
        e1 = x.ok("xgr.enqueue", {"owner": owner, "ostcId": "gate", "init": {"stepId": "A"}})
        wait_for("session 1 waits in W", lambda: any(p.get("resumeStep") == "W" and p["status"] == "waiting" for p in
                                                    x.ok("xgr.getSession", {"owner": owner, "rootPid": e1["rootPid"]})["processes"]))
        pinned = x.ok("xgr.getSession", {"owner": owner, "rootPid": e1["rootPid"]})["session"]["bundleHash"]
        check(pinned == e1["bundleHash"] and pinned.startswith("0x"), "%s: the session pins its bundle (%s)" % (label, pinned[:12]))
        # the owner replaces W's rule; xgrd restarts in between
        x.ok("xgr_putRule", [{"from": owner, "address": "W", "rule": gate_rules(1000)["rules"]["W"]}])
        check(x.stop() == 0, "%s: xgrd stops" % label)
        x.start()
        e2 = x.ok("xgr.enqueue", {"owner": owner, "ostcId": "gate", "init": {"stepId": "A"}})
        check(e2["bundleHash"] != pinned and e2["ostcHash"] == e1["ostcHash"],
              "%s: a new session pins another bundle (same orchestration, new rule)" % label)
        for root in (e1["rootPid"], e2["rootPid"]):
            wait_for("session %s waits in W" % root, lambda r=root: any(
                p.get("resumeStep") == "W" and p["status"] == "waiting" for p in
                x.ok("xgr.getSession", {"owner": owner, "rootPid": r})["processes"]))
            x.ok("xgr_wakeUpProcess", {"from": owner, "processId": "%s:2" % root, "payload": {"n": 5}})

        def w_n(root):
            return step_n(x.ok("xgr.getSession", {"owner": owner, "rootPid": root}), "W")
        for root in (e1["rootPid"], e2["rootPid"]):
            wait_for("session %s's W ran" % root, lambda r=root: w_n(r) is not None, secs=15)
        check(w_n(e1["rootPid"]) == 6, "%s: the session started before the change ran its pinned rule after a restart "
              "(5 -> %s; the current rule makes 1005)" % (label, w_n(e1["rootPid"])))
        check(w_n(e2["rootPid"]) == 1005, "%s: the session started after it runs the new rule (5 -> %s)" % (label, w_n(e2["rootPid"])))
        lst = x.ok("xgr.listSessions", {"owner": owner, "view": "sessions"})
        text = json.dumps(lst)
        check(pinned in text and e2["bundleHash"] in text, "%s: the listing shows each session's bundleHash" % label)
    finally:
        x.kill()


def part_c():
    x = Xgrd(XGRD, "memory:", DIR, ["--auth", "permits"], name="c")
    k, a = new_key("owner-c")
    try:
        x.start()
        url = ["--url", x.url]
        xgr("deploy", write("c.json", job_bundle(1)), "--key", k, *url)
        first = json.loads(xgr("enqueue", "--key", k, "--pin-bundle", "--json", *url).stdout)
        check(first["ack"] == "queued" and first["bundleHash"].startswith("0x"),
              "a SessionPermit signing the bundle hash is accepted while the rules are unchanged")
        bundle = first["bundleHash"]
        # the orchestration's owner replaces the rule it names
        xgr("put-rule", write("r2.json", rule(7)), "--address", RULE, "--key", k, *url)
        nxt = x.ok("xgr_getNextProcessId", {"from": a})["nextProcessId"]
        permit = json.loads(xgr("permit", "session", "--key", k, "--url", x.url, "--ostc-id", "",
                                "--ostc-hash", bundle, "--session-id", str(nxt)).stdout)
        r = x.rpc("xgr.enqueue", {"owner": a, "init": {"stepId": "A"}, "permit": permit})
        err = r.get("error") or {}
        check(err.get("code") == -32006 and err.get("data", {}).get("path") == "ostcHash" and RULE in err.get("message", ""),
              "the same bundle hash signed again is refused after the rule changed: -32006 at ostcHash naming the rule "
              "(%s)" % json.dumps(err)[:240])
        check(x.ok("xgr_getNextProcessId", {"from": a})["nextProcessId"] == nxt, "... and nothing was started")
        after = json.loads(xgr("enqueue", "--key", k, "--json", *url).stdout)
        check(after["ack"] == "queued" and after["bundleHash"] != bundle,
              "a permit for the orchestration hash is accepted (the rules current now are pinned)")
    finally:
        x.kill()


def part_d():
    path = os.path.join(DIR, "old.db")
    owner = "0x00000000000000000000000000000000000000aa"
    x = Xgrd(XGRD, "sqlite:" + path, DIR, [], name="d")
    try:
        x.start()
        x.deploy(gate_rules(1), **{"from": owner})
        x.ok("xgr_putRule", [{"address": "shared", "rule": rule(3)}])   # no owner: the empty namespace
        e = x.ok("xgr.enqueue", {"owner": owner, "ostcId": "gate", "init": {"stepId": "A"}})
        wait_for("the session waits in W", lambda: any(p.get("resumeStep") == "W" and p["status"] == "waiting" for p in
                                                      x.ok("xgr.getSession", {"owner": owner, "rootPid": e["rootPid"]})["processes"]))
        check(x.stop() == 0, "xgrd stops")
    finally:
        x.kill()
    # the layout before namespaces (schema 13): global keys, "<owner>/<alias>" for permit mode's alias
    # names, no bundle_hash column, no manifests
    db = sqlite3.connect(path)
    db.executescript(
        "DELETE FROM orchestrations WHERE id LIKE '#%';"
        "UPDATE orchestrations SET id = substr(id, 44) WHERE substr(id, 43, 1) = ':';"
        "UPDATE rules SET id = substr(id, 1, 42) || '/' || substr(id, 44) WHERE substr(id, 43, 1) = ':' AND id NOT LIKE '%:0x%';"
        "UPDATE rules SET id = substr(id, 44) WHERE substr(id, 43, 1) = ':';"
        "ALTER TABLE sessions DROP COLUMN bundle_hash;"
        "DROP TABLE session_audit;"
        "ALTER TABLE sessions DROP COLUMN forked_from;"
        "DROP TABLE session_grants;"
        "DELETE FROM schema_version WHERE version >= 14;")
    db.commit()
    ids = sorted(r[0] for r in db.execute("SELECT id FROM rules UNION ALL SELECT id FROM orchestrations"))
    db.close()
    check(ids == sorted(["0x00000000000000000000000000000000000000a1", owner + "/W", "shared", "local", "local/gate"]),
          "the old layout made by SQL: %s" % ids)
    y = Xgrd(XGRD, "sqlite:" + path, DIR, [], name="d2")
    try:
        y.start()
        o = y.ok("xgr.getOrchestration", {"owner": owner, "ostcId": "gate"})
        check(o["owner"] == owner and o["version"] == 1 and o["ostcId"] == "gate", "the migrated orchestration reads in its owner's namespace")
        w = y.ok("xgr.getRule", {"address": "W", "owner": owner})
        a1 = y.ok("xgr.getRule", {"address": "0x00000000000000000000000000000000000000a1", "from": owner})
        check(w["owner"] == owner and a1["owner"] == owner, "its rules too (the alias from \"<owner>/W\", the address)")
        sh = y.ok("xgr.getRule", {"address": "shared"})
        check(sh["owner"] == "" and sh["version"] == 1, "the ownerless rule stays in the empty namespace")
        s = y.ok("xgr.getSession", {"owner": owner, "rootPid": e["rootPid"]})["session"]
        check(s["status"] == "running" and s["bundleHash"] == "" and s["ostcHash"] == e["ostcHash"],
              "the session from before pins is shown (no bundleHash)")
        y.ok("xgr_wakeUpProcess", {"from": owner, "processId": "%s:2" % e["rootPid"], "payload": {"n": 5}})
        wait_for("the migrated session ends", lambda: y.ok("xgr.getSession", {"owner": owner, "rootPid": e["rootPid"]})
                 ["session"]["status"] == "completed", secs=15)
        wn = step_n(y.ok("xgr.getSession", {"owner": owner, "rootPid": e["rootPid"]}), "W")
        check(wn == 6, "it finished on the migrated rules (5 -> %s)" % wn)
    finally:
        y.kill()


try:
    part_a()
    part_b(PG or "sqlite:" + os.path.join(DIR, "b.db"), "postgresql" if PG else "sqlite")
    part_c()
    if not PG:
        part_d()
finally:
    shutil.rmtree(DIR, ignore_errors=True)
print("test_names: ok")
