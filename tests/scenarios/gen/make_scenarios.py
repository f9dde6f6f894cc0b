"""Writes tests/scenarios/*.json. Run from tests/scenarios: python3 gen/make_scenarios.py"""
import sys, copy
sys.path.insert(0, 'gen')
from flagrule import bundle, join, write, flag_rule

OWNER = "0x0000000000000000000000000000000000000001"
OTHER = "0x00000000000000000000000000000000000000b0"
V, I = True, False
def P(pid, step, status, valid=None, **kw):
    d = {"pid": pid, "step": step, "status": status}
    if status == "done" or valid is not None: d["valid"] = valid
    d.update(kw)
    return d

# ---- seed 001 §6.1
def s61():
    return {"A1": {"onValid": {"spawns": ["D1"], "join": join("J1", [("D1", "valid")], mode="any", policy="drain")}},
            "D1": {}, "J1": {}}
write("seed001_6_1_when_mismatch", "seed 001 §6.1: D1 delivers invalid where valid is expected; once D1 is gone nothing can reach D1 and J1 aborts as unfulfillable",
      bundle(s61()), "A1", {"D1": "invalid"},
      expect={"result": "completed", "processes": [P("1:1", "A1", "done", V), P("1:2", "J1", "aborted", None, join="unfulfillable", abortReason="join unfulfillable"), P("1:3", "D1", "done", I)], "count": 3, "history": 2})
write("seed001_6_1_valid", "seed 001 §6.1 with D1 valid: the any-join is satisfied and J1 runs",
      bundle(s61()), "A1", {},
      expect={"result": "completed", "processes": [P("1:2", "J1", "done", V, join="satisfied"), P("1:3", "D1", "done", V)], "history": 3})
# ---- §6.2
def s62():
    return {"A1": {"onValid": {"spawns": ["B1", "E1"], "join": join("J1", [("B1", "any"), ("E1", "valid")])}}, "B1": {}, "E1": {}, "J1": {}}
write("seed001_6_2_all_kill_fail", "seed 001 §6.2: all-join, B1 delivers (any), E1 fails with a hard error: unfulfillable",
      bundle(s62()), "A1", {"B1": "invalid", "E1": "error"},
      expect={"result": "completed", "processes": [P("1:2", "J1", "aborted", None, join="unfulfillable"), P("1:3", "B1", "done", I), P("1:4", "E1", "aborted", None, error=True)], "history": 3})
write("seed001_6_2_all_kill_ok", "seed 001 §6.2 with both producers valid: satisfied",
      bundle(s62()), "A1", {},
      expect={"result": "completed", "processes": [P("1:2", "J1", "done", V, join="satisfied")], "history": 4})
# ---- §6.3
s63 = {"A1": {"onValid": {"spawns": ["B1"], "join": join("J1", [("B1", "valid"), ("C1", "valid")], mode={"k": 2})}},
       "B1": {"onValid": {"spawns": ["C1"]}}, "C1": {"onValid": {"spawns": ["B1"]}}, "J1": {}}
write("seed001_6_3_kofn_backloop", "seed 001 §6.3: B1 -> C1 -> B1 backloop; k=2 met after C1; the waiting B1 is killed",
      bundle(s63), "A1", {},
      expect={"result": "completed", "processes": [P("1:3", "B1", "done", V), P("1:4", "C1", "done", V), P("1:5", "B1", "aborted", None, abortReason="join kill"), P("1:2", "J1", "done", V, join="satisfied")], "count": 5, "history": 4})
# ---- §6.4
s64 = {"A1": {"onValid": {"spawns": ["B1", "C1"], "join": join("J1", [("B1", "valid"), ("C1", "invalid")], mode="any", policy="drain")}}, "B1": {}, "C1": {}, "J1": {}}
write("seed001_6_4_when_filter_1", "seed 001 §6.4 scenario 1: B1 valid satisfies the any-join; drain lets C1 run on",
      bundle(s64), "A1", {},
      expect={"result": "completed", "processes": [P("1:2", "J1", "done", V, join="satisfied", payload={"nB1": 1, "last": "J1"}, payloadLacks=["nC1"]), P("1:3", "B1", "done", V), P("1:4", "C1", "done", V)], "history": 4})
