"""Writes the scenarios of internal wake-ups between sessions (rule `wakeUps`, SEMANTICS §5)."""
import sys, copy
sys.path.insert(0, 'gen')
from flagrule import flag_rule, write

A = "0x0000000000000000000000000000000000000001"     # owner of session 1 (the bidder)
B = "0x00000000000000000000000000000000000000b0"     # owner of session 2 (the auction)
RULE_ADDR = "0x00000000000000000000000000000000000000ee"
OTHER_RULE = "0x00000000000000000000000000000000000000ff"

def bundle():
    bid = {"payload": {"Runner": {"type": "address"}, "Target": {"type": "uint64"}},
           "rules": [],
           "onValid": {"payload": {"BidOk": True, "_hidden": 1},
                       "wakeUps": [{"runner": "[Runner]", "sessionId": "[Target]", "stepId": "settle",
                                    "payload": {"Bidder": "[from]", "_x": 2}}]}}
    pre = flag_rule("pre", wait=1)
    main = flag_rule("main", wait=3600)
    settle = flag_rule("settle")
    return {"orchestration": {"id": "auction", "structure": {
                "pre": {"rule": "pre", "onValid": {"spawns": ["bid"]}},
                "bid": {"rule": RULE_ADDR},
                "main": {"rule": "main", "onValid": {"spawns": ["settle"]}},
                "settle": {"rule": "settle"}}},
            "rules": {"pre": pre, RULE_ADDR: bid, "main": main, "settle": settle}}

def scenario(name, desc, allow, ran_at, ok):
    p2 = {}
    if allow is not None:
        p2["__wakeUp"] = allow
    exp2 = {"result": "completed", "historyAt": {"2:2": ran_at}}
    if ok:
        exp2["processes"] = [{"pid": "2:2", "step": "settle", "status": "done", "valid": True,
                              "payload": {"Bidder": A, "BidOk": True}, "payloadLacks": ["_hidden", "_x"]}]
    else:
        exp2["processes"] = [{"pid": "2:2", "step": "settle", "status": "done", "valid": True, "payloadLacks": ["Bidder"]}]
    write(name, desc, bundle(), "pre", {"Runner": B, "Target": 2},
          expect={"result": "completed", "historyAt": {"1:2": 1000}, "sessions": [exp2]})
    import json
    sc = json.load(open(name + ".json"))
    sc["sessions"] = [{"owner": B, "rootPid": 2, "start": "main", "payload": p2}]
    # keep "sessions" before "expect" for readability
    exp = sc.pop("expect"); sc["expect"] = exp
    json.dump(sc, open(name + ".json", "w"), indent=1); open(name + ".json", "a").write("\n")

scenario("wakeups_internal_denied_without_allow_list",
         "a rule's wakeUps entry asks session 2 (another owner) to resume `settle`; without an allow list it is refused and settle runs on its timer",
         None, 3600000, False)
scenario("wakeups_internal_list_wildcard",
         "internal allow list in list form with \"*\": the wake-up is accepted, settle runs at 1 s with the producing step's outcome payload and the wake-up payload (`_` keys dropped)",
         {"default": {"internal": ["*"]}}, 1000, True)
scenario("wakeups_internal_named_caller",
         "internal allow list naming the bidder session's owner",
         {"steps": {"settle": {"internal": [A]}}}, 1000, True)
scenario("wakeups_internal_rpc_list_does_not_count",
         "an rpc allow list does not authorise internal wake-ups",
         {"default": {"rpc": [A]}}, 3600000, False)
scenario("wakeups_internal_object_form_fromxrc137",
         "object form {allow, fromXRC137}: the emitting rule contract is listed, so the wake-up is accepted",
         {"default": {"internal": {"allow": ["*"], "fromXRC137": [RULE_ADDR.upper().replace("0X", "0x")]}}}, 1000, True)
scenario("wakeups_internal_object_form_other_rule",
         "object form with fromXRC137 naming another rule contract: refused",
         {"default": {"internal": {"allow": ["*"], "fromXRC137": [OTHER_RULE]}}}, 3600000, False)
scenario("wakeups_internal_object_form_empty_fromxrc137",
         "object form with an empty fromXRC137 list is a misconfiguration and denies",
         {"default": {"internal": {"allow": ["*"], "fromXRC137": []}}}, 3600000, False)
