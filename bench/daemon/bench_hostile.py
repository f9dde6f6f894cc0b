#!/usr/bin/env python3
"""bench_hostile.py — a victim's latency while another tenant attacks xgrd (issue 38).

One xgrd (`--auth none`, SQLite store on /dev/shm, the default limits of docs/SECURITY.md; the loopback API
the attacks need is allowed with --allow-outbound) and two tenants:

  victim    owner 0x…c1, calls from source address 127.0.0.2: a round of xgr.enqueue (a session of
            one step; the answer waits for its commit), xgr.getSession of it and xgr_listSessions of
            it (a listing of all of an owner's sessions costs in proportion to how many it has, up
            to the 1,000 one call scans: that would measure the victim's own growth, not the attacks);
  attacker  owner 0x…a1, calls from 127.0.0.1, runs every attack of the issue's findings at once:
            1. event streams: 64 `/ui/events` streams opened and held;
            4. batched validates: 9 batches of 20 `xgr_validateDataTransfer` against a rule whose
               API never answers;
            5./6. 300 sessions whose step calls that API (outbound calls to loopback: allowed here,
               so they hold connections up to the caps);
            3. a two-level 32-way fan-out (1,057 processes, a 64 KB payload) enqueued every 0.5 s
               (200 of them; the quota --max-session-bytes of 16 MiB ends each; an xgrd without quotas
               gets only 4, ~70 MB each);
            2./7./9. a loop of hostile requests: a rebinding Host, big integers where names are
               expected, 130-level nesting, percent-encoded CR/LF in the path.

The victim's rounds are timed in phases: no attack (the baseline); the junk flood alone (one
client sending as fast as it can: CPU); the fan-outs alone; the attacks that hold resources
(streams open, validates and API calls in flight); then everything at once. Printed per phase:
the median, p90, p99 and largest round time and their ratios to the baseline, then the attacks'
refusals from /metrics and whether xgrd is still alive. A round that fails is counted and
reported, not timed. The attacker's Python clients share the machine's cores with xgrd: on a
small machine the flood's cost is partly the load generator's.

  bench_hostile.py XGRD [ROUNDS]     (default 1000 rounds per phase)
"""
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "lib"))
sys.dont_write_bytecode = True
from xgrd_harness import Hang, Xgrd, fail, wait_for  # noqa: E402

