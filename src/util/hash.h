/* hash.h — the library's one 64-bit mixer. Hash tables (value keys, the explorer's state sets,
 * the store's process index) and the PostgreSQL batch partitioning all finish their hashes with
 * xgr__mix64, the splitmix64 finalizer (a bijection on 64 bits with full avalanche), so there is
 * one copy to trust. Library-private; not installed. */
#ifndef XGR_UTIL_HASH_H
#define XGR_UTIL_HASH_H

#include <stdint.h>

/* Mix all 64 input bits into every output bit. Pure; any thread. */
static inline uint64_t xgr__mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

#endif
