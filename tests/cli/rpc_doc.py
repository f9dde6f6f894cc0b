#!/usr/bin/env python3
"""rpc_doc.py XGRD DOC — docs/RPC.md as a runnable story (issue 15): start a fresh xgrd on loopback
(--auth none, memory store), run every curl example of DOC in document order against it, and
compare each answer with the ```json block that follows the example in DOC.

Comparison: objects are compared by the keys the doc shows (the daemon may answer more); arrays
element by element with the same length; the string "…" in the doc stands for any value (times,
hashes). An example without an answer block is run and must answer without a JSON-RPC error.
With --print, prints the real answers instead of comparing (to write the doc)."""
import json, os, re, subprocess, sys, tempfile, time

ANY = "…"

def match(want, got, path, errs):
    if want == ANY:
        return
    if isinstance(want, dict):
        if not isinstance(got, dict):
            errs.append(f"{path}: expected an object, got {json.dumps(got)[:200]}")
            return
        for k, v in want.items():
            if k not in got:
                errs.append(f"{path}.{k}: missing in the answer")
            else:
                match(v, got[k], f"{path}.{k}", errs)
    elif isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            errs.append(f"{path}: expected {len(want)} elements, got {json.dumps(got)[:300]}")
            return
        for i, (a, b) in enumerate(zip(want, got)):
            match(a, b, f"{path}[{i}]", errs)
    elif want != got or type(want) != type(got):
        errs.append(f"{path}: doc says {json.dumps(want)}, xgrd answered {json.dumps(got)}")

def examples(text):
    """(curl command, expected answer or None, line) for every ```sh block that calls xgrd; the
    answer is a ```json block right after it (blank lines only in between)."""
    out = []
    for m in re.finditer(r"```sh\n(.*?)```", text, re.S):
        body = m.group(1)
        if "curl -s localhost:8729" not in body:
            continue
        ans = re.match(r"\s*```json\n(.*?)```", text[m.end():], re.S)
        want = json.loads(ans.group(1)) if ans else None
        out.append((body, want, text[:m.start()].count("\n") + 1))
    return out

def main():
    xgrd, doc = sys.argv[1], sys.argv[2]
    printing = "--print" in sys.argv
    text = open(doc, encoding="utf-8").read()
    exs = examples(text)
    if not exs:
        print("FAIL no curl examples found")
        return 1
    tmp = tempfile.mkdtemp()
    portf = os.path.join(tmp, "port")
    log = open(os.path.join(tmp, "xgrd.log"), "w")
    p = subprocess.Popen([xgrd, "--listen", "127.0.0.1:0", "--auth", "none", "--store", "memory:", "--port-file",
                          portf, "--workers", "2", "--log-level", "warn"], stdout=log, stderr=log)
    fail = 0
    try:
        for _ in range(200):
            if os.path.exists(portf) and open(portf).read().strip():
                break
            time.sleep(0.05)
        port = open(portf).read().strip()
        for body, want, line in exs:
            cmd = body.replace("localhost:8729", f"127.0.0.1:{port}")
            time.sleep(0.2)   # let the previous call's steps run (a step of the story may start one)
            r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=30)
            method = re.search(r'"method":"([^"]+)"', body)
            name = f"RPC.md line {line} ({method.group(1) if method else '?'})"
            try:
                got = json.loads(r.stdout)
            except ValueError:
                print(f"FAIL {name}: not JSON: {r.stdout[:200]!r} {r.stderr[:200]!r}")
                fail = 1
                continue
            if printing:
                print(f"--- {name}\n{json.dumps(got.get('result', got))}")
                continue
            if "error" in got:
                print(f"FAIL {name}: xgrd answered an error: {json.dumps(got['error'])}")
                fail = 1
                continue
            if want is None:
                print(f"PASS {name} (no answer shown in the doc)")
                continue
            errs = []
            match(want, got.get("result"), "result", errs)
            if errs:
                fail = 1
                print(f"FAIL {name}:")
                for e in errs:
                    print("   ", e)
            else:
                print(f"PASS {name}")
    finally:
        p.terminate()
        p.wait(timeout=30)
    return fail

if __name__ == "__main__":
    sys.exit(main())
