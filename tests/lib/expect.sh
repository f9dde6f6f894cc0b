# tests/lib/expect.sh — the assertions of the shell tests, sourced by them (one copy, not one per
# script). The sourcing script sets $tmp (a scratch directory it owns) and fail=0 first; every
# assertion prints one PASS or FAIL line and sets fail=1 when it fails, so the script ends with
# `exit $fail`. Nothing here starts processes or changes directories.
#
#   t NAME EXPECTED_EXIT CMD...   run CMD: stdout in $out and $tmp/out, stderr in $err and $tmp/err;
#                                 the exit code must be EXPECTED_EXIT exactly
#   has NAME TEXT                 stdout or stderr of the last t contains TEXT
#   lacks NAME TEXT               ... does not contain TEXT
#   is_err NAME LINE              stderr of the last t is exactly LINE
#   is NAME JQ-EXPR EXPECTED      jq -c JQ-EXPR on $tmp/out prints exactly EXPECTED
#   json PY-EXPR                  prints the Python expression PY-EXPR over d = the JSON of $tmp/out
#   rpc_err NAME CODE [PATH]      $tmp/out is a JSON-RPC answer with no result and error.code exactly
#                                 CODE (and, when PATH is given, error.data.path exactly PATH)
#   rpc_ok NAME                   $tmp/out is a JSON-RPC answer with a result and no error
#   cli_err NAME CODE             the last line of the last t's stderr is xgr's report of an xgrd error
#                                 with exactly CODE: it ends "(code CODE)" or "(code CODE, at PATH)"
#   start_xgrd XGRD               start XGRD with --auth none on a memory store, on 127.0.0.1 port 0
#                                 (log in $tmp/xgrd.log); sets XPID, exports XGR_URL, and sets the
#                                 EXIT trap that stops it and removes $tmp; exits 1 when no port
#                                 file appears within 5 s

t() {
  local name=$1 want=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
  if [ "$rc" -ne "$want" ]; then echo "FAIL $name: exit $rc, expected $want"; head -20 "$tmp/out" "$tmp/err"; fail=1; else echo "PASS $name"; fi
}
has() {
  if grep -qF -- "$2" <<<"$out$err"; then echo "PASS $1"
  else echo "FAIL $1: output lacks: $2"; printf '%s\n%s\n' "$out" "$err" | head -20; fail=1; fi
}
lacks() {
  if grep -qF -- "$2" <<<"$out$err"; then echo "FAIL $1: output has: $2"; printf '%s\n%s\n' "$out" "$err" | head -20; fail=1
  else echo "PASS $1"; fi
}
is_err() {
  if [ "$err" != "$2" ]; then echo "FAIL $1: stderr is:"; printf '%s\n' "$err" | head -5; echo "  expected: $2"; fail=1
  else echo "PASS $1"; fi
}
is() {
  local got; got=$(jq -c "$2" "$tmp/out" 2>&1)
  if [ "$got" = "$3" ]; then echo "PASS $1"; else echo "FAIL $1: $2 is $got, expected $3"; fail=1; fi
}
json() { python3 -c "import json,sys; d=json.load(open('$tmp/out')); print($1)"; }
rpc_err() {
  local got want
  if [ $# -ge 3 ]; then
    got=$(jq -c '[has("result"), .error.code, .error.data.path]' "$tmp/out" 2>&1)
    want=$(jq -nc --argjson c "$2" --arg p "$3" '[false, $c, $p]')
  else
    got=$(jq -c '[has("result"), .error.code]' "$tmp/out" 2>&1)
    want=$(jq -nc --argjson c "$2" '[false, $c]')
  fi
  if [ "$got" = "$want" ]; then echo "PASS $1"
  else echo "FAIL $1: [has result, error.code${3+, error.data.path}] is $got, expected $want"; head -c 400 "$tmp/out"; echo; fail=1; fi
}
rpc_ok() {
  local got; got=$(jq -c '[has("result"), has("error")]' "$tmp/out" 2>&1)
  if [ "$got" = '[true,false]' ]; then echo "PASS $1"
  else echo "FAIL $1: not a result: $(head -c 400 "$tmp/out")"; fail=1; fi
}
cli_err() {
  local last=${err##*$'\n'}
  if [[ $last =~ \(code\ $2(,\ at\ [^\)]*)?\)$ ]]; then echo "PASS $1"
  else echo "FAIL $1: stderr does not end with (code $2): $last"; fail=1; fi
}
start_xgrd() {
  "$1" --listen 127.0.0.1:0 --auth none --store memory: --port-file "$tmp/port" --workers 2 --log-level warn \
    >"$tmp/xgrd.log" 2>&1 &
  XPID=$!
  trap 'kill $XPID 2>/dev/null; wait $XPID 2>/dev/null; rm -rf "$tmp"' EXIT
  for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
  if [ ! -s "$tmp/port" ]; then echo "FAIL xgrd wrote no port file:"; tail -5 "$tmp/xgrd.log"; exit 1; fi
  export XGR_URL="http://127.0.0.1:$(cat "$tmp/port")"
}
