/* xgr/chain.h — the chain backend: Ethereum JSON-RPC nodes by name, the contract reader of the
 * step engine, and synchronous calls for tools (xgr publish, tests, start-up checks).
 *
 * A chain set holds the configured backends: at most one unnamed default (`--chain URL`) and any
 * number of named ones (`--chain NAME=URL`); a contract read's `rpc` selector picks a named one,
 * no selector the default. The set is immutable once the engine runs and may be shared by every
 * thread; health counters are atomic.
 *
 * Two ways to talk to a node:
 *   - resumable (the engine): xgr_chain_reader_of() gives the step engine a reader whose reads
 *     become JSON-RPC POSTs handed out by xgr_step_next_request, so they run on whatever performs
 *     API calls — in the engine, its one libcurl multi loop — and no worker ever waits on a node;
 *   - synchronous (tools): xgr_chain_rpc() performs one request with a curl easy handle.
 *
 * Node errors are normalised: a revert is XGR_EEVAL "execution reverted: <reason>" whatever the
 * node's dialect (anvil/geth {code:3, data}, hardhat {code:-32603, data:{data}}, ganache/geth
 * -32000 with or without data), with the revert data kept in xgr_chain_fault; other JSON-RPC
 * errors are XGR_EHTTP naming the node's code and message; transport failures XGR_EHTTP,
 * timeouts XGR_ETIMEOUT.
 */
#ifndef XGR_CHAIN_H
#define XGR_CHAIN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "xgr/error.h"
#include "xgr/rule.h"
#include "xgr/value.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XGR_CHAIN_MAX_BACKENDS 32
#define XGR_CHAIN_DEFAULT_TIMEOUT_MS 10000
#define XGR_CHAIN_MAX_RESPONSE (8u << 20)  /* bytes of one JSON-RPC response */

/* ---- JSON-RPC wire format (pure functions) ------------------------------------------------- */

/* What a failed call left behind. `data` is the revert data as "0x…" hex (malloc'd, NULL when
 * the node sent none); release with xgr_chain_fault_clear. */
typedef struct xgr_chain_fault {
  bool reverted;
  long rpc_code;              /* the node's JSON-RPC error code, 0 when none */
  char *data;
} xgr_chain_fault;

void xgr_chain_fault_clear(xgr_chain_fault *f);

/* The body of a JSON-RPC 2.0 request (malloc'd, *len its length); takes take_params (an array). */
char *xgr_chain_rpc_body(const char *method, json_t *take_params, uint64_t id, size_t *len);

/* Parse a response body. 0: *result is a new reference to `result`. Failure: *result NULL, *e
 * filled (XGR_EEVAL for reverts, XGR_EHTTP for other node errors or a malformed answer) and, when
 * f is not NULL, *f describes the node's error. */
int xgr_chain_rpc_parse(const char *body, size_t len, json_t **result, xgr_chain_fault *f, xgr_error *e);

/* ---- the set of backends ------------------------------------------------------------------- */
typedef struct xgr_chain xgr_chain;

xgr_chain *xgr_chain_new(void);
void xgr_chain_free(xgr_chain *c);
/* Add "URL" (the default backend) or "NAME=URL" (NAME: [A-Za-z0-9_.-]{1,64}). URL must start
 * with http:// or https://. Errors (XGR_EINVAL naming the flag value): a second default, a
 * duplicate name, a bad name or URL, more than XGR_CHAIN_MAX_BACKENDS. */
int xgr_chain_add(xgr_chain *c, const char *spec, xgr_error *e);
/* Total time allowed for one request (default XGR_CHAIN_DEFAULT_TIMEOUT_MS). */
void xgr_chain_set_timeout(xgr_chain *c, long ms);
size_t xgr_chain_count(const xgr_chain *c);
/* URL of a backend: name NULL (or "") is the default. NULL when not configured. */
const char *xgr_chain_url(const xgr_chain *c, const char *name);

/* The step engine's reader over this set (resumable form plus a synchronous `call`). The set
 * must outlive every step that uses the reader. */
xgr_chain_reader xgr_chain_reader_of(xgr_chain *c);

/* ---- synchronous calls --------------------------------------------------------------------- */

/* One JSON-RPC request to backend `name` (NULL: default), performed now on this thread.
 * Takes take_params (a JSON array; NULL means []). 0: *result a new reference. */
