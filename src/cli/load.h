/* load.h — how the CLI reads an orchestration from a file: either an XRC-729 document, or a
 * bundle ({"orchestration": {...}, "rules": {...}}), whose rules are loaded and checked too (caps,
 * expressions, every step's rule resolves). A bundle has no registered bytes of its own, so its
 * orchestration is hashed as jansson's compact serialization in document key order (SEMANTICS §8). */
#ifndef XGR_CLI_LOAD_H
#define XGR_CLI_LOAD_H

#include <stdio.h>

#include "xgr/orch.h"

typedef struct cli_doc {
  xgr_orch *orch;       /* owned; NULL when loading failed */
  int is_bundle;        /* the file was a bundle; diagnostic paths are prefixed "orchestration." */
  int io_error;         /* the file could not be read at all (exit code 2) */
} cli_doc;

/* Load file into d. Findings (load errors, warnings) go to diags with paths relative to the
 * file. Returns 0 when an orchestration was loaded. */
int cli_load_orch(const char *file, cli_doc *d, xgr_diags *diags);
void cli_doc_free(cli_doc *d);

/* Print the error findings of file to f as `file: path: error: message [code]`, the shape of
 * `xgr check` (a document-wide finding shows its path as "(document)"). */
void cli_print_errors(FILE *f, const char *file, const xgr_diags *d);

#endif
