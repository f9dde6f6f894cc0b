/* client.c — JSON-RPC over HTTP for the CLI's daemon commands (see client.h): one libcurl easy
 * handle per call (a CLI makes one or a few calls), a request id per call, and the error output
 * every command shares. */
#include "cli/client.h"

#include <assert.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "xgr/alloc.h"
#include "xgr/value.h"

const char xgr_client_opts_help[] =
    "  --url URL       xgrd's address (default " XGR_CLIENT_DEFAULT_URL ", or $XGR_URL)\n"
    "  --from ADDR     the caller's address (sent as \"from\"; with --auth none it is the identity)\n"
    "  --json          print the daemon's answer as JSON\n"
    "  --timeout MS    give up after MS milliseconds (default 30000)\n"
    "  --key FILE      sign: attach the permit each call needs (default $XGR_KEY_FILE; xgr key new)\n";

void xgr_client_init(xgr_client *c) {
  memset(c, 0, sizeof *c);
  const char *u = getenv("XGR_URL");
  c->url = u && *u ? u : XGR_CLIENT_DEFAULT_URL;
  c->timeout_ms = 30000;
  const char *k = getenv("XGR_KEY_FILE");
  if (k && *k) xgr_client_load_key(c, k);
}

/* Apply shared option ch with its value v to c: 1 when ch is one, 0 when it is the command's own,
 * -1 when the value is bad (reported). */
static int client_opt(xgr_client *c, int ch, const char *v) {
  switch (ch) {
    case XGR_CLIENT_OPT_JSON: c->json = true; return 1;
    case XGR_CLIENT_OPT_URL: c->url = v; return 1;
    case XGR_CLIENT_OPT_KEY: return xgr_client_load_key(c, v) ? -1 : 1;
    case XGR_CLIENT_OPT_FROM: c->from = v, c->from_is_key = false; return 1;
    case XGR_CLIENT_OPT_TIMEOUT: {
      char *end;
      long t = strtol(v, &end, 10);
      if (*end || end == v || t <= 0) {
        fprintf(stderr, "xgr: --timeout %s: expected milliseconds > 0\n", v);
        return -1;
      }
      c->timeout_ms = t;
      return 1;
    }
    default: return 0;
  }
}

int xgr_client_getopt(xgr_client *c, int argc, char **argv, const struct option *longopts, const char *prog,
                      void (*usage)(FILE *), int *rc) {
  for (;;) {
    int ch = xgr_cli_getopt(argc, argv, "h", longopts, prog);
    if (ch == -1) return -1;
    int r = ch == '?' ? -1 : client_opt(c, ch, optarg);
    if (r > 0) continue;
    if (r < 0) {
      *rc = XGR_EXIT_USAGE;
      return -2;
    }
    if (ch != 'h') return ch;
    usage(stdout);
    *rc = XGR_EXIT_OK;
    return -2;
  }
}

int xgr_client_owner_pid(xgr_client *c, int argc, char **argv, const char *name, void (*usage)(FILE *),
                         const char **owner, const char **pid) {
  static const struct option opts[] = {{"owner", required_argument, NULL, 'o'}, XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  char prog[64];
  snprintf(prog, sizeof prog, "xgr %s", name);
  *owner = *pid = NULL;
  int ch, rc;
  optind = 1;
  while ((ch = xgr_client_getopt(c, argc, argv, opts, prog, usage, &rc)) != -1) {
    if (ch == -2) return rc;
    assert(ch == 'o');   /* the only own option */
    *owner = optarg;
  }
  if (optind < argc) *pid = argv[optind];
  if (optind + 1 < argc) {
    fprintf(stderr, "%s: unexpected '%s' (one PID)\n", prog, argv[optind + 1]);
    return XGR_EXIT_USAGE;
  }
  if (!*owner) *owner = c->from;
  if (*owner && *pid) return -1;
  fprintf(stderr, "%s: %s is required\n\n", prog, *pid ? "--owner" : "PID");
  usage(stderr);
  return XGR_EXIT_USAGE;
}

typedef struct rbuf {
  char *p;
  size_t n;
} rbuf;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud) {
  rbuf *b = ud;
  size_t n = size * nmemb;
  if (b->n + n > (64u << 20)) return 0;   /* a runaway answer */
  char *np = xgr_alloc_resize(b->p, b->n + n + 1);
  memcpy(np + b->n, ptr, n);
  b->n += n;
  np[b->n] = 0;
  b->p = np;
  return n;
}

/* POST body (JSON text) to url; the answer into *b and the HTTP status into *status. 0, or the
 * exit code with the reason printed (the daemon cannot be reached). */
static int http_post(const xgr_client *c, const char *cmd, const char *url, const char *body, rbuf *b, long *status) {
  CURL *h = curl_easy_init();
  if (!h || !body) {
    if (h) curl_easy_cleanup(h);
    fprintf(stderr, "xgr %s: cannot set up an HTTP request\n", cmd);
    return XGR_EXIT_HARD;
  }
  struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  CURLcode cc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
  curl_slist_free_all(hdr);
  curl_easy_cleanup(h);
  if (cc != CURLE_OK) {
    fprintf(stderr, "xgr %s: cannot reach xgrd at %s: %s (is it running? start it with `xgrd --auth none`, or pass "
                    "--url)\n", cmd, c->url, curl_easy_strerror(cc));
    free(b->p);
    b->p = NULL;
    return XGR_EXIT_USAGE;
  }
  return 0;
}

/* POST body (JSON text) to url and read the answer: a JSON object with HTTP 200 into *ans (a new
 * reference), else the reason printed (the answer's "error" when it has one) and the exit code. */