int xgr_chain_rpc(xgr_chain *c, const char *name, const char *method, json_t *take_params, json_t **result,
                  xgr_chain_fault *f, xgr_error *e);

/* eth_call of `sig` ("balanceOf(address)(uint256)") on `to` with n arguments, at "latest".
 * `from` may be NULL. With declared return types *out is the decoded LIST; without, *out is a
 * BYTES value holding the raw return data. */
int xgr_chain_eth_call(xgr_chain *c, const char *name, const char *from, const char *to, const char *sig,
                       const xgr_value *args, size_t n, xgr_value *out, xgr_chain_fault *f, xgr_error *e);

/* A quantity result ("0x1a") as uint64; false when it is not one. */
bool xgr_chain_quantity(const json_t *j, uint64_t *out);

/* ---- EIP-1559 transactions ------------------------------------------------------------------ */

/* A type-2 transaction. Quantities above 64 bits (value) are 32-byte big-endian. */
typedef struct xgr_tx1559 {
  uint64_t chain_id, nonce;
  uint64_t max_priority_fee, max_fee;   /* wei per gas */
  uint64_t gas_limit;
  bool has_to;                          /* false: contract creation */
  uint8_t to[20];
  uint8_t value[32];
  const uint8_t *data;                  /* call data or init code (borrowed) */
  size_t data_len;
} xgr_tx1559;

/* RLP of the unsigned fields, the signing digest keccak256(0x02 || rlp([...])), the signature
 * with key (libsecp256k1 through xgr/secp.h), and the raw transaction
 * 0x02 || rlp([..., yParity, r, s]) in *raw (malloc'd, caller frees), *hash its keccak-256 (the
 * transaction hash). */
struct xgr_secp;
int xgr_tx1559_sign(const struct xgr_secp *secp, const xgr_tx1559 *tx, const uint8_t key[32], uint8_t **raw,
                    size_t *rawlen, uint8_t hash[32], xgr_error *e);

/* A synchronous sender for tools (xgr publish) and tests: one key on one backend. The nonce is
 * read once (eth_getTransactionCount "pending") and then counted locally; gas comes from
 * eth_estimateGas (+20 %) unless given; fees from eth_feeHistory (2 × base fee + the median tip),
 * eth_gasPrice when the node has no fee history. */
typedef struct xgr_chain_sender {
  xgr_chain *chain;
  const char *backend;                  /* NULL: default */
  const struct xgr_secp *secp;
  uint8_t key[32];
  char from[43];                        /* filled by xgr_chain_sender_init */
  uint64_t chain_id, nonce;
  bool ready;
  long receipt_timeout_ms;              /* default 60000 */
} xgr_chain_sender;

/* Derive `from`, read the chain id and the nonce. */
int xgr_chain_sender_init(xgr_chain_sender *s, xgr_error *e);

/* A signed transaction, ready to be stored and (re-)broadcast: the same bytes, the same hash. */
typedef struct xgr_chain_signed {
  char hash[67];
  char *raw_hex;                        /* "0x02…" (malloc'd; xgr_chain_signed_clear) */
  uint64_t nonce, gas_limit;
} xgr_chain_signed;

void xgr_chain_signed_clear(xgr_chain_signed *t);
/* Sign a transaction (to NULL: contract creation; value NULL: 0) with the sender's next nonce;
 * gas_limit 0: eth_estimateGas + 20 % (a revert there is XGR_EEVAL with the reason and takes no
 * nonce). Nothing is sent. */
int xgr_chain_sign(xgr_chain_sender *s, const char *to, const uint8_t *data, size_t len, const uint8_t value[32],
                   uint64_t gas_limit, xgr_chain_signed *out, xgr_error *e);
/* Send a signed transaction (again, after a restart: a node that already has it or mined it is
 * fine) and wait for its receipt: 0 mined with status 1, XGR_EEVAL mined reverted (*receipt is
 * set either way when not NULL), XGR_ETIMEOUT not mined within receipt_timeout_ms. */
