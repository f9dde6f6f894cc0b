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
  const char *owner, *pid;
  int end = xgr_client_owner_pid(&c, argc, argv, name, usage, &owner, &pid);
  if (end >= 0) return end;
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
