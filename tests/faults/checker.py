"""checker.py — after a run of the fault suite, compare what the store holds with what each session
must have done (docs/FAULTS.md, "The checker").

For every session the reference is the deterministic driver's run of the same session with the
same external events: `xgr run BUNDLE --virtual-time --root-pid R --owner O --script S --store
ref.db --json`, where S holds the events the client had acknowledged, in order (a listener's
wake-up is the one its notifier's Send step sent: that branch's outcome payload, read from the
notifier's row in the store, overlaid with the wake-up's own). A session that must still wait runs with --max-steps (the steps
before its wait). History rows (proc_steps) are compared as multisets of (step path, status,
validity, abort reason, error, payload); times, iters and pids are not compared. The differences
SEMANTICS allows and the checker accepts: rows of processes a `kill` join policy aborted in the
reference before they ran (the engine may have them running already; they create nothing), and
the order sessions interleave in (each is compared on its own).

Anomalies, by kind: control_refused (a control of a waiting gate session definitely refused),
stuck (must have ended, has not), not_waiting (must wait, did not),
status (ended otherwise than the reference), step_twice, history_differs (a step's row more often than in the
reference), history_missing / history_extra (rows the reference has / has not), enqueue_lost /
ack_lost (an acknowledged enqueue or control that left no trace), refused_applied (a write that
had to be refused was accepted), noop_answer (a repeated enqueue of a running session not answered
as one), paused_left (a resumed session still paused), outbox_pending /
wake_refused (an internal wake-up not applied / refused though its target waited), lease_left (a
running session still leased after every node stopped), node_exit (a node that ended by itself or
not cleanly).
"""
import json
import os
import sqlite3
import subprocess
import tempfile
from collections import Counter

from workload import BUNDLES, GATE_KINDS, OWNER


def pg_json(pg, schema, sql):
    out = pg.sql(schema, "SELECT coalesce(json_agg(t), '[]') FROM (%s) t" % sql)
    return json.loads(out)


def paths(rows):
    """{iter: "Step/Step/..."} from rows with iter, parent_iter, step_id."""
    by = {r["iter"]: r for r in rows}
    memo = {}

    def path(it):
        if it in memo:
            return memo[it]
        r = by.get(it)
        if r is None:
            return "?%s" % it
        p = r["step_id"] if not r["parent_iter"] or r["parent_iter"] not in by else path(r["parent_iter"]) + "/" + r["step_id"]
        memo[it] = p
        return p
    return {it: path(it) for it in by}


def canon(rows):
    ps = paths(rows)
    out = []
    for r in rows:
        pl = r.get("payload")
        try:
            pl = json.dumps(json.loads(pl), sort_keys=True) if pl else ""
        except ValueError:
            pass
        out.append((ps[r["iter"]], r["status"], r["valid"], r["abort_reason"], r.get("error") or "", pl))
    return out


def compare(want, got, unrun):
    """[(kind, detail)]: per step path, the reference's rows against the store's. More rows of a path
    than the reference is step_twice, fewer history_missing, as many but other contents
    history_differs, a path the reference lacks history_extra — unless a kill policy aborted it
    unrun in the reference (SEMANTICS: producers already running may finish, creating nothing)."""
    out = []
    a, b = {}, {}
    for k in want:
        a.setdefault(k[0], Counter())[k] += 1
    for k in got:
        b.setdefault(k[0], Counter())[k] += 1
    for p in sorted(set(a) | set(b)):
        wa, gb = a.get(p, Counter()), b.get(p, Counter())
        na, nb = sum(wa.values()), sum(gb.values())
        if not na:
            if p not in unrun:
                out.append(("history_extra", "rows %s" % list(gb)))
        elif nb > na:
            out.append(("step_twice", "%d rows of %s, the reference has %d: %s" % (nb, p, na, list(gb - wa))))
        elif nb < na:
            out.append(("history_missing", "%d rows of %s, the reference has %d: missing %s" % (nb, p, na, list(wa - gb))))
        elif wa != gb:
            out.append(("history_differs", "%s: %s instead of %s" % (p, list(gb - wa), list(wa - gb))))
    return out


