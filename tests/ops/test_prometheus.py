#!/usr/bin/env python3
"""test_prometheus.py — xgrd's telemetry as Prometheus' own tools see it (issue 35).

Two xgrd on 127.0.0.1 run a small workload (20 sessions of two steps each, one through an API
call to a server of the test's own): one on SQLite, one a cluster node (`--node-id`) on a
throwaway PostgreSQL 15 (skipped without PostgreSQL). Then:
  - `promtool check metrics` accepts each one's /metrics with no warning;
  - every family either exposes is described in docs/OPERATIONS.md;
  - `promtool check rules` accepts the alert rules of docs/OPERATIONS.md's yaml block;
  - a real Prometheus (Debian's `prometheus`, a throwaway data directory, 127.0.0.1) scrapes both
    every second with those rules loaded; through its HTTP API the test reads both targets up,
    the steps each xgrd counted (equal to what its /metrics says), the live sessions and the
    p99 store commit latency from the histogram's buckets, and every rule evaluated without error.
Skipped (77) without promtool/prometheus (scripts/deps.sh installs them).

  test_prometheus.py XGRD SRC
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
import urllib.parse
import urllib.request

XGRD, SRC = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
sys.path.insert(0, os.path.join(SRC, "tests", "faults"))
sys.dont_write_bytecode = True
from xgrd_harness import JsonApi, Xgrd, check, fail, until, wait_for  # noqa: E402

PROMTOOL, PROMETHEUS = shutil.which("promtool"), shutil.which("prometheus")
OWNER = "0x00000000000000000000000000000000000000d7"
SESSIONS = 20
OPERATIONS = os.path.join(SRC, "docs", "OPERATIONS.md")


def bundle(api_port):
    rule = {"payload": {"n": {"type": "int64", "default": 0}},
            "apiCalls": [{"name": "a", "method": "GET", "urlTemplate": "http://127.0.0.1:%d/v" % api_port,
                          "extractMap": {"v": {"type": "int64", "expr": "resp.v", "default": 0}}}],
            "rules": ["[n] < 1"], "onValid": {"payload": {"n": "[n] + 1"}}, "onInvalid": {}}
    return {"orchestration": {"id": "ops", "structure": {"S": {"rule": "0x00000000000000000000000000000000000000e7",
                                                               "onValid": {"spawns": ["S"]}}}},
            "rules": {"0x00000000000000000000000000000000000000e7": rule}}


def workload(x, api_port, first):
    x.deploy(bundle(api_port), "ops")
    x.ok_batch([("xgr.enqueue", {"owner": OWNER, "rootPid": r, "xrc729": "ops", "init": {"stepId": "S"}})
                for r in range(first, first + SESSIONS)])
    wait_for("%s: the sessions end" % x.name, lambda: x.metric(None, "xgr_sessions_live") == 0, 30)


def metrics_text(x):
    return urllib.request.urlopen(x.url + "metrics", timeout=10).read().decode()


def promtool_metrics(x):
    text = metrics_text(x)
    out = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True)
    check(out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(),
          "%s: promtool check metrics accepts /metrics with no warning (rc %d: %s%s)" %
          (x.name, out.returncode, out.stdout[:800], out.stderr[:800]))
    return text


def families(text):
    return sorted(set(m.group(1) for m in re.finditer(r"^# TYPE (\S+) ", text, re.M)))


def rules_block():
    doc = open(OPERATIONS).read()
    blocks = re.findall(r"```yaml\n(.*?)```", doc, re.S)
    rules = [b for b in blocks if b.lstrip().startswith("groups:")]
    check(len(rules) == 1, "docs/OPERATIONS.md has one yaml block of alert rules")
    return rules[0]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Prometheus:
    """Prometheus on 127.0.0.1 scraping targets every second, with rules; its data dir under top."""

    def __init__(self, top, targets, rules_file):
        self.top, self.proc = top, None
        cfg = os.path.join(top, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - %s\n"
                    "scrape_configs:\n  - job_name: xgrd\n    static_configs:\n      - targets: [%s]\n" %
                    (json.dumps(rules_file), ", ".join(json.dumps(t) for t in targets)))
        # the port is picked free and may be taken before Prometheus binds it: then it exits and
        # is started again on another (each attempt's log is kept for the failure message)
        for attempt in range(5):
            self.port = free_port()
            log = open(os.path.join(top, "prometheus-%d.log" % attempt), "w")
            self.proc = subprocess.Popen([PROMETHEUS, "--config.file", cfg, "--storage.tsdb.path",
                                          os.path.join(top, "data-%d" % attempt),
                                          "--web.listen-address", "127.0.0.1:%d" % self.port, "--log.level", "warn"],
                                         stdout=log, stderr=subprocess.STDOUT)
            if until(lambda: self.proc.poll() is not None or self.ready(), 30):
                if self.proc.poll() is None:
                    return
            self.stop()
        fail("Prometheus did not start: %s" % open(os.path.join(top, "prometheus-4.log")).read()[-1500:])

    def ready(self):
        try:
            return urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % self.port, timeout=2).status == 200
        except Exception:
            return False

    def api(self, path, **q):
        url = "http://127.0.0.1:%d/api/v1/%s?%s" % (self.port, path, urllib.parse.urlencode(q))
        r = json.loads(urllib.request.urlopen(url, timeout=10).read())
        check(r.get("status") == "success", "Prometheus %s %s: %s" % (path, q, json.dumps(r)[:300]))
        return r["data"]

    def query(self, expr):
        """{instance: value} of an instant query."""
        return {s["metric"].get("instance", ""): float(s["value"][1]) for s in self.api("query", query=expr)["result"]}

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def main():
    if not PROMTOOL or not PROMETHEUS:
        print("SKIP: no promtool/prometheus (Debian's prometheus package; scripts/deps.sh installs it)")
        sys.exit(77)
    top = tempfile.mkdtemp(prefix="xgr-prometheus-")
    api = JsonApi()   # the API the rule calls: {"v": 7}
    api_port = api.port
    nodes, pg, prom = [], None, None
    try:
        args = ["--allow-outbound", "127.0.0.1/32"]   # the test's API is on loopback
        lite = Xgrd(XGRD, "sqlite:" + os.path.join(top, "s.db"), top, args, "sqlite")
        nodes.append(lite)
        lite.start()
        workload(lite, api_port, 1)
        texts = [promtool_metrics(lite)]
        if os.path.exists("/usr/lib/postgresql/15/bin/pg_ctl"):
            import cluster  # noqa: E402 (tests/faults/cluster.py: a throwaway PostgreSQL)
            pgdir = os.path.join(top, "pg")
            os.chmod(top, 0o755)   # the server runs as an unprivileged user when this runs as root
            pg = cluster.Pg(pgdir)
            pg.sql("public", "CREATE SCHEMA t")
            node = Xgrd(XGRD, cluster.pg_schema_url(pg.url, "t"), top, args + ["--node-id", "n1", "--lease-ms", "1000"],
                        "n1")
            nodes.append(node)
            node.start(30)
            workload(node, api_port, 1)
            texts.append(promtool_metrics(node))
            check("xgr_cluster_events_total" in families(texts[-1]), "the cluster node exposes its cluster counters")
        else:
            print("# no PostgreSQL 15: the cluster node's metrics are not checked")
        doc = open(OPERATIONS).read()
        for t in texts:
            for fam in families(t):
                check("`%s" % fam in doc, "docs/OPERATIONS.md describes %s" % fam)

        rules = os.path.join(top, "alerts.yml")
        with open(rules, "w") as f:
            f.write(rules_block())
        out = subprocess.run([PROMTOOL, "check", "rules", rules], capture_output=True, text=True)
        check(out.returncode == 0 and "SUCCESS" in out.stdout,
              "promtool check rules accepts docs/OPERATIONS.md's alerts (%s%s)" % (out.stdout[-600:], out.stderr[-600:]))

        targets = [n.url.split("//")[1].rstrip("/") for n in nodes]
        prom = Prometheus(top, targets, rules)
        wait_for("Prometheus scrapes every xgrd", lambda: sorted(
            t["labels"]["instance"] for t in prom.api("targets")["activeTargets"] if t["health"] == "up") == sorted(targets),
            30, 0.2)
        # the steps each xgrd counted, as Prometheus read them (the workload is over: no more change)
        for n, t in zip(nodes, targets):
            own = sum(float(v) for v in re.findall(r'^xgr_steps_total\{[^}]*\} (\S+)$', metrics_text(n), re.M))
            check(own >= 2 * SESSIONS, "%s counted its %d sessions' steps (%d)" % (n.name, SESSIONS, own))
            wait_for("Prometheus has %s's %d steps" % (n.name, own),
                     lambda: prom.query('sum by (instance) (xgr_steps_total{instance="%s"})' % t).get(t) == own, 15, 0.2)
            check(prom.query('xgr_sessions_live{instance="%s"}' % t).get(t) == 0.0, "%s: no live session left" % n.name)
            p99 = prom.query('histogram_quantile(0.99, sum by (instance, le) (xgr_store_commit_seconds_bucket{instance="%s"}))'
                             % t).get(t)
            check(p99 is not None and 0 < p99 <= 10, "%s: p99 store commit latency from Prometheus (%s s)" % (n.name, p99))
            calls = prom.query('sum by (instance) (xgr_engine_events_total{instance="%s",kind="api_http_requests"})' % t)
            check(calls.get(t, 0) >= 2 * SESSIONS, "%s: API calls counted (%s)" % (n.name, calls.get(t)))

        def rules_ok():
            groups = prom.api("rules")["groups"]
            rs = [r for g in groups for r in g["rules"]]
            return rs and all(r.get("health") == "ok" for r in rs), rs
        wait_for("every alert rule evaluated without error", lambda: rules_ok()[0], 20, 0.2)
        n_rules = len(rules_ok()[1])
        firing = [a["labels"]["alertname"] for a in prom.api("alerts")["alerts"]]
        check(not firing, "no alert fires on a healthy xgrd (%s)" % firing)
        for n in nodes:
            check(n.stop() == 0, "%s exits 0 at SIGTERM" % n.name)
        print("ok: promtool accepts %d /metrics pages and %d rules; Prometheus scraped %d xgrd" %
              (len(texts), n_rules, len(nodes)))
    finally:
        if prom:
            prom.stop()
        for n in nodes:
            n.kill()
        if pg:
            pg.stop()
        api.close()
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
