/* test_sse.c — the console's event hub (src/rpc/sse.c) when nobody reads: events are wanted only
 * while a stream is open or for the hub's keep time after one ended or an id was handed out; the
 * first unwanted event leaves one hole in the ids (once, until the next event), and a stream that
 * resumes from before the hole gets `event: reset`, one that resumes from the hole or starts new
 * does not. A stream of one owner stays asleep through another owner's events and gets no reset
 * for them. A stream opened through a grant stops at once when the grant goes: the next event of
 * its session is not sent, `event: end` {"reason":"access revoked"} is, whether an event or
 * xgr__sse_grants_changed makes it decide again. Streams are real: an xgr_rpc_server on 127.0.0.1 serving the hub at /ev, read with
 * libcurl until a short timeout (a stream never ends by itself). */
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <microhttpd.h>

#include "rpc/console_service_impl.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "xgr/rpc.h"

static xgr_rpc_server *srv;
static xgr__sse_hub *hub;
static int port;

static int serve(void *ctx, const xgr_rpc_caller *caller, struct MHD_Connection *c, const char *url) {
  (void)caller;
  (void)url;
  const char *last = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Last-Event-ID");
  const char *owner = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "owner");
  const char *grantee = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "grantee");
  const char *root = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "root");
  xgr__sse_open o = {.owner = owner, .after = last ? strtoull(last, NULL, 10) : 0, .client = "127.0.0.1",
                     .grantee = grantee, .root = root ? strtoull(root, NULL, 10) : 0};
  return xgr__sse_serve(ctx, c, &o);
}

static void on_stop(void *ctx) { xgr__sse_close(ctx); }

static size_t take(char *p, size_t size, size_t n, void *ctx) {
  xgr__buf_put(ctx, p, size * n);
  return size * n;
}

/* What a stream of owner's events (NULL: every owner's) from Last-Event-ID `after` (0: none) sends
 * within ms milliseconds (malloc'd). */
static char *stream_of(const char *owner, unsigned long long after, long ms) {
  CURL *c = curl_easy_init();
  assert_non_null(c);
  char url[128], hdr[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/ev%s%s", port, owner ? "?owner=" : "", owner ? owner : "");
  snprintf(hdr, sizeof hdr, "Last-Event-ID: %llu", after);
  struct curl_slist *h = after ? curl_slist_append(NULL, hdr) : NULL;
  xgr_buf b = {0};
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, take);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
  assert_int_equal(curl_easy_perform(c), CURLE_OPERATION_TIMEDOUT);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  xgr__buf_putc(&b, '\0');
  return b.p;
}

static char *stream(unsigned long long after) { return stream_of(NULL, after, 400); }

static void publish(const char *text) { xgr__sse_publish_owned(hub, "", 1, xgr__xstrdup(text)); }

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The access decision the hub asks again (xgr__sse_access): grantee 0xg may read session 0xc/5
 * while `granted`; `gen` is the grants' generation. */
static atomic_bool granted = true;
static _Atomic uint64_t gen = 1;
static atomic_uint checks;

static int fake_check(void *ctx, const char *reader, const char *owner, uint64_t root, uint64_t *exp, char *msg,
                      size_t n) {
  (void)ctx;
  atomic_fetch_add(&checks, 1);
  assert_string_equal(reader, "0xg");
  assert_string_equal(owner, "0xc");
  assert_int_equal(root, 5);
  *exp = 0;
  if (atomic_load(&granted)) return 0;
  snprintf(msg, n, "0xg may not read the sessions of 0xc (session 5): \"no grant\"");
  return 1;
}

static uint64_t fake_gen(void *ctx) {
  (void)ctx;
  return atomic_load(&gen);
}

static int setup(void **st) {
  (void)st;
  xgr_rpc_config cfg = {.listen = "127.0.0.1:0", .auth_none = true, .max_body = 4096, .timeout_s = 5,
                        .start_closed = true};
  xgr_error e;
  srv = xgr_rpc_server_new(&cfg, &e);
  assert_non_null(srv);
  hub = xgr__sse_hub_new(16, 150);   /* events kept 150 ms after a stream or an id */
  xgr__sse_set_access(hub, &(xgr__sse_access){.check = fake_check, .generation = fake_gen});
  assert_int_equal(xgr__rpc_register_get(srv, "/ev", serve, hub), 0);
  xgr__rpc_on_stop(srv, on_stop, hub);
  assert_int_equal(xgr_rpc_start(srv, &e), 0);
  xgr_rpc_open(srv, NULL, NULL);
  port = xgr_rpc_port(srv);
  return 0;
}