def script_of(s, wake_payload=None):
    """The reference's script entries for session s ("at" 1 s apart, in the order acknowledged)."""
    ev = []
    if s.kind in GATE_KINDS:
        ev = [e for e in s.events if "refused" not in e]
    elif s.kind == "listen" and wake_payload is not None:
        ev = [{"wake": {"step": "Box"}, "payload": wake_payload}]
    return [dict(e, at=1000 * (i + 1)) for i, e in enumerate(ev)]


_refs = {}


def reference(xgr, s, tmp, wake_payload=None):
    """Run session s on the deterministic driver; (rows, status, aborted_unrun_paths, error).
    Sessions of the same kind, parameters and events have the same rows (no row holds the
    rootPid), so each such reference runs once per invocation."""
    key = json.dumps([s.kind, s.params, [e for e in script_of(s, wake_payload)], s.rid if s.kind == "notify" else 0,
                      s.expect()], sort_keys=True).replace('"%d:' % s.rid, '"R:').replace('"%d"' % s.rid, '"R"')
    if key not in _refs:
        _refs[key] = _reference(xgr, s, tmp, wake_payload)
    return _refs[key]


def _reference(xgr, s, tmp, wake_payload):
    db = os.path.join(tmp, "ref-%d.db" % s.rid)
    sc = os.path.join(tmp, "ref-%d.json" % s.rid)
    bname = s.enqueue_req()["ostcId"]
    cmd = [xgr, "run", BUNDLES[bname], "--start", s.start_step(), "--payload", json.dumps(s.start_payload()),
           "--virtual-time", "--root-pid", str(s.rid), "--owner", OWNER, "--store", db, "--json", "--quiet"]
    script = script_of(s, wake_payload)
    if script:
        with open(sc, "w") as f:
            json.dump(script, f)
        cmd += ["--script", sc]
    if s.kind == "gate_wait" or (s.kind == "listen" and wake_payload is None):
        cmd += ["--max-steps", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        return None, None, None, "xgr run: exit %d: %s" % (out.returncode, out.stderr[-400:])
    rep = json.loads(out.stdout)
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    rows = [dict(r) for r in con.execute("SELECT iter, parent_iter, step_id, status, valid, abort_reason, error,"
                                         " payload FROM proc_steps")]
    status = con.execute("SELECT status FROM sessions").fetchone()[0]
    con.close()
    # the processes a kill policy aborted before they ran (no history row): their paths
    procs = {p["pid"]: p for p in rep["processes"]}
    ran = set(h["pid"] for h in rep["history"])

    def ppath(pid):
        p = procs[pid]
        return p["step"] if not p["parentPid"] or p["parentPid"] not in procs else ppath(p["parentPid"]) + "/" + p["step"]
    unrun = set(ppath(pid) for pid, p in procs.items() if p["status"] == "aborted" and pid not in ran)
    return rows, status, unrun, None


def check(pg, schema, xgr, sessions, node_exits):
    """Anomalies [(kind, session or None, detail)] of one run."""
    an = []
    steps = pg_json(pg, schema, "SELECT root_pid::bigint AS rid, iter::bigint AS iter, parent_iter::bigint AS"
                                " parent_iter, step_id, status, valid, abort_reason, error, payload FROM proc_steps"
                                " WHERE owner = '%s'" % OWNER)
    by_rid = {}
    for r in steps:
        by_rid.setdefault(r["rid"], []).append(r)
    srows = {r["rid"]: r for r in pg_json(pg, schema, "SELECT root_pid::bigint AS rid, status, paused, lease_owner,"
                                                      " wake_due FROM sessions WHERE owner = '%s'" % OWNER)}
    waiting_w = set(r["rid"] for r in pg_json(pg, schema, "SELECT root_pid::bigint AS rid FROM proc_rt WHERE owner ="
                                                          " '%s' AND step_id = 'W' AND status < 2" % OWNER))
    outbox = pg_json(pg, schema, "SELECT from_root::bigint AS f, to_root::bigint AS t, step, refused FROM outbox")
    for o in outbox:
        an.append(("wake_refused" if o["refused"] else "outbox_pending", o["f"],
                   "wake-up %s -> %s at %s: %s" % (o["f"], o["t"], o["step"], o["refused"] or "not applied")))
    tmp = tempfile.mkdtemp(prefix="xgr-faults-ref-")
    for s in sessions:
        if not s.enqueued:      # never acknowledged: whether it exists is open (a timed-out enqueue may have run)
            continue
        if s.rid not in srows:
            an.append(("enqueue_lost", s.rid, "acknowledged enqueue, no session row (%s)" % s.describe()))
            continue
        row = srows[s.rid]
        got = by_rid.get(s.rid, [])
        refused = [e for e in s.events if "refused" in e]
        if s.kind in GATE_KINDS and refused:
            # W waited 10^8 s all along: a definite refusal of a wake, kill, pause or resume is wrong
            an.append(("control_refused", s.rid, "%s: %s (status %s)" % (s.describe(), json.dumps(refused)[:300],
                                                                       row["status"])))
            continue
        if s.expect() == "ended" and row["status"] == 0:
            partner = ""
            if s.partner:   # a listener waits for its notifier: say what became of it
                p = s.partner
                prow = srows.get(p.rid)
                partner = "; partner %d: enqueued %s via %s, %s, steps %s%s" % (
                    p.rid, p.enqueued, getattr(p, "node", None),
                    "status %s lease %s" % (prow["status"], prow["lease_owner"]) if prow else "no session row",
                    [r["step_id"] for r in by_rid.get(p.rid, [])], " (%s)" % p.note if p.note else "")
            an.append(("stuck", s.rid, "%s still running (lease %s, due %s, %d rows: %s)%s" %
                       (s.describe(), row["lease_owner"], row["wake_due"], len(got),
                        [r["step_id"] for r in got], partner)))
            continue
        if s.expect() == "waiting" and (row["status"] != 0 or s.rid not in waiting_w):
            an.append(("not_waiting", s.rid, "%s: status %s, W waiting %s" % (s.describe(), row["status"],
                                                                            s.rid in waiting_w)))
        if row["paused"] and any("resume" in e for e in s.events):
            an.append(("paused_left", s.rid, "resumed, still paused"))
        for method, expect, good, ans in s.probes:
            if not good:
                an.append(("refused_applied" if expect == "refused" else "noop_answer", s.rid, "%s (%s expected): %s"
                           % (method, expect, json.dumps(ans)[:300])))
        wake_payload = None
        if s.kind == "listen":
            sends = [r for r in by_rid.get(s.partner.rid, []) if r["step_id"] == "Send"]
            if sends:
                # the Send branch's outcome payload ({"Sent": Tag + 1}; the notifier's own row is
                # checked against its reference) overlaid with the wake-up's own ({"From": N})
                wake_payload = {"Sent": json.loads(sends[0]["payload"])["Sent"], "From": s.partner.rid}
        want, status, unrun, err = reference(xgr, s, tmp, wake_payload)
        if err:
            an.append(("reference_failed", s.rid, err))
            continue
        if row["status"] != status:
            an.append(("status", s.rid, "%s: status %s, reference %s" % (s.describe(), row["status"], status)))
        for kind, detail in compare(canon(want), canon(got), unrun):
            if kind == "history_missing" and detail[0].endswith("W") and [e for e in s.events if "refused" not in e]:
                kind = "ack_lost"
            an.append((kind, s.rid, "%s: %s" % (s.describe(), detail)))
    for r in srows.values():
        if r["status"] == 0 and r["lease_owner"]:
            an.append(("lease_left", r["rid"], "running session leased to %s after every node stopped" %
                       r["lease_owner"]))
    for name, what in node_exits:
        an.append(("node_exit", None, "%s: %s" % (name, what)))
    subprocess.run(["rm", "-rf", tmp])
    return an
