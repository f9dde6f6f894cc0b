/* bundle.c — load a bundle (orchestration + rules) and resolve every step's rule (xgr/bundle.h). */
#include "xgr/bundle.h"
#include "util/alloc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "xgr/json.h"

static bool is_address(const char *s) {
  if (strncmp(s, "0x", 2) && strncmp(s, "0X", 2)) return false;
  size_t n = strlen(s);
  if (n != 42) return false;
  for (size_t i = 2; i < n; i++)
    if (!isxdigit((unsigned char)s[i])) return false;
  return true;
}

void xgr_bundle_free(xgr_bundle *b) {
  if (!b) return;
  xgr_orch_free(b->orch);
  for (size_t i = 0; i < b->nrules; i++) {
    free(b->rule_keys[i]);
    xgr_rule_free(b->rules[i]);
  }
  free(b->rule_keys);
  free(b->rules);
  free(b->step_rule);
  free(b->step_rule_address);
  free(b);
}

int xgr_bundle_detect(const char *bytes, size_t len) {
  json_t *root;
  xgr_error e;
  if (xgr_json_parse_exact(bytes, len, &root, &e)) return 0;
  int r = json_is_object(root) && json_object_get(root, "orchestration") && !json_object_get(root, "structure");
  json_decref(root);
  return r;
}

static int fail(xgr_error *err, xgr_diags *d, int *nerr, int code, const char *path, const char *fmt, const char *a,
                const char *b) {
  xgr_error e;
  xgr_error_set(&e, code, path, fmt, a, b);
  if ((*nerr)++ == 0 && err) *err = e;
  if (d) xgr_diags_add_error(d, &e);
  return code;
}

/* The rule key a step reference names: an address, the alias inside ${addr:ALIAS}, or an alias. */
static const char *ref_key(const char *ref, char *buf, size_t n) {
  size_t len = strlen(ref);
  if (!strncmp(ref, "${addr:", 7) && len > 8 && ref[len - 1] == '}') {
    snprintf(buf, n, "%.*s", (int)(len - 8), ref + 7);
    return buf;
  }
  return ref;
}

/* Resolve every step's rule among b's rules (by address, case-insensitive; by the alias inside
 * ${addr:ALIAS}; or by bare alias). Unresolved steps are errors. Returns XGR_ENOMEM or 0. */
static int resolve_steps(xgr_bundle *b, xgr_error *err, xgr_diags *diags, int *nerr, const json_t *failed) {
  size_t ns = b->orch->nsteps;
  b->step_rule = xgr__xcalloc(ns, sizeof *b->step_rule);
  b->step_rule_address = xgr__xcalloc(ns, sizeof *b->step_rule_address);
  if (!b->step_rule || !b->step_rule_address) return XGR_ENOMEM;
  for (size_t s = 0; s < ns; s++) {
    const char *ref = b->orch->steps[s].rule;
    char buf[256];
    const char *want = ref_key(ref, buf, sizeof buf);
    for (size_t i = 0; i < b->nrules && !b->step_rule[s]; i++) {
      const char *k = b->rule_keys[i];
      if ((is_address(want) && !strcasecmp(k, want)) || !strcmp(k, want) || !strcmp(k, ref)) {
        b->step_rule[s] = b->rules[i];
        b->step_rule_address[s] = is_address(k) ? k : NULL;
      }
    }
    if (!b->step_rule[s] && (json_object_get(failed, want) || json_object_get(failed, ref))) {
      /* its rule is in the bundle but did not load: that error was reported; say nothing more */
      (*nerr)++;
    } else if (!b->step_rule[s]) {
      char path[XGR_PATH_MAX];
      snprintf(path, sizeof path, "orchestration.structure.%s.rule", b->orch->steps[s].id);
      fail(err, diags, nerr, XGR_ERULEREF, path,
           "rule \"%s\" of this step is not in the bundle's \"rules\" (keys are addresses or aliases; "
           "\"${addr:ALIAS}\" and a bare alias look up ALIAS)%s", ref, "");
    }
  }
  return 0;
}

