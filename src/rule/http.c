/* http.c — performing the step engine's HTTP requests with libcurl (xgr_http_exchange).
 *
 * An exchange owns one curl easy handle, its header list and a response buffer. prepare() sets
 * the handle up from an xgr_http_request (method, URL, headers, body, total timeout, no redirects
 * to other protocols than http/https), so the same handle can be run with curl_easy_perform or
 * added to a curl multi loop; complete() turns curl's result code into an xgr_http_response. The
 * body is accumulated by a write callback that stops the transfer as soon as it would exceed the
 * request's max_response (the call then fails with XGR_ELIMIT), so an oversize body never sits in
 * memory in full. Every connection is checked against the request's outbound policy when it is
 * opened (util/outbound.h): a refused call fails with XGR_EPERM and a message naming the host, the
 * address and the flag that allows it. curl_global_init is the caller's responsibility (once per
 * process).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/rule.h"
#include "util/alloc.h"
#include "util/outbound.h"

struct xgr_http_exchange {
  CURL *h;
  struct curl_slist *headers;
  char *buf;
  size_t len, cap, max;
  bool oversize;
  long timeout_ms;
  char *url, *body;         /* copies: the request need not outlive prepare() */
  xgr__outbound_conn conn;  /* the connect-time address check of the transfer */
  const xgr_outbound_policy *api_policy;  /* the policy of the last API call (NULL: none yet) */
  char err[CURL_ERROR_SIZE];
  char msg[CURL_ERROR_SIZE + 192];
};

static size_t on_data(char *p, size_t size, size_t n, void *ud) {
  xgr_http_exchange *x = ud;
  size_t len = size * n;
  if (x->len + len > x->max) {
    x->oversize = true;
    return 0;  /* abort the transfer: CURLE_WRITE_ERROR */
  }
  if (x->len + len + 1 > x->cap) {
    size_t cap = x->cap ? x->cap : 4096;
    while (cap < x->len + len + 1) cap *= 2;
    char *b = xgr__xrealloc(x->buf, cap);
    x->buf = b;
    x->cap = cap;
  }
  memcpy(x->buf + x->len, p, len);
  x->len += len;
  x->buf[x->len] = 0;
  return len;
}

xgr_http_exchange *xgr_http_exchange_new(void) {
  xgr_http_exchange *x = xgr__xcalloc(1, sizeof *x);
  x->h = curl_easy_init();
  if (!x->h) {
    free(x);
    return NULL;
  }
  return x;
}

void xgr_http_exchange_free(xgr_http_exchange *x) {
  if (!x) return;
  curl_easy_cleanup(x->h);
  curl_slist_free_all(x->headers);
  free(x->buf);
  free(x->url);
  free(x->body);
  free(x);
}

CURL *xgr_http_exchange_prepare(xgr_http_exchange *x, const xgr_http_request *rq) {
  if (!rq->operator_endpoint) {
    /* a connection is reused only under the policy it was checked against: an API call under
     * another policy than the last one starts from a new handle, whose connection cache is empty
     * (operator endpoints' connections are never kept). In a multi handle the multi's cache is
     * shared: its users give all their API calls one policy (the engine's loop does). */
    const xgr_outbound_policy *p = rq->outbound ? rq->outbound : xgr_outbound_default();
    if (x->api_policy && x->api_policy != p) {
      CURL *fresh = curl_easy_init();
      if (!fresh) {   /* out of memory, as in util/alloc.h */
        fputs("xgr: out of memory (a curl handle)\n", stderr);
        abort();
      }
      curl_easy_cleanup(x->h);
      x->h = fresh;
    }
    x->api_policy = p;
  }
  CURL *h = x->h;
  curl_easy_reset(h);
  curl_slist_free_all(x->headers);
  x->headers = NULL;
  free(x->url);
  free(x->body);
  x->url = xgr__xstrdup(rq->url);
  x->body = NULL;
  x->len = 0;
  x->oversize = false;
  x->max = rq->max_response ? rq->max_response : XGR_HTTP_MAX_RESPONSE;
  x->timeout_ms = rq->timeout_ms;
  x->err[0] = 0;
  if (x->buf) x->buf[0] = 0;
  for (size_t i = 0; i < rq->nheaders; i++) x->headers = curl_slist_append(x->headers, rq->headers[i]);
  curl_easy_setopt(h, CURLOPT_URL, x->url);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, rq->timeout_ms > 0 ? rq->timeout_ms : (long)XGR_HTTP_DEFAULT_TIMEOUT_MS);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->err);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "xgr/0.1");
  curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)x->max);
  if (x->headers) curl_easy_setopt(h, CURLOPT_HTTPHEADER, x->headers);
  x->conn.policy = rq->outbound;
  x->conn.operator_endpoint = rq->operator_endpoint;
  xgr__outbound_setopt(h, &x->conn);
  const char *m = rq->method ? rq->method : "GET";
  if (rq->body) {
    x->body = xgr__xmalloc(rq->body_len + 1);
    memcpy(x->body, rq->body, rq->body_len);
    x->body[rq->body_len] = 0;
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, x->body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
  }
  if (!strcmp(m, "GET") && !rq->body) curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  else if (!strcmp(m, "HEAD")) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  else if (!(strcmp(m, "POST") == 0 && rq->body)) curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m);
  return h;
}

void xgr_http_exchange_complete(xgr_http_exchange *x, CURLcode rc, xgr_http_response *out) {
  memset(out, 0, sizeof *out);
  double secs = 0;
  curl_easy_getinfo(x->h, CURLINFO_TOTAL_TIME, &secs);
  out->ms = secs * 1000.0;
  long status = 0;
  curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
  out->status = status;
  out->body = x->buf ? x->buf : "";
  out->body_len = x->len;
  if (rc == CURLE_OK) return;
  if (x->conn.refused && rc == CURLE_COULDNT_CONNECT) {
    out->error = XGR_EPERM;
    xgr__outbound_refusal(&x->conn, x->url, x->msg, sizeof x->msg);
  } else if (x->oversize || rc == CURLE_FILESIZE_EXCEEDED) {
    out->error = XGR_ELIMIT;
    snprintf(x->msg, sizeof x->msg, "response body exceeds %zu bytes", x->max);
  } else if (rc == CURLE_OPERATION_TIMEDOUT) {
    out->error = XGR_ETIMEOUT;
    snprintf(x->msg, sizeof x->msg, "timeout after %ld ms", x->timeout_ms);
  } else {
    out->error = XGR_EHTTP;
    snprintf(x->msg, sizeof x->msg, "transport error: %s", x->err[0] ? x->err : curl_easy_strerror(rc));
  }
  out->error_message = x->msg;
  out->body = "";
  out->body_len = 0;
}

void xgr_http_exchange_perform(xgr_http_exchange *x, const xgr_http_request *rq, xgr_http_response *out) {
  CURL *h = xgr_http_exchange_prepare(x, rq);
  CURLcode rc = curl_easy_perform(h);
  xgr_http_exchange_complete(x, rc, out);
}
