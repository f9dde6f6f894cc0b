/* permit.c — the four XDaLa permit types of SEMANTICS.md §9: verification (shape, exact type
 * lists, domain, values, expiry, signature) and signing. The field lists are tables; the values are
 * encoded by the general EIP-712 encoder (src/xrc/eip712.c), which also names the path of a
 * malformed value. Every refusal is XGR_EPERM with the path of the failed check. */
#include "xgr/permit.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/suggest.h"
#include "xgr/eip712.h"
#include "xgr/json.h"
#include "xgr/keccak.h"

typedef xgr_eip712_field fdef;

#define N_(a) (sizeof(a) / sizeof(a)[0])

static const fdef SESSION_F[] = {{"from", "address"},       {"ostcId", "string"},        {"ostcHash", "bytes32"},
                                 {"sessionId", "uint256"},  {"maxTotalGas", "uint256"}, {"expiry", "uint256"}};
static const fdef CONTROL_F[] = {{"from", "address"},
                                 {"sessionId", "uint256"},
                                 {"action", "string"},
                                 {"stepId", "string"},
                                 {"expiry", "uint256"}};
static const fdef CONTROL_LEGACY_F[] = {
    {"from", "address"}, {"sessionId", "uint256"}, {"action", "string"}, {"expiry", "uint256"}};
static const fdef CONTROL_V2_F[] = {{"from", "address"},  {"runner", "address"}, {"sessionId", "uint256"},
                                    {"action", "string"}, {"stepId", "string"},  {"expiry", "uint256"}};
static const fdef XDALA_F[] = {{"from", "address"}, {"expiry", "uint256"}};
static const fdef DOMAIN3_F[] = {{"name", "string"}, {"version", "string"}, {"chainId", "uint256"}};
static const fdef DOMAIN4_F[] = {
    {"name", "string"}, {"version", "string"}, {"chainId", "uint256"}, {"verifyingContract", "address"}};

const char *xgr_permit_kind_name(xgr_permit_kind k) {
  switch (k) {
  case XGR_PERMIT_SESSION: return "SessionPermit";
  case XGR_PERMIT_CONTROL: return "ControlPermit";
  case XGR_PERMIT_CONTROL_V2: return "ControlPermitV2";
  case XGR_PERMIT_XDALA: return "xdalaPermit";
  }
  return NULL;
}

static xgr_permit_kind kind_of(const char *name) {
  static const xgr_permit_kind all[] = {XGR_PERMIT_SESSION, XGR_PERMIT_CONTROL, XGR_PERMIT_CONTROL_V2, XGR_PERMIT_XDALA};
  for (size_t i = 0; i < N_(all); i++)
    if (!strcmp(name, xgr_permit_kind_name(all[i]))) return all[i];
  return 0;
}

void xgr_permit_hashes_init(xgr_permit_hashes *h, uint64_t chain_id) {
  memset(h, 0, sizeof *h);
  h->chain_id = chain_id;
  xgr_eip712_type_hash_fields("SessionPermit", SESSION_F, N_(SESSION_F), h->session);
  xgr_eip712_type_hash_fields("ControlPermit", CONTROL_F, N_(CONTROL_F), h->control);
  xgr_eip712_type_hash_fields("ControlPermit", CONTROL_LEGACY_F, N_(CONTROL_LEGACY_F), h->control_legacy);
  xgr_eip712_type_hash_fields("ControlPermitV2", CONTROL_V2_F, N_(CONTROL_V2_F), h->control_v2);
  xgr_eip712_type_hash_fields("xdalaPermit", XDALA_F, N_(XDALA_F), h->xdala);
  xgr_eip712_type_hash_fields("EIP712Domain", DOMAIN3_F, N_(DOMAIN3_F), h->domain3);
  xgr_eip712_type_hash_fields("EIP712Domain", DOMAIN4_F, N_(DOMAIN4_F), h->domain4);
  /* hashStruct(EIP712Domain{name, version, chainId}) of a SessionPermit: all three are fixed */
  uint8_t enc[128];
  memcpy(enc, h->domain3, 32);
  xgr_keccak256(XGR_PERMIT_SESSION_NAME, strlen(XGR_PERMIT_SESSION_NAME), enc + 32);
  xgr_keccak256("1", 1, enc + 64);
  memset(enc + 96, 0, 32);
  for (int i = 0; i < 8; i++) enc[127 - i] = (uint8_t)(chain_id >> (8 * i));
  xgr_keccak256(enc, sizeof enc, h->session_domain);
}

