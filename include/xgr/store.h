/* xgr/store.h — durable sessions: the store interface and its implementations (memory, SQLite;
 * PostgreSQL later, behind the same vtable). docs/STORE.md explains the schema and decisions.
 *
 * What is stored (seed 001 §7, SEMANTICS §2–3, §7):
 *   orchestrations, rules  registries: content, keccak-256 hash, owner, version, registered time;
 *   owners                 the next rootPid per owner (getNextProcessId, atomic);
 *   sessions               (owner, rootPid) with registry, ostcId, ostcHash, status, killedAt,
 *                          created/finished, and the core's counters needed for recovery;
 *   proc_rt                one row per process with every field of xgr_proc (join state included),
 *                          its latest state; terminal rows leave after the TTL;
 *   proc_steps             append-only history: one row per executed step, unique (owner, rootPid,
 *                          iter); kept for a configurable time;
 *   proc_scopes            join scopes closed with policy kill that may still have live members
 *                          (recovery restores the spawn and dispatch gates from them);
 *   session_audit          the audit trail: one row per control action and wake-up applied to a
 *                          session (who, when, through which node, the permit's digest), written in
 *                          the commit of the change it records; kept like proc_steps (schema 14);
 *   batch_ops              operations on many sessions (xgrd's batches): the selection, the action,
 *                          who started it, its state, progress and cursor (schema 16).
 *   session_grants         access grants: one row per (session, grantee) with a rights bitmask and
 *                          an expiry, from a step's branch `grants` (written in the step's commit)
 *                          or xgr_manageGrants; they go with the session's row (schema 18).
 *
 * Writes go in batches (group commit). A batch is an xgr_store_changes: a driver collects the
 * changes of one or more core calls of one or more sessions in it (xgr_store_changes_add_effects
 * turns a core effects buffer into entries), hands it over with xgr_store_submit and carries out
 * the effects that must not happen before durability (dispatching children, sending wake-ups,
 * answering RPC) only in the callback. The SQLite store has one writer thread that takes every
 * batch that is queued, applies them all in ONE transaction and calls each one's callback after
 * COMMIT returned. A step's result, its children and its history row are in one batch and so
 * commit atomically.
 *
 * Failure: an I/O error (disk full, read-only file, I/O error) fails the transaction, every batch
 * in it, and puts the store in the failed state: every later write fails at once with the same
 * error (xgr_store_failed tells it). Nothing is dropped silently; a driver must stop. A batch
 * that violates a constraint (a history row written twice, a malformed entry) fails alone with
 * XGR_ECONFLICT / XGR_EINVAL: the group is rolled back and its batches are applied again one
 * transaction each, so the others commit.
 *
 * (The engine's hook types in xgr/engine.h are named xgr_store_batch / xgr_store_done_fn; the
 * store's own batch type is therefore xgr_store_changes.)
 *
 * Values are stored as their exact JSON text (xgr_value_to_json_text), so what comes back is what
 * JSON can hold: bytes come back as their base64 string, big integers as decimal strings.
 *
 * Thread safety: every function may be called from any thread. `done` callbacks run on the
 * writer thread (SQLite) or inside xgr_store_submit (memory); they must not block and must not
 * call xgr_store_close. Ownership is stated per function.
 */
#ifndef XGR_STORE_H
#define XGR_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xgr/error.h"
#include "xgr/session.h"
#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XGR_STORE_SCHEMA_VERSION 18  /* the schema this build writes (migrations: docs/STORE.md) */

typedef enum xgr_store_sync {
  XGR_STORE_SYNC_FULL = 0,          /* PRAGMA synchronous=FULL: every commit is on disk (default) */
  XGR_STORE_SYNC_NORMAL = 1         /* WAL + NORMAL: a power loss may lose the last commits */
} xgr_store_sync;

typedef struct xgr_store_config {
  xgr_store_sync sync;
  int busy_timeout_ms;              /* SQLite busy timeout (0: 5000) */
  int64_t ttl_secs;                 /* terminal proc_rt rows live this long after they ended (0: 86400;
                                       xgrd's --session-ttl) */
  int64_t history_secs;             /* proc_steps rows are kept this long (0: forever) */
  int64_t batch_secs;               /* finished batch_ops rows (done, cancelled, failed) are kept this long
                                       after they finished (0: XGR_STORE_BATCH_SECS; < 0: forever;
                                       xgrd's --batch-retention); a running one is never deleted */
  int64_t gc_interval_ms;           /* period of the background retention pass (0: 1000; < 0: none) */
  int gc_batch;                     /* rows per delete statement of a retention pass (0: 256) */
  uint32_t max_page_count;          /* PRAGMA max_page_count (0: unlimited); tests use it as a full disk */
  bool read_only;                   /* open for reading only (xgr history); writes fail */
  bool no_history_payload;          /* proc_steps without the effective payload (smaller rows) */
  /* wall clock (ms since the epoch) for registered/created/finished times and retention;
   * NULL: CLOCK_REALTIME. Tests pass a fake clock. */
  int64_t (*clock_ms)(void *ctx);
  void *clock_ctx;
  /* PostgreSQL only: open as cluster node `node_id` (at most 200 bytes; read during the open) with leases of
   * lease_ms (0: XGR_STORE_LEASE_MS) instead of one writer per schema (docs/CLUSTER.md and the
   * "cluster" section below). NULL: the single writer. */
  const char *node_id;
  int64_t lease_ms;
  /* PostgreSQL only: the writer connections a large group commit is spread over, its sessions
   * divided among them by key (0: XGR_STORE_PG_WRITERS; 1: one connection; at most
   * XGR_STORE_PG_WRITERS_MAX). A session's batches always go through the same connection. */
  int pg_writers;
} xgr_store_config;

#define XGR_STORE_PG_WRITERS 2
#define XGR_STORE_BATCH_SECS 2592000   /* 30 days: the default of xgr_store_config.batch_secs */
#define XGR_STORE_PG_WRITERS_MAX 8

#define XGR_STORE_LEASE_MS 10000    /* the default lease of a cluster node */

typedef struct xgr_store xgr_store;

/* Open (and create / migrate to XGR_STORE_SCHEMA_VERSION) a store. `url` picks the backend:
 *   "memory:" (or NULL)            the in-memory store (nothing survives the process)
 *   "sqlite:PATH" or a plain PATH   a SQLite database file (WAL mode)
 *   "postgresql://..." / "postgres://..."  a PostgreSQL database (a libpq URI; a unix socket
 *                                  directory goes in `?host=/dir`); docs/STORE.md
 * cfg may be NULL (defaults). Returns NULL with *err set when the store cannot be used (the file
 * is unreadable or read-only where writing is needed, its schema is newer than this build, a
 * migration failed, ...). The caller owns the store and closes it with xgr_store_close. */
xgr_store *xgr_store_open(const char *url, const xgr_store_config *cfg, xgr_error *err);
/* Wait for every submitted batch to be committed (or failed) and signalled, stop the writer and
 * the retention thread, close. NULL is fine. */
void xgr_store_close(xgr_store *st);
/* "memory" | "sqlite" | "postgresql" */
const char *xgr_store_backend(const xgr_store *st);
/* url as it may be logged: its userinfo (postgresql://user:PASSWORD@...) and secret-looking query
 * values (password=...) are replaced by ***. The caller frees the result. */
char *xgr_store_url_redacted(const char *url);
/* Whether url names a PostgreSQL store (a libpq URI: postgresql://... or postgres://...). NULL is
 * not one. */
