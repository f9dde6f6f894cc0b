/* console_auth.c — signing in to the console (docs/CONSOLE.md, "Signing in"; docs/SECURITY.md,
 * "Console sign-in"): Sign-In with Ethereum (EIP-4361, xgr/siwe.h) answered by a session cookie.
 *
 *   POST /ui/auth/nonce    a fresh nonce and the fields of the message to sign (domain = the Host the
 *                          request reached, uri, chain id, issued at, expiration);
 *   POST /ui/auth/signin   {"message","signature"}: the signature is verified (secp256k1 recovery),
 *                          the nonce used up (single use, whatever the outcome), and a console
 *                          session made: cookie `xgr_console` (HttpOnly, SameSite=Strict, Path=/ui,
 *                          Max-Age = the session's life, Secure when the page is served over https)
 *                          and a CSRF token in the answer;
 *   POST /ui/auth/me       who the cookie signs in (and the CSRF token), or that nobody is;
 *   POST /ui/auth/signout  ends the cookie's session on the server.
 *
 * Both tables are bounded: nonces (--console-max-nonces; each lives 5 minutes; a new one when
 * full evicts the oldest) and sessions (--console-max-sessions; a new sign-in when full ends the
 * session that expires first). Tokens are 32 random bytes; the table keeps their keccak-256 only.
 * This file only says WHO the caller is (the address the cookie proves); what that address may do
 * is decided where every JSON-RPC call's is (xgr_rpc_authorize_permit, authorize.c), through
 * caller->signed_in. The gate of POST /ui/rpc (xgr__console_gate) also checks the CSRF token.
 */
#include "rpc/console_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include <microhttpd.h>

#include "util/alloc.h"
#include "xgr/auth.h"
#include "xgr/keccak.h"
#include "xgr/siwe.h"

#define NONCE_MS (5 * 60 * 1000)   /* a nonce (and the message signed with it) lives this long */
#define COOKIE "xgr_console"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int random_hex(size_t nbytes, char *out) {
  uint8_t b[32];
  size_t got = 0;
  for (int i = 0; got < nbytes && i < 16; i++) {
    ssize_t k = getrandom(b + got, nbytes - got, 0);
    if (k > 0) got += (size_t)k;
  }
  if (got < nbytes) return -1;
  static const char hx[] = "0123456789abcdef";
  for (size_t i = 0; i < nbytes; i++) {
    out[2 * i] = hx[b[i] >> 4];
    out[2 * i + 1] = hx[b[i] & 15];
  }
  out[2 * nbytes] = '\0';
  return 0;
}

/* Constant-time equality of two NUL-terminated strings of the same expected length. */
static bool same(const char *a, const char *b) {
  size_t n = strlen(a);
  if (n != strlen(b)) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < n; i++) d |= (unsigned char)(a[i] ^ b[i]);
  return !d;
}

void xgr__console_auth_init(xgr__console *c, const xgr__console_auth_limits *lim) {
  c->alim = *lim;
  if (!c->alim.max_nonces) c->alim.max_nonces = XGR_RPCD_CONSOLE_MAX_NONCES;
  if (!c->alim.max_sessions) c->alim.max_sessions = XGR_RPCD_CONSOLE_MAX_SESSIONS;
  if (!c->alim.session_secs) c->alim.session_secs = XGR_RPCD_CONSOLE_SESSION_SECS;
  c->nonces = xgr__xcalloc(c->alim.max_nonces, sizeof *c->nonces);
  c->sess = xgr__xcalloc(c->alim.max_sessions, sizeof *c->sess);
  c->secp = xgr_secp_new();
  pthread_mutex_init(&c->amu, NULL);
}

void xgr__console_auth_free(xgr__console *c) {
  free(c->nonces);
  free(c->sess);
  xgr_secp_free(c->secp);
  pthread_mutex_destroy(&c->amu);
}

/* Drop expired entries (under amu). */
static void sweep(xgr__console *c, int64_t now) {
  for (unsigned i = 0; i < c->nnonces;)
    if (c->nonces[i].exp <= now) c->nonces[i] = c->nonces[--c->nnonces];
    else i++;
  for (unsigned i = 0; i < c->nsess;)
    if (c->sess[i].exp <= now) c->sess[i] = c->sess[--c->nsess];
    else i++;
}

/* ---- the cookie ---------------------------------------------------------------------------------- */

/* The value of cookie `xgr_console` in the Cookie header into out[n]; false when absent. */
static bool cookie_token(struct MHD_Connection *conn, char *out, size_t n) {
  const char *v = MHD_lookup_connection_value(conn, MHD_COOKIE_KIND, COOKIE);
  if (!v || strlen(v) != 64) return false;
  snprintf(out, n, "%s", v);
  return true;
}

