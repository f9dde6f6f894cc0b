/* cmd_control.c — `xgr kill`, `xgr pause`, `xgr resume`: control a session (PID = rootPid) or one
 * process (PID = rootPid:iter) on xgrd (xgr.kill / xgr.pause / xgr.resume). */
#include <stdio.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"

static void help(FILE *f, const char *name, const char *method, const char *what) {
  fprintf(f, "usage: xgr %s PID --owner ADDR [options]\n\n%s the whole session (PID = rootPid) or one process\n"
          "(PID = rootPid:iter) on xgrd (%s). Only the owner may.\n\n  --owner ADDR     the session's owner "
          "(default --from)\n%s", name, what, method, xgr_client_opts_help);
}
static void kill_usage(FILE *f) { help(f, "kill", "xgr.kill", "Kill"); }
static void pause_usage(FILE *f) { help(f, "pause", "xgr.pause", "Pause"); }
static void resume_usage(FILE *f) { help(f, "resume", "xgr.resume", "Resume"); }

static int control(int argc, char **argv, const char *name, const char *method, void (*usage)(FILE *)) {
  xgr_client c;
  xgr_client_init(&c);
  const char *owner = NULL, *pid = NULL;
  for (int i = 1; i < argc; i++) {
    int rc, r = xgr_client_arg(&c, argc, argv, &i, usage, &rc);
    if (r < 0) return rc;
    if (r) continue;
    const char *a = argv[i];
    if (!strcmp(a, "--owner") && i + 1 < argc) owner = argv[++i];
    else if (a[0] != '-' && !pid) pid = a;
    else {
      fprintf(stderr, "xgr %s: unexpected '%s' (xgr %s --help)\n", name, a, name);
      return XGR_EXIT_USAGE;
    }
  }
  if (!owner) owner = c.from;
  if (!owner || !pid) {
    fprintf(stderr, "xgr %s: %s is required (xgr %s --help)\n", name, pid ? "--owner" : "PID", name);
    return XGR_EXIT_USAGE;
  }
  json_t *res;
  int rc = xgr_client_call(&c, name, method, json_pack("{s:s, s:s}", "owner", owner, "pid", pid), &res);
  if (rc) return rc;
  if (c.json) xgr_client_print_json(res);
  else printf("%s %s: ok\n", name, pid);
  json_decref(res);
  return XGR_EXIT_OK;
}

int xgr_cmd_kill(int argc, char **argv) { return control(argc, argv, "kill", "xgr.kill", kill_usage); }
int xgr_cmd_pause(int argc, char **argv) { return control(argc, argv, "pause", "xgr.pause", pause_usage); }
int xgr_cmd_resume(int argc, char **argv) { return control(argc, argv, "resume", "xgr.resume", resume_usage); }