write("seed001_6_4_when_filter_2", "seed 001 §6.4 scenario 2: B1 invalid is discarded, C1 invalid is accepted",
      bundle(s64), "A1", {"B1": "invalid", "C1": "invalid"},
      expect={"result": "completed", "processes": [P("1:2", "J1", "done", V, join="satisfied", payload={"last": "J1", "nC1": 1}), P("1:3", "B1", "done", I), P("1:4", "C1", "done", I)], "history": 4})
# ---- seed 003 §7.4
s74 = {"A1": {"onValid": {"spawns": ["G1", "H1"], "join": join("J1", [("G1", "valid"), ("H1", "valid")], mode="any")}},
       "G1": {}, "H1": {},
       "J1": {"onValid": {"spawns": ["P1", "Q1"], "join": join("J2", [("P1", "valid"), ("Q1", "valid")])}},
       "P1": {}, "Q1": {}, "J2": {"onValid": {"spawns": ["Z1"]}}, "Z1": {}}
write("seed003_7_4_nested_joins", "seed 003 §7.4: two joins in series; G1 satisfies J1 (any, kill: H1 killed), P1+Q1 satisfy J2, Z1 runs",
      bundle(copy.deepcopy(s74)), "A1", {},
      expect={"result": "completed", "processes": [P("1:2", "J1", "done", V, join="satisfied"), P("1:3", "G1", "done", V), P("1:4", "H1", "aborted", None, abortReason="join kill"),
              P("1:5", "J2", "done", V, join="satisfied"), P("1:6", "P1", "done", V), P("1:7", "Q1", "done", V), P("1:8", "Z1", "done", V)], "count": 8, "history": 7})
pit = {"A1": {"onValid": {"spawns": ["G1", "H1"], "join": join("J1", [("G1", "valid"), ("H1", "valid")], mode="any")}},
       "G1": {"onValid": {"spawns": ["P1"]}}, "H1": {"onValid": {"spawns": ["Q1"]}},
       "J1": {"onValid": {"join": join("J2", [("P1", "valid"), ("Q1", "valid")])}},
       "P1": {}, "Q1": {}, "J2": {"onValid": {"spawns": ["Z1"]}}, "Z1": {}}
write("seed003_7_4_pitfall", "seed 003 §7.4 pitfall: P1/Q1 are spawned by G1/H1 (scope of J1), so J2 has no producers and aborts as soon as J1 opens it",
      bundle(pit), "A1", {},
      expect={"result": "completed", "processes": [P("1:2", "J1", "done", V), P("1:3", "G1", "done", V), P("1:4", "H1", "aborted", None, abortReason="join kill"),
              P("1:5", "P1", "aborted", None, abortReason="join kill"), P("1:6", "J2", "aborted", None, join="unfulfillable")], "count": 6, "history": 3})
s13 = {"A1": {"onValid": {"spawns": ["G1", "H1"], "join": join("J1", [("G1", "valid"), ("H1", "valid")], mode="any")}},
       "G1": {}, "H1": {}, "J1": {"onValid": {"spawns": ["Z1"]}, "onInvalid": {}}, "Z1": {}}
write("seed003_13_minimal_join", "seed 003 §13: the first valid producer releases J1, the other is killed while waiting",
      bundle(s13), "A1", {},
      expect={"result": "completed", "processes": [P("1:3", "G1", "done", V), P("1:4", "H1", "aborted", None), P("1:2", "J1", "done", V), P("1:5", "Z1", "done", V)], "count": 5})
write("seed003_13_first_invalid", "seed 003 §13 with G1 invalid: H1 (valid) satisfies the join instead",
      bundle(copy.deepcopy(s13)), "A1", {"G1": "invalid"},
      expect={"result": "completed", "processes": [P("1:3", "G1", "done", I), P("1:4", "H1", "done", V), P("1:2", "J1", "done", V, payload={"last": "J1"}), P("1:5", "Z1", "done", V)], "count": 5})
# ---- nested cascade
nest = {"S": {"onValid": {"spawns": ["A"], "join": join("OUT", [("IN", "valid")])}},
        "A": {"onValid": {"spawns": ["X", "Y"], "join": join("IN", [("X", "valid"), ("Y", "valid")])}},
        "X": {}, "Y": {}, "IN": {}, "OUT": {}}
