/* xgr/logfmt.h — one writer for the log lines of xgrd and the library's services: logfmt, one line
 * of space-separated key=value pairs ("ts=2026-11-28T10:00:00.123Z level=info msg=ready addr=..."),
 * which people read and grep and log shippers parse. A line is built in a bounded buffer on the
 * caller's stack, pair by pair, and written with one call, so lines of several threads never mix.
 *
 * Values: a value is written bare when it is a single plain word and in double quotes otherwise
 * (empty values stay bare: `path=`); inside quotes `"` and `\` are escaped with a backslash and
 * control characters as \n, \r, \t or \u00XX, so a line is always one line and always parses.
 * Free text that readers expect in quotes whatever it holds (an error message) is written with
 * xgr_logfmt_quoted. A line that would outgrow the buffer is cut inside the value that does not
 * fit: the value ends in "..." (still quoted) and later pairs are dropped. Keys are the caller's
 * constant identifiers and are written as given. */
#ifndef XGR_LOGFMT_H
#define XGR_LOGFMT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XGR_LOGFMT_MAX 2048

typedef struct xgr_logfmt {
  size_t len;                  /* bytes in buf, without the NUL */
  bool cut;                    /* the line was cut at XGR_LOGFMT_MAX */
  char buf[XGR_LOGFMT_MAX];
} xgr_logfmt;

/* Start a line in l: with_ts adds ts=<UTC now, milliseconds>Z first; then level=<level> and
 * msg=<msg> (quoted when it is more than a word). */
void xgr_logfmt_begin(xgr_logfmt *l, bool with_ts, const char *level, const char *msg);
/* key=value, quoted only when needed (see above); NULL writes `key=`. */
void xgr_logfmt_str(xgr_logfmt *l, const char *key, const char *value);
/* key="value", always quoted (escaped as above); NULL writes `key=""`. */
void xgr_logfmt_quoted(xgr_logfmt *l, const char *key, const char *value);
void xgr_logfmt_u64(xgr_logfmt *l, const char *key, uint64_t value);
void xgr_logfmt_i64(xgr_logfmt *l, const char *key, int64_t value);
/* key=<printf(fmt, ...)>, quoted only when needed (for numbers in a chosen format: "%g", "%.3f"). */
void xgr_logfmt_printf(xgr_logfmt *l, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The line so far (NUL-terminated, borrowed from l). */
const char *xgr_logfmt_text(const xgr_logfmt *l);
/* Write the line and a newline to f with one locked write, and flush f. f NULL: nothing. */
void xgr_logfmt_write(const xgr_logfmt *l, FILE *f);

#ifdef __cplusplus
}
#endif

#endif
