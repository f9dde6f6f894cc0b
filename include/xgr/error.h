/* xgr/error.h — error values shared by every layer.
 *
 * Every fallible function of xgr returns an int: 0 on success, a negative xgr_errcode on failure,
 * and fills an xgr_error the caller owns (usually on its stack). An error carries a stable code,
 * the JSON path of the offending field (for example "structure.A1.onValid.join.mode") and a
 * message a person can act on: what was seen and what was expected.
 *
 * Collections of findings (errors and warnings of `xgr check`) are kept in an xgr_diags list.
 */
#ifndef XGR_ERROR_H
#define XGR_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Stable error codes. Their names (xgr_errcode_name) appear in JSON output and never change. */
typedef enum xgr_errcode {
  XGR_OK = 0,
  XGR_EINVAL = -1,            /* "invalid_argument": bad argument to an API call or CLI flag */
  XGR_ENOMEM = -2,            /* "out_of_memory" */
  XGR_EIO = -3,               /* "io_error": a file could not be read or written */
  XGR_EPARSE = -4,            /* "parse_error": malformed JSON or expression syntax */
  XGR_ESCHEMA = -5,           /* "schema_error": missing field, wrong type, unknown value */
  XGR_ELIMIT = -6,            /* "limit_exceeded": a cap of XDaLa_Limits.md */
  XGR_EREF = -7,              /* "unknown_step": a reference to a step that does not exist */
  XGR_ELEGACY = -8,           /* "legacy_format": the v0 model of seed 000 (continue, labels) */
  XGR_EKRANGE = -9,           /* "k_out_of_range": join threshold outside 1..n */
  XGR_ENORULE = -10,          /* "missing_rule": a step without `rule` */
  XGR_EIDENT = -11,           /* "invalid_identifier": not an ASCII identifier */
  XGR_EJOIN = -12,            /* "join_unfulfillable": a join that can never reach k */
  XGR_EDUP = -13,             /* "duplicate": the same entry twice where it must be unique */
  XGR_ERULEREF = -14,         /* "unknown_rule": a rule reference that does not resolve */
  XGR_EEVAL = -15,            /* "eval_error": an expression failed at run time */
  XGR_ENOTFOUND = -16,        /* "not_found" */
  XGR_ESTATE = -17,           /* "invalid_state": operation not allowed in the current state */
  XGR_EUNSUPPORTED = -18,     /* "unsupported" */
  XGR_ETIMEOUT = -19,         /* "timeout" */
  XGR_EHTTP = -20,            /* "http_error" */
  XGR_EPERM = -21,            /* "not_permitted" */
  XGR_ECONFLICT = -22,        /* "conflict" */
  XGR_EMISMATCH = -23,        /* "registry_mismatch" */
  XGR_ELEASE = -24,           /* "lease_lost": this node no longer holds the session's lease (docs/CLUSTER.md) */
  XGR_ERRCODE_MIN_ = -25
} xgr_errcode;

/* Stable snake_case name of a code ("limit_exceeded"); "unknown" for values outside the enum. */
const char *xgr_errcode_name(int code);

#define XGR_PATH_MAX 256
#define XGR_MSG_MAX 512

typedef struct xgr_error {
  int code;                   /* an xgr_errcode; XGR_OK when no error */
  char path[XGR_PATH_MAX];    /* JSON path of the field, "" for the document as a whole */
  char message[XGR_MSG_MAX];  /* one sentence: what is wrong, the value seen, what is expected */
} xgr_error;

/* Clear *e to "no error". */
void xgr_error_clear(xgr_error *e);

/* Fill *e (if e is not NULL) and return code, so callers can write `return xgr_error_set(...)`.
 * path may be NULL. Long paths and messages are truncated, never overflow. */
int xgr_error_set(xgr_error *e, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int xgr_error_vset(xgr_error *e, int code, const char *path, const char *fmt, va_list ap);

/* ---- JSON paths ----------------------------------------------------------------------------
 * A path builder over a fixed buffer: push a key or an index, pop back to a saved length.
 *   xgr_path p; xgr_path_init(&p); size_t m = xgr_path_key(&p, "structure"); ... xgr_path_pop(&p, m);
 * Keys that are not identifiers are written as ["key"]. Overlong paths end in "...". */
typedef struct xgr_path {
  char buf[XGR_PATH_MAX];
  size_t len;
} xgr_path;

void xgr_path_init(xgr_path *p);
size_t xgr_path_key(xgr_path *p, const char *key);   /* returns the length before the push */
size_t xgr_path_index(xgr_path *p, size_t index);    /* returns the length before the push */
void xgr_path_pop(xgr_path *p, size_t len);
static inline const char *xgr_path_str(const xgr_path *p) { return p->buf; }

/* ---- diagnostics -------------------------------------------------------------------------- */
typedef enum xgr_severity { XGR_SEV_ERROR = 0, XGR_SEV_WARNING = 1, XGR_SEV_INFO = 2 } xgr_severity;

typedef struct xgr_diag {
  xgr_severity severity;
  const char *code;           /* stable name: an xgr_errcode_name or a warning name */
  char *path;                 /* owned */
  char *message;              /* owned */
} xgr_diag;

typedef struct xgr_diags {
  xgr_diag *items;            /* owned array */
  size_t n, cap;
} xgr_diags;

void xgr_diags_init(xgr_diags *d);
void xgr_diags_free(xgr_diags *d);
/* Append a finding; code is copied by pointer and must be a static string. Returns 0 or XGR_ENOMEM. */
int xgr_diags_add(xgr_diags *d, xgr_severity sev, const char *code, const char *path,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Append an xgr_error as an error finding. */
int xgr_diags_add_error(xgr_diags *d, const xgr_error *e);
size_t xgr_diags_count(const xgr_diags *d, xgr_severity sev);
/* Make the paths of findings from..n-1 relative to an enclosing document: "structure.A" under
 * prefix "orchestration" becomes "orchestration.structure.A" (an index path "[2]" gets no dot). */
void xgr_diags_prefix(xgr_diags *d, size_t from, const char *prefix);

#ifdef __cplusplus
}
#endif
#endif
