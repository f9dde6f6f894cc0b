/* server.c — a real HTTP server on 127.0.0.1 (libmicrohttpd, ephemeral port) standing in for the
 * APIs that rule documents call in tests. One thread per connection, so a slow route does not
 * hold the others back. Routes:
 *   /json            {"ok":true,"notok":"there","data":{"amount":"65000.5","n":3,
 *                     "nested":{"deep":[1,2,{"x":42}]}}}
 *   /slow?ms=N       the /json body after N milliseconds
 *   /fail500         HTTP 500 with a JSON body
 *   /badjson         200 with "this is {not json"
 *   /big             200 with a JSON string body of 1 MiB + 100 bytes
 *   /exact           200 with a JSON body of exactly 1 MiB
 *   /echo            {"method","path","body","header":<X-Test header>,"ctype":<Content-Type header>}
 * the project's stand-in price sources (the shapes of examples/price_api.py, which the example
 * bundles price_feed.json and price_quorum.json read):
 *   /alpha/v1/ticker/BASE-QUOTE    {"pair":"BASE-QUOTE","last":"<alpha>","n":0}
 *   /beta/quote                    {"quote":{"base":"BTC","quote":"USD","price":<beta>}}
 *   /gamma/rates                   {"rates":{"BTC":{"USD":<gamma>}}}
 * and the same three prices in the shapes the public examples read (tests of the suite 'shared'):
 *   /v2/prices/BTC-USD/spot        Coinbase shape  {"data":{"amount":"<alpha>","base":"BTC",...}}
 *   /api/v2/ticker/btcusd          Bitstamp shape  {"last":"<beta>"}
 *   /api/v3/simple/price           CoinGecko shape {"bitcoin":{"usd":<gamma>}}
 * A price set to a negative value makes its routes answer 503.
 */
#include "server.h"

#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The echoed headers: X-Test into the first 128 bytes of cls, Content-Type into the next 128. */
static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  if (!strcasecmp(key, "X-Test")) snprintf(cls, 128, "%s", value);
  if (!strcasecmp(key, "Content-Type")) snprintf((char *)cls + 128, 128, "%s", value);
  return MHD_YES;
}

typedef struct reqbody {
  char *p;
  size_t n;
} reqbody;

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *body, size_t len) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(r, "Content-Type", "application/json");
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static const char json_body[] =
    "{\"ok\":true,\"notok\":\"there\",\"data\":{\"amount\":\"65000.5\",\"n\":3,"
    "\"nested\":{\"deep\":[1,2,{\"x\":42}]}}}";

/* The price routes with a fixed path: the source whose price they answer (0 alpha, 1 beta,
 * 2 gamma) and the body, a format with one %.2f for the price. */
static const struct price_route {
  const char *path;
  int source;
  const char *body;
} price_routes[] = {
    {"/beta/quote", 1, "{\"quote\":{\"base\":\"BTC\",\"quote\":\"USD\",\"price\":%.2f}}"},
    {"/gamma/rates", 2, "{\"rates\":{\"BTC\":{\"USD\":%.2f}}}"},
    {"/v2/prices/BTC-USD/spot", 0, "{\"data\":{\"amount\":\"%.2f\",\"base\":\"BTC\",\"currency\":\"USD\"}}"},
    {"/api/v2/ticker/btcusd", 1, "{\"last\":\"%.2f\",\"volume\":\"12.5\"}"},
    {"/api/v3/simple/price", 2, "{\"bitcoin\":{\"usd\":%.2f}}"},
};

static const struct price_route *price_route(const char *url) {
  for (size_t i = 0; i < sizeof price_routes / sizeof price_routes[0]; i++)
    if (!strcmp(url, price_routes[i].path)) return &price_routes[i];
  return NULL;
}