bool xgr_store_url_is_postgres(const char *url);
/* The schema version found in the file when it was opened (before migrations; 0 for a new file)
 * and the one it has now. */
int xgr_store_schema_version(const xgr_store *st, int *found);
/* 0 while the store works; else the error that stopped it (copied into *err). */
int xgr_store_failed(xgr_store *st, xgr_error *err);

/* ---- registries -------------------------------------------------------------------------------- */

typedef enum xgr_registry_kind { XGR_REG_ORCHESTRATION = 0, XGR_REG_RULE = 1 } xgr_registry_kind;

/* One registered document. Strings are owned by the record: xgr_store_doc_clear frees them. */
typedef struct xgr_store_doc {
  xgr_registry_kind kind;
  char *id;                         /* orchestration id or rule address */
  char *hash;                       /* "0x" + 64 hex: keccak-256 of content */
  char *owner;
  uint32_t version;                 /* 1, 2, ... per (kind, id) */
  int64_t registered_at;            /* ms since the epoch */
  char *content;                    /* the exact bytes that were registered (NUL-terminated) */
  size_t len;
} xgr_store_doc;

void xgr_store_doc_clear(xgr_store_doc *d);
/* Register content (borrowed) as the next version of (kind, id). Registering the same bytes
 * again returns the existing version (idempotent). *out (may be NULL) gets the record. */
int xgr_store_register(xgr_store *st, xgr_registry_kind kind, const char *id, const char *owner,
                       const char *content, size_t len, xgr_store_doc *out, xgr_error *err);
/* The latest version of (kind, id) (version 0) or the given version. XGR_ENOTFOUND if none. */
int xgr_store_doc_get(xgr_store *st, xgr_registry_kind kind, const char *id, uint32_t version,
                      xgr_store_doc *out, xgr_error *err);
int xgr_store_doc_by_hash(xgr_store *st, xgr_registry_kind kind, const char *hash, xgr_store_doc *out,
                          xgr_error *err);

/* ---- owners ------------------------------------------------------------------------------------- */

/* Take the next rootPid of owner (1, 2, ...) for a session started without one: durable before it
 * returns; never the same value twice, whatever threads or crashes happen. */
int xgr_store_next_process_id(xgr_store *st, const char *owner, uint64_t *root_pid, xgr_error *err);
/* getNextProcessId: the rootPid owner's next session is expected to get, without taking it — the
 * same value until a session of owner starts. A session started with rootPid R (given or taken)
 * moves it to at least R + 1 in the same commit as the session's row. What committed sessions
 * reached; a taken id is never peeked again. */
int xgr_store_peek_process_id(xgr_store *st, const char *owner, uint64_t *root_pid, xgr_error *err);

/* ---- stored bytes (the quotas, docs/SECURITY.md) ------------------------------------------------ */

/* Each row a batch writes counts this many bytes besides its texts (keys, numbers, the
 * database's own overhead): a quota bounds many small rows too. */
#define XGR_STORE_ROW_BYTES 64u
/* The stored bytes of all of owner's sessions still in the store (the sum of their rows'
 * stored_bytes; a session's go when retention or a removal deletes its row). */
int xgr_store_owner_bytes(xgr_store *st, const char *owner, uint64_t *bytes, xgr_error *err);

/* ---- single-use marks (used permits) ------------------------------------------------------------ */

/* Record key (at most 200 bytes; a used control permit's digest) as used until expires_at (Unix
 * seconds), durably, before returning. XGR_ECONFLICT when key is recorded already and has not
 * expired at now (Unix seconds). Marks that expired are removed by later calls. */
int xgr_store_mark_once(xgr_store *st, const char *key, int64_t expires_at, int64_t now, xgr_error *err);

/* ---- records -------------------------------------------------------------------------------------- */

/* A session row. Strings are owned (xgr_store_session_clear). */
typedef struct xgr_store_session {
  char *owner;
  uint64_t root_pid;
  char *registry;                   /* where the orchestration came from (registry address / bundle), or "" */
  char *ostc_id, *ostc_hash;
  uint8_t status;                   /* xgr_session_result: running, completed, killed */
  int64_t killed_at;                /* session clock, 0: never */
  int64_t created_at, finished_at;  /* ms since the epoch (store clock); finished 0 while running */
  /* the core's counters (xgr_session_state) */
  uint64_t next_iter;
  uint32_t next_group;
  bool paused;
  char *max_total_gas;              /* the starting SessionPermit's gas budget (decimal), "" without one */
  char *bundle_hash;                /* the bundle hash the session pins (its manifest is the registered
                                       orchestration document "#<hash>"), "" for a session from before pins */
  int64_t wake_due;                 /* hibernated: the due time of its next timer (XGR_STORE_DUE_NEVER: only
                                       wake-ups); 0: awake (see xgr_store_changes_set_due) */
  uint64_t stored_bytes;            /* what the session's batches wrote (xgr_store_quota; the quotas) */
  char *forked_from;                /* a fork (schema 16; docs/SEMANTICS.md "Retry and fork"): JSON text
                                       {"owner","rootPid","iter","step","bundleHash"} of the recorded step it
                                       was forked from; "" for a session that is no fork. Written by
                                       xgr_store_changes_forked_from, never by a session row entry */
} xgr_store_session;

void xgr_store_session_clear(xgr_store_session *s);

/* A process row (proc_rt): every field of xgr_proc. Payload and join state are JSON text.
 * Strings are owned (xgr_store_proc_clear). */
typedef struct xgr_store_proc {
  uint64_t iter, parent_iter;
  uint16_t step;
  char *step_id;
  uint8_t status;                   /* xgr_proc_status */
  bool paused;
  int8_t valid;
  uint8_t abort_reason;
  uint32_t group, from_group;
  int64_t next_wake_at, created_at, started_at, finished_at;   /* session clock */
  char *payload;                    /* JSON text */
  char *error;                      /* or NULL */
  char *join;                       /* JSON text of the join state (xgr_session_join_to_json), or NULL */
} xgr_store_proc;

void xgr_store_proc_clear(xgr_store_proc *p);

/* Whether p is a join target whose join is still open (its join state says "closed": false). */
bool xgr_store_proc_join_open(const xgr_store_proc *p);

/* When the stored process p wakes on its own (session clock): its timer (next_wake_at) when it
 * is waiting, not paused and not an open join target, else XGR_NEVER. A paused process, an open
 * join target (its timer applies only once its join closes, and may lie in the past) and a
 * process that waits for a wake-up only do not wake. Every report of a "next wake" (the session
 * listing, xgr.getSession, the console, xgrd's answer to a repeated enqueue) uses this, so they
 * agree; the engine's own schedule (xgr_session_next_due) follows the same rule. */
int64_t xgr_store_proc_wakes_at(const xgr_store_proc *p);

/* The earliest xgr_store_proc_wakes_at of ps[0..n), or XGR_NEVER. */
int64_t xgr_store_procs_next_wake(const xgr_store_proc *ps, size_t n);

/* A history row (proc_steps). Strings are owned (xgr_store_hist_clear). */
typedef struct xgr_store_hist {
  uint64_t iter, parent_iter;
  uint16_t step;
  char *step_id;
  uint8_t status;                   /* status after the result */
  int8_t valid;                     /* -1 none, 0, 1 */
  uint8_t abort_reason;
  int64_t at, finished_at;          /* session clock: began to run, result applied */
  char *error;                      /* or NULL */
  char *payload;                    /* effective payload (JSON) or NULL */
  int64_t recorded_at;              /* store clock when committed */
  char *api;                        /* the step's API calls (JSON text: [{"name","status","ms","url","error"}],
                                       URLs with credentials masked) or NULL (schema version 5) */
} xgr_store_hist;