write("nested_inner_abort_cascades", "an inner all-join whose producer X fails aborts its target IN, which makes the outer join OUT unfulfillable; Y is killed by IN's kill policy",
      bundle(copy.deepcopy(nest)), "S", {"X": "error"},
      expect={"result": "completed", "processes": [P("1:2", "OUT", "aborted", None, join="unfulfillable"), P("1:4", "IN", "aborted", None, join="unfulfillable"), P("1:5", "X", "aborted", None), P("1:6", "Y", "aborted", None, abortReason="join kill")], "count": 6, "history": 3})
write("nested_all_satisfied", "nested joins all satisfied: IN then OUT run",
      bundle(copy.deepcopy(nest)), "S", {},
      expect={"result": "completed", "processes": [P("1:2", "OUT", "done", V, join="satisfied"), P("1:4", "IN", "done", V, join="satisfied")], "count": 6, "history": 6})
write("nested_inner_invalid_outer_waits", "the inner join target runs but is invalid: it delivers nothing valid, and OUT (expects IN valid) becomes unfulfillable",
      bundle(copy.deepcopy(nest)), "S", {"IN": "invalid"},
      expect={"result": "completed", "processes": [P("1:4", "IN", "done", I, join="satisfied"), P("1:2", "OUT", "aborted", None, join="unfulfillable")], "count": 6})
deep = {"S": {"onValid": {"spawns": ["A"], "join": join("O1", [("O2", "valid")])}},
        "A": {"onValid": {"spawns": ["B"], "join": join("O2", [("O3", "valid")])}},
        "B": {"onValid": {"spawns": ["C"], "join": join("O3", [("C", "valid")])}},
        "C": {}, "O1": {}, "O2": {}, "O3": {}}
write("nested_three_levels_cascade", "three nested joins; the innermost producer fails and the failure cascades through O3, O2 and O1",
      bundle(copy.deepcopy(deep)), "S", {"C": "error"},
      expect={"result": "completed", "processes": [P("1:2", "O1", "aborted", None, join="unfulfillable"), P("1:4", "O2", "aborted", None, join="unfulfillable"), P("1:6", "O3", "aborted", None, join="unfulfillable"), P("1:7", "C", "aborted", None)], "count": 7, "history": 4})
write("nested_three_levels_ok", "three nested joins all satisfied from the inside out",
      bundle(copy.deepcopy(deep)), "S", {},
      expect={"result": "completed", "processes": [P("1:2", "O1", "done", V), P("1:4", "O2", "done", V), P("1:6", "O3", "done", V)], "count": 7, "history": 7})
# ---- backloops keeping a join open
bl = {"A": {"onValid": {"spawns": ["L"], "join": join("J", [("Z", "valid")], mode="any")}},
      "L": {"onValid": {"spawns": ["Z"]}, "onInvalid": {"spawns": ["L"]}}, "Z": {}, "J": {}}
write("backloop_keeps_join_open_until_death", "L loops on invalid and can still reach Z, so J stays open; L's 4th run fails and J becomes unfulfillable",
      bundle(copy.deepcopy(bl)), "A", {"L": "invalid", "eL": 3},
      expect={"result": "completed", "processes": [P("1:3", "L", "done", I), P("1:4", "L", "done", I), P("1:5", "L", "done", I), P("1:6", "L", "aborted", None), P("1:2", "J", "aborted", None, join="unfulfillable")], "count": 6, "history": 5})
write("backloop_then_delivers", "L loops twice on invalid, then turns valid, spawns Z, whose piece satisfies J",
      bundle(copy.deepcopy(bl)), "A", {"vL": 100, "L": "valid", "eL": -1},
      expect={"result": "completed", "processes": [P("1:3", "L", "done", V), P("1:4", "Z", "done", V), P("1:2", "J", "done", V, join="satisfied")], "count": 4})
# ---- k-of-n
def kofn(policy):
    return {"A": {"onValid": {"spawns": ["B", "C", "D"], "join": join("J", [("B", "valid"), ("C", "valid"), ("D", "valid")], mode="kofn", policy=policy, k=2)}},
            "B": {}, "C": {}, "D": {}, "J": {}}
