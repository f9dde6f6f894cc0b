/* client.h — the `xgr` CLI as a JSON-RPC client of xgrd (libcurl): one call helper, the options
 * every client command shares (--url, --json, --from, --timeout), and output helpers. Used by
 * cmd_enqueue.c, cmd_sessions.c, cmd_show.c, cmd_control.c, cmd_wake.c, cmd_put.c, cmd_deploy.c.
 *
 * Exit codes (commands.h): 0 ok; 1 the daemon answered with an error; 2 usage, unreadable input,
 * or the daemon is unreachable; 3 a malformed answer.
 */
#ifndef XGR_CLI_CLIENT_H
#define XGR_CLI_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/opts.h"

#define XGR_CLIENT_DEFAULT_URL "http://127.0.0.1:8729"
/* How many times a call re-signs a control permit xgrd found used (see xgr_client_call). */
#define XGR_CLIENT_PERMIT_RESIGN 64

typedef struct xgr_client {
  const char *url;      /* --url (default XGR_CLIENT_DEFAULT_URL or $XGR_URL) */
  const char *from;     /* --from: the caller's address (sent as "from") */
  bool json;            /* --json: print the raw result */
  long timeout_ms;      /* --timeout (default 30000) */
  /* --key FILE / $XGR_KEY_FILE (cmd_permit.c): every call attaches the permit its method needs */
  bool has_key, key_failed, from_is_key;
  uint8_t key[32];
  char key_addr[43];    /* the key's address; the default --from */
} xgr_client;

/* Initialise from the environment (XGR_URL). */
void xgr_client_init(xgr_client *c);
/* The vals of the shared options (opts.h tables), beyond any character a command uses. */
enum { XGR_CLIENT_OPT_URL = 0x1000, XGR_CLIENT_OPT_FROM, XGR_CLIENT_OPT_JSON, XGR_CLIENT_OPT_TIMEOUT, XGR_CLIENT_OPT_KEY };
/* The shared options and --help as entries of a client command's long option table: put it last,
 * before the {0} entry. */
#define XGR_CLIENT_OPTIONS                                                                                    \
  {"url", required_argument, NULL, XGR_CLIENT_OPT_URL}, {"from", required_argument, NULL, XGR_CLIENT_OPT_FROM}, \
  {"json", no_argument, NULL, XGR_CLIENT_OPT_JSON}, {"timeout", required_argument, NULL, XGR_CLIENT_OPT_TIMEOUT}, \
  {"key", required_argument, NULL, XGR_CLIENT_OPT_KEY}, {"help", no_argument, NULL, 'h'}
/* The next of a client command's own options: xgr_cli_getopt (opts.h, short option -h) over
 * longopts, which holds XGR_CLIENT_OPTIONS; the shared options are applied to c on the way.
 * Returns the val of the command's own option (its value in optarg), -1 after the last option
 * (the other arguments are argv[optind..argc)), or -2 when the command ends with *rc:
 * XGR_EXIT_OK after --help (usage(stdout) printed), XGR_EXIT_USAGE after a bad option or a bad
 * shared value (reported). */
int xgr_client_getopt(xgr_client *c, int argc, char **argv, const struct option *longopts, const char *prog,
                      void (*usage)(FILE *), int *rc);
/* The arguments of a command on one session or process (`xgr NAME PID --owner ADDR` and the
 * shared options; the owner defaults to --from) into c, *owner and *pid. Returns -1 when the
 * command goes on, else the exit code it ends with: XGR_EXIT_OK after --help, XGR_EXIT_USAGE for
 * a bad option (reported), a second PID or a missing PID or owner (reported, then usage(stderr)). */
int xgr_client_owner_pid(xgr_client *c, int argc, char **argv, const char *name, void (*usage)(FILE *),
                         const char **owner, const char **pid);
/* Load a private key file into c (cmd_permit.c): c->from defaults to its address. Prints the
 * reason and returns -1 when the file is unreadable, malformed or readable by others. */
int xgr_client_load_key(xgr_client *c, const char *path);
/* With a key loaded: put the permit `method` needs into params.permit (an object), signed, after
 * asking xgrd what it must know (chain id, control contract, next rootPid, registered hash), with
 * expiry now + $XGR_PERMIT_TTL + later seconds. Methods without permits, and params that carry
 * one already, are left alone. *attached (may be NULL): whether a permit was signed and put in.
 * Returns 0 or an exit code (message printed). */
int xgr_client_attach_permit(const xgr_client *c, const char *cmd, const char *method, json_t *params, uint64_t later,
                             bool *attached);
/* Help text for the shared options. */
extern const char xgr_client_opts_help[];

/* Call method with params (stolen; an object). On success returns 0 and *result (a new
 * reference). On failure prints the reason to stderr prefixed with `cmd` and returns the exit
 * code: 1 for a JSON-RPC error (code, message and data.path printed), 2 when the daemon cannot
 * be reached, 3 for a malformed answer. */
int xgr_client_call(const xgr_client *c, const char *cmd, const char *method, json_t *params, json_t **result);

/* The scheme and authority of c->url ("http://127.0.0.1:8729", no path) into out[n]. */
void xgr_client_origin(const xgr_client *c, char *out, size_t n);
/* POST body (JSON) to the path (e.g. "/ui/auth/nonce") of xgrd at c->url's origin, without a permit. On
 * HTTP 200 with a JSON object returns 0 and *answer (a new reference); otherwise prints the reason
 * (an answer's "error" when it has one) prefixed with `cmd` and returns the exit code as
 * xgr_client_call does. */
int xgr_client_post(const xgr_client *c, const char *cmd, const char *path, const json_t *body, json_t **answer);

/* Print a result as pretty JSON to stdout. */
void xgr_client_print_json(const json_t *j);
/* Read a whole file (at most max bytes) into a malloc'd NUL-terminated buffer; NULL with a
 * message on failure. */
char *xgr_client_read_file(const char *cmd, const char *path, size_t max, size_t *len);
/* Seconds since the epoch as "YYYY-MM-DD HH:MM:SS" (UTC) into buf. */
void xgr_client_time(long long secs, char *buf, size_t n);

/* Shared printers (cmd_sessions.c): a join view as "got/k of n policy outcome"; processes of the
 * join view as a table. */
void xgr_cli_join_summary(const json_t *j, char *buf, size_t n);
void xgr_cli_print_items(const json_t *items);

#endif
