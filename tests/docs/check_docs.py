#!/usr/bin/env python3
"""check_docs.py -- the user documentation tested against the real tools and the code.

    check_docs.py examples XGR   every document under docs/examples/ loads with `xgr check`
                                 (no errors); every `$ xgr ...` block of docs/RULE_FORMAT.md and
                                 docs/ORCHESTRATION.md is run and its output compared with the one
                                 the page shows; further runs described in prose (RUNS below)
                                 give the exit code and fields the page states; the tables of
                                 templates and helper functions in RULE_FORMAT.md are evaluated
                                 with `xgr eval`. API calls go to tests/docs/api_stub.py, started
                                 here on 127.0.0.1.
    check_docs.py links          no docs/*.md and no README.md points outside the repository:
                                 no document of ../shared, no seed, no file or numbered section
                                 of the source specifications (users have only the repository);
                                 every relative link of the pages leads to a file of it.
    check_docs.py keys           every key, enumerated value and type the rule and orchestration
                                 parsers know (read from their tables and calls in src/, so the
                                 list follows the code) appears in RULE_FORMAT.md or
                                 ORCHESTRATION.md; every key the rule parser reads is in the lint
                                 tables (else `xgr check` would call a valid key unknown).

Exit 0 pass, 1 fail (each failure on one line). Needs nothing outside the repository.
"""
import glob
import json
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.realpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg)


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


# ---- examples -------------------------------------------------------------------------------------

# Runs the pages describe in prose: (file, payload, exit code, fields of `xgr step --json` that
# must be equal). Keep them in step with the sentences around each example.
TOKEN = "0x00000000000000000000000000000000000000e1"
HOLDER = "0x00000000000000000000000000000000000000e2"
RUNS = [
    ("rule_minimal.json", {"Amount": 0}, 1, {"valid": False, "outputPayload": {"Approved": False}}),
    ("rule_minimal.json", {"Amount": "x"}, 3, {"outputPayload": {}}),
    ("rule_api_get.json", {"Symbol": "BTC"}, 1,
     {"softInvalid": ["Price"], "extracted": {"Currency": "USD", "Spread": 0.0},
      "outputPayload": {"Quote": "no price for BTC"}}),
    ("rule_api_post.json", {"Name": "Zo\u00eb \"Z\" O'Neil", "Age": 34}, 0,
     {"outputPayload": {"KycStatus": "approved", "Checked": "Zo\u00eb \"Z\" O'Neil"}}),
    ("rule_api_post.json", {"Name": "Kid", "Age": 12}, 1, {"outputPayload": {"KycStatus": "rejected"}}),
    ("rule_api_post.json", {"Name": "X", "Age": 40, "Country": "XX"}, 1, {"ruleAction": "abortStep"}),
    ("rule_api_post.json", {"Age": 40}, 1,
     {"missingInput": True, "extracted": {"Accepted": False, "EchoAge": 0},
      "outputPayload": {"KycStatus": "rejected"}}),
    ("rule_branches.json", {"Token": TOKEN, "Holder": HOLDER, "Minimum": "0"}, 0,
     {"extracted": {"Balance": "0", "Decimals": 18}, "waitSec": 30,
      "grants": [{"address": "0x00000000000000000000000000000000000000a5", "rights": 1, "expireDays": 30},
                 {"address": HOLDER, "rights": 5, "expireDays": 90}]}),
    ("rule_branches.json", {"Token": TOKEN, "Holder": TOKEN}, 1, {"ruleAction": "cancelSession"}),
]


def run(argv, **kw):
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, **kw)


def check_examples_load(xgr):
    files = sorted(glob.glob(os.path.join(ROOT, "docs", "examples", "*.json")))
    if not files:
        fail("docs/examples has no documents")
    for f in files:
        r = run([xgr, "check", "--json", "--no-explore", f])
        rel = os.path.relpath(f, ROOT)
        if r.returncode != 0:
            fail(f"xgr check {rel}: exit {r.returncode}: {r.stdout.strip()} {r.stderr.strip()}")
            continue
        doc = json.loads(r.stdout.splitlines()[0])
        for e in doc.get("errors", []):
            fail(f"xgr check {rel}: {e['path']}: {e['message']}")


def normalize(line, port):
    line = line.rstrip()
    line = line.replace(f"127.0.0.1:{port}", "127.0.0.1:PORT")
    line = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", line)
    line = re.sub(r"\b\d+ ms\b", "N ms", line)
    line = re.sub(r"0x[0-9a-f]{64}", "0x\u2026", line)
    return line


