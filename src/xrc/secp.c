/* secp.c — secp256k1 signing, recovery, addresses and key files over libsecp256k1 (see
 * xgr/secp.h). Signing uses libsecp256k1's default nonce function, RFC 6979 with HMAC-SHA256, whose
 * signatures are already low-s; recovery checks what libsecp256k1 does not (v's range, s <= n/2)
 * before handing the signature over. */
#include "xgr/secp.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <secp256k1.h>
#include <secp256k1_recovery.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/alloc.h"
#include "xgr/keccak.h"

struct xgr_secp {
  secp256k1_context *ctx;
};

/* n/2 for the secp256k1 group order n, big-endian. */
static const uint8_t HALF_N[32] = {0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0xff, 0xff, 0xff, 0xff, 0x5d, 0x57, 0x6e, 0x73, 0x57, 0xa4,
                                   0x50, 0x1d, 0xdf, 0xe9, 0x2f, 0x46, 0x68, 0x1b, 0x20, 0xa0};

static int fill_random(uint8_t *p, size_t n) {
  while (n) {
    ssize_t r = getrandom(p, n, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

xgr_secp *xgr_secp_new(void) {
  secp256k1_context *c = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
  if (!c) return NULL;
  uint8_t seed[32];
  if (fill_random(seed, sizeof seed) || !secp256k1_context_randomize(c, seed)) {
    secp256k1_context_destroy(c);
    return NULL;
  }
  xgr_secp *s = xgr__xmalloc(sizeof *s);
  s->ctx = c;
  return s;
}

void xgr_secp_free(xgr_secp *s) {
  if (!s) return;
  secp256k1_context_destroy(s->ctx);
  free(s);
}

static void pub_address(const secp256k1_context *c, const secp256k1_pubkey *pk, uint8_t addr[20]) {
  uint8_t ser[65], h[32];
  size_t len = sizeof ser;
  int ok = secp256k1_ec_pubkey_serialize(c, ser, &len, pk, SECP256K1_EC_UNCOMPRESSED);
  assert(ok && len == 65);
  (void)ok;
  xgr_keccak256(ser + 1, 64, h);
  memcpy(addr, h + 12, 20);
}

int xgr_secp_sign(const xgr_secp *s, const uint8_t key[32], const uint8_t digest[32], uint8_t sig[65],
                  xgr_error *err) {
  secp256k1_ecdsa_recoverable_signature rs;
  if (!secp256k1_ec_seckey_verify(s->ctx, key))
    return xgr_error_set(err, XGR_EINVAL, "key", "not a valid secp256k1 private key (zero or not below the group order)");
  if (!secp256k1_ecdsa_sign_recoverable(s->ctx, &rs, digest, key, NULL, NULL))
    return xgr_error_set(err, XGR_EINVAL, "key", "signing failed");
  int recid = 0;
  secp256k1_ecdsa_recoverable_signature_serialize_compact(s->ctx, sig, &recid, &rs);
  sig[64] = (uint8_t)(27 + recid);
  return 0;
}

int xgr_secp_recover(const xgr_secp *s, const uint8_t digest[32], const uint8_t sig[65], uint8_t addr[20],
                     xgr_error *err) {
  int v = sig[64];
  int recid;
  if (v == 27 || v == 28)
    recid = v - 27;
  else if (v == 0 || v == 1)
    recid = v;
  else
    return xgr_error_set(err, XGR_EPERM, "signature", "bad v %d; expected 27, 28, 0 or 1", v);
  if (memcmp(sig + 32, HALF_N, 32) > 0)
    return xgr_error_set(err, XGR_EPERM, "signature", "high s (above n/2); only low-s signatures are accepted");
  static const uint8_t zero[32];
  if (!memcmp(sig, zero, 32) || !memcmp(sig + 32, zero, 32))
    return xgr_error_set(err, XGR_EPERM, "signature", "r or s is zero");
  secp256k1_ecdsa_recoverable_signature rs;
  if (!secp256k1_ecdsa_recoverable_signature_parse_compact(s->ctx, &rs, sig, recid))
    return xgr_error_set(err, XGR_EPERM, "signature", "r is not below the group order");
  secp256k1_pubkey pk;
  if (!secp256k1_ecdsa_recover(s->ctx, &pk, &rs, digest))
    return xgr_error_set(err, XGR_EPERM, "signature", "no public key can be recovered from this signature");
  pub_address(s->ctx, &pk, addr);
  return 0;
}

int xgr_secp_address(const xgr_secp *s, const uint8_t key[32], uint8_t addr[20], xgr_error *err) {
  secp256k1_pubkey pk;
  if (!secp256k1_ec_pubkey_create(s->ctx, &pk, key))
    return xgr_error_set(err, XGR_EINVAL, "key", "not a valid secp256k1 private key (zero or not below the group order)");
  pub_address(s->ctx, &pk, addr);
  return 0;
}

int xgr_secp_key_generate(const xgr_secp *s, uint8_t key[32], xgr_error *err) {
  for (int tries = 0; tries < 64; tries++) {
    if (fill_random(key, 32)) return xgr_error_set(err, XGR_EIO, NULL, "getrandom failed: %s", strerror(errno));
    if (secp256k1_ec_seckey_verify(s->ctx, key)) return 0;
  }
  return xgr_error_set(err, XGR_EIO, NULL, "getrandom gave no valid key in 64 tries");
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int xgr_hex_decode(const char *str, uint8_t *out, size_t n) {
  if (!str || str[0] != '0' || (str[1] != 'x' && str[1] != 'X')) return -1;
  str += 2;
  for (size_t i = 0; i < n; i++) {
    int hi = hexval((unsigned char)str[2 * i]);
    if (hi < 0) return -1;
    int lo = hexval((unsigned char)str[2 * i + 1]);
    if (lo < 0) return -1;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  return str[2 * n] ? -1 : 0;
}

void xgr_hex_encode(const uint8_t *in, size_t n, char *out) {
  static const char hex[] = "0123456789abcdef";
  out[0] = '0';
  out[1] = 'x';
  for (size_t i = 0; i < n; i++) {
    out[2 + 2 * i] = hex[in[i] >> 4];
    out[3 + 2 * i] = hex[in[i] & 15];
  }
  out[2 + 2 * n] = 0;
}

void xgr_addr_hex(const uint8_t addr[20], char out[43]) { xgr_hex_encode(addr, 20, out); }

void xgr_addr_hex_checksum(const uint8_t addr[20], char out[43]) {
  xgr_hex_encode(addr, 20, out);
  uint8_t h[32];
  xgr_keccak256(out + 2, 40, h);
  for (int i = 0; i < 40; i++) {
    int nib = (i & 1) ? (h[i / 2] & 15) : (h[i / 2] >> 4);
    char *c = &out[2 + i];
    if (*c >= 'a' && *c <= 'f' && nib >= 8) *c = (char)(*c - 'a' + 'A');
  }
}

int xgr_secp_key_load(const xgr_secp *s, const char *path, uint8_t key[32], xgr_error *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return xgr_error_set(err, XGR_EIO, NULL, "%s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st)) {
    int e = errno;
    close(fd);
    return xgr_error_set(err, XGR_EIO, NULL, "%s: %s", path, strerror(e));
  }
  if (st.st_mode & 077) {
    close(fd);
    return xgr_error_set(err, XGR_EPERM, NULL,
                         "%s: key file mode %03o is accessible by group or others; run chmod 600 %s", path,
                         (unsigned)(st.st_mode & 0777), path);
  }
  char buf[256];
  size_t len = 0;
  for (;;) {
    ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      close(fd);
      return xgr_error_set(err, XGR_EIO, NULL, "%s: %s", path, strerror(e));
    }
    if (r == 0) break;
    len += (size_t)r;
    if (len == sizeof buf - 1) break;
  }
  close(fd);
  buf[len] = 0;
  char *p = buf;
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  char *e = p + strlen(p);
  while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) *--e = 0;
  char tmp[80];
  if ((size_t)(e - p) > 66) {
    explicit_bzero(buf, sizeof buf);
    return xgr_error_set(err, XGR_EPARSE, NULL, "%s: expected 64 hex digits of a private key", path);
  }
  /* at most 66 characters (checked above) behind an optional "0x": fits tmp */
  size_t n = (size_t)(e - p), o = 0;
  if (!(p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))) tmp[o++] = '0', tmp[o++] = 'x';
  memcpy(tmp + o, p, n + 1);
  int bad = xgr_hex_decode(tmp, key, 32);
  explicit_bzero(buf, sizeof buf);
  explicit_bzero(tmp, sizeof tmp);
  if (bad) return xgr_error_set(err, XGR_EPARSE, NULL, "%s: expected 64 hex digits of a private key", path);
  if (!secp256k1_ec_seckey_verify(s->ctx, key))
    return xgr_error_set(err, XGR_EINVAL, NULL, "%s: not a valid secp256k1 private key", path);
  return 0;
}

int xgr_secp_key_save(const char *path, const uint8_t key[32], xgr_error *err) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return xgr_error_set(err, XGR_EIO, NULL, "%s: %s", path, strerror(errno));
  char line[68];
  xgr_hex_encode(key, 32, line);
  line[66] = '\n';
  line[67] = 0;
  ssize_t w = write(fd, line, 67);
  int e = errno;
  explicit_bzero(line, sizeof line);
  if (w != 67 || fsync(fd)) {
    close(fd);
    unlink(path);
    return xgr_error_set(err, XGR_EIO, NULL, "%s: write failed: %s", path, strerror(e));
  }
  if (close(fd)) return xgr_error_set(err, XGR_EIO, NULL, "%s: %s", path, strerror(errno));
  return 0;
}
