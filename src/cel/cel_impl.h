/* cel_impl.h — data structures shared by the parts of the expression engine: the compiled
 * program (a flat, immutable node array), the evaluation context, the function table and the
 * helpers the evaluator and the function library share. Not a public header.
 *
 * A program is a tree stored in one array of fixed-size nodes; children are referenced by index
 * (node.a/.b/.c), and calls, list and map literals keep their argument indices in `kids`.
 * Identifiers are resolved at compile time: free variables get a slot number (their names are
 * pre-hashed so a payload map lookup is one probe), comprehension variables get slots after
 * them, type names become constants. Evaluation fills the slot array once (from the caller's
 * vars), then walks the tree recursively; every eval returns an owned xgr_value, errors are
 * values of the internal kind XGR_VERR whose message lives in the context.
 */
#ifndef XGR_CEL_IMPL_H
#define XGR_CEL_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "value/value_impl.h"
#include "xgr/cel.h"

/* Internal value kinds, never visible outside src/cel. */
#define XGR_VERR 14      /* an evaluation error (as.i: 1 = error; message in the context) */
#define XGR_VUNBOUND 15  /* a slot whose variable is not bound */

typedef enum node_op {
  N_CONST,    /* a: constant index */
  N_VAR,      /* a: slot (free variable) */
  N_LOCAL,    /* a: slot (comprehension variable) */
  N_QUAL,     /* PLAIN only: qualified name; nargs fields, kids: field consts then nargs+1 slots */
  N_SELECT,   /* a: operand, b: constant index of the field name (a string) */
  N_HAS,      /* has(a.f): a: operand, b: field constant */
  N_INDEX,    /* a[b] */
  N_LIST,     /* kids[args .. args+nargs) */
  N_MAP,      /* kids: key, value, key, value, ... (nargs pairs) */
  N_NOT,
  N_NEG,
  N_ADD, N_SUB, N_MUL, N_DIV, N_MOD,
  N_EQ, N_NE, N_LT, N_LE, N_GT, N_GE, N_IN,
  N_AND, N_OR,
  N_COND,     /* a ? b : c */
  N_CALL,     /* fn: function id, kids: arguments (receiver first), c: regex index or -1 */
  N_COMP,     /* fn: macro kind, a: range, b: predicate/transform, c: transform or -1, slot */
  N_ERROR,    /* PLAIN only: a deferred error (unknown function); b: message constant */
  N_IDENT,    /* parser only: identifier, b: name constant (resolved away) */
} node_op;

typedef enum macro_kind { M_ALL, M_EXISTS, M_EXISTS_ONE, M_MAP, M_MAP3, M_FILTER } macro_kind;

typedef struct cel_node {
  uint8_t op;      /* node_op */
  uint8_t fn;      /* N_CALL: function id; N_COMP: macro kind */
  uint16_t nargs;
  uint32_t pos;    /* byte offset in the (rewritten) source */
  int32_t a, b, c;
  uint32_t args;   /* first index in kids */
  uint32_t slot;   /* N_COMP: the iteration variable's slot */
} cel_node;

typedef struct cel_var {
  char *name;
  size_t len;
  uint64_t hash;
} cel_var;

struct xgr_cel_program {
  xgr_cel_mode mode;
  xgr_cel_kind kind;
  cel_node *nodes;
  uint32_t nnodes, root;
  int32_t *kids;
  uint32_t nkids;
  xgr_value *consts;       /* constants (owned); string constants keep their hash in hashes[] */
  uint64_t *hashes;
  uint32_t nconsts;
  bool pinned;             /* consts are pinned (xgr_cel_program_pin) */
  cel_var *vars;           /* free variables: slots 0 .. nvars-1 */
  uint32_t nvars;
  uint32_t nslots;         /* nvars + comprehension slots */
  uint32_t nroots;         /* how many vars are roots (checked for "missing"); qualified-name
                              candidates come after them */
  pcre2_code **regex;      /* precompiled constant patterns of matches() */
  uint32_t nregex;
  char *source;            /* rewritten source (expressions) or template text */
  size_t source_len;
  size_t max_list_cap;
  uint64_t max_cost;
};

