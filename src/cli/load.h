/* load.h — how the CLI reads an orchestration from a file: either an XRC-729 document, or a
 * bundle ({"orchestration": {...}, "rules": {...}}), whose rules are loaded and checked too (caps,
 * expressions, every step's rule resolves). A bundle has no registered bytes of its own, so its
 * orchestration is hashed as jansson's compact serialization in document key order (SEMANTICS §8). */
#ifndef XGR_CLI_LOAD_H
#define XGR_CLI_LOAD_H

#include <jansson.h>

#include <stdio.h>

#include "xgr/bundle.h"
#include "xgr/orch.h"
#include "xgr/rule.h"
#include "xgr/value.h"

typedef struct cli_doc {
  xgr_orch *orch;       /* owned (through bundle for a bundle); NULL when loading failed */
  xgr_bundle *bundle;   /* owned; a bundle's rules (bundle->orch == orch), else NULL */
  int is_bundle;        /* the file was a bundle; diagnostic paths are prefixed "orchestration." */
  int io_error;         /* the file could not be read at all (exit code 2) */
  int is_rule;          /* the file was an XRC-137 rule document (no orchestration) */
  int rule_ok;          /* ... and it loads */
  size_t rule_inputs, rule_rules;
} cli_doc;

/* Load file into d. Findings (load errors, warnings) go to diags with paths relative to the
 * file. Returns 0 when an orchestration was loaded. A rule document is loaded and checked as one
 * (is_rule; no orchestration). */
int cli_load_orch(const char *file, cli_doc *d, xgr_diags *diags);
void cli_doc_free(cli_doc *d);

/* What kind of document a JSON value is, by its keys: a bundle has "orchestration", an XRC-729
 * orchestration "structure", an XRC-137 rule "payload", "rules", "onValid" or "onInvalid". */
typedef enum cli_kind { CLI_DOC_UNKNOWN = 0, CLI_DOC_ORCH, CLI_DOC_RULE, CLI_DOC_BUNDLE } cli_kind;
cli_kind cli_doc_kind(const json_t *root);
/* "an orchestration (XRC-729)", "a rule document (XRC-137)", "a bundle", "not an xgr document". */
const char *cli_doc_kind_name(cli_kind k);
/* A hint for a command that got the wrong kind of document: what command or flag fits `file`. */
const char *cli_doc_hint(cli_kind k, const char *file, char *buf, size_t n);

/* Warn on stderr (`prog: flag: key "Iterr" is not declared by WHAT ...; did you mean "Iter"?`)
 * about each key of payload (a map) that rule does not declare while a declared input that the
 * payload lacks is a likely typo of it: the rule would read its default, or take the invalid
 * branch, instead of the value meant. Keys starting with '_' (reserved: __wakeUp, _from, _when)
 * and keys with no near input are passed on quietly (later steps may read them). what names the
 * rule, e.g. `rule "0xab…" of step "A"`. Returns how many keys were warned about. */
size_t cli_warn_undeclared(const char *prog, const char *flag, xgr_value payload, const xgr_rule *rule,
                           const char *what);
/* The same for the rule that step `start` of bundle b runs (nothing when there is none). */
size_t cli_warn_undeclared_start(const char *prog, const char *flag, xgr_value payload, const xgr_bundle *b,
                                 const char *start);

/* Print the error findings of file to f as `file: path: error: message [code]`, the shape of
 * `xgr check` (a document-wide finding shows its path as "(document)"). */
void cli_print_errors(FILE *f, const char *file, const xgr_diags *d);

#endif
