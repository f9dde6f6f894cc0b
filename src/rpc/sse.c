/* sse.c — the console's event hub: engine events as server-sent events (see console_service_impl.h).
 *
 * Events live in a ring of fixed size; event i sits at slot i % size and ids grow from 1. A stream
 * is one HTTP response whose body libmicrohttpd pulls through reader(): it copies the events after
 * the stream's cursor that match its filter, and when there is nothing to send it suspends the
 * connection (MHD_suspend_connection, which the manual allows from a content reader) after putting
 * it on the hub's waiting list. publish() resumes the waiting streams the event is for (owner and
 * session), under the same lock, so an event cannot slip between "nothing to send" and
 * "suspended"; the others stay suspended, their cursors moved past it. Suspended connections neither time
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
 *
 * Limits (issue 38: streams took every connection): a stream takes a unit of the per-client tally
 * (under its client's IP address, with the cap on every stream as the tally's total) and of the
 * per-owner tally (under its owner, "*" for a stream of every owner) before it is answered; above a
 * cap it is refused with 429 naming the cap, and nothing else notices. Before refusing, the hub
 * peeks at the sockets of the streams concerned: those whose client has gone (a page that moved
 * on; a suspended connection is not watched) give back their units at once (prune_gone). A stream ends with its
 * permit and after the hub's longest lifetime: the keep-alive thread also sleeps towards the
 * earliest end of an open stream, marks it `ending` and resumes it; its reader then sends one
 * `event: end` saying why and ends the response.
 *
 * Grants change while streams are open: a stream that a grant opened (its reader is a grantee, not
 * the owner or an operator) is decided again before it sends anything (recheck) whenever the node's
 * grant generation moved since its last decision, or that decision is older than a keep-alive —
 * one atomic load per delivery otherwise. Refused (revoked, narrowed below READ, expired), it sends
 * no more events: one `event: end` {"reason":"access revoked","message":...} and it ends. A change
 * made through xgr_manageGrants also resumes the waiting grant streams (xgr__sse_grants_changed),
 * so they end at once rather than at their next event.
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
#include <sys/socket.h>
#include <time.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/tally.h"

#define SSE_MAX_DATA 8192         /* a longer event is cut (the page refetches what it shows) */
#define SSE_KEEPALIVE_S 10
#define SSE_KEEP_MS 60000         /* events are kept this long after the last stream or id handed out */
#define SSE_RECHECK_NS (SSE_KEEPALIVE_S * 1000000000ull)   /* a grant stream's decision is redone at least this often */

typedef struct slot {
  uint64_t id;                    /* 0: empty */
  uint64_t root;
  char owner[48];
  char *data;                     /* owned */
} slot;

/* Why a stream ends before its client goes (the `reason` of its `event: end`). */
typedef enum end_why { END_NONE, END_PERMIT, END_LIFETIME, END_SIGNOUT, END_REVOKED, END_N } end_why;
static const char *const end_reasons[END_N] = {"", "permit expired", "stream lifetime reached", "signed out",
                                               "access revoked"};
static const char *const end_labels[END_N] = {"", "permit_expired", "max_lifetime", "signed_out", "access_revoked"};

