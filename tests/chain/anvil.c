/* anvil.c — see anvil.h. */
#include "anvil.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "xgr/abi.h"
#include "xgr/keccak.h"
#include "xgr/value.h"

const char *anvil_binary(void) {
  static char path[1024];
  const char *env = getenv("XGR_ANVIL");
  if (env && access(env, X_OK) == 0) return env;
  const char *src = getenv("XGR_SRC");
  if (!src) return NULL;
  snprintf(path, sizeof path, "%s/contracts/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil", src);
  return access(path, X_OK) == 0 ? path : NULL;
}

bool anvil_test_begin(void) {
  if (!anvil_binary()) {
    printf("anvil not installed (scripts/deps.sh runs npm ci in contracts/): skipped\n");
    return false;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  return true;
}

int anvil_test_end(int rc) {
  curl_global_cleanup();
  return rc;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int anvil_start(anvil *a, const char *const *extra) {
  memset(a, 0, sizeof *a);
  const char *bin = anvil_binary();
  if (!bin) return -1;
  snprintf(a->log, sizeof a->log, "/tmp/xgr-anvil-XXXXXX");
  int fd = mkstemp(a->log);
  if (fd < 0) return -1;
  const char *argv[32] = {bin, "--host", "127.0.0.1", "--port", "0", "--accounts", "10"};
  size_t n = 7;
  for (size_t i = 0; extra && extra[i] && n < 30; i++) argv[n++] = extra[i];
  argv[n] = NULL;
  a->pid = fork();
  if (a->pid < 0) return -1;
  if (a->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);   /* never outlive the test or benchmark that started it */
    dup2(fd, 1);
    dup2(fd, 2);
    execv(bin, (char *const *)argv);
    _exit(127);
  }
  close(fd);
  for (int i = 0; i < 400; i++) {  /* up to 20 s on a loaded machine */
    FILE *f = fopen(a->log, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
      const char *p = strstr(line, "Listening on ");
      if (p) {
        char hostport[48];
        if (sscanf(p + 13, "%47s", hostport) == 1) snprintf(a->url, sizeof a->url, "http://%s", hostport);
      }
    }
    if (f) fclose(f);
    if (a->url[0]) break;
    if (waitpid(a->pid, NULL, WNOHANG) == a->pid) {
      a->pid = 0;
      return -1;
    }
    sleep_ms(50);
  }
  if (!a->url[0]) {
    anvil_stop(a);
    return -1;
  }
  a->chain = xgr_chain_new();
  xgr_error e;
  if (xgr_chain_add(a->chain, a->url, &e)) return -1;
  json_t *res;
  if (xgr_chain_rpc(a->chain, NULL, "eth_accounts", NULL, &res, NULL, &e)) return -1;
  for (size_t i = 0; i < json_array_size(res) && i < 10; i++) {
    snprintf(a->accounts[i], sizeof a->accounts[i], "%s", json_string_value(json_array_get(res, i)));
    for (char *p = a->accounts[i]; *p; p++)
      if (*p >= 'A' && *p <= 'F') *p = (char)(*p - 'A' + 'a');
  }
  json_decref(res);
  return 0;
}

void anvil_stop(anvil *a) {
  if (a->pid > 0) {
    kill(a->pid, SIGTERM);
    waitpid(a->pid, NULL, 0);
  }
  a->pid = 0;
  xgr_chain_free(a->chain);
  a->chain = NULL;
  if (a->log[0]) unlink(a->log);
}

/* Receipt of tx (anvil mines at once; poll briefly anyway). */
static json_t *receipt(anvil *a, const char *tx) {
  for (int i = 0; i < 200; i++) {
    json_t *res;
    xgr_error e;
    if (xgr_chain_rpc(a->chain, NULL, "eth_getTransactionReceipt", json_pack("[s]", tx), &res, NULL, &e)) return NULL;
    if (json_is_object(res)) return res;
    json_decref(res);
    sleep_ms(25);
  }
  return NULL;
}

static int send_tx(anvil *a, json_t *tx, json_t **rcpt) {
  json_t *res;
  xgr_error e;
  if (xgr_chain_rpc(a->chain, NULL, "eth_sendTransaction", json_pack("[o]", tx), &res, NULL, &e)) {
    fprintf(stderr, "anvil: eth_sendTransaction: %s\n", e.message);
    return -1;
  }
  *rcpt = receipt(a, json_string_value(res));
  json_decref(res);
  return *rcpt ? 0 : -1;
}

static int encode_args(const char *types, const char *args_json, uint8_t **out, size_t *n) {
  xgr_abi_type *t = NULL;
  xgr_error e;
  if (xgr_abi_type_parse(types, strlen(types), &t, &e)) return -1;
  xgr_value a;
  if (xgr_value_from_json_text(args_json, strlen(args_json), 0, &a, &e)) {
    xgr_abi_type_free(t);
    return -1;
  }
  xgr_value vals[16];
  size_t k = xgr_list_size(a);
  for (size_t i = 0; i < k && i < 16; i++) vals[i] = xgr_list_get(a, i);
  int rc = xgr_abi_encode(t, vals, k, out, n, &e);
  if (rc) fprintf(stderr, "anvil: encode %s: %s\n", types, e.message);
  xgr_value_release(a);
  xgr_abi_type_free(t);
  return rc ? -1 : 0;
}

int anvil_deploy(anvil *a, const char *name, const char *ctor, const char *args_json, char addr[43]) {
  char path[1024];
  snprintf(path, sizeof path, "%s/contracts/build/%s.json", getenv("XGR_SRC") ? getenv("XGR_SRC") : ".", name);
  json_error_t je;
  json_t *doc = json_load_file(path, 0, &je);
  if (!doc) return -1;
  const char *code = json_string_value(json_object_get(doc, "bytecode"));
  uint8_t *enc;
  size_t n;
  if (!code || encode_args(ctor, args_json, &enc, &n)) {
    json_decref(doc);
    return -1;
  }
  char *hex = xgr_hex_encode_alloc(enc, n);
  free(enc);
  size_t cl = strlen(code), hl = strlen(hex);
  char *data = malloc(cl + hl + 1);
  memcpy(data, code, cl);
  memcpy(data + cl, hex + 2, hl - 1);
  free(hex);
  json_decref(doc);
  json_t *tx = json_pack("{s:s, s:s, s:s}", "from", a->accounts[0], "data", data, "gas", "0x1c9c380");
  free(data);
  json_t *r;
  if (send_tx(a, tx, &r)) return -1;
  const char *ca = json_string_value(json_object_get(r, "contractAddress"));
  int rc = ca && strlen(ca) == 42 ? 0 : -1;
  if (!rc) snprintf(addr, 43, "%s", ca);
  json_decref(r);
  return rc;
}

int anvil_send(anvil *a, int from, const char *to, const char *sig, const char *args_json) {
  xgr_abi_sig *s = NULL;
  xgr_error e;
  if (xgr_abi_sig_parse(sig, strlen(sig), &s, &e)) return -1;
  char *types = xgr_abi_type_text(s->inputs);
  uint8_t *enc;
  size_t n;
  int rc = encode_args(types, args_json, &enc, &n);
  free(types);
  if (rc) {
    xgr_abi_sig_free(s);
    return -1;
  }
  uint8_t *data = malloc(n + 4);
  memcpy(data, s->selector, 4);
  memcpy(data + 4, enc, n);
  free(enc);
  xgr_abi_sig_free(s);
  char *hex = xgr_hex_encode_alloc(data, n + 4);
  free(data);
  json_t *tx = json_pack("{s:s, s:s, s:s, s:s}", "from", a->accounts[from], "to", to, "data", hex, "gas", "0x1c9c380");
  free(hex);
  json_t *r;
  if (send_tx(a, tx, &r)) return -1;
  uint64_t st = 0;
  xgr_chain_quantity(json_object_get(r, "status"), &st);
  json_decref(r);
  return st == 1 ? 0 : 1;
}

/* ---- the latency proxy (libmicrohttpd, one thread per connection) ---------------------------- */


typedef struct pbody {
  char *p;
  size_t len;
} pbody;

static size_t sink(char *ptr, size_t size, size_t nmemb, void *ud) {
  pbody *b = ud;
  size_t n = size * nmemb;
  b->p = realloc(b->p, b->len + n + 1);
  memcpy(b->p + b->len, ptr, n);
  b->len += n;
  return n;
}

static enum MHD_Result on_req(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                              const char *data, size_t *data_len, void **state) {
  (void)url, (void)method, (void)version;
  latency_proxy *px = cls;
  pbody *in = *state;
  if (!in) {
    *state = calloc(1, sizeof *in);
    return MHD_YES;
  }
  if (*data_len) {
    in->p = realloc(in->p, in->len + *data_len + 1);
    memcpy(in->p + in->len, data, *data_len);
    in->len += *data_len;
    *data_len = 0;
    return MHD_YES;
  }
  struct timespec ts = {px->delay_ms / 1000, (px->delay_ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  pbody out = {0};
  CURL *h = curl_easy_init();
  struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
  curl_easy_setopt(h, CURLOPT_URL, px->target);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, in->p ? in->p : "");
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)in->len);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  CURLcode rc = curl_easy_perform(h);
  curl_easy_cleanup(h);
  curl_slist_free_all(hd);
  struct MHD_Response *r = MHD_create_response_from_buffer(out.len, out.p ? out.p : (char *)"", MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(r, "Content-Type", "application/json");
  enum MHD_Result ret = MHD_queue_response(c, rc == CURLE_OK ? MHD_HTTP_OK : MHD_HTTP_BAD_GATEWAY, r);
  MHD_destroy_response(r);
  free(out.p);
  return ret;
}

static void on_done(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode code) {
  (void)cls, (void)c, (void)code;
  pbody *in = *state;
  if (in) free(in->p);
  free(in);
  *state = NULL;
}

int latency_proxy_start(latency_proxy *px) {
  px->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL,
                           on_req, px, MHD_OPTION_NOTIFY_COMPLETED, on_done, px, MHD_OPTION_CONNECTION_LIMIT, 8192u,
                           MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 * 1024),
                           MHD_OPTION_SOCK_ADDR, NULL, MHD_OPTION_END);
  if (!px->d) return -1;
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(px->d, MHD_DAEMON_INFO_BIND_PORT);
  snprintf(px->url, sizeof px->url, "http://127.0.0.1:%u", (unsigned)di->port);
  return 0;
}

