#!/usr/bin/env python3
"""test_hibernate.py — hibernation of waiting sessions (issue 19) against a real xgrd on 127.0.0.1.

xgrd runs on a temporary SQLite store (or, with XGR_PG_URL set — tests/pg/pg_cluster.sh run ...:
test_hibernate_pg — on that PostgreSQL database) with --hibernate-after 0, so every session that waits is
evicted from memory right after its last commit. Checked from the outside:
  - waiting sessions are evicted (getSession says "hibernated", the sessions_evicted counter);
  - a hibernated session is listed and shown from the store, and is woken, paused, resumed and
    killed correctly (each call loads it first);
  - timers of hibernated sessions fire on time (--time-scale 100: waitSec 60 is 600 ms);
  - a restart is lazy: hibernated sessions are not loaded at start (recovered=0) and still work.

  test_hibernate.py XGRD SRC_DIR
"""
import json
import os
import shutil
import signal
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from xgrd_harness import Xgrd, check, wait_for  # noqa: E402

XGRD, SRC = sys.argv[1], sys.argv[2]
DIR = tempfile.mkdtemp(prefix="xgr-hib-")
OWNER = "0x00000000000000000000000000000000000000aa"
SCALE = 100
PG = os.environ.get("XGR_PG_URL", "")
STORE = PG or "sqlite:" + os.path.join(DIR, "s.db")
x = Xgrd(XGRD, STORE, DIR, ["--hibernate-after", "0", "--time-scale", str(SCALE)])
ok, metric = x.ok, x.metric


def session(root):
    return ok("xgr.getSession", {"owner": OWNER, "rootPid": root})


def hibernated(root):
    return session(root)["session"].get("hibernated") is True


try:
    x.start()
    x.deploy(json.load(open(os.path.join(SRC, "tests", "daemon", "gate.json"))))
    x.deploy(json.load(open(os.path.join(SRC, "tests", "hibernate", "sleeper.json"))))
    # gate: A runs, waits 3600 s and spawns W, which waits for a wake-up
    for root in (1, 2, 3, 4):
        ok("xgr.enqueue", {"owner": OWNER, "rootPid": root, "xrc729": "local", "ostcId": "gate", "init": {"stepId": "A"}})
    for root in (1, 2, 3, 4):
        wait_for("session %d hibernates" % root, lambda r=root: hibernated(r))
    check(metric("sessions_evicted") >= 4, "four waiting sessions evicted")
    s1 = session(1)
    check(s1["session"]["status"] == "running" and s1["session"]["alive"], "a hibernated session is shown running and alive")
    check(any("W" in json.dumps(p) and "waiting" in json.dumps(p) for p in s1["processes"]), "its processes come from the store")
    check(ok("xgr_sessionAlive", [OWNER, "1"]) is True, "sessionAlive says true")
    listed = ok("xgr_listSessions", {"owner": OWNER})
    text = json.dumps(listed)
    check(all('"%d"' % r in text or ': %d' % r in text for r in (1, 2, 3, 4)), "listSessions lists the hibernated sessions")
    # the console's owners line counts from the store: the engine holds none of the four
    owners = ok("xgr.console.owners", {})
    check({"owner": OWNER.lower(), "liveSessions": 4} in owners["items"],
          "console owners lists the owner of hibernated sessions (%s)" % json.dumps(owners))
    counts = ok("xgr.console.sessions", {"owner": OWNER})["counts"]
    check(counts["engineSessions"] == 0 and counts["liveSessions"] == 4,
          "console live count: the 4 hibernated sessions, none of them in the engine (%s)" % json.dumps(counts))

    # wake: W runs after loading
    ok("xgr_wakeUpProcess", {"from": OWNER, "processId": "1:2", "payload": {"n": 5}})
    wait_for("W of session 1 ran", lambda: any(h.get("step") == "W" for h in session(1)["history"]))
    check(True, "a wake-up loads the hibernated session and runs the step")
    wait_for("session 1 completes", lambda: session(1)["session"]["status"] == "completed")
    check(ok("xgr_sessionAlive", [OWNER, "1"]) is False, "the woken session completes")

    # pause / resume
    ok("xgr.pause", {"owner": OWNER, "rootPid": 2})
    wait_for("session 2 paused", lambda: session(2)["session"]["paused"] is True)
    check(True, "pause of a hibernated session")
    ok("xgr.resume", {"owner": OWNER, "rootPid": 2})
    wait_for("session 2 resumed", lambda: session(2)["session"]["paused"] is False)
    check(True, "resume of a hibernated session")
    wait_for("session 2 hibernates again", lambda: hibernated(2))
    check(True, "a loaded session is evicted again once it waits")
    ok("xgr_wakeUpProcess", {"from": OWNER, "processId": "2:2", "payload": {}})
    wait_for("W of session 2 ran", lambda: any(h.get("step") == "W" for h in session(2)["history"]))
    check(True, "the resumed session still takes its wake-up")

    # kill
    ok("xgr.kill", {"owner": OWNER, "rootPid": 3})
    wait_for("session 3 killed", lambda: session(3)["session"]["status"] == "killed")
    check(ok("xgr_sessionAlive", [OWNER, "3"]) is False, "kill of a hibernated session")

    # timers of hibernated sessions fire on time: waitSec 60 at scale 100 = 600 ms
    ok("xgr.enqueue", {"owner": OWNER, "rootPid": 10, "xrc729": "local", "ostcId": "sleeper", "init": {"stepId": "S"}})
    wait_for("sleeper hibernates", lambda: hibernated(10))
    check(True, "a session waiting on a 60 s timer hibernates")
    wait_for("sleeper completes", lambda: session(10)["session"]["status"] == "completed", 10)
    hist = session(10)["history"]
    ats = [h["at"] for h in hist]
    gaps = [b - a for a, b in zip(ats, ats[1:])]
    # each step is due 60 000 ms (engine clock) after the previous one; allowed lateness 25 s of
    # the engine clock (250 ms of wall time on a loaded machine)
    check(len(hist) == 4 and all(60000 <= g <= 85000 for g in gaps),
          "timers of a hibernated session fire on time (gaps %s ms)" % gaps)

    # restart: lazy recovery, the hibernated sessions still answer
    loaded_before = metric("sessions_loaded")
    x.stop(signal.SIGKILL)
    t = x.start()
    check(metric("sessions_loaded") == 0, "a restart loads no hibernated session (ready in %.2f s)" % t)
    check(hibernated(4) and session(4)["session"]["alive"], "after the restart session 4 is still hibernated")
    ok("xgr_wakeUpProcess", {"from": OWNER, "processId": "4:2", "payload": {}})
    wait_for("W of session 4 ran", lambda: any(h.get("step") == "W" for h in session(4)["history"]))
    check(metric("sessions_loaded") >= 1, "after the restart a wake-up loads it and W runs")
    x.stop()
    print("test_hibernate: all passed")
finally:
    x.kill()
    shutil.rmtree(DIR, ignore_errors=True)
