"""workload.py — the fault suite's sessions and the clients that drive them (docs/FAULTS.md).

A Session is one rootPid of one owner with a kind, its parameters and the external events its
client sends; the same events, as an `xgr run --script`, drive its reference run (checker.py).
Kinds:
  fan        tests/stress/crash/daemon_bundle.json: an `all` join of four workers with `drain`, a
             loop with a 60 s wait between rounds, a 2-of-3 `kill` join; some are paused and
             resumed while they run (which changes nothing but when they finish)
  gate_wake  tests/pg/gate_bundle.json: A runs, W waits 10^8 s and is woken by an RPC (by pid)
  gate_kill  ... and the session is killed instead
  gate_pause ... paused, woken while paused, resumed (W runs after the resume)
  gate_wait  ... nothing comes: it must still wait at W at the end. Also the target of writes whose
             answer is known: a second enqueue of its rootPid (a no-op), a wake-up of a pid it does
             not have (refused); a killed gate session gets an enqueue of its rootPid (refused)
  listen /   tests/faults/notify_bundle.json: the listener waits at Box; its notifier, enqueued on
  notify     another node once the listener waits, sleeps 60 s and sends it an internal wake-up
             (the outbox), so wake-ups cross nodes
Clients call random usable nodes; every answer is logged (Answers). A call that fails in a way
that leaves open whether it happened (transport error, time-out, lease moving, store down) is
"ambiguous" and retried; a definite error is a refusal.
"""
import json
import os
import random
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "..")
OWNER = "0x00000000000000000000000000000000000000fa"
BUNDLES = {"crash_daemon": os.path.join(SRC, "tests", "stress", "crash", "daemon_bundle.json"),
           "gate": os.path.join(SRC, "tests", "pg", "gate_bundle.json"),
           "faults_notify": os.path.join(HERE, "notify_bundle.json")}
GATE_KINDS = ("gate_wake", "gate_kill", "gate_pause", "gate_wait")
# words of an error that leave open whether the call took effect (the node died, timed out, lost
# the lease meanwhile, or its store failed): retried
AMBIGUOUS = ("timed out", "timeout", "lease", "store", "connection", "refused by", "unavailable", "again",
             "Remote end closed", "reset", "Broken pipe", "not ready", "-32009", "failed")


def bundle(name):
    with open(BUNDLES[name]) as f:
        return json.load(f)


class Session:
    def __init__(self, rid, kind, params):
        self.rid, self.kind, self.params = rid, kind, params
        self.start_at = 0.0          # seconds after the workload's start
        self.enqueued = False        # an enqueue was acknowledged (or found done after an ambiguous one)
        self.settled = threading.Event()   # set once its client knows whether the enqueue was acknowledged
        self.events = []             # the acknowledged external events, in order: script entries
        self.note = ""               # why the client left it (for reports)
        self.probes = []             # (method, expected "refused"|"noop", answered so, answer)
        self.partner = None          # listen <-> notify
        self.done_client = False

    def enqueue_req(self):
        p = self.params
        if self.kind == "fan":
            return {"ostcId": "crash_daemon", "init": {"stepId": "Start",
                                                        "payload": {"Rounds": p["rounds"], "Seed": p["seed"]}}}
        if self.kind in GATE_KINDS:
            return {"ostcId": "gate", "init": {"stepId": "A"}}
        if self.kind == "listen":
            return {"ostcId": "faults_notify", "init": {"stepId": "LStart", "payload": {"Tag": p["tag"]}}}
        return {"ostcId": "faults_notify", "init": {"stepId": "NStart",
                                                     "payload": {"Partner": self.partner.rid, "Tag": p["tag"]}}}

    def start_step(self):
        return self.enqueue_req()["init"]["stepId"]

    def start_payload(self):
        return self.enqueue_req()["init"].get("payload", {})

    def expect(self):
        """What the end must show: "ended" (completed or killed, as the reference) or "waiting"."""
        return "waiting" if self.kind == "gate_wait" else "ended"

    def describe(self):
        return "%s %s%s" % (self.kind, json.dumps(self.params, sort_keys=True),
                            " partner %d" % self.partner.rid if self.partner else "")


