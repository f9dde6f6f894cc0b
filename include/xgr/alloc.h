/* xgr/alloc.h — xgr's allocation family for the programs built on the library (the xgr CLI, xgrd,
 * embedders). Out of memory is not recoverable in xgr: each function prints one line on stderr and
 * aborts instead of returning NULL, so callers never test the result. The library itself uses the
 * same functions under its private spelling (src/util/alloc.h). Every pointer returned is owned by
 * the caller and released with free(). */
#ifndef XGR_ALLOC_H
#define XGR_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* n bytes (n == 0 allocates one byte, so the result is never NULL). */
void *xgr_alloc_bytes(size_t n);
/* n*m zeroed bytes; aborts when n*m overflows. */
void *xgr_alloc_zeroed(size_t n, size_t m);
/* p resized to n bytes, its contents kept up to the smaller size (p NULL: a new block). */
void *xgr_alloc_resize(void *p, size_t n);
/* A copy of the string s; NULL gives NULL. */
char *xgr_alloc_strdup(const char *s);

#ifdef __cplusplus
}
#endif

#endif
