#!/usr/bin/env python3
"""test_tracing.py — xgrd's traces as an OpenTelemetry collector receives them (issue 35).

The test runs its own OTLP/HTTP receiver on 127.0.0.1 (POST /v1/traces, JSON) and an API server,
and starts xgrd (SQLite store) with --otlp-endpoint pointing at the receiver. The workload:
  - session 1, enqueued with a W3C traceparent header: step S calls the API and spawns B and C with
    a join J over both;
  - session 2 starts at M, which spawns T to wait an hour; xgrd restarts; session 3 runs W, whose
    wake-up wakes session 2's T (a cross-session wake-up);
  - session 4 is enqueued with an invalid traceparent (an all-zero trace id).
Then it checks the tree the spans make:
  - session 1's spans are in the header's trace; its session span's parent is the header's parent
    id; each step span's parent is the session span; the API call's span is a child of S's step span
    (CLIENT, server.address and status only); B's and C's step spans link to S's ("spawned_by"); the
    join span links to B's and C's step spans ("joined");
  - sessions without a header get the derived trace id (the first 16 bytes of
    sha256("xgr-trace|owner|rootPid|0|0")), session 4 too (an invalid header starts a new trace);
  - session 2's wake-up span links to the step span of session 3's W, in session 3's trace; its
    steps before and after the restart hang under its one session span (derived ids);
  - the spans carry no secrets: the API's URL path and query appear nowhere;
  - xgr_otlp_spans_exported_total counted those since the restart and nothing was dropped; promtool check metrics
    (when installed) accepts /metrics with the xgr_otlp_ families.
With a collector that never answers and --otlp-queue-spans 1, spans are dropped and counted
(queue_full, then export_failed when the POST times out), logged, and the sessions run all the same.
An --otlp-endpoint that is not an http(s) URL is refused at start (exit 2, naming the flag).
Finally an xgrd without --otlp-endpoint runs the same workload: the receiver gets nothing and
/metrics has no xgr_otlp_ family.

  test_tracing.py XGRD SRC
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

XGRD, SRC = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
sys.dont_write_bytecode = True
from xgrd_harness import Hang, JsonApi, Xgrd, check, fail, until, wait_for  # noqa: E402

OWNER = "0x00000000000000000000000000000000000000d8"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
SECRET = "s3cr3t-token-value"


class Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP JSON receiver: every span of every POST /v1/traces into server.spans."""

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        srv = self.server
        ok = self.path == "/v1/traces" and self.headers.get("Content-Type", "").startswith("application/json")
        if ok:
            doc = json.loads(body)
            with srv.lock:
                srv.posts += 1
                for rs in doc["resourceSpans"]:
                    for ss in rs["scopeSpans"]:
                        srv.spans.extend(ss["spans"])
        else:
            with srv.lock:
                srv.bad.append((self.path, self.headers.get("Content-Type")))
        self.send_response(200 if ok else 400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *a):
        pass


def receiver():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    srv.spans, srv.bad, srv.posts, srv.lock = [], [], 0, threading.Lock()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def addr(n):
    return "0x%040x" % n


def bundle(api_port):
    plain = {"payload": {}, "rules": [], "onValid": {}, "onInvalid": {}}
    api = {"payload": {},
           "apiCalls": [{"name": "quote", "method": "GET",
                         "urlTemplate": "http://127.0.0.1:%d/v/private-path?token=%s" % (api_port, SECRET),
                         "extractMap": {"v": {"type": "int64", "expr": "resp.v", "default": 0}}}],
           "rules": ["[v] == 7"], "onValid": {}, "onInvalid": {}}
    wait = {"payload": {}, "rules": [], "onValid": {"waitSec": 3600}, "onInvalid": {}}
    waker = {"payload": {"Runner": {"type": "address"}, "Target": {"type": "uint64"}}, "rules": [],
             "onValid": {"wakeUps": [{"runner": "[Runner]", "sessionId": "[Target]", "stepId": "T",
                                      "payload": {"x": 1}}]}, "onInvalid": {}}
    structure = {
        "S": {"rule": addr(0xf1), "onValid": {"spawns": ["B", "C"], "join": {
            "joinid": "J", "mode": "all", "from": [{"node": "B", "when": "valid"}, {"node": "C", "when": "valid"}]}}},
        "B": {"rule": addr(0xf0)}, "C": {"rule": addr(0xf0)}, "J": {"rule": addr(0xf0)},
        "M": {"rule": addr(0xf2), "onValid": {"spawns": ["T"]}}, "T": {"rule": addr(0xf0)},
        "W": {"rule": addr(0xf3)},
    }
    return {"orchestration": {"id": "traced", "structure": structure},
            "rules": {addr(0xf0): plain, addr(0xf1): api, addr(0xf2): wait, addr(0xf3): waker}}