static int post_json(const xgr_client *c, const char *cmd, const char *url, const char *body, json_t **ans) {
  *ans = NULL;
  rbuf b = {0};
  long status = 0;
  int rc = http_post(c, cmd, url, body, &b, &status);
  if (rc) return rc;
  xgr_error pe;
  if (b.p && xgr_json_parse_exact(b.p, b.n, ans, &pe)) *ans = NULL;
  if (status != 200 || !json_is_object(*ans)) {
    const char *why = json_string_value(json_object_get(*ans, "error"));
    fprintf(stderr, "xgr %s: xgrd at %s answered HTTP %ld: %.300s\n", cmd, url, status, why ? why : b.p ? b.p : "(no body)");
    free(b.p);
    json_decref(*ans);
    *ans = NULL;
    return status >= 400 && status < 500 ? XGR_EXIT_FAIL : XGR_EXIT_HARD;
  }
  free(b.p);
  return 0;
}

void xgr_client_origin(const xgr_client *c, char *out, size_t n) {
  const char *p = strstr(c->url, "://");
  p = p ? p + 3 : c->url;
  size_t k = (size_t)(p - c->url) + strcspn(p, "/?#");
  snprintf(out, n, "%.*s", (int)k, c->url);
}

int xgr_client_post(const xgr_client *c, const char *cmd, const char *path, const json_t *body, json_t **answer) {
  *answer = NULL;
  char url[1024];
  xgr_client_origin(c, url, sizeof url);
  snprintf(url + strlen(url), sizeof url - strlen(url), "%s", path);
  char *text = xgr_json_dumps_compact(body);
  int rc = post_json(c, cmd, url, text, answer);
  free(text);
  return rc;
}

/* Whether err refuses a permit because it was used before (xgr_auth_consume's answer). */
static bool permit_used(const json_t *err) {
  const char *m = json_string_value(json_object_get(err, "message"));
  const char *path = json_string_value(json_object_get(json_object_get(err, "data"), "path"));
  return json_integer_value(json_object_get(err, "code")) == -32007 && path && !strcmp(path, "permit") && m &&
         strstr(m, "already used");
}

int xgr_client_call(const xgr_client *c, const char *cmd, const char *method, json_t *params, json_t **result) {
  *result = NULL;
  if (c->key_failed) {
    json_decref(params);
    return XGR_EXIT_USAGE;
  }
  /* A permit's digest is its identity and a control permit works once. Two calls that sign the
   * same message (same action and session in the same second) would carry the same permit, so a
   * permit this client signed that xgrd finds used is signed again one second later: a burst of
   * N identical calls costs at most N(N+1)/2 requests, and nothing was done by a refused one. */
  json_t *ans = NULL;
  for (uint64_t later = 0;; later++) {
    bool attached = false, add_from = c->from && json_is_object(params) && !json_object_get(params, "from");
    int rc = xgr_client_attach_permit(c, cmd, method, params, later, &attached);
    if (!rc && add_from) json_object_set_new(params, "from", json_string(c->from));
    if (!rc) {
      json_t *rq = json_pack("{s:s, s:i, s:s, s:O}", "jsonrpc", "2.0", "id", 1, "method", method, "params", params);
      char *body = xgr_json_dumps_compact(rq);   /* exact integers beyond int64 as numbers */
      json_decref(rq);
      rc = post_json(c, cmd, c->url, body, &ans);
      free(body);
    }
    if (rc) {
      json_decref(params);
      return rc;
    }
    if (!attached || later >= XGR_CLIENT_PERMIT_RESIGN || !permit_used(json_object_get(ans, "error"))) break;
    json_decref(ans);
    ans = NULL;
    json_object_del(params, "permit");
    if (add_from) json_object_del(params, "from");
  }
  json_decref(params);
  json_t *err = json_object_get(ans, "error");
  if (err) {
    const char *path = json_string_value(json_object_get(json_object_get(err, "data"), "path"));
    fprintf(stderr, "xgr %s: %s failed: %s (code %lld%s%s)\n", cmd, method,
            json_string_value(json_object_get(err, "message")) ? json_string_value(json_object_get(err, "message")) : "?",
            (long long)json_integer_value(json_object_get(err, "code")), path && *path ? ", at " : "",
            path && *path ? path : "");
    json_decref(ans);
    return XGR_EXIT_FAIL;
  }
  json_t *r = json_object_get(ans, "result");
  if (!r) {
    fprintf(stderr, "xgr %s: xgrd's answer has neither result nor error\n", cmd);
    json_decref(ans);
    return XGR_EXIT_HARD;
  }
  *result = json_incref(r);
  json_decref(ans);
  return 0;
}

void xgr_client_print_json(const json_t *j) {
  char *s = xgr_json_dumps(j, XGR_JSON_PRETTY);
  if (s) puts(s);
  free(s);
}

char *xgr_client_read_file(const char *cmd, const char *path, size_t max, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "xgr %s: cannot open %s\n", cmd, path);
    return NULL;
  }
  char *p = xgr_alloc_bytes(max + 1);
  size_t n = fread(p, 1, max + 1, f);
  bool bad = ferror(f);
  fclose(f);
  if (bad || n > max) {
    fprintf(stderr, "xgr %s: cannot read %s%s\n", cmd, path, n > max ? " (too large)" : "");
    free(p);
    return NULL;
  }
  p[n] = 0;
  *len = n;
  return p;
}

void xgr_client_time(long long secs, char *buf, size_t n) {
  time_t t = (time_t)secs;
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
}