write("kofn_kill", "2-of-3 with kill: B and C satisfy the join, D is killed while waiting",
      bundle(kofn("kill")), "A", {},
      expect={"result": "completed", "processes": [P("1:3", "B", "done", V), P("1:4", "C", "done", V), P("1:5", "D", "aborted", None, abortReason="join kill"), P("1:2", "J", "done", V, join="satisfied")], "history": 4})
write("kofn_drain", "2-of-3 with drain: B and C satisfy the join, D still runs; its piece is ignored",
      bundle(kofn("drain")), "A", {},
      expect={"result": "completed", "processes": [P("1:5", "D", "done", V), P("1:2", "J", "done", V, join="satisfied")], "history": 5})
write("kofn_one_fails", "2-of-3: B fails with a hard error, C and D satisfy the join",
      bundle(kofn("kill")), "A", {"B": "error"},
      expect={"result": "completed", "processes": [P("1:3", "B", "aborted", None), P("1:5", "D", "done", V), P("1:2", "J", "done", V, join="satisfied")], "history": 5})
write("kofn_two_fail", "2-of-3: B and C fail, the join becomes unfulfillable and D is killed",
      bundle(kofn("kill")), "A", {"B": "error", "C": "abort"},
      expect={"result": "completed", "processes": [P("1:3", "B", "aborted", None), P("1:4", "C", "aborted", None, abortReason="abortStep"), P("1:5", "D", "aborted", None, abortReason="join kill"), P("1:2", "J", "aborted", None, join="unfulfillable")], "history": 3})
# merge order
mg = {"A": {"onValid": {"spawns": ["B", "C"], "join": join("J", [("C", "valid"), ("B", "valid")])}}, "B": {}, "C": {}, "J": {}}
mgr = {"B": flag_rule("B", extra_out={"who": "'B'", "onlyB": 1}), "C": flag_rule("C", extra_out={"who": "'C'", "onlyC": 1})}
write("join_merge_from_order", "pieces merge in `from` order (C then B), later keys win: J sees who=B; _from/_when never reach the payload",
      bundle(mg, rule_overrides=mgr), "A", {},
      expect={"result": "completed", "processes": [P("1:2", "J", "done", V, payload={"who": "B", "onlyB": 1, "onlyC": 1}, payloadLacks=["_from", "_when"])]})
# fan-out 32
fan = {"A": {"onValid": {"spawns": ["B%d" % i for i in range(32)], "join": join("J", [("B%d" % i, "valid") for i in range(32)])}}, "J": {}}
for i in range(32): fan["B%d" % i] = {}
write("fanout_32_all", "a 32-way fan-out with an all-join", bundle(fan), "A", {},
      expect={"result": "completed", "processes": [P("1:2", "J", "done", V, join="satisfied"), P("1:34", "B31", "done", V)], "count": 34, "history": 34})
# hard errors in joins
hj = {"A": {"onValid": {"spawns": ["B", "C"], "join": join("J", [("B", "valid"), ("C", "valid")], mode="any")}}, "B": {}, "C": {}, "J": {}}
write("any_join_survives_hard_error", "any-join: B fails with a hard error, C satisfies the join", bundle(hj), "A", {"B": "error"},
      expect={"result": "completed", "processes": [P("1:3", "B", "aborted", None, abortReason="error", error=True), P("1:4", "C", "done", V), P("1:2", "J", "done", V)]})
write("any_join_abortstep_records_fail", "any-join: B aborts its step (fail recorded), C is invalid: unfulfillable", bundle(copy.deepcopy(hj)), "A", {"B": "abort", "C": "invalid"},
      expect={"result": "completed", "processes": [P("1:2", "J", "aborted", None, join="unfulfillable", joinFail={"B": "aborted"})]})
# cancel / abort
ca = {"A": {"onValid": {"spawns": ["B", "C"]}}, "B": {"onValid": {"spawns": ["D"]}}, "C": {}, "D": {}}
write("cancel_session", "B cancels the session: every live process is aborted and the session ends killed", bundle(ca), "A", {"B": "cancel"},
      expect={"result": "killed", "processes": [P("1:2", "B", "aborted", None, abortReason="cancelSession"), P("1:3", "C", "aborted", None, abortReason="cancelSession")], "count": 3, "history": 2})
write("abort_step", "B aborts its step: no branch runs (no D), C continues", bundle(copy.deepcopy(ca)), "A", {"B": "abort"},
      expect={"result": "completed", "processes": [P("1:2", "B", "aborted", None, abortReason="abortStep"), P("1:3", "C", "done", V)], "count": 3})
