#!/usr/bin/env python3
"""wake_latency.py URL OWNER FIRST COUNT — bench/scale: wake COUNT hibernated KycLike sessions
(rootPids FIRST, FIRST+2, ...: the odd ones are KycLike) one after another over one keep-alive
connection, and time each xgr_wakeUpProcess from sending to its answer. xgrd answers a wake once it
is committed, which is when the woken step is dispatched; the session had to be loaded from the
store first. Prints p50/p99/max in ms, then checks that the woken steps ran."""
import http.client
import json
import sys
import time
import urllib.parse

url, owner, first, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
u = urllib.parse.urlparse(url)
c = http.client.HTTPConnection(u.hostname, u.port)


def rpc(method, params):
    c.request("POST", "/", json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
              {"Content-Type": "application/json"})
    return json.loads(c.getresponse().read())


lat = []
roots = [first + 2 * i for i in range(count)]
for r in roots:
    t0 = time.perf_counter()
    res = rpc("xgr_wakeUpProcess", {"from": owner, "processId": "%d:2" % r, "payload": {"docs": True}})
    lat.append((time.perf_counter() - t0) * 1e3)
    if "error" in res:
        sys.exit("wake %d: %s" % (r, res["error"]))
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print("wake-to-step latency over %d hibernated sessions: p50 %.2f ms, p99 %.2f ms, max %.2f ms" %
      (count, q(0.50), q(0.99), lat[-1]))
time.sleep(0.5)
done = 0
for r in roots[:20]:
    s = rpc("xgr.getSession", {"owner": owner, "rootPid": r})["result"]
    done += s["session"]["status"] == "completed"
print("woken sessions completed (first 20 checked): %d/20" % done)
