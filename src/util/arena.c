/* arena.c — bump allocator: a linked list of blocks, newest first; an allocation that does not
 * fit the newest block gets a new block of max(block_size, n). See xgr/arena.h. */
#include "xgr/arena.h"
#include "util/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct xgr_arena_block {
  xgr_arena_block *next;
  size_t used, size;
  _Alignas(16) unsigned char data[];
};

void xgr_arena_init(xgr_arena *a, size_t block_size) {
  a->head = NULL;
  a->block_size = block_size ? block_size : 4096;
}

void xgr_arena_free(xgr_arena *a) {
  xgr_arena_block *b = a->head;
  while (b) {
    xgr_arena_block *n = b->next;
    free(b);
    b = n;
  }
  a->head = NULL;
}

void *xgr_arena_alloc(xgr_arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n == 0) n = 16;
  xgr_arena_block *b = a->head;
  if (!b || b->size - b->used < n) {
    size_t size = n > a->block_size ? n : a->block_size;
    b = xgr__xmalloc(sizeof *b + size);
    b->used = 0;
    b->size = size;
    b->next = a->head;
    a->head = b;
  }
  void *p = b->data + b->used;
  b->used += n;
  memset(p, 0, n);
  return p;
}

char *xgr_arena_strdup(xgr_arena *a, const char *s) {
  size_t n = strlen(s) + 1;
  char *p = xgr_arena_alloc(a, n);
  if (p) memcpy(p, s, n);
  return p;
}
