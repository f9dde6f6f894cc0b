#!/usr/bin/env bash
# examples_check.sh XGR EXAMPLES_DIR — every shipped example checks clean: `xgr check` on each
# xgr document under EXAMPLES_DIR (found when the test runs, so examples added later are covered)
# must report no error and no warning. examples/orchestrations/pitfall_unfulfillable_join.json
# exists to fail: it must still give its error and its explore warnings. JSON files that are not
# xgr documents (data for a demo's stand-in API, say) are listed as skipped.
set -u
X=$1
DIR=$2
fail=0
n=0
PITFALL=orchestrations/pitfall_unfulfillable_join.json
while IFS= read -r -d '' f; do
  rel=${f#"$DIR"/}
  # the document kinds xgr check tells by their keys (src/cli/load.c, cli_doc_kind)
  if ! jq -e 'type == "object" and (has("orchestration") or has("structure") or has("payload") or has("rules")
              or has("onValid") or has("onInvalid") or has("apiCalls") or has("contractReads"))' "$f" > /dev/null 2>&1; then
    echo "SKIP $rel: not an xgr document"
    continue
  fi
  out=$("$X" check --json "$f" 2>/dev/null); rc=$?
  if [ "$rel" = "$PITFALL" ]; then
    # built to fail: the scope error and the join explore finds never satisfied stay real
    [ "$rc" = 1 ] || { echo "FAIL $rel: exit $rc, expected 1"; fail=1; }
    jq -e '[.errors[] | select(.code == "join_unfulfillable")] | length == 1' <<<"$out" > /dev/null ||
      { echo "FAIL $rel: no join_unfulfillable error"; fail=1; }
    jq -e '[.warnings[] | select(.code == "explore_join_unfulfillable" and (.message | test("J2 .* always ends unfulfillable")))] | length == 1' \
      <<<"$out" > /dev/null || { echo "FAIL $rel: explore no longer finds J2 never satisfied"; fail=1; }
    echo "PASS $rel (fails as it should)"
    continue
  fi
  n=$((n + 1))
  if [ "$rc" != 0 ] || ! jq -e '(.errors | length) == 0 and (.warnings | length) == 0' <<<"$out" > /dev/null; then
    echo "FAIL $rel: exit $rc; xgr check $rel says:"
    "$X" check "$f" 2>&1 | grep -E ': (error|warning): |^checked' | sed 's/^/  /'
    fail=1
  else
    echo "PASS $rel"
  fi
done < <(find "$DIR" -name '*.json' -type f -print0 | sort -z)
[ "$n" -gt 0 ] || { echo "FAIL no example found under $DIR"; fail=1; }
exit $fail
