#!/usr/bin/env python3
"""scenarios_xgrd.py — the scenario files of tests/scenarios through a real xgrd, with and without
hibernation (issue 19): every scenario must give the same run when every waiting session is
evicted from memory after each commit and loaded again for each timer, wake-up and control call.

For each NAME.json (bundle, start, payload, script, sessions, maxSteps, expect; the format of
tests/scenarios/run_scenarios.c) two xgrd run side by side on 127.0.0.1, each on its own SQLite
store: one with `--hibernate-after off` (everything stays in memory) and one with
`--hibernate-after 0` (a session leaves memory as soon as it waits). On each: the bundle's rules
are registered under their keys and the orchestration under the registry `scen`, the sessions are
enqueued, and the scripted actions are sent as JSON-RPC calls (kill / pause / resume / retry, wake-ups in
pid or step mode, with the action's caller as `from`) at their time on the engine clock. When
every session has ended or can no longer move, the run is read back (xgr.getSession, and the
store for the payload of waiting processes and killedAt, which getSession does not show).

Checked per scenario:
  - the two runs agree on everything that does not depend on wall-clock timing: each session's
    result, its processes (step, status, valid, paused, abort reason, join outcome, and the payload
    where no join is on its path), its history rows (step, status, valid, error, payload likewise)
    and which scripted actions were accepted;
  - both runs meet the file's own expectations (tests/scenarios/expect.h). xgrd runs on a
    scaled real clock, not the driver's virtual one, so times (historyAt, joinClosedAt, killedAt)
    are compared with a tolerance: the engine-clock equivalent of TOL_MS of wall time. The time
    scale of each scenario is chosen so that its distinct times lie at least GAP_MS of wall time
    apart (and the whole run within SPAN_MS). The store keeps which inputs of a join failed but
    not why, so joinFail checks the step ids only.
xgrd applies results as they complete (the engine's free mode, tests/engine/run_scenarios_engine.c),
not one process at a time like the driver, so the allowances of that runner apply:
  - SEMANTICS §3.4: a producer that the file expects aborted by a `kill` join or a cancelSession
    of a sibling due at the same instant may have been running and finished (done, with a history
    row and possibly children, which shifts the numbering of later processes). Such expected
    processes are not checked when the run has them otherwise, and the counts may differ then; the
    comparison of the two runs leaves out these processes and everything below them.
  - ORDERED_ONLY names the files whose expectations need the ordered mode (which xgrd does not
    have); only the comparison of the two runs applies to them, without payloads and wake_refused
    rows (whether a wake-up reaches its sibling in time is timing there, in either run).
  - xgrd's --max-session-steps kills a session once a step beyond the cap has run, where the
    driver stops before it: a session killed by the cap is the result "limit", with one more
    history row than the file expects.
The two runs are compared by each process's step path from the start process (like crash_run's
canon), not by pid, so that a different numbering after such a race does not count as a difference.
This checks the file's expectations itself rather than through expect.c: the tolerance, the
allowances and the store's view of a run (names, not the driver's report) are this runner's.

  scenarios_xgrd.py XGRD SCENARIO_DIR [NAME_SUBSTRING]
Exit 0 when every scenario passes; prints PASS/FAIL per file and what differed.
"""
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from xgrd_harness import Fail, Xgrd  # noqa: E402

XGRD, SCEN = sys.argv[1], sys.argv[2]
ONLY = sys.argv[3] if len(sys.argv) > 3 else ""
OWNER = "0x0000000000000000000000000000000000000001"
GAP_MS, SPAN_MS, TOL_MS = 250.0, 4000.0, 300.0
TERMINAL = ("completed", "killed", "failed")
RACE = ("join kill", "cancelSession")   # SEMANTICS §3.4 on an engine that applies results as they complete
ORDERED_ONLY = {
    "wake_sibling_due_same_instant.json": "A and B are due at once; B may run before A's wake-up reaches it "
                                          "(SEMANTICS §6: only the ordered mode runs them one at a time)",
}


# ---- the time scale of a scenario -----------------------------------------------------------------

