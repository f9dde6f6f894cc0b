/* harness.c — see harness.h. */
#include "harness.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

/* Daemons started and not stopped yet (killed by xh_teardown). */
static pid_t g_started[8];

static void remember(pid_t pid, bool add) {
  for (size_t i = 0; i < sizeof g_started / sizeof g_started[0]; i++)
    if (add ? g_started[i] == 0 : g_started[i] == pid) {
      g_started[i] = add ? pid : 0;
      return;
    }
}

int xh_teardown(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof g_started / sizeof g_started[0]; i++)
    if (g_started[i] > 0) {
      kill(g_started[i], SIGKILL);
      waitpid(g_started[i], NULL, 0);
      g_started[i] = 0;
    }
  return 0;
}

const char *xh_xgrd_path(void) {
  const char *p = getenv("XGRD");
  return p ? p : "./xgrd";
}

double xh_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void xh_msleep(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

char *xh_read_log(const xh_daemon *d, char *buf, size_t n) {
  assert_true(n > 0);
  FILE *f = fopen(d->log, "r");
  size_t k = f ? fread(buf, 1, n - 1, f) : 0;
  buf[k] = 0;
  if (f) fclose(f);
  return buf;
}

int xh_write(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

void xh_init(xh_daemon *d, const char *name) {
  memset(d, 0, sizeof *d);
  snprintf(d->dir, sizeof d->dir, "/tmp/xgr-%s-XXXXXX", name);
  if (!mkdtemp(d->dir)) fail_msg("cannot make %s", d->dir);
  snprintf(d->store, sizeof d->store, "sqlite:%s/store.db", d->dir);
  snprintf(d->log, sizeof d->log, "%s/xgrd.log", d->dir);
}

void xh_remove(xh_daemon *d) {
  if (d->pid > 0) xh_stop(d, SIGKILL);
  if (!d->dir[0]) return;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", d->dir);
  if (system(cmd)) { /* best effort */ }
}

pid_t xh_spawn(xh_daemon *d, const char *const *args) {
  char portfile[300];
  snprintf(portfile, sizeof portfile, "%s/port", d->dir);
  unlink(portfile);
  const char *argv[48] = {xh_xgrd_path()};
  size_t n = 1;
  bool listen = false;
  for (size_t i = 0; args && args[i]; i++) {
    assert_true(n < 43);
    if (!strcmp(args[i], "--listen")) listen = true;
    argv[n++] = args[i];
  }
  argv[n++] = "--port-file";
  argv[n++] = portfile;
  if (!listen) {
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
  }
  argv[n] = NULL;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);   /* never outlive the test */
    FILE *f = freopen(d->log, "a", stderr);
    (void)f;
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  d->pid = pid;
  d->port = 0;
  remember(pid, true);
  return pid;
}

int xh_wait_port(xh_daemon *d) {
  char portfile[300];
  snprintf(portfile, sizeof portfile, "%s/port", d->dir);
  for (int i = 0; i < 3000; i++) {
    FILE *f = fopen(portfile, "r");
    if (f) {
      int ok = fscanf(f, "%d", &d->port);
      fclose(f);
      if (ok == 1 && d->port > 0) return 0;
    }
    int st;
    if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
      remember(d->pid, false);
      d->pid = 0;
      fprintf(stderr, "xgrd exited at start (see %s)\n", d->log);
      return -1;
    }
    xh_msleep(10);
  }
  fprintf(stderr, "xgrd did not write its port file (see %s)\n", d->log);
  return -1;
}

void xh_start(xh_daemon *d, const char *const *args) {
  xh_spawn(d, args);
  if (xh_wait_port(d)) fail_msg("xgrd did not start (see %s)", d->log);
}

int xh_stop(xh_daemon *d, int sig) {
  if (d->pid <= 0) return 0;
  kill(d->pid, sig);
  int st = 0;
  waitpid(d->pid, &st, 0);
  remember(d->pid, false);
  d->pid = 0;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

size_t xh_buf_sink(char *ptr, size_t size, size_t nmemb, void *ud) {
  xh_buf *b = ud;
  size_t n = size * nmemb;
  b->p = realloc(b->p, b->n + n + 1);
  assert_non_null(b->p);
  memcpy(b->p + b->n, ptr, n);
  b->n += n;
  b->p[b->n] = 0;
  return n;
}

long xh_http(const xh_daemon *d, const char *verb, const char *path, const char *ctype, const char *body, size_t len,
             long timeout_s, char **out) {
  return xh_http_at(d->port, verb, path, ctype, body, len, timeout_s, out);
}

long xh_http_at(int port, const char *verb, const char *path, const char *ctype, const char *body, size_t len,
                long timeout_s, char **out) {
  CURL *h = curl_easy_init();
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
  xh_buf b = {0};
  struct curl_slist *hd = NULL;
  if (ctype) {
    char line[128];
    snprintf(line, sizeof line, "Content-Type: %s", ctype);
    hd = curl_slist_append(hd, line);
  }
  hd = curl_slist_append(hd, "Expect:");
  curl_easy_setopt(h, CURLOPT_URL, url);
  if (body) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
  }
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, verb);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, xh_buf_sink);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s);
  CURLcode cc = curl_easy_perform(h);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(hd);
  curl_easy_cleanup(h);
  if (cc != CURLE_OK) status = -1;
  if (out) *out = b.p ? b.p : strdup("");
  else free(b.p);
  return status;
}

json_t *xh_post(const xh_daemon *d, const char *body, size_t len) {
  char *out;
  long st = xh_http(d, "POST", "/", "application/json", body, len, 30, &out);
  if (st != 200) fail_msg("HTTP %ld %s", st, out);
  json_t *r = json_loads(out, 0, NULL);
  if (!r) fail_msg("not JSON: %s", out);
  free(out);
  return r;
}

json_t *xh_call(const xh_daemon *d, const char *method, json_t *params) {
  json_t *rq = json_pack("{s:s, s:i, s:s, s:o}", "jsonrpc", "2.0", "id", 1, "method", method, "params",
                         params ? params : json_object());
  char *s = json_dumps(rq, JSON_COMPACT);
  json_decref(rq);
  char *out;
  long st = xh_http(d, "POST", "/", "application/json", s, strlen(s), 30, &out);
  free(s);
  if (st != 200) fail_msg("%s: HTTP %ld %s", method, st, out);
  json_t *r = json_loads(out, 0, NULL);
  if (!r) fail_msg("%s: not JSON: %s", method, out);
  free(out);
  return r;
}

json_t *xh_result(const char *method, json_t *answer) {
  json_t *e = json_object_get(answer, "error");
  if (e) {
    char *t = json_dumps(e, 0);
    fail_msg("%s failed: %s", method, t);
  }
  json_t *res = json_incref(json_object_get(answer, "result"));
  json_decref(answer);
  return res;
}
