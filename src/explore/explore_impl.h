/* explore_impl.h — the explorer's private model, shared by its two halves: explore.c (the state
 * graph: canonical form, actions, the breadth-first search, the entry points) and findings.c (what
 * is read off the finished graph: traces, dead ends, loops, undecided joins, results and timing).
 * Not a public header; the explorer's contract is xgr/explore.h. Every function here works on one
 * exploration `ex`, owned by the entry point that built it, on one thread. */
#ifndef XGR_EXPLORE_IMPL_H
#define XGR_EXPLORE_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "util/buf.h"
#include "xgr/explore.h"
#include "xgr/outcome.h"
#include "xgr/rule.h"
#include "xgr/session.h"

#define OWNER "0x0000000000000000000000000000000000000001"
#define ROOT_PID 1   /* the rootPid of a session the explorer starts itself */
#define NONE32 UINT32_MAX

/* Marks (sorted per state): a join decision (declaration << 40 | outcome << 32 | pieces present)
 * or a leaf's payload hash, told apart by the top two bits. */
#define MARK_JOIN (1ULL << 62)
#define MARK_LEAF (2ULL << 62)


typedef enum { ACT_PROMOTE = 0, ACT_FINISH = 1, ACT_ADVANCE = 2 } act_kind;

typedef struct act {
  uint8_t kind;
  uint8_t outcome;        /* FINISH: 0 valid, 1 invalid, 2 error; 3: what the rule gave */
  uint64_t iter;
  int64_t at;             /* ADVANCE: new clock */
} act;

typedef enum { N_OPEN = 0, N_INNER, N_FINAL, N_STALL, N_CUT } node_kind;

typedef struct node {
  uint64_t h1, h2;
  uint32_t parent;
  uint32_t depth;         /* step executions on the path */
  uint32_t level;         /* actions on the path */
  act a;                  /* the action from the parent */
  int64_t now;
  xgr_session *s;         /* until expanded */
  uint64_t *marks;        /* sorted, unique */
  uint32_t nmarks;
  uint8_t kind;
  uint8_t result;         /* FINAL: xgr_session_result */
  uint32_t live;
  uint64_t open;          /* join declarations (index < 64) with an open instance here */
} node;

typedef struct edge {
  uint32_t from, to;
  bool advance;
  uint8_t obit;           /* a step finished: its outcome (1 valid, 2 invalid, 4 error, 8 other); 0 otherwise */
  uint16_t ostep;         /* ... and its step */
  uint64_t decided;       /* join declarations (index < 64) decided on this edge */
} edge;

typedef struct vcache vcache;   /* payload hashes (explore.c) */

typedef struct ex {
  const xgr_orch *o;
  const xgr_bundle *b;
  xgr_explore_config cfg;
  unsigned start;
  xgr_value payload;
  /* exploring from a given state (migrate-check): a settled session to clone as the root, its
   * clock, and its rootPid for the traces; NULL: a new session started at `start` */
  const xgr_session *init;
  int64_t init_now;
  uint64_t root_pid;
  /* called for every state when it is expanded (NULL: none) */
  void (*visit)(void *ctx, const xgr_session *s, int64_t now);
  void *visit_ctx;
  bool reduce_finish;
  /* join declarations */
  const xgr_join **decls;
  unsigned ndecls;
  /* graph */
  node *nodes;
  size_t nnodes, capnodes;
  edge *edges;
  size_t nedges, capedges;
  uint32_t *table;        /* open addressing: node index + 1 */
  size_t tcap;
  bool complete;
  /* global observations */
  bool *ran;              /* per step */
  uint32_t *unf_node;     /* per decl: first node reached by an unfulfillable decision, NONE32 */
  bool *satisfied;        /* per decl */
  bool *opened;           /* per decl */
  uint32_t max_live, max_live_node;
  xgr_buf canon;
  xgr_effects fx;
  vcache *vc;             /* payload hashes */
  size_t pending;         /* processes (+1 per session) held by unexpanded states: the memory bound */
} ex;

/* Unexpanded states keep their core (a few hundred bytes per live process): beyond this many
 * processes held (about 256 MiB) no new state is added and the exploration is cut. */
