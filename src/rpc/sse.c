/* sse.c — the console's event hub: engine events as server-sent events (see console_service_impl.h).
 *
 * Events live in a ring of fixed size; event i sits at slot i % size and ids grow from 1. A stream
 * is one HTTP response whose body libmicrohttpd pulls through reader(): it copies the events after
 * the stream's cursor that match its filter, and when there is nothing to send it suspends the
 * connection (MHD_suspend_connection, which the manual allows from a content reader) after putting
 * it on the hub's waiting list. publish() resumes every waiting stream, under the same lock, so an
 * event cannot slip between "nothing to send" and "suspended". Suspended connections neither time
 * out nor notice a browser that went away, so a keep-alive thread resumes them every 10 s and
 * they send a comment line (the write fails for a dead peer and libmicrohttpd closes it).
 * A stream whose cursor fell out of the ring gets one `event: reset` and goes on from the oldest
 * event kept: the page reloads its view. On stop, xgr__sse_close ends every stream.
 *
 * Nobody reading: while no stream is open, and for a minute (SSE_KEEP_MS) after one ended or after an event
 * id was handed out (xgr__sse_last_id: a page reads its view, then streams from there), the hub
 * wants no events (xgr__sse_wanted is false), so the console does not write them — they cost
 * nothing on a daemon nobody watches. A stretch of events not kept leaves a hole: one id that
 * names no event, and the ring's oldest id is past it, so a stream resuming from before it gets
 * `event: reset` as when the ring moved on, and a stream started later does not.
 */
#include "rpc/console_service_impl.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/clock.h"

#define SSE_MAX_DATA 8192         /* a longer event is cut (the page refetches what it shows) */
#define SSE_KEEPALIVE_S 10
#define SSE_KEEP_MS 60000         /* events are kept this long after the last stream or id handed out */

typedef struct slot {
  uint64_t id;                    /* 0: empty */
  uint64_t root;
  char owner[48];
  char *data;                     /* owned */
} slot;

typedef struct stream {
  struct xgr__sse_hub *hub;
  struct MHD_Connection *c;
  char owner[48];                 /* "" = every owner */
  uint64_t root;                  /* 0 = every session */
  uint64_t next;                  /* id of the next event to look at */
  bool hello, ping, waiting;
  struct stream *prev, *nxt;      /* the waiting list */
} stream;

struct xgr__sse_hub {
  pthread_mutex_t mu;
  pthread_cond_t cv;              /* the keep-alive thread sleeps on it */
  slot *ring;
  size_t size;
  uint64_t next_id;               /* id of the next event */
  uint64_t hole;                  /* the id of the last stretch of events not kept (0: none) */
  _Atomic unsigned streams;       /* open streams */
  _Atomic uint64_t keep_until;    /* monotonic ns until which events are kept without a stream (0: none) */
  uint64_t keep_ns;               /* how long after a stream ended or an id was handed out */
  _Atomic bool holed;             /* a hole was made and no event published since */
  stream *waiting;
  bool closing, stop;
  pthread_t keepalive;
};

/* Resume every waiting stream (mu held). */
static void wake_all(xgr__sse_hub *h, bool ping) {
  for (stream *s = h->waiting; s;) {
    stream *n = s->nxt;
    s->waiting = false;
    s->prev = s->nxt = NULL;
    if (ping) s->ping = true;
    MHD_resume_connection(s->c);
    s = n;
  }
  h->waiting = NULL;
}

