/* cmd_graph.c — placeholder until src/orch lands. */
#include "cli/commands.h"
int xgr_cmd_graph(int argc, char **argv) { (void)argc; (void)argv; return XGR_EXIT_USAGE; }