void xgr_store_hist_clear(xgr_store_hist *h);

/* ---- batches (group commit) ---------------------------------------------------------------------- */

typedef struct xgr_store_changes xgr_store_changes;

xgr_store_changes *xgr_store_changes_new(void);
void xgr_store_changes_free(xgr_store_changes *b);   /* only for a batch that was never submitted */
size_t xgr_store_changes_size(const xgr_store_changes *b);   /* entries so far */

/* Entries. Every argument is borrowed (copied into the batch). */
/* Create or replace a session row. */
void xgr_store_changes_session(xgr_store_changes *b, const xgr_store_session *s);
/* Update the state of an existing session: status, killedAt, counters; finished_at is set by the
 * store when status becomes terminal. */
void xgr_store_changes_session_state(xgr_store_changes *b, const char *owner, uint64_t root_pid, uint8_t status,
                                   int64_t killed_at, uint64_t next_iter, uint32_t next_group, bool paused);
/* Upsert a process row (a later state of the same process in this batch replaces the earlier). */
void xgr_store_changes_proc(xgr_store_changes *b, const char *owner, uint64_t root_pid, const xgr_store_proc *p);
/* Append a history row (unique per (owner, rootPid, iter): a second one fails its batch). */
void xgr_store_changes_hist(xgr_store_changes *b, const char *owner, uint64_t root_pid, const xgr_store_hist *h);
/* Scope `group` of the session closed its join with policy kill. */
void xgr_store_changes_scope_killed(xgr_store_changes *b, const char *owner, uint64_t root_pid, uint32_t group);
/* Remove a session with its processes and scopes (history stays until its retention ends). */
void xgr_store_changes_remove_session(xgr_store_changes *b, const char *owner, uint64_t root_pid);

/* An internal wake-up in the outbox (issue 14): written in the producing session's batch, with the
 * step result that produced it, and removed in the batch of the session that applied (or refused)
 * it — so it is delivered at least once (again after a restart while it is still there) and its
 * effect is committed at most once. `id` is unique (32 hex digits); payload is JSON text. */
typedef struct xgr_store_wake {
  char *id;
  char *from_owner;             /* the producing session */
  uint64_t from_root;
  char *to_owner;               /* the target session */
  uint64_t to_root;
  char *step;                   /* the target step */
  char *caller;                 /* who wakes (the producing session's owner) */
  char *rule;                   /* the producing rule's address, or NULL */
  char *payload;                /* JSON object text */
  int64_t created_at;           /* store clock (ms) */
  char *refused;                /* why the wake-up was refused, or NULL (pending) */
  int64_t refused_at;           /* store clock (ms), when refused */
  uint64_t from_iter;           /* the producing process (its iter), 0: not recorded (rows of */
  char *from_step;              /* schemas < 8) — and its step id, or NULL */
} xgr_store_wake;
void xgr_store_wake_clear(xgr_store_wake *w);
/* Put w in the outbox (copied). */
void xgr_store_changes_wake_out(xgr_store_changes *b, const xgr_store_wake *w);
/* Wake-up `id` is done: applied (reason NULL: the row is removed) or refused (the row is kept as
 * the refusal's record in the producing session's history, with reason; never delivered again).
 * Nothing when it is not pending. */
void xgr_store_changes_wake_done(xgr_store_changes *b, const char *id, const char *reason);
/* Every pending wake-up in the outbox, oldest first; *out is owned by the caller (xgr_store_wakes_free). */
int xgr_store_outbox(xgr_store *st, xgr_store_wake **out, size_t *n, xgr_error *err);
/* The refused wake-ups session (owner, root) produced, oldest first (xgr.getSession); removed with
 * the session's rows. *out is owned by the caller (xgr_store_wakes_free). */
int xgr_store_wakes_refused(xgr_store *st, const char *owner, uint64_t root_pid, xgr_store_wake **out, size_t *n,
                            xgr_error *err);
void xgr_store_wakes_free(xgr_store_wake *w, size_t n);

/* ---- the audit trail (session_audit, schema 14; docs/STORE.md "The audit trail") --------------------
 * One row per control action or wake-up that changed a session, written in the same commit as the
 * change (the engine's batch: xgr_store_batch.audit), never for an action that was refused. Rows
 * are history: they stay when the session's row goes (xgr_store_changes_remove_session) and
 * leave with retention (history_secs), like proc_steps. */
typedef struct xgr_store_audit {
  char *kind;                   /* "kill" | "pause" | "resume" | "wake" | "wake-internal" | "wake-refused" |
                                   "retry" | "fork" (on the source) | "forked" (on the new session) */
  char *actor;                  /* who: a permit's signer address, "auth-none", "operator", or (internal
                                   wake-ups) the waking session's owner (detail.from names the session) */
  char *node;                   /* the node that applied it (cluster node id, or the single node's id) */
  char *permit;                 /* hex digest of the permit used, or NULL (none: --auth none, internal) */
  char *detail;                 /* JSON object text: what it applied to ({"iter":3}, {"step":"E1","keys":[..]},
                                   {"from":{..},"reason":".."}), or NULL */
  int64_t session_at;           /* the session clock when applied (the clock of history rows' `at`): a
                                   reader puts the entry before the rows that began at or after it */
  int64_t at;                   /* store clock (ms) when committed (set by the store) */
} xgr_store_audit;
void xgr_store_audit_clear(xgr_store_audit *a);
/* Mark session (owner, root_pid) as a fork of the recorded step `from` (JSON text, copied; see
 * xgr_store_session.forked_from): sets the column of its existing row (no row: nothing). */
void xgr_store_changes_forked_from(xgr_store_changes *b, const char *owner, uint64_t root_pid, const char *from);
/* Append audit entry a (copied; a->at is ignored: the commit's time) to session (owner, root_pid). */
void xgr_store_changes_audit(xgr_store_changes *b, const char *owner, uint64_t root_pid, const xgr_store_audit *a);
/* The same for a change that is not the engine's (xgr_manageGrants' grants): on a cluster store any
 * node may write it, whoever holds the session's lease (docs/CLUSTER.md). */
void xgr_store_changes_audit_unfenced(xgr_store_changes *b, const char *owner, uint64_t root_pid,
                                      const xgr_store_audit *a);
/* The audit entries of (owner, root_pid) in order (session_at, then the order they were written).
 * *out is the caller's (xgr_store_audits_free); may be empty. */
int xgr_store_audits(xgr_store *st, const char *owner, uint64_t root_pid, xgr_store_audit **out, size_t *n,
                     xgr_error *err);
void xgr_store_audits_free(xgr_store_audit *a, size_t n);

/* ---- operations on many sessions (batch_ops, schema 16; docs/STORE.md "Batch operations") ---------
 * One row per batch operation (xgr/node.h, "Actions on many sessions"): written by the node that
 * starts it, driven by one node at a time (its claim: driver + epoch + expires, a fenced lease on the
 * row: a driver whose claim was taken over can no longer write its progress), cancelled by anyone
 * the node lets. These are small single-row statements on a connection of their own, outside the
 * engine's group commit (the sessions' changes go through the engine as usual). Strings of a record
 * are owned (xgr_store_batchop_clear). */
