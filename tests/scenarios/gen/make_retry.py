"""Writes the retry scenarios (issue 36: docs/SEMANTICS.md "Retry and fork"). Run from
tests/scenarios: python3 gen/make_retry.py. A scripted {"retry": PID, "payload"?} runs an aborted
process's step again as a new process of the same session in the same join scope."""
import sys
sys.path.insert(0, 'gen')
from flagrule import bundle, join, write

V, I = True, False
def P(pid, step, status, valid=None, **kw):
    d = {"pid": pid, "step": step, "status": status}
    if status == "done" or valid is not None: d["valid"] = valid
    d.update(kw)
    return d

def kofn(after_j=None):
    s = {"A": {"onValid": {"spawns": ["B", "C", "D"], "join": join("J", [("B", "valid"), ("C", "valid"), ("D", "valid")], mode="kofn", policy="kill", k=2)}},
         "B": {}, "C": {}, "D": {}, "J": {}}
    if after_j:
        s["J"] = {"onValid": {"spawns": [after_j]}}
        s[after_j] = {}
    return s

write("retry_kofn_hard_error_satisfies",
      "2-of-3 (kill): B fails with a hard error while D is paused, so the join stays open with C's piece; "
      "B retried with a fixed payload runs as 1:6 in the same scope, its piece satisfies the join, D is killed, J runs",
      bundle(kofn(), waits={"A": 10}), "A", {"B": "error"},
      script=[{"at": 5000, "pause": "1:5"}, {"at": 20000, "retry": "1:3", "payload": {"B": "valid"}}],
      expect={"result": "completed", "processes": [
          P("1:3", "B", "aborted", None, abortReason="error", error=True),
          P("1:4", "C", "done", V),
          P("1:6", "B", "done", V, parentPid="1:3", joinGroupId=1),
          P("1:5", "D", "aborted", None, abortReason="join kill"),
          P("1:2", "J", "done", V, join="satisfied", joinClosedAt=20000, payload={"nB": 1, "nC": 1})],
          "count": 6, "history": 5, "actionsOk": [True, True]})

write("retry_refused_join_closed",
      "2-of-3: B fails, C and D satisfy the join, J spawns W which waits 100 s; a retry of B while the session lives "
      "is refused: the join B fed has closed",
      bundle(kofn("W"), waits={"A": 10, "J": 100}), "A", {"B": "error"},
      script=[{"at": 20000, "retry": "1:3"}],
      expect={"result": "completed", "processes": [
          P("1:3", "B", "aborted", None, abortReason="error"),
          P("1:2", "J", "done", V, join="satisfied"),
          P("1:6", "W", "done", V)],
          "count": 6, "history": 6, "actionsOk": [False]})

# A retry after the session ended is refused too (the core: "session 1 has ended"); no file shows it
# because on the engine and in xgrd an ended session has left memory and the refusal comes from
# the store's row instead: tests/session/test_core.c and tests/daemon/test_retry_fork.py check it.

write("retry_killed_root_scope",
      "a killed process of the root scope is retried with its last input payload (A's effective payload); a retry of a "
      "process that is done is refused",
      bundle({"A": {"onValid": {"spawns": ["B", "C"]}}, "B": {}, "C": {}}, waits={"A": 10}), "A", {},
      script=[{"at": 5000, "kill": "1:2"}, {"at": 6000, "retry": "1:2"}, {"at": 7000, "retry": "1:1"}],
      expect={"result": "completed", "processes": [
          P("1:2", "B", "aborted", None, abortReason="killed"),
          P("1:4", "B", "done", V, parentPid="1:2", payload={"nA": 1, "nB": 1, "last": "B"}),
          P("1:3", "C", "done", V)],
          "count": 4, "history": 3, "historyAt": {"1:4": 6000, "1:3": 10000}, "actionsOk": [True, True, False]})
