/* tally.h — counts of holders per string key, with a cap: the one way xgrd's front end bounds
 * what one client address or one owner may hold at once (event streams per client and per owner,
 * validateDataTransfer calls in flight per client). Library-private; not installed.
 *
 * A tally maps a key (a client's IP address, an owner's address; at most XGR__TALLY_KEY - 1 bytes,
 * longer keys are cut there) to the number of units taken under it and not yet given back, and
 * keeps the sum over every key. An entry exists only while its count is above 0, so the table
 * holds at most as many entries as there are holders (each of which holds a connection). Every
 * call takes the tally's own lock: any thread. Allocation failure aborts (util/alloc.h).
 */
#ifndef XGR_UTIL_TALLY_H
#define XGR_UTIL_TALLY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/hashmap.h"

#define XGR__TALLY_KEY 72   /* bytes of a key, its NUL included */

typedef struct xgr__tally {
  pthread_mutex_t mu;
  xgr_hashmap map;   /* hash of the key -> entry (owned) */
  size_t total;      /* units held under every key */
} xgr__tally;

/* An empty tally (init) and its end (destroy: frees what is left). */
void xgr__tally_init(xgr__tally *t);
void xgr__tally_destroy(xgr__tally *t);
/* Take one unit under key unless the key holds max already (max 0: no cap) or, with total_max
 * above 0, the whole tally holds total_max. True when taken; false leaves the tally as it was.
 * *held (may be NULL) gets the key's count before the call. */
bool xgr__tally_take(xgr__tally *t, const char *key, unsigned max, size_t total_max, unsigned *held);
/* Give back one unit taken under key (asserted to be held). */
void xgr__tally_give(xgr__tally *t, const char *key);
/* Units held now under every key. */
size_t xgr__tally_total(xgr__tally *t);

#endif