static void token_key(const char *token, char key[67]) { xgr_keccak256_hex(token, strlen(token), key); }

bool xgr__console_signed_in(xgr__console *c, struct MHD_Connection *conn, char addr[43], char csrf[65], int64_t *exp,
                            char key_out[67]) {
  char tok[80], key[67];
  if (!cookie_token(conn, tok, sizeof tok)) return false;
  token_key(tok, key);
  int64_t now = now_ms();
  bool found = false;
  pthread_mutex_lock(&c->amu);
  for (unsigned i = 0; i < c->nsess && !found; i++)
    if (c->sess[i].exp > now && same(c->sess[i].key, key)) {
      found = true;
      snprintf(addr, 43, "%s", c->sess[i].addr);
      if (csrf) snprintf(csrf, 65, "%s", c->sess[i].csrf);
      if (exp) *exp = c->sess[i].exp;
      if (key_out) snprintf(key_out, 67, "%s", c->sess[i].key);
    }
  pthread_mutex_unlock(&c->amu);
  return found;
}

/* ---- answers ------------------------------------------------------------------------------------- */

static int answer(struct MHD_Connection *conn, unsigned status, json_t *body, const char *cookie, unsigned *logged) {
  char *s = json_dumps(body, JSON_COMPACT);
  json_decref(body);
  if (!s) return MHD_NO;
  struct MHD_Response *r = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(s);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", "application/json");
  MHD_add_response_header(r, "Cache-Control", "no-store");
  if (cookie) MHD_add_response_header(r, "Set-Cookie", cookie);
  *logged = status;
  int ret = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return ret;
}

static int fail(struct MHD_Connection *conn, unsigned status, const char *path, const char *msg, unsigned *logged) {
  return answer(conn, status, json_pack("{s:s, s:s}", "error", msg, "path", path ? path : ""), NULL, logged);
}

/* Served over TLS (a terminating proxy in front of xgrd): the page's Origin is https, or the
 * proxy says so in X-Forwarded-Proto. Then the cookie is Secure. */
static bool over_tls(struct MHD_Connection *conn) {
  const char *o = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
  const char *p = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Forwarded-Proto");
  return (o && !strncasecmp(o, "https://", 8)) || (p && !strcasecmp(p, "https"));
}

static void count(xgr__console *c, const char *outcome) {
  char l[64];
  snprintf(l, sizeof l, "result=\"%s\"", outcome);
  xgr_counter_add(xgr_metrics_counter(c->metrics, "xgr_console_signins_total",
                                      "Console sign-ins (EIP-4361), by result (ok, refused)", l), 1);
}

static int post_nonce(xgr__console *c, const xgr_rpc_caller *caller, struct MHD_Connection *conn, unsigned *st) {
  const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
  if (!host || !*host || strlen(host) > 200) return fail(conn, 400, "Host", "a sign-in needs the Host header (the domain the message names)", st);
  char nonce[33];
  if (random_hex(16, nonce)) return fail(conn, 503, "", "no randomness from getrandom()", st);
  int64_t now = now_ms();
  pthread_mutex_lock(&c->amu);
  sweep(c, now);
  if (c->nnonces == c->alim.max_nonces) {   /* full: the oldest goes */
    unsigned old = 0;
    for (unsigned i = 1; i < c->nnonces; i++)
      if (c->nonces[i].exp < c->nonces[old].exp) old = i;
    c->nonces[old] = c->nonces[--c->nnonces];
    c->nonces_evicted++;
  }
  snprintf(c->nonces[c->nnonces].v, sizeof c->nonces[0].v, "%s", nonce);
  c->nonces[c->nnonces++].exp = now + NONCE_MS;
  pthread_mutex_unlock(&c->amu);
  char ia[32], ex[32], uri[300];
  xgr_siwe_time(now, ia);
  xgr_siwe_time(now + NONCE_MS, ex);
  snprintf(uri, sizeof uri, "%s://%s/ui/", over_tls(conn) ? "https" : "http", host);
  return answer(conn, 200,
                json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:I}", "nonce", nonce, "domain", host, "uri", uri,
                          "version", "1", "chainId", (json_int_t)xgr_auth_chain_id(caller->auth), "issuedAt", ia,
                          "expirationTime", ex, "statement", "Sign in to the xgr console.", "nonceSecs",
                          (json_int_t)(NONCE_MS / 1000)),
                NULL, st);
}

/* Use nonce up: true when it was issued and alive (it is gone after this call either way). */
static bool take_nonce(xgr__console *c, const char *nonce, int64_t now) {
  bool ok = false;
  pthread_mutex_lock(&c->amu);
  sweep(c, now);
  for (unsigned i = 0; i < c->nnonces && !ok; i++)
    if (same(c->nonces[i].v, nonce)) {
      ok = true;
      c->nonces[i] = c->nonces[--c->nnonces];
    }
  pthread_mutex_unlock(&c->amu);
  return ok;
}

