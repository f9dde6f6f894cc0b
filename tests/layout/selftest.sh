#!/usr/bin/env bash
# tests/layout/selftest.sh — scripts/check_layout.sh finds what it must and nothing else: a small
# tree with one breach of each rule (and prose, literals and exemptions that look like breaches but
# are not) must give exactly the expected lines and exit 1; the same tree with the breaches taken
# out must give nothing and exit 0.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
check=$here/../../scripts/check_layout.sh
t=$(mktemp -d "${TMPDIR:-/tmp}/layout-selftest.XXXXXX") || exit 1
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/include/xgr" "$t/src/engine" "$t/src/cli" "$t/src/util" "$t/src/rpc"

cat >"$t/include/xgr/foo.h" <<'H'
/* prose may say xgr__hidden, getenv( and malloc( */
#ifndef XGR_FOO_H
#define XGR_FOO_H
#define FOO_MAX 3
#ifdef __cplusplus
extern "C" {
#endif
typedef struct xgr_foo xgr_foo;
typedef struct bar { int a; void (*cb)(int x); } bar_t;
struct baz;
enum xgr_kind { XGR_A, B_BAD = 2 };
int xgr_foo_run(xgr_foo *f, bool (*pending)(void *ctx, const char *id), void *ctx);
int foo_run(int x),
    xgr_ok(void);
void xgr__private(void);
extern int counter;
typedef int (*xgr_cb)(int);
typedef int (*badcb)(int);
static inline int helper(int x) { return x; }
#ifdef __cplusplus
}
#endif
#endif
H
cat >"$t/src/engine/eng.h" <<'H'
int xgr__x;
H
cat >"$t/src/engine/engine_impl.h" <<'H'
int xgr__y;
H
cat >"$t/src/engine/a.c" <<'H'
#include "rpc/rpcd.h"
#include "store/sqlite_col.h"
#include "value/value_impl.h"
#include "util/alloc.h"
#include "engine/engine_impl.h"
#include <stdlib.h>
static int ok(void) { return 1; }
int bad_fn(int a,
           int b)
{
  char *p = malloc(3); /* malloc( in a comment */
  const char *s = "calloc(";
  p = xgr__xmalloc(3);
  if (getenv("X")) return XGR_RPC_BAD;
  struct { int a; } v = {1};
  return strdup(s) != NULL;
}
int global_counter = 0;
static int sc;
const char *xgr_name = "x";
void xgr__engine_go(void) {}
H
cat >"$t/src/rpc/r.c" <<'H'
#include "rpc/rpc_impl.h"
int xgr__rpc_code(void) { return XGR_RPC_BAD; }
H
cat >"$t/src/rpc/list.c" <<'H'
#include "rpc/rpc_impl.h"
/* prose may say xgr_store_procs( */
static int rows(xgr_store_session *s, xgr_node *n) { return xgr_store_session_get (n, s, "xgr_store_failed(") + xgr_node_procs(n); }
H
cat >"$t/src/cli/main.c" <<'H'
#include "util/suggest.h"
#include "cli/opts.h"
#include "xgr/foo.h"
int main(void) { char *p = strdup("x"); return getenv("HOME") != 0 && XGR_RPC_BAD && p; }
H
for i in $(seq 1 1501); do echo "int xgr_v$i;"; done >"$t/src/util/big.c"

expected='include/xgr/foo.h:4: public-name: macro FOO_MAX in a public header does not start with XGR_
include/xgr/foo.h:9: public-name: tag bar in a public header does not start with xgr_
include/xgr/foo.h:9: public-name: type bar_t in a public header does not start with xgr_
include/xgr/foo.h:10: public-name: tag baz in a public header does not start with xgr_
include/xgr/foo.h:11: public-name: enum constant B_BAD in a public header does not start with XGR_
include/xgr/foo.h:13: public-name: function foo_run in a public header does not start with xgr_
include/xgr/foo.h:15: public-name: a public header names xgr__private; xgr__ names are library-private, public ones are xgr_...
include/xgr/foo.h:16: public-name: variable counter in a public header does not start with xgr_
include/xgr/foo.h:18: public-name: type badcb in a public header does not start with xgr_
include/xgr/foo.h:19: public-name: function helper in a public header does not start with xgr_
src/cli/main.c:1: layering: src/cli includes "util/suggest.h"; the front ends include only public headers (xgr/...) and their own (cli/...)
src/cli/main.c:4: alloc: raw strdup(); the front ends allocate through xgr/alloc.h (xgr_alloc_bytes, xgr_alloc_zeroed, xgr_alloc_resize, xgr_alloc_strdup)
src/engine/a.c:1: layering: src/engine includes the rpc layer header "rpc/rpcd.h"
src/engine/a.c:2: private: src/engine includes "store/sqlite_col.h", a private header of src/store; what crosses modules is a public function in include/xgr
src/engine/a.c:8: symbol: function bad_fn is not static and not named xgr_... (public) or xgr__... (library-private)
src/engine/a.c:11: alloc: raw malloc(); allocate through src/util/alloc.h (xgr__xmalloc, xgr__xcalloc, xgr__xrealloc, xgr__xstrdup, ...)
src/engine/a.c:14: getenv: the library reads the environment; only the front ends (src/cli) call getenv and pass the value in
src/engine/a.c:14: rpc-code: src/engine uses the JSON-RPC code XGR_RPC_BAD; below src/rpc only xgr_errcode is returned
src/engine/a.c:16: alloc: raw strdup(); allocate through src/util/alloc.h (xgr__xmalloc, xgr__xcalloc, xgr__xrealloc, xgr__xstrdup, ...)
src/engine/a.c:18: symbol: variable global_counter is not static and not named xgr_... (public) or xgr__... (library-private)
src/engine/eng.h:1: impl-header: a private header of src/engine is named <something>_impl.h, not eng.h
src/rpc/list.c:3: rpc-store: src/rpc calls xgr_store_session_get(); the front end reads through the queries of the node and acts through its commands (xgr/node.h)
src/util/big.c:1501: size: 1501 lines; a C file under src/ has at most 1,500 (split it by concern)
check_layout: 23 violation(s)'
got=$("$check" "$t"); rc=$?
if [ "$rc" -ne 1 ] || [ "$got" != "$expected" ]; then
  echo "FAIL: the tree with breaches: exit $rc (want 1); output differs from the expected lines:"
  diff <(echo "$expected") <(echo "$got")
  exit 1
fi

# the breaches taken out: nothing to say
rm "$t/include/xgr/foo.h" "$t/src/engine/eng.h" "$t/src/cli/main.c" "$t/src/util/big.c"
cat >"$t/src/engine/a.c" <<'H'
#include "value/value_impl.h"
#include "util/alloc.h"
#include "engine/engine_impl.h"
static int ok(void) { char *p = xgr__xmalloc(3); return p != 0; /* getenv( malloc( */ }
static int st(xgr_store *s) { return xgr_store_failed(s, 0); }   /* below src/rpc the store is called */
void xgr__engine_go(void) {}
H
cat >"$t/src/rpc/list.c" <<'H'
#include "rpc/rpc_impl.h"
static int rows(const xgr_store_session *s, xgr_node *n) { return xgr_node_procs(n, s->owner) + sizeof(xgr_store_proc); }
H
got=$("$check" "$t"); rc=$?
if [ "$rc" -ne 0 ] || [ -n "$got" ]; then
  echo "FAIL: the clean tree: exit $rc (want 0), output:"; echo "$got"; exit 1
fi
echo "ok: each rule found once, the clean tree passes"