static int teardown(void **st) {
  (void)st;
  xgr_rpc_server_free(srv);
  xgr__sse_hub_free(hub);
  return 0;
}

static void test_nobody_reading(void **st) {
  (void)st;
  publish("{\"n\":1}");                 /* id 1 */
  assert_false(xgr__sse_wanted(hub));   /* never read: the hole is id 2 */
  assert_false(xgr__sse_wanted(hub));   /* one hole until the next event */
  publish("{\"n\":3}");                 /* id 3 */
  assert_int_equal(xgr__sse_last_id(hub), 3);
  assert_true(xgr__sse_wanted(hub));    /* an id was handed out: kept for the keep time */
  publish("{\"n\":4}");                 /* id 4 */

  char *s = stream(1);   /* from before the hole: reset, then what is kept after it */
  assert_non_null(strstr(s, "event: reset\ndata: {\"oldest\":3}"));
  assert_non_null(strstr(s, "id: 3\nevent: xgr\ndata: {\"n\":3}"));
  assert_non_null(strstr(s, "id: 4\n"));
  free(s);
  s = stream(2);         /* from the hole itself: it saw everything before it */
  assert_null(strstr(s, "event: reset"));
  assert_non_null(strstr(s, "id: 3\n"));
  assert_non_null(strstr(s, "id: 4\n"));
  free(s);
  s = stream(0);         /* a new stream: only new events, no reset */
  assert_null(strstr(s, "event: reset"));
  assert_null(strstr(s, "id: "));
  free(s);

  /* the streams are gone once libmicrohttpd noticed (a suspended connection only notices when
   * resumed: an event resumes them); then, the keep time after, the hub wants nothing */
  bool wanted = true;
  for (int i = 0; i < 100 && wanted; i++) {
    publish("{}");
    sleep_ms(50);
    wanted = xgr__sse_wanted(hub);
  }
  assert_false(wanted);              /* the hole: the id after the last event */
  publish("{\"last\":true}");
  uint64_t last = xgr__sse_last_id(hub);
  s = stream(last - 2);              /* from before the hole */
  char want[64];
  snprintf(want, sizeof want, "event: reset\ndata: {\"oldest\":%llu}", (unsigned long long)last);
  assert_non_null(strstr(s, want));
  assert_non_null(strstr(s, "data: {\"last\":true}"));
  free(s);
  s = stream(last - 1);              /* from the hole */
  assert_null(strstr(s, "event: reset"));
  assert_non_null(strstr(s, "data: {\"last\":true}"));
  free(s);
}

static void *read_owner_a(void *out) {
  *(char **)out = stream_of("0xa", 0, 2000);
  return NULL;
}

/* A stream of one owner is not woken by another owner's events (each tenant's streams cost the
 * others nothing), and it owes its reader no `event: reset` when the ring moved on meanwhile: the
 * other owner's 40 events go round a ring of 16 twice, then its owner's event arrives whole. */
static void test_other_owners(void **st) {
  (void)st;
  char *got = NULL;
  pthread_t t;
  /* the first test's streams are gone once an event resumed them and libmicrohttpd noticed */
  for (int i = 0; i < 250 && xgr__sse_open_streams(hub) > 0; i++) {
    publish("{}");
    sleep_ms(20);
  }
  assert_int_equal(xgr__sse_open_streams(hub), 0);
  assert_int_equal(pthread_create(&t, NULL, read_owner_a, &got), 0);
  for (int i = 0; i < 500 && xgr__sse_open_streams(hub) == 0; i++) sleep_ms(10);   /* it is open */
  assert_int_equal(xgr__sse_open_streams(hub), 1);
  for (int i = 0; i < 40; i++) xgr__sse_publish_owned(hub, "0xb", 2, xgr__xstrdup("{\"b\":1}"));
  xgr__sse_publish_owned(hub, "0xa", 3, xgr__xstrdup("{\"a\":1}"));
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_non_null(got);
  assert_non_null(strstr(got, "data: {\"a\":1}"));
  assert_null(strstr(got, "event: reset"));
  assert_null(strstr(got, "\"b\""));
  free(got);
}

