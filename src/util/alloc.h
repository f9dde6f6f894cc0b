/* alloc.h — the library's one family of allocation helpers. Out of memory is not recoverable in
 * xgr: each helper prints one line and aborts instead of returning NULL, so callers never test the
 * result. The library's spelling; programs built on it use the same functions as xgr/alloc.h. Every pointer returned is owned by the
 * caller and released with free(). */
#ifndef XGR_UTIL_ALLOC_H
#define XGR_UTIL_ALLOC_H

#include <stddef.h>

/* malloc(n); n == 0 allocates one byte so the result is never NULL. */
void *xgr__xmalloc(size_t n);
/* Zeroed n*m bytes; aborts when n*m overflows. Small blocks come from malloc + memset, because
 * glibc's calloc takes the arena lock on every call (process records are allocated per step). */
void *xgr__xcalloc(size_t n, size_t m);
/* realloc(p, n); n == 0 keeps a one-byte block. */
void *xgr__xrealloc(void *p, size_t n);
/* aligned_alloc(align, n) with n rounded up to a multiple of align (C17's condition), so the
 * caller need not; align a power of two. Released with free(). */
void *xgr__xaligned_alloc(size_t align, size_t n);
/* A copy of s; NULL gives NULL. */
char *xgr__xstrdup(const char *s);
/* n bytes from arena a (xgr/arena.h; owned by the arena, not freed one by one). */
struct xgr_arena;
void *xgr__xarena_alloc(struct xgr_arena *a, size_t n);

#endif