/* Evaluation context: lives on the evaluator's stack for one xgr_cel_eval call. Errors are
 * values (kind XGR_VERR, as.u = sequence number); their messages sit in a small ring so that an
 * error absorbed by `||`/`&&` does not overwrite the message of the one that is returned. */
#define CEL_ERR_RING 4
typedef struct cel_errrec {
  int code;               /* XGR_EEVAL or XGR_ELIMIT */
  uint32_t pos;
  char msg[240];
} cel_errrec;

typedef struct cel_ctx {
  const xgr_cel_program *p;
  xgr_value *slots;
  uint64_t cost, max_cost;
  uint32_t nerr;
  cel_errrec err[CEL_ERR_RING];
  pcre2_match_data *md;   /* made on first use, freed at the end of the call */
} cel_ctx;

/* Make an error value: records pos and the message in the context. */
xgr_value xgr__cel_err(cel_ctx *c, uint32_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
xgr_value xgr__cel_err_code(cel_ctx *c, int code, uint32_t pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline bool cel_is_err(xgr_value v) { return v.kind == XGR_VERR; }
/* A type name for messages ("int", "string", ...). */
const char *xgr__cel_kind_name(xgr_value v);
/* Charge n units of the evaluation budget; false (and an error in *out) when exhausted. */
bool xgr__cel_charge(cel_ctx *c, uint32_t pos, uint64_t n, xgr_value *out);

/* ---- functions --------------------------------------------------------------------------- */
typedef enum cel_fn {
  F_SIZE, F_CONTAINS, F_STARTSWITH, F_ENDSWITH, F_MATCHES, F_LOWERASCII, F_UPPERASCII,
  F_INT, F_UINT, F_DOUBLE, F_STRING, F_BYTES, F_BOOL, F_DYN, F_TYPE, F_INT64, F_UINT64,
  F_ABS, F_POW, F_RELDIFF, F_SAFEDIV, F_CLAMP, F_DIST, F_WITHIN, F_MAX, F_MIN, F_SUM, F_AVG,
  F_MEDIAN, F_STDEV, F_CV, F_MAD, F_QUORUM, F_CONSENSUS, F_JOIN, F_UNIQUE, F_U256, F_UINT256,
  F_COUNT_
} cel_fn;

typedef struct cel_fndef {
  const char *name;
  uint8_t min, max;    /* argument count, receiver included */
  uint8_t style;       /* 1 global, 2 receiver, 3 both */
} cel_fndef;

extern const cel_fndef xgr__cel_functions[F_COUNT_];
/* Look up a function by name; -1 if unknown. */
int xgr__cel_fn_lookup(const char *name, size_t len);
/* Call function fn on n evaluated arguments (borrowed). Returns an owned value or an error. */
xgr_value xgr__cel_call(cel_ctx *c, const cel_node *n, int fn, const xgr_value *args, int nargs);

/* Operators shared with the function library. */
xgr_value xgr__cel_op_add(cel_ctx *c, uint32_t pos, xgr_value a, xgr_value b);
xgr_value xgr__cel_op_sub(cel_ctx *c, uint32_t pos, xgr_value a, xgr_value b);
xgr_value xgr__cel_op_div(cel_ctx *c, uint32_t pos, xgr_value a, xgr_value b);

/* Number -> double for the XDaLa helpers (int, uint, double, bigint); false for non-numbers. */
bool xgr__cel_num_to_double(xgr_value v, double *d);

/* ---- compiler --------------------------------------------------------------------------- */
/* Parse and resolve len bytes of CEL source into p (which starts zeroed). Errors as for
 * xgr_cel_compile; p may hold partial data afterwards (xgr__cel_program_clear frees it). */
int xgr__cel_parse_into(xgr_cel_program *p, const char *src, size_t len, const xgr_cel_options *o,
                   xgr_error *e);
void xgr__cel_program_clear(xgr_cel_program *p);

/* ---- XDaLa layer ------------------------------------------------------------------------- */
/* Is the identifier at s[0..n) valid as a placeholder body? */
bool xgr__cel_is_ident(const char *s, size_t n);

#endif
