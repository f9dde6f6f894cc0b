/* cmd_key.c — `xgr key new FILE`: make a secp256k1 private key from getrandom(), write it to a new
 * file only its owner may read (mode 0600, never replacing a file) and print its address;
 * `xgr key address FILE` prints the address of an existing key file. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "xgr/secp.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: xgr key new FILE       make a private key in FILE (mode 0600) and print its address\n"
          "       xgr key address FILE   print the address of the key in FILE\n\n"
          "FILE holds 0x + 64 hex digits. Client commands sign with it given --key FILE or $XGR_KEY_FILE;\n"
          "a key file readable by group or others is refused.\n");
}

int xgr_cmd_key(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
  int ch;
  optind = 1;
  while ((ch = xgr_cli_getopt(argc, argv, "h", opts, "xgr key")) != -1) {
    if (ch != 'h') return XGR_EXIT_USAGE;   /* reported by xgr_cli_getopt */
    usage(stdout);
    return XGR_EXIT_OK;
  }
  argv += optind - 1;   /* argv[1] the action, argv[2] the file */
  argc -= optind - 1;
  static const char *const actions[] = {"new", "address"};
  if (argc >= 2 && strcmp(argv[1], "new") && strcmp(argv[1], "address")) {
    const char *near = xgr_cli_nearest_word(argv[1], actions, 2);
    fprintf(stderr, "xgr key: unknown action '%s'%s%s%s; expected new or address\n", argv[1], near ? "; did you mean '" : "",
            near ? near : "", near ? "'?" : "");
    return XGR_EXIT_USAGE;
  }
  if (argc != 3) {
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  xgr_secp *s = xgr_secp_new();
  if (!s) {
    fprintf(stderr, "xgr key: cannot create a secp256k1 context (no randomness?)\n");
    return XGR_EXIT_HARD;
  }
  uint8_t key[32], addr[20];
  xgr_error e;
  int rc;
  if (!strcmp(argv[1], "new"))
    rc = xgr_secp_key_generate(s, key, &e) || xgr_secp_key_save(argv[2], key, &e) ? -1 : 0;
  else
    rc = xgr_secp_key_load(s, argv[2], key, &e);
  if (!rc) rc = xgr_secp_address(s, key, addr, &e);
  explicit_bzero(key, sizeof key);
  xgr_secp_free(s);
  if (rc) {
    fprintf(stderr, "xgr key: %s\n", e.message);
    return XGR_EXIT_USAGE;
  }
  char hex[43];
  xgr_addr_hex_checksum(addr, hex);
  puts(hex);
  return XGR_EXIT_OK;
}
