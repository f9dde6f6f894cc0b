/* cmd_batch.c — `xgr batch preview|start|status|cancel|list`: operations on many sessions on xgrd
 * (xgr.batchPreview, xgr.batchStart, xgr.batchGet, xgr.batchCancel, xgr.batchList; docs/RPC.md
 * "Batch operations"). The selection's options become the `selection` object; `start --wait` and
 * `status --watch` poll the operation and draw a progress bar on a terminal (stderr), or print its
 * final state. --json prints the raw results.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/client.h"
#include "xgr/alloc.h"
#include "cli/commands.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: xgr batch preview [selection] [options]\n"
          "       xgr batch start [selection] --action kill|pause|resume|wake [--step STEP] [--payload JSON]\n"
          "                       [--yes] [--wait] [options]\n"
          "       xgr batch status ID [--watch] [options]\n"
          "       xgr batch cancel ID [options]\n"
          "       xgr batch list [--limit N] [options]\n\n"
          "Act on many sessions on xgrd at once (docs/OPERATIONS.md \"Batch operations\"). preview counts\n"
          "the live sessions a selection names and shows a sample (a dry run); start kills, pauses, resumes\n"
          "or wakes (step mode, with a payload) every one of them as a durable operation that xgrd runs at\n"
          "its --batch-rate and goes on after a restart; status shows its progress (--watch: until it ends);\n"
          "cancel stops it; list shows your operations. Only the owner of the sessions may act on them.\n\n"
          "selection (any of):\n"
          "  --owner ADDR          the sessions' owner (default --from)\n"
          "  --registry NAME       the registry they were started from\n"
          "  --ostc-id ID          the orchestration id\n"
          "  --hash 0xHASH         the orchestration hash or bundle hash they pin\n"
          "  --status S[,S...]     running, waiting, paused\n"
          "  --step STEP           a process waits at STEP (with --action wake: also the step woken)\n"
          "  --created-from MS     created at or after (Unix ms)\n"
          "  --created-to MS       created at or before (Unix ms)\n"
          "  --root-from N         rootPid at least N\n"
          "  --root-to N           rootPid at most N\n\n"
          "start:\n"
          "  --action A            kill, pause, resume or wake\n"
          "  --payload JSON        wake: an object merged into the woken processes' payload (or @FILE)\n"
          "  --wait                wait until the operation ends (progress bar on a terminal)\n"
          "  --yes                 do not ask for confirmation on a terminal\n"
          "%s", xgr_client_opts_help);
}

enum { O_OWNER, O_REGISTRY, O_OSTC, O_HASH, O_STATUS, O_STEP, O_CFROM, O_CTO, O_RFROM, O_RTO, O_ACTION, O_PAYLOAD,
       O_LIMIT, O_N, O_WAIT = 100, O_YES, O_WATCH };

static json_t *selection(const char *const v[O_N], const char *from) {
  json_t *s = json_object();
  const char *owner = v[O_OWNER] ? v[O_OWNER] : from;
  if (owner) json_object_set_new(s, "owner", json_string(owner));
  if (v[O_REGISTRY]) json_object_set_new(s, "registry", json_string(v[O_REGISTRY]));
  if (v[O_OSTC]) json_object_set_new(s, "ostcId", json_string(v[O_OSTC]));
  if (v[O_HASH]) json_object_set_new(s, "hash", json_string(v[O_HASH]));
  if (v[O_STEP]) json_object_set_new(s, "step", json_string(v[O_STEP]));
  if (v[O_STATUS]) {
    json_t *a = json_array();
    char *t = xgr_alloc_strdup(v[O_STATUS]), *save = NULL;
    for (char *p = strtok_r(t, ",", &save); p; p = strtok_r(NULL, ",", &save)) json_array_append_new(a, json_string(p));
    free(t);
    json_object_set_new(s, "status", a);
  }
  static const struct {
    int o;
    const char *key;
  } nums[] = {{O_CFROM, "createdFrom"}, {O_CTO, "createdTo"}, {O_RFROM, "rootFrom"}, {O_RTO, "rootTo"}};
  for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
    const char *t = v[nums[i].o];
    if (!t) continue;
    char *end;
    long long x = strtoll(t, &end, 10);   /* the daemon checks the value and names the key */
    json_object_set_new(s, nums[i].key, *end || !*t ? json_string(t) : nums[i].o <= O_CTO ? json_integer(x) : json_string(t));
  }
  return s;
}