#define PENDING_MAX ((size_t)1 << 20)


typedef struct step_out {
  xgr_session *s;
  int64_t now;
  uint8_t obit;           /* FINISH: the outcome taken (1 valid, 2 invalid, 4 error, 8 other) */
  uint16_t ostep;
  uint64_t *marks;
  uint32_t nmarks;
  uint64_t decided;
  uint32_t joins[16];     /* decisions of this action: declaration << 2 | outcome (the first 16) */
  unsigned njoins;
  bool advance;
  bool ok;
} step_out;

typedef struct acts {
  act *a;
  size_t n, cap;
} acts;

static inline unsigned decl_index(const ex *x, const xgr_join *d) {
  for (unsigned i = 0; i < x->ndecls; i++)
    if (x->decls[i] == d) return i;
  return 0;
}

static inline const char *step_id(const ex *x, unsigned step) { return x->o->steps[step].id; }

/* ---- explore.c ---- */

/* Two independent 64-bit hashes of n bytes into *h1, *h2. */
void xgr__explore_hash_bytes(const void *data, size_t n, uint64_t *h1, uint64_t *h2);
/* The literal waitSec of the branch (valid: onValid) of step's rule; 0 without a bundle, a rule
 * or a waitSec. Forced outcomes (the explorer's and the replay's) take it. */
int64_t xgr__explore_branch_wait(const xgr_bundle *b, unsigned step, bool valid);
/* The outcome of forced kind (0 valid, 1 invalid, 2 error) for p into *o: the payload passes
 * through unchanged (borrowed from p). */
void xgr__explore_forced_outcome(const xgr_bundle *b, const xgr_proc *p, unsigned kind, xgr_step_outcome *o);
/* Run the step's rule on p's payload (no HTTP) into *o, built in ob; the caller frees res after
 * using *o. */
void xgr__explore_rule_outcome(const xgr_bundle *b, const xgr_session *s, const xgr_proc *p, xgr_step_result *res,
                               xgr_outcome_buf *ob, xgr_step_outcome *o);
/* The two hashes of the canonical form of state (s, now, marks[0..nmarks)). */
void xgr__explore_canon_hash(ex *x, const xgr_session *s, int64_t now, const uint64_t *marks,
                             uint32_t nmarks, uint64_t *h1, uint64_t *h2);
/* Apply a to session s (consumed: owned by out->s afterwards) with the accumulators of n. */
void xgr__explore_apply_act(ex *x, const node *n, xgr_session *s, act a, step_out *out);
/* The actions to explore at state (s, now) into l (emptied first); `full` disables the reduction
 * (trace matching needs every action). */
void xgr__explore_actions(const ex *x, const xgr_session *s, int64_t now, bool full, acts *l);
/* The canonical hash of state (s, now) without marks, outside any exploration (migrate-check's
 * cache key: states equal up to process ids and group numbers get one key). */
void xgr__explore_state_key(const xgr_session *s, int64_t now, uint64_t *h1, uint64_t *h2);
/* A new session at the start step with the exploration's payload (the caller owns it). */
xgr_session *xgr__explore_root_session(ex *x);

/* ---- findings.c ---- */

/* The trace (JSON array of actions, new reference) from the root to node v along the BFS tree. */
json_t *xgr__explore_trace_to(ex *x, uint32_t v);
/* Append a finding {kind, severity (error or warning), step, join, message, trace} to list; trace
 * is taken (NULL: an empty trace). */
void xgr__explore_finding(json_t *list, const char *kind, bool error, const char *step, const char *join, json_t *trace,
                          const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* Cycles without a clock advance (unbounded_loop findings) into list. */
void xgr__explore_loop_findings(ex *x, json_t *list, bool any_final);
/* Joins that are open in a state from which no path decides them (join_undecided) into list. */
void xgr__explore_undecided_findings(ex *x, json_t *list);
/* The distinct results of the final states, and timing findings into findings (new reference:
 * the "results" array). */
json_t *xgr__explore_results_and_timing(ex *x, json_t *findings);

#endif