def matches(expected, got):
    """Lines equal, where an expected line `...` stands for any number of lines."""
    if not expected:
        return not got
    if expected[0] == "...":
        return any(matches(expected[1:], got[i:]) for i in range(len(got) + 1))
    return bool(got) and expected[0] == got[0] and matches(expected[1:], got[1:])


def shown_runs(page):
    """The `$ ...` commands of the page's fenced blocks, with the output shown after each."""
    out = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", read(page), re.S):
        lines = block.rstrip("\n").split("\n")
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                i += 1
                continue
            cmd = lines[i][2:]
            i += 1
            while True:   # continuation: a trailing backslash or an open quote
                try:
                    shlex.split(cmd)
                    if not cmd.endswith("\\"):
                        break
                except ValueError:
                    pass
                if i >= len(lines):
                    break
                cmd = cmd.rstrip("\\").rstrip() + " " + lines[i].strip()
                i += 1
            shown = []
            while i < len(lines) and not lines[i].startswith("$ "):
                shown.append(lines[i])
                i += 1
            out.append((page, cmd, shown))
    return out


def check_shown_runs(xgr, port):
    n = 0
    for page in ("docs/RULE_FORMAT.md", "docs/ORCHESTRATION.md"):
        for _, cmd, shown in shown_runs(page):
            if cmd.startswith("python3 tests/docs/api_stub.py") or cmd.startswith("kill "):
                continue   # the stand-in API runs in this process
            if not cmd.startswith("xgr "):
                fail(f"{page}: cannot run `{cmd}`")
                continue
            cmd = cmd.replace("$(cat /tmp/api.port)", str(port))
            argv = [xgr] + shlex.split(cmd)[1:]
            r = run(argv)
            got = [normalize(line, port) for line in r.stdout.rstrip("\n").split("\n")]
            want = [normalize(line, port) for line in shown]
            n += 1
            if not matches(want, got):
                fail(f"{page}: `{cmd}` printed:\n  " + "\n  ".join(got) + "\n  the page shows:\n  " +
                     "\n  ".join(want))
    if n < 5:
        fail(f"only {n} shown runs found in the pages; the block format changed?")


def subset(want, got, path):
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{path}: expected an object, got {json.dumps(got)}"]
        errs = []
        for k, v in want.items():
            if k not in got:
                errs.append(f"{path}.{k}: missing")
            else:
                errs += subset(v, got[k], f"{path}.{k}")
        return errs
    return [] if want == got else [f"{path}: expected {json.dumps(want)}, got {json.dumps(got)}"]


def check_prose_runs(xgr, port):
    for name, payload, code, fields in RUNS:
        argv = [xgr, "step", os.path.join("docs", "examples", name), "--json", "--payload", json.dumps(payload),
                "--api-map", f"https://api.example.com=http://127.0.0.1:{port}", "--allow-outbound", "loopback"]
        r = run(argv)
        what = f"xgr step docs/examples/{name} --payload '{json.dumps(payload)}'"
        if r.returncode != code:
            fail(f"{what}: exit {r.returncode}, expected {code}: {r.stderr.strip()}")
            continue
        try:
            got = json.loads(r.stdout)
        except ValueError:
            fail(f"{what}: not JSON: {r.stdout[:200]}")
            continue
        for e in subset(fields, got, "result"):
            fail(f"{what}: {e}")
    r = run([xgr, "run", "docs/examples/bundle_counter.json", "--start", "count", "--virtual-time", "--json"])
    if r.returncode != 0 or '"completed"' not in r.stdout:
        fail(f"xgr run docs/examples/bundle_counter.json: exit {r.returncode}: {r.stdout[-300:]} {r.stderr.strip()}")


def first_code(cell):
    m = re.search(r"`([^`]*)`", cell)
    return m.group(1) if m else None


def eval_value(xgr, src, variables=None):
    argv = [xgr, "eval", "--json"] + (["--vars", json.dumps(variables)] if variables else []) + [src]
    r = run(argv)
    try:
        d = json.loads(r.stdout)
    except ValueError:
        return None, r.stdout + r.stderr
    return d.get("value"), d


def same(shown, value):
    """A shown result (JSON-ish text, maybe ending in an ellipsis) against an evaluated value."""
    if shown.endswith("\u2026"):
        return json.dumps(value).startswith(shown[:-1])
    try:
        want = json.loads(shown)
    except ValueError:
        return False
    return want == value and type(want) is type(value)