void latency_proxy_stop(latency_proxy *px) {
  if (px->d) MHD_stop_daemon(px->d);
  px->d = NULL;
}

int anvil_key_file(int account, const char *path) {
  static const char *const keys[] = {"0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
                                     "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"};
  if (account < 0 || account > 1) return -1;
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "%s\n", keys[account]);
  if (fclose(f)) return -1;
  return chmod(path, 0600);
}

json_t *anvil_publish(const anvil *a, const char *bundle, const char *keyfile) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s publish %s --chain %s --key %s --json", getenv("XGR"), bundle, a->url, keyfile);
  FILE *p = popen(cmd, "r");
  if (!p) return NULL;
  char out[8192];
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = 0;
  if (pclose(p)) return NULL;
  json_error_t je;
  return json_loads(out, 0, &je);
}

int anvil_pricefeed_bundle(const char *sh, const char *path) {
  char ostc_p[512], rule_p[512];
  snprintf(ostc_p, sizeof ostc_p, "%s/specs/xgr-public/examples/ApiPriceFeed/XRC729Json/ApiPriceFeedLoop_CoinbaseSpot.json", sh);
  snprintf(rule_p, sizeof rule_p, "%s/specs/xgr-public/examples/ApiPriceFeed/XRC137Json/ApiPriceFeedStep_CoinbaseSpot.json", sh);
  json_error_t je;
  json_t *ostc = json_load_file(ostc_p, JSON_PRESERVE_ORDER, &je), *rule = json_load_file(rule_p, JSON_PRESERVE_ORDER, &je);
  if (!ostc || !rule) {
    json_decref(ostc);
    json_decref(rule);
    return -1;
  }
  const char *addr = json_string_value(json_object_get(json_object_get(json_object_get(ostc, "structure"), "APICallStep"), "rule"));
  json_t *b = json_pack("{s:o, s:{s:o}}", "orchestration", ostc, "rules", addr, rule);
  int rc = b ? json_dump_file(b, path, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : -1;
  json_decref(b);
  return rc;
}

char *anvil_balance(const anvil *a, const char *token, const char *holder) {
  xgr_value who = xgr_value_cstring(holder), bal;
  xgr_error e;
  char *t;
  if (xgr_chain_eth_call(a->chain, NULL, NULL, token, "balanceOf(address)(uint256)", &who, 1, &bal, NULL, &e)) {
    size_t n = strlen(e.message) + 8;
    t = malloc(n);
    if (t) snprintf(t, n, "error: %s", e.message);
  } else {
    t = xgr_value_to_json_text(bal, 0, NULL);
    xgr_value_release(bal);
  }
  xgr_value_release(who);
  if (!t) abort();
  return t;
}

json_t *anvil_pay_bundle(anvil *a, const char *dir, const char *keyfile, char token[43]) {
  if (anvil_deploy(a, "TestToken", "(string,string,uint256)", "[\"T\", \"T\", 1000000]", token)) return NULL;
  char doc[2048], path[512];
  snprintf(doc, sizeof doc,
           "{\"orchestration\":{\"id\":\"Pay\",\"structure\":{\"Pay\":{\"rule\":\"0x00000000000000000000000000000000000000e1\"}}},"
           "\"rules\":{\"0x00000000000000000000000000000000000000e1\":{\"payload\":{\"To\":{\"type\":\"address\"},"
           "\"Amount\":{\"type\":\"uint256\"}},\"rules\":[\"true\"],\"onValid\":{\"payload\":{\"paid\":\"[Amount]\"},"
           "\"execution\":{\"to\":\"%s\",\"gas\":{\"limit\":120000},\"function\":\"transfer(address,uint256)(bool)\","
           "\"args\":[{\"type\":\"address\",\"value\":\"[To]\"},{\"type\":\"uint256\",\"value\":\"[Amount]\"}]}}}}}",
           token);
  snprintf(path, sizeof path, "%s/pay.json", dir);
  FILE *f = fopen(path, "w");
  if (!f) return NULL;
  bool ok = fputs(doc, f) >= 0;
  if (fclose(f) || !ok) return NULL;
  return anvil_publish(a, path, keyfile);
}

long anvil_transfers(const anvil *a, const char *token, const char *to) {
  char t0[67], from_t[67], to_t[67];
  xgr_keccak256_hex("Transfer(address,address,uint256)", 33, t0);
  snprintf(from_t, sizeof from_t, "0x000000000000000000000000%.40s", a->accounts[0] + 2);
  snprintf(to_t, sizeof to_t, "0x000000000000000000000000%.40s", to + 2);
  json_t *res = NULL;
  xgr_error e;
  if (xgr_chain_rpc(a->chain, NULL, "eth_getLogs",
                    json_pack("[{s:s, s:s, s:s, s:[s, s, s]}]", "fromBlock", "0x0", "toBlock", "latest", "address", token,
                              "topics", t0, from_t, to_t),
                    &res, NULL, &e))
    return -1;
  long n = json_is_array(res) ? (long)json_array_size(res) : -1;
  json_decref(res);
  return n;
}
