/* suggest.h — "did you mean" for document keys: the known key nearest to a misspelt one, so that
 * a typo such as `paylod` or `waitsec` gets a warning that names `payload` / `waitSec`. Internal to
 * the library (not part of include/xgr). */
#ifndef XGR_UTIL_SUGGEST_H
#define XGR_UTIL_SUGGEST_H

#include <stdbool.h>
#include <stddef.h>

/* The entry of known[0..n) nearest to key by edit distance, ignoring ASCII case, when it is close
 * enough to be a likely typo (at most 2 edits, and fewer than half of key's length); else NULL.
 * The result is borrowed from known. Keys longer than 64 bytes get no suggestion. */
const char *xgr__nearest_key(const char *key, const char *const *known, size_t n);

/* Whether key is one of known[0..n) (exact, case-sensitive). */
bool xgr__key_known(const char *key, const char *const *known, size_t n);

/* known[0..n) as "a, b, c" into buf (cap bytes, cap > 0), cut off at cap - 1 bytes: the list a
 * message about an unknown key shows. */
void xgr__keys_join(char *buf, size_t cap, const char *const *known, size_t n);
#endif
