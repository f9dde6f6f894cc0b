/* http.c — the engine's single libcurl multi loop: every API call of every step goes through one
 * thread, so a step waiting on the network holds no worker.
 *
 * A worker evaluating a step that needs a request hands the job over (xgr_eng_http_submit: a
 * mutex-protected list plus curl_multi_wakeup). The loop queues the job under its session's owner
 * and starts it when a slot is free: at most max_outbound requests are in flight in total and
 * max_outbound_per_owner of one owner (xgr_engine_config; issue 38, finding 6: slow API servers and
 * many sessions used to take every file descriptor). Owners with waiting jobs take turns (a ring),
 * so one tenant's backlog does not delay another's calls more than one turn. A waiting job holds
 * no exchange and no socket. curl's own caps agree: CURLMOPT_MAX_TOTAL_CONNECTIONS bounds open
 * connections (idle ones kept for reuse included) and CURLMOPT_MAXCONNECTS the idle cache, both at
 * max_outbound.
 *
 * A started job gets an xgr_http_exchange from the pool, its curl easy handle goes into the multi
 * handle, and when curl reports it done the response is fed to the step (xgr_step_feed_http). If
 * the step needs another request it queues again behind its owner's other jobs; otherwise the job
 * returns to its actor (phase JOB_FINISH), which sends it to a worker to finish the rules and
 * branch. Only this thread touches the multi handle, the exchanges and the queues.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "util/alloc.h"
#include "util/hashmap.h"
#include "value/value_impl.h"

/* One owner's place in the loop: its jobs waiting for a slot and its requests in flight. Exists
 * while it has either (loop thread only). */
typedef struct owner_q {
  char owner[64];
  uint64_t hash;
  uint32_t active;              /* requests in flight */
  job *head, *tail;             /* waiting, in arrival order */
  struct owner_q *ring_next;    /* in the ring of owners that may start a job now */
  bool in_ring;
} owner_q;

struct http_loop {
  xgr_engine *e;
  CURLM *m;
  pthread_mutex_t mu;
  job *head, *tail;             /* submitted, not yet queued (under mu) */
  bool stop;                    /* under mu */
  pthread_t th;
  bool started;
  xgr_http_exchange **pool;     /* idle exchanges (loop thread only) */
  size_t npool, cappool;
  uint32_t max, max_owner;      /* the caps */
  size_t active;                /* requests in flight (loop thread; published in n_active) */
  size_t waiting;               /* jobs queued for a slot (loop thread; published in n_waiting) */
  xgr_hashmap owners;           /* owner_q by hash of the owner (hashed mode) */
  owner_q *ring_head, *ring_tail;
};

http_loop *xgr_eng_http_new(xgr_engine *e) {
  http_loop *h = xgr__xcalloc(1, sizeof *h);
  h->e = e;
  h->m = curl_multi_init();
  if (!h->m) {
    free(h);
    return NULL;
  }
  h->max = e->cfg.max_outbound ? e->cfg.max_outbound : XGR_ENGINE_DEFAULT_MAX_OUTBOUND;
  h->max_owner = e->cfg.max_outbound_per_owner ? e->cfg.max_outbound_per_owner : XGR_ENGINE_DEFAULT_MAX_OUTBOUND_PER_OWNER;
  curl_multi_setopt(h->m, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)h->max);
  curl_multi_setopt(h->m, CURLMOPT_MAXCONNECTS, (long)h->max);
  pthread_mutex_init(&h->mu, NULL);
  return h;
}

static xgr_http_exchange *get_exchange(http_loop *h) {
  if (h->npool) return h->pool[--h->npool];
  return xgr_http_exchange_new();
}

static void put_exchange(http_loop *h, xgr_http_exchange *x) {
  if (h->npool == h->cappool) {
    h->cappool = h->cappool ? h->cappool * 2 : 64;
    h->pool = xgr__xrealloc(h->pool, h->cappool * sizeof *h->pool);
  }
  h->pool[h->npool++] = x;
}

static uint64_t owner_hash(const char *owner) { return xgr__hash_bytes(owner, strlen(owner)); }

static bool owner_match(const void *ctx, const void *val) { return !strcmp(ctx, ((const owner_q *)val)->owner); }

static owner_q *owner_of(http_loop *h, const char *owner) {
  uint64_t hs = owner_hash(owner);
  owner_q *o = xgr__hashmap_find(&h->owners, hs, owner_match, owner);
  if (o) return o;
  o = xgr__xcalloc(1, sizeof *o);
  snprintf(o->owner, sizeof o->owner, "%s", owner);
  o->hash = hs;
  xgr__hashmap_add(&h->owners, hs, o);
  return o;
}

/* Put o in the ring when it has a waiting job and a free slot of its own. */
static void ring_offer(http_loop *h, owner_q *o) {
  if (o->in_ring || !o->head || o->active >= h->max_owner) return;
  o->in_ring = true;
  o->ring_next = NULL;
  if (h->ring_tail) h->ring_tail->ring_next = o;
  else h->ring_head = o;
  h->ring_tail = o;
}

/* Forget o once it has nothing in flight and nothing waiting. */
static void owner_settle(http_loop *h, owner_q *o) {
  if (o->active || o->head || o->in_ring) return;
  xgr__hashmap_remove(&h->owners, o->hash, o);
  free(o);
}

static void publish(http_loop *h) {
  atomic_store_explicit(&h->e->st_out_active, h->active, memory_order_relaxed);
  atomic_store_explicit(&h->e->st_out_waiting, h->waiting, memory_order_relaxed);
}

