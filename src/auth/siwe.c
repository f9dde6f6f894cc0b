/* siwe.c — Sign-In with Ethereum (EIP-4361) messages (xgr/siwe.h): parsing, building, the EIP-191
 * digest, signing with a key file's key (`xgr console --key`) and verification against what xgrd
 * expects (its Host, its chain id, the time). The nonce's single use is xgrd's (src/rpc/console_auth.c).
 */
#include "xgr/siwe.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util/alloc.h"
#include "xgr/keccak.h"

#define HEADER " wants you to sign in with your Ethereum account:"
#define SKEW_MS 60000   /* Issued At may be this far ahead of xgrd's clock */

void xgr_siwe_time(int64_t ms, char out[32]) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[96];
  int k = snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                   tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
  size_t n = k < 0 ? 0 : (size_t)k < 31 ? (size_t)k : 31;
  memcpy(out, buf, n);
  out[n] = '\0';
}

static int digits(const char **p, int n, int *out) {
  int v = 0;
  for (int i = 0; i < n; i++, (*p)++) {
    if (!isdigit((unsigned char)**p)) return -1;
    v = v * 10 + (**p - '0');
  }
  *out = v;
  return 0;
}

int xgr_siwe_parse_time(const char *s, int64_t *ms) {
  struct tm tm = {0};
  int y, mo, d, h, mi, se, frac = 0;
  const char *p = s;
  if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' || digits(&p, 2, &d) ||
      (*p != 'T' && *p != 't') || !*p++ || digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi) || *p++ != ':' ||
      digits(&p, 2, &se))
    return -1;
  if (*p == '.') {
    p++;
    int n = 0;
    for (; isdigit((unsigned char)*p); p++, n++)
      if (n < 3) frac = frac * 10 + (*p - '0');
    if (!n) return -1;
    for (; n < 3; n++) frac *= 10;
  }
  int64_t off = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int sign = *p++ == '-' ? -1 : 1, oh, om;
    if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om)) return -1;
    off = sign * (oh * 3600 + om * 60);
  } else {
    return -1;
  }
  if (*p || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return -1;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se;
  *ms = ((int64_t)timegm(&tm) - off) * 1000 + frac;
  return 0;
}

static int bad(xgr_error *err, const char *path, const char *fmt, const char *v) {
  xgr_error_set(err, XGR_EPARSE, path, fmt, v);
  return XGR_EPARSE;
}

/* Copy line [s, e) into out[n] (refused when longer). */
static int take(const char *s, const char *e, char *out, size_t n, const char *path, xgr_error *err) {
  if ((size_t)(e - s) >= n) {
    xgr_error_set(err, XGR_EPARSE, path, "is %zu bytes long; at most %zu", (size_t)(e - s), n - 1);
    return XGR_EPARSE;
  }
  memcpy(out, s, (size_t)(e - s));
  out[e - s] = '\0';
  return 0;
}

