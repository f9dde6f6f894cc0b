/* buf.h — a growable byte buffer for code that builds text (renderers, the JSON writer, the
 * join-state and template formats). Internal to the library: not part of include/xgr. Aborts when
 * out of memory, like the value model. A zeroed xgr_buf is empty; xgr__buf_finish hands over the
 * bytes (NUL-terminated, the caller frees them) and leaves the buffer empty. */
#ifndef XGR_UTIL_BUF_H
#define XGR_UTIL_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct xgr_buf {
  char *p;
  size_t len, cap;
} xgr_buf;

void xgr__buf_put(xgr_buf *b, const void *p, size_t n);
/* Make room for n more bytes (and the final NUL) at once: for a writer that knows its size. */
void xgr__buf_reserve(xgr_buf *b, size_t n);
static inline void xgr__buf_putc(xgr_buf *b, char c) {
  if (b->len + 2 <= b->cap) {   /* room for c and the NUL: no call */
    b->p[b->len++] = c;
    return;
  }
  xgr__buf_put(b, &c, 1);
}
static inline void xgr__buf_puts(xgr_buf *b, const char *s) {
  size_t n = 0;
  while (s[n]) n++;
  xgr__buf_put(b, s, n);
}
/* Append the UTF-8 encoding of code point cp (1 to 4 bytes); cp <= 0x10FFFF. A surrogate is
 * encoded like any other value: refusing it is the caller's (the parser's) job. The one encoder
 * of the JSON reader and the CEL lexer. */
void xgr__buf_put_utf8(xgr_buf *b, uint32_t cp);
/* Append printf-formatted text (any length). */
void xgr__buf_printf(xgr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Finish: NUL-terminate and return the malloc'd string (the buffer is reset). */
char *xgr__buf_finish(xgr_buf *b, size_t *len);

/* Small text pieces without printf, for paths that run for every request or step. */
/* The decimal digits of v into out (no NUL); returns their count (1 to 20). */
size_t xgr__u64_dec(char out[20], uint64_t v);
/* Append v in decimal (a '-' first when negative). */
void xgr__buf_put_u64(xgr_buf *b, uint64_t v);
void xgr__buf_put_i64(xgr_buf *b, int64_t v);
/* What snprintf(dst, cap, "%s", src) writes (src cut to cap - 1 bytes, NUL-terminated; cap > 0);
 * returns the bytes copied. */
size_t xgr__str_copy(char *dst, size_t cap, const char *src);

#endif
