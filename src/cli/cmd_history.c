/* cmd_history.c — `xgr history OWNER ROOTPID`: a session's audit trail (one row per executed step,
 * the refused wake-ups it sent, the control actions and wake-ups applied to it) as a readable table
 * or as JSON, from one of two sources:
 *   --store FILE  the store file itself, opened read-only (never changed). No access check: the
 *                 file owner's view — the file's permissions are its access control.
 *   --url URL     xgrd (xgr.getSession with its history and audit, and the permit --key signs, as
 *                 `xgr show`): the node's access decision applies (the owner, an operator, a READ
 *                 grantee; anyone else is refused -32007).
 * Both sources become one document {"session","history","audit"} with the same keys in the same
 * order (canon), which one printer shows (print_table, or --json as it is).
 */
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/human.h"
#include "xgr/alloc.h"
#include "xgr/rpc.h"
#include "xgr/store.h"
#include "xgr/xrc_types.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: xgr history --store FILE [--json] OWNER ROOTPID\n"
          "       xgr history [--url URL] [--key FILE] [--json] OWNER ROOTPID\n\n"
          "Print the audit trail of session (OWNER, ROOTPID): one row per step that ran (pid, parent,\n"
          "step, status after the result, outcome, when it ran, error), in process order, each followed\n"
          "by the internal wake-ups it sent that were refused (to whom, why, when), and the session's\n"
          "status, and its audit trail: every kill, pause, resume and wake-up applied to it (who, through\n"
          "which node, when, the permit's digest), each before the first step that began after it.\n"
          "--json prints {\"session\":{...},\"history\":[...],\"audit\":[...]} instead (a refusal is a row\n"
          "with status \"wake_refused\" and its \"wakeUp\"; audit as in xgr.getSession).\n\n"
          "  --store FILE     read the store file directly (read-only). No access check: this is the\n"
          "                   view of whoever can read the file (its permissions are its access control)\n"
          "  (no --store)     read through xgrd (xgr.getSession): xgrd decides who may read the session\n"
          "                   (its owner, an operator, a READ grantee; --key signs the permit)\n"
          "%s\n"
          "Exit: 0 ok; 1 no such session, or xgrd refused (-32007: not permitted; the error is printed);\n"
          "2 usage, an unreadable store or xgrd unreachable; 3 a malformed answer from xgrd.\n",
          xgr_client_opts_help);
}

static json_t *valid_json(int8_t v) { return v < 0 ? json_null() : json_boolean(v); }

/* ---- one document, whatever its source ----------------------------------------------------------- */

static bool listed(const char *const *list, const char *k) {
  for (size_t i = 0; list && list[i]; i++)
    if (!strcmp(list[i], k)) return true;
  return false;
}

/* A new object with the keys of `keys` that from has, in that order; a key of `nulls` that from
 * lacks is null, in its place (the store writes it so). */
static json_t *pick(const json_t *from, const char *const *keys, const char *const *nulls) {
  json_t *o = json_object();
  for (size_t i = 0; keys[i]; i++) {
    json_t *v = json_object_get(from, keys[i]);
    if (v) json_object_set(o, keys[i], v);
    else if (listed(nulls, keys[i])) json_object_set_new(o, keys[i], json_null());
  }
  return o;
}

/* The document's keys, in the order the store form writes them (docs/CLI.md). */
static const char *const session_keys[] = {"owner", "rootPid", "registry", "ostcId", "ostcHash", "status",
                                           "createdAt", "finishedAt", "killedAt", NULL};
static const char *const step_keys[] = {"pid", "parentPid", "step", "status", "valid", "at", "finishedAt", "error",
                                        "recordedAt", "abortReason", "apiCalls", "payload", NULL};
static const char *const step_nulls[] = {"parentPid", "error", "payload", NULL};
static const char *const refused_keys[] = {"pid", "step", "status", "valid", "at", "finishedAt", "wakeUp", NULL};
static const char *const wake_keys[] = {"id", "runner", "sessionId", "stepId", "reason", "refusedAt", NULL};

static bool is_refusal(const json_t *row) {
  const char *s = json_string_value(json_object_get(row, "status"));
  return s && !strcmp(s, "wake_refused");
}

/* The document of session, history and audit (borrowed; session may be NULL or null: its row is
 * gone) with exactly the keys above: the same from a store and from xgr.getSession, so that both
 * forms print the same (a new reference). */
