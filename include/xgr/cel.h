/* xgr/cel.h — the expression engine: a CEL subset with the XDaLa layer on top (placeholders,
 * template-vs-expression classification, helper functions, deterministic hard caps).
 *
 * Compile once, evaluate many times:
 *
 *   xgr_cel_options o = xgr_cel_options_default(XGR_CEL_MODE_RULE);
 *   xgr_cel_program *p; xgr_error e;
 *   if (xgr_cel_compile("[Amount] > 10", (size_t)-1, &o, &p, &e)) ... e.message
 *   xgr_cel_vars vars = xgr_cel_vars_map(payload_map, NULL);   // cheap: no copy
 *   xgr_value r;
 *   int st = xgr_cel_eval(p, &vars, &r, &e);                    // XGR_CEL_OK, ...
 *   xgr_value_release(r);
 *   xgr_cel_program_free(p);
 *
 * A compiled program is immutable: any number of threads may evaluate it at the same time.
 * Evaluation keeps its state on the stack; results that are scalars (bool, numbers, null) never
 * allocate. Errors carry the byte offset of the failing sub-expression in their message.
 *
 * Modes (xgr_cel_mode):
 *   PLAIN    pure CEL (conformance): no placeholders, no XDaLa caps unless set in the options,
 *            unbound variables and unknown functions are ordinary CEL run-time errors (so
 *            `x || true` is true), dotted variable names ("a.b.c") resolve as CEL qualified names.
 *   RULE     guide §5.1: placeholders rewritten, caps enforced, unknown functions are compile
 *            errors; a missing variable makes the rule false (XGR_CEL_MISSING); the result must
 *            be bool, anything else is a hard error.
 *   VALUE    guide §5.2/§5.3 EvalOrRender: the source is classified (SEMANTICS §8) as a template
 *            (rendered as text, CEL not run), a digits-only literal of >= 16 digits (returned as a
 *            string), or an expression (CEL); a missing variable gives XGR_CEL_SOFT_INVALID.
 *   EXTRACT  guide §5.4: always an expression (no template classification), `resp` is usually
 *            bound through the vars; a missing placeholder variable gives XGR_CEL_SOFT_INVALID;
 *            a missing `resp` field is a CEL error (XGR_CEL_ERROR, so the caller applies the
 *            alias default).
 *
 * "Missing variable" means: a free identifier of the expression (a placeholder or a bare name
 * that is not a macro variable, type name or `resp` field) that no vars layer binds. All free
 * identifiers are resolved once before evaluation starts, so a missing one is reported whether or
 * not the branch that uses it would run (the key is "required by the expression").
 */
#ifndef XGR_CEL_H
#define XGR_CEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xgr/error.h"
#include "xgr/value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* XDaLa_Limits.md §5 and the guide §8. */
#define XGR_CEL_MAX_EXPR_LEN 1024   /* MaxExprLen, bytes of raw source */
#define XGR_CEL_MAX_AST_NODES 4096  /* MaxAstNodes */
#define XGR_CEL_MAX_LIST_CAP 64     /* MaxListCap, deep, over input values */
#define XGR_CEL_BIGLIT_DIGITS 16    /* digits-only literals this long are returned as strings */

typedef enum xgr_cel_mode {
  XGR_CEL_MODE_PLAIN = 0,
  XGR_CEL_MODE_RULE = 1,
  XGR_CEL_MODE_VALUE = 2,
  XGR_CEL_MODE_EXTRACT = 3,
} xgr_cel_mode;