typedef struct xgr_store_batchop {
  char *id;                     /* 32 lowercase hex digits */
  char *caller;                 /* who started it (the actor of the audit entries it writes) */
  char *action;                 /* "kill" | "pause" | "resume" | "wake" */
  char *spec;                   /* JSON object text: the selection and the action's arguments (the node's) */
  char *state;                  /* "running" | "cancelled" | "done" | "failed" */
  uint64_t total;               /* sessions the dry run counted at the start (updated when known) */
  uint64_t done, failed, skipped;   /* acted on / refused by the engine / ended meanwhile or no longer selected */
  char *cursor;                 /* where the driver is (the node's text; "" at the start) */
  char *error;                  /* why it failed, or NULL */
  char *driver;                 /* the node driving it ("" none) */
  int64_t epoch;                /* +1 at every claim (the fencing token of its driver) */
  int64_t expires;              /* the driver's claim runs out (store clock ms) */
  int64_t created_at, started_at, finished_at, updated_at;   /* store clock (ms); 0: not yet */
} xgr_store_batchop;
void xgr_store_batchop_clear(xgr_store_batchop *o);   /* NULL is fine */
void xgr_store_batchops_free(xgr_store_batchop *o, size_t n);
/* Insert op (borrowed: id, caller, action, spec, total) as a new running operation with no driver,
 * created now. XGR_ECONFLICT when the id exists; XGR_ELIMIT (nothing written) when op->caller
 * already has max_running running operations (0: no bound; on PostgreSQL the count and the insert
 * are one statement, so nodes creating at the same instant may each pass it once). Then the
 * caller's finished operations beyond its newest max_kept are deleted (0: none is), so a caller
 * has at most max_running + max_kept rows whatever retention (batch_secs) keeps. */
int xgr_store_batchop_create(xgr_store *st, const xgr_store_batchop *op, uint32_t max_running, uint32_t max_kept,
                             xgr_error *err);
/* Claim the oldest running operation that no live driver holds — no driver, this node, or a claim
 * that ran out (with force: any running one, for a store with a single writer, whose previous
 * driver is this process's earlier life) — for node (at most 200 bytes) for lease_ms: driver :=
 * node, epoch + 1, expires := now + lease_ms, started_at := now when 0. On PostgreSQL a row another
 * transaction locks is skipped (FOR UPDATE SKIP LOCKED). *found false when there is none; else *out
 * (the caller's: xgr_store_batchop_clear) is the row as claimed. */
int xgr_store_batchop_claim(xgr_store *st, const char *node, int64_t lease_ms, bool force, xgr_store_batchop *out,
                            bool *found, xgr_error *err);
/* The driver's progress (op->id, driver, epoch borrowed; its counts, cursor, state and error are
 * written): only while the row still names that driver at that epoch. The claim is extended to
 * now + lease_ms. The state moves only from running (to op->state: "running", "done" or "failed";
 * finished_at := now when it leaves running); a cancelled row keeps "cancelled" but takes the
 * counts. *state (at least 16 bytes) gets the row's state after the write, "" when the row no longer
 * names this driver at this epoch (the claim was lost: stop driving). */
int xgr_store_batchop_progress(xgr_store *st, const xgr_store_batchop *op, int64_t lease_ms, char *state,
                               xgr_error *err);
/* Cancel operation id: running → cancelled (finished_at := now). *changed false when it was not
 * running (already finished or cancelled). XGR_ENOTFOUND when there is no such operation. */
int xgr_store_batchop_cancel(xgr_store *st, const char *id, bool *changed, xgr_error *err);
/* Operation id into *out (the caller's). XGR_ENOTFOUND when there is none. */
int xgr_store_batchop_get(xgr_store *st, const char *id, xgr_store_batchop *out, xgr_error *err);
/* The operations started by caller (NULL: anyone's), newest first, at most limit (0: 100). *out
 * (the caller's: xgr_store_batchops_free) may be empty. */
int xgr_store_batchops(xgr_store *st, const char *caller, size_t limit, xgr_store_batchop **out, size_t *n,
                       xgr_error *err);
/* The session row of (owner, root_pid) now names another orchestration (id, hash) and bundle hash:
 * a migration (issue 36) moved it, with its process rows in the same batch. Strings copied. */
void xgr_store_changes_pin(xgr_store_changes *b, const char *owner, uint64_t root_pid, const char *ostc_id,
                           const char *ostc_hash, const char *bundle_hash);
/* ---- grants (session_grants, schema 18; docs/STORE.md "Grants") ------------------------------------
 * A grant gives one address (grantee) rights on one session (owner, root_pid) until expires_at:
 * XGR_STORE_RIGHT_READ, _WRITE, _MANAGE (a bitmask; what each allows is the node's decision,
 * xgr_node_access in xgr/node.h). At most one row per (owner, root_pid, grantee): writing a grant
 * again replaces its rights, expiry, rule, step, encDEK and writer and keeps its id; rights 0
 * revokes (deletes) it. Rows leave with their session's row (xgr_store_changes_remove_session,
 * retention of the session row). */
#define XGR_STORE_RIGHT_READ 1u
#define XGR_STORE_RIGHT_WRITE 2u
#define XGR_STORE_RIGHT_MANAGE 4u
#define XGR_STORE_RIGHTS_ALL 7u
typedef struct xgr_store_grant {
  int64_t id;                   /* the row's number, set by the store (kept when the grant is rewritten): the
                                   cursor of a listing */
  char *owner;                  /* the session: its owner (lowercased address) and rootPid */
  uint64_t root_pid;
  char *grantee;                /* lowercased address */
  uint32_t rights;              /* XGR_STORE_RIGHT_* bits; 0 in a change: revoke */
  int64_t expires_at;           /* engine clock ms: the grant works while the node's clock is below it */
  char *rule;                   /* the rule address of the step whose branch granted it, or NULL */
  char *step;                   /* that step's id, or NULL (xgr_manageGrants) */
  char *enc_dek;                /* the encDEK as given (opaque text), or NULL */
  char *created_by;             /* who wrote it: a signer address, "auth-none", or "rule:<address>" */
  int64_t created_at;           /* store clock (ms) when last written (set by the store) */
} xgr_store_grant;
void xgr_store_grant_clear(xgr_store_grant *g);
void xgr_store_grants_free(xgr_store_grant *g, size_t n);   /* NULL is fine */
/* Write grant g (copied; id and created_at are ignored) in the batch: upsert by (owner, root_pid,
 * grantee) when g->rights != 0, delete when 0. */
void xgr_store_changes_grant(xgr_store_changes *b, const xgr_store_grant *g);
/* Which grants xgr_store_grants reads: every set field narrows (strings borrowed). */
typedef struct xgr_store_grant_filter {
  const char *owner;            /* the session's owner, NULL: any */
  uint64_t root_pid;            /* with owner: that session only (0: any of owner's) */
  const char *grantee;          /* NULL: any */
  const char *party;            /* NULL: any; else only grants whose grantee or owner is it */
  const char *rule;             /* NULL: any; else only grants that came from this rule address */
  int64_t expires_after;        /* only expires_at > this (0: no bound) */
  int64_t expires_until;        /* only expires_at <= this (0: no bound) */
  int64_t after_id;             /* only id > this (the cursor; 0: from the first) */
  size_t limit;                 /* at most this many (0: 1000) */
} xgr_store_grant_filter;
/* A number that grows with every committed batch of this store handle that wrote grants (branch
 * grants, xgr_manageGrants, revokes), after its rows are readable: a reader that decided access
 * from the grants while it was g need not decide again while it is still g. Writes by other
 * processes on the same database (a cluster's other nodes) do not move it. Any thread. */
