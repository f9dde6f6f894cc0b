/* console.c — the xgr console's server side: its life, pages and events (see console_service_impl.h,
 * console_impl.h and docs/CONSOLE.md).
 *
 * GET /ui/...: the embedded pages and assets (web/, generated into console_assets.c at build
 * time; nothing is fetched from elsewhere), /ui/events (server-sent events, sse.c) and
 * /ui/graph.svg?hash=0x... (an orchestration laid out by Graphviz, xgr/svg.h, cached per hash:
 * registered bytes never change). The engine's events become JSON lines on the event hub here.
 * The cache of parsed orchestrations (by hash) that the graph and the read methods share lives
 * here too; the read methods themselves are in console_list.c and console_view.c.
 */
#include "rpc/console_impl.h"

#include <assert.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "value/value_impl.h"
#include "xgr/svg.h"

/* ---- parsed orchestrations by hash -------------------------------------------------------------- */

/* The entry for hash, parsed from the registry on first use, with a reference taken (release with
 * cache_put). NULL when nothing is registered under hash or it does not parse. */
xgr__console_orch *xgr__console_cache_get(xgr__console *c, const char *hash) {
  if (!hash || !*hash || strlen(hash) >= sizeof c->cache[0].hash) return NULL;
  pthread_mutex_lock(&c->mu);
  for (size_t i = 0; i < XGR__CONSOLE_CACHE_MAX; i++)
    if (c->cache[i].orch && !strcasecmp(c->cache[i].hash, hash)) {
      c->cache[i].refs++;
      c->cache[i].used = ++c->tick;
      pthread_mutex_unlock(&c->mu);
      return &c->cache[i];
    }
  pthread_mutex_unlock(&c->mu);
  xgr_store_doc doc = {0};
  xgr_error err;
  xgr_error_clear(&err);
  if (xgr_node_doc_by_hash(c->n, XGR_REG_ORCHESTRATION, hash, &doc, &err)) return NULL;
  xgr_orch *o = NULL;
  int rc = xgr_orch_parse(doc.content, doc.len, &o, &err, NULL);
  xgr_node_doc_clear(&doc);
  if (rc || !o) return NULL;
  pthread_mutex_lock(&c->mu);
  xgr__console_orch *slot = NULL;
  for (size_t i = 0; i < XGR__CONSOLE_CACHE_MAX; i++) {
    xgr__console_orch *ce = &c->cache[i];
    if (ce->orch && !strcasecmp(ce->hash, hash)) {   /* another thread was faster */
      ce->refs++;
      pthread_mutex_unlock(&c->mu);
      xgr_orch_free(o);
      return ce;
    }
    if (ce->refs) continue;
    if (!slot || !ce->orch || (slot->orch && ce->used < slot->used)) slot = ce;
  }
  if (!slot) {   /* every entry is in use: answer this one uncached */
    pthread_mutex_unlock(&c->mu);
    xgr__console_orch *tmp = xgr__xcalloc(1, sizeof *tmp);
    snprintf(tmp->hash, sizeof tmp->hash, "%s", hash);
    tmp->orch = o;
    tmp->refs = 1;
    tmp->used = UINT64_MAX;   /* marks a private entry */
    return tmp;
  }
  xgr_orch_free(slot->orch);
  free(slot->svg);
  *slot = (xgr__console_orch){.orch = o, .refs = 1, .used = ++c->tick};
  snprintf(slot->hash, sizeof slot->hash, "%s", hash);
  pthread_mutex_unlock(&c->mu);
  return slot;
}

void xgr__console_cache_put(xgr__console *c, xgr__console_orch *ce) {
  if (!ce) return;
  if (ce->used == UINT64_MAX) {
    xgr_orch_free(ce->orch);
    free(ce->svg);
    free(ce);
    return;
  }
  pthread_mutex_lock(&c->mu);
  assert(ce->refs > 0);
  ce->refs--;
  pthread_mutex_unlock(&c->mu);
}

/* ---- events ------------------------------------------------------------------------------------ */