def times_of(sc):
    """Every time (engine ms from the start) the scenario names: scripted actions, expected times,
    and the waitSec durations of its rules."""
    ts = {0}
    for a in sc.get("script") or []:
        ts.add(a.get("at", 0))

    def expected(x):
        ts.update(v for v in (x.get("historyAt") or {}).values())
        for p in x.get("processes") or []:
            if "joinClosedAt" in p:
                ts.add(p["joinClosedAt"])
        if isinstance(x.get("killedAt"), int):
            ts.add(x["killedAt"])
        for s in x.get("sessions") or []:
            expected(s)
    expected(sc.get("expect") or {})

    def waits(v):
        if isinstance(v, dict):
            for k, w in v.items():
                if k == "waitSec" and isinstance(w, (int, float)):
                    ts.add(int(w * 1000))
                else:
                    waits(w)
        elif isinstance(v, list):
            for w in v:
                waits(w)
    waits(sc["bundle"].get("rules"))
    return sorted(ts)


def scale_of(sc):
    ts = times_of(sc)
    gaps = [b - a for a, b in zip(ts, ts[1:]) if b > a]
    gap = min(gaps) if gaps else 1000
    scale = max(gap / GAP_MS, ts[-1] / SPAN_MS, 0.05)
    return min(scale, 100000.0)


# ---- one run on one xgrd ------------------------------------------------------------------------

