/* http.c — the engine's single libcurl multi loop: every API call of every step goes through one
 * thread, so a step waiting on the network holds no worker.
 *
 * A worker evaluating a step that needs a request hands the job over (xgr_eng_http_submit: a
 * mutex-protected list plus curl_multi_wakeup). The loop prepares a curl easy handle for the
 * request with an xgr_http_exchange from its pool, adds it to the multi handle, and when curl
 * reports it done feeds the response to the step (xgr_step_feed_http). If the step needs another
 * request it goes straight back into the multi handle; otherwise the job returns to its actor
 * (phase JOB_FINISH), which sends it to a worker to finish the rules and branch. Only this thread
 * touches the multi handle and the exchanges.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "util/alloc.h"

struct http_loop {
  xgr_engine *e;
  CURLM *m;
  pthread_mutex_t mu;
  job *head, *tail;             /* submitted, not yet started (under mu) */
  bool stop;                    /* under mu */
  pthread_t th;
  bool started;
  xgr_http_exchange **pool;     /* idle exchanges (loop thread only) */
  size_t npool, cappool;
  size_t active;
};

http_loop *xgr_eng_http_new(xgr_engine *e) {
  http_loop *h = xgr__xcalloc(1, sizeof *h);
  h->e = e;
  h->m = curl_multi_init();
  if (!h->m) {
    free(h);
    return NULL;
  }
  curl_multi_setopt(h->m, CURLMOPT_MAXCONNECTS, 4096L);
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

/* Start the job's pending request; when no exchange can be made, fail the request in place. */
static void start_request(http_loop *h, job *j) {
  for (;;) {
    const xgr_http_request *rq = xgr_step_next_request(j->st);
    if (!rq) {
      j->phase = JOB_FINISH;
      xgr_eng_job_http_done(h->e, j);
      return;
    }
    xgr_http_exchange *x = j->x ? j->x : get_exchange(h);
    if (x) {
      CURL *c = xgr_http_exchange_prepare(x, rq);
      curl_easy_setopt(c, CURLOPT_PRIVATE, (char *)j);
      j->x = x;
      if (curl_multi_add_handle(h->m, c) == CURLM_OK) {
        h->active++;
        atomic_fetch_add_explicit(&h->e->st_http, 1, memory_order_relaxed);
        return;
      }
    }
    xgr_http_response resp = {.error = XGR_EHTTP, .error_message = "the HTTP loop cannot take the request"};
    xgr_step_feed_http(j->st, &resp);
  }
}

static void finish_transfer(http_loop *h, CURL *c, CURLcode rc) {
  char *priv = NULL;
  curl_easy_getinfo(c, CURLINFO_PRIVATE, &priv);
  job *j = (job *)priv;
  curl_multi_remove_handle(h->m, c);
  h->active--;
  xgr_http_response resp;
  xgr_http_exchange_complete(j->x, rc, &resp);
  xgr_step_feed_http(j->st, &resp);
  if (xgr_step_next_request(j->st)) {
    start_request(h, j);
    return;
  }
  put_exchange(h, j->x);
  j->x = NULL;
  j->phase = JOB_FINISH;
  xgr_eng_job_http_done(h->e, j);
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
      start_request(h, j);
    }
    if (stop && h->active == 0) break;
    int running = 0;
    curl_multi_perform(h->m, &running);
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(h->m, &left)))
      if (msg->msg == CURLMSG_DONE) finish_transfer(h, msg->easy_handle, msg->data.result);
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
  for (size_t i = 0; i < h->npool; i++) xgr_http_exchange_free(h->pool[i]);
  free(h->pool);
  curl_multi_cleanup(h->m);
  pthread_mutex_destroy(&h->mu);
  free(h);
}
