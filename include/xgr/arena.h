/* xgr/arena.h — a bump allocator for data that lives and dies together (a parsed document, one
 * step evaluation). Allocations are 16-byte aligned and never freed one by one; xgr_arena_free
 * releases everything at once. Not thread-safe: one owner at a time. */
#ifndef XGR_ARENA_H
#define XGR_ARENA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xgr_arena_block xgr_arena_block;

typedef struct xgr_arena {
  xgr_arena_block *head;      /* most recent block first */
  size_t block_size;          /* default size of new blocks */
} xgr_arena;

/* Initialise an empty arena; block_size 0 means 4096. Allocates nothing yet. */
void xgr_arena_init(xgr_arena *a, size_t block_size);
/* Release every block. The arena can be used again afterwards. */
void xgr_arena_free(xgr_arena *a);
/* n bytes, zeroed, 16-byte aligned; NULL when out of memory. Valid until xgr_arena_free. */
void *xgr_arena_alloc(xgr_arena *a, size_t n);
/* A copy of s (NUL-terminated) in the arena; NULL when out of memory. */
char *xgr_arena_strdup(xgr_arena *a, const char *s);

#ifdef __cplusplus
}
#endif
#endif