static int post_signin(xgr__console *c, const xgr_rpc_caller *caller, struct MHD_Connection *conn, const json_t *in,
                       unsigned *st) {
  const char *msg = json_string_value(json_object_get(in, "message"));
  const char *sig = json_string_value(json_object_get(in, "signature"));
  const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
  if (!msg) return count(c, "refused"), fail(conn, 400, "message", "missing; expected the signed EIP-4361 message (a string)", st);
  if (!sig) return count(c, "refused"), fail(conn, 400, "signature", "missing; expected the personal_sign signature (0x + 130 hex)", st);
  int64_t now = now_ms();
  xgr_siwe m;
  xgr_error err;
  xgr_error_clear(&err);
  xgr_siwe_expect x = {.domain = host ? host : "", .chain_id = xgr_auth_chain_id(caller->auth), .now_ms = now,
                       .max_age_ms = NONCE_MS};
  /* the nonce is used up first: a message is presented once, whatever comes of it */
  int rc = xgr_siwe_parse(msg, &m, &err);
  if (!rc && !take_nonce(c, m.nonce, now)) {
    count(c, "refused");
    return fail(conn, 403, "message.nonce",
                "is not a nonce this xgrd issued, or it was used already or expired (a nonce works once, for 5 minutes): "
                "fetch a new one (POST /ui/auth/nonce)", st);
  }
  if (!rc) rc = xgr_siwe_verify(c->secp, msg, sig, &x, &m, &err);
  if (rc) {
    count(c, "refused");
    char t[XGR_MSG_MAX + 300];
    snprintf(t, sizeof t, "%s%s%s", err.path, err.path[0] ? ": " : "", err.message);
    return fail(conn, rc == XGR_EPERM ? 403 : 400, err.path, t, st);
  }
  char token[65], csrf[65], key[67];
  if (random_hex(32, token) || random_hex(32, csrf)) return fail(conn, 503, "", "no randomness from getrandom()", st);
  token_key(token, key);
  int64_t exp = now + (int64_t)c->alim.session_secs * 1000;
  char gone[67] = "";
  pthread_mutex_lock(&c->amu);
  sweep(c, now);
  if (c->nsess == c->alim.max_sessions) {   /* full: the session that expires first ends */
    unsigned old = 0;
    for (unsigned i = 1; i < c->nsess; i++)
      if (c->sess[i].exp < c->sess[old].exp) old = i;
    memcpy(gone, c->sess[old].key, sizeof gone);
    c->sess[old] = c->sess[--c->nsess];
    c->sess_evicted++;
  }
  xgr__console_session *s = &c->sess[c->nsess++];
  snprintf(s->key, sizeof s->key, "%s", key);
  snprintf(s->csrf, sizeof s->csrf, "%s", csrf);
  snprintf(s->addr, sizeof s->addr, "%s", m.address);
  s->exp = exp;
  pthread_mutex_unlock(&c->amu);
  if (gone[0]) xgr__sse_end_tagged(c->hub, gone);   /* its event streams end with it */
  count(c, "ok");
  char cookie[256];
  snprintf(cookie, sizeof cookie, COOKIE "=%s; Path=/ui; Max-Age=%u; HttpOnly; SameSite=Strict%s", token,
           c->alim.session_secs, over_tls(conn) ? "; Secure" : "");
  return answer(conn, 200, json_pack("{s:s, s:s, s:I, s:s}", "address", m.address, "csrf", csrf, "expiresAt",
                                     (json_int_t)exp, "auth", "permit"),
                cookie, st);
}

static int post_me(xgr__console *c, const xgr_rpc_caller *caller, struct MHD_Connection *conn, unsigned *st) {
  if (caller->auth_none) return answer(conn, 200, json_pack("{s:s}", "auth", "none"), NULL, st);
  char addr[43], csrf[65];
  int64_t exp;
  if (!xgr__console_signed_in(c, conn, addr, csrf, &exp, NULL))
    return answer(conn, 200, json_pack("{s:s, s:n}", "auth", "permit", "address"), NULL, st);
  return answer(conn, 200,
                json_pack("{s:s, s:s, s:s, s:I}", "auth", "permit", "address", addr, "csrf", csrf, "expiresAt", (json_int_t)exp),
                NULL, st);
}

