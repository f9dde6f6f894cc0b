#!/usr/bin/env python3
"""bench_hostile.py — a victim's latency while another tenant attacks xgrd (issue 38).

One xgrd (`--auth none`, SQLite store, the default limits of docs/SECURITY.md; the loopback API
the attacks need is allowed with --allow-outbound) and two tenants:

  victim    owner 0x…c1, calls from source address 127.0.0.2: a round of xgr.enqueue (a session of
            one step; the answer waits for its commit), xgr.getSession of it and xgr_listSessions;
  attacker  owner 0x…a1, calls from 127.0.0.1, runs every attack of the issue's findings at once:
            1. event streams: 64 `/ui/events` streams opened and held;
            4. batched validates: 9 batches of 20 `xgr_validateDataTransfer` against a rule whose
               API never answers;
            5./6. 300 sessions whose step calls that API (outbound calls to loopback: allowed here,
               so they hold connections up to the caps);
            3. a two-level 32-way fan-out (1,057 processes, a 64 KB payload) enqueued every 0.5 s
               (200 of them; the quota --max-session-bytes 16M ends each; an xgrd without quotas
               gets only 4, ~70 MB each);
            2./7./9. a loop of hostile requests: a rebinding Host, big integers where names are
               expected, 130-level nesting, percent-encoded CR/LF in the path.

The victim's rounds are timed first with no attack (the baseline), then while every attack is in
place (streams open, validates and API calls in flight). Printed: the median, p90, p99 and the
largest round time of each phase and their ratios, the attacks' refusals from /metrics, and
whether xgrd is still alive. A round that fails is counted and reported, not timed.

  bench_hostile.py XGRD [ROUNDS]     (default 200 rounds per phase)
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
from xgrd_harness import Xgrd, fail, wait_for  # noqa: E402

XGRD = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 200
VICTIM = "0x00000000000000000000000000000000000000c1"
ATTACKER = "0x00000000000000000000000000000000000000a1"
DIR = tempfile.mkdtemp(prefix="xgr-bench-hostile-")
stop = threading.Event()
FANOUTS = [4]   # fan-outs the attacker enqueues: 4 without quotas (each stores ~70 MB), else 200


class Hang:
    """A server on 127.0.0.1 that accepts every connection and never answers (bounded: 2,048)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(512)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while len(self.conns) < 2048:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


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
    a = rpc(port, "xgr_listSessions", [{"owner": VICTIM, "limit": 10}], src="127.0.0.2")
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


def attack_api_sessions(port, counts):
    for i in range(300):
        if stop.is_set():
            return
        a = rpc(port, "xgr.enqueue", {"owner": ATTACKER, "rootPid": 500000 + i, "xrc729": "hang"})
        counts["api_sessions" if a and "result" in a else "api_sessions_refused"] += 1


def attack_fanout(port, counts):
    blob = "x" * 65536
    i = 0
    while not stop.is_set() and i < FANOUTS[0]:
        a = rpc(port, "xgr.enqueue", {"owner": ATTACKER, "rootPid": 700000 + i, "xrc729": "fan",
                                      "init": {"payload": {"blob": blob}}})
        counts["fanouts" if a and "result" in a else "fanouts_refused"] += 1
        i += 1
        stop.wait(0.5)


def attack_junk(port, counts):
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
        args += ["--max-session-bytes", "16M"]
        FANOUTS[0] = 200
    x = Xgrd(XGRD, "sqlite:" + os.path.join(DIR, "s.db"), DIR, args)
    held, counts = [], {k: 0 for k in ("validate_batches_answered", "validate_batches_failed", "api_sessions",
                                        "api_sessions_refused", "fanouts", "fanouts_refused", "junk", "junk_failed")}
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
        base, base_err = victim(port, 1)
        threads = [threading.Thread(target=f, args=(port, counts), daemon=True)
                   for f in (attack_api_sessions, attack_fanout, attack_junk)]
        attack_streams(port, held)
        attack_validates(port, counts)
        for t in threads:
            t.start()
        wait_for("the attacker's validates in flight", lambda: x.metric(None, "xgr_validates_in_flight") > 0, secs=30)
        wait_for("the attacker's API sessions started", lambda: counts["api_sessions"] + counts["api_sessions_refused"]
                 >= 300, secs=60)
        under, under_err = victim(port, 2)
        stop.set()
        for s in held:
            s.close()
        alive = x.proc.poll() is None
        metrics = urllib_metrics(x)
        print("# bench_hostile: %d rounds per phase (enqueue + getSession + listSessions from 127.0.0.2), "
              "xgrd %s, quotas %s" % (ROUNDS, XGRD, "on (--max-session-bytes 16M)" if quotas else "not built"))
        for name, ts, errs in (("no attack", base, base_err), ("under attack", under, under_err)):
            if not ts:
                fail("%s: every round failed: %s" % (name, json.dumps(errs[:3])[:400]))
            print("%-13s median %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms  failed rounds %d" %
                  (name, 1e3 * statistics.median(ts), 1e3 * pct(ts, 90), 1e3 * pct(ts, 99), 1e3 * max(ts), len(errs)))
            for e in errs[:3]:
                print("  failed: %s" % json.dumps(e)[:300])
        print("ratio under/no attack: median %.2fx  p90 %.2fx  p99 %.2fx" %
              (statistics.median(under) / statistics.median(base), pct(under, 90) / pct(base, 90),
               pct(under, 99) / pct(base, 99)))
        print("attacks: %s" % json.dumps(counts, sort_keys=True))
        print("xgrd refusals and caps: %s" % "; ".join(metrics))
        print("xgrd alive after the attacks: %s" % ("yes" if alive else "NO"))
    finally:
        stop.set()
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
