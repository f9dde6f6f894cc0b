"""cluster.py — the fault suite's cluster: one throwaway PostgreSQL, N xgrd nodes, and between each
node and the database a TCP proxy the driver controls (docs/FAULTS.md).

  Pg       a PostgreSQL 15 made by tests/pg/pg_cluster.sh (unix socket only); restart() restarts
           it in place (pg_ctl restart, immediate mode), stop() deletes it.
  Proxy    listens on 127.0.0.1:0 and relays every connection to the database's unix socket.
           set(mode, ...) changes what it does to the bytes: "pass"; "delay" (each chunk waits D
           ms); "blackhole" (nothing moves either way, connections stay open and bytes wait: a
           partition that heals); "cut" (every connection is closed, new ones too, until the next
           set). `app` restricts a mode to the connections whose PostgreSQL application_name starts
           with it (read from the startup packet; the nodes name theirs, docs/CLUSTER.md).
  Node     an Xgrd (tests/lib/xgrd_harness.py) on its proxy, with the suite's options; a node of
           the clock kind runs under libfaketime with a clock file the driver rewrites.
Everything listens on 127.0.0.1 only; every process is started here and stopped by its pid.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from xgrd_harness import Fail, Xgrd, pg_schema_url  # noqa: E402,F401 (Fail: for the driver)

ALL = []   # every Node made, so that an interrupted run can kill them

PG_BIN = os.environ.get("XGR_PG_BIN", "/usr/lib/postgresql/15/bin")
PG_CLUSTER = os.path.join(HERE, "..", "pg", "pg_cluster.sh")
FAKETIME_LIBS = ["/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
                 "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"]


def faketime_lib():
    """The libfaketime to preload (Debian's `faketime`), or None when it is not installed."""
    return next((p for p in FAKETIME_LIBS if os.path.exists(p)), None)


def throwaway(prefix):
    """For the suite's small tests: exit 77 (skip) without PostgreSQL 15; else a new directory
    (in /dev/shm when there is one; readable by the server's user) and a Pg in it with an empty
    schema `t`: (dir, pg, store URL of schema t). The caller stops pg and removes dir."""
    if not os.path.exists(os.path.join(PG_BIN, "pg_ctl")):
        print("SKIP: no PostgreSQL 15 under %s (scripts/deps.sh installs it)" % PG_BIN)
        sys.exit(77)
    top = tempfile.mkdtemp(prefix=prefix, dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    os.chmod(top, 0o755)   # the server runs as an unprivileged user when this runs as root
    pg = Pg(os.path.join(top, "pg"))
    pg.sql("public", "CREATE SCHEMA t")
    return top, pg, pg_schema_url(pg.url, "t")


class Pg:
    """A throwaway PostgreSQL under dir (made by pg_cluster.sh start; dir must not exist)."""

    def __init__(self, dir):
        self.dir = dir
        out = subprocess.run([PG_CLUSTER, "start", dir], capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError("pg_cluster.sh start: %s%s" % (out.stdout, out.stderr))
        self.url = out.stdout.strip().splitlines()[-1]
        self.socket = os.path.join(dir, ".s.PGSQL.5432")

    def sql(self, schema, q, timeout=60):
        """q's output (psql -Atq) in schema; RuntimeError on an error or after timeout s."""
        out = subprocess.run(["psql", "-Atq", pg_schema_url(self.url, schema), "-c", q], capture_output=True,
                             text=True, timeout=timeout)
        if out.returncode:
            raise RuntimeError("psql %s: %s" % (q[:200], out.stderr))
        return out.stdout.strip()

    def restart(self):
        """Restart the server (immediate stop: as a crash; the WAL makes it consistent again)."""
        # -l: the server must not inherit our pipes (run() would wait for their end)
        cmd = [os.path.join(PG_BIN, "pg_ctl"), "-D", os.path.join(self.dir, "data"), "-l",
               os.path.join(self.dir, "server.log"), "-m", "immediate", "-w", "-t", "60", "restart"]
        if os.getuid() == 0:
            cmd = ["runuser", "-u", os.environ.get("XGR_PG_USER", "postgres"), "--"] + cmd
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
        if out.returncode:
            raise RuntimeError("pg_ctl restart: %s%s" % (out.stdout, out.stderr))

    def stop(self):
        subprocess.run([PG_CLUSTER, "stop", self.dir], capture_output=True)


def _app_name(first):
    """The application_name of a PostgreSQL startup packet (b'' when it is not one)."""
    if len(first) < 8 or first[4:8] != b"\x00\x03\x00\x00":
        return ""
    parts = first[8:].split(b"\x00")
    for k, v in zip(parts[0::2], parts[1::2]):
        if k == b"application_name":
            return v.decode(errors="replace")
    return ""


class _Conn:
    def __init__(self, proxy, client):
        self.proxy, self.client, self.app, self.closed = proxy, client, None, False
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.connect(proxy.target)

    def close(self):
        if self.closed:
            return
        self.closed = True
        for s in (self.client, self.server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def pump(self, src, dst, upstream):
        try:
            while not self.closed:
                data = src.recv(65536)
                if not data:
                    break
                if upstream and self.app is None:
                    self.app = _app_name(data)
                while not self.closed:
                    mode, arg = self.proxy.mode_for(self)
                    if mode == "blackhole":
                        time.sleep(0.01)
                        continue
                    if mode == "cut":
                        self.close()
                        return
                    if mode == "delay":
                        time.sleep(arg / 1000.0)
                    break
                dst.sendall(data)
        except OSError:
            pass
        self.close()
        self.proxy.forget(self)


class Proxy:
    """A TCP relay 127.0.0.1:port -> the database's unix socket, under the driver's control."""

    def __init__(self, target):
        self.target = target
        self.lock = threading.Lock()
        self.mode, self.arg, self.app = "pass", 0, None
        self.conns = set()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.done = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.done:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                cut = self.mode == "cut" and self.app is None
            if cut:
                c.close()
                continue
            try:
                conn = _Conn(self, c)
            except OSError:       # the database is down (restarting): the client sees a closed connection
                c.close()
                continue
            with self.lock:
                self.conns.add(conn)
            threading.Thread(target=conn.pump, args=(c, conn.server, True), daemon=True).start()
            threading.Thread(target=conn.pump, args=(conn.server, c, False), daemon=True).start()

    def mode_for(self, conn):
        with self.lock:
            if self.app is not None and not (conn.app or "").startswith(self.app):
                return "pass", 0
            return self.mode, self.arg

    def forget(self, conn):
        with self.lock:
            self.conns.discard(conn)

    def set(self, mode, arg=0, app=None):
        """Switch to mode ("pass", "delay" with arg ms, "blackhole", "cut"), for every connection or
        (app) those whose application_name starts with app. A cut closes the affected connections now."""
        with self.lock:
            self.mode, self.arg, self.app = mode, arg, app
            victims = [c for c in self.conns if app is None or (c.app or "").startswith(app)] if mode == "cut" else []
        for c in victims:
            c.close()

    def url(self, schema):
        return pg_schema_url("postgresql://xgr@127.0.0.1:%d/xgr?sslmode=disable&gssencmode=disable" % self.port,
                             schema)

    def close(self):
        self.done = True
        self.set("cut")
        self.sock.close()


class Node(Xgrd):
    """One cluster node `name` on its own proxy. clock_file: run under libfaketime, whose offset
    the driver steps by rewriting that file (FAKETIME_TIMESTAMP_FILE, re-read every second)."""

    def __init__(self, xgrd, schema, dir, name, proxy, lease_ms, hibernate, scale, clock_file=None):
        args = ["--node-id", name, "--lease-ms", str(lease_ms), "--time-scale", str(scale),
                "--first-step-timeout", "100", "--session-ttl", "3153600000", "--log-level", "warn"]
        if hibernate is not None:
            args += ["--hibernate-after", str(hibernate)]
        super().__init__(xgrd, proxy.url(schema), dir, args, name)
        ALL.append(self)
        self.proxy = proxy
        self.stopped = False          # SIGSTOPped by the driver
        self.up = False               # started and meant to run (an exit is then an anomaly)
        self.dead = False             # killed for good (--repro): nobody restarts it
        self.clock_file = clock_file
        if clock_file:
            with open(clock_file, "w") as f:
                f.write("+0\n")
            self.env = dict(os.environ, LD_PRELOAD=faketime_lib(), FAKETIME_TIMESTAMP_FILE=clock_file,
                            FAKETIME_CACHE_DURATION="1", FAKETIME_DONT_FAKE_MONOTONIC="1",
                            FAKETIME_NO_CACHE="0")

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def usable(self):
        """Started, not stopped by the driver and not exited: a client may send it calls."""
        return self.running() and not self.stopped

    def ready(self):
        try:
            return urllib.request.urlopen(self.url + "readyz", timeout=2).status == 200
        except Exception:
            return False

    def sigstop(self):
        self.stopped = True
        self.proc.send_signal(signal.SIGSTOP)

    def sigcont(self):
        self.proc.send_signal(signal.SIGCONT)
        self.stopped = False

    def step_clock(self, secs):
        with open(self.clock_file, "w") as f:
            f.write("%+ds\n" % secs)