class Run:
    def __init__(self, name, sc, scale, hibernate):
        self.name, self.sc, self.scale, self.hibernate = name, sc, scale, hibernate
        self.dir = tempfile.mkdtemp(prefix="xgr-scen-")
        self.x = Xgrd(XGRD, "sqlite:" + os.path.join(self.dir, "s.db"), self.dir,
                      ["--time-scale", "%.6g" % scale, "--hibernate-after", hibernate,
                       "--max-session-steps", str(sc.get("maxSteps", 10000))])
        self.report = None
        self.error = None
        self.evicted = 0
        self.refusals = []

    def stop(self):
        """SIGTERM; a graceful stop exits 0 (a sanitizer's report makes it fail: the log's tail is kept)."""
        if self.x.proc and self.x.stop() != 0 and not self.error:
            self.error = "xgrd exited with %d: %s" % (self.x.proc.returncode, self.x.log_tail(1500))
        shutil.rmtree(self.dir, ignore_errors=True)

    def sessions(self):
        """(owner, rootPid, start, payload) of every session, the main one first."""
        sc = self.sc
        out = [(sc.get("owner", OWNER), 1, sc["start"], sc.get("payload") or {})]
        for m in sc.get("sessions") or []:
            out.append((m["owner"], m["rootPid"], m["start"], m.get("payload") or {}))
        return out

    def owner_of(self, root):
        for o, r, _, _ in self.sessions():
            if r == root:
                return o
        return self.sessions()[0][0]

    def action(self, a):
        """Send one scripted action; True when xgrd accepted it."""
        if "wake" in a:
            w = a["wake"]
            if "pid" in w:
                root = int(w["pid"].split(":")[0])
                p = {"from": a.get("caller", self.owner_of(root)), "processId": w["pid"]}
            else:
                root = a.get("session", 1)
                owner = self.owner_of(root)
                p = {"from": a.get("caller", owner), "runner": owner, "sessionId": root, "stepId": w["step"]}
            if "payload" in a:
                p["payload"] = a["payload"]
            return self.answer(a, self.x.rpc("xgr_wakeUpProcess", [p]))
        if "retry" in a:
            root = int(a["retry"].split(":")[0])
            owner = self.owner_of(root)
            p = {"owner": owner, "pid": a["retry"], "from": a.get("caller", owner)}
            if "payload" in a:
                p["payload"] = a["payload"]
            return self.answer(a, self.x.rpc("xgr.retry", p))
        for kind in ("kill", "pause", "resume"):
            if kind in a:
                root = int(a[kind].split(":")[0])
                owner = self.owner_of(root)
                return self.answer(a, self.x.rpc("xgr." + kind, {"owner": owner, "pid": a[kind],
                                                                  "from": a.get("caller", owner)}))
        raise Fail("unknown action %s" % json.dumps(a))

    def answer(self, a, r):
        """Whether the call was accepted; a refusal is noted (printed with a failure)."""
        if "error" in r:
            self.refusals.append("%s -> %s" % (json.dumps(a), r["error"].get("message")))
        return "error" not in r

    def engine_now(self):
        return time.time() * 1000.0 * self.scale   # xgrd's scaled clock: Unix ms x F

    def run(self):
        try:
            self.x.start()
            b = self.sc["bundle"]
            self.x.deploy(b, "scen", **{"from": self.sessions()[0][0]})
            t0 = self.engine_now()
            # the extra sessions (wake-up targets) first: at time scales in the hundreds a wake-up
            # sent 1 s of engine time after the start is a millisecond away
            for owner, root, start, payload in self.sessions()[1:] + self.sessions()[:1]:
                # the documents are in the first session owner's namespace (docs/SEMANTICS.md,
                # "Names and pins"): the other owners name it
                self.x.ok("xgr.enqueue", {"owner": owner, "rootPid": root, "xrc729": "scen",
                                          "registryOwner": self.sessions()[0][0],
                                          "ostcId": b["orchestration"]["id"],
                                          "init": {"stepId": start, "payload": payload}})
            script = sorted(enumerate(self.sc.get("script") or []), key=lambda ia: (ia[1].get("at", 0), ia[0]))
            results = [None] * len(script)
            for i, a in script:
                delay = (t0 + a.get("at", 0) - self.engine_now()) / self.scale / 1000.0
                if delay > 0:
                    time.sleep(delay)
                self.catch_up(t0 + a.get("at", 0))
                results[i] = self.action(a)
            self.settle(t0)
            self.report = [self.read(o, r) for o, r, _, _ in self.sessions()]
            self.report[0]["actions"] = [{"ok": v} for v in results]
            self.evicted = self.x.metric("sessions_evicted")
        except Fail as e:   # reported per scenario
            self.error = str(e)
        except Exception as e:
            self.error = "%s: %s" % (type(e).__name__, e)
        finally:
            self.stop()

    def catch_up(self, upto):
        """The driver applies an action at time T after everything due before T: wait until every
        start step has run, no process runs and no timer due before `upto` (engine clock) is still
        armed (a step's result and its spawns are committed together, so a waiting child is there
        by then)."""
        limit = time.time() + 10
        while time.time() < limit:
            views = [self.x.ok("xgr.getSession", {"owner": o, "rootPid": r}) for o, r, _, _ in self.sessions()]
            # every start step has run (the store shows a start process waiting until then)
            started = all(any(h["pid"].endswith(":1") for h in v["history"]) for v in views)
            if started and all(p["status"] != "running" and not (p["status"] == "waiting" and p.get("nextWakeAt")
                                                                 is not None and p["nextWakeAt"] < upto)
                               for v in views for p in v["processes"]):
                return
            time.sleep(0.005)
        raise Fail("the sessions did not catch up with a scripted action's time")

    def settle(self, t0):
        """Until every session ended, or none can move: nothing runs, no timer is armed (a paused
        process's timer does not count) and the view stays the same for 300 ms of wall time."""
        last, since = None, time.time()
        limit = time.time() + 30 + times_of(self.sc)[-1] / self.scale / 1000.0
        while time.time() < limit:
            views = [self.x.ok("xgr.getSession", {"owner": o, "rootPid": r}) for o, r, _, _ in self.sessions()]
            if all(v["session"]["status"] in TERMINAL for v in views):
                return
            stuck = all(v["session"]["status"] in TERMINAL or
                        all(p["status"] in ("done", "aborted", "paused") or
                            (p["status"] == "waiting" and p.get("nextWakeAt") is None)
                            for p in v["processes"]) for v in views)
            text = json.dumps(views, sort_keys=True)
            if text != last:
                last, since = text, time.time()
            elif stuck and time.time() - since > 0.3:
                return
            time.sleep(0.02)
        raise Fail("the sessions did not settle")

    def read(self, owner, root):
        """The run of one session in the report's terms (tests/scenarios/expect.h)."""
        v = self.x.ok("xgr.getSession", {"owner": owner, "rootPid": root})
        db = sqlite3.connect(os.path.join(self.dir, "s.db"))
        key = root - (1 << 63)   # SQLite keeps rootPids order-preserving: v XOR 2^63 (src/store/sqlite.c)
        payloads = {it: pl for it, pl in db.execute(
            "SELECT iter, payload FROM proc_rt WHERE owner = ? AND root_pid = ?", (owner, key))}
        killed_at = db.execute("SELECT killed_at FROM sessions WHERE owner = ? AND root_pid = ?",
                               (owner, key)).fetchone()
        db.close()
        hist = v["history"]
        first = [h["at"] for h in hist if h["pid"] == "%d:1" % root]
        t0 = first[0] if first else 0
        procs = []
        for p in v["processes"]:
            q = {"pid": p["pid"], "step": p["lastStep"] or p["resumeStep"],
                 "status": "waiting" if p["status"] == "paused" else p["status"],
                 "paused": p["status"] == "paused", "valid": p["valid"]}
            if "abortReason" in p:
                q["abortReason"] = p["abortReason"]
            if "error" in p:
                q["error"] = p["error"]
            ran = [h for h in v["history"] if h["pid"] == p["pid"]]
            pl = payloads.get(p["iter"])
            q["payload"] = ran[-1].get("payload") if ran else json.loads(pl) if pl else None
            q["parentPid"] = p["parentPid"]
            j = p.get("join")
            if j:
                q["join"] = {"outcome": j["outcome"], "failed": sorted(j["failed"])}
                if "closedAt" in j:
                    q["join"]["closedAt"] = j["closedAt"] - t0
            procs.append(q)
        status = v["session"]["status"]
        result = "stalled" if status == "running" else status
        if status == "killed" and any("exceed the cap" in (p.get("error") or "") for p in procs):
            result = "limit"   # --max-session-steps
        rep = {"result": result, "status": status, "processes": procs,
               "history": [dict(h, at=h["at"] - t0) for h in hist]}
        if killed_at and killed_at[0]:
            rep["killedAt"] = killed_at[0] - t0
        return rep