typedef struct xgr_cel_options {
  xgr_cel_mode mode;
  size_t max_expr_len;    /* 0 = no cap; default XGR_CEL_MAX_EXPR_LEN (PLAIN: 0) */
  size_t max_ast_nodes;   /* 0 = no cap; default XGR_CEL_MAX_AST_NODES (PLAIN: 0) */
  size_t max_list_cap;    /* 0 = no cap; default XGR_CEL_MAX_LIST_CAP (PLAIN: 0): applied to
                             every bound variable's value, deep, before evaluation */
  uint64_t max_cost;      /* deterministic evaluation budget: each comprehension iteration
                             costs 1 + the nodes of its body, concatenations the elements (or
                             bytes/16) they produce, quorum/consensus one per distance;
                             0 = default 10,000,000 */
  size_t max_depth;       /* parser nesting limit; 0 = default 250 */
} xgr_cel_options;

/* Defaults for a mode (the XDaLa caps for RULE/VALUE/EXTRACT, none for PLAIN). */
xgr_cel_options xgr_cel_options_default(xgr_cel_mode mode);

/* ---- compiling -------------------------------------------------------------------------- */
typedef struct xgr_cel_program xgr_cel_program;

/* What a VALUE-mode source was classified as (other modes: always EXPRESSION). */
typedef enum xgr_cel_kind {
  XGR_CEL_KIND_EXPRESSION = 0,  /* CEL is run */
  XGR_CEL_KIND_TEMPLATE = 1,    /* placeholders rendered as text; the result is a string */
  XGR_CEL_KIND_BIGLITERAL = 2,  /* digits-only literal of >= 16 digits, returned as a string */
} xgr_cel_kind;

/* Compile len bytes of src (len == (size_t)-1: strlen) under opts (NULL: defaults of VALUE mode).
 * On success *out is a new program the caller frees with xgr_cel_program_free. Errors (nothing
 * allocated, *out untouched):
 *   XGR_EPARSE  syntax error: "at <offset>: <what>, found <token>"; malformed placeholder
 *   XGR_ELIMIT  a cap: "expression is 2000 bytes, MaxExprLen is 1024",
 *               "expression has 5000 AST nodes, MaxAstNodes is 4096"
 *               "expression tree is deeper than 2000 levels"; nesting deeper than
 *               opts->max_depth is XGR_EPARSE
 *   XGR_EEVAL   (RULE/VALUE/EXTRACT) unknown function, a method used as a function (or the
 *               reverse), wrong number of arguments, invalid constant regular expression
 *               (PLAIN: these are run-time errors, as CEL's conformance tests expect)
 * The program keeps no pointer to src. */
int xgr_cel_compile(const char *src, size_t len, const xgr_cel_options *opts,
                    xgr_cel_program **out, xgr_error *e);
void xgr_cel_program_free(xgr_cel_program *p);
/* Pin the program's constants (xgr_value_pin) for programs evaluated by many threads at once.
 * Values an evaluation returns may then be the constants themselves, holding no reference of
 * their own: they must not outlive p. xgr_cel_program_free unpins. */
void xgr_cel_program_pin(xgr_cel_program *p);

xgr_cel_kind xgr_cel_program_kind(const xgr_cel_program *p);
/* The free variables the program reads (placeholders and bare names, after rewriting), in first-
 * use order: i < xgr_cel_program_nvars(p). Borrowed, NUL-terminated, valid while p lives. */
size_t xgr_cel_program_nvars(const xgr_cel_program *p);
const char *xgr_cel_program_var(const xgr_cel_program *p, size_t i);
/* The source after placeholder rewriting (what CEL compiled), borrowed. */
const char *xgr_cel_program_source(const xgr_cel_program *p);

/* ---- variables ------------------------------------------------------------------------- */
/* A chain of layers consulted in order (first hit wins): put context variables (`__sessionId`,
 * `__pid`, ...) first so they shadow payload keys, then the payload map, then e.g. `resp`.
 * Layers are plain structs the caller owns (usually on its stack); values found through them are
 * borrowed by the evaluation and must stay alive until xgr_cel_eval returns. Binding a map costs
 * nothing: lookups go to the map's hash index with names pre-hashed at compile time. */
