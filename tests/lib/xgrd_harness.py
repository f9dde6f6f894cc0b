"""xgrd_harness.py — the shared harness of the Python tests and benchmarks that drive a real xgrd.

What tests/hibernate/*.py, tests/pg/test_cluster.py and bench/cluster/bench_cluster.py have in
common (the C tests have their own, tests/daemon/harness.c): an `Xgrd` is one xgrd process on
127.0.0.1 with an ephemeral port (--port-file), its store, a directory for its port file and log,
and its JSON-RPC and /metrics endpoints; plain functions poll (`until`, `wait_for`), report
(`check`, `fail`) and query PostgreSQL (`psql`, `pg_schema_url`); `Hang` is an API that never answers,
`JsonApi` one that answers every GET with a fixed JSON body. A failure is `Fail`, a
SystemExit: uncaught it ends the script with exit status 1 and "FAIL: ..." on stderr.

Scripts import it with a sys.path entry computed from their own __file__, so they still run
directly as `python3 path/to/script.py ARGS`.
"""
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request


class Fail(SystemExit):
    """A failed check or a broken xgrd; str() and the exit message are "FAIL: <msg>"."""

    def __init__(self, msg):
        super().__init__("FAIL: " + msg)

    def __str__(self):
        return self.code


def fail(msg):
    """Raise Fail(msg)."""
    raise Fail(msg)


def check(cond, what):
    """Print "ok   <what>" when cond holds, else raise Fail(what)."""
    if not cond:
        fail(what)
    print("ok  ", what, flush=True)


def until(cond, secs, every=0.02):
    """Call cond() every `every` s until it is true (True) or secs have passed (False)."""
    t0 = time.time()
    while time.time() - t0 < secs:
        if cond():
            return True
        time.sleep(every)
    return False


def wait_for(what, cond, secs=5.0, every=0.02):
    """until(cond, secs, every), or raise Fail(what)."""
    if not until(cond, secs, every):
        fail(what)


def pg_schema_url(url, schema):
    """The libpq URI url with its search_path set to schema."""
    return url + ("&" if "?" in url else "?") + "options=-csearch_path%3D" + schema


def psql(url, sql):
    """Run sql with `psql -Atq url -c sql`; its output without the trailing newline; Fail on an error."""
    out = subprocess.run(["psql", "-Atq", url, "-c", sql], capture_output=True, text=True)
    if out.returncode:
        fail("psql %s: %s" % (sql, out.stderr))
    return out.stdout.strip()


