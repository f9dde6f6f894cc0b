#!/usr/bin/env python3
"""test_migrate.py — moving running sessions to another version (issue 36, xgr.migrateSessions).

A real xgrd (--auth none) on a temporary SQLite store. Scenarios:
  - kyc: a KYC-like session waits three days at `check`, whose rule has a bug (every customer is
    rejected); the fixed version is deployed under the same registry; a dry run says it is safe and
    changes nothing; the migration moves the session (its pin, the audit entry with old, new, map and
    forced false); woken, it runs the fixed rule and completes through `approve`. A second session,
    not migrated, still runs the old rule (it is rejected).
  - join: a join J waits for B (delivered) and C, which only the waiting P can still spawn. A new
    version where P never spawns C is refused (a static problem naming the join); one where P spawns
    C only when it ends invalid is unsafe, with the trace of the run that leaves J unfulfillable
    (P valid); neither is applied (pin, processes and audit unchanged); with force the second moves
    and is recorded as forced.
  - safe point: a migration asked while a step runs (its API call is held by the test's server)
    answers only after the step finished; the step's result is applied under the old version and the
    audit entry comes after it.
  - crash: xgrd is SIGKILLed while it migrates 30 sessions (a step renamed through the map); after a
    restart every session is entirely on the old version (old pin, old step, no audit entry) or
    entirely on the new one; migrating again moves the rest.
  - the CLI: `xgr migrate` (text and exit codes), `xgr migrate-check` on the bundles (exit 1 with
    the trace, 0 for the fix) and with --store on the store file; `xgr migrate-check --url --registry`
    reads the same sessions from a running xgrd (xgr.liveSessions) and answers exactly as --store
    (a safe and an unsafe pair of versions, the whole JSON answer equal), page by page.
  - permits: xgr.liveSessions under --auth permits: the owner's key reads its sessions (migrate-check
    --url --key), an operator's every owner's, another signer's is refused naming the owner (exit 2).

  - pg, two nodes: sessions started on node n1 (its leases) are migrated through node n2: the call
    is forwarded to n1 as kill and pause are (a dry run too, its verdict coming back), each session
    moves with its audit entry naming n2, and woken through n2 it completes under the new rule.

  test_migrate.py XGRD XGR [sqlite|pg]   (pg: on schemas of the throwaway PostgreSQL of
  tests/pg/pg_cluster.sh, XGR_PG_URL; the migration's one commit there too)
"""
import http.server
import json
import os
import re
import urllib.request
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True
from xgrd_harness import Xgrd, check, fail, pg_schema_url, psql, wait_for  # noqa: E402

XGRD, XGR = sys.argv[1], sys.argv[2]
MODE = sys.argv[3] if len(sys.argv) > 3 else "sqlite"
DIR = tempfile.mkdtemp(prefix="xgr-migrate-")
A = "0x00000000000000000000000000000000000000a1"

ROK = {"payload": {}, "rules": [], "onValid": {}, "onInvalid": {}}
RWAIT = {"payload": {}, "rules": [], "onValid": {"waitSec": 3600}, "onInvalid": {}}
DAYS3 = 3 * 86400


def kyc(fixed, rename=False):
    chk = "check2" if rename else "check"
    return {"orchestration": {"id": "kyc", "structure": {
        "collect": {"rule": "rcollect", "onValid": {"spawns": [chk]}},
        chk: {"rule": "rcheck_v2" if fixed else "rcheck", "onValid": {"spawns": ["approve"]},
              "onInvalid": {"spawns": ["reject"]}},
        "approve": {"rule": "rok"}, "reject": {"rule": "rok"}}},
        "rules": {"rcollect": {"payload": {"Score": {"type": "int64", "default": 80}}, "rules": ["[Score] > 0"],
                               "onValid": {"waitSec": DAYS3}, "onInvalid": {}},
                  "rcheck": {"payload": {"Score": {"type": "int64", "default": 0}}, "rules": ["[Score] >= 900"],
                             "onValid": {}, "onInvalid": {}},
                  "rcheck_v2": {"payload": {"Score": {"type": "int64", "default": 0}}, "rules": ["[Score] >= 50"],
                                "onValid": {}, "onInvalid": {}},
                  "rok": ROK}}