static json_t *canon(const json_t *session, const json_t *history, const json_t *audit) {
  json_t *hist = json_array();
  size_t i;
  const json_t *row;
  json_array_foreach(history, i, row) {
    if (!is_refusal(row)) {
      json_array_append_new(hist, pick(row, step_keys, step_nulls));
      continue;
    }
    json_t *r = pick(row, refused_keys, NULL);
    json_object_set_new(r, "wakeUp", pick(json_object_get(row, "wakeUp"), wake_keys, NULL));
    json_array_append_new(hist, r);
  }
  return json_pack("{s:o, s:o, s:o}", "session", json_is_object(session) ? pick(session, session_keys, NULL) : json_null(),
                   "history", hist, "audit", json_is_array(audit) ? json_deep_copy(audit) : json_array());
}

/* ---- --store FILE ------------------------------------------------------------------------------ */

/* The refused wake-ups in ws sent by process iter (0: sender not recorded) not added yet (done),
 * as rows appended to hist (docs/RPC.md, getSession). */
static void refused_rows(json_t *hist, uint64_t root, uint64_t iter, const xgr_store_hist *h,
                         const xgr_store_wake *ws, size_t nw, bool *done) {
  for (size_t k = 0; k < nw; k++) {
    if (done[k] || ws[k].from_iter != iter) continue;
    done[k] = true;
    const xgr_store_wake *w = &ws[k];
    char pid[48], to[24];
    if (iter) xgr_pid_format(root, iter, pid, sizeof pid);
    else snprintf(pid, sizeof pid, "%" PRIu64, root);
    snprintf(to, sizeof to, "%" PRIu64, w->to_root);
    json_t *wu = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "id", w->id, "runner", w->to_owner, "sessionId", to,
                           "stepId", w->step, "reason", w->refused, "refusedAt", (json_int_t)w->refused_at);
    json_array_append_new(hist, json_pack("{s:s, s:o, s:s, s:n, s:I, s:I, s:o}", "pid", pid, "step",
                                          w->from_step ? json_string(w->from_step) : json_null(), "status",
                                          "wake_refused", "valid", "at", (json_int_t)(h ? h->at : 0), "finishedAt",
                                          (json_int_t)(h ? h->finished_at : 0), "wakeUp", wu));
  }
}

/* The document of (owner, root) read from the store file at path: 0 with *doc, or the exit code
 * (the reason printed). */
static int from_store(const char *path, const char *owner, uint64_t root, json_t **doc) {
  xgr_error err;
  xgr_store_config cfg = {.read_only = true};
  xgr_store *st = xgr_store_open(path, &cfg, &err);
  if (!st) {
    fprintf(stderr, "xgr history: %s\n", err.message);
    return XGR_EXIT_USAGE;
  }
  xgr_store_session ss;
  bool has_session = xgr_store_session_get(st, owner, root, &ss, &err) == 0;
  xgr_store_hist *hs = NULL;
  size_t nh = 0;
  if (xgr_store_history(st, owner, root, &hs, &nh, &err)) {
    fprintf(stderr, "xgr history: %s\n", err.message);
    if (has_session) xgr_store_session_clear(&ss);
    xgr_store_close(st);
    return XGR_EXIT_USAGE;
  }
  xgr_store_wake *ws = NULL;   /* the refused internal wake-ups this session sent */
  size_t nw = 0;
  if (xgr_store_wakes_refused(st, owner, root, &ws, &nw, &err)) nw = 0;
  bool *wdone = xgr_alloc_zeroed(nw + 1, sizeof *wdone);
  xgr_store_audit *as = NULL;   /* the audit trail (schema 14) */
  size_t na = 0;
  if (xgr_store_audits(st, owner, root, &as, &na, &err)) na = 0;
  json_t *audit = json_array();
  for (size_t k = 0; k < na; k++) json_array_append_new(audit, xgr_rpc_audit_json(&as[k]));
  char rootbuf[24];
  snprintf(rootbuf, sizeof rootbuf, "%" PRIu64, root);
  int rc = XGR_EXIT_OK;
  if (!has_session && !nh && !na) {
    fprintf(stderr, "xgr history: no session %s/%" PRIu64 " in %s\n", owner, root, path);
    rc = XGR_EXIT_FAIL;
  } else {
    json_t *hist = json_array();
    for (size_t i = 0; i < nh; i++) {
      const xgr_store_hist *h = &hs[i];
      char pid[48], ppid[48];
      xgr_pid_format(root, h->iter, pid, sizeof pid);
      xgr_pid_format(root, h->parent_iter, ppid, sizeof ppid);
      json_t *row = json_pack("{s:s, s:o, s:s, s:s, s:o, s:I, s:I, s:o, s:I}", "pid", pid, "parentPid",
                              h->parent_iter ? json_string(ppid) : json_null(), "step", h->step_id, "status",
                              xgr_proc_status_name(h->status), "valid", valid_json(h->valid), "at", (json_int_t)h->at,
                              "finishedAt", (json_int_t)h->finished_at, "error",
                              h->error ? json_string(h->error) : json_null(), "recordedAt", (json_int_t)h->recorded_at);
      if (h->abort_reason) json_object_set_new(row, "abortReason", json_string(xgr_abort_reason_name(h->abort_reason)));
      json_t *api = h->api ? json_loads(h->api, 0, NULL) : NULL;
      if (api) json_object_set_new(row, "apiCalls", api);
      json_t *pl = NULL;   /* exact: integers beyond int64 stay numbers */
      if (h->payload && xgr_json_parse_exact(h->payload, strlen(h->payload), &pl, NULL)) pl = NULL;
      json_object_set_new(row, "payload", pl ? pl : json_null());
      json_array_append_new(hist, row);
      refused_rows(hist, root, h->iter, h, ws, nw, wdone);
    }
    for (size_t k = 0; k < nw; k++) refused_rows(hist, root, ws[k].from_iter, NULL, ws, nw, wdone);
    json_t *sess = has_session
                       ? json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I}", "owner", ss.owner, "rootPid", rootbuf,
                                   "registry", ss.registry, "ostcId", ss.ostc_id, "ostcHash", ss.ostc_hash, "status",
                                   xgr_session_result_name(ss.status), "createdAt", (json_int_t)ss.created_at,
                                   "finishedAt", (json_int_t)ss.finished_at, "killedAt", (json_int_t)ss.killed_at)
                       : json_null();
    *doc = canon(sess, hist, audit);
    json_decref(sess);
    json_decref(hist);
  }
  json_decref(audit);
  xgr_store_audits_free(as, na);
  free(wdone);
  xgr_store_wakes_free(ws, nw);
  xgr_store_hists_free(hs, nh);
  if (has_session) xgr_store_session_clear(&ss);
  xgr_store_close(st);
  return rc;
}

