/* outbound.h — library-private side of the outbound address policy (xgr/outbound.h): the one
 * place where an outbound curl handle of xgr gets its connection check. Every curl handle the
 * library opens towards an address it did not choose itself goes through xgr__outbound_setopt:
 * the API calls of rules (src/rule/http.c, in the engine's multi loop and in the synchronous
 * drivers) and the chain backend's requests (src/chain/rpc.c), whose endpoints are the
 * operator's configuration and are therefore marked operator_endpoint (every address allowed).
 */
#ifndef XGR_UTIL_OUTBOUND_H
#define XGR_UTIL_OUTBOUND_H

#include <netinet/in.h>
#include <stdbool.h>
#include <curl/curl.h>

#include "xgr/outbound.h"

/* The check state of one transfer: set the first two fields, xgr__outbound_setopt clears the rest.
 * Must outlive the transfer (it is the open-socket callback's context). */
typedef struct xgr__outbound_conn {
  const xgr_outbound_policy *policy;   /* NULL: the default policy */
  bool operator_endpoint;              /* an operator-configured endpoint (--chain): not checked,
                                          and its connection is never kept for reuse, so no API
                                          call can ride on it */
  bool refused;                        /* a resolved address was refused (the first one is kept) */
  const char *cls;                     /* its class (static) */
  char addr[INET6_ADDRSTRLEN];         /* its text */
} xgr__outbound_conn;

/* Install the check on h (after curl_easy_reset or on a new handle): connections are opened by a
 * callback that refuses addresses the policy refuses (the transfer then fails with
 * CURLE_COULDNT_CONNECT once every resolved address was refused), proxies from the environment
 * are not used, sockets are close-on-exec. */
void xgr__outbound_setopt(CURL *h, xgr__outbound_conn *c);

/* The refusal as a message naming url's host, the address, its class and the flag that allows it:
 * `outbound address 127.0.0.1 (loopback) of host "localhost" is not allowed by the outbound
 * policy; --allow-outbound 127.0.0.1/32 permits it`. Only when c->refused. */
void xgr__outbound_refusal(const xgr__outbound_conn *c, const char *url, char *buf, size_t n);

#endif
