/* outbound.c — the outbound address policy (xgr/outbound.h) and its connect-time check on curl
 * handles (util/outbound.h).
 *
 * Addresses are compared in one form: 16 bytes, an IPv4 address as its IPv4-mapped IPv6 address
 * (::ffff:a.b.c.d), so one table of ranges covers both families and a mapped address is judged
 * as the IPv4 address it is. IPv6 forms that carry an IPv4 address in other ways (compatible,
 * NAT64, 6to4) are judged by that address too. The check runs in curl's open-socket callback, on
 * each address curl is about to connect to — after resolution, for every connection (redirects are
 * not followed at all; each new connection is a new check), so a DNS answer that changes between a
 * lookup and the connect cannot slip a refused address through.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "util/alloc.h"
#include "util/outbound.h"

typedef struct range {
  uint8_t a[16];
  unsigned bits;           /* prefix length over the 16-byte form */
} range;

struct xgr_outbound_policy {
  range *allow;
  size_t n, cap;
};

#define V4(a, b, c, d) {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d}

/* The refused classes, in the order they are reported (one range per row). */
static const struct cls_range {
  const char *cls;
  range r;
} CLASSES[] = {
    {"loopback", {V4(127, 0, 0, 0), 96 + 8}},
    {"loopback", {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128}},
    {"link-local", {V4(169, 254, 0, 0), 96 + 16}},
    {"link-local", {{0xfe, 0x80}, 10}},
    {"private", {V4(10, 0, 0, 0), 96 + 8}},
    {"private", {V4(172, 16, 0, 0), 96 + 12}},
    {"private", {V4(192, 168, 0, 0), 96 + 16}},
    {"private", {{0xfc}, 7}},
    {"private", {{0xfe, 0xc0}, 10}},   /* site-local (deprecated, still routed privately) */
    {"unspecified", {V4(0, 0, 0, 0), 96 + 8}},
    {"unspecified", {{0}, 128}},
    {"cgnat", {V4(100, 64, 0, 0), 96 + 10}},
    {"multicast", {V4(224, 0, 0, 0), 96 + 4}},
    {"multicast", {{0xff}, 8}},
    {"reserved", {V4(240, 0, 0, 0), 96 + 4}},   /* includes the broadcast address 255.255.255.255 */
};
#define NCLASSES (sizeof CLASSES / sizeof CLASSES[0])
static const char *const WORDS[] = {"loopback", "link-local", "private", "unspecified", "cgnat", "multicast", "reserved"};

static const xgr_outbound_policy default_policy = {0};

const xgr_outbound_policy *xgr_outbound_default(void) { return &default_policy; }

xgr_outbound_policy *xgr_outbound_policy_new(void) { return xgr__xcalloc(1, sizeof(xgr_outbound_policy)); }

void xgr_outbound_policy_free(xgr_outbound_policy *p) {
  if (!p) return;
  free(p->allow);
  free(p);
}

static bool in_range(const uint8_t a[16], const range *r) {
  unsigned full = r->bits / 8, rest = r->bits % 8;
  if (memcmp(a, r->a, full)) return false;
  if (!rest) return true;
  uint8_t mask = (uint8_t)(0xff << (8 - rest));
  return (a[full] & mask) == (r->a[full] & mask);
}

static void add(xgr_outbound_policy *p, const range *r) {
  if (p->n == p->cap) {
    p->cap = p->cap ? p->cap * 2 : 8;
    p->allow = xgr__xrealloc(p->allow, p->cap * sizeof *p->allow);
  }
  range c = *r;
  unsigned full = c.bits / 8, rest = c.bits % 8;   /* host bits cleared: "10.1.2.3/8" is 10.0.0.0/8 */
  if (full < 16) {
    if (rest) c.a[full] &= (uint8_t)(0xff << (8 - rest));
    memset(c.a + full + (rest ? 1 : 0), 0, 16 - full - (rest ? 1 : 0));
  }
  p->allow[p->n++] = c;
}