static void *keepalive_main(void *arg) {
  xgr__sse_hub *h = arg;
  pthread_mutex_lock(&h->mu);
  while (!h->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += SSE_KEEPALIVE_S;
    int rc = 0;
    while (!h->stop && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&h->cv, &h->mu, &ts);
    if (!h->stop) wake_all(h, true);
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

xgr__sse_hub *xgr__sse_hub_new(size_t ring, unsigned keep_ms) {
  xgr__sse_hub *h = xgr__xcalloc(1, sizeof *h);
  h->size = ring ? ring : 8192;
  h->keep_ns = (uint64_t)(keep_ms ? keep_ms : SSE_KEEP_MS) * 1000000u;
  h->ring = xgr__xcalloc(h->size, sizeof *h->ring);
  h->next_id = 1;
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->cv, NULL);
  if (pthread_create(&h->keepalive, NULL, keepalive_main, h)) abort();
  return h;
}

void xgr__sse_close(xgr__sse_hub *h) {
  if (!h) return;
  pthread_mutex_lock(&h->mu);
  h->closing = true;
  wake_all(h, false);
  pthread_mutex_unlock(&h->mu);
}

void xgr__sse_hub_free(xgr__sse_hub *h) {
  if (!h) return;
  pthread_mutex_lock(&h->mu);
  h->stop = true;
  h->closing = true;
  wake_all(h, false);
  pthread_cond_signal(&h->cv);
  pthread_mutex_unlock(&h->mu);
  pthread_join(h->keepalive, NULL);
  for (size_t i = 0; i < h->size; i++) free(h->ring[i].data);
  free(h->ring);
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
  free(h);
}

/* Keep the events of the next h->keep_ns. */
static void keep_awhile(xgr__sse_hub *h) {
  atomic_store_explicit(&h->keep_until, xgr__mono_ns() + h->keep_ns, memory_order_relaxed);
}

uint64_t xgr__sse_last_id(xgr__sse_hub *h) {
  keep_awhile(h);   /* a page asks from where to stream: keep what comes until it does */
  pthread_mutex_lock(&h->mu);
  uint64_t id = h->next_id - 1;
  pthread_mutex_unlock(&h->mu);
  return id;
}

bool xgr__sse_wanted(xgr__sse_hub *h) {
  if (atomic_load_explicit(&h->streams, memory_order_relaxed)) return true;
  uint64_t until = atomic_load_explicit(&h->keep_until, memory_order_relaxed);
  if (until && xgr__mono_ns() < until) return true;
  if (until) atomic_compare_exchange_strong(&h->keep_until, &until, 0);   /* expired: no clock read next time */
  if (atomic_load_explicit(&h->holed, memory_order_relaxed)) return false;
  /* the first event not kept: make the hole (once until the next event is published) */
  pthread_mutex_lock(&h->mu);
  if (atomic_load(&h->streams)) {   /* one opened meanwhile (it counts itself before taking its cursor) */
    pthread_mutex_unlock(&h->mu);
    return true;
  }
  if (!h->holed) {
    slot *s = &h->ring[h->next_id % h->size];
    free(s->data);
    *s = (slot){.id = h->next_id};
    h->hole = h->next_id++;
    atomic_store(&h->holed, true);
  }
  pthread_mutex_unlock(&h->mu);
  return false;
}

void xgr__sse_publish_owned(xgr__sse_hub *h, const char *owner, uint64_t root, char *copy) {
  if (strnlen(copy, SSE_MAX_DATA + 1) > SSE_MAX_DATA) copy[SSE_MAX_DATA] = '\0';
  for (char *p = copy; *p; p++)   /* one line: a newline would end the SSE field */
    if (*p == '\n' || *p == '\r') *p = ' ';
  pthread_mutex_lock(&h->mu);
  atomic_store_explicit(&h->holed, false, memory_order_relaxed);
  slot *s = &h->ring[h->next_id % h->size];
  free(s->data);
  s->data = copy;
  s->id = h->next_id++;
  s->root = root;
  xgr__str_copy(s->owner, sizeof s->owner, owner ? owner : "");
  wake_all(h, false);
  pthread_mutex_unlock(&h->mu);
}

static bool matches(const stream *st, const slot *s) {
  if (st->root && s->root != st->root) return false;
  return !st->owner[0] || !strcmp(st->owner, s->owner);
}

/* libmicrohttpd pulls the stream's body here (see the file comment). */
static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  stream *st = cls;
  xgr__sse_hub *h = st->hub;
  size_t n = 0;
  pthread_mutex_lock(&h->mu);
  if (h->closing) {
    pthread_mutex_unlock(&h->mu);
    return MHD_CONTENT_READER_END_OF_STREAM;
  }
  if (!st->hello) {
    int k = snprintf(buf, max, "retry: 2000\n: xgr console events\n\n");
    if (k > 0 && (size_t)k < max) n = (size_t)k;
    st->hello = true;
  }
  uint64_t oldest = h->next_id > h->size ? h->next_id - h->size : 1;
  if (oldest <= h->hole) oldest = h->hole + 1;   /* events were not kept there */
  if (st->next < oldest) {
    int k = snprintf(buf + n, max - n, "event: reset\ndata: {\"oldest\":%" PRIu64 "}\n\n", oldest);
    if (k > 0 && (size_t)k < max - n) n += (size_t)k;
    st->next = oldest;
  }
  while (st->next < h->next_id) {
    const slot *s = &h->ring[st->next % h->size];
    assert(s->id == st->next);
    if (matches(st, s)) {
      size_t need = strlen(s->data) + 48;
      if (need > max - n) break;   /* the next call takes it */
      int k = snprintf(buf + n, max - n, "id: %" PRIu64 "\nevent: xgr\ndata: %s\n\n", s->id, s->data);
      if (k < 0 || (size_t)k >= max - n) break;
      n += (size_t)k;
    }
    st->next++;
  }
  if (!n && st->ping) {
    int k = snprintf(buf, max, ": ping\n\n");
    if (k > 0 && (size_t)k < max) n = (size_t)k;
  }
  st->ping = false;
  if (!n && st->next < h->next_id) {
    /* an event is due but does not fit what libmicrohttpd can take now: it calls again once its
     * buffer has drained (SSE_MAX_DATA is below the block size, so an empty buffer takes any) */
    pthread_mutex_unlock(&h->mu);
    return 0;
  }
  if (!n) {   /* nothing to send: wait for publish() or the keep-alive */
    st->waiting = true;
    st->prev = NULL;
    st->nxt = h->waiting;
    if (h->waiting) h->waiting->prev = st;
    h->waiting = st;
    MHD_suspend_connection(st->c);
  }
  pthread_mutex_unlock(&h->mu);
  return (ssize_t)n;
}

