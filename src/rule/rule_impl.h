/* rule_impl.h — private model of a parsed XRC-137 rule document, shared by the parser (parse.c),
 * the step engine (step.c), templates (template.c) and the result code (result.c).
 *
 * Everything a rule needs at run time is prepared at load: expressions compiled, templates split
 * into segments, defaults cast to their XRC types, output keys made into shared string values (so
 * inserting them into a map is a reference-count increment, not a copy). All memory of the model
 * lives in the rule's arena, except values (released by xgr_rule_free) and compiled programs.
 */
#ifndef XGR_RULE_IMPL_H
#define XGR_RULE_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "xgr/arena.h"
#include "xgr/cel.h"
#include "xgr/rule.h"
#include "xgr/value.h"
#include "xgr/xrc_types.h"

/* A template: literal text and `[Ident]` placeholders. */
typedef struct rtseg {
  const char *text;           /* literal text, or the placeholder's name */
  size_t len;
  bool is_var;
  bool in_string;             /* a placeholder inside a JSON string literal of the template text */
} rtseg;

typedef struct rtemplate {
  size_t nseg;
  rtseg *seg;
  bool hidden;                /* reads a `_` key that is not a context variable */
} rtemplate;

/* Flags of a compiled expression or template: which variable layers it needs. */
enum { RX_CTX = 1u, RX_HIDDEN = 2u };

/* A value of the document that is resolved at run time: a literal (non-string JSON), a template
 * (rendered as text) or a compiled CEL program (EvalOrRender's expression / big-literal cases,
 * rule and extract expressions). */
typedef enum { RV_LITERAL = 0, RV_TEMPLATE = 1, RV_PROGRAM = 2 } rv_kind;

typedef struct rvalue {
  rv_kind kind;
  unsigned flags;             /* RX_* */
  xgr_value literal;          /* RV_LITERAL */
  rtemplate tpl;              /* RV_TEMPLATE */
  xgr_cel_program *prog;      /* RV_PROGRAM */
  const char *path;           /* JSON path in the document, for errors */
} rvalue;

typedef struct rinput {
  const char *name;
  size_t len;
  xgr_value key;              /* the name as a string value */
  xgr_xrc_type type;
  bool has_default;
  xgr_value def;              /* cast to type at load */
} rinput;

typedef struct rextract {
  xgr_value key;
  const char *name;
  xgr_xrc_type type;
  rvalue expr;                /* RV_PROGRAM, EXTRACT mode */
  bool has_default;
  xgr_value def;
} rextract;

typedef struct rheader {
  const char *name;
  rtemplate value;
} rheader;

typedef struct rapi {
  const char *name;
  const char *method;
  rtemplate url;
  bool has_body;
  bool json_body;             /* contentType "json": the body renders with TPL_JSON */
  rtemplate body;
  size_t nheaders;
  rheader *headers;
  long timeout_ms;
  size_t nextract;
  rextract *extract;
  const char *path;           /* "apiCalls[i]" */
} rapi;

/* A TypedValue (spec §6.3): `value`/`expr` resolved, then cast to `type`. */
typedef struct rtyped {
  xgr_xrc_type type;
  rvalue v;
  bool has_default;
  xgr_value def;              /* cast at load */
} rtyped;

typedef struct rsave {
  uint32_t index;             /* return slot */
  xgr_value key;
  const char *name;
  xgr_xrc_type type;
  bool has_default;
  xgr_value def;
} rsave;

typedef struct rread {
  rvalue to;
  const char *function;
  const char *rpc;            /* NULL: default backend */
  size_t nargs;
  rtyped *args;
  xgr_xrc_type *arg_types;
  size_t nsave;
  rsave *save;
  const char *path;
} rread;

typedef enum { RR_VALIDATE = 0, RR_ABORT_STEP = 1, RR_CANCEL_SESSION = 2 } rr_type;

typedef struct rrule {
  rr_type type;
  rvalue expr;                /* RV_PROGRAM, RULE mode */
} rrule;

typedef struct rout {
  xgr_value key;
  const char *name;
  rvalue v;
} rout;

typedef struct rwake {
  rvalue runner, session, step;
  size_t npay;
  rout *pay;
  const char *path;
} rwake;

typedef struct rgrant {
  rvalue address;
  uint32_t rights;
  bool has_expire;
  uint32_t expire_days;
} rgrant;

typedef struct rexec {
  rvalue to;
  bool has_gas;
  uint64_t gas_limit;
  const char *function;
  size_t nargs;
  rtyped *args;
  bool has_value;
  rtyped value;
  xgr_value extras;           /* null when absent */
  const char *path;
} rexec;

typedef struct rbranch {
  size_t nout;
  rout *out;
  bool has_wait;
  uint64_t wait_sec;
  bool has_log_expire;
  uint32_t log_expire_days;
  int encrypt_logs;           /* -1 absent */
  size_t nwake;
  rwake *wake;
  size_t ngrants;
  rgrant *grants;
  rexec *exec;                /* NULL when absent */
  const char *path;           /* "onValid" / "onInvalid" */
} rbranch;

struct xgr_rule {
  xgr_arena arena;
  size_t ninputs;
  rinput *inputs;
  size_t napi;
  rapi *api;
  size_t nreads;
  rread *reads;
  size_t nrules;
  rrule *rules;
  rbranch branch[2];          /* [0] onValid, [1] onInvalid */
  size_t nextract_total;      /* all extract aliases + saveAs targets (sizes the extracted map) */
  xgr_value empty_map;        /* shared empty map / list handed out by results (never mutated) */
  xgr_value empty_list;
  /* Every value and program to release in xgr_rule_free. */
  xgr_value *vals;
  size_t nvals, capvals;
  xgr_cel_program **progs;
  size_t nprogs, capprogs;
};

/* ---- template.c ---- */
/* Split src into segments (arena memory). Never fails: text without valid placeholders is one
 * literal segment. */
void xgr__rule_template_parse(xgr_arena *a, const char *src, size_t len, rtemplate *out);
/* Variable lookup used for templates: borrowed value, false when missing. */
typedef bool (*rule_lookup_fn)(void *ctx, const char *name, size_t len, xgr_value *out);
/* How placeholders render: TPL_TEXT their text form as is (headers, payload templates), TPL_URL
 * percent-encoded, TPL_JSON for a JSON body: inside a JSON string literal of the template their
 * text form JSON-escaped, elsewhere (bare) the value as JSON. */
enum { TPL_TEXT = 0, TPL_URL = 1, TPL_JSON = 2 };
/* Render t into a malloc'd string (*out, *outlen) with mode TPL_*. Returns 0, or XGR_ENOTFOUND
 * with *missing pointing at the missing name (not NUL-terminated, *missing_len bytes). */
int xgr__rule_template_render(const rtemplate *t, rule_lookup_fn fn, void *ctx, int mode, char **out,
                         size_t *outlen, const char **missing, size_t *missing_len);

/* ---- result.c ---- */
/* True for the context variable names of SEMANTICS §8. */
bool xgr__rule_is_ctx_var(const char *name, size_t len);

#endif