int xgr_outbound_policy_allow(xgr_outbound_policy *p, const char *spec, xgr_error *err) {
  static const char expected[] = "expected a CIDR (10.0.0.0/8, fd00::/8), an address, or one of loopback, link-local, "
                                 "private, cgnat, unspecified, multicast, reserved, any";
  if (!strcmp(spec, "any")) {
    add(p, &(range){{0}, 0});
    return 0;
  }
  bool word = false;
  for (size_t w = 0; w < sizeof WORDS / sizeof WORDS[0]; w++)
    if (!strcmp(spec, WORDS[w])) {
      word = true;
      for (size_t i = 0; i < NCLASSES; i++)
        if (!strcmp(CLASSES[i].cls, spec)) add(p, &CLASSES[i].r);
    }
  if (word) return 0;
  char buf[INET6_ADDRSTRLEN + 8];
  const char *slash = strchr(spec, '/');
  size_t alen = slash ? (size_t)(slash - spec) : strlen(spec);
  if (alen && spec[0] == '[' && spec[alen - 1] == ']') {   /* "[::1]" */
    spec++;
    alen -= 2;
  }
  if (!alen || alen >= sizeof buf) return xgr_error_set(err, XGR_EINVAL, NULL, "\"%s\": %s", spec, expected);
  memcpy(buf, spec, alen);
  buf[alen] = 0;
  range r = {{0}, 0};
  unsigned max;
  struct in_addr v4;
  if (inet_pton(AF_INET, buf, &v4) == 1) {
    memcpy(r.a, (uint8_t[12]){0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 12);
    memcpy(r.a + 12, &v4, 4);
    max = 32;
  } else if (inet_pton(AF_INET6, buf, r.a) == 1) {
    max = 128;
  } else {
    return xgr_error_set(err, XGR_EINVAL, NULL, "\"%s\": %s", slash ? spec : buf, expected);
  }
  unsigned bits = max;
  if (slash) {
    char *end;
    unsigned long b = strtoul(slash + 1, &end, 10);
    if (!slash[1] || *end || slash[1] == '-' || slash[1] == '+' || b > max)
      return xgr_error_set(err, XGR_EINVAL, NULL, "\"%s\": the prefix length must be 0..%u", spec, max);
    bits = (unsigned)b;
  }
  r.bits = bits + (128 - max);
  add(p, &r);
  return 0;
}

/* The IPv4 address an IPv6 address carries (as its mapped form in out), if any. */
static bool embedded_v4(const uint8_t a[16], uint8_t out[16]) {
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
  static const uint8_t zero[12] = {0};
  const uint8_t *v4 = NULL;
  if (!memcmp(a, mapped, 12) || !memcmp(a, nat64, 12)) v4 = a + 12;
  else if (!memcmp(a, zero, 12) && (a[12] | a[13] | a[14] | a[15]) && !(a[12] == 0 && a[13] == 0 && a[14] == 0))
    v4 = a + 12;   /* IPv4-compatible ::a.b.c.d (not :: nor ::1, nor ::0.0.0.x) */
  else if (a[0] == 0x20 && a[1] == 0x02) v4 = a + 2;   /* 6to4 2002:aabb:ccdd:: */
  if (!v4) return false;
  memcpy(out, mapped, 12);
  memcpy(out + 12, v4, 4);
  return true;
}

static const char *classify(const uint8_t a[16]) {
  for (size_t i = 0; i < NCLASSES; i++)
    if (in_range(a, &CLASSES[i].r)) return CLASSES[i].cls;
  return NULL;
}

bool xgr_outbound_allowed(const xgr_outbound_policy *p, const struct sockaddr *sa, const char **cls, char *addr, size_t n) {
  if (!p) p = &default_policy;
  uint8_t a[16] = {0}, e[16];
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
    a[10] = a[11] = 0xff;
    memcpy(a + 12, &s4->sin_addr, 4);
  } else if (sa->sa_family == AF_INET6) {
    memcpy(a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
  } else {
    if (cls) *cls = "not an IP address";
    if (addr && n) snprintf(addr, n, "(family %d)", (int)sa->sa_family);
    return false;
  }
  bool emb = embedded_v4(a, e);
  const char *c = classify(emb ? e : a);
  if (!c && emb) c = classify(a);
  if (!c) return true;
  for (size_t i = 0; i < p->n; i++)
    if (in_range(a, &p->allow[i]) || (emb && in_range(e, &p->allow[i]))) return true;
  if (cls) *cls = c;
  if (addr && n) {
    if (sa->sa_family == AF_INET) inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, addr, (socklen_t)n);
    else inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, addr, (socklen_t)n);
  }
  return false;
}

/* ---- the curl side ------------------------------------------------------------------------- */

static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a) {
  xgr__outbound_conn *c = clientp;
  (void)purpose;
  const char *cls;
  char text[INET6_ADDRSTRLEN];
  if (!c->operator_endpoint && !xgr_outbound_allowed(c->policy, &a->addr, &cls, text, sizeof text)) {
    if (!c->refused) {
      c->refused = true;
      c->cls = cls;
      memcpy(c->addr, text, sizeof text);
    }
    return CURL_SOCKET_BAD;
  }
  return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

void xgr__outbound_setopt(CURL *h, xgr__outbound_conn *c) {
  c->refused = false;
  c->cls = NULL;
  c->addr[0] = 0;
  curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_socket);
  curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, c);
  curl_easy_setopt(h, CURLOPT_PROXY, "");            /* no proxy, whatever the environment says */
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);  /* a redirect is the answer, never followed */
  if (c->operator_endpoint) curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
}

void xgr__outbound_refusal(const xgr__outbound_conn *c, const char *url, char *buf, size_t n) {
  char *host = NULL;
  CURLU *u = curl_url();
  if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK) curl_url_get(u, CURLUPART_HOST, &host, 0);
  bool v6 = strchr(c->addr, ':') != NULL;
  snprintf(buf, n, "outbound address %s (%s) of host \"%.100s\" is not allowed by the outbound policy; --allow-outbound %s/%d permits it",
           c->addr, c->cls ? c->cls : "refused", host ? host : "?", c->addr, v6 ? 128 : 32);
  curl_free(host);
  curl_url_cleanup(u);
}