/* ---- through xgrd ------------------------------------------------------------------------------- */

/* The document of (owner, root) from xgrd's xgr.getSession (the node decides who may read it; c's
 * key signs the permit): 0 with *doc, or the exit code (xgrd's error printed with its code). */
static int from_xgrd(const xgr_client *c, const char *owner, uint64_t root, json_t **doc) {
  char rootbuf[24];
  snprintf(rootbuf, sizeof rootbuf, "%" PRIu64, root);
  json_t *res;
  int rc = xgr_client_call(c, "history", "xgr.getSession", json_pack("{s:s, s:s}", "owner", owner, "rootPid", rootbuf),
                           &res);
  if (rc) return rc;
  const json_t *hist = json_object_get(res, "history");
  if (!json_is_object(json_object_get(res, "session")) || !json_is_array(hist)) {
    fprintf(stderr, "xgr history: xgrd's xgr.getSession answer has no session or history\n");
    json_decref(res);
    return XGR_EXIT_HARD;
  }
  *doc = canon(json_object_get(res, "session"), hist, json_object_get(res, "audit"));
  json_decref(res);
  return XGR_EXIT_OK;
}

/* ---- the printer ---------------------------------------------------------------------------------- */

static json_int_t int_of(const json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }
static const char *str_of(const json_t *o, const char *k, const char *dflt) {
  const char *s = json_string_value(json_object_get(o, k));
  return s ? s : dflt;
}

/* The line of a refused wake-up row (the refusal under "wakeUp"). */
static void print_refusal(const json_t *row) {
  const json_t *w = json_object_get(row, "wakeUp");
  char when[40];
  printf("%-12s %-12s %-16s wake-up refused: to %s/%s step %s: %s (at %s)\n", str_of(row, "pid", "?"), "",
         str_of(row, "step", "?"), str_of(w, "runner", "?"), str_of(w, "sessionId", "?"), str_of(w, "stepId", "?"),
         str_of(w, "reason", "?"), xgr_cli_utc(int_of(w, "refusedAt"), when, sizeof when));
}

/* A step row and the lines of what its API calls did. */
static void print_step(const json_t *h) {
  const json_t *v = json_object_get(h, "valid");
  const char *outc = json_is_true(v) ? "valid" : json_is_false(v) ? "invalid" : "-";
  json_int_t at_ms = int_of(h, "at");
  char at[40], took[32];
  /* a step's time is on the session's clock: Unix ms under xgrd and `xgr run` in real time (shown
   * as UTC), ms from the start under --virtual-time (shown as +duration) */
  if (at_ms >= 100000000000LL) xgr_cli_utc(at_ms, at, sizeof at);   /* after 1973: a wall-clock time */
  else snprintf(at, sizeof at, "+%s", xgr_cli_duration(at_ms, took, sizeof took));
  xgr_cli_duration(int_of(h, "finishedAt") - at_ms, took, sizeof took);
  const char *ar = str_of(h, "abortReason", NULL), *e = str_of(h, "error", NULL);
  printf("%-12s %-12s %-16s %-9s %-8s %-24s %-9s  %s%s%s\n", str_of(h, "pid", "?"), str_of(h, "parentPid", "-"),
         str_of(h, "step", "?"), str_of(h, "status", "?"), outc, at, took, ar ? ar : "", ar && e ? ": " : "", e ? e : "");
  size_t k;
  const json_t *c;
  json_array_foreach(json_object_get(h, "apiCalls"), k, c) {   /* what each API call did */
    const char *ce = str_of(c, "error", NULL);
    printf("%-12s api %s: status %lld, %lld ms, %s%s%s\n", "", str_of(c, "name", "?"), (long long)int_of(c, "status"),
           (long long)int_of(c, "ms"), str_of(c, "url", "-"), ce ? ", error: " : "", ce ? ce : "");
  }
}

