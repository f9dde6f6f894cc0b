#!/usr/bin/env python3
"""test_streams.py — event streams cannot take xgrd's connections, and end with their permit (issue 38, finding 1).

Streams are GET /ui/events read over raw sockets (HTTP/1.0: the body is the bare event text), each
bound to a chosen loopback source address (127.0.0.1, .2, .3 are three clients).

Part 1, caps (xgrd --auth none, --max-streams-per-client 3, --max-streams-per-owner 4,
--max-streams 6): a client's 4th stream is refused with HTTP 429 whose text names
--max-streams-per-client and 3, an owner's 5th (from another client) names --max-streams-per-owner,
the 7th in all names --max-streams; the streams already open keep streaming (an event reaches
them), JSON-RPC calls answer, and /metrics shows xgr_event_streams 6 and one refusal per cap; a
client that closes a stream may open another at once (the closed one no longer counts).

Part 2, lifetime (xgrd --auth permits, --stream-max-secs 4, --log-level info): a permit in the
query is refused (400: URLs end up in logs); a stream opened with an xdalaPermit expiring in 2 s
and one opened with a 10-minute permit, both in
the `Authorization: XDaLaPermit` header are ended by the server with one `event: end`: the first
after its permit's expiry (data: reason "permit expired", the expiry), the second after 4 s (reason
"stream lifetime reached"); the response then ends. A stream refused for an expired permit is 403.

Part 3, the request log (of part 2's xgrd, --log-level info) never holds a permit's signature, and
a path carrying `permit=` (a '?' sent percent-encoded) is logged with the value as REDACTED.

  test_streams.py XGRD XGR
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from xgrd_harness import Xgrd, check, fail, wait_for  # noqa: E402

XGRD, XGR = sys.argv[1], sys.argv[2]
DIR = tempfile.mkdtemp(prefix="xgr-streams-")
A = "0x00000000000000000000000000000000000000a1"
B = "0x00000000000000000000000000000000000000b1"
C = "0x00000000000000000000000000000000000000c1"


class Stream:
    """GET path over HTTP/1.0 from source address src; status, headers and what came of the body."""

    def __init__(self, x, src, path, headers=()):
        port = int(x.url.rsplit(":", 1)[1].strip("/"))
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(src, 0))
        req = "GET %s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\n%s\r\n" % (path, port, "".join(h + "\r\n" for h in headers))
        self.s.sendall(req.encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            if not self.more():
                fail("GET %s: the connection closed before the headers: %r" % (path, self.buf[:200]))
        head, self.body = self.buf.split(b"\r\n\r\n", 1)
        self.status = int(head.split(b" ")[1])
        self.closed = False

    def more(self):
        d = self.s.recv(65536)
        self.buf += d
        return bool(d)

    def read_while(self, going, secs):
        """Read while going() holds, the server has not closed and secs have not passed; True once closed."""
        self.s.settimeout(0.2)
        t0 = time.time()
        while going() and not self.closed and time.time() - t0 < secs:
            try:
                d = self.s.recv(65536)
            except socket.timeout:
                continue
            self.closed = not d
            self.body += d
        return self.closed

    def read_until(self, needle, secs):
        """Read until needle is in the body (True) or secs pass (False)."""
        self.read_while(lambda: needle.encode() not in self.body, secs)
        return needle.encode() in self.body

    def read_to_end(self, secs):
        """Read until the server closes (True) or secs pass (False)."""
        return self.read_while(lambda: True, secs)

    def close(self):
        self.s.close()


def refused(x, src, owner, flag, value):
    st = Stream(x, src, "/ui/events?owner=" + owner)
    st.read_to_end(5)
    text = st.body.decode(errors="replace")
    check(st.status == 429 and ("%s is %d" % (flag, value)) in text,
          "a stream over %s %d is refused with 429 naming it: %s" % (flag, value, text.strip()[:150]))
    st.close()


def caps():
    x = Xgrd(XGRD, "memory:", DIR, ["--max-streams-per-client", "3", "--max-streams-per-owner", "4",
                                    "--max-streams", "6", "--max-connections", "64"], name="caps")
    opened = []
    try:
        x.start()

        def open_ok(src, owner):
            st = Stream(x, src, "/ui/events?owner=" + owner)
            if st.status != 200:
                fail("a stream from %s of %s within the caps: HTTP %d %r" % (src, owner, st.status, st.body[:200]))
            opened.append(st)
            return st

        for _ in range(3):
            open_ok("127.0.0.1", A)
        refused(x, "127.0.0.1", B, "--max-streams-per-client", 3)
        open_ok("127.0.0.2", A)
        refused(x, "127.0.0.2", A, "--max-streams-per-owner", 4)
        open_ok("127.0.0.2", B)
        open_ok("127.0.0.3", B)
        refused(x, "127.0.0.3", C, "--max-streams", 6)
        check(x.rpc("xgr_getCoreAddrs", {}, timeout=5).get("result") is not None, "JSON-RPC answers at the caps")
        # the open streams go on: an event of owner A reaches A's streams
        x.deploy(json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "daemon",
                                             "short.json"))), "short", **{"from": A})
        x.ok("xgr.enqueue", {"from": A, "xrc729": "short"})
        check(all(st.read_until('"owner":"%s"' % A, 10) for st in opened[:4]),
              "the streams open before the refusals still get their owner's events")
        text = urllib.request.urlopen(x.url + "metrics", timeout=5).read().decode()
        check(re.search(r"^xgr_event_streams 6$", text, re.M), "xgr_event_streams is 6")
        for lim in ("client", "owner", "total"):
            check(re.search(r'^xgr_event_streams_refused_total\{limit="%s"\} 1$' % lim, text, re.M),
                  "xgr_event_streams_refused_total{limit=\"%s\"} is 1" % lim)
        # a page that moved on (its socket closed) does not count against its client: the stream that
        # replaces it is admitted at once, not after the next keep-alive noticed the closed one
        opened.pop(0).close()
        st = Stream(x, "127.0.0.1", "/ui/events?owner=" + A)
        check(st.status == 200, "a client that closed a stream opens another at once (HTTP %d)" % st.status)
        opened.append(st)
    finally:
        for st in opened:
            st.close()
        x.stop()


def permit(key, *args):
    out = subprocess.run([XGR, "permit", "xdala", "--key", key, "--chain-id", "1887"] + list(args),
                         capture_output=True, text=True)
    if out.returncode:
        fail("xgr permit: %s" % out.stderr)
    return out.stdout.strip()


def lifetime():
    key = os.path.join(DIR, "owner.key")
    owner = subprocess.run([XGR, "key", "new", key], capture_output=True, text=True, check=True).stdout.strip().lower()
    # the harness starts --auth none; the later --auth permits wins
    x = Xgrd(XGRD, "memory:", DIR, ["--stream-max-secs", "4", "--log-level", "info", "--auth", "permits"],
             name="permits")
    try:
        x.start()
        short = permit(key, "--ttl", "2")
        long = permit(key, "--ttl", "600")
        expiry = int(json.loads(short)["message"]["expiry"])
        q = urllib.parse.quote(short, safe="")
        t_open = time.time()
        s0 = Stream(x, "127.0.0.1", "/ui/events?owner=%s&permit=%s" % (owner, q))
        s0.read_to_end(5)
        check(s0.status == 400, "a permit in the URL is refused (400 %s)" % s0.body.decode().strip()[:100])
        s1 = Stream(x, "127.0.0.1", "/ui/events?owner=" + owner, ["Authorization: XDaLaPermit " + short])
        s2 = Stream(x, "127.0.0.1", "/ui/events?owner=" + owner, ["Authorization: XDaLaPermit " + long])
        check(s1.status == 200 and s2.status == 200, "streams open with a permit in Authorization")
        check(s1.read_until("event: end", 15), "the stream with the 2-s permit gets `event: end`")
        t_end = time.time()
        check(t_end >= expiry, "... after its permit's expiry (%.2f s after it)" % (t_end - expiry))
        m = re.search(rb"event: end\ndata: (\{.*?\})\n\n", s1.body)
        d = json.loads(m.group(1)) if m else {}
        check(d.get("reason") == "permit expired" and d.get("expiry") == expiry,
              "... saying why: %s" % (m.group(1).decode() if m else s1.body[-200:]))
        check(s1.read_to_end(5), "... and the response ends")
        check(s2.read_until("event: end", 15), "the stream with the 10-minute permit gets `event: end`")
        t2 = time.time()
        m = re.search(rb"event: end\ndata: (\{.*?\})\n\n", s2.body)
        d = json.loads(m.group(1)) if m else {}
        check(t2 - t_open >= 4 and d.get("reason") == "stream lifetime reached" and d.get("maxSecs") == 4,
              "... after --stream-max-secs 4 (%.1f s), saying why: %s" % (t2 - t_open, m.group(1).decode() if m else ""))
        check(s2.read_to_end(5), "... and the response ends")
        s3 = Stream(x, "127.0.0.1", "/ui/events?owner=" + owner, ["Authorization: XDaLaPermit " + short])
        s3.read_to_end(5)
        check(s3.status == 403, "a stream with the expired permit is refused (403 %s)" % s3.body.decode().strip()[:100])
        for st in (s0, s1, s2, s3):
            st.close()
        # a path that carries permit= itself is logged redacted
        try:
            urllib.request.urlopen(x.url + "nothing%3Fpermit=SECRET123&x=1", timeout=5)
        except urllib.error.HTTPError:
            pass
        wait_for("the 404 is logged", lambda: "nothing?permit=REDACTED" in x.log_tail(1 << 20), secs=5)
        log = open(x.log, errors="replace").read()
        sigs = [json.loads(p)["signature"] for p in (short, long)]
        check(not any(sg in log or sg[2:] in log for sg in sigs) and "SECRET123" not in log,
              "the request log holds no permit (%d lines)" % log.count("\n"))
        check("permit=REDACTED" in log, "a path carrying permit= is logged with the value REDACTED")
    finally:
        x.stop()


try:
    caps()
    lifetime()
    print("PASS")
finally:
    shutil.rmtree(DIR, ignore_errors=True)