/* A grantee's stream as it is read: the text so far (under mu) and how curl ended. */
typedef struct live {
  pthread_mutex_t mu;
  xgr_buf b;
  CURLcode rc;
} live;

static size_t take_live(char *p, size_t size, size_t n, void *ctx) {
  live *l = ctx;
  pthread_mutex_lock(&l->mu);
  xgr__buf_put(&l->b, p, size * n);
  pthread_mutex_unlock(&l->mu);
  return size * n;
}

static void *read_grantee(void *arg) {
  live *l = arg;
  CURL *c = curl_easy_init();
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/ev?owner=0xc&root=5&grantee=0xg", port);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, take_live);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, l);
  l->rc = curl_easy_perform(c);
  curl_easy_cleanup(c);
  return NULL;
}

static bool live_has(live *l, const char *what) {
  pthread_mutex_lock(&l->mu);
  xgr__buf_putc(&l->b, '\0');
  l->b.len--;
  bool has = strstr(l->b.p, what) != NULL;
  pthread_mutex_unlock(&l->mu);
  return has;
}

/* Open a grantee's stream of session 0xc/5 in a thread; return once the hub counts it. */
static void open_grantee(live *l, pthread_t *t) {
  memset(l, 0, sizeof *l);
  pthread_mutex_init(&l->mu, NULL);
  unsigned before = xgr__sse_open_streams(hub);
  assert_int_equal(pthread_create(t, NULL, read_grantee, l), 0);
  for (int i = 0; i < 500 && xgr__sse_open_streams(hub) == before; i++) sleep_ms(10);
  assert_int_equal(xgr__sse_open_streams(hub), before + 1);
  for (int i = 0; i < 500 && !live_has(l, "xgr console events"); i++) sleep_ms(10);   /* its first read is done */
}

static void close_live(live *l) {
  free(l->b.p);
  pthread_mutex_destroy(&l->mu);
}

/* A grant revoked while its stream is open (the file comment). */
static void test_grant_revoked(void **st) {
  (void)st;
  live l;
  pthread_t t;
  /* 1: the next event decides again: the grants' generation moved, the decision refuses */
  atomic_store(&granted, true);
  open_grantee(&l, &t);
  xgr__sse_publish_owned(hub, "0xc", 5, xgr__xstrdup("{\"c\":1}"));
  for (int i = 0; i < 500 && !live_has(&l, "{\"c\":1}"); i++) sleep_ms(10);
  assert_true(live_has(&l, "data: {\"c\":1}"));   /* delivered while granted, with no second decision */
  unsigned asked = atomic_load(&checks);
  atomic_store(&granted, false);                       /* revoked: the generation moves */
  atomic_fetch_add(&gen, 1);
  xgr__sse_publish_owned(hub, "0xc", 5, xgr__xstrdup("{\"c\":2}"));
  xgr__sse_publish_owned(hub, "0xc", 5, xgr__xstrdup("{\"c\":3}"));
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(l.rc, CURLE_OK);                    /* the stream ended (no timeout) */
  assert_true(live_has(&l, "event: end\ndata: {\"reason\":\"access revoked\",\"message\":\"0xg may not read the "
                           "sessions of 0xc (session 5): 'no grant'\"}"));
  assert_false(live_has(&l, "\"c\":2"));
  assert_false(live_has(&l, "\"c\":3"));
  assert_int_equal(atomic_load(&checks), asked + 1);   /* decided again once */
  close_live(&l);

  /* 2: no event comes: xgr__sse_grants_changed makes the waiting stream decide again at once */
  atomic_store(&granted, true);
  open_grantee(&l, &t);
  sleep_ms(100);   /* suspended, waiting */
  atomic_store(&granted, false);
  atomic_fetch_add(&gen, 1);
  xgr__sse_grants_changed(hub);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(l.rc, CURLE_OK);
  assert_true(live_has(&l, "\"reason\":\"access revoked\""));
  close_live(&l);
  atomic_store(&granted, true);
}

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_nobody_reading), cmocka_unit_test(test_other_owners),
                                     cmocka_unit_test(test_grant_revoked)};
  int rc = cmocka_run_group_tests(tests, setup, teardown);
  curl_global_cleanup();
  return rc;
}
