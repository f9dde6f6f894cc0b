/* cmd_hash.c — `xgr hash FILE...`: print the keccak-256 hash of each orchestration (of the
 * exact bytes of the file; for a bundle, of its orchestration's compact serialization). */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/load.h"

int xgr_cmd_hash(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs("usage: xgr hash FILE...\n\nPrint \"0x<keccak-256>  FILE\" for each orchestration: the hash of the\n"
          "exact bytes of the file (what a session is pinned to), or for a bundle the hash of its\n"
          "orchestration's compact serialization. Exit: 0 ok, 1 load errors, 2 usage or unreadable.\n",
          argc < 2 ? stderr : stdout);
    return argc < 2 ? XGR_EXIT_USAGE : XGR_EXIT_OK;
  }
  int rc = XGR_EXIT_OK;
  for (int i = 1; i < argc; i++) {
    xgr_diags d;
    xgr_diags_init(&d);
    cli_doc doc;
    cli_load_orch(argv[i], &doc, &d);
    if (doc.orch) {
      if (argc == 2) printf("%s\n", doc.orch->hash);
      else printf("%s  %s\n", doc.orch->hash, argv[i]);
    } else {
      cli_print_errors(stderr, argv[i], &d);
      int r = doc.io_error ? XGR_EXIT_USAGE : XGR_EXIT_FAIL;
      if (r > rc) rc = r;
    }
    cli_doc_free(&doc);
    xgr_diags_free(&d);
  }
  return rc;
}
