/* xgr/metrics.h — a small Prometheus registry: counters and histograms updated with atomics from
 * any thread, gauges read through callbacks at scrape time, rendered in the text exposition
 * format (version 0.0.4) for `GET /metrics`.
 *
 * A series is a metric name plus a label string written as Prometheus writes it
 * (`method="xgr_sessionAlive",code="200"`, or "" for none). Looking a series up takes a mutex
 * (do it once and keep the pointer); updating it is lock-free. Series live until the registry is
 * freed. The registry is owned by whoever made it. */
#ifndef XGR_METRICS_H
#define XGR_METRICS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xgr_metrics xgr_metrics;
typedef struct xgr_counter xgr_counter;
typedef struct xgr_histogram xgr_histogram;

xgr_metrics *xgr_metrics_new(void);
void xgr_metrics_free(xgr_metrics *m);

/* The counter series (name, labels), created on first use. help is used by the first caller. */
xgr_counter *xgr_metrics_counter(xgr_metrics *m, const char *name, const char *help, const char *labels);
void xgr_counter_add(xgr_counter *c, uint64_t n);

/* The histogram series (name, labels) with bucket upper bounds (ascending, +Inf implied), created
 * on first use; bounds are copied (at most 32). */
xgr_histogram *xgr_metrics_histogram(xgr_metrics *m, const char *name, const char *help, const char *labels,
                                     const double *bounds, size_t nbounds);
void xgr_histogram_observe(xgr_histogram *h, double v);

/* A gauge family computed at scrape time: collect() appends sample lines ("name{labels} value\n")
 * through xgr_metrics_line. Called with no registry lock held, from the scraping thread. */
typedef struct xgr_metrics_out xgr_metrics_out;
void xgr_metrics_gauge(xgr_metrics *m, const char *name, const char *help,
                       void (*collect)(void *ctx, xgr_metrics_out *out), void *ctx);
void xgr_metrics_line(xgr_metrics_out *out, const char *name, const char *labels, double value);
/* Several families computed at scrape time by one callback (id names the collector, once per
 * registry; it is not rendered): collect() starts each family with xgr_metrics_family, then
 * writes its lines with xgr_metrics_line. type is "counter" (names end in _total) or "gauge". */
void xgr_metrics_collector(xgr_metrics *m, const char *id, void (*collect)(void *ctx, xgr_metrics_out *out), void *ctx);
void xgr_metrics_family(xgr_metrics_out *out, const char *name, const char *type, const char *help);

/* Write value into out (capacity n, always NUL-terminated when n > 0) as the inside of a label
 * value of the text format: backslash, double quote and line feed become \\, \" and \n. Returns
 * the length written; a value that does not fit is cut at a whole escape. */
size_t xgr_metrics_label_escape(char *out, size_t n, const char *value);

/* Render every series; returns a malloc'd text (caller frees), *len its length. */
char *xgr_metrics_render(xgr_metrics *m, size_t *len);

/* Latency buckets in seconds from 50 µs to 10 s, for step, commit and request latencies. */
extern const double xgr_metrics_latency_buckets[];
extern const size_t xgr_metrics_latency_nbuckets;

#ifdef __cplusplus
}
#endif
#endif
