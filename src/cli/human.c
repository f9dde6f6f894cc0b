/* human.c — durations and UTC instants for text output (see human.h). */
#include "cli/human.h"

#include <jansson.h>
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

void xgr_cli_print_audit(const json_t *a, const char *root, const char *lead) {
  const json_t *d = json_object_get(a, "detail");
  const json_t *it = json_object_get(d, "iter");
  const char *step = json_string_value(json_object_get(d, "step"));
  char pid[64], when[40];
  if (json_is_integer(it)) snprintf(pid, sizeof pid, "%s:%lld", root, (long long)json_integer_value(it));
  else if (json_is_string(it)) snprintf(pid, sizeof pid, "%s:%s", root, json_string_value(it));
  else snprintf(pid, sizeof pid, "%s", root);
  printf("%s %-12s %-16s %s by %s via %s at %s", lead, pid, step ? step : "-",
         json_string_value(json_object_get(a, "kind")), json_string_value(json_object_get(a, "actor")),
         json_string_value(json_object_get(a, "node")), xgr_cli_utc(json_integer_value(json_object_get(a, "at")), when,
                                                                    sizeof when));
  const json_t *from = json_object_get(d, "from");
  if (from) {
    const json_t *fr = json_object_get(from, "rootPid");
    const char *fs = json_string_value(json_object_get(from, "step"));
    if (json_is_integer(fr)) printf(", from %s/%lld", json_string_value(json_object_get(from, "owner")), (long long)json_integer_value(fr));
    else printf(", from %s/%s", json_string_value(json_object_get(from, "owner")), json_string_value(fr));
    if (fs) printf(" step %s", fs);
  }
  const json_t *keys = json_object_get(d, "keys");
  if (json_array_size(keys)) {
    printf(", payload keys");
    size_t i;
    const json_t *k;
    json_array_foreach(keys, i, k) printf("%s%s", i ? "," : " ", json_string_value(k));
  }
  const json_t *w = json_object_get(d, "woken");
  if (json_is_integer(w)) printf(", woke %lld", (long long)json_integer_value(w));
  const char *reason = json_string_value(json_object_get(d, "reason"));
  if (reason) printf(": %s", reason);
  const char *pd = json_string_value(json_object_get(a, "permitDigest"));
  if (pd) printf(" (permit %.10s...)", pd);
  putchar('\n');
}