int xgr_bundle_parse(const char *bytes, size_t len, xgr_bundle **out, xgr_error *err, xgr_diags *diags) {
  *out = NULL;
  xgr_error_clear(err);
  json_t *root;
  xgr_error e;
  int nerr = 0;
  if (xgr_json_parse_exact(bytes, len, &root, &e)) {   /* integers beyond int64 stay exact */
    if (err) *err = e;
    if (diags) xgr_diags_add_error(diags, &e);
    return e.code;
  }
  xgr_bundle *b = xgr__xcalloc(1, sizeof *b);
  const json_t *oj = json_is_object(root) ? json_object_get(root, "orchestration") : NULL;
  const json_t *rj = json_is_object(root) ? json_object_get(root, "rules") : NULL;
  json_t *failed = json_object();   /* keys of rules that did not load */
  if (!json_is_object(root)) {
    fail(err, diags, &nerr, XGR_ESCHEMA, "", "a bundle is an object {\"orchestration\": {...}, \"rules\": {...}}%s%s", "", "");
    goto done;
  }
  if (!json_is_object(oj)) {
    fail(err, diags, &nerr, XGR_ESCHEMA, "orchestration", "%s; expected the XRC-729 orchestration object%s",
         oj ? "not an object" : "missing", "");
  } else {
    char *compact = xgr_json_dumps_compact(oj);
    size_t from = diags ? diags->n : 0;
    int rc = compact ? xgr_orch_parse(compact, strlen(compact), &b->orch, &e, diags) : XGR_ENOMEM;
    xgr_diags_prefix(diags, from, "orchestration");
    if (rc) {
      if (nerr++ == 0 && err) {
        *err = e;
        char p[XGR_PATH_MAX];
        snprintf(p, sizeof p, "orchestration%s%.200s", e.path[0] && e.path[0] != '[' ? "." : "", e.path);
        snprintf(err->path, sizeof err->path, "%s", p);
      }
    }
    free(compact);
  }
  if (rj && !json_is_object(rj)) {
    fail(err, diags, &nerr, XGR_ESCHEMA, "rules", "not an object; expected {\"<address|alias>\": {...XRC-137...}}%s%s", "", "");
  } else if (rj) {
    size_t n = json_object_size(rj);
    b->rule_keys = xgr__xcalloc(n ? n : 1, sizeof *b->rule_keys);
    b->rules = xgr__xcalloc(n ? n : 1, sizeof *b->rules);
    if (!b->rule_keys || !b->rules) goto oom;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)rj, key, val) {
      char path[XGR_PATH_MAX];
      xgr_path pb;
      xgr_path_init(&pb);
      xgr_path_key(&pb, "rules");
      xgr_path_key(&pb, key);
      snprintf(path, sizeof path, "%s", pb.buf);
      char *txt = xgr_json_dumps_compact(val);
      if (!txt) goto oom;
      if (diags) {   /* what was probably not meant (typos, templates that look like arithmetic) */
        size_t from = diags->n;
        xgr_rule_lint(val, diags);
        xgr_diags_prefix(diags, from, path);
      }
      xgr_rule *r = NULL;
      int rc = xgr_rule_parse(txt, strlen(txt), &r, &e);
      free(txt);
      if (rc) {
        char full[2 * XGR_PATH_MAX + 8];
        snprintf(full, sizeof full, "%s%s%s", path, e.path[0] && e.path[0] != '[' ? "." : "", e.path);
        xgr_error fe;
        xgr_error_set(&fe, e.code, full, "%s", e.message);
        if (nerr++ == 0 && err) *err = fe;
        if (diags) xgr_diags_add_error(diags, &fe);
        json_object_set_new(failed, key, json_true());
        continue;
      }
      b->rule_keys[b->nrules] = xgr__xstrdup(key);
      b->rules[b->nrules++] = r;
    }
  }
  if (b->orch && resolve_steps(b, err, diags, &nerr, failed) == XGR_ENOMEM) goto oom;
done:
  json_decref(failed);
  json_decref(root);
  if (nerr || !b->orch) {
    int code = err && err->code ? err->code : XGR_ESCHEMA;
    xgr_bundle_free(b);
    return code;
  }
  *out = b;
  return 0;
oom:
  json_decref(failed);
  json_decref(root);
  xgr_bundle_free(b);
  return xgr_error_set(err, XGR_ENOMEM, NULL, "out of memory");
}

