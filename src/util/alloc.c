/* alloc.c — the allocation helpers of alloc.h: malloc, calloc, realloc, aligned_alloc and strdup that abort with
 * one line on stderr when memory runs out. */
#include "util/alloc.h"

#include "xgr/alloc.h"
#include "xgr/arena.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void out_of_memory(void) {
  fputs("xgr: out of memory\n", stderr);
  abort();
}

void *xgr__xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) out_of_memory();
  return p;
}

void *xgr__xcalloc(size_t n, size_t m) {
  if (!n) n = 1;
  if (!m) m = 1;
  if (m > SIZE_MAX / n) out_of_memory();
  if (n * m <= 1024) {
    void *p = xgr__xmalloc(n * m);
    memset(p, 0, n * m);
    return p;
  }
  void *p = calloc(n, m);
  if (!p) out_of_memory();
  return p;
}

void *xgr__xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) out_of_memory();
  return q;
}

void *xgr__xaligned_alloc(size_t align, size_t n) {
  assert(align && (align & (align - 1)) == 0);
  if (!n) n = align;
  if (n > SIZE_MAX - (align - 1)) out_of_memory();
  void *p = aligned_alloc(align, (n + align - 1) & ~(align - 1));
  if (!p) out_of_memory();
  return p;
}

char *xgr__xstrdup(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = xgr__xmalloc(n);
  memcpy(d, s, n);
  return d;
}

void *xgr__xarena_alloc(xgr_arena *a, size_t n) {
  void *p = xgr_arena_alloc(a, n);
  if (!p) out_of_memory();
  return p;
}

/* The public spelling (xgr/alloc.h) for the front ends and embedders. */
void *xgr_alloc_bytes(size_t n) { return xgr__xmalloc(n); }
void *xgr_alloc_zeroed(size_t n, size_t m) { return xgr__xcalloc(n, m); }
void *xgr_alloc_resize(void *p, size_t n) { return xgr__xrealloc(p, n); }
char *xgr_alloc_strdup(const char *s) { return xgr__xstrdup(s); }