static void fields_text(const fdef *f, size_t n, char *out, size_t cap) {
  size_t len = 0;
  out[0] = 0;
  for (size_t i = 0; i < n && len < cap; i++)
    len += (size_t)snprintf(out + len, cap - len, "%s%s %s", i ? ", " : "", f[i].type, f[i].name);
}

/* Does the JSON field list equal f exactly? */
static int fields_equal(const json_t *arr, const fdef *f, size_t n) {
  if (!json_is_array(arr) || json_array_size(arr) != n) return 0;
  for (size_t i = 0; i < n; i++) {
    const json_t *e = json_array_get(arr, i);
    const char *nm = json_string_value(json_object_get(e, "name"));
    const char *ty = json_string_value(json_object_get(e, "type"));
    if (!json_is_object(e) || json_object_size(e) != 2 || !nm || !ty || strcmp(nm, f[i].name) || strcmp(ty, f[i].type))
      return 0;
  }
  return 1;
}

typedef struct vctx {
  const char *prefix;
  xgr_error *err;
} vctx;

/* Refuse with XGR_EPERM at prefix.sub. */
static int refuse(const vctx *v, const char *sub, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(const vctx *v, const char *sub, const char *fmt, ...) {
  char path[XGR_PATH_MAX];
  snprintf(path, sizeof path, "%s%s%s", v->prefix, v->prefix[0] && sub[0] ? "." : "", sub);
  char msg[XGR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return xgr_error_set(v->err, XGR_EPERM, path, "%s", msg);
}

/* An error from the encoder (path relative to the permit): make it a refusal under the prefix. */
static int rewrap(const vctx *v) {
  xgr_error e = *v->err;
  return refuse(v, e.path, "%s", e.message);
}

static uint64_t word_u64(const uint8_t w[32], bool *big) {
  *big = false;
  for (int i = 0; i < 24; i++)
    if (w[i]) *big = true;
  uint64_t x = 0;
  for (int i = 24; i < 32; i++) x = x << 8 | w[i];
  return x;
}

static void word_dec(const uint8_t in[32], char *out, size_t cap) {
  uint8_t w[32];
  memcpy(w, in, 32);
  char tmp[80];
  size_t n = 0;
  for (;;) {
    unsigned rem = 0;
    int zero = 1;
    for (int i = 0; i < 32; i++) {
      unsigned cur = rem << 8 | w[i];
      w[i] = (uint8_t)(cur / 10);
      rem = cur % 10;
      zero &= !w[i];
    }
    tmp[n++] = (char)('0' + rem);
    if (zero) break;
  }
  size_t k = 0;
  while (n && k + 1 < cap) out[k++] = tmp[--n];
  out[k] = 0;
}

/* A bounded non-empty string field of the message or domain. */
static int str_field(const vctx *v, const json_t *obj, const char *name, const char *sub, bool nonempty, char *out,
                     size_t cap) {
  const json_t *s = json_object_get(obj, name);
  if (!json_is_string(s)) return refuse(v, sub, "expected a string, got %s", s ? xgr_json_type_name(s) : "nothing");
  size_t len = json_string_length(s);
  if (len >= cap) return refuse(v, sub, "%zu bytes; at most %zu", len, cap - 1);
  if (strlen(json_string_value(s)) != len) return refuse(v, sub, "contains a NUL character");
  if (nonempty && !len) return refuse(v, sub, "empty; expected a non-empty string");
  memcpy(out, json_string_value(s), len + 1);
  return 0;
}

int xgr_permit_verify(const xgr_secp *ctx, const json_t *permit, const xgr_permit_policy *pol, const char *prefix,
                      xgr_permit *out, xgr_error *err) {
  vctx v = {.prefix = prefix ? prefix : "", .err = err};
  memset(out, 0, sizeof *out);
  if (!json_is_object(permit))
    return refuse(&v, "", "expected a permit object {domain, types, primaryType, message, signature}, got %s",
                  permit ? xgr_json_type_name(permit) : "nothing");
  static const char *const top[] = {"domain", "types", "primaryType", "message", "signature"};
  const char *key;
  const json_t *val;
  json_object_foreach((json_t *)permit, key, val) {
    size_t i = 0;
    while (i < N_(top) && strcmp(key, top[i])) i++;
    if (i == N_(top)) {
      char sub[80];
      snprintf(sub, sizeof sub, "%.64s", key);
      const char *near = xgr__nearest_key(key, top, N_(top));
      if (near)
        return refuse(&v, sub, "unexpected key (did you mean \"%s\"?); a permit has exactly domain, types, primaryType, "
                      "message, signature", near);
      return refuse(&v, sub, "unexpected key; a permit has exactly domain, types, primaryType, message, signature");
    }
  }
  for (size_t i = 0; i < N_(top); i++)
    if (!json_object_get(permit, top[i])) return refuse(&v, top[i], "missing");

  /* primaryType */
  const char *pt = json_string_value(json_object_get(permit, "primaryType"));
  xgr_permit_kind k = pt ? kind_of(pt) : 0;
  if (!k || !(pol->accept & k)) {   /* the names accepted, for the refusal only */
    char accepted[96] = "";
    for (unsigned b = 1; b <= XGR_PERMIT_XDALA; b <<= 1)
      if (pol->accept & b)
        snprintf(accepted + strlen(accepted), sizeof accepted - strlen(accepted), "%s%s", accepted[0] ? " or " : "",
                 xgr_permit_kind_name((xgr_permit_kind)b));
    if (!pt) return refuse(&v, "primaryType", "expected a string naming %s", accepted);
    return refuse(&v, "primaryType", "\"%.64s\" is not accepted here; expected %s", pt, accepted);
  }
  out->kind = k;

  /* types: exactly EIP712Domain and the primary type, with the specified fields */
  const json_t *types = json_object_get(permit, "types");
  if (!json_is_object(types)) return refuse(&v, "types", "expected an object");
  json_object_foreach((json_t *)types, key, val) {
    if (strcmp(key, "EIP712Domain") && strcmp(key, pt)) {
      char sub[96];
      snprintf(sub, sizeof sub, "types.%.64s", key);
      return refuse(&v, sub, "unexpected type; a %s permit has only EIP712Domain and %s", pt, pt);
    }
  }
  const fdef *pf = NULL;
  size_t pn = 0;
  switch (k) {
  case XGR_PERMIT_SESSION: pf = SESSION_F, pn = N_(SESSION_F); break;
  case XGR_PERMIT_CONTROL: pf = CONTROL_F, pn = N_(CONTROL_F); break;
  case XGR_PERMIT_CONTROL_V2: pf = CONTROL_V2_F, pn = N_(CONTROL_V2_F); break;
  case XGR_PERMIT_XDALA: pf = XDALA_F, pn = N_(XDALA_F); break;
  }
  char sub[96], want[256];   /* a refusal's path and expectation (written only for one) */
  const json_t *pdef = json_object_get(types, pt);
  if (!pdef) {
    snprintf(sub, sizeof sub, "types.%s", pt);
    return refuse(&v, sub, "missing");
  }
  if (!fields_equal(pdef, pf, pn)) {
    if (k == XGR_PERMIT_CONTROL && fields_equal(pdef, CONTROL_LEGACY_F, N_(CONTROL_LEGACY_F))) {
      out->legacy = true;
      pf = CONTROL_LEGACY_F, pn = N_(CONTROL_LEGACY_F);
    } else {
      snprintf(sub, sizeof sub, "types.%s", pt);
      fields_text(pf, pn, want, sizeof want);
      return refuse(&v, sub, "wrong field list; %s has exactly (%s) in this order", pt, want);
    }
  }
  bool control = k == XGR_PERMIT_CONTROL || k == XGR_PERMIT_CONTROL_V2;
  const fdef *df = control ? DOMAIN4_F : DOMAIN3_F;
  size_t dn = control ? N_(DOMAIN4_F) : N_(DOMAIN3_F);
  if (!json_object_get(types, "EIP712Domain")) return refuse(&v, "types.EIP712Domain", "missing");
  if (!fields_equal(json_object_get(types, "EIP712Domain"), df, dn)) {
    fields_text(df, dn, want, sizeof want);
    return refuse(&v, "types.EIP712Domain", "wrong field list; a %s domain has exactly (%s) in this order", pt, want);
  }

  /* domain */
  const json_t *dom = json_object_get(permit, "domain");
  if (!json_is_object(dom)) return refuse(&v, "domain", "expected an object");
  json_object_foreach((json_t *)dom, key, val) {
    size_t i = 0;
    while (i < dn && strcmp(key, df[i].name)) i++;
    if (i == dn) {
      const char *names[8];
      for (i = 0; i < dn && i < 8; i++) names[i] = df[i].name;
      const char *near = xgr__nearest_key(key, names, i);
      snprintf(sub, sizeof sub, "domain.%.64s", key);
      if (near) return refuse(&v, sub, "not a field of EIP712Domain (did you mean \"%s\"?)", near);
      return refuse(&v, sub, "not a field of EIP712Domain");
    }
  }
  for (size_t i = 0; i < dn; i++)
    if (!json_object_get(dom, df[i].name)) {
      snprintf(sub, sizeof sub, "domain.%s", df[i].name);
      return refuse(&v, sub, "missing");
    }
  int rc;
  if ((rc = str_field(&v, dom, "name", "domain.name", true, out->domain_name, sizeof out->domain_name)) ||
      (rc = str_field(&v, dom, "version", "domain.version", true, out->domain_version, sizeof out->domain_version)))
    return rc;
  if (k == XGR_PERMIT_SESSION && strcmp(out->domain_name, XGR_PERMIT_SESSION_NAME))
    return refuse(&v, "domain.name", "\"%s\"; a SessionPermit's domain name is \"%s\"", out->domain_name,
                  XGR_PERMIT_SESSION_NAME);
  if (k == XGR_PERMIT_SESSION && strcmp(out->domain_version, "1"))
    return refuse(&v, "domain.version", "\"%s\"; a SessionPermit's domain version is \"1\"", out->domain_version);
  uint8_t w[32];
  bool big;
  if (xgr_eip712_encode_int("uint256", json_object_get(dom, "chainId"), "domain.chainId", w, err)) return rewrap(&v);
  out->chain_id = word_u64(w, &big);
  if (big || out->chain_id != pol->chain_id) {
    char dec[80];
    word_dec(w, dec, sizeof dec);
    return refuse(&v, "domain.chainId", "wrong chain: %s; this engine runs chain %llu", dec,
                  (unsigned long long)pol->chain_id);
  }
  if (control) {
    const char *vc = json_string_value(json_object_get(dom, "verifyingContract"));
    uint8_t a[20];
    if (!vc || strlen(vc) != 42 || xgr_hex_decode(vc, a, 20))
      return refuse(&v, "domain.verifyingContract", "expected an address (0x + 40 hex digits)");
    if (memcmp(a, pol->control_contract, 20)) {
      char have[43];
      xgr_addr_hex(pol->control_contract, have);
      return refuse(&v, "domain.verifyingContract", "%s is not this engine's control contract %s", vc, have);
    }
  }

  /* message: values checked and hashed by the encoder (paths "message.x"). The type lists equal
   * the specified ones (checked above), so the type hashes are the precomputed ones. */
  xgr_permit_hashes local;
  const xgr_permit_hashes *hs = pol->hashes;
  if (!hs || hs->chain_id != pol->chain_id) {
    xgr_permit_hashes_init(&local, pol->chain_id);
    hs = &local;
  }
  const uint8_t *th = k == XGR_PERMIT_SESSION      ? hs->session
                      : k == XGR_PERMIT_CONTROL_V2 ? hs->control_v2
                      : k == XGR_PERMIT_XDALA      ? hs->xdala
                      : out->legacy                ? hs->control_legacy
                                                   : hs->control;
  const json_t *msg = json_object_get(permit, "message");
  if (!json_is_object(msg)) return refuse(&v, "message", "expected an object");
  uint8_t pre[66];
  pre[0] = 0x19;
  pre[1] = 0x01;
  if (xgr_eip712_hash_fields(pt, th, pf, pn, msg, "message", pre + 34, err)) return rewrap(&v);
  /* the domain: a SessionPermit's name, version and chainId were checked equal to the fixed ones,
   * so its separator is the precomputed one; the others' names are free */
  if (k == XGR_PERMIT_SESSION)
    memcpy(pre + 2, hs->session_domain, 32);
  else if (xgr_eip712_hash_fields("EIP712Domain", control ? hs->domain4 : hs->domain3, df, dn, dom, "domain", pre + 2,
                                  err))
    return rewrap(&v);
  xgr_keccak256(pre, sizeof pre, out->digest);

  uint8_t from[20];
  xgr_hex_decode(json_string_value(json_object_get(msg, "from")), from, 20);
  xgr_addr_hex(from, out->from);
  memcpy(out->runner, out->from, sizeof out->runner);
  if (k == XGR_PERMIT_CONTROL_V2) {
    uint8_t r[20];
    xgr_hex_decode(json_string_value(json_object_get(msg, "runner")), r, 20);
    xgr_addr_hex(r, out->runner);
  }
  if (xgr_eip712_encode_int("uint256", json_object_get(msg, "expiry"), "message.expiry", w, err)) return rewrap(&v);
  out->expiry = word_u64(w, &big);
  if (big) out->expiry = UINT64_MAX;
  if (k != XGR_PERMIT_XDALA) {
    if (xgr_eip712_encode_int("uint256", json_object_get(msg, "sessionId"), "message.sessionId", w, err))
      return rewrap(&v);
    out->session_id = word_u64(w, &out->session_id_big);
  }
  if (k == XGR_PERMIT_SESSION) {
    if ((rc = str_field(&v, msg, "ostcId", "message.ostcId", false, out->ostc_id, sizeof out->ostc_id))) return rc;
    xgr_hex_decode(json_string_value(json_object_get(msg, "ostcHash")), out->ostc_hash, 32);
    if (xgr_eip712_encode_int("uint256", json_object_get(msg, "maxTotalGas"), "message.maxTotalGas", w, err))
      return rewrap(&v);
    word_dec(w, out->max_total_gas, sizeof out->max_total_gas);
  }
  if (control) {
    if ((rc = str_field(&v, msg, "action", "message.action", false, out->action, sizeof out->action)))
      return refuse(&v, "message.action", "expected one of pause, resume, kill, wake, retry, fork, migrate");
    if (strcmp(out->action, "pause") && strcmp(out->action, "resume") && strcmp(out->action, "kill") &&
        strcmp(out->action, "wake") && strcmp(out->action, "retry") && strcmp(out->action, "fork") &&
        strcmp(out->action, "migrate"))
      return refuse(&v, "message.action",
                    "\"%s\" is not an action; expected pause, resume, kill, wake, retry, fork or migrate",
                    out->action);
    if (out->legacy && !strcmp(out->action, "wake"))
      return refuse(&v, "types.ControlPermit",
                    "the ControlPermit without stepId is accepted for kill, pause and resume only; a wake signs stepId");
    if (!out->legacy &&
        (rc = str_field(&v, msg, "stepId", "message.stepId", false, out->step_id, sizeof out->step_id)))
      return rc;
  }
  if (out->expiry <= pol->now)
    return refuse(&v, "message.expiry", "expired: %llu is not later than now (%llu)", (unsigned long long)out->expiry,
                  (unsigned long long)pol->now);

  /* signature */
  const json_t *sj = json_object_get(permit, "signature");
  const char *sig = json_string_value(sj);
  uint8_t s65[65];
  if (!sig) return refuse(&v, "signature", "expected a string 0x + 130 hex digits, got %s", xgr_json_type_name(sj));
  size_t sl = json_string_length(sj);
  if (sl != 132 || strlen(sig) != sl)
    return refuse(&v, "signature", "%zu characters; expected 0x + 130 hex digits (65 bytes)", sl);
  if (xgr_hex_decode(sig, s65, 65)) return refuse(&v, "signature", "not hex; expected 0x + 130 hex digits (65 bytes)");
  uint8_t signer[20];
  if (xgr_secp_recover(ctx, out->digest, s65, signer, err)) return rewrap(&v);
  if (memcmp(signer, from, 20)) {
    char got[43];
    xgr_addr_hex(signer, got);
    return refuse(&v, "signature", "signed by %s, not by message.from %s", got, out->from);
  }
  return 0;
}

int xgr_permit_verify_text(const xgr_secp *ctx, const char *text, size_t len, const xgr_permit_policy *pol,
                           xgr_permit *out, xgr_error *err) {
  if (len > XGR_PERMIT_MAX_BYTES)
    return xgr_error_set(err, XGR_EPERM, "", "permit of %zu bytes; at most %d", len, XGR_PERMIT_MAX_BYTES);
  json_t *j;
  if (xgr_json_parse(text, len, &j, err)) {
    err->code = XGR_EPERM;
    return XGR_EPERM;
  }
  int rc = xgr_permit_verify(ctx, j, pol, "", out, err);
  json_decref(j);
  return rc;
}

/* ---- signing --------------------------------------------------------------------------------- */

static json_t *fields_json(const fdef *f, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(a, json_pack("{s:s, s:s}", "name", f[i].name, "type", f[i].type));
  return a;
}

static json_t *u64_json(uint64_t x) {
  if (x <= (uint64_t)INT64_MAX) return json_integer((json_int_t)x);
  char b[24];
  snprintf(b, sizeof b, "%llu", (unsigned long long)x);
  return json_string(b);
}

int xgr_permit_sign(const xgr_secp *ctx, const uint8_t key[32], const xgr_permit_fields *f, json_t **out,
                    xgr_error *err) {
  const char *kn = xgr_permit_kind_name(f->kind);
  if (!kn) return xgr_error_set(err, XGR_EINVAL, "kind", "unknown permit kind %d", (int)f->kind);
  bool control = f->kind == XGR_PERMIT_CONTROL || f->kind == XGR_PERMIT_CONTROL_V2;
  uint8_t from[20];
  int rc = xgr_secp_address(ctx, key, from, err);
  if (rc) return rc;
  char hex[67];
  json_t *domain = json_object();
  const char *dname = f->domain_name ? f->domain_name
                      : f->kind == XGR_PERMIT_SESSION ? XGR_PERMIT_SESSION_NAME
                      : control ? XGR_PERMIT_DEFAULT_CONTROL_NAME
                                : XGR_PERMIT_DEFAULT_XDALA_NAME;
  json_object_set_new(domain, "name", json_string(dname));
  json_object_set_new(domain, "version", json_string(f->domain_version ? f->domain_version : "1"));
  json_object_set_new(domain, "chainId", u64_json(f->chain_id));
  json_t *msg = json_object();
  xgr_addr_hex(from, hex);
  json_object_set_new(msg, "from", json_string(hex));
  const fdef *pf = XDALA_F;
  size_t pn = N_(XDALA_F);
  if (control) {
    if (!f->verifying_contract || !f->action) {
      rc = xgr_error_set(err, XGR_EINVAL, f->action ? "verifyingContract" : "action", "required for a %s", kn);
      goto fail;
    }
    xgr_addr_hex(f->verifying_contract, hex);
    json_object_set_new(domain, "verifyingContract", json_string(hex));
    if (f->kind == XGR_PERMIT_CONTROL_V2) {
      uint8_t r[20];
      if (!f->runner || xgr_hex_decode(f->runner, r, 20)) {
        rc = xgr_error_set(err, XGR_EINVAL, "runner", "a ControlPermitV2 needs the runner's address (0x + 40 hex)");
        goto fail;
      }
      xgr_addr_hex(r, hex);
      json_object_set_new(msg, "runner", json_string(hex));
      pf = CONTROL_V2_F, pn = N_(CONTROL_V2_F);
    } else if (f->legacy) {
      pf = CONTROL_LEGACY_F, pn = N_(CONTROL_LEGACY_F);
    } else {
      pf = CONTROL_F, pn = N_(CONTROL_F);
    }
    json_object_set_new(msg, "sessionId", u64_json(f->session_id));
    json_object_set_new(msg, "action", json_string(f->action));
    if (!f->legacy || f->kind == XGR_PERMIT_CONTROL_V2)
      json_object_set_new(msg, "stepId", json_string(f->step_id ? f->step_id : ""));
  } else if (f->kind == XGR_PERMIT_SESSION) {
    if (!f->ostc_id || !f->ostc_hash) {
      rc = xgr_error_set(err, XGR_EINVAL, f->ostc_id ? "ostcHash" : "ostcId", "required for a SessionPermit");
      goto fail;
    }
    json_object_set_new(msg, "ostcId", json_string(f->ostc_id));
    xgr_hex_encode(f->ostc_hash, 32, hex);
    json_object_set_new(msg, "ostcHash", json_string(hex));
    json_object_set_new(msg, "sessionId", u64_json(f->session_id));
    json_object_set_new(msg, "maxTotalGas", u64_json(f->max_total_gas));
    pf = SESSION_F, pn = N_(SESSION_F);
  }
  json_object_set_new(msg, "expiry", u64_json(f->expiry));
  json_t *p = json_pack("{s:o, s:{s:o, s:o}, s:s, s:o}", "domain", domain, "types", "EIP712Domain",
                        control ? fields_json(DOMAIN4_F, N_(DOMAIN4_F)) : fields_json(DOMAIN3_F, N_(DOMAIN3_F)), kn,
                        fields_json(pf, pn), "primaryType", kn, "message", msg);
  uint8_t digest[32], sig[65];
  if ((rc = xgr_eip712_digest(p, digest, err)) || (rc = xgr_secp_sign(ctx, key, digest, sig, err))) {
    json_decref(p);
    return rc;
  }
  char sh[133];
  xgr_hex_encode(sig, 65, sh);
  json_object_set_new(p, "signature", json_string(sh));
  *out = p;
  return 0;
fail:
  json_decref(domain);
  json_decref(msg);
  return rc;
}
