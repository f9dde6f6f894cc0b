/* human.c — durations and UTC instants for text output (see human.h). */
#include "cli/human.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

const char *xgr_cli_duration(int64_t ms, char *buf, size_t n) {
  if (ms == INT64_MAX) {
    snprintf(buf, n, "never");
    return buf;
  }
  const char *sign = "";
  uint64_t v = (uint64_t)ms;
  if (ms < 0) {
    sign = "-";
    v = (uint64_t)0 - v;
  }
  if (v < 1000) {
    snprintf(buf, n, "%s%llums", sign, (unsigned long long)v);
    return buf;
  }
  uint64_t d = v / 86400000, h = v / 3600000 % 24, m = v / 60000 % 60, s = v / 1000 % 60, frac = v % 1000;
  size_t len = 0;
  buf[0] = '\0';
  len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s", sign);
  if (d) len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%llud", (unsigned long long)d);
  if (h) len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%lluh", (unsigned long long)h);
  if (m) len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%llum", (unsigned long long)m);
  if (s || frac) {
    if (frac) {
      char f[8];
      snprintf(f, sizeof f, "%03llu", (unsigned long long)frac);
      for (int i = 2; i > 0 && f[i] == '0'; i--) f[i] = '\0';   /* 2.500 -> 2.5 */
      len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%llu.%ss", (unsigned long long)s, f);
    } else {
      len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%llus", (unsigned long long)s);
    }
  }
  return buf;
}

const char *xgr_cli_utc(int64_t epoch_ms, char *buf, size_t n) {
  if (epoch_ms <= 0) {
    snprintf(buf, n, "-");
    return buf;
  }
  time_t t = (time_t)(epoch_ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char day[24];
  strftime(day, sizeof day, "%Y-%m-%d %H:%M:%S", &tm);
  snprintf(buf, n, "%s.%03dZ", day, (int)(epoch_ms % 1000));
  return buf;
}

const char *xgr_cli_clock(int64_t t, char *buf, size_t n) {
  if (t >= 100000000000LL) return xgr_cli_utc(t, buf, n);
  snprintf(buf, n, "%lldms", (long long)t);
  return buf;
}