write("hard_error_no_branch", "B fails with a hard error (division by zero): aborted with its error, no branch", bundle(copy.deepcopy(ca)), "A", {"B": "error"},
      expect={"result": "completed", "processes": [P("1:2", "B", "aborted", None, error=True), P("1:3", "C", "done", V)], "count": 3, "history": 3})
write("invalid_branch", "A invalid takes onInvalid", bundle({"A": {"onValid": {"spawns": ["B"]}, "onInvalid": {"spawns": ["C"]}}, "B": {}, "C": {}}), "A", {"A": "invalid"},
      expect={"result": "completed", "processes": [P("1:1", "A", "done", I), P("1:2", "C", "done", V)], "count": 2})
# timers
tm = {"A": {"onValid": {"spawns": ["B"]}}, "B": {"onValid": {"spawns": ["C"]}}, "C": {}}
write("waitsec_virtual_time", "waitSec on virtual time: A waits 5 s before B, B waits 2 s before C", bundle(tm, waits={"A": 5, "B": 2}), "A", {},
      expect={"result": "completed", "historyAt": {"1:1": 0, "1:2": 5000, "1:3": 7000}})
loop = {"L": {"onValid": {"spawns": ["L"]}}}
write("endless_loop_step_limit", "an endless IterationOfPi-style loop with waitSec 3600 stops at the step limit", bundle(loop, waits={"L": 3600}), "L", {}, max_steps=5,
      expect={"result": "limit", "historyAt": {"1:1": 0, "1:2": 3600000, "1:5": 14400000}, "history": 5})
# wake-ups
wk = {"A": {"onValid": {"spawns": ["W"]}}, "W": {}}
wkb = lambda: bundle(copy.deepcopy(wk), waits={"A": 3600})
write("wake_pid_by_owner", "PID-mode wake by the owner at 1 s: W runs at 1000 ms with the payload merged (`_` keys dropped)", wkb(), "A", {},
      script=[{"at": 1000, "wake": {"pid": "1:2"}, "payload": {"X": 5, "_secret": 1}}],
      expect={"result": "completed", "historyAt": {"1:2": 1000}, "processes": [P("1:2", "W", "done", V, payload={"X": 5}, payloadLacks=["_secret"])], "actionsOk": [True]})
write("wake_pid_by_stranger_refused", "PID-mode wake by another address is refused (delegation exists in step mode only); W runs on its timer", wkb(), "A", {},
      script=[{"at": 1000, "wake": {"pid": "1:2"}, "payload": {"X": 5}, "caller": OTHER}],
      expect={"result": "completed", "historyAt": {"1:2": 3600000}, "processes": [P("1:2", "W", "done", V, payloadLacks=["X"])], "actionsOk": [False]})
write("wake_step_by_owner", "step-mode wake by the owner", wkb(), "A", {},
      script=[{"at": 2000, "wake": {"step": "W"}, "payload": {"Y": "y"}}],
      expect={"result": "completed", "historyAt": {"1:2": 2000}, "processes": [P("1:2", "W", "done", V, payload={"Y": "y"})], "actionsOk": [True]})
allow = {"__wakeUp": {"default": {"rpc": [OTHER]}}}
write("wake_step_delegated_allowed", "step-mode wake by a delegate on the default rpc allow list", wkb(), "A", allow,
      script=[{"at": 2000, "wake": {"step": "W"}, "caller": OTHER}],
      expect={"result": "completed", "historyAt": {"1:2": 2000}, "actionsOk": [True]})
write("wake_step_delegate_not_listed", "step-mode wake by an address not on the allow list is refused", wkb(), "A", {"__wakeUp": {"default": {"rpc": ["0x00000000000000000000000000000000000000c0"]}}},
      script=[{"at": 2000, "wake": {"step": "W"}, "caller": OTHER}],
      expect={"result": "completed", "historyAt": {"1:2": 3600000}, "actionsOk": [False]})
write("wake_step_steps_entry_overrides_default", "steps[W] replaces default as a whole: the default rpc entry does not apply", wkb(), "A",
      {"__wakeUp": {"default": {"rpc": [OTHER]}, "steps": {"W": {"internal": ["*"]}}}},
      script=[{"at": 2000, "wake": {"step": "W"}, "caller": OTHER}],
      expect={"result": "completed", "historyAt": {"1:2": 3600000}, "actionsOk": [False]})