static const char *const kind_names[] = {"proc", "join", "action", "wake", "finished", "idle", "store_error", "step"};

/* `,"key":` (key: a literal without anything to escape). */
static void put_key(xgr_buf *b, const char *key) {
  xgr__buf_put(b, ",\"", 2);
  xgr__buf_puts(b, key);
  xgr__buf_put(b, "\":", 2);
}

/* `,"key":"text"` (text JSON-escaped; left out when not UTF-8, as jansson would refuse it). */
static void put_str(xgr_buf *b, const char *key, const char *text) {
  size_t n = strlen(text);
  if (!xgr_utf8_valid(text, n)) return;
  put_key(b, key);
  xgr__json_write_string(b, text, n);
}

/* `,"key":true` or `,"key":false` */
static void put_bool(xgr_buf *b, const char *key, bool v) {
  put_key(b, key);
  xgr__buf_puts(b, v ? "true" : "false");
}

/* `,"pid":"root:iter"` */
static void put_pid(xgr_buf *b, uint64_t root, uint64_t iter) {
  put_key(b, "pid");
  xgr__buf_putc(b, '"');
  xgr__buf_put_u64(b, root);
  xgr__buf_putc(b, ':');
  xgr__buf_put_u64(b, iter);
  xgr__buf_putc(b, '"');
}

/* An engine event as one line of JSON for the event stream: written straight into a buffer (no
 * tree, no printf: this runs for every process change of every session while anyone reads, or
 * may resume reading) and handed to the hub. Nothing while nobody does (xgr__sse_wanted). */
void xgr__console_on_event(void *ctx, const xgr_engine_event *ev) {
  xgr__console *c = ctx;
  if (!xgr__sse_wanted(c->hub)) return;
  xgr_buf b = {0};
  xgr__buf_reserve(&b, 240);   /* a process event fits */
  xgr__buf_puts(&b, "{\"kind\":\"");
  xgr__buf_puts(&b, ev->kind < sizeof kind_names / sizeof *kind_names ? kind_names[ev->kind] : "other");
  xgr__buf_putc(&b, '"');
  put_str(&b, "owner", ev->owner ? ev->owner : "");
  xgr__buf_puts(&b, ",\"rootPid\":\"");
  xgr__buf_put_u64(&b, ev->root_pid);
  xgr__buf_puts(&b, "\",\"now\":");
  xgr__buf_put_i64(&b, ev->now);
  if (ev->proc && (ev->kind == XGR_EEV_PROC || ev->kind == XGR_EEV_JOIN)) {
    const xgr_engine_proc *p = ev->proc;
    put_pid(&b, ev->root_pid, p->iter);
    put_str(&b, "step", p->step_id ? p->step_id : "");
    put_str(&b, "status", p->status == XGR_PROC_WAITING && p->paused ? "paused"
                                                                     : xgr_proc_status_name((xgr_proc_status)p->status));
    if (p->valid >= 0) put_bool(&b, "valid", p->valid);
    if (p->error) put_str(&b, "error", p->error);
    if (ev->kind == XGR_EEV_JOIN && p->is_join)
      put_str(&b, "outcome", xgr_join_outcome_name((xgr_join_outcome)p->join_outcome));
  }
  if (ev->kind == XGR_EEV_STEP) {
    put_pid(&b, ev->root_pid, ev->iter);
    put_bool(&b, "ok", ev->ok);
  }
  if (ev->message && ev->kind != XGR_EEV_STEP) put_str(&b, "message", ev->message);
  if (ev->kind == XGR_EEV_ACTION || ev->kind == XGR_EEV_WAKE) put_bool(&b, "ok", ev->ok);
  if (ev->kind == XGR_EEV_FINISHED) put_str(&b, "result", xgr_session_result_name(ev->result));
  xgr__buf_putc(&b, '}');
  xgr__sse_publish_owned(c->hub, ev->owner, ev->root_pid, xgr__buf_finish(&b, NULL));
}

