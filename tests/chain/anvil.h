/* anvil.h — a real local Ethereum node for the chain tests: anvil (from contracts/node_modules,
 * npm @foundry-rs/anvil, or $XGR_ANVIL) started on 127.0.0.1 with a kernel-chosen port, plus
 * helpers that deploy the committed contracts (contracts/build/NAME.json) and send transactions from
 * anvil's unlocked dev accounts with eth_sendTransaction (no signing needed in the harness). */
#ifndef XGR_TEST_ANVIL_H
#define XGR_TEST_ANVIL_H

#include <stdbool.h>
#include <sys/types.h>

#include <jansson.h>

#include "xgr/chain.h"

struct MHD_Daemon;

typedef struct anvil {
  pid_t pid;
  char url[64];
  char log[64];               /* its stdout file */
  xgr_chain *chain;           /* one default backend on url */
  char accounts[10][43];      /* dev accounts, lower-case */
} anvil;

/* Path of the anvil binary, or NULL when it is not installed (tests then skip with 77). */
const char *anvil_binary(void);
/* The start and end of a chain test's main: anvil_test_begin prints the skip line and returns
 * false when anvil is not installed (the test then exits 77), else initialises libcurl and returns
 * true; anvil_test_end cleans libcurl up and returns rc (the cmocka group's result). */
bool anvil_test_begin(void);
int anvil_test_end(int rc);
/* Start anvil (extra: more arguments, NULL-terminated, may be NULL). 0 on success. */
int anvil_start(anvil *a, const char *const *extra);
void anvil_stop(anvil *a);
/* Deploy contracts/build/<name>.json with constructor `ctor` ("(string,string,uint256)" or "()")
 * and JSON-list arguments; writes the address ("0x…", 43 bytes). 0 on success. */
int anvil_deploy(anvil *a, const char *name, const char *ctor, const char *args_json, char addr[43]);
/* Send a transaction calling `sig` with JSON-list arguments from dev account `from`;
 * 0 when it was mined with status 1, 1 when mined reverted, -1 on error. */
int anvil_send(anvil *a, int from, const char *to, const char *sig, const char *args_json);

/* Write the private key of dev account 0 or 1 (anvil's well-known test keys) as a key file at path
 * (mode 0600), for `xgr publish --key` and xgrd's --engine-key. 0 on success. */
int anvil_key_file(int account, const char *path);
/* `$XGR publish BUNDLE --chain <a's url> --key KEYFILE --json`: its JSON answer (registry, ostcId,
 * ostcHash, ...; caller decrefs), or NULL when it failed. */
json_t *anvil_publish(const anvil *a, const char *bundle, const char *keyfile);
/* Write to path the ApiPriceFeed bundle of the public example files (shared_dir/specs/xgr-public/
 * examples/ApiPriceFeed: the CoinbaseSpot loop and its step rule; shared_dir is ../shared, see
 * tests/shared_dir.h) as one bundle document. 0, or -1 when the example files cannot be read or
 * path cannot be written. */
int anvil_pricefeed_bundle(const char *shared_dir, const char *path);
/* ERC-20 balanceOf(holder) of token on a's node, as JSON text (`["250"]`), or the error as text
 * ("error: ..."). Caller frees. */
char *anvil_balance(const anvil *a, const char *token, const char *holder);

/* The payment test bundle of the execution tests: deploy TestToken (dev account 0, the engine
 * key, holds the supply of 1,000,000; its address into token), write the bundle of orchestration
 * "Pay" (one step whose rule pays [Amount] of the token to [To] by an execution) to dir/pay.json
 * and publish it with keyfile: the publish answer (caller decrefs), or NULL on a failure. */
json_t *anvil_pay_bundle(anvil *a, const char *dir, const char *keyfile, char token[43]);
/* How many Transfer logs of token from dev account 0 to `to` the chain holds; -1 on an error. */
long anvil_transfers(const anvil *a, const char *token, const char *to);

/* A loopback HTTP proxy in front of `target` that holds every request delay_ms before forwarding
 * it: a node across a network, so that tests and benchmarks can show reads overlapping. One
 * thread per connection (libmicrohttpd). Set target and delay_ms, then start; url is its address. */
typedef struct latency_proxy {
  struct MHD_Daemon *d;
  const char *target;
  long delay_ms;
  char url[64];
} latency_proxy;

int latency_proxy_start(latency_proxy *px);
void latency_proxy_stop(latency_proxy *px);

#endif
