/* harness.h — the one way the end-to-end tests run the real xgrd: a fresh temporary directory (its
 * store, port file and log), the daemon binary ($XGRD) forked on an ephemeral loopback port, waited
 * for through its port file, HTTP requests and JSON-RPC calls with libcurl, and a stop that returns
 * the exit status. Used by tests/daemon (test_daemon, test_hostile, test_rpc_fuzz) and the chain
 * tests that start xgrd (test_xgrd_chain, test_xgrd_exec); the tests are cmocka programs, and the
 * calls documented as failing the test do so with cmocka's fail_msg.
 *
 * Every daemon started is remembered until it is stopped, so a test that fails half-way leaves
 * nothing running: xh_teardown (a cmocka teardown) kills what is left, and every child also dies
 * with the test process (PR_SET_PDEATHSIG). */
#ifndef XGR_TEST_HARNESS_H
#define XGR_TEST_HARNESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct xh_daemon {
  pid_t pid;                  /* 0: not running */
  int port;                   /* the bound port, once xh_wait_port saw it */
  char dir[256];              /* its temporary directory */
  char store[300];            /* the --store value: "sqlite:<dir>/store.db" unless the test changes it */
  char log[320];              /* <dir>/xgrd.log: its stderr (appended to across restarts) */
} xh_daemon;

/* $XGRD, else "./xgrd". */
const char *xh_xgrd_path(void);
/* Seconds on the monotonic clock, and a sleep. */
double xh_now(void);
void xh_msleep(long ms);

/* Write text to dir/name (created or truncated). 0 on success. */
int xh_write(const char *dir, const char *name, const char *text);

/* A fresh directory /tmp/xgr-<name>-XXXXXX for d (zeroed first) and its store and log paths.
 * Fails the test when it cannot be made. */
void xh_init(xh_daemon *d, const char *name);
/* Kill d if it runs, then remove its directory (best effort). */
void xh_remove(xh_daemon *d);

/* Fork xgrd with args (NULL-terminated, may be NULL; borrowed), then `--port-file <dir>/port`, and
 * `--listen 127.0.0.1:0` unless args name a --listen; stderr appended to d->log. Returns at once
 * (the pid, also in d->pid); removes an old port file first. */
pid_t xh_spawn(xh_daemon *d, const char *const *args);
/* Wait for the port file (at most 30 s): 0 with d->port set, -1 when xgrd exited first or never
 * wrote it (a message naming the log on stderr). */
int xh_wait_port(xh_daemon *d);
/* xh_spawn + xh_wait_port; fails the test when xgrd does not come up. */
void xh_start(xh_daemon *d, const char *const *args);
/* Send sig and wait: the exit status, or 128 + the signal that ended it. */
int xh_stop(xh_daemon *d, int sig);
/* The start of d's log (at most n - 1 bytes) into buf, NUL-terminated; empty when it cannot be
 * read. Returns buf. */
char *xh_read_log(const xh_daemon *d, char *buf, size_t n);
/* A cmocka teardown: SIGKILL every daemon still remembered. Returns 0. */
int xh_teardown(void **state);

/* A growing response body for libcurl (xh_buf_sink as CURLOPT_WRITEFUNCTION, the buffer as
 * CURLOPT_WRITEDATA); p is NUL-terminated, malloc'd, NULL until data arrives. */
typedef struct xh_buf {
  char *p;
  size_t n;
} xh_buf;
size_t xh_buf_sink(char *ptr, size_t size, size_t nmemb, void *ud);

/* One HTTP request to d: verb on path, with a Content-Type header when ctype is not NULL and the
 * body[len] when body is not NULL; at most timeout_s seconds. Returns the HTTP status (-1: no
 * answer); *out (when out is not NULL) the body, malloc'd, never NULL. */
long xh_http(const xh_daemon *d, const char *verb, const char *path, const char *ctype, const char *body, size_t len,
             long timeout_s, char **out);
/* The same to any server on 127.0.0.1:port (tests/rpc runs the server library in process). */
long xh_http_at(int port, const char *verb, const char *path, const char *ctype, const char *body, size_t len,
                long timeout_s, char **out);
/* POST one JSON-RPC request {"jsonrpc":"2.0","id":1,"method","params"} (params stolen; NULL: {})
 * to "/" and return the whole answer object (caller decrefs). Fails the test unless the answer is
 * HTTP 200 with a JSON body. */
json_t *xh_call(const xh_daemon *d, const char *method, json_t *params);
/* POST a raw body; the parsed answer (caller decrefs). Fails the test unless HTTP 200 with JSON. */
json_t *xh_post(const xh_daemon *d, const char *body, size_t len);
/* The result of a call that must succeed (new reference): fails the test on an error answer. */
json_t *xh_result(const char *method, json_t *answer);

#endif