unsigned xgr__console_interest(void *ctx) {
  xgr__console *c = ctx;
  return xgr__sse_wanted(c->hub) ? XGR_EEV_WANT_ALL : 0;
}

/* ---- GET /ui ------------------------------------------------------------------------------------- */

static int send_buf(struct MHD_Connection *c, unsigned status, const char *type, const void *data, size_t len,
                    enum MHD_ResponseMemoryMode mode, const char *cache) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, mode);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", type);
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(r, "Content-Security-Policy",
                          "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:");
  if (cache) MHD_add_response_header(r, "Cache-Control", cache);
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static int send_text(struct MHD_Connection *c, unsigned status, const char *msg) {
  return send_buf(c, status, "text/plain; charset=utf-8", msg, strlen(msg), MHD_RESPMEM_MUST_COPY, "no-store");
}

static int graph_svg(xgr__console *c, struct MHD_Connection *conn) {
  const char *hash = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "hash");
  if (!hash || strlen(hash) != 66) return send_text(conn, MHD_HTTP_BAD_REQUEST, "hash: expected 0x + 64 hex\n");
  xgr__console_orch *ce = xgr__console_cache_get(c, hash);
  if (!ce) return send_text(conn, MHD_HTTP_NOT_FOUND, "no orchestration is registered under that hash\n");
  pthread_mutex_lock(&c->mu);
  char *svg = ce->svg ? xgr__xstrdup(ce->svg) : NULL;
  size_t len = ce->svg_len;
  pthread_mutex_unlock(&c->mu);
  if (!svg) {
    xgr_error e;
    xgr_error_clear(&e);
    char *drawn = NULL;
    if (xgr_orch_svg(ce->orch, &drawn, &len, &e)) {
      xgr__console_cache_put(c, ce);
      char msg[XGR_MSG_MAX + 2];
      snprintf(msg, sizeof msg, "%s\n", e.message);
      return send_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, msg);
    }
    svg = xgr__xstrdup(drawn);
    pthread_mutex_lock(&c->mu);
    if (!ce->svg) {
      ce->svg = drawn;
      ce->svg_len = len;
      drawn = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    free(drawn);
  }
  xgr__console_cache_put(c, ce);
  return send_buf(conn, MHD_HTTP_OK, "image/svg+xml", svg, len, MHD_RESPMEM_MUST_FREE, "public, max-age=86400");
}

/* The permit of a GET /ui/events sent by a client that is not the console's page: the header
 * `Authorization: XDaLaPermit <permit JSON>`. Never the URL (logs and history keep URLs). NULL
 * when absent. */
static const char *events_permit(const xgr_rpc_caller *caller) {
  const char *a = caller->authorization;
  if (a && !strncasecmp(a, "XDaLaPermit", 11) && (a[11] == ' ' || a[11] == '\t')) {
    a += 12;
    while (*a == ' ' || *a == '\t') a++;
    return a;
  }
  return NULL;
}

/* GET /ui/events: a stream of one owner's events (or, under --auth none, of everyone's). In permit
 * mode the reader is who the console's cookie signs in (console_auth.c), or the signer of an
 * xdalaPermit in the Authorization header (events_permit); it must be allowed to read `owner`'s
 * sessions as for xgr.console.sessions (the owner defaults to the signed-in address): the owner or
 * an operator, or, for one session (rootPid), a READ grantee. A stream ends when the permit, the
 * sign-in or the grant expires, and when the sign-in ends (signed out or pushed out); a grantee's
 * stream is decided again while open (grant_still) and ends when the grant is revoked. The hub's
 * caps and lifetime apply (xgr__sse_serve). */
