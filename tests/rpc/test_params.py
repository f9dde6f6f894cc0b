#!/usr/bin/env python3
"""test_params.py — xgrd checks every request and guesses nothing (issue 32), from the outside.

Against a real xgrd on 127.0.0.1 (SQLite store, --auth none):
  - a parameter key a method does not read is refused at every level (params, params[0], init,
    sort) by every kind of method (start, wake, control, listing, registry, console): -32602,
    data.path the key's JSON path, the message naming it and the nearest known key; nothing is
    stored for a refused start (the rootPid it named stays free, the owner's next rootPid is not
    taken). A positional call with a surplus element is refused too;
  - seed 001's engineEOA and ethRPCURL are accepted only when they equal what xgrd was started
    with (--engine-key, --chain), and refused naming xgrd's values otherwise;
  - init.waitMs: the start process waits that long (a waiting process with that wake time,
    answered `scheduled`, shown by getSession), then runs; it survives a restart with the same
    wake time and can be woken early;
  - `xgr run --wait-ms` does the same on the engine and on the virtual clock.

  test_params.py XGRD XGR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from xgrd_harness import Xgrd, check, fail, until  # noqa: E402

XGRD, XGR = sys.argv[1], sys.argv[2]
OWNER = "0x00000000000000000000000000000000000000c1"
BUNDLE = {"orchestration": {"id": "short", "structure": {"S": {"rule": "${addr:S}"}}},
          "rules": {"S": {"payload": {"x": {"type": "int64", "default": 1}}, "rules": ["[x] > 0"],
                          "onValid": {"payload": {"y": "[x] * 2"}}, "onInvalid": {}}}}


def refused(x, method, params, path, message=None, contains=None, code=-32602):
    """The call is refused with code at data.path `path` (and the exact message, or one containing
    `contains`); a check line names what was refused."""
    r = x.rpc(method, params)
    e = r.get("error")
    if not e:
        fail("%s %s was accepted: %s" % (method, json.dumps(params)[:160], json.dumps(r)[:200]))
    got = (e.get("code"), (e.get("data") or {}).get("path"), e.get("message", ""))
    ok = got[0] == code and got[1] == path and (message is None or got[2] == message) and \
        (contains is None or contains in got[2])
    if not ok:
        fail("%s %s: expected %s at %r%s, got %s" % (method, json.dumps(params)[:160], code, path,
                                                      " (%s)" % (message or contains), json.dumps(e)))
    check(True, "%s refuses %s: %s at %s" % (method, json.dumps(params)[:90], code, path))
    return e


def unknown_keys(x):
    """One refusal per level and kind of method; the message's exact form on the first ones."""
    # a start: top level, params[0], init; nothing is stored
    nxt = x.ok("xgr_getNextProcessId", {"from": OWNER})["nextProcessId"]
    refused(x, "xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "init": {"stepID": "S"}}, "init.stepID",
            'params.init.stepID: unknown key; did you mean "stepId"?')
    refused(x, "xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "init": {"paylod": {"x": 5}}}, "init.paylod",
            'params.init.paylod: unknown key; did you mean "payload"?')
    refused(x, "xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "rootpid": 5000}, "rootpid",
            'params.rootpid: unknown key; did you mean "rootPid"?')
    refused(x, "xgr_enqueue", [{"owner": OWNER, "xrc729": "loc", "rootPid": 5000, "ostcid": "short"}], "ostcid",
            'params.ostcid: unknown key; did you mean "ostcId"?')
    refused(x, "xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "rootPid": 5000, "colour": "red"}, "colour",
            contains="params.colour: unknown key; expected one of owner, ")
    refused(x, "xgr.enqueue", [{"owner": OWNER, "xrc729": "loc"}, {"rootPid": 5000}], "[0]")
    check(x.rpc("xgr.getSession", {"owner": OWNER, "rootPid": 5000})["error"]["code"] == -32004,
          "nothing was stored for the refused starts (session 5000 does not exist)")
    check(x.ok("xgr_getNextProcessId", {"from": OWNER})["nextProcessId"] == nxt,
          "and the owner's next rootPid was not taken (%s)" % nxt)
    refused(x, "xgr_validateDataTransfer", [{"from": OWNER, "orchestration": "loc", "stepId": "S", "payLoad": {}}],
            "payLoad", 'params.payLoad: unknown key; did you mean "payload"?')
    refused(x, "xgr_getNextProcessId", {"from": OWNER, "fromm": OWNER}, "fromm",
            'params.fromm: unknown key; did you mean "from"?')
    refused(x, "xgr_getCoreAddrs", {"chain": 1}, "chain", "params.chain: unknown key; expected no parameters (other than from)")

    # a session to act on: waits a minute at its start step
    root = x.ok("xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "init": {"waitMs": 60000}})["rootPid"]
    pid = root + ":1"
    # wake
    refused(x, "xgr_wakeUpProcess", {"from": OWNER, "procesId": pid}, "procesId",
            'params.procesId: unknown key; did you mean "processId"?')
    refused(x, "xgr_wakeUpProcess", [{"from": OWNER, "processId": pid, "payload": {"a": 1}, "merge": True}], "merge")
    # control: kill, pause, resume, xgr_control
    refused(x, "xgr.kill", {"owner": OWNER, "pid": root, "force": True}, "force")
    refused(x, "xgr.pause", {"owner": OWNER, "pidd": pid}, "pidd", 'params.pidd: unknown key; did you mean "pid"?')
    refused(x, "xgr.resume", {"owner": OWNER, "pid": pid, "rootpid": root}, "rootpid")
    refused(x, "xgr_control", [{"from": OWNER, "sessionId": root, "actoin": "kill"}], "actoin",
            'params.actoin: unknown key; did you mean "action"?')
    # listing: listSessions (top level, sort) and getSession
    refused(x, "xgr.listSessions", {"owner": OWNER, "limt": 5}, "limt",
            'params.limt: unknown key; did you mean "limit"?')
    refused(x, "xgr_listSessions", [{"owner": OWNER, "sort": {"by": ["rootPid:desc"], "order": "asc"}}], "sort.order",
            "params.sort.order: unknown key; expected one of by")
    refused(x, "xgr.getSession", {"owner": OWNER, "pid": root, "histroy": True}, "histroy")
    # positional calls: a surplus element is named
    refused(x, "xgr_sessionAlive", [OWNER, root, 3], "[2]", "params has 3 elements; expected [owner, sessionId]")
    refused(x, "xgr_stepExecuted", [OWNER, root, 1, "x"], "[3]")
    refused(x, "xgr_stepExecuted", {"owner": OWNER, "sessionId": root, "iter": 1}, "iter")
    # registry methods
    refused(x, "xgr_putRule", [{"from": OWNER, "address": "S2", "rulee": BUNDLE["rules"]["S"]}], "rulee",
            'params.rulee: unknown key; did you mean "rule"?')
    check(x.rpc("xgr_getRule", {"address": "S2"})["error"]["code"] == -32004, "the refused putRule stored nothing")
    refused(x, "xgr.putOrchestration", {"from": OWNER, "xrc729": "loc2", "orchestration": BUNDLE["orchestration"],
                                        "ostcID": "x"}, "ostcID")
    check(x.rpc("xgr.getOrchestration", {"xrc729": "loc2"})["error"]["code"] == -32004,
          "the refused putOrchestration stored nothing")
    refused(x, "xgr.getOrchestration", {"xrc729": "loc", "versoin": 1}, "versoin",
            'params.versoin: unknown key; did you mean "version"?')
    refused(x, "xgr_getRule", {"address": "S", "versions": 1}, "versions")
    # the console's methods
    refused(x, "xgr.console.sessions", {"owner": OWNER, "limitt": 5}, "limitt",
            'params.limitt: unknown key; did you mean "limit"?')
    refused(x, "xgr.console.session", {"owner": OWNER, "rootPid": root, "histLimits": 5}, "histLimits")
    refused(x, "xgr.console.registry", {"registry": "loc", "hsh": "0x"}, "hsh")
    refused(x, "xgr.console.info", {"verbose": True}, "verbose", "params.verbose: unknown key; expected no parameters (other than from)")
    # the same calls, spelt right, are answered
    x.ok("xgr.pause", {"owner": OWNER, "pid": pid})
    x.ok("xgr.resume", {"owner": OWNER, "pid": pid})
    x.ok("xgr.listSessions", {"owner": OWNER, "limit": 5, "sort": {"by": ["rootPid:desc"]}})
    x.ok("xgr.console.sessions", {"owner": OWNER, "limit": 5})
    x.ok("xgr_sessionAlive", [OWNER, root])
    x.ok("xgr.kill", {"owner": OWNER, "pid": root})
    check(True, "the same calls spelt right are answered")


def wait_ms(x):
    """init.waitMs: a waiting start process with that wake time, `scheduled`, then it runs."""
    t0 = time.time()
    a = x.ok("xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "init": {"stepId": "S", "payload": {"x": 4},
                                                                       "waitMs": 1500}})
    check(a["ack"] == "scheduled", "enqueue with init.waitMs answers scheduled (%s)" % a["ack"])
    s = x.ok("xgr.getSession", {"owner": OWNER, "pid": a["pid"]})
    p = s["processes"][0]
    check(p["status"] == "waiting" and p["nextWakeAt"] - s["session"]["createdAt"] in range(1450, 1600) and
          not s["history"], "getSession shows the start process waiting, its nextWakeAt 1500 ms after the start")
    until(lambda: x.ok("xgr.getSession", {"owner": OWNER, "pid": a["pid"]})["processes"][0]["status"] == "done", 10)
    took = time.time() - t0
    s = x.ok("xgr.getSession", {"owner": OWNER, "pid": a["pid"]})
    check(s["processes"][0]["status"] == "done" and s["history"][0]["payload"] == {"x": 4, "y": 8} and took >= 1.4,
          "then it runs with its payload (after %.2f s)" % took)
    # woken early
    a = x.ok("xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "init": {"waitMs": 600000}})
    w = x.ok("xgr_wakeUpProcess", {"from": OWNER, "processId": a["pid"]})
    check(w["woken"] == 1, "a waiting start process can be woken early (PID mode)")
    check(until(lambda: x.ok("xgr.getSession", {"owner": OWNER, "pid": a["pid"]})["processes"][0]["status"] == "done",
                10), "and then runs at once")
    # the client: xgr enqueue --wait-ms sends init.waitMs
    r = subprocess.run([XGR, "enqueue", "--url", x.url, "--owner", OWNER, "--registry", "loc", "--wait-ms", "600000",
                        "--json"], capture_output=True, text=True, timeout=30)
    e = json.loads(r.stdout) if r.returncode == 0 else fail("xgr enqueue --wait-ms: %s" % r.stderr)
    p = x.ok("xgr.getSession", {"owner": OWNER, "pid": e["pid"]})["processes"][0]
    check(e["ack"] == "scheduled" and p["status"] == "waiting" and p["nextWakeAt"] is not None,
          "xgr enqueue --wait-ms 600000: scheduled, the start process waits")
    r = subprocess.run([XGR, "enqueue", "--url", x.url, "--owner", OWNER, "--registry", "loc", "--wait-ms", "soon"],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 1 and "(code -32602, at init.waitMs)" in r.stderr,
          "xgr enqueue --wait-ms soon: refused by xgrd (-32602 at init.waitMs), exit 1 (%d: %s)" % (r.returncode, r.stderr.strip()))
    refused(x, "xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "init": {"waitMs": -1}}, "init.waitMs")
    refused(x, "xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "init": {"waitMs": 4294967295001}}, "init.waitMs",
            contains="expected at most 4294967295000")


def wait_ms_restart(x):
    """A waiting start survives a restart: the same wake time, then it runs."""
    a = x.ok("xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "init": {"waitMs": 4000}})
    due = x.ok("xgr.getSession", {"owner": OWNER, "pid": a["pid"]})["processes"][0]["nextWakeAt"]
    check(x.stop() == 0, "xgrd stops cleanly while the start process waits")
    x.start()
    p = x.ok("xgr.getSession", {"owner": OWNER, "pid": a["pid"]})["processes"][0]
    check(p["status"] == "waiting" and p["nextWakeAt"] == due,
          "after the restart it waits with the same nextWakeAt (%s)" % p.get("nextWakeAt"))
    check(until(lambda: x.ok("xgr.getSession", {"owner": OWNER, "pid": a["pid"]})["processes"][0]["status"] == "done",
                10), "and runs when it is due")


def daemon_fields(x, xc, addr, chain):
    """engineEOA / ethRPCURL: xgrd's own values only."""
    refused(x, "xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "engineEOA": addr}, "engineEOA",
            contains="set when xgrd starts (--engine-key) and this xgrd has none")
    refused(x, "xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "ethRPCURL": chain}, "ethRPCURL",
            contains="set when xgrd starts (--chain) and this xgrd has none")
    for eoa in (addr, addr.lower()):
        a = xc.ok("xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "engineEOA": eoa, "ethRPCURL": chain})
        check(a["ack"] == "queued", "engineEOA %s and ethRPCURL equal to xgrd's are accepted" % eoa)
    xc.ok("xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "ethRPCURL": chain + "/"})
    other = "0x" + "ab" * 20
    refused(xc, "xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "rootPid": 7000, "engineEOA": other}, "engineEOA",
            'is "%s"; the engine address is set when xgrd starts (--engine-key) and is %s: give that or leave '
            'engineEOA out' % (other, addr.lower()))
    refused(xc, "xgr.enqueue", {"owner": OWNER, "xrc729": "loc", "rootPid": 7000, "ethRPCURL": "http://127.0.0.1:1"},
            "ethRPCURL", 'is "http://127.0.0.1:1"; the chain is set when xgrd starts (--chain) and is %s: give that '
            'or leave ethRPCURL out' % chain)
    check(xc.rpc("xgr.getSession", {"owner": OWNER, "rootPid": 7000})["error"]["code"] == -32004,
          "nothing was stored for them")


def xgr_run(d):
    """xgr run --wait-ms on the virtual clock and on the engine."""
    path = os.path.join(d, "short.json")
    json.dump(BUNDLE, open(path, "w"))
    r = subprocess.run([XGR, "run", path, "--start", "S", "--virtual-time", "--wait-ms", "5000", "--json"],
                       capture_output=True, text=True)
    rep = json.loads(r.stdout) if r.returncode == 0 else fail("xgr run --virtual-time --wait-ms: %s" % r.stderr)
    at = rep["history"][0]["at"]
    check(rep["result"] == "completed" and at == 5000,
          "xgr run --virtual-time --wait-ms 5000: the start step runs at 5000 ms of virtual time (%s)" % at)
    r = subprocess.run([XGR, "run", path, "--start", "S", "--time-scale", "1000", "--wait-ms", "60000", "--json"],
                       capture_output=True, text=True)
    rep = json.loads(r.stdout) if r.returncode == 0 else fail("xgr run --wait-ms: %s" % r.stderr)
    at = rep["history"][0]["at"]
    check(rep["result"] == "completed" and at >= 60000,
          "xgr run --wait-ms 60000 (time scale 1000): the start step runs after 60 s of session clock (%d ms)" % at)
    r = subprocess.run([XGR, "run", path, "--start", "S", "--wait-ms", "-5"], capture_output=True, text=True)
    check(r.returncode == 2 and "--wait-ms" in r.stderr, "xgr run --wait-ms -5 is a usage error (exit 2)")


d = tempfile.mkdtemp(prefix="xgr-params-")
x = Xgrd(XGRD, "sqlite:" + os.path.join(d, "s.db"), d)
xc = None
try:
    x.start()
    x.deploy(BUNDLE, "loc", **{"from": OWNER})
    unknown_keys(x)
    wait_ms(x)
    wait_ms_restart(x)
    # an xgrd with an engine key and a chain (the node need not answer: nothing here reaches it)
    key = os.path.join(d, "engine.key")
    addr = subprocess.run([XGR, "key", "new", key], capture_output=True, text=True, check=True).stdout.strip()
    chain = "http://127.0.0.1:9"
    xc = Xgrd(XGRD, "sqlite:" + os.path.join(d, "c.db"), d, ["--chain", chain, "--engine-key", key], name="xgrd-chain")
    xc.start(readyz=False)   # its /readyz stays 503: the chain node does not answer
    xc.deploy(BUNDLE, "loc", **{"from": OWNER})
    daemon_fields(x, xc, addr, chain)
    xgr_run(d)
finally:
    x.kill()
    if xc:
        xc.kill()
    shutil.rmtree(d, ignore_errors=True)
print("test_params: all passed")
