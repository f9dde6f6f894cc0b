/* server.h — the loopback HTTP server of the rule tests (see server.c for its routes). */
#ifndef XGR_TEST_RULE_SERVER_H
#define XGR_TEST_RULE_SERVER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>

typedef struct test_server {
  void *daemon;               /* struct MHD_Daemon */
  uint16_t port;              /* ephemeral port chosen by the kernel */
  char base[64];              /* "http://127.0.0.1:PORT" */
  /* the prices of the three stand-in price sources, each served in two shapes: the project's own
   * (examples/price_api.py: /alpha, /beta, /gamma) and the public examples' (Coinbase, Bitstamp,
   * CoinGecko); negative: that source's routes answer 503 */
  double alpha, beta, gamma;
} test_server;

/* Start on 127.0.0.1 with an ephemeral port. Returns 0. */
int test_server_start(test_server *s);
void test_server_stop(test_server *s);

#endif
