"""faults.py — the fault suite's seeded fault schedule, the injector that carries it out, and the
operator that restarts what a fault left broken (docs/FAULTS.md, "Faults").

A schedule is a list of Fault(at, kind, node, dur, arg) derived from a random.Random of the run's
seed only: the same seed gives the same schedule (`tests/faults/run --replay SEED`). Faults come
one after another (each healed before the next starts), on a node drawn from the seed; `at` is
seconds after the workload started. Kinds:
  kill       SIGKILL the node, start it again (same --node-id) after dur s
  stop       SIGSTOP the node for dur s (1.5-3 leases: past its lease), then SIGCONT
  cut        the node's proxy closes every connection to PostgreSQL, and refuses new ones, for dur s
  delay      the node's proxy holds each chunk arg ms, for dur s
  blackhole  the node's proxy moves nothing for dur s (connections stay open; bytes wait)
  pgrestart  PostgreSQL restarts (immediate stop: a crash), every node's connections break
  clock      the clock node's wall clock steps by arg s (libfaketime; monotonic clock untouched);
             skipped (and not counted) without libfaketime, the schedule staying the same
  outbox     only the node's lease connection (`xgr lease NODE`: heartbeats, claims, the outbox
             poll that delivers wake-ups to the sessions it holds) is delayed arg ms, for dur s
The operator (a thread) restarts a node that is not ready for 2 s while no fault is on it (a node
whose store failed answers /readyz 503 and waits for a restart: docs/CLUSTER.md, "Failure
cases"), and records a node that exited by itself.
"""
import signal
import threading
import time
from collections import Counter

KINDS = ("kill", "stop", "cut", "delay", "blackhole", "pgrestart", "clock", "outbox")


class Fault:
    def __init__(self, at, kind, node, dur=0.0, arg=0):
        self.at, self.kind, self.node, self.dur, self.arg = at, kind, node, dur, arg

    def __str__(self):
        where = "" if self.kind == "pgrestart" else " n%d" % (self.node + 1)
        extra = (" %+ds" % self.arg if self.kind == "clock" else
                 " %dms" % self.arg if self.kind in ("delay", "outbox") else "")
        return "%.1fs %s%s%s for %.1fs" % (self.at, self.kind, where, extra, self.dur)


def schedule(rnd, nodes, window, lease_ms, kinds):
    """Faults for a workload of `window` s on `nodes` nodes, drawn from rnd; kinds: those allowed."""
    lease = lease_ms / 1000.0
    out, t = [], rnd.uniform(0.5, 1.5)
    while t < window - 1.0:
        kind = rnd.choice(kinds)
        node = rnd.randrange(nodes)
        if kind == "kill":
            f = Fault(t, kind, node, rnd.uniform(0.1, 2.0))
        elif kind == "stop":
            f = Fault(t, kind, node, rnd.uniform(1.5, 3.0) * lease)
        elif kind == "cut":
            f = Fault(t, kind, node, rnd.uniform(0.1, 1.5))
        elif kind == "delay":
            f = Fault(t, kind, node, rnd.uniform(1.0, 4.0), rnd.choice([20, 50, 100, 250]))
        elif kind == "blackhole":
            f = Fault(t, kind, node, rnd.uniform(0.5, 3.0) * lease)
        elif kind == "pgrestart":
            f = Fault(t, kind, 0, 0.0)
        elif kind == "clock":
            f = Fault(t, kind, node, 0.0, rnd.choice([-1, 1]) * rnd.choice([5, 30, 300, 3600]))
        else:
            f = Fault(t, kind, node, rnd.uniform(1.0, 4.0), rnd.choice([100, 300, 600]))
        out.append(f)
        t += f.dur + rnd.uniform(1.0, 3.0)
    return out


