/* commands.h — the subcommands of the `xgr` CLI. Each lives in its own cmd_<name>.c and is listed
 * once in the table of xgr.c. A command receives argv without the program name (argv[0] is the
 * command's name) and returns the process exit code. Exit codes are part of the interface:
 * 0 ok, 1 the checked/evaluated thing failed, 2 usage or unreadable input, 3 hard error. */
#ifndef XGR_CLI_COMMANDS_H
#define XGR_CLI_COMMANDS_H

#define XGR_EXIT_OK 0
#define XGR_EXIT_FAIL 1
#define XGR_EXIT_USAGE 2
#define XGR_EXIT_HARD 3

typedef struct xgr_cli_command {
  const char *name;
  const char *summary;   /* one line for `xgr --help` */
  int (*run)(int argc, char **argv);
} xgr_cli_command;

int xgr_cmd_check(int argc, char **argv);
int xgr_cmd_graph(int argc, char **argv);
int xgr_cmd_hash(int argc, char **argv);
int xgr_cmd_eval(int argc, char **argv);
int xgr_cmd_run(int argc, char **argv);
int xgr_cmd_step(int argc, char **argv);
/* xgrd clients (client.h) */
int xgr_cmd_enqueue(int argc, char **argv);
int xgr_cmd_sessions(int argc, char **argv);
int xgr_cmd_show(int argc, char **argv);
int xgr_cmd_kill(int argc, char **argv);
int xgr_cmd_batch(int argc, char **argv);   /* cmd_batch.c */
int xgr_cmd_retry(int argc, char **argv);
int xgr_cmd_fork(int argc, char **argv);
int xgr_cmd_grant(int argc, char **argv);
int xgr_cmd_grants(int argc, char **argv);
int xgr_cmd_pause(int argc, char **argv);
int xgr_cmd_resume(int argc, char **argv);
int xgr_cmd_wake(int argc, char **argv);
int xgr_cmd_put_orchestration(int argc, char **argv);
int xgr_cmd_put_rule(int argc, char **argv);
int xgr_cmd_deploy(int argc, char **argv);
int xgr_cmd_history(int argc, char **argv);
int xgr_cmd_key(int argc, char **argv);
int xgr_cmd_permit(int argc, char **argv);
int xgr_cmd_console(int argc, char **argv);
int xgr_cmd_publish(int argc, char **argv);
int xgr_cmd_explore(int argc, char **argv);
int xgr_cmd_migrate_check(int argc, char **argv);
int xgr_cmd_migrate(int argc, char **argv);
int xgr_cmd_versions(int argc, char **argv);
/* Print an exploration trace (xgr/explore.h) as numbered lines (cmd_explore.c). */
#include <jansson.h>
void xgr_cli_print_trace(const json_t *tr);

#endif