# ---- checks ---------------------------------------------------------------------------------------

def subset(want, got):
    return isinstance(got, dict) and all(k in got and got[k] == v for k, v in want.items())


def check(x, rep, tol, where):
    """The file's expectations x against report rep; a list of mismatches."""
    bad = []

    def f(msg):
        bad.append("%s: %s" % (where, msg))
    if "result" in x and rep["result"] != x["result"]:
        f("result %s, expected %s" % (rep["result"], x["result"]))
    procs = {p["pid"]: p for p in rep["processes"]}
    raced = 0
    for w in x.get("processes") or []:
        p = procs.get(w["pid"])
        race = w.get("status") == "aborted" and w.get("abortReason", RACE[0]) in RACE
        if race and not (p and all(p.get(k) == w[k] for k in ("step", "status", "abortReason") if k in w)):
            raced += 1   # §3.4: it ran to the end here (or the numbering moved on)
            continue
        if not p:
            f("process %s was never created" % w["pid"])
            continue
        for k in ("step", "status", "valid", "paused", "abortReason"):
            if k in w and p.get(k) != w[k]:
                f("%s.%s = %s, expected %s" % (w["pid"], k, json.dumps(p.get(k)), json.dumps(w[k])))
        if "join" in w:
            j = p.get("join") or {}
            if j.get("outcome") != w["join"]:
                f("%s join %s, expected %s" % (w["pid"], j.get("outcome"), w["join"]))
            if "joinFail" in w and not set(w["joinFail"]) <= set(j.get("failed") or []):
                f("%s join.failed %s lacks %s" % (w["pid"], j.get("failed"), sorted(w["joinFail"])))
            if "joinClosedAt" in w and abs(j.get("closedAt", -10 ** 18) - w["joinClosedAt"]) > tol:
                f("%s join.closedAt = %s, expected %s" % (w["pid"], j.get("closedAt"), w["joinClosedAt"]))
        if w.get("error") is True and not isinstance(p.get("error"), str):
            f("%s has no error" % w["pid"])
        if "payload" in w and not subset(w["payload"], p.get("payload")):
            f("%s payload %s lacks %s" % (w["pid"], json.dumps(p.get("payload")), json.dumps(w["payload"])))
        for k in w.get("payloadLacks") or []:
            if k in (p.get("payload") or {}):
                f("%s payload has key %s" % (w["pid"], k))
    if "count" in x and len(rep["processes"]) != x["count"] and not raced:
        f("%d processes, expected %d" % (len(rep["processes"]), x["count"]))
    want_rows = x.get("history", 0) + (rep["result"] == "limit")
    if "history" in x and (len(rep["history"]) != want_rows if not raced else len(rep["history"]) < want_rows):
        f("%d history rows, expected %d" % (len(rep["history"]), want_rows))
    for pid, at in (x.get("historyAt") or {}).items():
        got = next((h["at"] for h in rep["history"] if h["pid"] == pid), None)
        if got is None or abs(got - at) > tol:
            f("%s ran at %s ms, expected %s (tolerance %.0f)" % (pid, got, at, tol))
    for pid, sub in (x.get("historyError") or {}).items():
        got = next((h.get("error") for h in rep["history"] if h["pid"] == pid), None)
        if not got or sub not in got:
            f("%s history error is %s, expected it to contain %r" % (pid, got, sub))
    if "killedAt" in x:
        got = rep.get("killedAt")
        if x["killedAt"] is None and got is not None:
            f("killedAt %s, expected none" % got)
        elif x["killedAt"] is not None and (got is None or abs(got - x["killedAt"]) > tol):
            f("killedAt %s, expected %s" % (got, x["killedAt"]))
    for i, w in enumerate(x.get("actionsOk") or []):
        acts = rep.get("actions") or []
        if i >= len(acts) or acts[i]["ok"] != w:
            f("action %d: %s, expected %s" % (i, acts[i]["ok"] if i < len(acts) else "not applied", w))
    return bad