static double price_of(const test_server *s, int source) { return source == 0 ? s->alpha : source == 1 ? s->beta : s->gamma; }

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **state) {
  (void)version;
  test_server *s = cls;
  if (!*state) {  /* first call: set up body collection */
    reqbody *b = calloc(1, sizeof *b);
    *state = b;
    return MHD_YES;
  }
  reqbody *b = *state;
  if (*upload_size) {
    b->p = realloc(b->p, b->n + *upload_size + 1);
    memcpy(b->p + b->n, upload, *upload_size);
    b->n += *upload_size;
    b->p[b->n] = 0;
    *upload_size = 0;
    return MHD_YES;
  }
  char buf[512];
  enum MHD_Result ret;
  const struct price_route *route;
  if (!strcmp(url, "/json")) {
    ret = reply(c, 200, json_body, strlen(json_body));
  } else if (!strcmp(url, "/slow")) {
    const char *ms = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "ms");
    long n = ms ? atol(ms) : 1000;
    struct timespec ts = {n / 1000, (n % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    ret = reply(c, 200, json_body, strlen(json_body));
  } else if (!strcmp(url, "/fail500")) {
    ret = reply(c, 500, "{\"ok\":true,\"error\":\"boom\"}", 26);
  } else if (!strcmp(url, "/badjson")) {
    ret = reply(c, 200, "this is {not json", 17);
  } else if (!strcmp(url, "/big") || !strcmp(url, "/exact")) {
    size_t n = !strcmp(url, "/big") ? (1u << 20) + 100 : (1u << 20);
    char *big = malloc(n);
    memset(big, 'a', n);
    big[0] = '"';
    big[n - 1] = '"';
    ret = reply(c, 200, big, n);
    free(big);
  } else if (!strcmp(url, "/echo")) {
    char hdr[256] = "";
    MHD_get_connection_values(c, MHD_HEADER_KIND, collect, hdr);
    /* escaped: the body may hold quotes (JSON bodies) */
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s}", "method", method, "path", url, "body", b->p ? b->p : "", "header",
                          hdr, "ctype", hdr + 128);
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    ret = reply(c, 200, t ? t : "{}", t ? strlen(t) : 2);
    free(t);
  } else if (!strncmp(url, "/alpha/v1/ticker/", 17) && strchr(url + 17, '-') && s->alpha >= 0) {
    snprintf(buf, sizeof buf, "%.2f", s->alpha);
    json_t *o = json_pack("{s:s, s:s, s:i}", "pair", url + 17, "last", buf, "n", 0);  /* the pair as asked */
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    ret = reply(c, 200, t ? t : "{}", t ? strlen(t) : 2);
    free(t);
  } else if ((route = price_route(url)) && price_of(s, route->source) >= 0) {
    snprintf(buf, sizeof buf, route->body, price_of(s, route->source));
    ret = reply(c, 200, buf, strlen(buf));
  } else if (!strncmp(url, "/alpha/", 7) || !strncmp(url, "/beta/", 6) || !strncmp(url, "/gamma/", 7) ||
             !strncmp(url, "/v2/", 4) || !strncmp(url, "/api/", 5)) {
    ret = reply(c, 503, "{\"error\":\"unavailable\"}", 23);
  } else {
    ret = reply(c, 404, "{\"error\":\"not found\"}", 21);
  }
  return ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode t) {
  (void)cls, (void)c, (void)t;
  reqbody *b = *state;
  if (b) {
    free(b->p);
    free(b);
  }
  *state = NULL;
}

int test_server_start(test_server *s) {
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  s->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL, 0,
                               NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_NOTIFY_COMPLETED,
                               completed, s, MHD_OPTION_END);
  if (!s->daemon) return -1;
  const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
  s->port = i ? i->port : 0;
  snprintf(s->base, sizeof s->base, "http://127.0.0.1:%u", (unsigned)s->port);
  return s->port ? 0 : -1;
}

void test_server_stop(test_server *s) {
  if (s->daemon) MHD_stop_daemon(s->daemon);
  s->daemon = NULL;
}