def check_tables(xgr):
    page = read("docs/RULE_FORMAT.md")
    # the template-or-expression table: | `"string"` | read as | `result` ... |, checked as values
    # of a branch payload run by `xgr step` (the place the table is about)
    rows = []
    for line in page.split("\n"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith('`"'):
            continue
        res = first_code(cells[2])
        if res is not None:
            rows.append((cells[0], json.loads(first_code(cells[0])), cells[1], res))
    if len(rows) < 8:
        fail(f"RULE_FORMAT.md: only {len(rows)} rows of the template table found")
    doc = {"payload": {"A": {"type": "int64", "default": 5}, "B": {"type": "int64", "default": 3},
                       "Name": {"type": "string", "default": "Ann"}},
           "onValid": {"payload": {f"r{i}": src for i, (_, src, _, _) in enumerate(rows)}}}
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"check_docs_table_{os.getpid()}.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    try:
        r = run([xgr, "step", path, "--json"])
    finally:
        os.unlink(path)
    try:
        out = json.loads(r.stdout)["outputPayload"]
    except (ValueError, KeyError):
        fail(f"RULE_FORMAT.md: the template table as a rule does not run: {r.stdout[:300]} {r.stderr[:300]}")
        out = {}
    for i, (cell, _, read_as, res) in enumerate(rows):
        value = out.get(f"r{i}")
        if not same(res, value):
            fail(f"RULE_FORMAT.md: {cell} is shown as {res}, a branch payload gives {json.dumps(value)}")
        if read_as in ("template", "text") and not isinstance(value, str):
            fail(f"RULE_FORMAT.md: {cell} is said to be {read_as} but gives {json.dumps(value)}")
    # the helper table: | `fn(...)` | gives | `example` → `result` |
    rows = 0
    for line in page.split("\n"):
        m = re.match(r"\|.*\|\s*`([^`]+)`\s*\u2192\s*`([^`]+)`\s*\|\s*$", line)
        if not m:
            continue
        value, d = eval_value(xgr, m.group(1))
        rows += 1
        if not same(m.group(2), value):
            fail(f"RULE_FORMAT.md: `{m.group(1)}` is shown as {m.group(2)}, xgr eval gives {json.dumps(d)}")
    if rows < 12:
        fail(f"RULE_FORMAT.md: only {rows} rows of the helper table found")


def examples(xgr):
    import api_stub
    srv = api_stub.start()
    try:
        check_examples_load(xgr)
        check_shown_runs(xgr, srv.server_port)
        check_prose_runs(xgr, srv.server_port)
        check_tables(xgr)
    finally:
        srv.shutdown()


# ---- links ----------------------------------------------------------------------------------------

# What counts as pointing outside: a document of the source material (its specifications, seeds,
# SEMANTICS.md, DESIGN.md) by path, file name or numbered section, or a seed by number. Naming the
# folder ../shared itself, where CI keeps the optional test corpora, is not a pointer to read.
OUTSIDE = [
    (r"\.\./shared/+(specs|seeds|SEMANTICS|DESIGN|README|hooks)|\bshared/(specs|seeds)", "a document in ../shared"),
    (r"\]\([^)]*\bshared/", "a link into ../shared"),
    (r"xgr-public", "the source specifications' folder"),
    (r"\bseeds/|\bseed \d{3}\b|\b\d{3}_[0-9a-f]{16}\.txt|\bthe seed('s|s'|s)?\b", "a seed document"),
    (r"\b(XRC-137_Rule_Document_Spec|XRC-137_Smart_Contract_Standard|XRC-729_Smart_Contract_Standard|"
     r"XDaLa_Limits|XDaLa_Permit_Catalog|XDaLa_XGR_Endpoint_Reference|xgr_expression_evaluation_developer_guide|"
     r"xrc_729_orchestration_session_manager)", "a file of the source specifications"),
    (r"§\s?\d", "a numbered section of a document outside the repository (the repository's pages have none)"),
]


def links():
    files = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [os.path.join(ROOT, "README.md")]
    for f in files:
        rel = os.path.relpath(f, ROOT)
        with open(f, encoding="utf-8") as fh:
            for no, line in enumerate(fh, 1):
                for pat, what in OUTSIDE:
                    m = re.search(pat, line)
                    if m:
                        fail(f"{rel}:{no}: points outside the repository ({what}): {m.group(0)!r} in: {line.strip()[:160]}")
    # relative links of the pages must resolve inside the repository
    for f in files:
        rel = os.path.relpath(f, ROOT)
        text = read(rel)
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            full = os.path.realpath(os.path.join(os.path.dirname(f), target))
            if not full.startswith(ROOT + os.sep) or not os.path.exists(full):
                fail(f"{rel}: link ({target}) does not lead to a file of the repository")


# ---- keys -----------------------------------------------------------------------------------------

def strings(text):
    return re.findall(r'"([A-Za-z_$][A-Za-z0-9_]*)"', text)


def rule_keys():
    lint = read("src/rule/lint.c")
    tables = set()
    for body in re.findall(r"static const char \*const K_\w+\[\] = \{(.*?)\};", lint, re.S):
        tables |= set(strings(body))
    parse = read("src/rule/parse.c")
    read_keys = set(re.findall(r'\b(?:get|get_string|opt_uint|parse_template_field)\(\s*(?:c,\s*)?\w+,\s*"(\w+)"', parse))
    read_keys |= set(re.findall(r'\bpmiss\(c,\s*"(\w+)"', parse))
    read_keys |= set(re.findall(r'\bparse_branch\(&c,\s*doc,\s*"(\w+)"', parse))
    for body in re.findall(r"static const char \*const req\[\] = \{(.*?)\};", parse, re.S):
        read_keys |= set(strings(body))
    values = set(re.findall(r'\bstrcmp\(\w+,\s*"(\w+)"\)', parse))
    types_src = read("src/xrc/types.c")
    m = re.search(r"type_names\[[^]]*\] = \{(.*?)\};", types_src, re.S)
    types = set(strings(m.group(1))) if m else set()
    return tables, read_keys, values, types


def orch_keys():
    parse = read("src/orch/parse.c")
    keys = set()
    for body in re.findall(r"static const char \*const (?:known|names)\[\w*\] = \{(.*?)\};", parse, re.S):
        keys |= set(strings(body))
    keys |= set(re.findall(r'json_object_get\(\w+,\s*"(\w+)"\)', parse))
    keys |= set(re.findall(r'strcmp\(key,\s*"(\w+)"\)', parse))
    values = set(re.findall(r'strcmp\(s,\s*"(\w+)"\)', parse))
    bundle = set(re.findall(r'json_object_get\(root,\s*"(\w+)"\)', read("src/session/bundle.c")))
    daemon = set(re.findall(r'json_object_get\(dj,\s*"(\w+)"\)', read("src/node/bundles.c")))
    return keys, values, bundle, daemon


def mentioned(page_text, word):
    return f"`{word}`" in page_text or f'"{word}"' in page_text


def keys():
    rule_page, orch_page = read("docs/RULE_FORMAT.md"), read("docs/ORCHESTRATION.md")
    tables, read_keys, rvalues, types = rule_keys()
    if len(tables) < 30 or len(read_keys) < 25 or len(types) != 14:
        fail(f"the rule parser's key lists were not found as expected (lint {len(tables)}, parse {len(read_keys)}, "
             f"types {len(types)}); update tests/docs/check_docs.py to the code")
    for k in sorted(read_keys - tables):
        fail(f"src/rule/parse.c reads `{k}` but src/rule/lint.c's known-key tables lack it (xgr check would warn)")
    for k in sorted(tables | read_keys):
        if not mentioned(rule_page, k):
            fail(f"docs/RULE_FORMAT.md does not describe the rule document key `{k}`")
    for v in sorted(rvalues | types):
        if not mentioned(rule_page, v):
            fail(f"docs/RULE_FORMAT.md does not mention `{v}` (a value or type the rule parser knows)")
    okeys, ovalues, bundle, daemon = orch_keys()
    if len(okeys) < 12 or len(ovalues) < 6 or not bundle or not daemon:
        fail(f"the orchestration parser's key lists were not found as expected ({len(okeys)} keys, {len(ovalues)} "
             f"values, bundle {sorted(bundle)}, xgrd {sorted(daemon)}); update tests/docs/check_docs.py to the code")
    for k in sorted(okeys | ovalues | bundle | daemon):
        if not mentioned(orch_page, k):
            fail(f"docs/ORCHESTRATION.md does not describe `{k}` (known to the orchestration parser)")


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("examples", "links", "keys") or (sys.argv[1] == "examples" and len(sys.argv) != 3):
        print(__doc__)
        return 2
    mode = sys.argv[1]
    if mode == "examples":
        examples(os.path.abspath(sys.argv[2]))
    elif mode == "links":
        links()
    else:
        keys()
    print(f"{mode}: {'FAIL, ' + str(len(failures)) + ' problem(s)' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
