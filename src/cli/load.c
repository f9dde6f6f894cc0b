/* load.c — read an orchestration or a bundle's orchestration for the CLI (see load.h). */
#include "cli/load.h"

#include <stdlib.h>
#include <string.h>

#include "xgr/bundle.h"
#include "xgr/json.h"

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
  if (xgr_bundle_detect(buf, len)) {
    /* a bundle: its rules are checked too, and every step's rule must resolve */
    d->is_bundle = 1;
    xgr_bundle *b = NULL;
    rc = xgr_bundle_parse(buf, len, &b, &e, diags);
    if (b) {
      d->orch = b->orch;   /* take the orchestration over */
      b->orch = NULL;
      xgr_bundle_free(b);
    }
  } else {
    rc = xgr_orch_parse(buf, len, &d->orch, &e, diags);
  }
  free(buf);
  return rc;
}

void cli_doc_free(cli_doc *d) {
  xgr_orch_free(d->orch);
  d->orch = NULL;
}

void cli_print_errors(FILE *f, const char *file, const xgr_diags *d) {
  for (size_t i = 0; i < d->n; i++)
    if (d->items[i].severity == XGR_SEV_ERROR)
      fprintf(f, "%s: %s: error: %s [%s]\n", file, d->items[i].path[0] ? d->items[i].path : "(document)",
              d->items[i].message, d->items[i].code);
}