class Injector:
    """Carries out a schedule on a cluster (run.Run: .nodes, .pg, .start_node, .clock_node) and
    keeps its nodes running (the operator). A node's lock is held by whoever acts on it."""

    def __init__(self, run, faults):
        self.run, self.faults = run, faults
        self.done = threading.Event()
        self.stop_op = threading.Event()
        self.injected = Counter()
        self.restarts = 0
        self.node_exits = []          # (node, what): nodes that ended by themselves
        self.lock = threading.Lock()
        self.log = []

    def note(self, msg):
        self.log.append("%7.2f %s" % (time.time() - self.run.t0, msg))

    def carry_out(self, t0):
        try:
            for f in self.faults:
                time.sleep(max(0.0, t0 + f.at - time.time()))
                self.inject(f)
        finally:
            self.done.set()

    def inject(self, f):
        run = self.run
        n = run.nodes[f.node] if f.kind not in ("pgrestart", "clock") else run.clock_node() if f.kind == "clock" else None
        if n is not None:
            n.lock.acquire()      # not while the operator restarts it
        self.note("inject %s" % f)
        try:
            if f.kind == "kill":
                n.up = False
                n.stop(signal.SIGKILL)
                time.sleep(f.dur)
                if f.arg >= 0:      # arg -1: stays dead (--repro)
                    run.start_node(n)
                else:
                    n.dead = True
            elif f.kind == "stop":
                n.sigstop()
                time.sleep(f.dur)
                n.sigcont()
            elif f.kind in ("cut", "blackhole"):
                n.proxy.set(f.kind)
                time.sleep(f.dur)
                n.proxy.set("pass")
            elif f.kind == "delay":
                n.proxy.set("delay", f.arg)
                time.sleep(f.dur)
                n.proxy.set("pass")
            elif f.kind == "outbox":
                n.proxy.set("delay", f.arg, app="xgr lease")
                time.sleep(f.dur)
                n.proxy.set("pass")
            elif f.kind == "pgrestart":
                run.pg.restart()
            elif f.kind == "clock" and not n.clock_file:
                self.note("skipped: no libfaketime (Debian's faketime; scripts/deps.sh installs it)")
                return
            elif f.kind == "clock":
                n.offset = getattr(n, "offset", 0) + f.arg
                n.step_clock(n.offset)
            self.injected[f.kind] += 1
        except BaseException as e:     # the harness's Fail is a SystemExit
            self.note("fault %s: %s" % (f, e))
        finally:
            if n is not None:
                n.lock.release()

    def operate(self):
        """Every 0.25 s: restart nodes that exited by themselves or are not ready for 2 s."""
        unready = {}
        while not self.stop_op.is_set():
            for n in self.run.nodes:
                if n.dead or not n.lock.acquire(blocking=False):
                    unready.pop(n.name, None)
                    continue
                try:
                    if n.stopped:
                        unready.pop(n.name, None)
                    elif not n.running():
                        if n.up:     # it was up and nobody ended it
                            self.node_exits.append((n.name, "exited by itself with status %s: %s" %
                                                    (n.proc.returncode, n.log_tail(600).replace("\n", " | "))))
                            self.note("%s exited by itself (%s)" % (n.name, n.proc.returncode))
                        self.restart(n)
                    elif n.ready():
                        unready.pop(n.name, None)
                    elif time.time() - unready.setdefault(n.name, time.time()) > 2.0:
                        n.up = False
                        rc = n.stop(signal.SIGTERM, timeout=15)
                        self.note("%s not ready for 2 s: restarted (it exited %s)" % (n.name, rc))
                        if rc not in (0, 4):
                            self.node_exits.append((n.name, "exited %s at SIGTERM while not ready: %s" %
                                                    (rc, n.log_tail(600).replace("\n", " | "))))
                        self.restart(n)
                        unready.pop(n.name, None)
                finally:
                    n.lock.release()
            self.stop_op.wait(0.25)

    def restart(self, n):
        """Start n again (the caller holds n.lock); a start that fails (the database unreachable:
        exit 3) is noted and tried again at the next round."""
        self.restarts += 1
        try:
            self.run.start_node(n)
        except BaseException as e:
            self.note("%s did not start: %s" % (n.name, str(e).replace("\n", " | ")[-300:]))

    def heal(self):
        """Everything back to normal: every proxy passes, no node stopped."""
        for n in self.run.nodes:
            n.proxy.set("pass")
            if n.stopped:
                n.sigcont()


def summary(counter):
    return "{%s}" % ",".join("%s=%d" % (k, v) for k, v in sorted(counter.items()) if v) if sum(
        counter.values()) else "{}"