def enqueue(x, root, step, payload=None, traceparent=None):
    body = {"jsonrpc": "2.0", "id": 1, "method": "xgr.enqueue",
            "params": {"owner": OWNER, "rootPid": root, "xrc729": "tr", "init": {"stepId": step, "payload": payload or {}}}}
    headers = {"Content-Type": "application/json"}
    if traceparent:
        headers["traceparent"] = traceparent
    rq = urllib.request.Request(x.url, json.dumps(body).encode(), headers)
    r = json.loads(urllib.request.urlopen(rq, timeout=30).read())
    if "error" in r:
        fail("xgr.enqueue %d: %s" % (root, r["error"]))


def workload(x, api_port, restart=False):
    x.deploy(bundle(api_port), "tr")
    enqueue(x, 1, "S", traceparent="00-%s-%s-01" % (TRACE_ID, PARENT_ID))
    enqueue(x, 2, "M", {"__wakeUp": {"default": {"internal": {"allow": ["*"]}}}})
    wait_for("session 2 waits at T", lambda: session_waits(x, 2), 20)
    if restart:   # session 2 lives on across a restart (session 1, continued from a header, ended before)
        wait_for("session 1 ends", lambda: x.ok("xgr.getSession", {"owner": OWNER, "rootPid": 1})["session"]["status"]
                 == "completed", 20)
        x.stop()
        x.start()
    enqueue(x, 3, "W", {"Runner": OWNER, "Target": 2})
    enqueue(x, 4, "B", traceparent="00-%s-%s-01" % ("0" * 32, PARENT_ID))
    wait_for("the sessions end", lambda: x.metric(None, "xgr_sessions_live") == 0, 30)


def session_waits(x, root):
    r = x.ok("xgr.getSession", {"owner": OWNER, "rootPid": root})
    return any(p.get("resumeStep") == "T" and p.get("status") == "waiting" for p in r.get("processes", []))


def dropped(x, reason):
    """xgr_otlp_spans_dropped_total{reason=...} on x's /metrics (-1 when absent)."""
    text = urllib.request.urlopen(x.url + "metrics", timeout=10).read().decode()
    m = re.search(r'^xgr_otlp_spans_dropped_total\{reason="%s"\} (\S+)$' % reason, text, re.M)
    return float(m.group(1)) if m else -1


def derived_trace(root):
    return hashlib.sha256(("xgr-trace|%s|%d|0|0" % (OWNER, root)).encode()).hexdigest()[:32]


def derived_span(kind, root, a=0, b=0):
    return hashlib.sha256(("xgr-%s|%s|%d|%d|%d" % (kind, OWNER, root, a, b)).encode()).hexdigest()[:16]


def attrs(span):
    out = {}
    for a in span.get("attributes", []):
        v = a["value"]
        out[a["key"]] = v.get("stringValue", v.get("intValue"))
    return out


def session_spans(spans, root):
    return [s for s in spans if s["name"].startswith("session ") and attrs(s).get("xgr.root_pid") == str(root)]


