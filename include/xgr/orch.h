/* xgr/orch.h — XRC-729 orchestrations: parse, validate, hash, reachability, diagrams.
 *
 * An orchestration ("OSTC") is a step graph: `{ "id", "structure": { stepId: { "rule",
 * "onValid"?, "onInvalid"? } } }`, where a branch is `{ "spawns": [...], "join"?: {...} }`
 * (docs/SEMANTICS.md, "Documents"). xgr_orch_parse turns the exact bytes of a document into an
 * immutable model: steps in document order, references resolved to step indices, join modes
 * normalised to k-of-n, `when` normalised, and reachability precomputed as bitsets (at most 128
 * steps, so one 128-bit set per step). Every cap of XDaLa_Limits.md §4 is enforced at parse time.
 *
 * A parsed orchestration is immutable and may be shared between threads without locking.
 * It is owned by the caller of xgr_orch_parse and released with xgr_orch_free.
 */
#ifndef XGR_ORCH_H
#define XGR_ORCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "xgr/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Caps of XDaLa_Limits.md §4. */
#define XGR_MAX_OSTC_BYTES 262144
#define XGR_MAX_STEPS 128
#define XGR_MAX_STEP_ID_LEN 64
#define XGR_MAX_SPAWNS_PER_BRANCH 32
#define XGR_MAX_JOIN_INPUTS 32

typedef enum xgr_when { XGR_WHEN_ANY = 0, XGR_WHEN_VALID = 1, XGR_WHEN_INVALID = 2 } xgr_when;
typedef enum xgr_policy { XGR_POLICY_DRAIN = 0, XGR_POLICY_KILL = 1 } xgr_policy;
/* Branch selector: index into xgr_step.branch. */
typedef enum xgr_branch_kind { XGR_ON_VALID = 0, XGR_ON_INVALID = 1 } xgr_branch_kind;

/* A set of step indices (steps are at most XGR_MAX_STEPS = 128). */
typedef struct xgr_stepset { uint64_t w[2]; } xgr_stepset;
static inline bool xgr_stepset_has(const xgr_stepset *s, unsigned i) { return (s->w[i >> 6] >> (i & 63)) & 1u; }
static inline void xgr_stepset_add(xgr_stepset *s, unsigned i) { s->w[i >> 6] |= (uint64_t)1 << (i & 63); }

typedef struct xgr_join_from {
  uint16_t node;              /* step index of the expected producer step */
  xgr_when when;              /* which outcome qualifies */
} xgr_join_from;

typedef struct xgr_join {
  uint16_t target;            /* step index of `joinid` */
  uint16_t k;                 /* threshold, 1 <= k <= n */
  uint16_t n;                 /* number of `from` entries */
  xgr_policy policy;          /* `waitonjoin`; drain when missing */
  bool policy_defaulted;      /* true when `waitonjoin` was missing */
  xgr_join_from *from;        /* n entries, in document order (the merge order) */
} xgr_join;

typedef struct xgr_branch {
  bool present;               /* the branch key exists in the document */
  uint16_t nspawns;
  uint16_t *spawns;           /* step indices, in array order */
  xgr_join *join;             /* NULL when the branch declares no join */
} xgr_branch;

typedef struct xgr_step {
  const char *id;             /* step id (owned by the orchestration) */
  const char *rule;           /* `rule` as written: 0x-address, ${addr:ALIAS} or bare alias */
  xgr_branch branch[2];       /* [XGR_ON_VALID], [XGR_ON_INVALID] */
} xgr_step;

typedef struct xgr_orch {
  char *id;                   /* top-level `id` ("" when absent) */
  size_t nsteps;
  xgr_step *steps;            /* document order */
  char hash[67];              /* "0x" + 64 hex: keccak-256 of the exact bytes parsed */
  /* reach_all[i]: steps reachable from step i along one or more edges of any kind (spawns and
   * join targets). reach_scope[i]: the same along scope-preserving edges only (spawns of
   * branches without a join, and the `joinid` of branches with one; SEMANTICS §3.3). */
  xgr_stepset *reach_all;
  xgr_stepset *reach_scope;
  void *impl_;                /* private: id lookup table and string storage */
} xgr_orch;

/* Parse and validate an orchestration from len bytes of JSON. On success returns 0 and *out
 * (caller frees with xgr_orch_free). On failure returns a negative xgr_errcode, fills *err with
 * the first load error (path, code, message) and, if diags is not NULL, appends every load error
 * found to it. Load errors: malformed JSON, schema, caps, legacy (seed 000) documents, unknown
 * steps, k out of range, missing rule, duplicate `from` nodes. */
int xgr_orch_parse(const char *bytes, size_t len, xgr_orch **out, xgr_error *err, xgr_diags *diags);

/* Read a file (at most XGR_MAX_OSTC_BYTES) and parse it. */
int xgr_orch_load_file(const char *path, xgr_orch **out, xgr_error *err, xgr_diags *diags);

void xgr_orch_free(xgr_orch *o);

/* Index of the step with this id, or -1. O(log n). */
int xgr_orch_find(const xgr_orch *o, const char *id);

/* True when a live process at step `from` can still produce step `to` within its scope:
 * from == to, or `to` is reachable from `from` along scope-preserving edges. */
static inline bool xgr_orch_can_reach_in_scope(const xgr_orch *o, unsigned from, unsigned to) {
  return from == to || xgr_stepset_has(&o->reach_scope[from], to);
}

/* Static analysis beyond load errors (SEMANTICS §1, issue 2): appends to diags
 *   errors:   join_unfulfillable — a join whose `from` nodes cannot deliver k pieces;
 *   warnings: waitonjoin_default, join_target_spawned, from_unreachable, unreachable_step;
 *   info:     start_steps — the steps no other step leads to.
 * Returns the number of errors added. */
size_t xgr_orch_analyze(const xgr_orch *o, xgr_diags *diags);

typedef enum xgr_graph_format { XGR_GRAPH_MERMAID = 0, XGR_GRAPH_DOT = 1 } xgr_graph_format;

/* Write a diagram of o to f: steps as nodes (id and rule), spawn edges marked valid/invalid,
 * each join as a join node annotated "k of n · kill|drain", `from` edges labelled with `when`. */
int xgr_orch_graph(const xgr_orch *o, xgr_graph_format fmt, FILE *f);

const char *xgr_when_name(xgr_when w);      /* "any" | "valid" | "invalid" */
const char *xgr_policy_name(xgr_policy p);  /* "drain" | "kill" */

#ifdef __cplusplus
}
#endif
#endif