static void stream_free(void *cls) {
  stream *st = cls;
  xgr__sse_hub *h = st->hub;
  keep_awhile(h);   /* before the count drops: a browser reconnecting finds what it missed */
  atomic_fetch_sub(&h->streams, 1);
  pthread_mutex_lock(&h->mu);
  if (st->waiting) {   /* cannot happen for a suspended connection; kept for safety */
    if (st->prev) st->prev->nxt = st->nxt;
    else h->waiting = st->nxt;
    if (st->nxt) st->nxt->prev = st->prev;
  }
  pthread_mutex_unlock(&h->mu);
  free(st);
}

int xgr__sse_serve(xgr__sse_hub *h, struct MHD_Connection *c, const char *owner, uint64_t root, uint64_t after) {
  atomic_fetch_add(&h->streams, 1);   /* counted from before its cursor is taken until stream_free */
  pthread_mutex_lock(&h->mu);
  bool closing = h->closing;
  uint64_t next = after ? after + 1 : h->next_id;
  if (next > h->next_id) next = h->next_id;
  pthread_mutex_unlock(&h->mu);
  struct MHD_Response *r;
  unsigned status = MHD_HTTP_OK;
  if (closing) {
    atomic_fetch_sub(&h->streams, 1);
    static const char msg[] = "shutting down\n";
    r = MHD_create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
    status = MHD_HTTP_SERVICE_UNAVAILABLE;
  } else {
    stream *st = xgr__xcalloc(1, sizeof *st);
    st->hub = h;
    st->c = c;
    st->root = root;
    st->next = next;
    snprintf(st->owner, sizeof st->owner, "%s", owner ? owner : "");
    for (char *p = st->owner; *p; p++)
      if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
    r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, reader, st, stream_free);
    if (!r) {
      atomic_fetch_sub(&h->streams, 1);
      free(st);
      return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
  }
  if (!r) return MHD_NO;
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}
