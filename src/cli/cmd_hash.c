/* cmd_hash.c — `xgr hash FILE...`: print the keccak-256 hash of each orchestration (of the
 * exact bytes of the file; for a bundle, of its orchestration's compact serialization). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/load.h"

int xgr_cmd_hash(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
  int ch;
  optind = 1;
  while ((ch = xgr_cli_getopt(argc, argv, "h", opts, "xgr hash")) != -1)
    if (ch != 'h') return XGR_EXIT_USAGE;   /* reported by xgr_cli_getopt */
  bool help = optind > 1;
  argv += optind - 1;   /* the files from argv[1] on */
  argc -= optind - 1;
  if (argc < 2 || help) {
    fputs("usage: xgr hash FILE...\n\nPrint \"0x<keccak-256>  FILE\" for each orchestration: the hash of the\n"
          "exact bytes of the file (what a session is pinned to), or for a bundle the hash of its\n"
          "orchestration's compact serialization. Exit: 0 ok, 1 load errors, 2 usage or unreadable.\n",
          help ? stdout : stderr);
    return help ? XGR_EXIT_OK : XGR_EXIT_USAGE;
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