typedef struct xgr_cel_vars xgr_cel_vars;
/* Callback layer: on a hit fill *out with a *borrowed* value and return true. */
typedef bool (*xgr_cel_lookup_fn)(void *ctx, const char *name, size_t len, xgr_value *out);
struct xgr_cel_vars {
  const xgr_cel_vars *next;   /* the next layer or NULL */
  enum { XGR_CEL_VARS_MAP, XGR_CEL_VARS_ONE, XGR_CEL_VARS_FN } type;
  xgr_value map;              /* MAP: a map value keyed by variable names (borrowed) */
  const char *name;           /* ONE: the variable's name (NUL-terminated) ... */
  xgr_value value;            /* ... and its value (borrowed) */
  xgr_cel_lookup_fn fn;       /* FN */
  void *ctx;                  /* FN */
};
static inline xgr_cel_vars xgr_cel_vars_map(xgr_value map, const xgr_cel_vars *next) {
  xgr_cel_vars v = {0}; v.type = XGR_CEL_VARS_MAP; v.map = map; v.next = next; return v;
}
static inline xgr_cel_vars xgr_cel_vars_one(const char *name, xgr_value value, const xgr_cel_vars *next) {
  xgr_cel_vars v = {0}; v.type = XGR_CEL_VARS_ONE; v.name = name; v.value = value; v.next = next; return v;
}
static inline xgr_cel_vars xgr_cel_vars_fn(xgr_cel_lookup_fn fn, void *ctx, const xgr_cel_vars *next) {
  xgr_cel_vars v = {0}; v.type = XGR_CEL_VARS_FN; v.fn = fn; v.ctx = ctx; v.next = next; return v;
}

/* ---- evaluating ------------------------------------------------------------------------ */
typedef enum xgr_cel_status {
  XGR_CEL_OK = 0,            /* *result holds the value */
  XGR_CEL_SOFT_INVALID = 1,  /* VALUE/EXTRACT: a needed variable is missing; *result is null;
                                e->code XGR_ENOTFOUND, message names the key */
  XGR_CEL_MISSING = 2,       /* RULE: a needed variable is missing; *result is false (treat the
                                rule as false); e->code XGR_ENOTFOUND names the key */
  XGR_CEL_ERROR = -1,        /* hard error: *result is null; e->code XGR_EEVAL (CEL error: no such
                                overload, division by zero, overflow, no such key, ...), XGR_ELIMIT
                                (a bound list longer than MaxListCap, evaluation budget), with the
                                offset of the failing sub-expression */
} xgr_cel_status;

/* Evaluate p against vars (NULL: nothing bound). *result is always set; the caller releases it.
 * e may be NULL. Thread-safe for a shared p. */
int xgr_cel_eval(const xgr_cel_program *p, const xgr_cel_vars *vars, xgr_value *result,
                 xgr_error *e);

/* Stable name of a status: "ok", "soft_invalid", "missing", "error". */
const char *xgr_cel_status_name(int status);

/* ---- the XDaLa layer as separate steps (what compile does in VALUE mode) ------------------ */
/* Classify a source string (SEMANTICS §8): EXPRESSION, TEMPLATE or BIGLITERAL. */
xgr_cel_kind xgr_cel_classify(const char *src, size_t len);
/* Rewrite placeholders `[Ident]` to `Ident` and single-quoted strings to double-quoted ones
 * (guide §3), leaving `[0]`, `["k"]`, `[x + 1]` alone. Writes a malloc'd NUL-terminated string
 * to *out (caller frees). XGR_EPARSE on an unterminated string. */
int xgr_cel_rewrite(const char *src, size_t len, char **out, xgr_error *e);
/* Render a template: each `[Ident]` replaced by the text form of the variable (xgr_value_render).
 * Returns XGR_CEL_OK with a malloc'd string in *out (caller frees), or XGR_CEL_SOFT_INVALID when
 * a placeholder's variable is missing (e names it). */
int xgr_cel_render_template(const char *src, size_t len, const xgr_cel_vars *vars, char **out,
                            xgr_error *e);

#ifdef __cplusplus
}
#endif
#endif
