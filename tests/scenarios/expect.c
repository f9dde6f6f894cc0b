/* expect.c — scenario expectations against a report (see expect.h). */
#include "expect.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void failf(scen_fail_fn fail, void *ctx, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void failf(scen_fail_fn fail, void *ctx, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fail(ctx, msg);
}

static const char *sget(const json_t *o, const char *k) {
  const char *s = json_string_value(json_object_get(o, k));
  return s ? s : "";
}

static char *dump(const json_t *j) { return json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS); }

static const json_t *find_proc(const json_t *procs, const char *pid) {
  size_t i;
  json_t *p;
  json_array_foreach(procs, i, p) if (!strcmp(sget(p, "pid"), pid)) return p;
  return NULL;
}

/* Every key of want is in got with an equal value (numbers by value). */
static int subset(const json_t *want, const json_t *got) {
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)want, k, v) {
    const json_t *g = json_object_get(got, k);
    if (!g) return 0;
    if (json_is_number(v) && json_is_number(g)) {
      if (json_number_value(v) != json_number_value(g)) return 0;
    } else if (!json_equal(v, g)) {
      return 0;
    }
  }
  return 1;
}

void scen_check(const json_t *x, const json_t *rep, scen_fail_fn fail, void *ctx) {
  const json_t *wr = json_object_get(x, "result");
  if (wr && strcmp(sget(rep, "result"), json_string_value(wr)))
    failf(fail, ctx, "result %s, expected %s", sget(rep, "result"), json_string_value(wr));
  const json_t *procs = json_object_get(rep, "processes");
  size_t i;
  json_t *w;
  json_array_foreach(json_object_get(x, "processes"), i, w) {
    const char *pid = sget(w, "pid");
    const json_t *p = find_proc(procs, pid);
    if (!p) {
      failf(fail, ctx, "process %s was never created", pid);
      continue;
    }
    static const char *const plain[] = {"step", "status", "valid", "paused", "abortReason"};
    for (size_t k = 0; k < 5; k++) {
      const json_t *wv = json_object_get(w, plain[k]), *gv = json_object_get(p, plain[k]);
      if (wv && (!gv || !json_equal(wv, gv))) {
        char *a = gv ? dump(gv) : strdup("(missing)"), *b = dump(wv);
        failf(fail, ctx, "%s.%s = %s, expected %s", pid, plain[k], a, b);
        free(a);
        free(b);
      }
    }
    const json_t *wj = json_object_get(w, "join");
    if (wj) {
      const json_t *gj = json_object_get(p, "join");
      const char *out = json_is_object(gj) ? sget(gj, "outcome") : "(no join)";
      if (strcmp(out, json_string_value(wj))) failf(fail, ctx, "%s join %s, expected %s", pid, out, json_string_value(wj));
      const json_t *wf = json_object_get(w, "joinFail");
      if (wf && !(json_is_object(gj) && subset(wf, json_object_get(gj, "fail")))) failf(fail, ctx, "%s join.fail differs", pid);
      const json_t *wc = json_object_get(w, "joinClosedAt"), *gc = json_is_object(gj) ? json_object_get(gj, "closedAt") : NULL;
      if (wc && !(gc && json_integer_value(gc) == json_integer_value(wc)))
        failf(fail, ctx, "%s join.closedAt = %lld, expected %lld", pid, gc ? (long long)json_integer_value(gc) : -1LL,
              (long long)json_integer_value(wc));
    }
    if (json_is_true(json_object_get(w, "error")) && !json_is_string(json_object_get(p, "error")))
      failf(fail, ctx, "%s has no error", pid);
    const json_t *wp = json_object_get(w, "payload");
    if (wp && !subset(wp, json_object_get(p, "payload"))) {
      char *g = dump(json_object_get(p, "payload")), *want = dump(wp);
      failf(fail, ctx, "%s payload %s lacks %s", pid, g ? g : "null", want ? want : "?");
      free(g);
      free(want);
    }
    size_t k;
    json_t *key;
    json_array_foreach(json_object_get(w, "payloadLacks"), k, key) if (json_object_get(json_object_get(p, "payload"),
                                                                                          json_string_value(key)))
        failf(fail, ctx, "%s payload has key %s", pid, json_string_value(key));
  }
  const json_t *cnt = json_object_get(x, "count");
  if (cnt && (json_int_t)json_array_size(procs) != json_integer_value(cnt))
    failf(fail, ctx, "%zu processes, expected %lld", json_array_size(procs), (long long)json_integer_value(cnt));
  const json_t *hc = json_object_get(x, "history");
  if (hc && (json_int_t)json_array_size(json_object_get(rep, "history")) != json_integer_value(hc))
    failf(fail, ctx, "%zu history rows, expected %lld", json_array_size(json_object_get(rep, "history")),
          (long long)json_integer_value(hc));
  const char *pid;
  json_t *at;
  json_object_foreach(json_object_get(x, "historyAt"), pid, at) {
    json_int_t got = -1;
    size_t k;
    json_t *h;
    json_array_foreach(json_object_get(rep, "history"), k, h) if (!strcmp(sget(h, "pid"), pid)) {
      got = json_integer_value(json_object_get(h, "at"));
      break;
    }
    if (got != json_integer_value(at))
      failf(fail, ctx, "%s ran at %lld ms, expected %lld", pid, (long long)got, (long long)json_integer_value(at));
  }
  json_object_foreach(json_object_get(x, "historyError"), pid, at) {   /* pid: substring of its row's error */
    const char *got = NULL;
    size_t k;
    json_t *h;
    json_array_foreach(json_object_get(rep, "history"), k, h) if (!strcmp(sget(h, "pid"), pid)) {
      got = json_string_value(json_object_get(h, "error"));
      break;
    }
    if (!got || !strstr(got, json_string_value(at)))
      failf(fail, ctx, "%s history error is %s, expected it to contain \"%s\"", pid, got ? got : "missing",
            json_string_value(at));
  }
  const json_t *ka = json_object_get(x, "killedAt");
  const json_t *gk = json_object_get(rep, "killedAt");
  if (ka && (json_is_null(ka) ? gk != NULL : !json_equal(ka, gk))) failf(fail, ctx, "killedAt differs");
  json_array_foreach(json_object_get(x, "actionsOk"), i, w) {
    const json_t *g = json_object_get(json_array_get(json_object_get(rep, "actions"), i), "ok");
    if (!g || !json_equal(g, w)) failf(fail, ctx, "action %zu: %s", i, g ? "wrong outcome" : "not applied");
  }
}