class Xgrd:
    """One xgrd on 127.0.0.1:0 with `--store store --workers 2 --auth none --log-level warn` plus
    args; its port file and log (stderr, appended) are DIR/NAME.port and DIR/NAME.log. The caller
    owns dir; start() runs it (again after a stop), stop() or kill() ends it. env: the process's
    environment (None: this one's), read at each start."""

    def __init__(self, exe, store, dir, args=(), name="xgrd"):
        self.exe, self.store, self.dir, self.args, self.name = exe, store, dir, list(args), name
        self.port_file = os.path.join(dir, name + ".port")
        self.log = os.path.join(dir, name + ".log")
        self.proc = None
        self.url = None
        self.env = None

    def start(self, timeout=20.0, readyz=True):
        """Start xgrd and wait until /readyz answers 200; the seconds that took. Fail when it exits
        first or is not ready within timeout s (then it is killed). readyz False: wait only until it
        answers JSON-RPC calls (recovery is done), for an xgrd whose /readyz stays 503 because its
        --chain node is down."""
        if os.path.exists(self.port_file):
            os.remove(self.port_file)
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen([self.exe, "--listen", "127.0.0.1:0", "--store", self.store, "--port-file",
                                          self.port_file, "--workers", "2", "--auth", "none", "--log-level", "warn"] +
                                         self.args, stderr=log, env=self.env)
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                fail("%s exited at start: %s" % (self.name, self.log_tail(500)))
            port = open(self.port_file).read().strip() if os.path.exists(self.port_file) else ""
            if port:
                self.url = "http://127.0.0.1:%s/" % port
                try:
                    if readyz and urllib.request.urlopen(self.url + "readyz", timeout=2).status == 200:
                        return time.time() - t0
                    if not readyz and "result" in self.rpc("xgr_getCoreAddrs", {}, timeout=2):
                        return time.time() - t0
                except Exception:
                    pass
            time.sleep(0.01)
        self.kill()
        fail("%s not ready" % self.name)

    def stop(self, sig=signal.SIGTERM, timeout=30.0):
        """Send sig (and SIGCONT, for a stopped process) and wait up to timeout s, then SIGKILL;
        the exit status (negative: killed by that signal)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.send_signal(signal.SIGCONT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self):
        """SIGKILL it if it was started and still runs (for finally blocks); never raises."""
        if self.proc and self.proc.poll() is None:
            self.stop(signal.SIGKILL)

    def log_tail(self, n):
        """The last n characters of its log."""
        return open(self.log, errors="replace").read()[-n:]

    def call(self, body, timeout=30):
        """POST the JSON-RPC request or batch body; the parsed answer (errors included)."""
        rq = urllib.request.Request(self.url, json.dumps(body).encode(), {"Content-Type": "application/json"})
        return json.loads(urllib.request.urlopen(rq, timeout=timeout).read())

    def rpc(self, method, params, timeout=30):
        """One JSON-RPC call; the whole answer ({"result": ...} or {"error": ...})."""
        return self.call({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, timeout)

    def ok(self, method, params, timeout=30):
        """One JSON-RPC call; its result, or Fail naming the method, node, params and error."""
        r = self.rpc(method, params, timeout)
        if "error" in r:
            fail("%s on %s %s: %s" % (method, self.name, json.dumps(params)[:200], json.dumps(r["error"])))
        return r["result"]

    def ok_batch(self, calls, timeout=30):
        """A JSON-RPC batch of (method, params) pairs; the results in order, or Fail on the first error."""
        ans = self.call([{"jsonrpc": "2.0", "id": i, "method": m, "params": p} for i, (m, p) in enumerate(calls)],
                        timeout)
        by = {a.get("id"): a for a in ans} if isinstance(ans, list) else {}
        for i, (m, p) in enumerate(calls):
            a = by.get(i, {"error": "no answer in %s" % json.dumps(ans)[:200]})
            if "error" in a:
                fail("%s on %s %s: %s" % (m, self.name, json.dumps(p)[:200], json.dumps(a["error"])))
        return [by[i]["result"] for i in range(len(calls))]

    def metric(self, kind, family="xgr_engine_events_total"):
        """The value of family{kind="kind"} (of the unlabelled family when kind is None) on /metrics; 0 if absent."""
        text = urllib.request.urlopen(self.url + "metrics", timeout=5).read().decode()
        label = r'\{kind="%s"\}' % kind if kind is not None else ""
        m = re.search(r'^%s%s (\S+)$' % (family, label), text, re.M)
        return float(m.group(1)) if m else 0.0

    def deploy(self, bundle, xrc729="local", **extra):
        """Register a bundle ({"rules": {key: rule}, "orchestration": {...}}) under registry xrc729,
        extra fields (e.g. from=OWNER) added to each call; the orchestration's id."""
        for k, r in bundle["rules"].items():
            self.ok("xgr_putRule", [dict(extra, address=k, rule=r)])
        self.ok("xgr.putOrchestration", dict(extra, xrc729=xrc729, orchestration=bundle["orchestration"]))
        return bundle["orchestration"]["id"]


class JsonApi:
    """An API on 127.0.0.1 (an ephemeral port: .port) that answers every GET with 200 and the JSON
    text body (bytes), until close()."""

    def __init__(self, body=b'{"v": 7}'):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
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


class Hang:
    """A server on 127.0.0.1 that accepts connections and never answers, until close(): an API
    that hangs. It keeps at most max_conns of them (later ones wait in the listen backlog)."""

    def __init__(self, max_conns=2048):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(512)
        self.port = self.sock.getsockname()[1]
        self.max_conns = max_conns
        self.conns = []
        self.lock = threading.Lock()
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while len(self.conns) < self.max_conns:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(c)

    def close(self):
        self.sock.close()
        with self.lock:
            for c in self.conns:
                c.close()

