/* template.c — templates of rule documents: text with `[Ident]` placeholders (guide §2).
 *
 * A template is split once, at load, into literal and placeholder segments; rendering walks the
 * segments and writes each placeholder's text form (xgr_value_render, the form CEL's string()
 * uses), percent-encoded for URLs (RFC 3986: everything but A-Z a-z 0-9 - . _ ~), and for JSON
 * bodies either JSON-escaped (a placeholder inside a string literal of the template, known from
 * the literal text at parse) or as the value's JSON (a bare placeholder), so no value can change
 * the body's structure. Only the strict placeholder grammar counts: `[0]`, `["k"]`, `[x + 1]`
 * stay literal text.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "rule/rule_impl.h"
#include "util/buf.h"
#include "value/value_impl.h"

static bool ident_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

bool xgr__rule_is_ctx_var(const char *name, size_t len) {
  static const char *const names[] = {"__sessionId", "__pid", "__stepId", "__owner", "from"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strlen(names[i]) == len && !memcmp(names[i], name, len)) return true;
  return false;
}

void xgr__rule_template_parse(xgr_arena *a, const char *src, size_t len, rtemplate *out) {
  /* Count segments first: at most 2 per placeholder + 1. */
  size_t max = 1;
  for (size_t i = 0; i < len; i++)
    if (src[i] == '[') max += 2;
  rtseg *seg = xgr_arena_alloc(a, max * sizeof *seg);
  if (!seg) abort();
  size_t n = 0, lit = 0, i = 0;
  bool in_str = false;   /* inside a JSON string literal of the literal text (for TPL_JSON) */
  out->hidden = false;
  while (i < len) {
    if (src[i] == '[' && i + 1 < len && ident_start(src[i + 1])) {
      size_t j = i + 1;
      while (j < len && ident_char(src[j])) j++;
      if (j < len && src[j] == ']') {
        if (i > lit) seg[n++] = (rtseg){src + lit, i - lit, false, false};
        seg[n++] = (rtseg){src + i + 1, j - i - 1, true, in_str};
        if (src[i + 1] == '_' && !xgr__rule_is_ctx_var(src + i + 1, j - i - 1)) out->hidden = true;
        i = lit = j + 1;
        continue;
      }
    }
    if (in_str && src[i] == '\\' && i + 1 < len) {
      i += 2;
      continue;
    }
    if (src[i] == '"') in_str = !in_str;
    i++;
  }
  if (len > lit || n == 0) seg[n++] = (rtseg){src + lit, len - lit, false, false};
  out->seg = seg;
  out->nseg = n;
}

static void put_encoded(xgr_buf *b, const char *s, size_t n) {
  static const char hx[] = "0123456789ABCDEF";
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      xgr__buf_putc(b, (char)c);
    } else {
      char e[3] = {'%', hx[c >> 4], hx[c & 15]};
      xgr__buf_put(b, e, 3);
    }
  }
}

int xgr__rule_template_render(const rtemplate *t, rule_lookup_fn fn, void *ctx, int mode, char **out,
                         size_t *outlen, const char **missing, size_t *missing_len) {
  xgr_buf b = {0};
  for (size_t i = 0; i < t->nseg; i++) {
    const rtseg *s = &t->seg[i];
    if (!s->is_var) {
      xgr__buf_put(&b, s->text, s->len);
      continue;
    }
    xgr_value v;
    if (!fn(ctx, s->text, s->len, &v)) {
      free(b.p);
      *missing = s->text;
      *missing_len = s->len;
      return XGR_ENOTFOUND;
    }
    size_t n;
    if (mode == TPL_JSON && !s->in_string) {   /* bare: the value itself, as JSON */
      xgr__json_write(&b, v, 0, -1);
      continue;
    }
    char *r = xgr_value_render(v, &n);
    if (mode == TPL_URL) {
      put_encoded(&b, r, n);
    } else if (mode == TPL_JSON) {             /* inside "...": escaped, without its own quotes */
      size_t at = b.len;
      xgr__json_write_string(&b, r, n);
      memmove(b.p + at, b.p + at + 1, b.len - at - 2);
      b.len -= 2;
    } else {
      xgr__buf_put(&b, r, n);
    }
    free(r);
  }
  *out = xgr__buf_finish(&b, outlen);
  return 0;
}
