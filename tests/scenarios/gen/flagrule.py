"""Shared helpers for writing scenario files (used once by the author to produce the committed
JSON; the tests read only the JSON). A "flag rule" for step S decides its outcome from the
payload: key S ("valid" default, "invalid", "error" -> division by zero, "abort", "cancel") and a
per-step counter nS with limit vS (valid only while nS < vS), so loops can end, and eS: the
run (counted from 0) at which the step fails with a hard error."""
import json

def flag_rule(s, wait=None, extra_out=None, wakeups=None):
    out = {"n%s" % s: "[n%s] + 1" % s, "last": s}
    if extra_out:
        out.update(extra_out)
    r = {
        "payload": {
            s: {"type": "string", "default": "valid"},
            "n%s" % s: {"type": "int64", "default": 0},
            "v%s" % s: {"type": "int64", "default": 1000000},
            "e%s" % s: {"type": "int64", "default": -1},
        },
        "rules": [
            "[%s] != 'error' || 1 / 0 == 1" % s,
            "[n%s] != [e%s] || 1 / 0 == 1" % (s, s),
            {"type": "abortStep", "expression": "[%s] == 'abort'" % s},
            {"type": "cancelSession", "expression": "[%s] == 'cancel'" % s},
            "[%s] == 'valid' && [n%s] < [v%s]" % (s, s, s),
        ],
        "onValid": {"payload": dict(out)},
        "onInvalid": {"payload": dict(out)},
    }
    if wait is not None:
        r["onValid"]["waitSec"] = wait
        r["onInvalid"]["waitSec"] = wait
    if wakeups:
        r["onValid"]["wakeUps"] = wakeups
    return r

def bundle(structure, oid="scenario", waits=None, rule_overrides=None):
    waits = waits or {}
    rules = {}
    for step, d in structure.items():
        d.setdefault("rule", "${addr:%s}" % step)
        rules[step] = flag_rule(step, waits.get(step))
    if rule_overrides:
        rules.update(rule_overrides)
    return {"orchestration": {"id": oid, "structure": structure}, "rules": rules}

def join(target, frm, mode="all", policy="kill", k=None):
    j = {"joinid": target, "mode": mode, "waitonjoin": policy,
         "from": [{"node": n, "when": w} for n, w in frm]}
    if k is not None:
        j["k"] = k
    return j

def write(name, description, b, start, payload=None, script=None, expect=None, max_steps=None):
    sc = {"description": description, "bundle": b, "start": start, "payload": payload or {}}
    if script:
        sc["script"] = script
    if max_steps:
        sc["maxSteps"] = max_steps
    sc["expect"] = expect or {}
    with open(name + ".json", "w") as f:
        json.dump(sc, f, indent=1)
        f.write("\n")