/* The table of doc (canon) for (owner, root). */
static void print_table(const json_t *doc, const char *owner, uint64_t root) {
  const json_t *s = json_object_get(doc, "session"), *hist = json_object_get(doc, "history");
  const json_t *audit = json_object_get(doc, "audit"), *h;
  size_t i, nh = 0, ja = 0, na = json_array_size(audit);
  json_array_foreach(hist, i, h) nh += !is_refusal(h);
  char cbuf[40], rootbuf[24];
  snprintf(rootbuf, sizeof rootbuf, "%" PRIu64, root);
  if (json_is_object(s))
    printf("session %s/%" PRIu64 "  %s  orchestration %s %s  (%zu step%s)\n  created %s\n", str_of(s, "owner", owner),
           root, str_of(s, "status", "?"), str_of(s, "ostcId", ""), str_of(s, "ostcHash", ""), nh, nh == 1 ? "" : "s",
           xgr_cli_utc(int_of(s, "createdAt"), cbuf, sizeof cbuf));
  else
    printf("session %s/%" PRIu64 "  (its row is gone; history kept)  (%zu steps)\n", owner, root, nh);
  printf("%-12s %-12s %-16s %-9s %-8s %-24s %-9s  %s\n", "pid", "parent", "step", "status", "outcome", "ran at",
         "took", "error");
  json_array_foreach(hist, i, h) {
    if (is_refusal(h)) {   /* after the row of the step that sent it */
      print_refusal(h);
      continue;
    }
    /* the audit trail in session-clock order: each entry before the first step that began after it */
    for (; ja < na && int_of(json_array_get(audit, ja), "sessionAt") <= int_of(h, "at"); ja++)
      xgr_cli_print_audit(json_array_get(audit, ja), rootbuf, "audit");
    print_step(h);
  }
  for (; ja < na; ja++) xgr_cli_print_audit(json_array_get(audit, ja), rootbuf, "audit");
}

int xgr_cmd_history(int argc, char **argv) {
  static const struct option opts[] = {{"store", required_argument, NULL, 's'}, XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  xgr_client c;
  xgr_client_init(&c);
  const char *store = NULL, *url0 = c.url;
  int ch, rc;
  optind = 1;
  while ((ch = xgr_client_getopt(&c, argc, argv, opts, "xgr history", usage, &rc)) != -1) {
    if (ch == -2) return rc;
    store = optarg;   /* 's', the only own option */
  }
  if (store && c.url != url0) {
    fprintf(stderr, "xgr history: --store and --url exclude each other: --store reads the file, --url asks xgrd\n");
    return XGR_EXIT_USAGE;
  }
  if (argc - optind != 2) {
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  const char *owner_arg = argv[optind];
  if (!xgr_xrc_is_address(owner_arg, strlen(owner_arg))) {
    fprintf(stderr, "xgr history: OWNER is '%s'; expected an address (\"0x\" and 40 hex digits)\n", owner_arg);
    return XGR_EXIT_USAGE;
  }
  char owner[43];   /* addresses compare case-insensitively; the store keeps them lowercased */
  for (size_t k = 0; k < 43; k++) owner[k] = (char)tolower((unsigned char)owner_arg[k]);
  uint64_t root = 0, iter = 0;
  if (xgr_pid_parse(argv[optind + 1], &root, &iter) || iter) {
    fprintf(stderr, "xgr history: ROOTPID must be a positive integer, not \"%s\"\n", argv[optind + 1]);
    return XGR_EXIT_USAGE;
  }
  json_t *doc = NULL;
  rc = store ? from_store(store, owner, root, &doc) : from_xgrd(&c, owner, root, &doc);
  if (rc) return rc;
  if (c.json) {
    char *txt = xgr_json_dumps(doc, XGR_JSON_PRETTY);
    puts(txt);
    free(txt);
  } else {
    print_table(doc, owner, root);
  }
  json_decref(doc);
  return XGR_EXIT_OK;
}