int xgr_bundle_load_file(const char *path, xgr_bundle **out, xgr_error *err, xgr_diags *diags) {
  char *buf;
  size_t len;
  xgr_error e;
  *out = NULL;
  int rc = xgr_file_read(path, &buf, &len, 64u << 20, &e);
  if (rc) {
    if (err) *err = e;
    if (diags) xgr_diags_add_error(diags, &e);
    return rc;
  }
  rc = xgr_bundle_parse(buf, len, out, err, diags);
  free(buf);
  return rc;
}

/* Assemble a bundle from registries (xgr/bundle.h): the orchestration from its exact bytes, the
 * rules from lookup() once per distinct key, then the same step resolution as a bundle file. */
int xgr_bundle_assemble(const char *orch_bytes, size_t orch_len, xgr_bundle_lookup_fn lookup, void *ctx,
                        xgr_bundle **out, xgr_error *err) {
  *out = NULL;
  xgr_error_clear(err);
  xgr_bundle *b = xgr__xcalloc(1, sizeof *b);
  xgr_error e;
  int rc = xgr_orch_parse(orch_bytes, orch_len, &b->orch, &e, NULL);
  if (rc) {
    xgr_error_set(err, e.code, NULL, "%s", e.message);
    char full[XGR_PATH_MAX + 32];
    snprintf(full, sizeof full, "orchestration%s%s", e.path[0] && e.path[0] != '[' ? "." : "", e.path);
    snprintf(err->path, sizeof err->path, "%.*s", (int)sizeof err->path - 1, full);
    xgr_bundle_free(b);
    return rc;
  }
  size_t ns = b->orch->nsteps;
  b->rule_keys = xgr__xcalloc(ns ? ns : 1, sizeof *b->rule_keys);
  b->rules = xgr__xcalloc(ns ? ns : 1, sizeof *b->rules);
  if (!b->rule_keys || !b->rules) goto oom;
  int nerr = 0;
  for (size_t s = 0; s < ns; s++) {
    char buf[256], key[256];
    const char *want = ref_key(b->orch->steps[s].rule, buf, sizeof buf);
    snprintf(key, sizeof key, "%s", want);
    if (is_address(key))
      for (char *p = key; *p; p++) *p = (char)tolower((unsigned char)*p);
    bool have = false;
    for (size_t i = 0; i < b->nrules && !have; i++) have = !strcmp(b->rule_keys[i], key);
    if (have) continue;
    char path[XGR_PATH_MAX];
    snprintf(path, sizeof path, "orchestration.structure.%s.rule", b->orch->steps[s].id);
    char *bytes = NULL;
    size_t len = 0;
    rc = lookup(ctx, key, &bytes, &len, &e);
    if (rc) {
      free(bytes);
      if (nerr++) continue;
      if (rc == XGR_ENOTFOUND)
        xgr_error_set(err, XGR_ERULEREF, path, "rule \"%s\" of this step is not registered (looked up \"%s\")",
                      b->orch->steps[s].rule, key);
      else
        xgr_error_set(err, rc, path, "rule \"%s\": %s", key, e.message);
      continue;
    }
    xgr_rule *r = NULL;
    rc = xgr_rule_parse(bytes, len, &r, &e);
    free(bytes);
    if (rc) {
      if (nerr++) continue;
      xgr_path pb;
      xgr_path_init(&pb);
      xgr_path_key(&pb, "rules");
      xgr_path_key(&pb, key);
      xgr_error_set(err, e.code, NULL, "registered rule \"%s\" does not parse: %s", key, e.message);
      char full[2 * XGR_PATH_MAX + 8];
      snprintf(full, sizeof full, "%s%s%s", pb.buf, e.path[0] && e.path[0] != '[' ? "." : "", e.path);
      snprintf(err->path, sizeof err->path, "%.*s", (int)sizeof err->path - 1, full);
      continue;
    }
    b->rule_keys[b->nrules] = xgr__xstrdup(key);
    b->rules[b->nrules++] = r;
    if (!b->rule_keys[b->nrules - 1]) goto oom;
  }
  if (!nerr && resolve_steps(b, err, NULL, &nerr, NULL) == XGR_ENOMEM) goto oom;
  if (nerr) {
    rc = err && err->code ? err->code : XGR_ERULEREF;
    xgr_bundle_free(b);
    return rc;
  }
  *out = b;
  return 0;
oom:
  xgr_bundle_free(b);
  return xgr_error_set(err, XGR_ENOMEM, NULL, "out of memory");
}
