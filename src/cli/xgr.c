/* xgr.c — entry point of the `xgr` command line tool: dispatches to the subcommands listed in
 * the table below (each implemented in cmd_<name>.c). */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"

static const xgr_cli_command commands[] = {
  {"check", "validate orchestrations (XRC-729) and bundles; report errors and warnings", xgr_cmd_check},
  {"graph", "draw an orchestration as a Mermaid or Graphviz diagram", xgr_cmd_graph},
  {"hash", "print the keccak-256 hash of an orchestration file", xgr_cmd_hash},
  {"eval", "evaluate an expression or template (rule, value or extract mode)", xgr_cmd_eval},
  {"run", "run a session of a bundle and show its timeline and tree", xgr_cmd_run},
  {"step", "run one XRC-137 rule step on a payload (real HTTP for apiCalls)", xgr_cmd_step},
  {"enqueue", "start a session on xgrd (JSON-RPC client; --url)", xgr_cmd_enqueue},
  {"sessions", "list an owner's sessions and processes on xgrd", xgr_cmd_sessions},
  {"show", "show one session on xgrd: processes, joins, step timeline", xgr_cmd_show},
  {"kill", "kill a session or process on xgrd", xgr_cmd_kill},
  {"pause", "pause a session or process on xgrd", xgr_cmd_pause},
  {"resume", "resume a paused session or process on xgrd", xgr_cmd_resume},
  {"wake", "wake waiting processes on xgrd (PID or step mode)", xgr_cmd_wake},
  {"batch", "act on many sessions on xgrd: preview, start, status, cancel, list (kill, pause, resume, wake)", xgr_cmd_batch},
  {"retry", "run an aborted process's step again in its live session on xgrd", xgr_cmd_retry},
  {"fork", "start a new session from a recorded step of a session on xgrd", xgr_cmd_fork},
  {"grant", "give, change or revoke another address's rights on a session on xgrd", xgr_cmd_grant},
  {"grants", "list the grants on a session, or to and of the caller, on xgrd", xgr_cmd_grants},
  {"put-orchestration", "register an orchestration in xgrd's registry", xgr_cmd_put_orchestration},
  {"put-rule", "register a rule document in xgrd's registry", xgr_cmd_put_rule},
  {"deploy", "register a bundle's rules and orchestration on xgrd", xgr_cmd_deploy},
  {"history", "print a session's audit trail from a store file (proc_steps)", xgr_cmd_history},
  {"key", "make a signing key (xgr key new FILE) or print a key file's address", xgr_cmd_key},
  {"permit", "print a signed EIP-712 permit (session, control, xdala) for curl users", xgr_cmd_permit},
  {"console", "sign in to xgrd's console with a key file: print a one-time sign-in link", xgr_cmd_console},
  {"publish", "deploy a bundle to an Ethereum node: XRC-137 rule contracts and an XRC-729 registry", xgr_cmd_publish},
  {"explore", "explore every outcome and ordering of a session: findings with shortest traces", xgr_cmd_explore},
  {"migrate-check", "prove whether sessions of OLD can move to NEW (static checks and exploration)", xgr_cmd_migrate_check},
  {"versions", "group live sessions by version (registry, orchestration, bundle hash) and waiting step", xgr_cmd_versions},
  {"migrate", "move live sessions on xgrd to another version, each checked at its safe point", xgr_cmd_migrate},
};

static void usage(FILE *out) {
  fprintf(out,
          "xgr — the xDaLa process engine (XRC-729 orchestrations, XRC-137 rules)\n\n"
          "usage: xgr <command> [options] [args]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-18s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\n`xgr <command> --help` describes a command. Exit codes: 0 ok, 1 failed check or "
               "evaluation, 2 usage or unreadable input, 3 hard error.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return XGR_EXIT_OK;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("xgr 0.1.0\n");
    return XGR_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
  const char *names[sizeof commands / sizeof commands[0]];
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) names[i] = commands[i].name;
  const char *near = xgr_cli_nearest_word(argv[1], names, sizeof names / sizeof names[0]);
  if (near) {   /* a typo: the fix, not the whole usage */
    fprintf(stderr, "xgr: unknown command '%s'; did you mean '%s'?\n", argv[1], near);
    return XGR_EXIT_USAGE;
  }
  fprintf(stderr, "xgr: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return XGR_EXIT_USAGE;
}
