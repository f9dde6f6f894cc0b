/* load.c — the request generator of bench/permits/run.sh: JSON-RPC bodies, one per line, sent over
 * several keep-alive HTTP/1.1 connections to xgrd on loopback, each body once, as fast as the
 * answers come back (closed loop: one request in flight per connection).
 *
 *   bench_load URL BODIES_FILE CONNECTIONS SECONDS [XGRD_PID]
 *
 * Everything that is not sending happens before the timed phase: the bodies (pre-signed permits)
 * are read and every request's bytes (request line, headers, body) are laid out in one buffer, so a
 * request costs the client one send and the reads of its answer. The timed phase ends when
 * SECONDS have passed or the bodies run out; the answers in flight then are awaited and counted.
 *
 * It prints the answers per second, the answers that are not HTTP 200 with "queued" in the body,
 * its own CPU time per request (getrusage) and, given xgrd's pid, xgrd's CPU time (user + system
 * from /proc/PID/stat) per answered request over the same interval. One thread, epoll; bounded: at
 * most 4096 connections, answers of at most 1 MiB, 127.0.0.1 only, and 30 s without an answer
 * end the run with an error. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#define MAX_CONNS 4096
#define MAX_ANSWER (1 << 20)

typedef struct conn {
  int fd;
  bool busy;             /* a request is in flight */
  size_t sent, len;      /* bytes of the current request sent / total */
  const char *req;       /* the current request's bytes (in the shared buffer) */
  char *in;              /* the answer read so far */
  size_t in_len, in_cap;
} conn;

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double self_cpu(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
         (double)ru.ru_stime.tv_usec * 1e-6;
}