uint64_t xgr_store_grants_generation(xgr_store *st);
/* The grants f selects, by id ascending. *out is the caller's (xgr_store_grants_free); may be empty. */
int xgr_store_grants(xgr_store *st, const xgr_store_grant_filter *f, xgr_store_grant **out, size_t *n,
                     xgr_error *err);

struct xgr_store_batch;
/* Add the changes of one turn of a session's actor (the engine's store hook batch, xgr/engine.h;
 * borrowed, copied): the session row when it is the session's first batch (insert if absent, with
 * the permit's gas budget), the last snapshot of each process as its row, a killed scope for each
 * closed kill join, a history row per step result (its parent, payload, error and end from its
 * process's row in the same batch), the outbox rows it produced and the ones it applied or
 * refused, and — unless the batch holds only outbox entries — the session's state (result when it
 * ended, counters, killed time, and the hibernation due time). This and
 * xgr_store_changes_add_effects (the same rows from the live core, for drivers that run it
 * themselves) are the only places where a session's changes become store rows. */
void xgr_store_changes_add_batch(xgr_store_changes *c, const struct xgr_store_batch *b);
/* Add everything that one core call on session s emitted (fx, borrowed): PROC and JOIN effects
 * become process upserts (the last state of each process wins), HISTORY effects history rows,
 * a join closed with policy kill a killed scope, and the session's counters and result (FINISHED)
 * a session state update. RUN_STEP and WAKE effects are the driver's business and are skipped.
 * Call it right after the core call, while the effects' pointers are valid. */
void xgr_store_changes_add_effects(xgr_store_changes *b, const xgr_session *s, const xgr_effects *fx);
/* For drivers that put a whole turn of a session (its promotions and step results) in one batch:
 * from now on xgr_store_changes_add_effects does not take the record of a process that is still
 * live, but notes it, and the seal takes it from the session, once, in its last state. A join
 * target that gets 32 pieces in a turn is then written once instead of 32 times, and a process
 * that is promoted and ends in one turn only in its ended state.
 * The driver promises, until b is sealed (xgr_store_changes_seal; xgr_store_submit and
 * xgr_store_commit seal): every session whose effects b got stays allocated, and every core call
 * on it adds its effects to b. A process that ended in a core call whose effects went elsewhere
 * fails the batch (XGR_EINVAL, at submit); a session freed before the seal is a use after free. */
void xgr_store_changes_defer_live(xgr_store_changes *b);
/* Take the records that xgr_store_changes_defer_live left for later from their sessions now (call
 * it before such a session is freed or changed by a core call whose effects go to another batch).
 * Idempotent; a failure is kept in b and reported by xgr_store_submit. */
void xgr_store_changes_seal(xgr_store_changes *b);
/* The session row of a session that xgr_session_start just started (status running, counters
 * from the core). registry may be NULL. */
void xgr_store_changes_add_session_start(xgr_store_changes *b, const xgr_session *s, const char *registry);
/* Record the starting permit's gas budget (decimal text, copied) on the batch's last session row. */
void xgr_store_changes_set_max_total_gas(xgr_store_changes *b, const char *max_total_gas);
/* The pinned bundle hash of the last session row added (a start's row). */
void xgr_store_changes_set_bundle_hash(xgr_store_changes *b, const char *bundle_hash);
/* A new session's row s (borrowed, copied), inserted only if (owner, rootPid) has none yet — an
 * existence check folded into the commit: when a row exists, the whole batch fails with
 * XGR_ECONFLICT and nothing of it is written (the other batches of its group commit as usual).
 * Add it as the batch's first entry. A session's actor writes it with its first batch
 * (xgr_store_batch.session_new). */
void xgr_store_changes_session_new(xgr_store_changes *b, const xgr_store_session *s);

/* Called once per submitted batch after its transaction committed (rc 0) or failed (rc < 0, err
 * says why; err is valid during the call only). */
typedef void (*xgr_store_commit_fn)(void *ctx, int rc, const xgr_error *err);

/* Hand batch b over (the store owns it from now on, whatever happens). done (may be NULL) is
 * called exactly once. Returns 0, or the store's failure code when it has failed (done is then
 * called too, before this returns). */
int xgr_store_submit(xgr_store *st, xgr_store_changes *b, xgr_store_commit_fn done, void *ctx);
/* Submit and wait for the commit. Returns its rc. */
int xgr_store_commit(xgr_store *st, xgr_store_changes *b, xgr_error *err);
/* Wait until every batch submitted before this call has been signalled. */
void xgr_store_flush(xgr_store *st);

/* ---- reading ------------------------------------------------------------------------------------ */

int xgr_store_session_get(xgr_store *st, const char *owner, uint64_t root_pid, xgr_store_session *out,
                          xgr_error *err);
/* Every process row of a session, ordered by iter (terminal rows included until their TTL).
 * The caller frees *out with xgr_store_procs_free. */
int xgr_store_procs(xgr_store *st, const char *owner, uint64_t root_pid, xgr_store_proc **out, size_t *n,
                    xgr_error *err);
void xgr_store_procs_free(xgr_store_proc *p, size_t n);
/* History of a session ordered by iter. The caller frees *out with xgr_store_hists_free. */
int xgr_store_history(xgr_store *st, const char *owner, uint64_t root_pid, xgr_store_hist **out, size_t *n,
                      xgr_error *err);
void xgr_store_hists_free(xgr_store_hist *h, size_t n);

/* The session rows of owner with rootPid below `before` (0: no bound), newest first (rootPid
 * descending), at most limit (0: 1000), finished ones included until their retention ends (the
 * listing methods of xgrd use it; `before` pages through an owner's sessions). owner NULL: every
 * owner's (rootPid descending, then by owner; an operator's listing). *out (the caller's;
 * free it with xgr_store_sessions_free) may be empty. */
int xgr_store_sessions(xgr_store *st, const char *owner, uint64_t before, size_t limit, xgr_store_session **out,
                       size_t *n, xgr_error *err);
void xgr_store_sessions_free(xgr_store_session *s, size_t n);

/* An owner and how many of its sessions are live. */
typedef struct xgr_store_owner_live {
  char *owner;                 /* owned */
  uint64_t live;               /* session rows in status running (paused and hibernated ones included) */
} xgr_store_owner_live;
/* The owners that have live sessions in the store, most live sessions first (ties: owner
 * ascending), at most max (0: 100); only `owner` when not NULL (at most one entry: none when it has
 * no live session). A hibernated session counts, since it is live in the store though not in the
 * engine (the console's owners line and live counts). *out (the caller's; free it with
 * xgr_store_owners_free) may be empty; on failure (an error code) it is NULL with *n 0. */
int xgr_store_live_owners(xgr_store *st, const char *owner, size_t max, xgr_store_owner_live **out, size_t *n,
                          xgr_error *err);
void xgr_store_owners_free(xgr_store_owner_live *o, size_t n);
/* The owners that have session rows (of any status, until their retention ends) and sort after
 * `after` (NULL or "": from the first), ascending (byte order), at most max (0: 100); `live` is 0
 * (not counted). One index seek per owner, whatever the number of sessions (the console's list of
 * every owner under --auth none). Freed with xgr_store_owners_free; on failure NULL with *n 0. */
int xgr_store_owners_after(xgr_store *st, const char *after, size_t max, xgr_store_owner_live **out, size_t *n,
                           xgr_error *err);