xgr_driver *scen_driver(const json_t *sc, const xgr_bundle *b, const char *owner, xgr_error *e) {
  xgr_driver_config cfg = {.record = true, .max_steps = 10000};
  const json_t *ms = json_object_get(sc, "maxSteps");
  if (json_is_integer(ms)) cfg.max_steps = (uint64_t)json_integer_value(ms);
  xgr_driver *d = xgr_driver_new(&cfg);
  xgr_value payload;
  xgr_value_from_json(json_object_get(sc, "payload"), 0, &payload, e);
  const char *o = json_string_value(json_object_get(sc, "owner")), *start = json_string_value(json_object_get(sc, "start"));
  if (xgr_driver_add_session(d, b, o ? o : owner, 1, start ? start : "", payload, e) ||
      (json_object_get(sc, "script") && xgr_driver_add_script(d, json_object_get(sc, "script"), e))) {
    xgr_driver_free(d);
    d = NULL;
  }
  xgr_value_release(payload);
  return d;
}

xgr_bundle *scen_bundle(const json_t *sc, xgr_error *e) {
  char *txt = json_dumps(json_object_get(sc, "bundle"), JSON_COMPACT);
  xgr_bundle *b = NULL;
  if (!txt) xgr_error_set(e, XGR_EINVAL, "bundle", "missing or not JSON");
  else if (xgr_bundle_parse(txt, strlen(txt), &b, e, NULL)) b = NULL;
  free(txt);
  return b;
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

char **scen_files(const char *dirname, const char *filter, size_t *n) {
  DIR *dir = opendir(dirname);
  if (!dir) {
    perror(dirname);
    return NULL;
  }
  char **names = calloc(1024, sizeof *names);
  if (!names) abort();
  *n = 0;
  struct dirent *de;
  while ((de = readdir(dir)) && *n < 1024) {
    size_t l = strlen(de->d_name);
    if (l > 5 && !strcmp(de->d_name + l - 5, ".json") && (!filter || strstr(de->d_name, filter)))
      if (!(names[(*n)++] = strdup(de->d_name))) abort();
  }
  closedir(dir);
  qsort(names, *n, sizeof *names, name_cmp);
  return names;
}
