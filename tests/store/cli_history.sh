#!/usr/bin/env bash
# cli_history.sh — `xgr history`: the audit trail of a session from a real store file (table and
# --json), and clear errors for a missing session, an unreadable store and bad arguments.
set -euo pipefail
XGR=$1 RUN=$2 BUNDLE=$3
DIR=$(mktemp -d /tmp/xgr-history-XXXXXX)
trap 'rm -rf "$DIR"' EXIT
OWNER=0x00000000000000000000000000000000000000c7
"$RUN" run "$DIR/s.db" "$BUNDLE" 2 >/dev/null
out=$("$XGR" history --store "$DIR/s.db" "$OWNER" 2)
head -4 <<<"$out"
grep -q "completed  orchestration crash_test" <<<"$out"
[ "$(grep -c '^2:' <<<"$out")" = 23 ]
grep -q "^2:1 .* Start .* done .* valid" <<<"$out"
grep -Eq "^2:[0-9]+ .* R3 .* aborted .* join kill" <<<"$out" && { echo "an aborted waiting process has no history row"; exit 1; }
json=$("$XGR" history --store "$DIR/s.db" --json "$OWNER" 2)
python3 - "$json" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
h = r["history"]
assert r["session"]["status"] == "completed", r["session"]
assert len(h) == 23 and len({x["pid"] for x in h}) == 23
final = [x for x in h if x["step"] == "Final"][0]
assert final["payload"]["Done"] is True and final["payload"]["R1"] and final["payload"]["R2"], final
PY
set +e
"$XGR" history --store "$DIR/s.db" "$OWNER" 9 2>"$DIR/err"; [ $? = 1 ] && grep -q "no session" "$DIR/err" || exit 1
"$XGR" history --store "$DIR/none/x.db" "$OWNER" 1 2>"$DIR/err"; [ $? = 2 ] && grep -q "cannot open" "$DIR/err" || exit 1
"$XGR" history --store "$DIR/s.db" "$OWNER" abc 2>"$DIR/err"; [ $? = 2 ] || exit 1
"$XGR" history "$OWNER" 1 2>/dev/null; [ $? = 2 ] || exit 1
echo "not a database at all, but long enough to have a header of sorts......................" >"$DIR/junk.db"
"$XGR" history --store "$DIR/junk.db" "$OWNER" 1 2>"$DIR/err"; [ $? = 2 ] || exit 1
cat "$DIR/err"
echo "1 passed, 0 failed"
