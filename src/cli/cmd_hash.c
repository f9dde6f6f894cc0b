/* cmd_hash.c — placeholder until src/orch lands. */
#include "cli/commands.h"
int xgr_cmd_hash(int argc, char **argv) { (void)argc; (void)argv; return XGR_EXIT_USAGE; }
