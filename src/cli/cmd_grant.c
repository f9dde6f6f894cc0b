/* cmd_grant.c — `xgr grant` and `xgr grants` (issue 34; docs/SEMANTICS.md "Access: owners, grants,
 * operators"): give, change or revoke another address's rights on one session (xgr_manageGrants),
 * and list the grants the caller may see (xgr_listGrants), on xgrd. The node decides who may; this
 * file only turns options into the reference's parameters and prints the answers. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/opts.h"

#define GRANTS_PRINT_MAX 10000   /* grants `xgr grants` reads at most (100 a call, cursor after cursor) */

static void grant_usage(FILE *f) {
  fprintf(f,
          "usage: xgr grant SESSION --to ADDR --rights RIGHTS [--expires DURATION | --until UNIX] [--owner ADDR]\n"
          "                 [--dek HEX] [options]\n"
          "       xgr grant SESSION --to ADDR --revoke [--owner ADDR] [options]\n\n"
          "Give ADDR rights on session SESSION of the owner (xgr_manageGrants), replacing any grant it holds\n"
          "there, or take them away (--revoke). The signer must be the owner, an operator, or hold MANAGE on\n"
          "the session (then only rights it holds, until its own grant expires). Each change is in the\n"
          "session's audit trail.\n\n"
          "  --to ADDR        the grantee's address (0x + 40 hex)\n"
          "  --rights RIGHTS  read, write, manage, joined by commas (read,write), or the bitmask 1..7:\n"
          "                   READ reads the session, WRITE also wakes its processes, MANAGE also grants\n"
          "  --expires D      how long it works: a number and s, m, h or d (default 30d)\n"
          "  --until UNIX     when it stops working instead, in Unix seconds\n"
          "  --revoke         remove ADDR's grant on the session\n"
          "  --dek HEX        an encrypted data key stored with the grant as given (encDEK, 0x-hex)\n"
          "  --owner ADDR     the session's owner (default --from)\n"
          "%s", xgr_client_opts_help);
}

static void grants_usage(FILE *f) {
  fprintf(f,
          "usage: xgr grants [SESSION --owner ADDR] [--to ADDR] [--valid] [--limit N] [options]\n\n"
          "List grants (xgr_listGrants): of one session (all of them for its owner, an operator or a MANAGE\n"
          "holder; else the caller's own), or without SESSION the grants to or of the caller (every grant\n"
          "for an operator). One row each: session, owner, grantee, rights, expiry, where it came from.\n\n"
          "  --owner ADDR     the session's owner (with SESSION; default --from)\n"
          "  --to ADDR        only grants to this address\n"
          "  --valid          only grants that work now (not expired)\n"
          "  --limit N        print at most N grants (default 1000, at most %d)\n"
          "%s", GRANTS_PRINT_MAX, xgr_client_opts_help);
}

/* RIGHTS ("read,write", "7") into *out (1..7); false when it is neither. */
static bool parse_rights(const char *s, int *out) {
  if (isdigit((unsigned char)s[0])) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 1 || v > 7) return false;
    *out = (int)v;
    return true;
  }
  static const char *const names[] = {"read", "write", "manage"};
  int r = 0;
  const char *p = s;
  while (*p) {
    size_t len = strcspn(p, ",");
    int bit = 0;
    for (int i = 0; i < 3 && !bit; i++)
      if (len == strlen(names[i]) && !strncasecmp(p, names[i], len)) bit = 1 << i;
    if (!bit) return false;
    r |= bit;
    p += len;
    if (*p == ',') p++;
  }
  *out = r;
  return r != 0;
}

/* DURATION ("90s", "10m", "2h", "30d", or seconds) into *secs; false when malformed or past 100 years. */
static bool parse_duration(const char *s, long long *secs) {
  char *end;
  if (!isdigit((unsigned char)s[0])) return false;
  long long v = strtoll(s, &end, 10);
  long long unit = !*end ? 1 : !strcmp(end, "s") ? 1 : !strcmp(end, "m") ? 60 : !strcmp(end, "h") ? 3600 : !strcmp(end, "d") ? 86400 : 0;
  if (!unit || v <= 0 || v > 36500LL * 86400 / unit) return false;
  *secs = v * unit;
  return true;
}