/* utime + stime of pid in seconds; -1 when unreadable. */
static double proc_cpu(long pid) {
  if (pid <= 0) return -1;
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');   /* the command name may hold spaces */
  if (!p) return -1;
  unsigned long long ut = 0, st = 0;
  /* after ")": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime(14) stime(15) */
  if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Is a whole answer in c->in? Sets *total to its size (headers + Content-Length body). 0: not yet,
 * 1: complete, -1: malformed (no Content-Length, or too big). */
static int answer_complete(const conn *c, size_t *total) {
  const char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
  if (!end) return c->in_len > 64 * 1024 ? -1 : 0;
  size_t head = (size_t)(end - c->in) + 4;
  const char *cl = NULL;
  for (const char *p = c->in; p && p < end; p = memchr(p, '\n', (size_t)(end - p))) {
    if (*p == '\n') p++;
    if (!strncasecmp(p, "Content-Length:", 15)) {
      cl = p + 15;
      break;
    }
  }
  if (!cl) return -1;
  size_t body = strtoul(cl, NULL, 10);
  if (body > MAX_ANSWER) return -1;
  *total = head + body;
  return c->in_len >= *total;
}

int main(int argc, char **argv) {
  if (argc < 5 || argc > 6) {
    fprintf(stderr, "usage: bench_load URL BODIES_FILE CONNECTIONS SECONDS [XGRD_PID]\n");
    return 2;
  }
  unsigned port = 0;
  if (sscanf(argv[1], "http://127.0.0.1:%u", &port) != 1 || !port || port > 65535) {
    fprintf(stderr, "bench_load: URL must be http://127.0.0.1:PORT/\n");
    return 2;
  }
  int nconn = atoi(argv[3]);
  double secs = atof(argv[4]);
  long xpid = argc == 6 ? atol(argv[5]) : 0;
  if (nconn < 1 || nconn > MAX_CONNS || secs <= 0) {
    fprintf(stderr, "bench_load: 1..%d connections and a positive duration\n", MAX_CONNS);
    return 2;
  }

  /* before the timed phase: every request's bytes in one buffer */
  FILE *f = fopen(argv[2], "r");
  if (!f) return perror(argv[2]), 2;
  size_t cap = 1 << 20, used = 0, nreq = 0, rcap = 1024;
  char *buf = malloc(cap);
  size_t *off = malloc(rcap * sizeof *off), *len = malloc(rcap * sizeof *len);
  char *line = NULL;
  size_t lcap = 0;
  ssize_t ll;
  while ((ll = getline(&line, &lcap, f)) > 0) {
    while (ll && (line[ll - 1] == '\n' || line[ll - 1] == '\r')) line[--ll] = 0;
    if (!ll) continue;
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "POST / HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zd\r\n\r\n",
                      port, ll);
    while (used + (size_t)hl + (size_t)ll > cap) cap *= 2;
    if (nreq == rcap) {
      rcap *= 2;
      off = realloc(off, rcap * sizeof *off);
      len = realloc(len, rcap * sizeof *len);
    }
    buf = realloc(buf, cap);
    if (!buf || !off || !len) return fprintf(stderr, "bench_load: out of memory\n"), 2;
    off[nreq] = used;
    memcpy(buf + used, head, (size_t)hl);
    memcpy(buf + used + hl, line, (size_t)ll);
    len[nreq] = (size_t)hl + (size_t)ll;
    used += len[nreq];
    nreq++;
  }
  free(line);
  fclose(f);
  if (!nreq) return fprintf(stderr, "bench_load: %s has no bodies\n", argv[2]), 2;

  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ep = epoll_create1(0);
  conn *cs = calloc((size_t)nconn, sizeof *cs);
  for (int i = 0; i < nconn; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa)) return perror("bench_load: connect"), 1;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    cs[i].fd = fd;
    cs[i].in_cap = 4096;
    cs[i].in = malloc(cs[i].in_cap);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.u32 = (uint32_t)i};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  }

  size_t next = 0, answered = 0, bad = 0, inflight = 0;
  double x0 = proc_cpu(xpid), c0 = self_cpu(), t0 = mono(), deadline = t0 + secs;
  bool sending = true;
  /* start: one request per connection */
  for (int i = 0; i < nconn && next < nreq; i++) {
    conn *c = &cs[i];
    c->req = buf + off[next];
    c->len = len[next++];
    c->sent = 0;
    c->busy = true;
    inflight++;
  }
  struct epoll_event evs[256];
  char first_bad[200] = "";
  double progress = t0;   /* the last answer; 30 s without one ends the run */
  while (inflight) {
    int n = epoll_wait(ep, evs, 256, 100);
    if (n < 0 && errno != EINTR) return perror("bench_load: epoll_wait"), 1;
    if (n <= 0 && mono() - progress > 30)
      return fprintf(stderr, "bench_load: no answer for 30 s with %zu requests in flight\n", inflight), 1;
    if (sending && (mono() >= deadline || next >= nreq)) sending = false;
    for (int k = 0; k < n; k++) {
      conn *c = &cs[evs[k].data.u32];
      if (c->busy && c->sent < c->len) {   /* write what the socket takes */
        ssize_t w = send(c->fd, c->req + c->sent, c->len - c->sent, MSG_NOSIGNAL);
        if (w > 0) c->sent += (size_t)w;
        else if (w < 0 && errno != EAGAIN) return perror("bench_load: send"), 1;
      }
      for (;;) {   /* read until EAGAIN (edge-triggered) */
        if (c->in_cap - c->in_len < 4096) c->in = realloc(c->in, c->in_cap *= 2);
        ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (r == 0) return fprintf(stderr, "bench_load: xgrd closed a connection\n"), 1;
        if (r < 0) {
          if (errno == EAGAIN) break;
          return perror("bench_load: recv"), 1;
        }
        c->in_len += (size_t)r;
        size_t total;
        int done;
        while (c->busy && (done = answer_complete(c, &total)) != 0) {
          if (done < 0) return fprintf(stderr, "bench_load: a malformed answer\n"), 1;
          answered++;
          inflight--;
          progress = mono();
          c->busy = false;
          bool ok = !strncmp(c->in, "HTTP/1.1 200", 12) && memmem(c->in, total, "\"queued\"", 8);
          if (!ok && !bad++) snprintf(first_bad, sizeof first_bad, "%.*s", (int)(total < 199 ? total : 199), c->in);
          memmove(c->in, c->in + total, c->in_len - total);
          c->in_len -= total;
          if (sending && next < nreq) {   /* the connection's next request */
            c->req = buf + off[next];
            c->len = len[next++];
            c->busy = true;
            inflight++;
            ssize_t w = send(c->fd, c->req, c->len, MSG_NOSIGNAL);
            c->sent = w > 0 ? (size_t)w : 0;
            if (w < 0 && errno != EAGAIN) return perror("bench_load: send"), 1;
          }
        }
      }
    }
  }
  double t = mono() - t0, c1 = self_cpu(), x1 = proc_cpu(xpid);
  printf("load: %zu answers in %.2f s = %.0f /s over %d connections; answers other than queued: %zu; bodies used %zu of %zu\n",
         answered, t, (double)answered / t, nconn, bad, next, nreq);
  if (bad) printf("load: first other answer: %s\n", first_bad);
  printf("load: client CPU %.1f us per request\n", (c1 - c0) / (double)answered * 1e6);
  if (x0 >= 0 && x1 >= 0)
    printf("load: xgrd CPU %.2f s = %.1f us per answered request\n", x1 - x0, (x1 - x0) / (double)answered * 1e6);
  for (int i = 0; i < nconn; i++) {
    close(cs[i].fd);
    free(cs[i].in);
  }
  free(cs);
  free(buf);
  free(off);
  free(len);
  close(ep);
  return bad ? 1 : 0;
}