static void job_return(http_loop *h, job *j) {
  j->phase = JOB_FINISH;
  xgr_eng_job_http_done(h->e, j);
}

/* Queue j behind its owner's other jobs (j has a pending request). */
static void enqueue(http_loop *h, job *j) {
  owner_q *o = owner_of(h, j->sctx.owner ? j->sctx.owner : "");
  j->next = NULL;
  if (o->tail) o->tail->next = j;
  else o->head = j;
  o->tail = j;
  h->waiting++;
  ring_offer(h, o);
}

/* Start j's pending request in one of o's slots. Requests that cannot be started fail in place;
 * when j has none left it returns to its actor. */
static void start_request(http_loop *h, owner_q *o, job *j) {
  const xgr_http_request *rq;
  while ((rq = xgr_step_next_request(j->st))) {
    xgr_http_exchange *x = j->x ? j->x : get_exchange(h);
    if (x) {
      CURL *c = xgr_http_exchange_prepare(x, rq);
      curl_easy_setopt(c, CURLOPT_PRIVATE, (char *)j);
      j->x = x;
      if (curl_multi_add_handle(h->m, c) == CURLM_OK) {
        h->active++;
        o->active++;
        atomic_fetch_add_explicit(&h->e->st_http, 1, memory_order_relaxed);
        return;
      }
    }
    xgr_http_response resp = {.error = XGR_EHTTP, .error_message = "the HTTP loop cannot take the request"};
    xgr_step_feed_http(j->st, &resp);
  }
  if (j->x) put_exchange(h, j->x);
  j->x = NULL;
  job_return(h, j);
}

/* Start waiting jobs while slots are free, one job per owner per turn of the ring. */
static void pump(http_loop *h) {
  while (h->active < h->max && h->ring_head) {
    owner_q *o = h->ring_head;
    h->ring_head = o->ring_next;
    if (!h->ring_head) h->ring_tail = NULL;
    o->in_ring = false;
    job *j = o->head;
    assert(j && o->active < h->max_owner);
    o->head = j->next;
    if (!o->head) o->tail = NULL;
    j->next = NULL;
    h->waiting--;
    start_request(h, o, j);
    ring_offer(h, o);
    owner_settle(h, o);
  }
  publish(h);
}

static void finish_transfer(http_loop *h, CURL *c, CURLcode rc) {
  char *priv = NULL;
  curl_easy_getinfo(c, CURLINFO_PRIVATE, &priv);
  job *j = (job *)priv;
  curl_multi_remove_handle(h->m, c);
  owner_q *o = owner_of(h, j->sctx.owner ? j->sctx.owner : "");
  assert(o->active > 0 && h->active > 0);
  h->active--;
  o->active--;
  xgr_http_response resp;
  xgr_http_exchange_complete(j->x, rc, &resp);
  if (resp.error == XGR_EPERM) atomic_fetch_add_explicit(&h->e->st_out_refused, 1, memory_order_relaxed);
  xgr_step_feed_http(j->st, &resp);
  if (xgr_step_next_request(j->st)) {
    enqueue(h, j);   /* its next call waits its turn like any other (keeps its exchange) */
  } else {
    put_exchange(h, j->x);
    j->x = NULL;
    job_return(h, j);
  }
  ring_offer(h, o);
  owner_settle(h, o);
}

static void *http_main(void *arg) {
  http_loop *h = arg;
  for (;;) {
    pthread_mutex_lock(&h->mu);
    job *list = h->head;
    h->head = h->tail = NULL;
    bool stop = h->stop;
    pthread_mutex_unlock(&h->mu);
    while (list) {
      job *j = list;
      list = j->next;
      j->next = NULL;
      if (xgr_step_next_request(j->st)) enqueue(h, j);
      else job_return(h, j);
    }
    pump(h);
    if (stop && h->active == 0 && h->waiting == 0) break;
    int running = 0;
    curl_multi_perform(h->m, &running);
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(h->m, &left)))
      if (msg->msg == CURLMSG_DONE) finish_transfer(h, msg->easy_handle, msg->data.result);
    pump(h);
    pthread_mutex_lock(&h->mu);
    bool more = h->head != NULL;
    pthread_mutex_unlock(&h->mu);
    if (!more) curl_multi_poll(h->m, NULL, 0, 100, NULL);
  }
  return NULL;
}

int xgr_eng_http_start(http_loop *h, xgr_error *err) {
  if (pthread_create(&h->th, NULL, http_main, h)) return xgr_error_set(err, XGR_ENOMEM, NULL, "cannot start the HTTP loop");
  pthread_setname_np(h->th, "xgr-http");
  h->started = true;
  return 0;
}

void xgr_eng_http_submit(http_loop *h, job *j) {
  j->next = NULL;
  pthread_mutex_lock(&h->mu);
  if (h->tail) h->tail->next = j;
  else h->head = j;
  h->tail = j;
  pthread_mutex_unlock(&h->mu);
  curl_multi_wakeup(h->m);
}

/* Stop the loop once the transfers in flight are done (their jobs go back to their actors). */
void xgr_eng_http_free(http_loop *h) {
  if (!h) return;
  if (h->started) {
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_mutex_unlock(&h->mu);
    curl_multi_wakeup(h->m);
    pthread_join(h->th, NULL);
  }
  assert(xgr__hashmap_size(&h->owners) == 0);   /* the loop ran until nothing was queued */
  xgr__hashmap_free(&h->owners);
  for (size_t i = 0; i < h->npool; i++) xgr_http_exchange_free(h->pool[i]);
  free(h->pool);
  curl_multi_cleanup(h->m);
  pthread_mutex_destroy(&h->mu);
  free(h);
}