/* What recovery needs of one live session: its row, its live processes (waiting or running,
 * ordered by iter) and its killed scopes. Borrowed for the duration of the callback. */
typedef struct xgr_store_live {
  const xgr_store_session *session;
  const xgr_store_proc *procs;
  size_t nprocs;
  const uint32_t *killed_groups;
  size_t nkilled;
} xgr_store_live;

/* ---- Live sessions as JSON (src/store/live_json.c; xgr.liveSessions, `xgr migrate-check --url`) ----
 * {"session": {"owner","rootPid","registry","ostcId","ostcHash","bundleHash","status","killedAt",
 *              "createdAt","nextIter","nextGroup","paused"},
 *  "processes": [{"iter","parentIter","step","stepId","status","paused","valid","abortReason","group",
 *                 "fromGroup","nextWakeAt","createdAt","startedAt","finishedAt","payload","error","join"}],
 *  "killedGroups": [N...]}
 * rootPid, nextIter, iter and parentIter are decimal strings; payload, error and join the stored
 * JSON text (error and join may be null). */
json_t *xgr_store_live_to_json(const xgr_store_live *l);   /* a new reference, the caller's */
/* About how many bytes xgr_store_live_to_json(l) takes as text (a bound for answers). */
size_t xgr_store_live_size(const xgr_store_live *l);
/* The records of one live session read back from JSON, owning what live points to. */
typedef struct xgr_store_live_owned {
  xgr_store_live live;          /* live.session = &session, live.procs = procs, live.killed_groups = killed */
  xgr_store_session session;
  xgr_store_proc *procs;
  uint32_t *killed;
} xgr_store_live_owned;
/* Read j (xgr_store_live_to_json's shape; path names it in errors, e.g. "sessions[3]") into *out,
 * which the caller clears with xgr_store_live_owned_clear. At most max_procs processes. Every field
 * is required and no other is accepted; an error (XGR_ESCHEMA, *err naming the field's path, *out
 * cleared) otherwise. Nothing is checked against an orchestration here: xgr_store_restore_session
 * does that. */
int xgr_store_live_from_json(const json_t *j, const char *path, size_t max_procs, xgr_store_live_owned *out,
                             xgr_error *err);
void xgr_store_live_owned_clear(xgr_store_live_owned *o);   /* NULL is fine */

/* Call fn for every session whose status is running, in (owner, rootPid) order. A non-zero
 * return of fn stops and is returned. */
int xgr_store_load_live(xgr_store *st, int (*fn)(void *ctx, const xgr_store_live *l), void *ctx,
                        xgr_error *err);

/* Which versions the live sessions run (issue 36, `xgr versions`): the running sessions (of owner
 * and registry when not NULL/"") grouped by registry, orchestration id and hash and pinned bundle
 * hash, as a JSON array (new reference, the caller's) of
 *   {"registry","ostcId","ostcHash","bundleHash","sessions":N,"waiting":{STEP:N},"running":{STEP:N}}
 * (processes per step; a running step counts as running). Reads every live session's rows. */
int xgr_store_versions(xgr_store *st, const char *owner, const char *registry, json_t **out, xgr_error *err);

/* ---- hibernation: the due index (docs/STORE.md "Hibernation") ---------------------------------------- */

/* sessions.wake_due says whether a running session is hibernated: NULL (0 here) while it is
 * awake — every session state entry (xgr_store_changes_session_state) writes NULL unless the batch
 * sets a due time — or the engine-clock time (ms) of its next timer, XGR_STORE_DUE_NEVER when only
 * a wake-up can move it. The engine writes it with the batch after which the session waits and is
 * evicted; nothing changes the session without clearing it, so the row stays the truth. */
#define XGR_STORE_DUE_NEVER INT64_MAX
/* Set the due time of the batch's last session state entry (due > 0). */
void xgr_store_changes_set_due(xgr_store_changes *b, int64_t due);

/* Which live sessions xgr_store_load_some reads: owner set: only (owner, root_pid); else, with
 * bounded, the awake ones (no due time) and the ones due by due_upto; else every live one. */
typedef struct xgr_store_load_filter {
  const char *owner;
  uint64_t root_pid;
  bool bounded;
  int64_t due_upto;
} xgr_store_load_filter;
/* Like xgr_store_load_live, restricted by f (NULL: all; with bounded, not in any particular
 * order: two index scans). The due time of each session is in
 * l->session->wake_due. XGR_EUNSUPPORTED from a backend without it. */
int xgr_store_load_some(xgr_store *st, const xgr_store_load_filter *f, int (*fn)(void *ctx, const xgr_store_live *l),
                        void *ctx, xgr_error *err);

/* A hibernated session's key in the due index. */
typedef struct xgr_store_due_key {
  int64_t due;
  char owner[64];
  uint64_t root_pid;
} xgr_store_due_key;
/* Up to max keys of running sessions with a due time, strictly after *after in (due, owner,
 * rootPid) order and due <= upto, ascending, into out (the caller's array); *n gets the count.
 * An index range scan: the cost does not depend on how many sessions sleep longer. */
int xgr_store_due(xgr_store *st, const xgr_store_due_key *after, int64_t upto, xgr_store_due_key *out, size_t max,
                  size_t *n, xgr_error *err);

/* ---- retention and statistics ------------------------------------------------------------------ */

/* Run one retention pass now (also done in the background every gc_interval_ms): delete terminal
 * proc_rt rows older than the TTL, proc_steps rows older than history_secs, batch_ops rows
 * finished more than batch_secs ago, and killed scopes of sessions that ended, in small batches. *deleted (may be NULL) gets the number of rows removed. */
int xgr_store_gc(xgr_store *st, size_t *deleted, xgr_error *err);

typedef struct xgr_store_stats {
  uint64_t batches;                 /* batches committed */
  uint64_t transactions;            /* transactions committed */
  uint64_t entries;                 /* entries committed */
  uint64_t failed_batches;
  uint64_t max_batches_per_tx;      /* largest group */
  uint64_t gc_deleted;              /* rows removed by retention */
  uint64_t group_redos;             /* PostgreSQL: groups applied again through the upsert because a process
                                       row taken for new existed (docs/STORE.md, "The bulk path"); 0 expected */
  uint64_t group_retries;           /* PostgreSQL: groups tried again after a transient failure (a deadlock
                                       with another node's transaction: docs/STORE.md, "Failures") */
  uint64_t writer_reconnects;       /* PostgreSQL: writer connections made again after being lost before a
                                       COMMIT was sent (a database restart): the group is tried again */
} xgr_store_stats;

void xgr_store_get_stats(xgr_store *st, xgr_store_stats *out);

/* ---- recovery ------------------------------------------------------------------------------------ */

/* Rebuild a session core from a live session's records (xgr_session_restore_* in
 * xgr/session.h). The orchestration o (borrowed) must be the one the session was pinned to (its
 * hash is checked against l->session->ostc_hash when that is set). A join decision that was still
 * pending is taken at `now`; its effects go to fx (may be NULL; persist them like any other).
 * Processes that were running come back waiting and run again. Returns NULL with *err on
 * malformed rows. The caller owns the session (xgr_session_free). */
xgr_session *xgr_store_restore_session(const xgr_orch *o, const xgr_store_live *l, const xgr_session_config *cfg,
                                       int64_t now, xgr_effects *fx, xgr_error *err);