def main():
    top = tempfile.mkdtemp(prefix="xgr-tracing-")
    api = JsonApi()
    api_port = api.port
    rcv = receiver()
    endpoint = "http://127.0.0.1:%d" % rcv.server_address[1]
    x = Xgrd(XGRD, "sqlite:" + os.path.join(top, "t.db"), top,
             ["--allow-outbound", "127.0.0.1/32", "--otlp-endpoint", endpoint], "traced")
    others = []
    try:
        for bad in ("ftp://127.0.0.1:1", "127.0.0.1:4318", ""):
            out = subprocess.run([XGRD, "--listen", "127.0.0.1:0", "--auth", "none", "--otlp-endpoint", bad],
                                 capture_output=True, text=True, timeout=30)
            check(out.returncode == 2 and "--otlp-endpoint" in out.stderr and "http://" in out.stderr,
                  "xgrd refuses --otlp-endpoint %r naming the flag and what it expects (%s)" % (bad, out.stderr.strip()[:200]))
        x.start()
        workload(x, api_port, restart=True)

        def all_sessions():
            with rcv.lock:
                return all(session_spans(rcv.spans, r) for r in (1, 2, 3, 4))
        if not until(all_sessions, 20):
            with rcv.lock:
                fail("the receiver did not get the four session spans; it got: %s; /metrics: %s; xgrd: %s" %
                     (json.dumps([(s["name"], attrs(s).get("xgr.root_pid"), s["traceId"]) for s in rcv.spans])[:3000],
                      re.findall(r"^xgr_otlp.*$", urllib.request.urlopen(x.url + "metrics").read().decode(), re.M),
                      x.log_tail(1500)))
        with rcv.lock:
            spans = list(rcv.spans)
        check(not rcv.bad, "every post went to /v1/traces as application/json (%s)" % rcv.bad[:3])
        bad_form = [s["name"] for s in spans if not (re.fullmatch(r"[0-9a-f]{32}", s["traceId"]) and
                                                     re.fullmatch(r"[0-9a-f]{16}", s["spanId"]) and
                                                     re.fullmatch(r"[0-9]+", s["startTimeUnixNano"]) and
                                                     int(s["endTimeUnixNano"]) >= int(s["startTimeUnixNano"]))]
        check(not bad_form, "every span has hex ids and string nanosecond times (bad: %s)" % bad_form[:5])
        check(SECRET not in json.dumps(spans) and "private-path" not in json.dumps(spans),
              "no span carries the API URL's path or query")

        # session 1: continued from the header
        s1 = session_spans(spans, 1)
        check(len(s1) == 1, "one session span for session 1")
        s1 = s1[0]
        check(s1["traceId"] == TRACE_ID, "session 1 is in the header's trace")
        check(s1.get("parentSpanId") == PARENT_ID, "session 1's span is a child of the header's parent id")
        check(s1["spanId"] == derived_span("session", 1), "the session span id is the derived one")
        mine = [s for s in spans if s["traceId"] == TRACE_ID]
        steps = {attrs(s)["xgr.step_id"]: s for s in mine if s["name"].startswith("step ")}
        check(sorted(steps) == ["B", "C", "J", "S"], "session 1 has one step span per step: %s" % sorted(steps))
        for sid, s in steps.items():
            check(s.get("parentSpanId") == s1["spanId"], "step %s's span is a child of the session span" % sid)
            check(attrs(s).get("xgr.outcome") == "valid" and attrs(s).get("xgr.rule"),
                  "step %s's span names its outcome and rule" % sid)
        apis = [s for s in mine if s["name"].startswith("api ")]
        check(len(apis) == 1 and apis[0].get("parentSpanId") == steps["S"]["spanId"],
              "the API call's span is a child of S's step span")
        a = attrs(apis[0])
        check(apis[0]["kind"] == 3 and a.get("server.address") == "127.0.0.1" and a.get("http.request.method") == "GET" and
              a.get("http.response.status_code") == "200" and a.get("url.scheme") == "http",
              "the API span is a CLIENT span with the method, the host and the status: %s" % a)
        for sid in ("B", "C"):
            links = steps[sid].get("links", [])
            check(any(l["spanId"] == steps["S"]["spanId"] and l["traceId"] == TRACE_ID for l in links),
                  "%s's step span links to S's (spawned)" % sid)
        joins = [s for s in mine if s["name"] == "join J"]
        check(len(joins) == 1 and joins[0].get("parentSpanId") == s1["spanId"], "one join span under the session")
        linked = {l["spanId"] for l in joins[0].get("links", [])}
        check({steps["B"]["spanId"], steps["C"]["spanId"]} <= linked, "the join span links to B's and C's step spans")

        # sessions 2..4: derived traces, the wake-up linked to the waker's step
        for r in (2, 3, 4):
            s = session_spans(spans, r)[0]
            check(s["traceId"] == derived_trace(r) and "parentSpanId" not in s,
                  "session %d is a root span in its derived trace" % r)
        w = [s for s in spans if s["traceId"] == derived_trace(3) and s["name"] == "step W"]
        check(len(w) == 1, "session 3 has W's step span")
        wakes = [s for s in spans if s["traceId"] == derived_trace(2) and s["name"] == "wake-up"]
        check(len(wakes) == 1 and wakes[0].get("parentSpanId") == derived_span("session", 2),
              "session 2 has one wake-up span under its session span")
        check(any(l["traceId"] == derived_trace(3) and l["spanId"] == w[0]["spanId"] for l in wakes[0].get("links", [])),
              "the wake-up links to the waking session's step span")
        s2 = [s for s in spans if s["traceId"] == derived_trace(2) and s["name"] in ("step M", "step T")]
        check(sorted(s["name"] for s in s2) == ["step M", "step T"] and
              all(s.get("parentSpanId") == derived_span("session", 2) for s in s2),
              "session 2's steps before (M) and after (T) the restart are children of its one session span")

        exported = x.metric(None, "xgr_otlp_spans_exported_total")
        check(0 < exported <= len(spans) and dropped(x, "queue_full") == 0 and dropped(x, "export_failed") == 0,
              "xgr_otlp_spans_exported_total %d since the restart (of %d received in all), none dropped" %
              (exported, len(spans)))
        promtool = shutil.which("promtool")
        if promtool:
            text = urllib.request.urlopen(x.url + "metrics", timeout=10).read().decode()
            out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
            check("xgr_otlp_queue_spans" in text and out.returncode == 0 and not (out.stdout + out.stderr).strip(),
                  "promtool check metrics accepts /metrics with the xgr_otlp_ families (%s)" % (out.stdout + out.stderr)[:500])
        x.stop()

        # a collector that never answers, a queue of one span: drops are counted, nothing else notices
        hang = Hang()
        try:
            full = Xgrd(XGRD, "sqlite:" + os.path.join(top, "h.db"), top,
                        ["--allow-outbound", "127.0.0.1/32", "--otlp-endpoint", "http://127.0.0.1:%d" % hang.port,
                         "--otlp-queue-spans", "1"], "hung")
            others.append(full)
            full.start()
            workload(full, api_port)
            check(dropped(full, "queue_full") >= 1,
                  "with --otlp-queue-spans 1 and a hung collector, spans are dropped as queue_full")
            wait_for("the hung POST times out and its spans count as export_failed",
                     lambda: dropped(full, "export_failed") >= 1, 20)
            check(full.ok("xgr.getSession", {"owner": OWNER, "rootPid": 1})["session"]["status"] == "completed",
                  "the sessions ran to their end all the same")
            full.stop()
            check("OTLP export failed" in full.log_tail(4000), "the failed export is logged")
        finally:
            hang.close()

        # without the flag: nothing is sent
        with rcv.lock:
            rcv.spans.clear()
            posts = rcv.posts
        quiet = Xgrd(XGRD, "sqlite:" + os.path.join(top, "q.db"), top, ["--allow-outbound", "127.0.0.1/32"], "quiet")
        others.append(quiet)
        quiet.start()
        workload(quiet, api_port)
        text = urllib.request.urlopen(quiet.url + "metrics", timeout=10).read().decode()
        check("xgr_otlp_" not in text, "without --otlp-endpoint /metrics has no xgr_otlp_ family")
        quiet.stop()
        with rcv.lock:
            check(rcv.posts == posts and not rcv.spans, "without --otlp-endpoint nothing reaches the receiver")
    finally:
        for o in [x] + others:   # every xgrd started, never raising
            o.kill()
        api.close()
        rcv.shutdown()
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