int xgr_siwe_parse(const char *msg, xgr_siwe *out, xgr_error *err) {
  memset(out, 0, sizeof *out);
  size_t len = strlen(msg);
  if (len > XGR_SIWE_MAX) {
    xgr_error_set(err, XGR_ELIMIT, "message", "is %zu bytes long; at most %d", len, XGR_SIWE_MAX);
    return XGR_ELIMIT;
  }
  const char *p = msg, *e = strchr(p, '\n');
  size_t hl = strlen(HEADER);
  if (!e || (size_t)(e - p) <= hl || strncmp(e - hl, HEADER, hl))
    return bad(err, "message", "%s", "does not begin with \"<domain> wants you to sign in with your Ethereum account:\" (EIP-4361)");
  const char *d = p, *de = e - hl;
  const char *sch = strstr(d, "://");
  if (sch && sch < de) d = sch + 3;
  int rc = take(d, de, out->domain, sizeof out->domain, "message.domain", err);
  if (rc) return rc;
  /* an authority: host[:port] (an IPv6 host in brackets); nothing a second "://" or a path could hide */
  static const char authority[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]";
  if (!out->domain[0] || strspn(out->domain, authority) != strlen(out->domain))
    return bad(err, "message.domain", "is \"%.80s\"; expected host[:port]", out->domain);
  p = e + 1;
  if (!(e = strchr(p, '\n')) || (rc = take(p, e, out->address, sizeof out->address, "message.address", err))) 
    return rc ? rc : bad(err, "message.address", "%s", "missing (the second line)");
  uint8_t a[20];
  if (xgr_hex_decode(out->address, a, 20)) return bad(err, "message.address", "is \"%.60s\"; expected 0x + 40 hex", out->address);
  p = e + 1;
  if (*p != '\n') return bad(err, "message", "%s", "expected an empty line after the address");
  p++;
  if (strncmp(p, "URI: ", 5)) {   /* a statement, then an empty line */
    if (!(e = strchr(p, '\n')) || (rc = take(p, e, out->statement, sizeof out->statement, "message.statement", err)))
      return rc ? rc : bad(err, "message", "%s", "ends after the statement");
    p = e + 1;
    if (*p != '\n') return bad(err, "message", "%s", "expected an empty line after the statement");
    p++;
  }
  static const char *const keys[] = {"URI: ", "Version: ", "Chain ID: ", "Nonce: ", "Issued At: ", "Expiration Time: ",
                                     "Not Before: ", "Request ID: ", "Resources:"};
  static const char *const paths[] = {"message.uri", "message.version", "message.chainId", "message.nonce",
                                      "message.issuedAt", "message.expirationTime", "message.notBefore",
                                      "message.requestId", "message.resources"};
  unsigned seen = 0;
  int last = -1;
  while (*p) {
    e = strchr(p, '\n');
    if (!e) e = p + strlen(p);
    if (last == 8 && !strncmp(p, "- ", 2)) {   /* a resource: read and ignored */
      p = *e ? e + 1 : e;
      continue;
    }
    int k = -1;
    for (int i = 0; i < 9 && k < 0; i++)
      if (!strncmp(p, keys[i], strlen(keys[i]))) k = i;
    if (k < 0 || k <= last) {
      char line[80];
      snprintf(line, sizeof line, "%.*s", (int)(e - p < 60 ? e - p : 60), p);
      return bad(err, "message", "has the line \"%s\" where EIP-4361 has none (fields in its order: URI, Version, Chain ID, Nonce, Issued At, Expiration Time, Not Before, Request ID, Resources)", line);
    }
    last = k;
    seen |= 1u << k;
    const char *v = p + strlen(keys[k]);
    char buf[512];
    if ((rc = take(v, e, buf, sizeof buf, paths[k], err))) return rc;
    switch (k) {
      case 0:
        if (!buf[0]) return bad(err, paths[k], "%s", "is empty; expected the URI of the sign-in");
        snprintf(out->uri, sizeof out->uri, "%s", buf);
        break;
      case 1:   /* EIP-4361 has one version, "1"; anything else would not build back the same */
        if (strcmp(buf, "1")) return bad(err, paths[k], "is \"%.40s\"; expected 1", buf);
        snprintf(out->version, sizeof out->version, "%s", buf);
        break;
      case 2: {
        char *end;
        errno = 0;
        out->chain_id = strtoull(buf, &end, 10);
        if (!isdigit((unsigned char)buf[0]) || *end || errno == ERANGE)
          return bad(err, paths[k], "is \"%.40s\"; expected a decimal chain id", buf);
        break;
      }
      case 3:
        if (strlen(buf) < 8 || strlen(buf) >= sizeof out->nonce) return bad(err, paths[k], "is \"%.80s\"; expected 8 to 79 letters and digits", buf);
        for (const char *q = buf; *q; q++)
          if (!isalnum((unsigned char)*q)) return bad(err, paths[k], "is \"%.80s\"; expected letters and digits only", buf);
        snprintf(out->nonce, sizeof out->nonce, "%s", buf);
        break;
      case 4:
      case 5:
      case 6: {
        int64_t *t = k == 4 ? &out->issued_at : k == 5 ? &out->expiration : &out->not_before;
        if (xgr_siwe_parse_time(buf, t)) return bad(err, paths[k], "is \"%.60s\"; expected an RFC 3339 time", buf);
        break;
      }
      default: break;
    }
    p = *e ? e + 1 : e;
  }
  for (int k = 0; k < 5; k++)
    if (!(seen & (1u << k))) return bad(err, paths[k], "%s", "missing; EIP-4361 requires it");
  return 0;
}

char *xgr_siwe_build(const xgr_siwe *m) {
  char ia[32], ex[32];
  xgr_siwe_time(m->issued_at, ia);
  xgr_siwe_time(m->expiration, ex);
  size_t n = 2048 + strlen(m->statement) + strlen(m->uri) + strlen(m->domain);
  char *s = xgr__xmalloc(n);
  int k = snprintf(s, n, "%s" HEADER "\n%s\n\n", m->domain, m->address);
  if (m->statement[0]) k += snprintf(s + k, n - (size_t)k, "%s\n\n", m->statement);
  k += snprintf(s + k, n - (size_t)k, "URI: %s\nVersion: %s\nChain ID: %llu\nNonce: %s\nIssued At: %s", m->uri,
                m->version[0] ? m->version : "1", (unsigned long long)m->chain_id, m->nonce, ia);
  if (m->expiration) snprintf(s + k, n - (size_t)k, "\nExpiration Time: %s", ex);
  return s;
}

