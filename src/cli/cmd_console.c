/* cmd_console.c — `xgr console --key FILE [--url URL] [--open]`: sign in to xgrd's console from a
 * machine without a browser wallet. Fetches a sign-in nonce from xgrd (POST /ui/auth/nonce), signs
 * the Sign-In with Ethereum (EIP-4361) message with the key file (personal_sign, xgr/siwe.h) and
 * prints a one-time sign-in link: URL/ui/#signin&m=MESSAGE&s=SIGNATURE. The message and signature
 * travel in the URL's fragment, which a browser never sends to a server, so they reach no request
 * log; the page POSTs them to /ui/auth/signin, which uses the nonce up (the link works once, within
 * the nonce's five minutes) and answers with the console's session cookie.
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "xgr/alloc.h"
#include "xgr/secp.h"
#include "xgr/siwe.h"

extern char **environ;

static void usage(FILE *f) {
  fprintf(f,
          "usage: xgr console --key FILE [--url URL] [--open] [--json]\n\n"
          "Sign in to xgrd's console (http://HOST:PORT/ui/) with a key file instead of a browser wallet:\n"
          "fetch a sign-in nonce from xgrd, sign the Sign-In with Ethereum (EIP-4361) message with FILE's\n"
          "key, and print a one-time sign-in link. Open it in a browser (on any machine that reaches xgrd at\n"
          "the same address) within 5 minutes: the page exchanges it for a session cookie once; a second\n"
          "use is refused. The message and signature are in the link's #fragment, which browsers do not\n"
          "send to servers, so they never appear in xgrd's request log.\n\n"
          "  --open          also open the link with xdg-open (or $BROWSER)\n"
          "  --json          print {\"link\",\"address\",\"message\",\"signature\"} instead\n"
          "%s\n"
          "Not needed with `xgrd --auth none` (the console opens without signing in).\n",
          xgr_client_opts_help);
}

/* Percent-encode s (everything but unreserved characters) into a new string (free it). */
static char *pct(const char *s) {
  size_t n = strlen(s);
  char *o = xgr_alloc_bytes(3 * n + 1), *q = o;
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' ||
        ch == '_' || ch == '~')
      *q++ = (char)ch;
    else
      q += sprintf(q, "%%%02X", ch);
  }
  *q = 0;
  return o;
}

static int open_link(const char *link) {
  const char *b = getenv("BROWSER");
  char *argv[] = {(char *)(b && *b ? b : "xdg-open"), (char *)link, NULL};
  pid_t pid;
  if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ)) {
    fprintf(stderr, "xgr console: cannot run %s; open the link by hand\n", argv[0]);
    return -1;
  }
  int st;
  waitpid(pid, &st, 0);
  return 0;
}

int xgr_cmd_console(int argc, char **argv) {
  static const struct option opts[] = {{"open", no_argument, NULL, 'o'}, XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  xgr_client c;
  xgr_client_init(&c);
  bool open = false;
  int ch, rc;
  optind = 1;
  while ((ch = xgr_client_getopt(&c, argc, argv, opts, "xgr console", usage, &rc)) != -1) {
    if (ch == -2) return rc;
    if (ch == 'o') open = true;
  }
  if (optind < argc) {
    fprintf(stderr, "xgr console: unexpected '%s'\n\n", argv[optind]);
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  if (c.key_failed) return XGR_EXIT_USAGE;
  if (!c.has_key) {
    fprintf(stderr, "xgr console: --key FILE is required (the key that signs in; xgr key new FILE makes one)\n\n");
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  json_t *req = json_object(), *n = NULL;
  rc = xgr_client_post(&c, "console", "/ui/auth/nonce", req, &n);
  json_decref(req);
  if (rc) return rc;
  xgr_siwe m = {0};
  const char *dom = json_string_value(json_object_get(n, "domain")), *uri = json_string_value(json_object_get(n, "uri")),
             *nonce = json_string_value(json_object_get(n, "nonce")),
             *st = json_string_value(json_object_get(n, "statement"));
  const char *ia = json_string_value(json_object_get(n, "issuedAt")),
             *ex = json_string_value(json_object_get(n, "expirationTime"));
  if (!dom || !uri || !nonce || !ia || !ex || !json_is_integer(json_object_get(n, "chainId")) ||
      xgr_siwe_parse_time(ia, &m.issued_at) || xgr_siwe_parse_time(ex, &m.expiration)) {
    fprintf(stderr, "xgr console: xgrd's nonce answer lacks domain, uri, nonce, chainId, issuedAt or expirationTime\n");
    json_decref(n);
    return XGR_EXIT_HARD;
  }
  snprintf(m.domain, sizeof m.domain, "%s", dom);
  snprintf(m.uri, sizeof m.uri, "%s", uri);
  snprintf(m.nonce, sizeof m.nonce, "%s", nonce);
  snprintf(m.statement, sizeof m.statement, "%s", st ? st : "");
  snprintf(m.version, sizeof m.version, "1");
  m.chain_id = (uint64_t)json_integer_value(json_object_get(n, "chainId"));
  char until[40];
  snprintf(until, sizeof until, "%s", ex);
  json_decref(n);
  xgr_secp *secp = xgr_secp_new();
  uint8_t a[20];
  xgr_error e;
  xgr_error_clear(&e);
  char sig[133];
  if (!secp || xgr_secp_address(secp, c.key, a, &e)) {
    fprintf(stderr, "xgr console: %s\n", secp ? e.message : "cannot create a secp256k1 context");
    xgr_secp_free(secp);
    return XGR_EXIT_HARD;
  }
  xgr_addr_hex_checksum(a, m.address);
  char *msg = xgr_siwe_build(&m);
  rc = xgr_siwe_sign(secp, c.key, msg, sig, &e);
  xgr_secp_free(secp);
  if (rc) {
    fprintf(stderr, "xgr console: cannot sign: %s\n", e.message);
    free(msg);
    return XGR_EXIT_HARD;
  }
  char origin[1024];
  xgr_client_origin(&c, origin, sizeof origin);
  char *pm = pct(msg);
  size_t ln = strlen(origin) + strlen(pm) + 200;
  char *link = xgr_alloc_bytes(ln);
  if (!pm || !link) {
    free(pm), free(link), free(msg);
    return XGR_EXIT_HARD;
  }
  snprintf(link, ln, "%s/ui/#signin&m=%s&s=%s", origin, pm, sig);
  free(pm);
  if (c.json) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "link", link, "address", m.address, "message", msg, "signature", sig);
    xgr_client_print_json(o);
    json_decref(o);
  } else {
    printf("%s\n", link);
    fprintf(stderr, "xgr console: a one-time sign-in link for %s (works once, until %s)\n", m.address, until);
  }
  free(msg);
  if (open && open_link(link)) {
    free(link);
    return XGR_EXIT_FAIL;
  }
  free(link);
  return XGR_EXIT_OK;
}
