/* opts.h — the one option parser of the command line front ends (every `xgr` subcommand and
 * xgrd): getopt_long over the command's table of long options, with one way of reporting a bad
 * option. A mistyped option is named together with the nearest option of the table
 * (`xgr run: unknown option --strat; did you mean --start?`) instead of the whole usage text, so
 * that a typo never passes unnoticed and the fix is in the message. */
#ifndef XGR_CLI_OPTS_H
#define XGR_CLI_OPTS_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "xgr/chain.h"
#include "xgr/rule.h"
#include "xgr/value.h"

/* getopt_long(argc, argv, shortopts, longopts) with getopt's own messages off. Returns what
 * getopt_long returns (the option's val, or -1 after the last option; the arguments that are not
 * options are then argv[optind..argc), in their order). A bad option (unknown, ambiguous, without
 * its value, or with a value it does not take) is reported on stderr as `prog: ...`, naming the
 * nearest option of longopts when one is close, and '?' is returned: the caller then ends with
 * exit code 2 (XGR_EXIT_USAGE) without printing the usage. prog is the name shown, e.g. "xgr run".
 * shortopts must not start with ':' (the wrapper adds it). Set optind before the first call to
 * start elsewhere than argv[1]. */
int xgr_cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts, const char *prog);
/* The same, with the index in longopts of a long option that was found in *longindex (as
 * getopt_long's longindex; untouched otherwise). */
int xgr_cli_getopt_index(int argc, char **argv, const char *shortopts, const struct option *longopts, const char *prog,
                         int *longindex);

/* The long option of longopts nearest to name (without dashes and without "=VALUE"), when it is a
 * likely typo; else NULL. Borrowed from longopts. */
const char *xgr_cli_nearest_option(const char *name, const struct option *longopts);

/* The nearest of known[0..n) to word (a subcommand, a kind, a config key) when it is a likely
 * typo; else NULL (util/suggest.h's rule). */
const char *xgr_cli_nearest_word(const char *word, const char *const *known, size_t n);

/* One --api-map FROM=TO value (xgr run, xgr step, xgrd): splits arg in place at its first '='
 * (so FROM and TO borrow arg's storage, which must outlive the map) and appends {FROM, TO} to
 * map[0..*n), which holds at most max entries. Returns 0, or prints `prog: --api-map "ARG":
 * expected FROM=TO with both non-empty (at most MAX)` and returns 2 (XGR_EXIT_USAGE) when arg has
 * no '=', an empty side, or the map is full. */
int xgr_cli_api_map_arg(const char *prog, char *arg, xgr_api_map_entry *map, size_t *n, size_t max);
/* One --chain value ([NAME=]URL; xgr run, xgr step, xgrd): added to *chain, which is made on the
 * first call (*chain NULL; the caller owns and frees it). Returns 0, or prints `prog: REASON`
 * (xgr_chain_add's message) and returns 2 (XGR_EXIT_USAGE). */
int xgr_cli_chain_arg(const char *prog, const char *arg, xgr_chain **chain);
/* One --allow-outbound value (xgr run, xgr step, xgrd; xgr/outbound.h): a comma-separated list of
 * CIDRs, addresses or class words (loopback, private, ..., any), added to *p, which is made on the
 * first call (*p NULL; the caller owns and frees it). Returns 0, or prints `prog: --allow-outbound
 * "ENTRY": expected ...` and returns 2 (XGR_EXIT_USAGE). */
int xgr_cli_outbound_arg(const char *prog, const char *arg, xgr_outbound_policy **p);
#endif

/* ---- option values that are JSON ------------------------------------------------------------- */

/* The JSON value option `flag` gives: its text, or "@FILE" for the contents of FILE (at most
 * 16 MiB), parsed with xgr_value_from_json_text(flags); with object, it must be a JSON object.
 * Returns 0 with *out (a reference the caller releases). Otherwise the reason is printed as
 * `prog: flag[ @FILE]: invalid JSON at line L, column C: ...` or `...: expected a JSON object,
 * got an array` and the exit code 2 (XGR_EXIT_USAGE) is returned, *out null. */
int xgr_cli_value_arg(const char *prog, const char *flag, const char *arg, unsigned flags, bool object, xgr_value *out);
/* The same for a JSON object as jansson (xgr_json_parse_exact: integers kept exact), *out owned. */
int xgr_cli_object_arg(const char *prog, const char *flag, const char *arg, json_t **out);