/* The bitmask r as "read,write,manage" (the names of its bits, joined by commas) into buf[n]. */
static const char *rights_text(json_int_t r, char *buf, size_t n) {
  static const char *const names[] = {"read", "write", "manage"};
  size_t k = 0;
  buf[0] = '\0';
  for (int i = 0; i < 3; i++)
    if (r & (1 << i)) k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? "," : "", names[i]);
  return buf;
}

int xgr_cmd_grant(int argc, char **argv) {
  xgr_client c;
  xgr_client_init(&c);
  const char *owner = NULL, *to = NULL, *rights = NULL, *expires = NULL, *until = NULL, *dek = NULL;
  bool revoke = false;
  enum { O_OWNER, O_TO, O_RIGHTS, O_EXPIRES, O_UNTIL, O_DEK, O_REVOKE };
  static const struct option opts[] = {
    {"owner", required_argument, NULL, O_OWNER},     {"to", required_argument, NULL, O_TO},
    {"rights", required_argument, NULL, O_RIGHTS},   {"expires", required_argument, NULL, O_EXPIRES},
    {"until", required_argument, NULL, O_UNTIL},     {"dek", required_argument, NULL, O_DEK},
    {"revoke", no_argument, NULL, O_REVOKE},         XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  const char **dst[] = {&owner, &to, &rights, &expires, &until, &dek};
  int ch, orc;
  optind = 1;
  while ((ch = xgr_client_getopt(&c, argc, argv, opts, "xgr grant", grant_usage, &orc)) != -1) {
    if (ch == -2) return orc;
    if (ch == O_REVOKE) revoke = true;
    else *dst[ch] = optarg;
  }
  if (!owner) owner = c.from;
  const char *why = argc - optind != 1 ? "give one SESSION (its rootPid)"
                    : !owner           ? "give --owner (or --from, or --key)"
                    : !to              ? "give --to ADDR"
                    : revoke && (rights || expires || until || dek) ? "--revoke takes no --rights, --expires, --until or --dek"
                    : !revoke && !rights ? "give --rights (read, write, manage) or --revoke"
                    : expires && until ? "give --expires or --until, not both"
                                       : NULL;
  if (why) {
    fprintf(stderr, "xgr grant: %s\n\n", why);
    grant_usage(stderr);
    return XGR_EXIT_USAGE;
  }
  int r = 0;
  long long at = 0, secs = 30LL * 86400;
  if (!revoke && !parse_rights(rights, &r)) {
    fprintf(stderr, "xgr grant: --rights is '%s'; expected read, write, manage joined by commas, or 1..7\n", rights);
    return XGR_EXIT_USAGE;
  }
  if (expires && !parse_duration(expires, &secs)) {
    fprintf(stderr, "xgr grant: --expires is '%s'; expected a number and s, m, h or d (e.g. 30d)\n", expires);
    return XGR_EXIT_USAGE;
  }
  if (until) {
    char *end;
    at = strtoll(until, &end, 10);
    if (!isdigit((unsigned char)until[0]) || *end || at <= 0) {
      fprintf(stderr, "xgr grant: --until is '%s'; expected Unix seconds\n", until);
      return XGR_EXIT_USAGE;
    }
  } else {
    at = (long long)time(NULL) + secs;
  }
  json_t *entry = json_pack("{s:s, s:i, s:I}", "grantee", to, "rights", r, "expireAt", (json_int_t)(revoke ? (long long)time(NULL) + 60 : at));
  if (dek) json_object_set_new(entry, "encDEK", json_string(dek));
  json_t *params = json_pack("{s:s, s:s, s:[o]}", "owner", owner, "sessionId", argv[optind], "entries", entry);
  json_t *res;
  int rc = xgr_client_call(&c, "grant", "xgr_manageGrants", params, &res);
  if (rc) return rc;
  if (c.json) {
    xgr_client_print_json(res);
  } else if (revoke) {
    printf("revoked %s's grant on session %s (%lld removed)\n", to, argv[optind],
           (long long)json_integer_value(json_object_get(res, "revoked")));
  } else {
    char rb[32], tb[32];
    xgr_client_time(at, tb, sizeof tb);
    printf("granted %s %s on session %s until %s UTC\n", to, rights_text(r, rb, sizeof rb), argv[optind], tb);
  }
  json_decref(res);
  return XGR_EXIT_OK;
}

int xgr_cmd_grants(int argc, char **argv) {
  xgr_client c;
  xgr_client_init(&c);
  const char *owner = NULL, *to = NULL, *limit_s = NULL;
  bool valid = false;
  enum { O_OWNER, O_TO, O_LIMIT, O_VALID };
  static const struct option opts[] = {
    {"owner", required_argument, NULL, O_OWNER}, {"to", required_argument, NULL, O_TO},
    {"limit", required_argument, NULL, O_LIMIT}, {"valid", no_argument, NULL, O_VALID},
    XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  const char **dst[] = {&owner, &to, &limit_s};
  int ch, orc;
  optind = 1;
  while ((ch = xgr_client_getopt(&c, argc, argv, opts, "xgr grants", grants_usage, &orc)) != -1) {
    if (ch == -2) return orc;
    if (ch == O_VALID) valid = true;
    else *dst[ch] = optarg;
  }
  long limit = 1000;
  if (limit_s) {
    char *end;
    limit = strtol(limit_s, &end, 10);
    if (!isdigit((unsigned char)limit_s[0]) || *end || limit < 1 || limit > GRANTS_PRINT_MAX) {
      fprintf(stderr, "xgr grants: --limit is '%s'; expected 1 to %d\n", limit_s, GRANTS_PRINT_MAX);
      return XGR_EXIT_USAGE;
    }
  }
  if (argc - optind > 1 || (argc - optind == 1 && !owner && !c.from)) {
    fprintf(stderr, "xgr grants: %s\n\n", argc - optind > 1 ? "give at most one SESSION" : "give --owner with SESSION");
    grants_usage(stderr);
    return XGR_EXIT_USAGE;
  }
  json_t *all = json_array();
  json_int_t cursor = 0;
  do {
    json_t *params = json_pack("{s:I}", "limit", (json_int_t)(limit - (long)json_array_size(all) < 100 ? limit - (long)json_array_size(all) : 100));
    if (argc - optind == 1) {
      json_object_set_new(params, "owner", json_string(owner ? owner : c.from));
      json_object_set_new(params, "sessionId", json_string(argv[optind]));
    }
    if (to) json_object_set_new(params, "grantee", json_string(to));
    if (valid) json_object_set_new(params, "validAt", json_integer((json_int_t)time(NULL)));
    if (cursor) json_object_set_new(params, "cursor", json_integer(cursor));
    json_t *res;
    int rc = xgr_client_call(&c, "grants", "xgr_listGrants", params, &res);
    if (rc) {
      json_decref(all);
      return rc;
    }
    json_array_extend(all, json_object_get(res, "items"));
    cursor = json_integer_value(json_object_get(res, "nextCursor"));
    json_decref(res);
  } while (cursor && (long)json_array_size(all) < limit);
  if (c.json) {
    json_t *out = json_pack("{s:o}", "items", all);
    xgr_client_print_json(out);
    json_decref(out);
    return XGR_EXIT_OK;
  }
  if (!json_array_size(all)) {
    printf("no grants\n");
  } else {
    printf("%-8s  %-42s  %-42s  %-17s  %-19s  %s\n", "session", "owner", "grantee", "rights", "expires (UTC)", "granted by");
    size_t i;
    json_t *g;
    long long now = (long long)time(NULL);
    json_array_foreach(all, i, g) {
      char rb[32], tb[32];
      json_int_t exp = json_integer_value(json_object_get(g, "expiresAt"));
      xgr_client_time(exp, tb, sizeof tb);
      const char *step = json_string_value(json_object_get(g, "step")), *by = json_string_value(json_object_get(g, "createdBy"));
      char src[96];
      if (step && *step) snprintf(src, sizeof src, "step %s", step);
      else snprintf(src, sizeof src, "%s", by && *by ? by : "-");
      printf("%-8s  %-42s  %-42s  %-17s  %-19s  %s%s\n", json_string_value(json_object_get(g, "sessionId")),
             json_string_value(json_object_get(g, "owner")), json_string_value(json_object_get(g, "grantee")),
             rights_text(json_integer_value(json_object_get(g, "rights")), rb, sizeof rb), tb, src,
             exp <= now ? " (expired)" : "");
    }
  }
  json_decref(all);
  return XGR_EXIT_OK;
}
