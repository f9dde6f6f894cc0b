/* metrics.c — the Prometheus registry of xgr/metrics.h. Series sit in a linked list per family
 * (families in registration order); counters and histogram buckets are C11 atomics; histogram sums
 * are kept in nanounits as integers so they can be added atomically. */
#include "xgr/metrics.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/buf.h"

const double xgr_metrics_latency_buckets[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                              0.01,    0.025,  0.05,    0.1,    0.25,  0.5,    1,
                                              2.5,     5,      10};
const size_t xgr_metrics_latency_nbuckets = sizeof xgr_metrics_latency_buckets / sizeof xgr_metrics_latency_buckets[0];

enum { KIND_COUNTER, KIND_HISTOGRAM, KIND_GAUGE, KIND_COLLECTOR };

struct xgr_counter {
  struct xgr_counter *next;
  char *labels;
  _Atomic uint64_t v;
};

struct xgr_histogram {
  struct xgr_histogram *next;
  char *labels;
  size_t n;
  double bounds[32];
  _Atomic uint64_t buckets[33];   /* per bucket (not cumulative); the last is +Inf */
  _Atomic uint64_t count;
  _Atomic int64_t sum_nano;       /* sum in units of 1e-9 */
};

typedef struct family {
  struct family *next;
  int kind;
  char *name, *help;
  xgr_counter *counters;
  xgr_histogram *histograms;
  void (*collect)(void *, xgr_metrics_out *);
  void *ctx;
} family;

struct xgr_metrics {
  pthread_mutex_t mu;
  family *families, *last;
};

/* What gauge callbacks write into: the text being rendered. */
struct xgr_metrics_out {
  xgr_buf text;
};

#define out_printf(o, ...) xgr__buf_printf(&(o)->text, __VA_ARGS__)

xgr_metrics *xgr_metrics_new(void) {
  xgr_metrics *m = xgr__xcalloc(1, sizeof *m);
  pthread_mutex_init(&m->mu, NULL);
  return m;
}