static int serve_events(xgr__console *c, const xgr_rpc_caller *caller, struct MHD_Connection *conn) {
  const char *owner = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "owner");
  const char *root = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "rootPid");
  const char *last = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Last-Event-ID");
  if (!last) last = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "after");
  if (owner && *owner && !xgr_rpc_is_address(owner))
    return send_text(conn, MHD_HTTP_BAD_REQUEST, "owner: expected an address (0x + 40 hex)\n");
  if (MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "permit"))
    return send_text(conn, MHD_HTTP_BAD_REQUEST,
                     "permit: not taken in the URL (logs and history keep URLs); sign in to the console "
                     "(a cookie) or send it in the Authorization header\n");
  uint64_t expiry = 0, gen = xgr_node_grants_generation(c->n);   /* read before the decision */
  char me[43] = "", tag[67] = "", grantee[64] = "", reader[64] = "";
  if (!caller->auth_none) {
    const char *permit = events_permit(caller);
    int64_t sexp = 0;
    xgr_rpc_caller who = *caller;
    if (!permit && xgr__console_signed_in(c, conn, me, NULL, &sexp, tag)) {
      who.signed_in = me;
      if (!owner || !*owner) owner = me;
    }
    if (!owner || !*owner) return send_text(conn, MHD_HTTP_FORBIDDEN, "not signed in: sign in at /ui/ (docs/CONSOLE.md)\n");
    if (permit && strlen(permit) > 16384) return send_text(conn, MHD_HTTP_FORBIDDEN, "permit: too long\n");
    json_t *p = permit ? json_loads(permit, 0, NULL) : NULL;
    json_t *params = json_pack("{s:s}", "owner", owner);
    if (p) json_object_set_new(params, "permit", p);
    char o[64];
    xgr_error err;
    xgr_error_clear(&err);
    xgr_permit pm;
    xgr_node_access_info acc = {0};
    /* one session's events: READ on it (a grantee's too); every session of the owner: the owner or
     * an operator — the same decision as JSON-RPC's (xgr_rpc_access) */
    int rc = (!permit && !who.signed_in)
                 ? xgr_error_set(&err, XGR_EPERM, "", "not signed in (or the session ended): sign in at /ui/ (docs/CONSOLE.md)")
                 : xgr__console_read_owner_permit(c, &who, params, root ? strtoull(root, NULL, 10) : 0, o, sizeof o, &pm,
                                                  &acc, reader, &err);
    json_decref(params);
    if (rc) {
      char msg[XGR_MSG_MAX + 300];
      snprintf(msg, sizeof msg, "%s%s%s\n", err.path, err.path[0] ? ": " : "", err.message);
      return send_text(conn, MHD_HTTP_FORBIDDEN, msg);
    }
    if (pm.kind) expiry = pm.expiry;
    else if (sexp) expiry = (uint64_t)(sexp / 1000);
    if (acc.via == XGR_NODE_VIA_GRANT) {   /* a grant's stream ends when the grant does (engine clock ms -> s) */
      uint64_t g = acc.expires_at > 0 ? (uint64_t)acc.expires_at / 1000 : 1;
      if (!expiry || g < expiry) expiry = g;
      snprintf(grantee, sizeof grantee, "%s", reader);   /* decided again while open */
    }
  }
  char client[64];
  xgr__rpc_client_addr(caller, client, sizeof client);
  xgr__sse_open o = {.owner = owner,
                     .root = root ? strtoull(root, NULL, 10) : 0,
                     .after = last ? strtoull(last, NULL, 10) : 0,
                     .client = client,
                     .expiry = expiry,
                     .tag = tag[0] ? tag : NULL,
                     .grantee = grantee[0] ? grantee : NULL,
                     .gen = gen};
  return xgr__sse_serve(c->hub, conn, &o);
}

static int serve_ui(void *ctx, const xgr_rpc_caller *caller, struct MHD_Connection *conn, const char *url) {
  xgr__console *c = ctx;
  if (!strcmp(url, "/ui")) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Location", "/ui/");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_MOVED_PERMANENTLY, r);
    MHD_destroy_response(r);
    return ret;
  }
  if (!strcmp(url, "/ui/events")) return serve_events(c, caller, conn);
  if (!strcmp(url, "/ui/graph.svg")) return graph_svg(c, conn);
  const char *path = !strcmp(url, "/ui/") ? "/ui/index.html" : url;
  for (size_t i = 0; i < xgr__console_nassets; i++)
    if (!strcmp(xgr__console_assets[i].path, path))
      return send_buf(conn, MHD_HTTP_OK, xgr__console_assets[i].type, xgr__console_assets[i].data,
                      xgr__console_assets[i].len, MHD_RESPMEM_PERSISTENT, "no-cache");
  return send_text(conn, MHD_HTTP_NOT_FOUND, "no such page\n");
}