static void print_op(const json_t *op) {
  printf("%s  %-6s %-9s %lld/%lld done, %lld failed, %lld skipped\n", json_string_value(json_object_get(op, "id")),
         json_string_value(json_object_get(op, "action")), json_string_value(json_object_get(op, "state")),
         (long long)json_integer_value(json_object_get(op, "done")), (long long)json_integer_value(json_object_get(op, "total")),
         (long long)json_integer_value(json_object_get(op, "failed")),
         (long long)json_integer_value(json_object_get(op, "skipped")));
}

/* Poll operation id until it ends; a progress bar on stderr when it is a terminal. *out: its last state. */
static int watch(xgr_client *c, const char *id, json_t **out) {
  bool tty = isatty(2);
  for (;;) {
    json_t *op;
    json_t *p = json_pack("{s:s}", "id", id);
    if (c->from) json_object_set_new(p, "from", json_string(c->from));
    int rc = xgr_client_call(c, "batch", "xgr.batchGet", p, &op);
    if (rc) return rc;
    long long total = json_integer_value(json_object_get(op, "total"));
    long long handled = json_integer_value(json_object_get(op, "done")) + json_integer_value(json_object_get(op, "failed")) +
                        json_integer_value(json_object_get(op, "skipped"));
    const char *state = json_string_value(json_object_get(op, "state"));
    bool running = state && !strcmp(state, "running");
    if (tty) {
      int width = 40, fill = total > 0 ? (int)(handled * width / (total > handled ? total : handled)) : (running ? 0 : width);
      char bar[41];
      for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
      bar[width] = '\0';
      fprintf(stderr, "\r[%s] %lld/%lld %s ", bar, handled, total, state ? state : "?");
      if (!running) fputc('\n', stderr);
      fflush(stderr);
    }
    if (!running) {
      *out = op;
      return 0;
    }
    json_decref(op);
    nanosleep(&(struct timespec){0, 250000000}, NULL);
  }
}