static int post_signout(xgr__console *c, struct MHD_Connection *conn, unsigned *st) {
  char tok[80], key[67];
  bool ended = false;
  if (cookie_token(conn, tok, sizeof tok)) {
    token_key(tok, key);
    pthread_mutex_lock(&c->amu);
    for (unsigned i = 0; i < c->nsess && !ended; i++)
      if (same(c->sess[i].key, key)) {
        c->sess[i] = c->sess[--c->nsess];
        ended = true;
      }
    pthread_mutex_unlock(&c->amu);
    if (ended) xgr__sse_end_tagged(c->hub, key);   /* its event streams end with it */
  }
  return answer(conn, 200, json_pack("{s:b}", "signedOut", ended),
                COOKIE "=; Path=/ui; Max-Age=0; HttpOnly; SameSite=Strict", st);
}

int xgr__console_post(void *ctx, const xgr_rpc_caller *caller, struct MHD_Connection *conn, const char *url,
                      const char *body, size_t len, unsigned *st) {
  xgr__console *c = ctx;
  if (!strcmp(url, "/ui/auth/me")) return post_me(c, caller, conn, st);
  if (!strcmp(url, "/ui/auth/signout")) return post_signout(c, conn, st);
  bool nonce = !strcmp(url, "/ui/auth/nonce"), signin = !strcmp(url, "/ui/auth/signin");
  if (!nonce && !signin) return fail(conn, 404, "", "no such path", st);
  if (caller->auth_none || !caller->auth)
    return fail(conn, 404, "", "xgrd runs with --auth none: the console needs no sign-in", st);
  if (nonce) return post_nonce(c, caller, conn, st);
  json_t *in = json_loadb(body ? body : "", len, 0, NULL);
  if (!json_is_object(in)) {
    json_decref(in);
    return fail(conn, 400, "", "expected a JSON object {\"message\", \"signature\"}", st);
  }
  int ret = post_signin(c, caller, conn, in, st);
  json_decref(in);
  return ret;
}

/* The console's JSON-RPC (POST /ui/rpc): the methods the pages call. */
static const char *const ui_methods[] = {"xgr.console.info", "xgr.console.sessions", "xgr.console.owners",
                                         "xgr.console.session", "xgr.console.process", "xgr.console.registry",
                                         "xgr.kill", "xgr.pause", "xgr.resume", "xgr_wakeUpProcess",
                                         "xgr.batchPreview", "xgr.batchStart", "xgr.batchGet", "xgr.batchCancel",
                                         "xgr.batchList", "xgr.retry", "xgr.fork", "xgr.migrateSessions",
                                         "xgr.listVersions", "xgr_getCoreAddrs", NULL};

unsigned xgr__console_gate(void *ctx, struct MHD_Connection *conn, xgr_rpc_caller *caller, char addr[43],
                           const char **msg) {
  xgr__console *c = ctx;
  caller->only = ui_methods;
  if (caller->auth_none) return 0;   /* loopback development: as POST / */
  char csrf[65];
  if (!xgr__console_signed_in(c, conn, addr, csrf, NULL, NULL)) {
    *msg = "not signed in (or the session ended): sign in at /ui/ (docs/CONSOLE.md, \"Signing in\")";
    return MHD_HTTP_UNAUTHORIZED;
  }
  const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-XGR-CSRF");
  if (!h || !same(h, csrf)) {
    *msg = "the X-XGR-CSRF header is missing or is not this session's token (a request from another page?)";
    return MHD_HTTP_FORBIDDEN;
  }
  caller->signed_in = addr;
  return 0;
}

static void collect(void *ctx, xgr_metrics_out *out) {
  xgr__console *c = ctx;
  pthread_mutex_lock(&c->amu);
  sweep(c, now_ms());
  unsigned nn = c->nnonces, ns = c->nsess;
  uint64_t ne = c->nonces_evicted, se = c->sess_evicted;
  pthread_mutex_unlock(&c->amu);
  xgr_metrics_family(out, "xgr_console_nonces", "gauge", "Console sign-in nonces issued and not yet used or expired (cap --console-max-nonces)");
  xgr_metrics_line(out, "xgr_console_nonces", "", nn);
  xgr_metrics_family(out, "xgr_console_nonces_evicted_total", "counter", "Unused sign-in nonces dropped because the table was full");
  xgr_metrics_line(out, "xgr_console_nonces_evicted_total", "", (double)ne);
  xgr_metrics_family(out, "xgr_console_sessions", "gauge", "Live console sessions (cap --console-max-sessions)");
  xgr_metrics_line(out, "xgr_console_sessions", "", ns);
  xgr_metrics_family(out, "xgr_console_sessions_evicted_total", "counter", "Console sessions ended early because the table was full");
  xgr_metrics_line(out, "xgr_console_sessions_evicted_total", "", (double)se);
}

void xgr__console_auth_metrics(xgr__console *c, xgr_metrics *m) {
  c->metrics = m;
  xgr_metrics_collector(m, "rpc.console_auth", collect, c);
}