typedef struct stream {
  struct xgr__sse_hub *hub;
  struct MHD_Connection *c;
  char owner[48];                 /* "" = every owner */
  char client[XGR__TALLY_KEY];    /* the client's address, as the per-client tally counts it */
  uint64_t root;                  /* 0 = every session */
  uint64_t next;                  /* id of the next event to look at */
  bool hello, ping, waiting;
  struct stream *prev, *nxt;      /* the waiting list */
  struct stream *aprev, *anxt;    /* every open stream (under mu) */
  uint64_t end_ns;                /* monotonic ns at which it ends (0: never) */
  uint64_t expiry;                /* its permit's expiry, Unix seconds (0: none) */
  end_why why;                    /* what ends it at end_ns */
  char tag[XGR__SSE_TAG];         /* the console sign-in that opened it ("": none; xgr__sse_end_tagged) */
  bool ending, end_sent;          /* the timer ended it; its `event: end` went out */
  bool released;                  /* its units and count were given back (prune_gone or stream_free) */
  char grantee[48];               /* opened through a grant: its reader, decided again (recheck); "": not */
  uint64_t gen;                   /* the access generation of its last decision (its reader's thread only) */
  uint64_t checked_ns;            /* monotonic ns of its last decision (its reader's thread only) */
  char revoked[240];              /* END_REVOKED: why, JSON-safe (under mu) */
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
  stream *all;                    /* every open stream (its end is the timer's business) */
  bool closing, stop;
  pthread_t keepalive;
  xgr__sse_limits lim;
  xgr__tally clients, owners;     /* open streams per client address / per owner ("*": all owners) */
  _Atomic uint64_t refused[XGR__SSE_LIMIT_N];   /* streams refused, by the cap that refused them */
  _Atomic uint64_t ended[END_N];  /* streams ended by the hub, by reason */
  xgr__sse_access acc;            /* how grant streams are decided again (check NULL: they are not) */
};

/* Take a waiting stream off the waiting list and resume its connection (mu held). */
static void resume_one(xgr__sse_hub *h, stream *s) {
  assert(s->waiting);
  if (s->prev) s->prev->nxt = s->nxt;
  else h->waiting = s->nxt;
  if (s->nxt) s->nxt->prev = s->prev;
  s->waiting = false;
  s->prev = s->nxt = NULL;
  MHD_resume_connection(s->c);
}

/* Resume every waiting stream (mu held). */
static void wake_all(xgr__sse_hub *h, bool ping) {
  while (h->waiting) {
    if (ping) h->waiting->ping = true;
    resume_one(h, h->waiting);
  }
}

/* Unix time in ns (the permit's expiry is a date). */
static uint64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Make stream st end at Unix second expiry, if that comes before the end it has (mu held, or st
 * not yet shared); now is the monotonic time. Whether it did. */
static bool end_by(stream *st, uint64_t expiry, uint64_t now) {
  uint64_t w = wall_ns(), at = expiry >= UINT64_MAX / 1000000000ull ? UINT64_MAX : expiry * 1000000000ull;
  uint64_t end = at <= w ? now : (at - w > UINT64_MAX - now ? UINT64_MAX : now + (at - w));
  if (st->end_ns && end > st->end_ns) return false;
  st->end_ns = end;
  st->why = END_PERMIT;
  st->expiry = expiry;
  return true;
}

/* End the streams whose end has come (mu held); the earliest end still to come, or `until`. A
 * permit's end is a date: its monotonic time was reckoned when the stream opened, and should the
 * wall clock be behind it now (adjusted meanwhile) the stream waits for the date. */
static uint64_t end_due(xgr__sse_hub *h, uint64_t now, uint64_t until) {
  for (stream *s = h->all; s; s = s->anxt) {
    if (s->ending || !s->end_ns || s->released) continue;
    if (now >= s->end_ns && s->why == END_PERMIT) {
      uint64_t w = wall_ns(), at = s->expiry * 1000000000ull;
      if (w < at) s->end_ns = now + (at - w);
    }
    if (now >= s->end_ns) {
      s->ending = true;
      atomic_fetch_add(&h->ended[s->why], 1);
      if (s->waiting) resume_one(h, s);
    } else if (s->end_ns < until) {
      until = s->end_ns;
    }
  }
  return until;
}

/* The keep-alive thread: a comment line to every waiting stream every SSE_KEEPALIVE_S, and the end
 * of every stream whose permit expired or whose lifetime is over (the cv is CLOCK_MONOTONIC). */
