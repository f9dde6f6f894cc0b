/* bench_permits.c — permits on one core, and request bodies for the permit-verified enqueue run.
 *   bench_permits verify [SECONDS]   verifications per second of each permit kind on one core
 *                                    (CPU time): JSON text -> parse -> all checks -> keccak ->
 *                                    ecrecover; the same from parsed JSON (what xgrd adds to a
 *                                    request, whose body it parses once); ecrecover alone, the
 *                                    floor; signing per second.
 *   bench_permits bodies N KEYFILE CHAIN REGISTRY STEP OSTCHASH FIRSTROOT [unsigned]
 *                                    N xgr.enqueue request bodies, one per line, each with a
 *                                    SessionPermit for rootPid FIRSTROOT+i (bench/permits/run.sh
 *                                    feeds them to wrk); `unsigned`: the same requests with an
 *                                    `owner` instead of a permit (the --auth none baseline). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xgr/permit.h"
#include "xgr/secp.h"

/* This thread's CPU time: the rates below are per core of CPU actually used, which a machine
 * shared with other jobs distorts far less than wall-clock time. */
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int verify_bench(double secs) {
  xgr_secp *s = xgr_secp_new();
  uint8_t key[32], h[32], vc[20] = {0};
  memset(key, 0x42, 32);
  memset(h, 0x17, 32);
  vc[19] = 0x29;
  vc[18] = 0x07;
  const xgr_permit_fields kinds[] = {
      {.kind = XGR_PERMIT_SESSION, .chain_id = 1887, .ostc_id = "orders", .ostc_hash = h, .session_id = 12,
       .max_total_gas = 1000000, .expiry = 4102444800},
      {.kind = XGR_PERMIT_CONTROL, .chain_id = 1887, .verifying_contract = vc, .session_id = 12, .action = "wake",
       .step_id = "Approve", .expiry = 4102444800},
      {.kind = XGR_PERMIT_XDALA, .chain_id = 1887, .expiry = 4102444800},
  };
  xgr_permit_hashes hs;   /* computed once, as xgrd does */
  xgr_permit_hashes_init(&hs, 1887);
  xgr_permit_policy pol = {.chain_id = 1887, .now = 1800000000, .accept = 15, .hashes = &hs};
  memcpy(pol.control_contract, vc, 20);
  xgr_error e;
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
    json_t *p;
    if (xgr_permit_sign(s, key, &kinds[k], &p, &e)) return fprintf(stderr, "sign: %s\n", e.message), 1;
    char *text = json_dumps(p, JSON_COMPACT);
    size_t len = strlen(text);
    long n = 0;
    double t0 = now(), t;
    do {
      for (int i = 0; i < 256; i++) {
        xgr_permit out;
        if (xgr_permit_verify_text(s, text, len, &pol, &out, &e)) return fprintf(stderr, "verify: %s\n", e.message), 1;
      }
      n += 256;
    } while ((t = now() - t0) < secs);
    printf("permits: verify %-15s %8.0f /s on one core (%.1f us CPU each, %zu-byte JSON text)\n",
           xgr_permit_kind_name(kinds[k].kind), (double)n / t, t / (double)n * 1e6, len);
    /* xgrd parses the request body once; the permit inside is verified from that tree */
    n = 0;
    t0 = now();
    do {
      for (int i = 0; i < 256; i++) {
        xgr_permit out;
        if (xgr_permit_verify(s, p, &pol, "permit", &out, &e)) return fprintf(stderr, "verify: %s\n", e.message), 1;
      }
      n += 256;
    } while ((t = now() - t0) < secs / 2);
    printf("permits: verify %-15s %8.0f /s on one core (%.1f us CPU each) from parsed JSON, as in xgrd\n",
           xgr_permit_kind_name(kinds[k].kind), (double)n / t, t / (double)n * 1e6);
    if (k == 0) {   /* the floor: libsecp256k1's public-key recovery and keccak of the key, nothing else */
      const char *sig = json_string_value(json_object_get(p, "signature"));
      uint8_t s65[65], addr[20], digest[32];
      xgr_permit out;
      xgr_permit_verify(s, p, &pol, "permit", &out, &e);
      memcpy(digest, out.digest, 32);
      xgr_hex_decode(sig, s65, 65);
      n = 0;
      t0 = now();
      do {
        for (int i = 0; i < 256; i++)
          if (xgr_secp_recover(s, digest, s65, addr, &e)) return fprintf(stderr, "recover: %s\n", e.message), 1;
        n += 256;
      } while ((t = now() - t0) < secs / 2);
      printf("permits: ecrecover alone          %8.0f /s on one core (%.1f us CPU each)\n", (double)n / t,
             t / (double)n * 1e6);
    }
    free(text);
    json_decref(p);
  }
  long n = 0;
  double t0 = now(), t;
  do {
    for (int i = 0; i < 64; i++) {
      json_t *p;
      xgr_permit_sign(s, key, &kinds[0], &p, &e);
      json_decref(p);
    }
    n += 64;
  } while ((t = now() - t0) < secs);
  printf("permits: sign   SessionPermit   %8.0f /s on one core\n", (double)n / t);
  xgr_secp_free(s);
  return 0;
}

