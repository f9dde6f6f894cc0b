/* cmd_graph.c — `xgr graph FILE [--format mermaid|dot|svg]`: draw an orchestration (svg: laid out by
 * Graphviz, xgr/svg.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/load.h"
#include "xgr/svg.h"

static void usage(FILE *f) {
  fputs("usage: xgr graph [--format mermaid|dot|svg] [-o OUT] FILE\n\n"
        "Draw an orchestration (or a bundle's orchestration): steps with their rule, spawn edges\n"
        "(solid: valid, dashed: invalid), each join as a node \"join T · k of n · policy\" with its\n"
        "`from` edges labelled by `when`. Mermaid by default; `dot` for Graphviz; `svg` is the dot\n"
        "drawing laid out by Graphviz, with element ids step-ID, join-ID-BRANCH, spawn-A-B-BRANCH, ...\n"
        "Exit: 0 drawn, 1 the document has load errors, 2 usage or unreadable input.\n",
        f);
}

int xgr_cmd_graph(int argc, char **argv) {
  xgr_graph_format fmt = XGR_GRAPH_MERMAID;
  bool svg = false;
  const char *out = NULL;
  static const struct option opts[] = {
    {"format", required_argument, NULL, 'f'}, {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
  int ch;
  optind = 1;
  while ((ch = xgr_cli_getopt(argc, argv, "f:o:h", opts, "xgr graph")) != -1) {
    switch (ch) {
      case 'f':
        if (!strcmp(optarg, "mermaid")) fmt = XGR_GRAPH_MERMAID;
        else if (!strcmp(optarg, "dot")) fmt = XGR_GRAPH_DOT;
        else if (!strcmp(optarg, "svg")) svg = true;
        else {
          fprintf(stderr, "xgr graph: --format is '%s'; expected mermaid, dot or svg\n", optarg);
          return XGR_EXIT_USAGE;
        }
        break;
      case 'o': out = optarg; break;
      case 'h': usage(stdout); return XGR_EXIT_OK;
      default: return XGR_EXIT_USAGE;   /* reported by xgr_cli_getopt */
    }
  }
  if (optind != argc - 1) {
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  xgr_diags d;
  xgr_diags_init(&d);
  cli_doc doc;
  cli_load_orch(argv[optind], &doc, &d);
  int rc = XGR_EXIT_OK;
  if (!doc.orch) {
    cli_print_errors(stderr, argv[optind], &d);
    rc = doc.io_error ? XGR_EXIT_USAGE : XGR_EXIT_FAIL;
  } else {
    FILE *f = out ? fopen(out, "w") : stdout;
    if (!f) {
      perror(out);
      rc = XGR_EXIT_USAGE;
    } else {
      if (svg) {
        char *text = NULL;
        size_t len = 0;
        xgr_error e;
        xgr_error_clear(&e);
        if (xgr_orch_svg(doc.orch, &text, &len, &e)) {
          fprintf(stderr, "xgr graph: %s\n", e.message);
          rc = XGR_EXIT_USAGE;
        } else if (fwrite(text, 1, len, f) != len) {
          rc = XGR_EXIT_USAGE;
        }
        free(text);
      } else if (xgr_orch_graph(doc.orch, fmt, f)) {
        rc = XGR_EXIT_USAGE;
      }
      if (out) fclose(f);
    }
  }
  cli_doc_free(&doc);
  xgr_diags_free(&d);
  return rc;
}