static void *keepalive_main(void *arg) {
  xgr__sse_hub *h = arg;
  pthread_mutex_lock(&h->mu);
  uint64_t ping_at = xgr__mono_ns() + SSE_KEEPALIVE_S * 1000000000ull;
  while (!h->stop) {
    uint64_t now = xgr__mono_ns();
    if (now >= ping_at) {
      wake_all(h, true);
      ping_at = now + SSE_KEEPALIVE_S * 1000000000ull;
    }
    uint64_t until = end_due(h, now, ping_at);
    struct timespec ts = {.tv_sec = (time_t)(until / 1000000000u), .tv_nsec = (long)(until % 1000000000u)};
    pthread_cond_timedwait(&h->cv, &h->mu, &ts);
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
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(&h->cv, &a);
  pthread_condattr_destroy(&a);
  xgr__tally_init(&h->clients);
  xgr__tally_init(&h->owners);
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
  xgr__tally_destroy(&h->clients);
  xgr__tally_destroy(&h->owners);
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

void xgr__sse_set_access(xgr__sse_hub *h, const xgr__sse_access *a) {
  pthread_mutex_lock(&h->mu);
  h->acc = *a;
  pthread_mutex_unlock(&h->mu);
}

void xgr__sse_grants_changed(xgr__sse_hub *h) {
  pthread_mutex_lock(&h->mu);
  for (stream *w = h->waiting, *nx; w; w = nx) {
    nx = w->nxt;
    if (w->grantee[0]) resume_one(h, w);   /* its reader decides again (recheck) */
  }
  pthread_mutex_unlock(&h->mu);
}

/* s into out[n] as JSON string content: quotes, backslashes and control bytes become '. */
static void json_safe(char *out, size_t n, const char *s) {
  size_t i = 0;
  for (; s[i] && i + 1 < n; i++) out[i] = s[i] == '"' || s[i] == '\\' || (unsigned char)s[i] < 0x20 ? '\'' : s[i];
  out[i] = '\0';
}

/* A stream opened through a grant: decide its access again when the grants changed since its last
 * decision or that is older than SSE_RECHECK_NS (see the file comment). Its reader calls this
 * before it sends anything, without the hub's lock (the decision reads the store). */
static void recheck(xgr__sse_hub *h, stream *st) {
  if (!st->grantee[0] || !h->acc.check) return;
  uint64_t gen = h->acc.generation ? h->acc.generation(h->acc.ctx) : 0, now = xgr__mono_ns();
  if (gen == st->gen && now - st->checked_ns < SSE_RECHECK_NS) return;
  pthread_mutex_lock(&h->mu);
  bool over = st->ending || st->end_sent || st->released || h->closing;
  pthread_mutex_unlock(&h->mu);
  if (over) return;
  char msg[200] = "";
  uint64_t exp = 0;
  int rc = h->acc.check(h->acc.ctx, st->grantee, st->owner, st->root, &exp, msg, sizeof msg);
  st->gen = gen;   /* the generation read before the decision: a change during it is seen next time */
  st->checked_ns = now;
  pthread_mutex_lock(&h->mu);
  if (rc && !st->ending) {
    st->ending = true;
    st->why = END_REVOKED;
    json_safe(st->revoked, sizeof st->revoked, msg[0] ? msg : "no longer allowed to read this session");
    atomic_fetch_add(&h->ended[END_REVOKED], 1);
  } else if (!rc && exp && end_by(st, exp, now)) {
    pthread_cond_signal(&h->cv);   /* a grant shortened: the timer ends the stream at its new expiry */
  }
  pthread_mutex_unlock(&h->mu);
}

static bool matches(const stream *st, const slot *s) {
  if (st->root && s->root != st->root) return false;
  return !st->owner[0] || !strcmp(st->owner, s->owner);
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
  /* only the streams this event is for: a waiting stream had sent everything before it, so one
   * that does not match stays suspended with its cursor past the event (and a ring that moves on
   * meanwhile owes it no reset). Waking every stream for every event made each tenant's streams
   * cost every other tenant's steps a resume and a suspend per stream. */
  for (stream *w = h->waiting, *nx; w; w = nx) {
    nx = w->nxt;
    if (matches(w, s)) resume_one(h, w);
    else w->next = h->next_id;
  }
  pthread_mutex_unlock(&h->mu);
}

/* libmicrohttpd pulls the stream's body here (see the file comment). */
static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  stream *st = cls;
  xgr__sse_hub *h = st->hub;
  size_t n = 0;
  recheck(h, st);   /* a grant stream whose grant went sends nothing more */
  pthread_mutex_lock(&h->mu);
  if (h->closing) {
    pthread_mutex_unlock(&h->mu);
    return MHD_CONTENT_READER_END_OF_STREAM;
  }
  if (st->end_sent || st->released) {   /* ended, or its client is gone (prune_gone) */
    pthread_mutex_unlock(&h->mu);
    return MHD_CONTENT_READER_END_OF_STREAM;
  }
  if (!st->hello) {
    int k = snprintf(buf, max, "retry: 2000\n: xgr console events\n\n");
    if (k > 0 && (size_t)k < max) n = (size_t)k;
    st->hello = true;
  }
  if (st->ending) {   /* its permit expired or its lifetime is over: say why, then end */
    int k = st->why == END_PERMIT
                ? snprintf(buf + n, max - n, "event: end\ndata: {\"reason\":\"%s\",\"expiry\":%" PRIu64 "}\n\n",
                           end_reasons[st->why], st->expiry)
            : st->why == END_SIGNOUT ? snprintf(buf + n, max - n, "event: end\ndata: {\"reason\":\"%s\"}\n\n", end_reasons[st->why])
            : st->why == END_REVOKED
                ? snprintf(buf + n, max - n, "event: end\ndata: {\"reason\":\"%s\",\"message\":\"%s\"}\n\n",
                           end_reasons[st->why], st->revoked)
                : snprintf(buf + n, max - n, "event: end\ndata: {\"reason\":\"%s\",\"maxSecs\":%u}\n\n",
                           end_reasons[st->why], h->lim.max_secs);
    if (k > 0 && (size_t)k < max - n) n += (size_t)k;
    st->end_sent = true;
    pthread_mutex_unlock(&h->mu);
    return (ssize_t)n;
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

/* Give back what an open stream holds: its units of the tallies and its count. */
static void stream_release(xgr__sse_hub *h, const char *client, const char *owner) {
  xgr__tally_give(&h->owners, owner[0] ? owner : "*");
  xgr__tally_give(&h->clients, client);
  atomic_fetch_sub(&h->streams, 1);
}

static void stream_free(void *cls) {
  stream *st = cls;
  xgr__sse_hub *h = st->hub;
  keep_awhile(h);   /* before the count drops: a browser reconnecting finds what it missed */
  pthread_mutex_lock(&h->mu);
  if (st->waiting) {   /* cannot happen for a suspended connection; kept for safety */
    if (st->prev) st->prev->nxt = st->nxt;
    else h->waiting = st->nxt;
    if (st->nxt) st->nxt->prev = st->prev;
  }
  if (st->aprev) st->aprev->anxt = st->anxt;
  else h->all = st->anxt;
  if (st->anxt) st->anxt->aprev = st->aprev;
  bool released = st->released;
  st->released = true;
  pthread_mutex_unlock(&h->mu);
  if (!released) stream_release(h, st->client, st->owner);
  free(st);
}

/* Whether the client of connection c has closed its end: a suspended connection is not watched by
 * libmicrohttpd, so a browser that navigated away is otherwise noticed only at the next keep-alive
 * (a peek reads nothing: 0 is the peer's FIN, EAGAIN a live peer with nothing to say). */
static bool peer_gone(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!ci) return false;
  char b;
  ssize_t r = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Before a cap refuses a stream: give back at once what the streams whose client is gone hold (of
 * client, or of anyone when client is NULL), and resume them so that libmicrohttpd closes them
 * (their reader ends them). A page that moved on (each view opens its own stream) then does not
 * count against its client until the next keep-alive. The number given back. */
static unsigned prune_gone(xgr__sse_hub *h, const char *client) {
  unsigned n = 0;
  pthread_mutex_lock(&h->mu);
  for (stream *s = h->all; s; s = s->anxt) {
    if (s->released || (client && strcmp(s->client, client)) || !peer_gone(s->c)) continue;
    s->released = true;
    stream_release(h, s->client, s->owner);
    if (s->waiting) resume_one(h, s);
    n++;
  }
  pthread_mutex_unlock(&h->mu);
  return n;
}

void xgr__sse_set_limits(xgr__sse_hub *h, const xgr__sse_limits *lim) {
  pthread_mutex_lock(&h->mu);
  h->lim = *lim;
  pthread_mutex_unlock(&h->mu);
}

uint64_t xgr__sse_refused(xgr__sse_hub *h, xgr__sse_limit which) {
  assert(which < XGR__SSE_LIMIT_N);
  return atomic_load(&h->refused[which]);
}

unsigned xgr__sse_open_streams(xgr__sse_hub *h) { return atomic_load(&h->streams); }

static void collect(void *ctx, xgr_metrics_out *out) {
  xgr__sse_hub *h = ctx;
  static const char *const limit_labels[XGR__SSE_LIMIT_N] = {"limit=\"client\"", "limit=\"owner\"",
                                                             "limit=\"total\""};
  xgr_metrics_family(out, "xgr_event_streams", "gauge", "Open event streams (GET /ui/events)");
  xgr_metrics_line(out, "xgr_event_streams", "", (double)atomic_load(&h->streams));
  xgr_metrics_family(out, "xgr_event_streams_refused_total", "counter", "Event streams refused, by the cap that refused them");
  for (int i = 0; i < XGR__SSE_LIMIT_N; i++)
    xgr_metrics_line(out, "xgr_event_streams_refused_total", limit_labels[i], (double)atomic_load(&h->refused[i]));
  xgr_metrics_family(out, "xgr_event_streams_ended_total", "counter",
                     "Event streams xgrd ended, by reason (permit expired, lifetime reached, signed out, access revoked)");
  for (int i = END_PERMIT; i < END_N; i++) {
    char l[48];
    snprintf(l, sizeof l, "reason=\"%s\"", end_labels[i]);
    xgr_metrics_line(out, "xgr_event_streams_ended_total", l, (double)atomic_load(&h->ended[i]));
  }
}

void xgr__sse_metrics(xgr__sse_hub *h, xgr_metrics *m) {
  xgr_metrics_collector(m, "rpc.streams", collect, h);
}

/* Count a new stream of (client, owner) under the caps; 0, or the cap that refuses it (with
 * msg[n] saying which, its value and what holds it). */
static int stream_admit(xgr__sse_hub *h, const char *client, const char *owner, char *msg, size_t n) {
  pthread_mutex_lock(&h->mu);
  xgr__sse_limits lim = h->lim;
  pthread_mutex_unlock(&h->mu);
  atomic_fetch_add(&h->streams, 1);   /* counted from before its cursor is taken until stream_free */
  unsigned held;
  bool took = xgr__tally_take(&h->clients, client, lim.per_client, lim.total, &held);
  if (!took && prune_gone(h, lim.per_client && held >= lim.per_client ? client : NULL))
    took = xgr__tally_take(&h->clients, client, lim.per_client, lim.total, &held);
  if (!took) {
    atomic_fetch_sub(&h->streams, 1);
    bool per_client = lim.per_client && held >= lim.per_client;
    if (per_client)
      snprintf(msg, n,
               "too many event streams: this client address (%s) has %u open; the cap --max-streams-per-client is "
               "%u. Close one (each console tab holds one) and try again\n",
               client, held, lim.per_client);
    else
      snprintf(msg, n,
               "too many event streams: xgrd has %u open; the cap --max-streams is %u (it keeps connections for "
               "JSON-RPC calls). Try again later\n",
               lim.total, lim.total);
    atomic_fetch_add(&h->refused[per_client ? XGR__SSE_LIMIT_CLIENT : XGR__SSE_LIMIT_TOTAL], 1);
    return XGR_ELIMIT;
  }
  bool owner_ok = xgr__tally_take(&h->owners, owner[0] ? owner : "*", lim.per_owner, 0, &held);
  if (!owner_ok && prune_gone(h, NULL)) owner_ok = xgr__tally_take(&h->owners, owner[0] ? owner : "*", lim.per_owner, 0, &held);
  if (!owner_ok) {
    xgr__tally_give(&h->clients, client);
    atomic_fetch_sub(&h->streams, 1);
    snprintf(msg, n,
             "too many event streams: %s%s has %u open; the cap --max-streams-per-owner is %u. Close one and try "
             "again\n",
             owner[0] ? "owner " : "the stream of every owner", owner, held, lim.per_owner);
    atomic_fetch_add(&h->refused[XGR__SSE_LIMIT_OWNER], 1);
    return XGR_ELIMIT;
  }
  return 0;
}

int xgr__sse_serve(xgr__sse_hub *h, struct MHD_Connection *c, const xgr__sse_open *o) {
  char owner[48], client[XGR__TALLY_KEY];
  snprintf(owner, sizeof owner, "%s", o->owner ? o->owner : "");
  for (char *p = owner; *p; p++)
    if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
  snprintf(client, sizeof client, "%s", o->client && *o->client ? o->client : "?");
  char msg[320];
  struct MHD_Response *r;
  unsigned status = MHD_HTTP_OK;
  if (stream_admit(h, client, owner, msg, sizeof msg)) {
    r = MHD_create_response_from_buffer(strlen(msg), msg, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_TOO_MANY_REQUESTS, r);
    MHD_destroy_response(r);
    return ret;
  }
  pthread_mutex_lock(&h->mu);
  bool closing = h->closing;
  uint64_t next = o->after ? o->after + 1 : h->next_id;
  if (next > h->next_id) next = h->next_id;
  xgr__sse_limits lim = h->lim;
  pthread_mutex_unlock(&h->mu);
  if (closing) {
    stream_release(h, client, owner);
    static const char bye[] = "shutting down\n";
    r = MHD_create_response_from_buffer(sizeof bye - 1, (void *)bye, MHD_RESPMEM_PERSISTENT);
    status = MHD_HTTP_SERVICE_UNAVAILABLE;
  } else {
    stream *st = xgr__xcalloc(1, sizeof *st);
    st->hub = h;
    st->c = c;
    st->root = o->root;
    st->next = next;
    memcpy(st->owner, owner, sizeof st->owner);
    memcpy(st->client, client, sizeof st->client);
    snprintf(st->tag, sizeof st->tag, "%s", o->tag ? o->tag : "");
    snprintf(st->grantee, sizeof st->grantee, "%s", o->grantee ? o->grantee : "");
    uint64_t now = xgr__mono_ns();
    st->gen = o->gen;
    st->checked_ns = now;
    if (lim.max_secs) {
      st->end_ns = now + (uint64_t)lim.max_secs * 1000000000ull;
      st->why = END_LIFETIME;
    }
    if (o->expiry) end_by(st, o->expiry, now);   /* the permit's date as a monotonic time (end_due checks the date again) */
    r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, reader, st, stream_free);
    if (!r) {
      stream_release(h, client, owner);
      free(st);
      return MHD_NO;
    }
    pthread_mutex_lock(&h->mu);   /* on the list for the timer (stream_free takes it off) */
    st->anxt = h->all;
    if (h->all) h->all->aprev = st;
    h->all = st;
    if (st->end_ns) pthread_cond_signal(&h->cv);   /* its end may come before the timer wakes */
    pthread_mutex_unlock(&h->mu);
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
  }
  if (!r) return MHD_NO;
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

void xgr__sse_end_tagged(xgr__sse_hub *h, const char *tag) {
  assert(tag && *tag);
  pthread_mutex_lock(&h->mu);
  bool any = false;
  uint64_t now = xgr__mono_ns();
  for (stream *s = h->all; s; s = s->anxt) {
    if (s->ending || s->released || strcmp(s->tag, tag)) continue;
    s->end_ns = now;
    s->why = END_SIGNOUT;
    any = true;
  }
  if (any) pthread_cond_signal(&h->cv);   /* the timer ends them (end_due) */
  pthread_mutex_unlock(&h->mu);
}