def paths(s):
    """pid -> the step path from the start process ("A/B/C"), with a count for repeats."""
    by = {p["pid"]: p for p in s["processes"]}
    memo = {}

    def path(pid):
        if pid not in memo:
            p = by.get(pid)
            memo[pid] = "?" if not p else (path(p["parentPid"]) + "/" if p.get("parentPid") else "") + (p["step"] or "")
        return memo[pid]
    out, seen = {}, {}
    for p in sorted(s["processes"], key=lambda p: int(p["pid"].split(":")[1])):
        base = path(p["pid"])
        seen[base] = seen.get(base, 0) + 1
        out[p["pid"]] = "%s#%d" % (base, seen[base])
    return out


def timeless(rep, skip, ordered=False):
    """What depends neither on timing nor on hibernation, keyed by step path; the paths in skip
    (and below them) left out. Like the engine's free mode: per process its status, validity,
    abort reason and join outcome; payloads only of processes with no join on their path (which
    producer of an any or k-of-n join arrives first, and so what the join merges and which inputs
    it saw fail, is timing). With ordered (an ORDERED_ONLY file) no payloads and no wake_refused
    rows either: whether a wake-up reaches its sibling, is refused, or finds the session already
    ended is timing there."""
    out = []
    for i, s in enumerate(rep):
        ps = paths(s)
        by = {p["pid"]: p for p in s["processes"]}

        def gone(pid):
            mine = ps.get(pid, "").split("#")[0]
            return any(mine == k.split("#")[0] or mine.startswith(k.split("#")[0] + "/") for k in skip.get(i, ()))

        def joined(pid):
            while pid in by:
                if by[pid].get("join"):
                    return True
                pid = by[pid].get("parentPid")
            return False
        procs, hist = [], []
        for p in s["processes"]:
            if gone(p["pid"]):
                continue
            q = {k: p.get(k) for k in ("step", "status", "valid", "paused", "abortReason")}
            q["path"], q["join"] = ps[p["pid"]], (p.get("join") or {}).get("outcome")
            if not joined(p["pid"]) and not ordered:
                q["payload"] = p.get("payload")
            procs.append(json.dumps(q, sort_keys=True))
        for h in s["history"]:
            if gone(h["pid"]) or (ordered and h.get("status") == "wake_refused"):
                continue
            q = {k: h.get(k) for k in ("step", "status", "valid")}
            q["path"], q["error"] = ps.get(h["pid"]), bool(h.get("error"))
            if not joined(h["pid"]) and not ordered:
                q["payload"] = h.get("payload")
            hist.append(json.dumps(q, sort_keys=True))
        out.append({"result": s["result"], "actions": s.get("actions"), "processes": sorted(procs),
                    "history": sorted(hist)})
    return out