/* ---- fenced leases: the one primitive every lease of a cluster is made of ----------------------------- *
 * A fenced lease is a row of a PostgreSQL table naming its holder (a node id), its epoch (the
 * fencing token: raised by one at every take-over, never lowered) and its expiry (ms of the
 * database's clock, xgr_ms_now()). The four verbs:
 *   take     a node takes the row when it names no holder, its time ran out, its holder is dead
 *            (xgr_node_alive: that node's process let go of its node lock) or it names the taker
 *            already (a restart under the same id): holder := node, epoch + 1, expiry := now + ms;
 *            RETURNING the new epoch. The caller may choose the free rows itself (`chosen`).
 *   renew    the holder extends the row's expiry, at the epoch it holds; RETURNING the epoch (no
 *            row: the lease is gone).
 *   release  the holder gives the row up at its epoch (any epoch when none is given): expiry :=
 *            `expires` (0 when NULL), the holder cleared with `clear`.
 *   check    whether the row still names node at epoch; with `lock`, FOR SHARE — put inside the
 *            statement that writes what only the holder may write, it refuses the late write of a
 *            node that lost the lease and makes a take-over wait for a write in flight.
 * Two kinds of rows use it: the sessions' leases (sessions.lease_owner / lease_epoch /
 * lease_expires; the store's cluster part, whose node-wide heartbeat also extends them) and the
 * engine executor's sender lease (exec_leader, the shared execution journal). The primitive writes
 * the statement; the caller runs it on its own connection with its own parameters (node, ms, epoch
 * and key are SQL expressions: a parameter "$3::bigint", a column "u.epoch"). */
typedef struct xgr_store_fenced_lease {
  const char *table;                    /* the table of the lease rows */
  const char *alias;                    /* its alias in the statements (NULL: the table's name) */
  const char *holder, *epoch, *expires; /* its columns: node id, fencing token, expiry (ms) */
} xgr_store_fenced_lease;

typedef enum xgr_store_fenced_verb {
  XGR_STORE_FENCED_TAKE,
  XGR_STORE_FENCED_RENEW,
  XGR_STORE_FENCED_RELEASE,
  XGR_STORE_FENCED_CHECK
} xgr_store_fenced_verb;

/* The parts of one statement (every field borrowed; NULL where a verb does not use it). */
typedef struct xgr_store_fenced_stmt {
  const char *key;        /* the condition naming the lease rows (may name `from`'s items); NULL: every row */
  const char *from;       /* take, release, check: more FROM items, e.g. "unnest($1::text[]) AS u(owner)" */
  const char *node;       /* the node taking, holding or checking */
  const char *ms;         /* take, renew: the lease's length */
  const char *epoch;      /* renew, check: the epoch held; release: NULL for any epoch */
  const char *expires;    /* release: the expiry left in the row (NULL: 0) */
  const char *insert;     /* take: "INSERT INTO table(...) VALUES(...)" of a new row at epoch 1, taken instead
                             ON CONFLICT (conflict) as above; NULL: the rows exist */
  const char *conflict;   /* take with insert: the conflict target's columns */
  const char *returning;  /* take, renew, release: the RETURNING list (take, renew: NULL is the epoch;
                             release: NULL is none); check: the select list (NULL: 1) */
  bool chosen;            /* take: `key` names free rows only (the caller's own test); else the primitive's */
  bool clear;             /* release: the holder becomes NULL too */
  bool lock;              /* check: FOR SHARE */
} xgr_store_fenced_stmt;

/* The SQL of verb on lease l with the parts s: a new string (the caller frees it). */
char *xgr_store_fenced_sql(const xgr_store_fenced_lease *l, xgr_store_fenced_verb verb, const xgr_store_fenced_stmt *s);
/* How often a holder renews a lease of lease_ms (ms): every third of it (at least 1 ms), so that
 * two renewals may fail before it runs out. */
int64_t xgr_store_fenced_renew_ms(int64_t lease_ms);

/* ---- cluster: leases with fencing (PostgreSQL with cfg.node_id; docs/CLUSTER.md) ---------------------- *
 * Each live session is leased to one node: sessions.lease_owner, lease_epoch (the fencing token,
 * +1 at every claim) and lease_expires (ms, the database's clock). A node holds the sessions it
 * created (the row's defaults) and those it claimed; the store remembers the epoch of each and
 * every batch that touches a session checks, in its own transaction and under a share lock of the
 * session row, that the row still names this node at that epoch — else the batch fails with
 * XGR_ELEASE and nothing of it is written (the late write of a node that lost the lease). A batch
 * of a session the store no longer holds fails the same way without a round trip. A node is
 * alive while its lease connection holds its advisory lock (a killed process loses it at once);
 * a live node's leases last until they expire. Every function below returns XGR_EUNSUPPORTED on a
 * store that is not a cluster node. Thread-safe. */

/* This node's id, or NULL when the store is not a cluster node. */
const char *xgr_store_node_id(const xgr_store *st);
/* The lease length (ms). */
int64_t xgr_store_lease_ms(const xgr_store *st);
/* Claim and load sessions: running ones that are unleased, whose lease expired or whose node is
 * dead (its advisory lock is free) — or, with own, also those still naming this node id (a
 * restart under the same --node-id) — at most max (0: 256), skipping rows another transaction
 * locks (FOR UPDATE SKIP LOCKED). owner set: only (owner, root_pid). For each claimed session, in
 * this order: before(ctx, owner, root) (may be NULL) — the caller makes sure no older incarnation
 * of the session still runs here, since from the next step on the store writes the session's
 * batches under the new epoch, and returns false if one still does (the session is then neither
 * held nor loaded: its row names this node, which does not hold it, and the heartbeat gives it up,
 * docs/CLUSTER.md "Orphaned rows") —, the new epoch is remembered, and fn is called with its live
 * rows (as xgr_store_load_live). A claim that a later claim of the same session on this node
 * overtook does none of this. *claimed (may be NULL) gets the count. */
int xgr_store_lease_claim(xgr_store *st, const char *owner, uint64_t root_pid, bool own, size_t max,
                          bool (*before)(void *ctx, const char *owner, uint64_t root_pid),
                          int (*fn)(void *ctx, const xgr_store_live *l), void *ctx, size_t *claimed, xgr_error *err);
/* xgr_store_lease_claim for a node that hibernates sessions (docs/CLUSTER.md "Hibernation"): once
 * the claim has committed, bound(ctx) gives a due time (engine clock ms); a claimed session that is
 * awake (no due time) or due by then is loaded as above; one hibernated beyond it is only held —
 * before is called and its new epoch remembered, fn is not called — and stays in the store for the
 * node's due poller (xgr_store_lease_due) or a call. *loaded (may be NULL) gets how many were loaded. */
int xgr_store_lease_claim_lazy(xgr_store *st, const char *owner, uint64_t root_pid, bool own, size_t max,
                               int64_t (*bound)(void *ctx), bool (*before)(void *ctx, const char *owner, uint64_t root_pid),
                               int (*fn)(void *ctx, const xgr_store_live *l), void *ctx, size_t *claimed,
                               size_t *loaded, xgr_error *err);
/* The due index (as xgr_store_due) restricted to the rows leased to this node: a node's due poller
 * loads only the hibernated sessions it holds. */
int xgr_store_lease_due(xgr_store *st, const xgr_store_due_key *after, int64_t upto, xgr_store_due_key *out,
                        size_t max, size_t *n, xgr_error *err);