static void on_stop(void *ctx) {
  xgr__console *c = ctx;
  xgr__sse_close(c->hub);
}

/* ---- life ------------------------------------------------------------------------------------------ */

/* xgr__sse_access.check for a grantee's open stream: may reader still read session (owner, root)?
 * The node's decision, as when the stream opened (xgr_node_access READ). */
static int grant_still(void *ctx, const char *reader, const char *owner, uint64_t root, uint64_t *expires_s, char *msg,
                       size_t n) {
  xgr__console *c = ctx;
  xgr_node_access_info info;
  xgr_error err;
  xgr_error_clear(&err);
  int rc = xgr_node_access(c->n, reader, owner, root, XGR_NODE_READ, "", &info, &err);
  if (rc) {
    snprintf(msg, n, "%s", err.message);
    return rc;
  }
  *expires_s = info.via == XGR_NODE_VIA_GRANT && info.expires_at > 0 ? (uint64_t)info.expires_at / 1000 : 0;
  return 0;
}

static uint64_t grants_gen(void *ctx) { return xgr_node_grants_generation(((xgr__console *)ctx)->n); }

void xgr__console_grants_changed(xgr__console *c) {
  if (c) xgr__sse_grants_changed(c->hub);
}

xgr__console *xgr__console_new(xgr_node *n, const xgr__sse_limits *lim, const xgr__console_auth_limits *alim) {
  xgr__console *c = xgr__xcalloc(1, sizeof *c);
  xgr__console_auth_init(c, alim);
  c->n = n;
  c->hub = xgr__sse_hub_new(0, 0);
  xgr__sse_set_limits(c->hub, lim);
  xgr__sse_set_access(c->hub, &(xgr__sse_access){.check = grant_still, .generation = grants_gen, .ctx = c});
  pthread_mutex_init(&c->mu, NULL);
  return c;
}

void xgr__console_free(xgr__console *c) {
  if (!c) return;
  xgr__sse_hub_free(c->hub);
  for (size_t i = 0; i < XGR__CONSOLE_CACHE_MAX; i++) {
    xgr_orch_free(c->cache[i].orch);
    free(c->cache[i].svg);
  }
  pthread_mutex_destroy(&c->mu);
  xgr__console_auth_free(c);
  free(c);
}

int xgr__console_register(xgr__console *c, xgr_rpc_server *s) {
  int rc = xgr_rpc_register(s, "xgr.console.info", xgr__console_m_info, c);
  if (!rc) rc = xgr_rpc_register(s, "xgr.console.sessions", xgr__console_m_sessions, c);
  if (!rc) rc = xgr_rpc_register(s, "xgr.console.owners", xgr__console_m_owners, c);
  if (!rc) rc = xgr_rpc_register(s, "xgr.console.session", xgr__console_m_session, c);
  if (!rc) rc = xgr_rpc_register(s, "xgr.console.process", xgr__console_m_process, c);
  if (!rc) rc = xgr_rpc_register(s, "xgr.console.registry", xgr__console_m_registry, c);
  if (!rc) rc = xgr__rpc_register_get(s, "/ui", serve_ui, c);
  if (!rc) rc = xgr__rpc_register_post(s, "/ui/auth", xgr__console_post, c);
  if (!rc) xgr__rpc_set_ui_gate(s, xgr__console_gate, c);
  if (!rc) xgr__console_auth_metrics(c, xgr_rpc_metrics(s));
  if (!rc) xgr__rpc_on_stop(s, on_stop, c);
  if (!rc) xgr__sse_metrics(c->hub, xgr_rpc_metrics(s));
  return rc;
}