def make_sessions(rnd, n, first_rid, mix):
    """n sessions from rootPid first_rid: kinds drawn from mix {kind: weight} (listen/notify come
    in pairs: weight "pair"), start offsets set later by the driver."""
    out, rid = [], first_rid
    kinds = [k for k, w in mix.items() for _ in range(w)]
    while len(out) < n:
        k = rnd.choice(kinds)
        if k == "pair":
            if len(out) + 2 > n:
                continue
            tag = rnd.randrange(1000)
            lst = Session(rid, "listen", {"tag": tag})
            ntf = Session(rid + 1, "notify", {"tag": tag})
            lst.partner, ntf.partner = ntf, lst
            out += [lst, ntf]
            rid += 2
            continue
        if k == "fan":
            p = {"rounds": rnd.randint(1, 4), "seed": rnd.randrange(4), "pause": rnd.random() < 0.25}
        elif k in ("gate_wake", "gate_pause"):
            p = {"n": rnd.randrange(1000)}
        else:
            p = {}
        out.append(Session(rid, k, p))
        rid += 1
    return out


class Answers:
    """Every client call and its answer (thread-safe)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.rows = []

    def add(self, sid, method, node, ans):
        with self.lock:
            self.rows.append({"t": time.time(), "session": sid, "method": method, "node": node, "answer": ans})


def ambiguous(ans):
    if "error" not in ans:
        return False
    if "transport" in ans:
        return True
    text = json.dumps(ans["error"])
    return any(w.lower() in text.lower() for w in AMBIGUOUS)


class Clients:
    """Drives the sessions through random usable nodes. nodes_fn() -> the nodes; progress(rid)
    -> True once the session's first step has a history row (polled by the driver)."""

    def __init__(self, nodes_fn, seed, answers, first_ran, rpc_slots=8):
        self.nodes_fn, self.answers, self.first_ran = nodes_fn, answers, first_ran
        self.rnd = random.Random(seed ^ 0x5eed)
        self.rlock = threading.Lock()
        self.slots = threading.Semaphore(rpc_slots)
        self.stop = False

    def pick(self, avoid=None):
        for _ in range(400):
            nodes = [n for n in self.nodes_fn() if n.usable() and n.name != avoid]
            if nodes:
                with self.rlock:
                    return self.rnd.choice(nodes)
            time.sleep(0.05)
        return None

    def call(self, s, method, params, avoid=None):
        node = self.pick(avoid)
        if node is None:
            ans = {"error": "no usable node", "transport": True}
            self.answers.add(s.rid, method, None, ans)
            return ans, None
        with self.slots:
            try:
                ans = node.rpc(method, params, timeout=12)
            except Exception as e:
                ans = {"error": "%s: %s" % (type(e).__name__, e), "transport": True}
        self.answers.add(s.rid, method, node.name, ans)
        return ans, node

    def retry(self, s, method, params, done_if=(), tries=25, avoid=None):
        """Call until an answer that is not ambiguous. done_if: words of a definite error that, after
        an ambiguous attempt, mean an earlier attempt did it. (answer, acknowledged, node)."""
        was_amb = False
        for _ in range(tries):
            ans, node = self.call(s, method, params, avoid)
            if "error" not in ans:
                return ans, True, node
            if not ambiguous(ans):
                if was_amb and any(w in json.dumps(ans["error"]) for w in done_if):
                    return ans, True, node
                return ans, False, node
            was_amb = True
            time.sleep(0.3)
        return ans, False, None

    def wait_first(self, s, secs=60):
        t0 = time.time()
        while time.time() - t0 < secs and not self.stop:
            if self.first_ran(s.rid):
                return True
            time.sleep(0.05)
        return False

    def sleep(self, lo, hi):
        with self.rlock:
            d = self.rnd.uniform(lo, hi)
        time.sleep(d)

    def enqueue(self, s, avoid=None):
        rq = dict(s.enqueue_req(), owner=OWNER, rootPid=s.rid, xrc729="local")
        try:
            ans, ok, node = self.retry(s, "xgr.enqueue", rq, done_if=("exists", "duplicate", "already"), avoid=avoid)
            s.enqueued = ok
            s.node = node.name if node else None
        finally:
            s.settled.set()
        return ok

    def control(self, s, method, params, script, done_if):
        ans, ok, _ = self.retry(s, method, dict(params, owner=OWNER), done_if=done_if)
        if ok:
            s.events.append(script)
        else:
            s.events.append(dict(script, refused=ans.get("error")))
        return ok

    def drive(self, s, t0):
        """Run session s's client part (in its own thread)."""
        time.sleep(max(0.0, t0 + s.start_at - time.time()))
        if s.kind == "notify":
            # the listener must wait at Box before the wake-up can find it (SEMANTICS: a wake-up for a
            # step nobody waits at is refused); on another node than the listener, so it crosses
            # its first step can run before its client has the enqueue's answer (seed 1223: the
            # notifier read "not acknowledged" meanwhile, left, and the listener waited for ever)
            if not self.wait_first(s.partner, 90) or not s.partner.settled.wait(120) or not s.partner.enqueued:
                s.note = "not enqueued: the listener %s" % ("was not acknowledged" if not s.partner.enqueued
                                                            else "ran no first step within 90 s")
                return
            if not self.enqueue(s, avoid=getattr(s.partner, "node", None)):
                return
        elif not self.enqueue(s):
            return
        r = s.rid
        if s.kind == "fan" and s.params.get("pause"):
            self.sleep(0.05, 0.6)
            if self.control(s, "xgr.pause", {"pid": str(r)}, {"pause": str(r)}, ("paused", "not")):
                self.sleep(0.1, 1.0)
                self.control(s, "xgr.resume", {"pid": str(r)}, {"resume": str(r)}, ("not paused", "running"))
            return
        if s.kind not in GATE_KINDS:
            return
        if not self.wait_first(s, 90):
            return
        self.sleep(0.0, 1.5)
        pid2 = "%d:2" % r
        if s.kind == "gate_wake":
            # after an ambiguous attempt, "only waiting processes can be woken" (W running or done)
            # means that attempt woke it (seed 1231: the answer lost in a PostgreSQL restart)
            self.control(s, "xgr_wakeUpProcess", {"from": OWNER, "processId": pid2, "payload": {"n": s.params["n"]}},
                         {"wake": {"pid": pid2}, "payload": {"n": s.params["n"]}},
                         ("not waiting", "only waiting processes", "no live"))
        elif s.kind == "gate_kill":
            self.control(s, "xgr.kill", {"pid": str(r)}, {"kill": str(r)}, ("no live",))
        elif s.kind == "gate_pause":
            if self.control(s, "xgr.pause", {"pid": str(r)}, {"pause": str(r)}, ("paused",)):
                self.sleep(0.0, 0.5)
                self.control(s, "xgr_wakeUpProcess", {"from": OWNER, "processId": pid2,
                                                      "payload": {"n": s.params["n"]}},
                             {"wake": {"pid": pid2}, "payload": {"n": s.params["n"]}}, ("not waiting",))
                self.sleep(0.0, 0.5)
                # after an ambiguous attempt (its answer lost), "no live session" means it resumed
                # the session and the woken W ran it to its end
                self.control(s, "xgr.resume", {"pid": str(r)}, {"resume": str(r)}, ("not paused", "no live"))
        elif s.kind == "gate_wait":
            # a second enqueue of a running rootPid is answered as for the running session and
            # changes nothing (docs/RPC.md); a wake-up of a pid the session does not have is refused
            self.probe(s, "xgr.enqueue", dict(bundle_req_fan(), owner=OWNER, rootPid=r, xrc729="local"), "noop")
            self.probe(s, "xgr_wakeUpProcess", {"from": OWNER, "processId": "%d:9" % r, "payload": {"n": 7}},
                       "refused")
        if s.kind == "gate_kill" and s.events and "refused" not in s.events[-1]:
            # the rootPid of a finished session cannot start again (-32008)
            self.probe(s, "xgr.enqueue", dict(bundle_req_fan(), owner=OWNER, rootPid=r, xrc729="local"), "refused")

    def probe(self, s, method, params, expect):
        """A write whose answer is known: "refused" (a definite error) or "noop" (an enqueue of a
        running session: acknowledged as `scheduled`, `already_queued` or `paused`)."""
        ans, ok, _ = self.retry(s, method, params)
        if expect == "refused":
            good = not ok and not ambiguous(ans)
        else:
            good = ok and ans.get("result", {}).get("ack") in ("scheduled", "already_queued", "paused")
        s.probes.append((method, expect, good, ans))

def bundle_req_fan():
    return {"ostcId": "crash_daemon", "init": {"stepId": "Start", "payload": {"Rounds": 1, "Seed": 1}}}