/* Heartbeat: extend every lease this node holds — every running row naming this node, in memory
 * or hibernated — by one write of the node's row in `nodes` (its expires_at: now + lease), and
 * find the ones it lost: for each session the store held whose row no longer names this node at
 * the held epoch (or that ended), the store forgets it and calls lost. */
int xgr_store_lease_renew(xgr_store *st, void (*lost)(void *ctx, const char *owner, uint64_t root_pid), void *ctx,
                          xgr_error *err);
/* Give up every lease (SIGTERM): rows keep their epoch, lose their owner; the store holds none.
 * The node's row in `nodes` goes too, so the others stop counting it at once. */
int xgr_store_lease_release_all(xgr_store *st, xgr_error *err);
/* Rebalancing (docs/CLUSTER.md): count the running sessions and the live nodes (those whose
 * heartbeat wrote their `nodes` row within 3 leases and that hold their node lock); this node's
 * leases are the sessions the store holds for it. share = ceil(running / nodes). When this node
 * holds more than share + max(8, share / 10), give up to min(max, held - share) leases up: only sessions hibernated beyond `after` (their due time,
 * engine clock: the caller's loader does not look that far) that this node holds at the epoch of
 * their row and for which busy(ctx, owner, root_pid) is false (it is in memory here). They are
 * released at lease_expires = now; a node that holds at least its share leaves such rows alone in
 * its claim rounds for one lease, so the nodes below their share take them (as any free row, held
 * without loading). *released counts them. Also deletes rows of nodes not seen for a day.
 * 0, XGR_EUNSUPPORTED (not a cluster store) or XGR_EIO. */
int xgr_store_lease_balance(xgr_store *st, int64_t after, size_t max,
                            bool (*busy)(void *ctx, const char *owner, uint64_t root_pid), void *ctx, size_t *released,
                            xgr_error *err);
/* Does this node hold (owner, root_pid)? (The store's memory: no round trip.) */
bool xgr_store_lease_held(xgr_store *st, const char *owner, uint64_t root_pid);
/* Forget (owner, root_pid) without touching its row: this node will not write it any more (its
 * batches fail with XGR_ELEASE) and, if the row still names this node, the heartbeat gives that
 * lease up after a few beats so that a claim round (here or elsewhere) takes the session again. For
 * a session this node holds but could not load. No-op when not held or not a cluster node. */
void xgr_store_lease_forget(xgr_store *st, const char *owner, uint64_t root_pid);
/* Does this node hold (owner, root_pid) and does its row still say so — running, leased to this node
 * at the epoch the store remembers? (One read, no write: a node loads a session it evicted under the
 * lease it kept.) false also when the row cannot be read. */
bool xgr_store_lease_current(xgr_store *st, const char *owner, uint64_t root_pid);
/* The cluster's clock: the store server's Unix time in ms (PostgreSQL's clock_timestamp()), read
 * now, in *ms; *rtt_ns: how long the read took (the value is of a moment within it). Cluster
 * nodes take their session clock from it, so a node whose own clock is off does not stamp times
 * that other nodes read as past or future (docs/CLUSTER.md, "Time"). XGR_EUNSUPPORTED when the
 * store is not a cluster node, XGR_EIO when it cannot be read. */
int xgr_store_cluster_clock(xgr_store *st, int64_t *ms, uint64_t *rtt_ns, xgr_error *err);
/* Who holds a session: *node (at most n bytes, "" when unleased), whether that node is alive and
 * its lease unexpired (*valid), and whether the session is running (*running). XGR_ENOTFOUND
 * when there is no such session. */
int xgr_store_lease_holder(xgr_store *st, const char *owner, uint64_t root_pid, char *node, size_t n, bool *valid,
                           bool *running, xgr_error *err);
typedef struct xgr_store_lease_stats {
  uint64_t held;                /* sessions held now */
  uint64_t claimed;             /* sessions claimed since open */
  uint64_t claimed_hibernated;  /* of those, held without being loaded (xgr_store_lease_claim_lazy) */
  uint64_t lost;                /* leases found lost by the heartbeat */
  uint64_t refused_batches;     /* late writes refused: batches that failed with XGR_ELEASE */
  uint64_t renewals;            /* heartbeats done */
  uint64_t stale_claims;        /* claims that found a later claim of the same session here first */
  uint64_t orphans_released;    /* rows naming this node that it did not hold, given up by the heartbeat */
  uint64_t handed_over;         /* hibernated sessions given up to balance the cluster (xgr_store_lease_balance) */
  uint64_t nodes, share;        /* live nodes and this node's share of the running sessions, at the last balance */
  uint64_t reconnects;          /* lease connections made again after being lost (a database restart, a cut) */
  bool disconnected;            /* the lease connection is lost now and could not be made again yet */
} xgr_store_lease_stats;
void xgr_store_lease_get_stats(xgr_store *st, xgr_store_lease_stats *out);

/* Commands: a control call for a session held by another node travels as a row of
 * lease_commands plus a NOTIFY on the target node's channel; the target answers in the row and
 * notifies the asking node. body and result are opaque text (xgrd puts JSON there). */
/* Queue body for node target: *id gets the command's id. */
int xgr_store_cmd_send(xgr_store *st, const char *target, const char *owner, uint64_t root_pid, const char *body,
                       int64_t *id, xgr_error *err);
/* Wait up to timeout_ms for notifications on this node's channel (a dedicated connection):
 * "c" — commands arrived; "r<id>" — command id was answered. on(ctx, payload) is called for each
 * (on this thread). 0 (also on timeout) or an error. */
int xgr_store_cmd_listen(xgr_store *st, int timeout_ms, void (*on)(void *ctx, const char *payload), void *ctx,
                         xgr_error *err);
/* Take every pending command for this node (marked taken), oldest first, and for each: run(ctx,
 * id, owner, root, body, &rc) carries it out and returns the result text (malloc'd; the store
 * frees it), which is written into the row with rc, and the asking node is notified. */
int xgr_store_cmd_serve(xgr_store *st,
                        char *(*run)(void *ctx, int64_t id, const char *owner, uint64_t root_pid, const char *body,
                                     int *rc),
                        void *ctx, xgr_error *err);
/* The answer of command id: *done false while there is none; else *rc and *result (the caller
 * frees it) and the row is removed. */
int xgr_store_cmd_result(xgr_store *st, int64_t id, bool *done, int *rc, char **result, xgr_error *err);
/* Remove command id (the asker gave up waiting). */
int xgr_store_cmd_drop(xgr_store *st, int64_t id, xgr_error *err);
/* Withdraw command id unless its target has taken it: *withdrawn true when the row was deleted
 * untaken (the target can no longer carry it out), false when it was taken (the target may be
 * carrying it out; its answer decides) or is gone. */
int xgr_store_cmd_withdraw(xgr_store *st, int64_t id, bool *withdrawn, xgr_error *err);
/* Pending outbox rows (internal wake-ups) whose target session this node holds, oldest first, at
 * most max (0: 1000). *out is the caller's (xgr_store_wakes_free). Rows at least a second old
 * whose target is no running session anywhere are first marked refused ("no such session here"),
 * as a single node refuses them. */
int xgr_store_outbox_held(xgr_store *st, size_t max, xgr_store_wake **out, size_t *n, xgr_error *err);
/* Is outbox row id still pending (in the outbox, not refused)? false also when it cannot be read
 * (the caller looks again later). A fresh read on the lease connection (xgr_engine_redeliver_checked). */
bool xgr_store_outbox_pending(xgr_store *st, const char *id);

#ifdef __cplusplus
}
#endif
#endif