void xgr_metrics_free(xgr_metrics *m) {
  if (!m) return;
  family *f = m->families;
  while (f) {
    family *nf = f->next;
    for (xgr_counter *c = f->counters, *nc; c; c = nc) {
      nc = c->next;
      free(c->labels);
      free(c);
    }
    for (xgr_histogram *h = f->histograms, *nh; h; h = nh) {
      nh = h->next;
      free(h->labels);
      free(h);
    }
    free(f->name);
    free(f->help);
    free(f);
    f = nf;
  }
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static family *family_get(xgr_metrics *m, const char *name, const char *help, int kind) {
  for (family *f = m->families; f; f = f->next)
    if (!strcmp(f->name, name)) return f->kind == kind ? f : NULL;
  family *f = xgr__xcalloc(1, sizeof *f);
  f->kind = kind;
  f->name = xgr__xstrdup(name);
  f->help = xgr__xstrdup(help ? help : "");
  if (m->last) m->last->next = f;
  else m->families = f;
  m->last = f;
  return f;
}

xgr_counter *xgr_metrics_counter(xgr_metrics *m, const char *name, const char *help, const char *labels) {
  pthread_mutex_lock(&m->mu);
  family *f = family_get(m, name, help, KIND_COUNTER);
  xgr_counter *c = NULL;
  if (f) {
    for (c = f->counters; c && strcmp(c->labels, labels ? labels : ""); c = c->next) {}
    if (!c) {
      c = xgr__xcalloc(1, sizeof *c);
      c->labels = xgr__xstrdup(labels ? labels : "");
      c->next = f->counters;
      f->counters = c;
    }
  }
  pthread_mutex_unlock(&m->mu);
  return c;
}

void xgr_counter_add(xgr_counter *c, uint64_t n) {
  if (c) atomic_fetch_add_explicit(&c->v, n, memory_order_relaxed);
}

xgr_histogram *xgr_metrics_histogram(xgr_metrics *m, const char *name, const char *help, const char *labels,
                                     const double *bounds, size_t nbounds) {
  if (nbounds > 32) nbounds = 32;
  pthread_mutex_lock(&m->mu);
  family *f = family_get(m, name, help, KIND_HISTOGRAM);
  xgr_histogram *h = NULL;
  if (f) {
    for (h = f->histograms; h && strcmp(h->labels, labels ? labels : ""); h = h->next) {}
    if (!h) {
      h = xgr__xcalloc(1, sizeof *h);
      h->labels = xgr__xstrdup(labels ? labels : "");
      h->n = nbounds;
      memcpy(h->bounds, bounds, nbounds * sizeof *bounds);
      h->next = f->histograms;
      f->histograms = h;
    }
  }
  pthread_mutex_unlock(&m->mu);
  return h;
}

void xgr_histogram_observe(xgr_histogram *h, double v) {
  if (!h) return;
  size_t i = 0;
  while (i < h->n && v > h->bounds[i]) i++;
  atomic_fetch_add_explicit(&h->buckets[i], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum_nano, (int64_t)llround(v * 1e9), memory_order_relaxed);
}

/* A family whose samples a callback writes at scrape time (a gauge, or a collector of families). */
static void callback_family(xgr_metrics *m, const char *name, const char *help, int kind,
                            void (*collect)(void *ctx, xgr_metrics_out *out), void *ctx) {
  pthread_mutex_lock(&m->mu);
  family *f = family_get(m, name, help, kind);
  if (f) {
    f->collect = collect;
    f->ctx = ctx;
  }
  pthread_mutex_unlock(&m->mu);
}

void xgr_metrics_gauge(xgr_metrics *m, const char *name, const char *help,
                       void (*collect)(void *ctx, xgr_metrics_out *out), void *ctx) {
  callback_family(m, name, help, KIND_GAUGE, collect, ctx);
}

void xgr_metrics_collector(xgr_metrics *m, const char *id, void (*collect)(void *ctx, xgr_metrics_out *out), void *ctx) {
  callback_family(m, id, NULL, KIND_COLLECTOR, collect, ctx);
}

void xgr_metrics_family(xgr_metrics_out *out, const char *name, const char *type, const char *help) {
  assert(!strcmp(type, "counter") || !strcmp(type, "gauge"));
  out_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void xgr_metrics_line(xgr_metrics_out *out, const char *name, const char *labels, double value) {
  if (labels && *labels) out_printf(out, "%s{%s} %.17g\n", name, labels, value);
  else out_printf(out, "%s %.17g\n", name, value);
}

static void series(xgr_metrics_out *o, const char *name, const char *suffix, const char *labels, const char *extra,
                   const char *val) {
  bool any = (labels && *labels) || (extra && *extra);
  out_printf(o, "%s%s%s%s%s%s%s %s\n", name, suffix, any ? "{" : "", labels ? labels : "",
             labels && *labels && extra && *extra ? "," : "", extra ? extra : "", any ? "}" : "", val);
}

size_t xgr_metrics_label_escape(char *out, size_t n, const char *value) {
  size_t k = 0;
  if (!n) return 0;
  for (const char *p = value ? value : ""; *p; p++) {
    char esc = *p == '\\' ? '\\' : *p == '"' ? '"' : *p == '\n' ? 'n' : 0;
    size_t need = esc ? 2 : 1;
    if (k + need >= n) break;
    if (esc) {
      out[k++] = '\\';
      out[k++] = esc;
    } else {
      out[k++] = *p;
    }
  }
  out[k] = '\0';
  return k;
}

char *xgr_metrics_render(xgr_metrics *m, size_t *len) {
  xgr_metrics_out o = {0};
  static const char *const types[] = {"counter", "histogram", "gauge"};
  /* counters and histograms under the lock; gauge callbacks after it (they may take other locks) */
  size_t ngauges = 0;
  family *gauges[64];
  pthread_mutex_lock(&m->mu);
  for (family *f = m->families; f; f = f->next) {
    if (f->kind == KIND_GAUGE || f->kind == KIND_COLLECTOR) {
      if (ngauges < 64) gauges[ngauges++] = f;
      continue;
    }
    out_printf(&o, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, types[f->kind]);
    if (f->kind == KIND_COUNTER) {
      for (xgr_counter *c = f->counters; c; c = c->next) {
        char v[32];
        snprintf(v, sizeof v, "%llu", (unsigned long long)atomic_load(&c->v));
        series(&o, f->name, "", c->labels, NULL, v);
      }
    } else {
      for (xgr_histogram *h = f->histograms; h; h = h->next) {
        uint64_t cum = 0;
        char le[48], v[32];
        for (size_t i = 0; i <= h->n; i++) {
          cum += atomic_load(&h->buckets[i]);
          if (i < h->n) snprintf(le, sizeof le, "le=\"%g\"", h->bounds[i]);
          else snprintf(le, sizeof le, "le=\"+Inf\"");
          snprintf(v, sizeof v, "%llu", (unsigned long long)cum);
          series(&o, f->name, "_bucket", h->labels, le, v);
        }
        snprintf(v, sizeof v, "%.9f", (double)atomic_load(&h->sum_nano) / 1e9);
        series(&o, f->name, "_sum", h->labels, NULL, v);
        snprintf(v, sizeof v, "%llu", (unsigned long long)atomic_load(&h->count));
        series(&o, f->name, "_count", h->labels, NULL, v);
      }
    }
  }
  pthread_mutex_unlock(&m->mu);
  for (size_t i = 0; i < ngauges; i++) {
    family *f = gauges[i];   /* families are never freed before the registry */
    if (f->kind == KIND_GAUGE) out_printf(&o, "# HELP %s %s\n# TYPE %s gauge\n", f->name, f->help, f->name);
    if (f->collect) f->collect(f->ctx, &o);   /* a collector writes its families' HELP and TYPE itself */
  }
  return xgr__buf_finish(&o.text, len);
}
