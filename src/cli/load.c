/* load.c — read an orchestration or a bundle's orchestration for the CLI (see load.h). */
#include "cli/load.h"

#include <stdlib.h>
#include <string.h>

#include "xgr/json.h"

/* Prefix the paths of diags[from..] with "orchestration." */
static void prefix_paths(xgr_diags *diags, size_t from) {
  for (size_t i = from; i < diags->n; i++) {
    const char *p = diags->items[i].path;
    size_t n = strlen(p) + sizeof "orchestration.";
    char *np = malloc(n);
    if (!np) continue;
    snprintf(np, n, "orchestration%s%s", *p && *p != '[' ? "." : "", p);
    free(diags->items[i].path);
    diags->items[i].path = np;
  }
}

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
  if (xgr_json_parse(buf, len, &root, &e) == 0 && json_is_object(root) &&
      json_object_get(root, "orchestration") && !json_object_get(root, "structure")) {
    d->is_bundle = 1;
    const json_t *oj = json_object_get(root, "orchestration");
    char *compact = json_dumps(oj, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!compact) {
      xgr_error_set(&e, XGR_ENOMEM, "orchestration", "cannot serialise the bundle's orchestration");
      xgr_diags_add_error(diags, &e);
      rc = XGR_ENOMEM;
    } else {
      size_t from = diags->n;
      rc = xgr_orch_parse(compact, strlen(compact), &d->orch, &e, diags);
      prefix_paths(diags, from);
      free(compact);
    }
  } else {
    rc = xgr_orch_parse(buf, len, &d->orch, &e, diags);
  }
  json_decref(root);
  free(buf);
  return rc;
}

void cli_doc_free(cli_doc *d) {
  xgr_orch_free(d->orch);
  d->orch = NULL;
}