static int bodies(int argc, char **argv) {
  if (argc != 9 && !(argc == 10 && !strcmp(argv[9], "unsigned")))
    return fprintf(stderr, "usage: bench_permits bodies N KEYFILE CHAIN REGISTRY STEP OSTCHASH FIRSTROOT [unsigned]\n"), 2;
  bool plain = argc == 10;
  long n = atol(argv[2]);
  xgr_secp *s = xgr_secp_new();
  uint8_t key[32], h[32];
  xgr_error e;
  if (xgr_secp_key_load(s, argv[3], key, &e)) return fprintf(stderr, "%s\n", e.message), 2;
  if (xgr_hex_decode(argv[7], h, 32)) return fprintf(stderr, "bad OSTCHASH\n"), 2;
  uint64_t chain = strtoull(argv[4], NULL, 0), first = strtoull(argv[8], NULL, 10);
  uint8_t addr[20];
  char owner[43];
  if (xgr_secp_address(s, key, addr, &e)) return fprintf(stderr, "%s\n", e.message), 2;
  xgr_addr_hex(addr, owner);
  for (long i = 0; i < n; i++) {
    if (plain) {
      printf("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"xgr.enqueue\",\"params\":{\"rootPid\":%llu,\"xrc729\":\"%s\","
             "\"init\":{\"stepId\":\"%s\",\"payload\":{\"x\":%ld}},\"owner\":\"%s\"}}\n",
             i, (unsigned long long)(first + (uint64_t)i), argv[5], argv[6], i, owner);
      continue;
    }
    xgr_permit_fields f = {.kind = XGR_PERMIT_SESSION, .chain_id = chain, .ostc_id = "", .ostc_hash = h,
                           .session_id = first + (uint64_t)i, .max_total_gas = 1000000,
                           .expiry = (uint64_t)time(NULL) + 3600};
    json_t *p;
    if (xgr_permit_sign(s, key, &f, &p, &e)) return fprintf(stderr, "%s\n", e.message), 1;
    json_t *rq = json_pack("{s:s, s:I, s:s, s:{s:I, s:s, s:{s:s, s:{s:I}}, s:o}}", "jsonrpc", "2.0", "id", (json_int_t)i,
                           "method", "xgr.enqueue", "params", "rootPid", (json_int_t)(first + (uint64_t)i), "xrc729",
                           argv[5], "init", "stepId", argv[6], "payload", "x", (json_int_t)i, "permit", p);
    char *t = json_dumps(rq, JSON_COMPACT);
    puts(t);
    free(t);
    json_decref(rq);
  }
  xgr_secp_free(s);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "verify")) return verify_bench(argc > 2 ? atof(argv[2]) : 1.0);
  if (argc >= 2 && !strcmp(argv[1], "bodies")) return bodies(argc, argv);
  fprintf(stderr, "usage: bench_permits verify [SECONDS] | bodies N KEYFILE CHAIN REGISTRY STEP OSTCHASH FIRSTROOT\n");
  return 2;
}