def raced(reps):
    """Per session: the step paths that met a §3.4 race in any of the runs."""
    skip = {}
    for rep in reps:
        for i, s in enumerate(rep):
            ps = paths(s)
            for p in s["processes"]:
                if p.get("abortReason") in RACE:
                    skip.setdefault(i, set()).add(ps[p["pid"]])
    return skip


def diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        for k in x:
            if x[k] != y[k]:
                if isinstance(x[k], list) and isinstance(y[k], list):
                    only_a = [e for e in x[k] if e not in y[k]]
                    only_b = [e for e in y[k] if e not in x[k]]
                    return "session %d %s: in memory only %s; hibernated only %s" % (i, k, only_a[:3], only_b[:3])
                return "session %d %s: %s vs %s" % (i, k, x[k], y[k])
    return "different number of sessions"


def run_file(path):
    name = os.path.basename(path)
    sc = json.load(open(path))
    scale = scale_of(sc)
    tol = TOL_MS * scale
    runs = [Run(name, sc, scale, "off"), Run(name, sc, scale, "0")]
    threads = [threading.Thread(target=r.run) for r in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = []
    if os.environ.get("XGR_SCENARIO_DUMP"):
        for r in runs:
            print(json.dumps(r.report, indent=1))
    for r in runs:
        if r.error:
            bad.append("%s (hibernate %s): %s" % (name, r.hibernate, r.error))
    if not bad:
        for r in runs:
            mode = "hibernate-after %s" % r.hibernate
            x = sc.get("expect") or {}
            if name in ORDERED_ONLY:
                break
            bad += check(x, r.report[0], tol, "%s [%s]" % (name, mode))
            for i, xs in enumerate(x.get("sessions") or []):
                bad += check(xs, r.report[i + 1], tol, "%s [%s] session %d" % (name, mode, i + 2))
        skip = raced([r.report for r in runs])
        ordered = name in ORDERED_ONLY
        a, b = timeless(runs[0].report, skip, ordered), timeless(runs[1].report, skip, ordered)
        if a != b:
            bad.append("%s: the hibernated run differs: %s" % (name, diff(a, b)))
    if bad:
        for r in runs:
            for x in r.refusals:
                bad.append("%s (hibernate %s): refused: %s" % (name, r.hibernate, x))
    return name, scale, runs[1].evicted, bad


def main():
    files = sorted(f for f in os.listdir(SCEN) if f.endswith(".json") and ONLY in f)
    nfail, evicted = 0, 0
    t0 = time.time()
    for f in files:
        name, scale, ev, bad = run_file(os.path.join(SCEN, f))
        evicted += ev
        for b in bad:
            print("  " + b)
        note = "; expectations need the ordered mode: " + ORDERED_ONLY[name] if name in ORDERED_ONLY else ""
        print("%s %s (time scale %.3g, %d evictions%s)" % ("FAIL" if bad else "PASS", name, scale, ev, note))
        sys.stdout.flush()
        nfail += bool(bad)
    print("%d of %d scenarios pass through xgrd with and without hibernation (%d evictions, %.0f s)" %
          (len(files) - nfail, len(files), evicted, time.time() - t0))
    if not nfail and files and not evicted:
        print("FAIL: no session was ever evicted")
        return 1
    return 1 if nfail else 0


sys.exit(main())