int xgr_cmd_batch(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? XGR_EXIT_USAGE : XGR_EXIT_OK;
  }
  const char *sub = argv[1];
  bool is_preview = !strcmp(sub, "preview"), is_start = !strcmp(sub, "start"), is_status = !strcmp(sub, "status"),
       is_cancel = !strcmp(sub, "cancel"), is_list = !strcmp(sub, "list");
  if (!is_preview && !is_start && !is_status && !is_cancel && !is_list) {
    fprintf(stderr, "xgr batch: unknown subcommand '%s' (preview, start, status, cancel, list)\n\n", sub);
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  xgr_client c;
  xgr_client_init(&c);
  const char *v[O_N] = {0};
  bool wait = false, yes = false, watch_it = false;
  static const struct option opts[] = {
    {"owner", required_argument, NULL, O_OWNER}, {"registry", required_argument, NULL, O_REGISTRY},
    {"ostc-id", required_argument, NULL, O_OSTC}, {"hash", required_argument, NULL, O_HASH},
    {"status", required_argument, NULL, O_STATUS}, {"step", required_argument, NULL, O_STEP},
    {"created-from", required_argument, NULL, O_CFROM}, {"created-to", required_argument, NULL, O_CTO},
    {"root-from", required_argument, NULL, O_RFROM}, {"root-to", required_argument, NULL, O_RTO},
    {"action", required_argument, NULL, O_ACTION}, {"payload", required_argument, NULL, O_PAYLOAD},
    {"limit", required_argument, NULL, O_LIMIT}, {"wait", no_argument, NULL, O_WAIT}, {"yes", no_argument, NULL, O_YES},
    {"watch", no_argument, NULL, O_WATCH}, XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  int ch, orc;
  optind = 2;
  while ((ch = xgr_client_getopt(&c, argc, argv, opts, "xgr batch", usage, &orc)) != -1) {
    if (ch == -2) return orc;
    if (ch == O_WAIT) wait = true;
    else if (ch == O_YES) yes = true;
    else if (ch == O_WATCH) watch_it = true;
    else v[ch] = optarg;
  }
  if (!c.from) c.from = v[O_OWNER];   /* without --from the owner asks (--auth none) */
  const char *id = optind < argc ? argv[optind] : NULL;
  if ((is_status || is_cancel) != (id != NULL) || optind + (id ? 1 : 0) < argc) {
    fprintf(stderr, "xgr batch %s: %s\n\n", sub, is_status || is_cancel ? "give the operation's ID (one)"
                                                                       : "takes no arguments besides options");
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  json_t *params = json_object(), *res = NULL;
  if (c.from) json_object_set_new(params, "from", json_string(c.from));
  int rc;
  if (is_preview) {
    json_object_set_new(params, "selection", selection(v, c.from));
    if ((rc = xgr_client_call(&c, "batch", "xgr.batchPreview", params, &res))) return rc;
    if (c.json) xgr_client_print_json(res);
    else {
      printf("%lld session(s) selected\n", (long long)json_integer_value(json_object_get(res, "count")));
      size_t i;
      json_t *s;
      json_array_foreach(json_object_get(res, "sample"), i, s) {
        const json_t *r = json_object_get(s, "rootPid");
        printf("  %s/%s  %s\n", json_string_value(json_object_get(s, "owner")),
               json_is_string(r) ? json_string_value(r) : "?", json_string_value(json_object_get(s, "status")));
      }
    }
    json_decref(res);
    return XGR_EXIT_OK;
  }
  if (is_start) {
    if (!v[O_ACTION]) {
      json_decref(params);
      fprintf(stderr, "xgr batch start: give --action kill|pause|resume|wake\n");
      return XGR_EXIT_USAGE;
    }
    json_t *sel = selection(v, c.from);
    if (!yes && isatty(0) && isatty(2) && !c.json) {   /* a person at a terminal confirms the count first */
      json_t *pp = json_pack("{s:O}", "selection", sel), *pv;
      if (c.from) json_object_set_new(pp, "from", json_string(c.from));
      if ((rc = xgr_client_call(&c, "batch", "xgr.batchPreview", pp, &pv))) {
        json_decref(sel);
        json_decref(params);
        return rc;
      }
      fprintf(stderr, "%s %lld session(s)? [y/N] ", v[O_ACTION], (long long)json_integer_value(json_object_get(pv, "count")));
      json_decref(pv);
      char line[16] = "";
      if (!fgets(line, sizeof line, stdin) || (line[0] != 'y' && line[0] != 'Y')) {
        json_decref(sel);
        json_decref(params);
        fprintf(stderr, "xgr batch start: not started\n");
        return XGR_EXIT_FAIL;
      }
    }
    json_object_set_new(params, "selection", sel);
    json_object_set_new(params, "action", json_string(v[O_ACTION]));
    if (v[O_STEP] && !strcmp(v[O_ACTION], "wake")) json_object_set_new(params, "stepId", json_string(v[O_STEP]));
    if (v[O_PAYLOAD]) {
      json_t *p;
      if (xgr_cli_object_arg("xgr batch", "--payload", v[O_PAYLOAD], &p)) {
        json_decref(params);
        return XGR_EXIT_USAGE;
      }
      json_object_set_new(params, "payload", p);
    }
    if ((rc = xgr_client_call(&c, "batch", "xgr.batchStart", params, &res))) return rc;
    if (!wait) {
      if (c.json) xgr_client_print_json(res);
      else printf("started %s: %s %lld session(s)\n", json_string_value(json_object_get(res, "id")), v[O_ACTION],
                  (long long)json_integer_value(json_object_get(res, "total")));
      json_decref(res);
      return XGR_EXIT_OK;
    }
    char idbuf[40];
    snprintf(idbuf, sizeof idbuf, "%s", json_string_value(json_object_get(res, "id")));
    json_decref(res);
    json_t *op;
    if ((rc = watch(&c, idbuf, &op))) return rc;
    if (c.json) xgr_client_print_json(op);
    else print_op(op);
    json_decref(op);
    return XGR_EXIT_OK;
  }
  if (is_status) {
    json_decref(params);
    json_t *op;
    if (watch_it) {
      if ((rc = watch(&c, id, &op))) return rc;
    } else {
      json_t *p = json_pack("{s:s}", "id", id);
      if (c.from) json_object_set_new(p, "from", json_string(c.from));
      if ((rc = xgr_client_call(&c, "batch", "xgr.batchGet", p, &op))) return rc;
    }
    if (c.json) xgr_client_print_json(op);
    else print_op(op);
    json_decref(op);
    return XGR_EXIT_OK;
  }
  if (is_cancel) {
    json_object_set_new(params, "id", json_string(id));
    if ((rc = xgr_client_call(&c, "batch", "xgr.batchCancel", params, &res))) return rc;
    if (c.json) xgr_client_print_json(res);
    else printf("%s: %s\n", id, json_is_true(json_object_get(res, "cancelled")) ? "cancelled" : "had ended already");
    json_decref(res);
    return XGR_EXIT_OK;
  }
  if (v[O_LIMIT]) json_object_set_new(params, "limit", json_string(v[O_LIMIT]));
  if ((rc = xgr_client_call(&c, "batch", "xgr.batchList", params, &res))) return rc;
  if (c.json) xgr_client_print_json(res);
  else {
    size_t i;
    json_t *op;
    json_array_foreach(json_object_get(res, "operations"), i, op) print_op(op);
  }
  json_decref(res);
  return XGR_EXIT_OK;
}