int xgr_chain_broadcast(xgr_chain_sender *s, const xgr_chain_signed *tx, json_t **receipt, xgr_error *e);
/* Sign and send a transaction (to NULL: deploy `data` as init code), wait for its receipt. 0: mined
 * with status 1, *receipt (if not NULL) a new reference; XGR_EEVAL: reverted (estimation or
 * receipt status 0; message with the reason when the node gives one). hash_hex (67 bytes) gets
 * the transaction hash when one was sent. */
int xgr_chain_send(xgr_chain_sender *s, const char *to, const uint8_t *data, size_t len, uint64_t gas_limit,
                   char hash_hex[67], json_t **receipt, xgr_error *e);

/* ---- orchestrations and rules from the chain (XRC-729 / XRC-137) --------------------------- */

/* A cache of orchestrations (by backend, registry, ostcId) and rule texts (by backend, address),
 * each remembered with the keccak-256 of its exact bytes. Loaded bundles are kept until the
 * cache is freed, so a session that pinned one keeps it however the chain changes; a refresh
 * (xgr_chain_cache_refresh, on the caller's schedule) reads the OSTCSet / OSTCDeleted /
 * RuleUpdated / EncryptedSet logs since the last refresh and forgets what they changed, so the
 * next load reads the new content. Thread-safe (one mutex; chain calls happen outside it). */
typedef struct xgr_chain_cache xgr_chain_cache;

xgr_chain_cache *xgr_chain_cache_new(xgr_chain *c);
void xgr_chain_cache_free(xgr_chain_cache *k);

/* What a load returns: borrowed from the cache (valid until xgr_chain_cache_free). */
typedef struct xgr_chain_orch {
  const struct xgr_bundle *bundle;      /* orchestration + rules, resolved by address */
  char hash[67];                        /* keccak-256 of the exact getOSTC bytes ("0x…") */
  bool cached;                          /* served without a chain call */
} xgr_chain_orch;

/* Load ostcId from the XRC-729 registry at `registry` on backend `name` (NULL: default).
 * expected_hash (NULL: none) must equal the hash of the returned bytes, else XGR_EMISMATCH
 * (XRC-729 §8: nothing runs). Each step's rule comes from getRule() of its address; a rule whose
 * isEncrypted() is true is refused (XGR_EUNSUPPORTED: the XGR1 envelope is not supported); an
 * unknown ostcId (getOSTC reverts) is XGR_ENOTFOUND. Errors name the registry, id and step. */
int xgr_chain_load_orch(xgr_chain_cache *k, const char *name, const char *registry, const char *ostc_id,
                        const char *expected_hash, xgr_chain_orch *out, xgr_error *e);

/* Copies of cached texts (malloc'd, *bytes NUL-terminated; caller frees): the exact getOSTC
 * bytes of a loaded orchestration (XGR_ENOTFOUND when not loaded), and a rule contract's
 * getRule() text (read now when not cached; an encrypted rule is refused as in loads). */
int xgr_chain_ostc_text(xgr_chain_cache *k, const char *name, const char *registry, const char *ostc_id, char **bytes,
                        size_t *len, xgr_error *e);
int xgr_chain_rule_text(xgr_chain_cache *k, const char *name, const char *address, char **bytes, size_t *len,
                        xgr_error *e);

/* Read logs since the last refresh (first call: remember the current block only) and drop the
 * cache entries they change. Returns the number of entries dropped, or a negative xgr_errcode. */
int xgr_chain_cache_refresh(xgr_chain_cache *k, xgr_error *e);

/* Engine-side authorization of XRC-729 §4.2 / XRC-137 §3.2: *ok is true when signer ("0x…") is
 * contract's owner() or in its getExecutorList(); a getExecutorList() that reverts with empty
 * data (a contract without the extension) means owner only. */
int xgr_chain_authorized(xgr_chain *c, const char *name, const char *contract, const char *signer, bool *ok,
                         xgr_error *e);

/* ---- executions (XRC-137 §8.3) ------------------------------------------------------------- */

/* Sign the transaction of a step's resolved execution with the sender's key: data = the function's
 * selector and ABI-encoded arguments (no function: empty), value = `value` as wei, gas =
 * gas.limit or an estimate. An estimate that reverts is XGR_EEVAL with the reason (nothing to send).
 * The caller stores *out with the step before broadcasting it (exactly once across restarts). */
int xgr_chain_exec_sign(xgr_chain_sender *s, const xgr_execution *x, xgr_chain_signed *out, xgr_error *e);

