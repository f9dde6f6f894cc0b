/* test_sse.c — the console's event hub (src/rpc/sse.c) when nobody reads: events are wanted only
 * while a stream is open or for the hub's keep time after one ended or an id was handed out; the
 * first unwanted event leaves one hole in the ids (once, until the next event), and a stream that
 * resumes from before the hole gets `event: reset`, one that resumes from the hole or starts new
 * does not. A stream of one owner stays asleep through another owner's events and gets no reset
 * for them. Streams are real: an xgr_rpc_server on 127.0.0.1 serving the hub at /ev, read with
 * libcurl until a short timeout (a stream never ends by itself). */
#include <setjmp.h>
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
  xgr__sse_open o = {.owner = owner, .after = last ? strtoull(last, NULL, 10) : 0, .client = "127.0.0.1"};
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

static int setup(void **st) {
  (void)st;
  xgr_rpc_config cfg = {.listen = "127.0.0.1:0", .auth_none = true, .max_body = 4096, .timeout_s = 5,
                        .start_closed = true};
  xgr_error e;
  srv = xgr_rpc_server_new(&cfg, &e);
  assert_non_null(srv);
  hub = xgr__sse_hub_new(16, 150);   /* events kept 150 ms after a stream or an id */
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

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_nobody_reading), cmocka_unit_test(test_other_owners)};
  int rc = cmocka_run_group_tests(tests, setup, teardown);
  curl_global_cleanup();
  return rc;
}
