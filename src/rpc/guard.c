/* guard.c — the connection guard of xgrd's HTTP server (see server_impl.h).
 *
 * libmicrohttpd's own connection timeout only counts idle time, so a client trickling one byte a
 * second would hold its connection (and a slot of the connection limit) forever. The guard tracks
 * every accepted connection with the time its current request started (the accept, or the
 * previous answer) and a reaper thread shuts down, every 200 ms, each connection whose request or
 * the taking of its answer has lasted longer than --timeout; libmicrohttpd then sees the socket
 * fail and closes it. While a method runs for a connection it has no deadline here (its own waits
 * are bounded elsewhere). The Host-header check (DNS rebinding) lives here too.
 */
#include "rpc/server_impl.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include "util/alloc.h"
#include "util/clock.h"

/* One accepted connection, for the request deadline. */
struct xgr__rpc_conn {
  struct xgr__rpc_conn *prev, *next;
  int fd;
  double base;   /* when the current request's clock started (accept, or the previous answer) */
  bool busy;     /* a method runs for it: its own waits are bounded elsewhere */
};

void xgr__rpc_guard_init(xgr_rpc_server *s) {
  pthread_mutex_init(&s->cmu, NULL);
  pthread_cond_init(&s->ccv, NULL);
}

void xgr__rpc_guard_destroy(xgr_rpc_server *s) {
  assert(!s->reaper_on);
  pthread_cond_destroy(&s->ccv);
  pthread_mutex_destroy(&s->cmu);
}

static xgr__rpc_conn *conn_of(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

/* busy: a method starts running for the connection; !busy: its answer is queued, the client gets a
 * whole deadline to take it. */
void xgr__rpc_conn_busy(xgr_rpc_server *s, struct MHD_Connection *c, bool busy) {
  xgr__rpc_conn *k = conn_of(c);
  if (!k) return;
  pthread_mutex_lock(&s->cmu);
  k->busy = busy;
  k->base = xgr__mono_s();
  pthread_mutex_unlock(&s->cmu);
}

void xgr__rpc_notify_conn(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_ConnectionNotificationCode toe) {
  xgr_rpc_server *s = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return;
    xgr__rpc_conn *k = xgr__xcalloc(1, sizeof *k);
    k->fd = ci->connect_fd;
    k->base = xgr__mono_s();
    pthread_mutex_lock(&s->cmu);
    k->next = s->conns;
    if (s->conns) s->conns->prev = k;
    s->conns = k;
    pthread_mutex_unlock(&s->cmu);
    *ctx = k;
  } else if (*ctx) {
    /* libmicrohttpd reports the close before it closes the socket, so the reaper never shuts
     * down a descriptor that was reused */
    xgr__rpc_conn *k = *ctx;
    pthread_mutex_lock(&s->cmu);
    if (k->prev) k->prev->next = k->next;
    else s->conns = k->next;
    if (k->next) k->next->prev = k->prev;
    pthread_mutex_unlock(&s->cmu);
    free(k);
    *ctx = NULL;
  }
}

/* Shut down every connection whose request (or the taking of its answer) has lasted longer than
 * --timeout; libmicrohttpd then sees the socket fail and closes it. */
static void *reaper_main(void *arg) {
  xgr_rpc_server *s = arg;
  pthread_mutex_lock(&s->cmu);
  while (!s->reaper_stop) {
    double now = xgr__mono_s();
    for (xgr__rpc_conn *k = s->conns; k; k = k->next)
      if (!k->busy && now - k->base > (double)s->cfg.timeout_s) {
        shutdown(k->fd, SHUT_RD);
        k->base = now;   /* once per deadline */
      }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&s->ccv, &s->cmu, &ts);
  }
  pthread_mutex_unlock(&s->cmu);
  return NULL;
}

void xgr__rpc_reaper_start(xgr_rpc_server *s) {
  s->reaper_stop = false;
  s->reaper_on = pthread_create(&s->reaper, NULL, reaper_main, s) == 0;
}

void xgr__rpc_reaper_stop(xgr_rpc_server *s) {
  if (!s->reaper_on) return;
  pthread_mutex_lock(&s->cmu);
  s->reaper_stop = true;
  pthread_cond_signal(&s->ccv);
  pthread_mutex_unlock(&s->cmu);
  pthread_join(s->reaper, NULL);
  s->reaper_on = false;
}

/* A loopback name, strictly: a dotted-quad IPv4 address in 127.0.0.0/8 (four decimal parts, as
 * inet_pton reads them), the IPv6 loopback address, or `localhost`. A name that only starts like
 * one (`127.attacker.example`, which a DNS-rebinding page can point at 127.0.0.1) is not. */
static bool is_loopback(const char *h) {
  struct in_addr a4;
  struct in6_addr a6;
  if (inet_pton(AF_INET, h, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  if (inet_pton(AF_INET6, h, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return !strcasecmp(h, "localhost");
}

bool xgr__rpc_host_allowed(const char *host, const char *listen_host, unsigned port) {
  if (!host) return true;
  char name[256];
  size_t n = strlen(host);
  if (n == 0 || n >= sizeof name) return false;
  const char *colon;
  if (host[0] == '[') { /* [v6]:port */
    const char *close = strchr(host, ']');
    if (!close) return false;
    memcpy(name, host + 1, (size_t)(close - host - 1));
    name[close - host - 1] = 0;
    colon = close[1] == ':' ? close + 1 : close[1] ? host /* junk after ] */ : NULL;
    if (colon == host) return false;
  } else {
    colon = strchr(host, ':');
    size_t l = colon ? (size_t)(colon - host) : n;
    memcpy(name, host, l);
    name[l] = 0;
  }
  if (colon) {
    char *end;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (*end || colon[1] == 0 || p != port) return false;
  }
  if (!strcmp(listen_host, "0.0.0.0") || !strcmp(listen_host, "::") || !*listen_host) return true;
  if (is_loopback(listen_host)) return is_loopback(name);
  return !strcasecmp(name, listen_host);
}

bool xgr__rpc_host_ok(struct MHD_Connection *c, const char *host, uint16_t port) {
  return xgr__rpc_host_allowed(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host"), host, port);
}

bool xgr__rpc_same_origin(const char *origin, const char *host, const char *fetch_site) {
  if (fetch_site && strcasecmp(fetch_site, "same-origin") && strcasecmp(fetch_site, "none")) return false;
  if (!origin) return true;
  const char *o = !strncasecmp(origin, "http://", 7) ? origin + 7 : !strncasecmp(origin, "https://", 8) ? origin + 8 : NULL;
  return o && host && *host && !strcasecmp(o, host);
}
