/* suggest.c — the nearest known key to a misspelt one (see suggest.h): a Levenshtein distance on
 * ASCII-lowercased bytes, two rows, bounded lengths. */
#include "util/suggest.h"
#include "xgr/suggest.h"

#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define MAXLEN 64

static size_t distance(const char *a, size_t na, const char *b, size_t nb) {
  size_t row[2][MAXLEN + 1];
  for (size_t j = 0; j <= nb; j++) row[0][j] = j;
  for (size_t i = 1; i <= na; i++) {
    size_t *cur = row[i & 1], *prev = row[(i - 1) & 1];
    cur[0] = i;
    for (size_t j = 1; j <= nb; j++) {
      size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
      size_t best = prev[j - 1] + cost;
      if (prev[j] + 1 < best) best = prev[j] + 1;
      if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
      cur[j] = best;
    }
  }
  return row[na & 1][nb];
}

const char *xgr__nearest_key(const char *key, const char *const *known, size_t n) {
  size_t nk = strlen(key);
  if (nk == 0 || nk > MAXLEN) return NULL;
  const char *best = NULL;
  size_t bestd = (size_t)-1;
  for (size_t i = 0; i < n; i++) {
    size_t nb = strlen(known[i]);
    if (nb > MAXLEN) continue;
    size_t d = distance(key, nk, known[i], nb);
    if (d < bestd) {
      bestd = d;
      best = known[i];
    }
  }
  return best && bestd <= 2 && bestd * 2 < nk ? best : NULL;
}

bool xgr__key_known(const char *key, const char *const *known, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(key, known[i])) return true;
  return false;
}

void xgr__keys_join(char *buf, size_t cap, const char *const *known, size_t n) {
  assert(cap > 0);
  buf[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(buf);
    snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", known[i]);
  }
}

const char *xgr_suggest_nearest(const char *word, const char *const *known, size_t n) {
  return xgr__nearest_key(word, known, n);
}