XGRD = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
VICTIM = "0x00000000000000000000000000000000000000c1"
ATTACKER = "0x00000000000000000000000000000000000000a1"
# the store on tmpfs when there is one: the attacks' effect on the victim, not the disk's fsync
# latency (noisy on a virtual machine's disk: it moved the victim's p90 by 5x between runs)
DIR = tempfile.mkdtemp(prefix="xgr-bench-hostile-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
FANOUTS = [4]   # fan-outs the attacker enqueues: 4 without quotas (each stores ~70 MB), else 200


def post(port, body, src="127.0.0.1", timeout=60, host=None, path="/"):
    """POST body (bytes) from source address src; (status, parsed answer or None)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(src, 0))
    try:
        c.request("POST", path, body, {"Content-Type": "application/json", "Host": host or "127.0.0.1:%d" % port})
        r = c.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, None
    finally:
        c.close()


def rpc(port, method, params, src="127.0.0.1", timeout=60):
    return post(port, json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode(), src,
                timeout)[1]


RULE_OK = {"payload": {"n": {"type": "int64", "default": 0}}, "rules": ["[n] >= 0"], "onValid": {}, "onInvalid": {}}


def hang_rule(port):
    return {"payload": {"n": {"type": "int64", "default": 0}},
            "apiCalls": [{"name": "never", "method": "GET", "timeoutMs": 120000,
                          "urlTemplate": "http://127.0.0.1:%d/never" % port,
                          "extractMap": {"v": {"type": "int64", "expr": "resp.v", "default": 0}}}],
            "rules": ["[n] >= 0"], "onValid": {}, "onInvalid": {}}


def fan_bundle():
    """A → B1..B32, each Bi → C1..C32: 1 + 32 + 32·32 = 1,057 processes."""
    r = "0x00000000000000000000000000000000000000f1"
    st = {"A": {"rule": r, "onValid": {"spawns": ["B%d" % i for i in range(1, 33)]}}}
    for i in range(1, 33):
        st["B%d" % i] = {"rule": r, "onValid": {"spawns": ["C%d" % j for j in range(1, 33)]}}
    for j in range(1, 33):
        st["C%d" % j] = {"rule": r}
    return {"orchestration": {"id": "fan", "structure": st},
            "rules": {r: {"payload": {"blob": {"type": "string", "default": ""}}, "rules": ["true"],
                          "onValid": {"payload": {"blob": "[blob]"}}, "onInvalid": {}}}}


def victim_round(port, i, phase):
    """One round of the victim's calls; its seconds, or None when a call failed."""
    t0 = time.perf_counter()
    root = phase * 100000 + i + 1
    a = rpc(port, "xgr.enqueue", {"owner": VICTIM, "rootPid": root, "xrc729": "victim",
                                  "init": {"stepId": "S", "payload": {"n": i}}}, src="127.0.0.2")
    if not a or "error" in a:
        return None, a
    a = rpc(port, "xgr.getSession", {"owner": VICTIM, "rootPid": root}, src="127.0.0.2")
    if not a or "error" in a:
        return None, a
    a = rpc(port, "xgr_listSessions", [{"owner": VICTIM, "rootPid": root}], src="127.0.0.2")
    if not a or "error" in a:
        return None, a
    return time.perf_counter() - t0, None


def victim(port, phase):
    times, errors = [], []
    for i in range(ROUNDS):
        t, e = victim_round(port, i, phase)
        if t is None:
            errors.append(e)
        else:
            times.append(t)
    return times, errors


def cpu(pid):
    """User + system CPU seconds of process pid so far."""
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


# ---- the attacks (each runs until `stop`, bounded in count) ----------------------------------------

def attack_streams(port, held):
    for _ in range(64):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(("GET /ui/events?owner=%s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\n\r\n" % (ATTACKER, port)).encode())
            held.append(s)
        except OSError:
            pass


def attack_validates(port, counts):
    def batch(b):
        body = [{"jsonrpc": "2.0", "id": i, "method": "xgr_validateDataTransfer",
                 "params": [{"from": ATTACKER, "orchestration": "hang", "stepId": "S",
                             "sessionId": str(900000 + b * 20 + i)}]} for i in range(20)]
        try:
            post(port, json.dumps(body).encode(), timeout=120)
            counts["validate_batches_answered"] += 1
        except OSError:
            counts["validate_batches_failed"] += 1
    ts = [threading.Thread(target=batch, args=(b,), daemon=True) for b in range(9)]
    for t in ts:
        t.start()


def attack_api_sessions(port, counts, stop):
    for i in range(300):
        if stop.is_set():
            return
        a = rpc(port, "xgr.enqueue", {"owner": ATTACKER, "rootPid": 500000 + i, "xrc729": "hang"})
        counts["api_sessions" if a and "result" in a else "api_sessions_refused"] += 1


def attack_fanout(port, counts, stop):
    blob = "x" * 65536
    i = counts["fanouts"] + counts["fanouts_refused"]
    while not stop.is_set() and i < FANOUTS[0]:
        a = rpc(port, "xgr.enqueue", {"owner": ATTACKER, "rootPid": 700000 + i, "xrc729": "fan",
                                      "init": {"payload": {"blob": blob}}})
        counts["fanouts" if a and "result" in a else "fanouts_refused"] += 1
        i += 1
        stop.wait(0.5)


def attack_junk(port, counts, stop):
    bodies = [
        (b'{"jsonrpc":"2.0","id":1,"method":"xgr.getSession","params":{"owner":"' + VICTIM.encode() +
         b'","rootPid":"1"}}', "127.attacker.com:%d" % port, "/"),
        (b'{"jsonrpc":"2.0","id":1,"method":"xgr.enqueue","params":{"owner":"' + ATTACKER.encode() +
         b'","xrc729":100000000000000000000000,"ostcId":"x"}}', None, "/"),
        (b'{"jsonrpc":"2.0","id":1,"method":"xgr.enqueue","params":{"owner":"' + ATTACKER.encode() +
         b'","xrc729":"local","init":{"stepId":100000000000000000000000}}}', None, "/"),
        (b'{"jsonrpc":"2.0","id":1,"method":"xgr.getSession","params":' + b'[' * 130 + b']' * 130 + b'}', None, "/"),
        (b'{"jsonrpc":"2.0","id":1,"method":"xgr_getCoreAddrs","params":{}}', None, "/%0d%0alevel=error%20msg=forged"),
    ]
    n = 0
    while not stop.is_set() and n < 20000:
        body, host, path = bodies[n % len(bodies)]
        try:
            post(port, body, host=host, path=path, timeout=10)
            counts["junk"] += 1
        except OSError:
            counts["junk_failed"] += 1
        n += 1


def main():
    hang = Hang()
    args = ["--allow-outbound", "127.0.0.1/32", "--first-step-timeout", "60000"]
    helptext = subprocess.run([XGRD, "--help"], capture_output=True, text=True).stdout
    quotas = "--max-session-bytes" in helptext
    if quotas:
        args += ["--max-session-bytes", str(16 << 20)]
        FANOUTS[0] = 200
    x = Xgrd(XGRD, "sqlite:" + os.path.join(DIR, "s.db"), DIR, args)
    held, counts = [], {k: 0 for k in ("validate_batches_answered", "validate_batches_failed", "api_sessions",
                                        "api_sessions_refused", "fanouts", "fanouts_refused", "junk", "junk_failed")}
    stops = []
    try:
        x.start()
        port = int(x.url.rsplit(":", 1)[1].strip("/"))
        x.deploy({"orchestration": {"id": "v", "structure": {"S": {"rule": "0x00000000000000000000000000000000000000e1"}}},
                  "rules": {"0x00000000000000000000000000000000000000e1": RULE_OK}}, "victim", **{"from": VICTIM})
        x.deploy({"orchestration": {"id": "hang", "structure": {"S": {"rule": "0x00000000000000000000000000000000000000e2"}}},
                  "rules": {"0x00000000000000000000000000000000000000e2": hang_rule(hang.port)}}, "hang",
                 **{"from": ATTACKER})
        x.deploy(fan_bundle(), "fan", **{"from": ATTACKER})
        victim(port, 9)   # warm-up, not counted

        def run(fns):
            """Start the attacks fns (each until its stop event); the event."""
            ev = threading.Event()
            stops.append(ev)
            for f in fns:
                threading.Thread(target=f, args=(port, counts, ev), daemon=True).start()
            return ev

        def hold():
            """The attacks that hold resources (streams, validates, calls that never answer)."""
            attack_streams(port, held)
            attack_validates(port, counts)
            run([attack_api_sessions])
            wait_for("the attacker's validates in flight", lambda: x.metric(None, "xgr_validates_in_flight") > 0, secs=30)
            wait_for("the attacker's API sessions started",
                     lambda: counts["api_sessions"] + counts["api_sessions_refused"] >= 300, secs=60)

        pid = x.proc.pid

        def phase(name, n):
            c0, t0 = cpu(pid), time.time()
            ts, errs = victim(port, n)
            results.append((name, ts, errs, (cpu(pid) - c0) / (time.time() - t0)))

        def settle():
            """Wait until xgrd is idle again (what a phase started has run or been aborted)."""
            until_idle = time.time() + 60
            while time.time() < until_idle:
                c0 = cpu(pid)
                time.sleep(0.5)
                if cpu(pid) - c0 < 0.05:
                    return

        results = []
        phase("no attack", 1)
        ev = run([attack_junk])                       # 2, 7, 9: a flood of hostile requests from one client
        phase("junk flood", 2)
        ev.set()
        settle()
        hold()                                        # 1, 4, 5, 6: streams, validates, API calls held open
        settle()
        c0 = cpu(pid)
        time.sleep(3)
        holding_cpu = (cpu(pid) - c0) / 3
        phase("held resources", 4)
        ev = run([attack_fanout])                     # 3: fan-outs that the quota aborts
        phase("fan-outs", 3)
        ev.set()
        settle()
        phase("after fan-outs", 6)                    # what the fan-outs left in the store
        ev = run([attack_junk, attack_fanout])        # everything at once
        phase("all at once", 5)
        ev.set()
        alive = x.proc.poll() is None
        metrics = urllib_metrics(x)
        print("# bench_hostile: %d rounds per phase (enqueue + getSession + listSessions from 127.0.0.2), "
              "xgrd %s, quotas %s" % (ROUNDS, XGRD, "on (--max-session-bytes 16 MiB)" if quotas else "not built"))
        base = results[0][1]
        for name, ts, errs, load in results:
            if not ts:
                fail("%s: every round failed: %s" % (name, json.dumps(errs[:3])[:400]))
            print("%-15s median %6.2f ms (%.2fx)  p90 %6.2f ms (%.2fx)  p99 %6.2f ms (%.2fx)  max %7.2f ms  failed %d" %
                  (name, 1e3 * statistics.median(ts), statistics.median(ts) / statistics.median(base),
                   1e3 * pct(ts, 90), pct(ts, 90) / pct(base, 90), 1e3 * pct(ts, 99), pct(ts, 99) / pct(base, 99),
                   1e3 * max(ts), len(errs)))
            print("%-15s xgrd CPU %.2f cores" % ("", load))
            for e in errs[:3]:
                print("  failed: %s" % json.dumps(e)[:300])
        print("xgrd CPU while the attacks only hold their resources (no victim): %.3f cores" % holding_cpu)
        print("attacks: %s" % json.dumps(counts, sort_keys=True))
        print("xgrd refusals and caps: %s" % "; ".join(metrics))
        print("xgrd alive after the attacks: %s" % ("yes" if alive else "NO"))
    finally:
        for ev in stops:
            ev.set()
        for s in held:
            s.close()
        hang.close()
        x.kill()
        shutil.rmtree(DIR, ignore_errors=True)


def urllib_metrics(x):
    """The /metrics lines about refusals, caps, aborted sessions and open streams."""
    import urllib.request
    text = urllib.request.urlopen(x.url + "metrics", timeout=10).read().decode()
    keep = ("refused", "capped", "quota", "xgr_event_streams ", "outbound", "validates")
    return [ln for ln in text.splitlines() if not ln.startswith("#") and any(k in ln for k in keep)]


if __name__ == "__main__":
    main()
