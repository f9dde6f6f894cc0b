/* load.c — read an orchestration or a bundle's orchestration for the CLI (see load.h). */
#include "cli/load.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/opts.h"
#include "xgr/bundle.h"
#include "xgr/json.h"
#include "xgr/rule.h"

int cli_load_orch(const char *file, cli_doc *d, xgr_diags *diags) {
  memset(d, 0, sizeof *d);
  char *buf;
  size_t len;
  xgr_error e;
  /* a bundle also holds rules (up to 128 KiB each), so allow more than one OSTC here */
  int rc = xgr_file_read(file, &buf, &len, 64u << 20, &e);
  if (rc) {
    d->io_error = rc != XGR_ELIMIT;
    xgr_diags_add_error(diags, &e);
    return rc;
  }
  json_t *root = NULL;
  if (xgr_json_parse(buf, len, &root, &e) == 0 && cli_doc_kind(root) == CLI_DOC_RULE) {
    d->is_rule = 1;   /* an XRC-137 rule document: its own checks, no orchestration */
    xgr_rule_lint(root, diags);
    xgr_rule *r = NULL;
    rc = xgr_rule_parse(buf, len, &r, &e);
    if (rc) {
      xgr_diags_add_error(diags, &e);
    } else {
      d->rule_ok = 1;
      d->rule_inputs = xgr_rule_ninputs(r);
      d->rule_rules = xgr_rule_nrules(r);
    }
    xgr_rule_free(r);
    json_decref(root);
    free(buf);
    return rc;
  }
  json_decref(root);
  if (xgr_bundle_detect(buf, len)) {
    /* a bundle: its rules are checked too, and every step's rule must resolve */
    d->is_bundle = 1;
    xgr_bundle *b = NULL;
    rc = xgr_bundle_parse(buf, len, &b, &e, diags);
    if (b) {   /* kept whole: xgr check explores with the rules' waitSec, as xgr explore does */
      d->bundle = b;
      d->orch = b->orch;
    }
  } else {
    rc = xgr_orch_parse(buf, len, &d->orch, &e, diags);
  }
  free(buf);
  return rc;
}

void cli_doc_free(cli_doc *d) {
  if (d->bundle) xgr_bundle_free(d->bundle);   /* frees its orchestration */
  else xgr_orch_free(d->orch);
  d->orch = NULL;
  d->bundle = NULL;
}

size_t cli_warn_undeclared(const char *prog, const char *flag, xgr_value payload, const xgr_rule *rule,
                           const char *what) {
  size_t n = xgr_rule_ninputs(rule), warned = 0;
  const char *missing[XGR_MAX_PAYLOAD_FIELDS];
  size_t nmissing = 0;
  for (size_t i = 0; i < n && nmissing < XGR_MAX_PAYLOAD_FIELDS; i++) {
    const char *name = xgr_rule_input_name(rule, i);
    xgr_value v;
    if (!xgr_map_get_str(payload, name, strlen(name), &v)) missing[nmissing++] = name;
  }
  for (size_t i = 0; i < xgr_map_size(payload); i++) {
    xgr_value k, v;
    xgr_map_entry(payload, i, &k, &v);
    if (k.kind != XGR_VSTRING) continue;
    size_t kl;
    const char *key = xgr_value_str(k, &kl);
    if (!kl || key[0] == '_' || strlen(key) != kl) continue;   /* reserved keys travel on quietly */
    bool declared = false;
    for (size_t j = 0; j < n && !declared; j++) declared = !strcmp(key, xgr_rule_input_name(rule, j));
    const char *near = declared ? NULL : xgr_cli_nearest_word(key, missing, nmissing);
    if (!near) continue;
    fprintf(stderr, "%s: %s: key \"%s\" is not declared by %s, so it is not read as an input (it is passed on); did "
            "you mean \"%s\"?\n", prog, flag, key, what, near);
    warned++;
  }
  return warned;
}

size_t cli_warn_undeclared_start(const char *prog, const char *flag, xgr_value payload, const xgr_bundle *b,
                                 const char *start) {
  int si = b && start ? xgr_orch_find(b->orch, start) : -1;
  const xgr_rule *r = si >= 0 && b->step_rule ? b->step_rule[si] : NULL;   /* a bundle without rules has no table */
  if (!r) return 0;
  const char *key = NULL;
  for (size_t j = 0; j < b->nrules && !key; j++)
    if (b->rules[j] == r) key = b->rule_keys[j];
  char what[256];
  snprintf(what, sizeof what, "rule \"%s\" of step \"%s\"", key ? key : "?", start);
  return cli_warn_undeclared(prog, flag, payload, r, what);
}

void cli_print_errors(FILE *f, const char *file, const xgr_diags *d) {
  for (size_t i = 0; i < d->n; i++)
    if (d->items[i].severity == XGR_SEV_ERROR)
      fprintf(f, "%s: %s: error: %s [%s]\n", file, d->items[i].path[0] ? d->items[i].path : "(document)",
              d->items[i].message, d->items[i].code);
}

cli_kind cli_doc_kind(const json_t *root) {
  if (!json_is_object(root)) return CLI_DOC_UNKNOWN;
  if (json_object_get(root, "orchestration")) return CLI_DOC_BUNDLE;
  if (json_object_get(root, "structure")) return CLI_DOC_ORCH;
  static const char *const rule_keys[] = {"payload", "rules", "onValid", "onInvalid", "apiCalls", "contractReads"};
  for (size_t i = 0; i < sizeof rule_keys / sizeof *rule_keys; i++)
    if (json_object_get(root, rule_keys[i])) return CLI_DOC_RULE;
  return CLI_DOC_UNKNOWN;
}

const char *cli_doc_kind_name(cli_kind k) {
  static const char *const n[] = {"not an xgr document", "an orchestration (XRC-729)", "a rule document (XRC-137)",
                                  "a bundle ({\"orchestration\", \"rules\"})"};
  return n[k];
}

const char *cli_doc_hint(cli_kind k, const char *file, char *buf, size_t n) {
  switch (k) {
    case CLI_DOC_ORCH:
      snprintf(buf, n, "for an orchestration: xgr check %s, xgr graph %s, xgr put-orchestration %s", file, file, file);
      break;
    case CLI_DOC_RULE:
      snprintf(buf, n, "for a rule document: xgr check %s, xgr step %s --payload JSON, xgr put-rule %s", file, file, file);
      break;
    case CLI_DOC_BUNDLE:
      snprintf(buf, n, "for a bundle: xgr check %s, xgr run %s --start STEP, xgr step %s --rule NAME, xgr deploy %s",
               file, file, file, file);
      break;
    default:
      snprintf(buf, n, "expected an orchestration {\"id\",\"structure\"}, a rule document {\"payload\",\"rules\",...} or a "
               "bundle {\"orchestration\",\"rules\"}");
      break;
  }
  return buf;
}
