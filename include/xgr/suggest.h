/* xgr/suggest.h — "did you mean": the known word nearest to a misspelt one, as the library's own
 * messages about unknown keys use it, for the front ends' messages about unknown commands and
 * options (`xgr stpe` → `step`). */
#ifndef XGR_SUGGEST_H
#define XGR_SUGGEST_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The entry of known[0..n) nearest to word by edit distance, ignoring ASCII case, when it is close
 * enough to be a likely typo (at most 2 edits, and fewer than half of word's length); else NULL.
 * The result is borrowed from known. Words longer than 64 bytes get no suggestion. */
const char *xgr_suggest_nearest(const char *word, const char *const *known, size_t n);

#ifdef __cplusplus
}
#endif

#endif