def joins(p_branch):
    p = {"rule": "rok"}
    p.update(p_branch)
    return {"orchestration": {"id": "joins", "structure": {
        "a": {"rule": "rok", "onValid": {"spawns": ["b", "q"], "join": {
            "joinid": "J", "mode": "all", "waitonjoin": "drain", "from": [{"node": "b", "when": "any"},
                                                                          {"node": "c", "when": "any"}]}}},
        "b": {"rule": "rok"}, "q": {"rule": "rwait", "onValid": {"spawns": ["p"]}}, "p": p, "c": {"rule": "rok"},
        "J": {"rule": "rok"}}},
        "rules": {"rok": ROK, "rwait": RWAIT}}


def sess(x, root):
    return x.ok("xgr.getSession", {"owner": A, "rootPid": str(root)})


def start(x, reg, root, step, payload=None):
    p = {"owner": A, "xrc729": reg, "rootPid": str(root), "init": {"stepId": step}}
    if payload:
        p["init"]["payload"] = payload
    x.ok("xgr.enqueue", p)


def waits_at(x, root, step):
    wait_for("session %d waits at %s" % (root, step),
             lambda: any(p.get("resumeStep") == step and p["status"] == "waiting" for p in sess(x, root)["processes"]))


def live_steps(x, root):
    return sorted(p.get("resumeStep") for p in sess(x, root)["processes"] if p["status"] in ("waiting", "running"))


def audits(x, root, kind="migrate"):
    return [e for e in sess(x, root)["audit"] if e["kind"] == kind]


def migrate(x, roots, to, **kw):
    p = {"owner": A, "sessions": [str(r) for r in roots], "to": to}
    p.update(kw)
    return x.ok("xgr.migrateSessions", p, timeout=120)


def store_url(name):
    """The store of one xgrd: a SQLite file, or (pg) a schema of the throwaway PostgreSQL."""
    if MODE == "pg":
        psql(os.environ["XGR_PG_URL"], "CREATE SCHEMA IF NOT EXISTS migrate_" + name)
        return pg_schema_url(os.environ["XGR_PG_URL"], "migrate_" + name)
    return "sqlite:" + os.path.join(DIR, name + ".db")