/* Broadcast (or re-broadcast) tx, wait for its receipt and describe the outcome:
 * {"txHash", "status": "success"|"reverted"|"pending", "gasUsed", "blockNumber", and "return"
 * (success, when the function declares return types: the call replayed at the parent block and
 * decoded; one value as itself, several as a list) or "revertReason" (the reason the replay at the
 * parent block gives)}. Never NULL; transport failures leave status "pending" with "error". */
json_t *xgr_chain_exec_settle(xgr_chain_sender *s, const xgr_execution *x, const xgr_chain_signed *tx);

/* The record of an execution that could not be signed because its estimate reverted. */
json_t *xgr_chain_exec_refused(const xgr_error *e);

/* ---- the engine's executor (exactly once across crashes) ----------------------------------- */

/* An executor for the engine key: a journal of every execution the engine submits and one thread
 * that signs, sends and settles them in order (see src/chain/executor.c). `journal`: an SQLite
 * file path, a PostgreSQL libpq URI (postgresql://... or postgres://...: the table exec_journal
 * in that database's schema, made by the first execution; one executor per schema, a second is
 * refused), or NULL (in memory, not durable). NULL with *e on failure. */
typedef struct xgr_chain_executor xgr_chain_executor;
struct xgr_exec_hook;
xgr_chain_executor *xgr_chain_executor_new(xgr_chain *c, const struct xgr_secp *secp, const uint8_t key[32],
                                           const char *journal, FILE *log, xgr_error *e);
/* The executor of a cluster node (docs/CLUSTER.md): the journal is the table exec_journal at the
 * PostgreSQL URI url, shared by every node; each node journals its own steps' executions, and the
 * one node holding the sender's lease (node: this node's id, borrowed; lease_ms > 0, renewed every
 * third) signs and sends all of them with the one engine key. A node that stalls past the lease
 * has its late journal writes refused and sends nothing more. NULL with *e on failure. */
xgr_chain_executor *xgr_chain_executor_new_node(xgr_chain *c, const struct xgr_secp *secp, const uint8_t key[32],
                                                const char *url, const char *node, int64_t lease_ms, FILE *log,
                                                xgr_error *e);
/* Whether this executor sends now: always for a journal of its own; on a cluster node, while it
 * holds the sender's lease. */
bool xgr_chain_executor_sending(xgr_chain_executor *x);
/* Stops the thread (what is not settled stays in the journal for the next start; a node gives
 * the sender's lease up). */
void xgr_chain_executor_free(xgr_chain_executor *x);
/* The hook for xgr_engine_config.exec (borrowed from x). */
const struct xgr_exec_hook *xgr_chain_executor_hook(xgr_chain_executor *x);
/* The engine key's address ("0x…"). */
const char *xgr_chain_executor_address(const xgr_chain_executor *x);
/* The journal as it may be logged (path, "memory (not durable)" or the URI without secrets and
 * the table); owned by x. */
const char *xgr_chain_executor_journal(const xgr_chain_executor *x);
/* The execution record of step (owner, rootPid, iter): the settled record
 * {"txHash","status","gasUsed","blockNumber","return"|"revertReason"}, {"txHash","status":"pending"}
 * while in flight, NULL when that step has no execution. A new reference. */
json_t *xgr_chain_executor_record(xgr_chain_executor *x, const char *owner, uint64_t root, uint64_t iter);
/* Executions not settled yet, and settled. */
void xgr_chain_executor_counts(xgr_chain_executor *x, uint64_t *pending, uint64_t *done);

/* ---- health -------------------------------------------------------------------------------- */

/* Poll eth_blockNumber on every backend now (synchronously) and remember the result. */
void xgr_chain_probe(xgr_chain *c);
/* [{"name","url","lastBlock","calls","errors","lastError","ok"}] (new reference). */
json_t *xgr_chain_health(const xgr_chain *c);

/* ---- the project's contracts ------------------------------------------------------------------ */

/* The creation bytecode ("0x..." lower-case hex) of the repository's contract NAME as committed
 * under contracts/build ("XRC137", "XRC729"), embedded at build time; NULL for another name.
 * Static storage: never freed. */
const char *xgr_chain_contract_bytecode(const char *name);

#ifdef __cplusplus
}
#endif
#endif