write("wake_step_rpc_wildcard_refused", "rpc allow lists take no wildcards", wkb(), "A", {"__wakeUp": {"default": {"rpc": ["*"]}}},
      script=[{"at": 2000, "wake": {"step": "W"}, "caller": OTHER}],
      expect={"result": "completed", "historyAt": {"1:2": 3600000}, "actionsOk": [False]})
jw = {"A": {"onValid": {"spawns": ["B"], "join": join("J", [("B", "valid")])}}, "B": {}, "J": {}}
write("wake_open_join_target_refused", "waking an open join target is refused; the join still closes normally", bundle(jw, waits={"A": 10}), "A", {},
      script=[{"at": 100, "wake": {"pid": "1:2"}}],
      expect={"result": "completed", "actionsOk": [False], "historyAt": {"1:3": 10000, "1:2": 10000}})
write("wake_step_nothing_waiting", "a step-mode wake that matches nothing wakes nothing and says so", wkb(), "A", {},
      script=[{"at": 100, "wake": {"step": "A"}}],
      expect={"result": "completed", "actionsOk": [False]})
# pause / resume / kill
pr = {"A": {"onValid": {"spawns": ["B"]}}, "B": {}}
write("pause_resume_pid", "B is paused before its timer and resumed later: it runs at the resume", bundle(copy.deepcopy(pr), waits={"A": 1}), "A", {},
      script=[{"at": 500, "pause": "1:2"}, {"at": 3000, "resume": "1:2"}],
      expect={"result": "completed", "historyAt": {"1:2": 3000}, "actionsOk": [True, True]})
write("pause_resume_session", "pausing the whole session holds every waiting process until resume", bundle(copy.deepcopy(pr), waits={"A": 1}), "A", {},
      script=[{"at": 500, "pause": "1"}, {"at": 4000, "resume": "1"}],
      expect={"result": "completed", "historyAt": {"1:2": 4000}, "actionsOk": [True, True]})
write("pause_stalls", "a paused process without a resume leaves the session stalled", bundle(copy.deepcopy(pr), waits={"A": 1}), "A", {},
      script=[{"at": 500, "pause": "1:2"}],
      expect={"result": "stalled", "processes": [P("1:2", "B", "waiting", None, paused=True)]})
write("kill_root", "kill of the root during an endless loop: every live process aborted, result killed", bundle(copy.deepcopy(loop), waits={"L": 1}), "L", {},
      script=[{"at": 2500, "kill": "1"}],
      expect={"result": "killed", "processes": [P("1:3", "L", "done", V), P("1:4", "L", "aborted", None, abortReason="killed")], "count": 4, "history": 3})
kp = {"A": {"onValid": {"spawns": ["B", "C"]}}, "B": {}, "C": {}}
write("kill_pid", "kill of one waiting process: B is aborted, C runs", bundle(kp, waits={"A": 10}), "A", {},
      script=[{"at": 100, "kill": "1:2"}],
      expect={"result": "completed", "processes": [P("1:2", "B", "aborted", None, abortReason="killed"), P("1:3", "C", "done", V)], "history": 2})
def kj(policy):
    return {"A": {"onValid": {"spawns": ["B"], "join": join("J", [("B", "valid")], policy=policy)}}, "B": {}, "J": {}}
write("kill_join_target_drain", "killing an open join target closes its join as unfulfillable; with drain its producer still runs", bundle(kj("drain"), waits={"A": 10}), "A", {},
      script=[{"at": 100, "kill": "1:2"}],
      expect={"result": "completed", "processes": [P("1:2", "J", "aborted", None, join="unfulfillable", abortReason="killed", joinClosedAt=100), P("1:3", "B", "done", V)]})
write("kill_join_target_kill", "killing an open join target with policy kill also kills its waiting producers", bundle(kj("kill"), waits={"A": 10}), "A", {},
      script=[{"at": 100, "kill": "1:2"}],
      expect={"result": "completed", "processes": [P("1:2", "J", "aborted", None, join="unfulfillable"), P("1:3", "B", "aborted", None, abortReason="join kill")], "history": 1})