void xgr_siwe_digest(const char *msg, size_t len, uint8_t digest[32]) {
  char pre[64];
  int k = snprintf(pre, sizeof pre, "\x19" "Ethereum Signed Message:\n%zu", len);
  char *buf = xgr__xmalloc((size_t)k + len);
  memcpy(buf, pre, (size_t)k);
  memcpy(buf + k, msg, len);
  xgr_keccak256(buf, (size_t)k + len, digest);
  free(buf);
}

int xgr_siwe_sign(const xgr_secp *secp, const uint8_t key[32], const char *msg, char sig[133], xgr_error *err) {
  uint8_t d[32], s[65];
  xgr_siwe_digest(msg, strlen(msg), d);
  int rc = xgr_secp_sign(secp, key, d, s, err);
  if (rc) return rc;
  xgr_hex_encode(s, 65, sig);
  return 0;
}

/* The authority of an http(s) URI ("http://HOST[:PORT]/..." -> "HOST[:PORT]") into out[n]. */
static bool uri_authority(const char *uri, char *out, size_t n) {
  const char *p = !strncasecmp(uri, "http://", 7) ? uri + 7 : !strncasecmp(uri, "https://", 8) ? uri + 8 : NULL;
  if (!p) return false;
  size_t k = strcspn(p, "/?#");
  if (!k || k >= n) return false;
  memcpy(out, p, k);
  out[k] = '\0';
  return true;
}

int xgr_siwe_verify(const xgr_secp *secp, const char *msg, const char *sig_hex, const xgr_siwe_expect *x,
                    xgr_siwe *out, xgr_error *err) {
  int rc = xgr_siwe_parse(msg, out, err);
  if (rc) return rc;
  uint8_t sig[65], d[32], addr[20], claimed[20];
  if (!sig_hex || xgr_hex_decode(sig_hex, sig, 65))
    return xgr_error_set(err, XGR_EPERM, "signature", "is not 0x + 130 hex digits (a personal_sign signature)");
  xgr_siwe_digest(msg, strlen(msg), d);
  if ((rc = xgr_secp_recover(secp, d, sig, addr, err))) return rc;
  xgr_hex_decode(out->address, claimed, 20);
  if (memcmp(addr, claimed, 20)) {
    char got[43];
    xgr_addr_hex(addr, got);
    return xgr_error_set(err, XGR_EPERM, "signature", "was made by %s, not by the message's address %s", got, out->address);
  }
  xgr_addr_hex(addr, out->address);
  if (strcasecmp(out->domain, x->domain))
    return xgr_error_set(err, XGR_EPERM, "message.domain", "is \"%s\"; this xgrd is served at \"%s\" (sign in at the address you reach it by)",
                  out->domain, x->domain);
  char auth[256];
  if (!uri_authority(out->uri, auth, sizeof auth))
    return xgr_error_set(err, XGR_EPERM, "message.uri", "is \"%.200s\"; expected an http:// or https:// URL", out->uri);
  if (strcasecmp(auth, x->domain))
    return xgr_error_set(err, XGR_EPERM, "message.uri", "names \"%s\"; expected this xgrd's \"%s\"", auth, x->domain);
  if (strcmp(out->version, "1")) return xgr_error_set(err, XGR_EPERM, "message.version", "is \"%s\"; expected \"1\"", out->version);
  if (out->chain_id != x->chain_id)
    return xgr_error_set(err, XGR_EPERM, "message.chainId", "is %llu; this xgrd's chain id is %llu", (unsigned long long)out->chain_id,
                  (unsigned long long)x->chain_id);
  if (out->issued_at > x->now_ms + SKEW_MS)
    return xgr_error_set(err, XGR_EPERM, "message.issuedAt", "is %lld ms in the future", (long long)(out->issued_at - x->now_ms));
  if (x->max_age_ms && out->issued_at < x->now_ms - x->max_age_ms)
    return xgr_error_set(err, XGR_EPERM, "message.issuedAt", "is %lld s old; a sign-in message is valid for %lld s (fetch a new nonce)",
                  (long long)((x->now_ms - out->issued_at) / 1000), (long long)(x->max_age_ms / 1000));
  if (!out->expiration) return xgr_error_set(err, XGR_EPERM, "message.expirationTime", "missing; xgrd requires an Expiration Time");
  if (out->expiration <= x->now_ms) {
    char t[32];
    xgr_siwe_time(out->expiration, t);
    return xgr_error_set(err, XGR_EPERM, "message.expirationTime", "%s has passed: the message expired", t);
  }
  if (out->not_before && out->not_before > x->now_ms) {
    char t[32];
    xgr_siwe_time(out->not_before, t);
    return xgr_error_set(err, XGR_EPERM, "message.notBefore", "is %s: not yet valid", t);
  }
  return 0;
}
