/* clock.h — the monotonic clock, read one way across the library: for intervals, timeouts and
 * deadlines of condition variables set to CLOCK_MONOTONIC (never for dates: those are the
 * realtime clock). Library-private. */
#ifndef XGR_UTIL_CLOCK_H
#define XGR_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds on CLOCK_MONOTONIC (an arbitrary origin; never goes back). */
static inline uint64_t xgr__mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Milliseconds and seconds of the same clock. */
static inline int64_t xgr__mono_ms(void) { return (int64_t)(xgr__mono_ns() / 1000000u); }
static inline double xgr__mono_s(void) { return (double)xgr__mono_ns() / 1e9; }

/* The CLOCK_MONOTONIC time ms milliseconds from now, for pthread_cond_timedwait on a condition
 * variable whose clock is CLOCK_MONOTONIC. */
static inline struct timespec xgr__mono_deadline(long ms) {
  uint64_t t = xgr__mono_ns() + (uint64_t)ms * 1000000u;
  return (struct timespec){.tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u)};
}

#endif