def write(name, doc):
    path = os.path.join(DIR, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def xgr(*args):
    return subprocess.run([XGR] + list(args), capture_output=True, text=True, timeout=120)


def scenario_kyc(x):
    x.deploy(kyc(False), "kyc", **{"from": A})
    for r in (1, 2):
        start(x, "kyc", r, "collect", {"Score": 80})
    for r in (1, 2):
        waits_at(x, r, "check")
    old_hash = sess(x, 1)["session"]["bundleHash"]
    x.deploy(kyc(True), "kyc", **{"from": A})
    dry = migrate(x, [1], "kyc", dryRun=True)
    check(dry["sessions"][0]["status"] == "safe" and dry["migrated"] == 0, "a dry run says session 1 can move (%s)" %
          json.dumps(dry["sessions"][0])[:300])
    check(sess(x, 1)["session"]["bundleHash"] == old_hash and audits(x, 1) == [], "the dry run changed nothing")
    r = migrate(x, [1], "kyc")
    check(r["migrated"] == 1 and r["sessions"][0]["status"] == "migrated", "session 1 migrated (%s)" % json.dumps(r)[:300])
    s1 = sess(x, 1)
    check(s1["session"]["bundleHash"] not in ("", old_hash), "session 1's pin is the new bundle's")
    a = audits(x, 1)
    check(len(a) == 1, "one migrate audit entry")
    d = a[0]["detail"] if isinstance(a[0]["detail"], dict) else json.loads(a[0]["detail"])
    check(d["oldBundle"] == old_hash and d["newBundle"] == s1["session"]["bundleHash"] and d["forced"] is False
          and d["map"] == {}, "the entry names old, new, the map and forced false (%s)" % json.dumps(d))
    check(live_steps(x, 1) == ["check"], "session 1 still waits at check, now under the fixed rule")
    check(sess(x, 2)["session"]["bundleHash"] == old_hash, "session 2 (not migrated) stays on the old version")
    for r in (1, 2):
        x.ok("xgr_wakeUpProcess", {"owner": A, "processId": "%d:2" % r})
    for r in (1, 2):
        wait_for("session %d ends" % r, lambda r=r: sess(x, r)["session"]["status"] == "completed")
    ran = lambda r: [h.get("step") for h in sess(x, r)["history"]]
    check("approve" in ran(1) and "reject" not in ran(1), "session 1 ran the fixed rule: approved (%s)" % ran(1))
    check("reject" in ran(2) and "approve" not in ran(2), "session 2 ran the old rule: rejected (%s)" % ran(2))


def scenario_join(x):
    x.deploy(joins({"onValid": {"spawns": ["c"]}}), "joins", **{"from": A})
    start(x, "joins", 11, "a")
    waits_at(x, 11, "p")
    wait_for("b delivered its piece: only J (open) and p are live", lambda: live_steps(x, 11) == ["J", "p"])
    old = sess(x, 11)
    old_hash, old_procs = old["session"]["bundleHash"], live_steps(x, 11)
    # the only producer of C removed: refused statically
    x.deploy(joins({}), "joins", **{"from": A})
    r = migrate(x, [11], "joins")
    it = r["sessions"][0]
    check(it["status"] == "refused" and "join J" in it["message"], "removing C's only producer is refused (%s)" % it["message"])
    # C only when P ends invalid: unsafe, with the run that shows it
    x.deploy(joins({"onInvalid": {"spawns": ["c"]}}), "joins", **{"from": A})
    r = migrate(x, [11], "joins")
    it = r["sessions"][0]
    check(it["status"] == "unsafe" and r["unsafe"] == 1, "P spawning C only when invalid is unsafe (%s)" % json.dumps(it)[:400])
    added = it["check"]["added"]
    f = [f for f in added if f["kind"] == "join_unfulfillable"]
    check(f and f[0]["trace"] and f[0]["trace"][-1].get("finish") and f[0]["trace"][-1]["step"] == "p"
          and f[0]["trace"][-1]["outcome"] == "valid", "its trace ends with P finishing valid (%s)" % json.dumps(f)[:400])
    check(sess(x, 11)["session"]["bundleHash"] == old_hash and live_steps(x, 11) == old_procs and audits(x, 11) == [],
          "neither was applied: pin, processes and history unchanged")
    # forced: moved and recorded as forced
    r = migrate(x, [11], "joins", force=True)
    check(r["sessions"][0]["status"] == "forced", "forced, it moves (%s)" % json.dumps(r["sessions"][0])[:200])
    d = audits(x, 11)[0]["detail"]
    d = d if isinstance(d, dict) else json.loads(d)
    check(d["forced"] is True and d["safe"] is False, "the entry says forced")


class HeldApi:
    """GET answers {"v": 1} once release is set; entered is set when a request came in."""

    def __init__(self):
        self.entered, self.release = threading.Event(), threading.Event()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                outer.entered.set()
                outer.release.wait(60)
                body = b'{"v": 1}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.release.set()
        self.srv.shutdown()


def slow_bundle(api, v2):
    call = {"payload": {}, "apiCalls": [{"name": "slow", "method": "GET", "urlTemplate": "http://127.0.0.1:%d/x" % api,
                                         "contentType": "json", "timeoutMs": 60000,
                                         "extractMap": {"V": {"type": "int64", "default": 0, "value": "int(resp.v)"}}}],
            "rules": ["[V] == 1"], "onValid": {"payload": {"V": "[V]"}, "waitSec": 3600}, "onInvalid": {}}
    return {"orchestration": {"id": "slow", "structure": {
        "s": {"rule": "rslow", "onValid": {"spawns": ["after"]}}, "after": {"rule": "rok2" if v2 else "rok"}}},
        "rules": {"rslow": call, "rok": ROK, "rok2": ROK}}


def scenario_safe_point(x, api):
    x.deploy(slow_bundle(api.port, False), "slow", **{"from": A})
    start(x, "slow", 21, "s")
    check(api.entered.wait(20), "the step's API call is in flight (the step runs)")
    x.deploy(slow_bundle(api.port, True), "slow", **{"from": A})
    out = {}
    t = threading.Thread(target=lambda: out.update(r=migrate(x, [21], "slow")))
    t.start()
    t.join(0.5)
    check(t.is_alive(), "the migration waits while the step runs")
    api.release.set()
    t.join(60)
    check(not t.is_alive() and out["r"]["sessions"][0]["status"] == "migrated", "then it migrates (%s)" %
          json.dumps(out.get("r"))[:300])
    text = urllib.request.urlopen(x.url + "metrics", timeout=5).read().decode()
    got = {o: float(re.search(r'^xgr_migrations_total\{outcome="%s"\} (\S+)$' % o, text, re.M).group(1))
           for o in ("migrated", "forced", "unsafe", "refused", "checked")}
    check(got == {"migrated": 2, "forced": 1, "unsafe": 1, "refused": 1, "checked": 1},
          "xgr_migrations_total counts each outcome (%s)" % got)
    s = sess(x, 21)
    hist = [h for h in s["history"] if h.get("step") == "s"]
    a = audits(x, 21)
    check(hist and hist[0]["status"] == "done" and a and a[0]["sessionAt"] >= hist[0]["finishedAt"],
          "the running step finished under the old version before the switch (step ended %s, switch at %s)" %
          (hist and hist[0].get("finishedAt"), a and a[0].get("sessionAt")))
    check(live_steps(x, 21) == ["after"], "its child waits under the new version")


def scenario_crash():
    x = Xgrd(XGRD, store_url("crash"), DIR, name="crash")
    x.start()
    try:
        x.deploy(kyc(False), "kyc", **{"from": A})
        n = 30
        for r in range(1, n + 1):
            start(x, "kyc", r, "collect", {"Score": 80})
        for r in range(1, n + 1):
            waits_at(x, r, "check")
        old_hash = sess(x, 1)["session"]["bundleHash"]
        x.deploy(kyc(True, rename=True), "kyc", **{"from": A})
        def go():
            try:
                x.rpc("xgr.migrateSessions", {"owner": A, "sessions": [str(r) for r in range(1, n + 1)], "to": "kyc",
                                              "map": {"check": "check2"}}, timeout=60)
            except Exception:   # the daemon is killed under it
                pass
        t = threading.Thread(target=go)
        t.daemon = True
        t.start()
        wait_for("a first session moved", lambda: any(audits(x, r) for r in (1, 2, 3)), secs=30, every=0.005)
        x.stop(signal.SIGKILL)
    finally:
        x.kill()
    x.start()
    try:
        moved = 0
        for r in range(1, n + 1):
            s = sess(x, r)
            steps, a = live_steps(x, r), audits(x, r)
            if s["session"]["bundleHash"] == old_hash:
                check(steps == ["check"] and a == [], "session %d is entirely on the old version" % r, ) if r == 1 else None
                if steps != ["check"] or a != []:
                    fail("session %d: old pin but %s, %d audit entries" % (r, steps, len(a)))
            else:
                moved += 1
                if steps != ["check2"] or len(a) != 1:
                    fail("session %d: new pin but %s, %d audit entries" % (r, steps, len(a)))
        check(moved >= 1, "after SIGKILL: %d sessions entirely on the new version, %d entirely on the old one" % (moved, n - moved))
        v = {g["bundleHash"]: g for g in x.ok("xgr.listVersions", {"owner": A, "registry": "kyc"})["versions"]}
        check(len(v) == (2 if moved < n else 1) and v.get(old_hash, {}).get("waiting") == ({"check": n - moved} if moved < n else None)
              and sum(g["sessions"] for g in v.values()) == n,
              "xgr.listVersions: %d sessions on the old version waiting at check, %d on the new one" % (n - moved, moved))
        r = x.ok("xgr.migrateSessions", {"owner": A, "filter": {"bundleHash": old_hash}, "to": "kyc", "map": {"check": "check2"}},
                 timeout=120)
        check(r["migrated"] == n - moved, "migrating again moves the other %d" % (n - moved))
        check(all(live_steps(x, r) == ["check2"] for r in range(1, n + 1)), "every session waits at check2 now")
        global NEW_BUNDLE
        NEW_BUNDLE = sess(x, 1)["session"]["bundleHash"]
        v = x.ok("xgr.listVersions", {"owner": A})["versions"]
        check(len(v) == 1 and v[0]["bundleHash"] == NEW_BUNDLE and v[0]["sessions"] == n and v[0]["waiting"] == {"check2": n},
              "xgr.listVersions: one version now, %d sessions waiting at check2" % n)
    finally:
        x.stop()


def scenario_cli():
    old, fixed = write("kyc_old.json", kyc(False)), write("kyc_new.json", kyc(True, rename=True))
    jo, jc = write("j_old.json", joins({"onValid": {"spawns": ["c"]}})), write("j_cond.json", joins({"onInvalid": {"spawns": ["c"]}}))
    r = xgr("versions", "--store", store_url("crash"))
    check(r.returncode == 0 and NEW_BUNDLE in r.stdout and "30 live sessions" in r.stdout and "check2" in r.stdout,
          "xgr versions --store prints the version, its 30 sessions and where they wait (%s)" % (r.stdout + r.stderr)[-300:])
    r = xgr("migrate-check", old, fixed)
    check(r.returncode == 1 and "check" in r.stdout, "migrate-check without the map: check has no target (exit 1)")
    r = xgr("migrate-check", old, fixed, "--map", "check=check2")
    check(r.returncode == 0 and r.stdout.startswith("safe:"), "with --map check=check2 every state is safe (%s)" % r.stdout[-200:])
    r = xgr("migrate-check", jo, jc, "--json")
    j = json.loads(r.stdout)
    check(r.returncode == 1 and j["unsafe"] >= 1 and any(f["kind"] == "join_unfulfillable" and f["trace"]
                                                         for s in j["states"] for f in s["added"]),
          "migrate-check of the join versions: unsafe with a trace (exit 1)")
    r = xgr("migrate-check", old, fixed, "--map", "nosuch=check2")
    check(r.returncode == 2 and "nosuch" in r.stderr, "a map naming no step: exit 2 naming it")
    r = xgr("migrate-check", fixed, old, "--map", "check2=check", "--store", store_url("crash"),
            "--hash", NEW_BUNDLE, "--json")
    j = json.loads(r.stdout) if r.stdout.startswith("{") else {}
    check(r.returncode == 0 and j.get("checked") == 30 and j.get("safe") == 30 and j.get("explored") == 1,
          "migrate-check --store --hash: the 30 live sessions of the store, safe, one exploration for the 30 equal states (%s)"
          % (r.stderr or r.stdout)[-300:])
    # the same sessions read from a running xgrd on the same store (xgr.liveSessions): the same answer
    unsafe_new = write("kyc_plain.json", kyc(True))
    by_store = {}
    for name, args in (("safe", [fixed, old, "--map", "check2=check"]), ("unsafe", [fixed, unsafe_new])):
        r = xgr("migrate-check", *args, "--store", store_url("crash"), "--hash", NEW_BUNDLE, "--json")
        by_store[name] = (r.returncode, json.loads(r.stdout) if r.stdout.startswith("{") else r.stderr)
    check(by_store["unsafe"][0] == 1 and by_store["unsafe"][1]["unsafe"] == 30,
          "--store: without a target for check2 every session is unsafe (exit 1)")
    check(all(x["problems"][0]["path"] == 'processes["%d:2"].step' % x["rootPid"] for x in by_store["unsafe"][1]["sessions"]),
          "each session's problem names its own process, though the 30 equal states share one verdict")
    x = Xgrd(XGRD, store_url("crash"), DIR, name="crash-url")
    x.start()
    try:
        for name, args in (("safe", [fixed, old, "--map", "check2=check"]), ("unsafe", [fixed, unsafe_new])):
            r = xgr("migrate-check", *args, "--url", x.url, "--registry", "kyc", "--owner", A, "--hash", NEW_BUNDLE, "--json")
            got = (r.returncode, json.loads(r.stdout) if r.stdout.startswith("{") else r.stderr)
            check(got == by_store[name], "migrate-check --url --registry (%s pair): exit %d and the JSON answer of --store "
                  "(%s)" % (name, by_store[name][0], str(got)[-300:]))
        r = xgr("migrate-check", fixed, unsafe_new, "--url", x.url, "--registry", "kyc", "--hash", NEW_BUNDLE)
        check(r.returncode == 1 and "UNSAFE: 30 live sessions on OLD: 0 safe, 30 unsafe" in r.stdout
              and "UNSAFE session %s/1\n" % A in r.stdout,
              "in text, each unsafe session named, as with --store (%s)" % r.stdout[-200:])
        # paging: 30 sessions by 7 (between rootPids), none twice, none missed
        seen, before = [], None
        while True:
            p = {"owner": A, "registry": "kyc", "limit": 7}
            if before:
                p["beforeRootPid"] = before
            page = x.ok("xgr.liveSessions", p)
            seen += [int(j["session"]["rootPid"]) for j in page["sessions"]]
            before = page["nextBeforeRootPid"]
            if not before:
                break
        check(sorted(seen) == list(range(1, 31)), "xgr.liveSessions pages of 7 give each of the 30 sessions once (%s)" % seen)
        check(x.ok("xgr.liveSessions", {"owner": A, "registry": "nosuch"})["sessions"] == [],
              "another registry: no sessions")
        e = x.rpc("xgr.liveSessions", {"owner": A, "registry": "kyc", "limit": 101}).get("error", {})
        check(e.get("code") == -32005 and e.get("data", {}).get("path") == "limit", "limit 101: -32005 at limit (%s)" % e)
        e = x.rpc("xgr.liveSessions", {"owner": A}).get("error", {})
        check(e.get("data", {}).get("path") == "registry", "no registry: refused at registry (%s)" % e)
        r = xgr("migrate-check", fixed, old, "--url", x.url)
        check(r.returncode == 2 and "--registry" in r.stderr, "--url without --registry: exit 2 naming --registry")
    finally:
        x.stop()
    r = xgr("migrate-check", fixed, old, "--url", x.url, "--registry", "kyc")
    check(r.returncode == 2 and "cannot reach xgrd" in r.stderr, "xgrd gone: exit 2 (%s)" % r.stderr.strip()[-200:])


def key(name):
    path = os.path.join(DIR, name + ".key")
    return path, subprocess.run([XGR, "key", "new", path], capture_output=True, text=True, check=True).stdout.strip().lower()


def scenario_permits():
    """--auth permits: migrate-check --url reads with the caller's permit (xgr.liveSessions, READ)."""
    (okey, owner), (xkey, other), (pkey, oper) = key("owner"), key("other"), key("operator")
    x = Xgrd(XGRD, store_url("permits"), DIR, ["--auth", "permits", "--chain-id", "1887", "--operator", oper], name="permits")
    x.start()
    try:
        xd = subprocess.run([XGR, "permit", "xdala", "--key", okey, "--url", x.url], capture_output=True, text=True)
        xd = json.loads(xd.stdout)
        b = kyc(False)
        for k, rule in b["rules"].items():
            x.ok("xgr_putRule", {"address": k, "rule": rule, "permit": xd})
        x.ok("xgr.putOrchestration", {"xrc729": "kyc", "orchestration": b["orchestration"], "permit": xd})
        env = dict(os.environ, XGR_URL=x.url.rstrip("/"))
        for r in (1, 2):
            out = subprocess.run([XGR, "enqueue", "--key", okey, "--owner", owner, "--root", str(r), "--registry", "kyc",
                                  "--step", "collect", "--payload", '{"Score": 80}'], capture_output=True, text=True, env=env,
                                 timeout=30)
            check(out.returncode == 0, "session %d started with a signed permit (%s)" % (r, out.stderr.strip()))
        old, fixed = write("kyc_old.json", kyc(False)), write("kyc_fixed.json", kyc(True))
        run = lambda k, *extra: xgr("migrate-check", old, fixed, "--url", x.url, "--registry", "kyc", "--key", k, "--json",
                                    *extra)
        def two_checked():
            r = run(okey)
            return r.returncode == 0 and json.loads(r.stdout)["checked"] == 2 and r
        wait_for("the owner's key: both sessions checked, safe", two_checked, secs=20, every=0.2)
        r = run(okey)
        j = json.loads(r.stdout)
        check(sorted(s["rootPid"] for s in j["sessions"]) == [1, 2] and all(s["owner"] == owner for s in j["sessions"]),
              "the owner reads its own sessions (%s)" % r.stdout[-200:])
        r = run(xkey, "--owner", owner)
        check(r.returncode == 2 and "may not read the sessions of " + owner in r.stderr and not r.stdout,
              "another signer naming the owner is refused, exit 2 (%s)" % r.stderr.strip()[-300:])
        r = run(xkey)
        check(r.returncode == 0 and json.loads(r.stdout)["checked"] == 0, "another signer without --owner reads its own: none")
        r = run(pkey)
        check(r.returncode == 0 and json.loads(r.stdout)["checked"] == 2, "an operator reads every owner's sessions (%s)" %
              (r.stdout + r.stderr)[-200:])
        r = run(pkey, "--owner", owner)
        check(r.returncode == 0 and json.loads(r.stdout)["checked"] == 2, "an operator reads the owner's by name")
        # xgr versions: the owner's and an operator's, nobody else's (xgr.listVersions was open to any signer)
        ver = lambda k, *extra: xgr("versions", "--url", x.url, "--key", k, "--json", *extra)
        r = ver(okey)
        check(r.returncode == 0 and sum(v["sessions"] for v in json.loads(r.stdout)) == 2,
              "xgr versions with the owner's key: its two sessions (%s)" % (r.stdout + r.stderr)[-200:])
        r = ver(xkey, "--owner", owner)
        check(r.returncode == 1 and "-32007" in r.stderr, "another signer's xgr versions of the owner: -32007 (%s)" %
              (r.stdout + r.stderr)[-200:])
        r = ver(pkey, "--owner", owner)
        check(r.returncode == 0 and sum(v["sessions"] for v in json.loads(r.stdout)) == 2,
              "an operator's xgr versions of the owner (%s)" % (r.stdout + r.stderr)[-200:])
        # xgr migrate with --key: the CLI signs a ControlPermit (action migrate) for the one session
        x.ok("xgr.putOrchestration", {"xrc729": "kyc", "orchestration": kyc(True)["orchestration"], "permit": xd})
        for k, rule in kyc(True)["rules"].items():
            x.ok("xgr_putRule", {"address": k, "rule": rule, "permit": xd})
        r = xgr("migrate", "--url", x.url, "--key", okey, "--owner", owner, "--session", "1", "--to", "kyc", "--dry-run", "--json")
        check(r.returncode == 0 and json.loads(r.stdout)["sessions"][0]["status"] in ("safe", "unchanged"),
              "xgr migrate --dry-run with the owner's key (%s)" % (r.stdout + r.stderr)[-300:])
        r = xgr("migrate", "--url", x.url, "--key", xkey, "--owner", owner, "--session", "1", "--to", "kyc", "--dry-run")
        check(r.returncode == 1 and "-32007" in r.stderr, "another signer's xgr migrate: -32007 (%s)" % (r.stdout + r.stderr)[-200:])
    finally:
        x.stop()


def scenario_two_nodes():
    url = store_url("two")
    n1 = Xgrd(XGRD, url, DIR, ["--node-id", "n1"], name="n1")
    n2 = Xgrd(XGRD, url, DIR, ["--node-id", "n2"], name="n2")
    try:
        n1.start()
        n2.start()
        n1.deploy(kyc(False), "kyc", **{"from": A})
        for r in (1, 2, 3):
            start(n1, "kyc", r, "collect", {"Score": 80})
        for r in (1, 2, 3):
            waits_at(n1, r, "check")
        old_hash = sess(n1, 1)["session"]["bundleHash"]
        n1.deploy(kyc(True), "kyc", **{"from": A})
        dry = migrate(n2, [1], "kyc", dryRun=True)
        check(dry["sessions"][0]["status"] == "safe" and dry["sessions"][0]["check"]["safe"] is True,
              "a dry run through n2 of a session n1 holds: safe, with the verdict (%s)" % json.dumps(dry)[:300])
        check(sess(n2, 1)["session"]["bundleHash"] == old_hash and audits(n2, 1) == [], "the dry run changed nothing")
        r = migrate(n2, [1, 2, 3], "kyc")
        check(r["migrated"] == 3 and all(it["status"] == "migrated" for it in r["sessions"]),
              "n2 migrates the three sessions n1 holds (%s)" % json.dumps(r)[:400])
        for root in (1, 2, 3):
            s = sess(n2, root)
            a = audits(n2, root)
            if s["session"]["bundleHash"] in ("", old_hash) or len(a) != 1 or a[0]["node"] != "n2":
                fail("session %d: pin %s, audit %s" % (root, s["session"]["bundleHash"], json.dumps(a)))
        check(True, "each has the new pin and one migrate entry naming n2, the node the call came through")
        n2.ok("xgr_wakeUpProcess", {"owner": A, "processId": "1:2"})
        wait_for("session 1 ends", lambda: sess(n2, 1)["session"]["status"] == "completed", secs=20)
        ran = [h.get("step") for h in sess(n2, 1)["history"]]
        check("approve" in ran and "reject" not in ran, "woken through n2, session 1 runs the fixed rule (%s)" % ran)
    finally:
        n1.stop()
        n2.stop()


def scenario_owners_pages():
    """xgr.liveSessions of every owner pages across the store's pages of 1,000 rows without losing a
    session where a page ends inside a rootPid that two owners share. A has 601 sessions, B 600
    (rootPids 1..); newest first, the 1,000th row is A's 101, the 1,001st B's 101 — the only two in
    registry `hold` (the rest are in `other`), so one call reads past the store's first page."""
    B = "0x00000000000000000000000000000000000000b2"
    x = Xgrd(XGRD, store_url("owners"), DIR, ["--hibernate-after", "0"], name="owners")
    x.start()
    try:
        hold = {"orchestration": {"id": "hold", "structure": {"w": {"rule": "rwait", "onValid": {"spawns": ["e"]}},
                                                             "e": {"rule": "rok"}}},
                "rules": {"rwait": RWAIT, "rok": ROK}}   # each waits an hour to run e: live
        for o in (A, B):
            for reg in ("hold", "other"):
                x.deploy(hold, reg, **{"from": o})
        for o, n in ((A, 601), (B, 600)):
            for lo in range(1, n + 1, 100):
                x.ok_batch([("xgr.enqueue", {"owner": o, "xrc729": "hold" if r == 101 else "other", "rootPid": str(r),
                                             "init": {"stepId": "w"}}) for r in range(lo, min(lo + 100, n + 1))],
                           timeout=120)
        page = x.ok("xgr.liveSessions", {"registry": "hold", "limit": 100}, timeout=60)
        seen = sorted((j["session"]["owner"], int(j["session"]["rootPid"])) for j in page["sessions"])
        check(seen == [(A, 101), (B, 101)] and not page["nextBeforeRootPid"],
              "xgr.liveSessions of every owner finds both sessions of rootPid 101, though the store's first page "
              "of 1,000 rows ends between them (%s)" % seen)
        # xgr.listSessions of every owner (--auth none, no owner): its pages of 1,000 rows, the same
        listed, before = [], None
        for _ in range(10):
            p = {"view": "sessions", "limit": 2000}
            if before:
                p["beforeRootPid"] = before
            r = x.ok("xgr.listSessions", p, timeout=60)
            listed += [(j["owner"], int(j["rootPid"])) for j in r["sessions"]]
            before = r.get("nextBeforeRootPid")
            if not before:
                break
        want = sorted([(A, r) for r in range(1, 602)] + [(B, r) for r in range(1, 601)])
        check(sorted(listed) == want, "xgr.listSessions of every owner pages through all 1,201 sessions once (%d listed, "
              "missing %s)" % (len(listed), sorted(set(want) - set(listed))[:4]))
    finally:
        x.stop()

def main():
    api = HeldApi()
    x = Xgrd(XGRD, store_url("m"), DIR, ["--allow-outbound", "127.0.0.1/32",
                                                                 "--max-migrate-sessions", "3"])
    try:
        x.start()
        scenario_kyc(x)
        scenario_join(x)
        scenario_safe_point(x, api)
        e = x.rpc("xgr.migrateSessions", {"owner": A, "sessions": ["1", "2", "3", "4"], "to": "kyc"}).get("error", {})
        check(e.get("code") == -32005 and e.get("data", {}).get("path") == "sessions" and "--max-migrate-sessions is 3"
              in e.get("message", ""), "4 sessions with --max-migrate-sessions 3: -32005 at sessions naming the cap (%s)" % e)
        r = subprocess.run([XGR, "migrate", "--url", x.url, "--owner", A, "--session", "99", "--to", "kyc"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 1 and "99" in r.stdout, "xgr migrate of a session nobody has: exit 1, named (%s)" %
              (r.stdout + r.stderr)[-200:])
    finally:
        x.stop()
        api.close()
    scenario_crash()
    scenario_cli()
    scenario_permits()
    scenario_owners_pages()
    if MODE == "pg":
        scenario_two_nodes()
    if not os.environ.get("XGR_KEEP_TMP"):   # keep the logs (xgrd's stderr) to read them
        shutil.rmtree(DIR, ignore_errors=True)
    print("ok")


main()
