/* xgr/rule.h — XRC-137 rule documents and the step engine: run one rule on a payload.
 *
 * A rule document (XRC-137_Rule_Document_Spec.md) is parsed once into an immutable xgr_rule:
 * every cap of XDaLa_Limits.md §3 is checked, every expression is compiled once, every default
 * is cast to its XRC type. A loaded rule may be shared by any number of threads without locking.
 *
 * Executing a step follows SEMANTICS.md §2 / spec §6.1:
 *   1. input: declared fields cast to their XRC type, defaults applied, `_from`/`_when` dropped;
 *      a missing required input forces the invalid branch (validate rules are not evaluated);
 *   2. contract reads, in order, through an xgr_chain_reader (none configured: every read fails
 *      with "no backend configured" and the per-slot defaults of spec §6.4 apply);
 *   3. API calls, in order: the engine *describes* each HTTP request (xgr_http_request); the
 *      caller performs it (curl easy, or one curl multi loop on another thread) and feeds the
 *      response back; `extractMap` runs with the per-alias defaults of guide §5.5.3;
 *   4. rules (validate AND-ed; abortStep / cancelSession actions), all evaluated, in order;
 *   5. the branch: outcome payload (EvalOrRender), soft-invalid downgrade, waitSec, wakeUps,
 *      execution, grants, logExpireDays, encryptLogs;
 *   6. effective payload = sanitized input ∪ extracted ∪ outcome.
 *
 * Resumable form (for a worker thread that must never block on the network):
 *
 *   xgr_step_state *st = xgr_step_begin(rule, payload, &ctx);   // input casts, contract reads
 *   const xgr_http_request *rq;
 *   while ((rq = xgr_step_next_request(st)) != NULL) {
 *     ... perform rq (possibly elsewhere, later) ...
 *     xgr_step_feed_http(st, &response);                        // extracts of that call
 *   }
 *   xgr_step_result res;
 *   xgr_step_finish(st, &res);                                  // rules, branch; frees st
 *   ... xgr_step_result_free(&res);
 *
 * Synchronous form: xgr_step_run() does the same, performing the requests itself with a curl
 * easy handle (xgr_http_client). libcurl's global initialisation (curl_global_init) is the
 * caller's job, done once per process before any client is created; the library never does it.
 *
 * Context variables (SEMANTICS §8): `__sessionId` (uint, the rootPid), `__pid`, `__stepId`,
 * `__owner` and `from` (the owner's address) are readable by every expression; they shadow
 * payload keys of the same name. Any other payload key starting with `_` is invisible to
 * expressions but is carried into the effective payload (`__wakeUp` travels on), except the join
 * meta keys `_from` and `_when`, which are dropped.
 */
#ifndef XGR_RULE_H
#define XGR_RULE_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xgr/arena.h"
#include "xgr/error.h"
#include "xgr/outbound.h"
#include "xgr/value.h"
#include "xgr/xrc_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- caps of XDaLa_Limits.md §3 (checked by xgr_rule_parse, exact: at the cap passes) ---- */
#define XGR_MAX_XRC137_BYTES 131072        /* MaxXRC137Bytes */
#define XGR_MAX_PAYLOAD_FIELDS 64          /* MaxPayloadFields */
#define XGR_MAX_FIELD_NAME_LEN 64          /* MaxFieldNameLen (payload, outcome, extract, saveAs keys) */
#define XGR_MAX_RULES 64                   /* MaxRules */
#define XGR_MAX_RULE_EXPR_LEN 2048         /* MaxExprLen of §3.1 (document level; the evaluator's
                                              own cap, XGR_CEL_MAX_EXPR_LEN = 1024 bytes, also applies) */
#define XGR_MAX_API_CALLS 16               /* MaxAPICalls */
#define XGR_MAX_URL_TEMPLATE_LEN 2048      /* MaxURLTemplateLen */
#define XGR_MAX_BODY_TEMPLATE_LEN 8192     /* MaxBodyTemplateLen */
#define XGR_MAX_EXTRACT_MAP_ENTRIES 64     /* MaxExtractMapEntries */
#define XGR_MAX_STRING_VALUE_LEN 8192      /* MaxStringValueLen */
#define XGR_MAX_CONTRACT_READS 16          /* MaxContractReads */
#define XGR_MAX_CONTRACT_READ_SAVE_AS 64   /* MaxContractReadSaveAs */
#define XGR_MAX_OUTCOME_KEYS 64            /* MaxOutcomeKeys */
#define XGR_MAX_GRANTS 16                  /* MaxGrants */
#define XGR_MAX_EXEC_ARGS 16               /* MaxExecArgs */
#define XGR_MAX_WAKEUPS 16                 /* xgr's own cap on wakeUps per branch: XDaLa_Limits.md
                                              has none; the MaxGrants number */

#define XGR_HTTP_DEFAULT_TIMEOUT_MS 5000   /* apiCalls[].timeoutMs when omitted */
#define XGR_HTTP_MAX_RESPONSE 1048576      /* response bodies above 1 MiB fail the call */

/* ---- rule documents ------------------------------------------------------------------------ */
typedef struct xgr_rule xgr_rule;   /* opaque, immutable after parsing */

/* Parse and validate len bytes of an XRC-137 rule document. On success returns 0 and *out (the
 * caller frees it with xgr_rule_free). On failure returns a negative xgr_errcode and fills *e with
 * the first load error: XGR_EPARSE (malformed JSON), XGR_ESCHEMA (missing field, wrong type,
 * unknown XRC type, default not castable, `expr` and `value` both set), XGR_ELIMIT (a cap of
 * Limits §3, or an evaluator cap: the message names the cap, the value seen and the maximum),
 * XGR_EIDENT (a field name that is not [A-Za-z0-9_-]), XGR_EDUP (duplicate apiCalls name),
 * and the compile errors of xgr_cel_compile. e->path is the JSON path ("apiCalls[0].extractMap.Ok.value"). */
int xgr_rule_parse(const char *bytes, size_t len, xgr_rule **out, xgr_error *e);
/* Read a file (at most XGR_MAX_XRC137_BYTES; larger is XGR_ELIMIT MaxXRC137Bytes) and parse it. */
int xgr_rule_load_file(const char *path, xgr_rule **out, xgr_error *e);
/* Warnings for a rule document (src/rule/lint.c): keys the parser ignores, with the nearest known
 * key ("unknown_key"), and templates that look like arithmetic ("template_operator"). Paths are
 * relative to the document (prefix them with xgr_diags_prefix). doc is borrowed; d gets the findings. */
void xgr_rule_lint(const json_t *doc, xgr_diags *d);
/* Free the rule. Its constants (payload keys, defaults, literals, the empty map) are pinned
 * (xgr_value_pin), so steps on many threads share them without counting references; values a
 * step produced may therefore borrow them: free step results and payloads built from them first. */
void xgr_rule_free(xgr_rule *r);

/* Introspection (borrowed data, valid while the rule lives). */
size_t xgr_rule_napi_calls(const xgr_rule *r);
size_t xgr_rule_ncontract_reads(const xgr_rule *r);
size_t xgr_rule_nrules(const xgr_rule *r);
/* Number of `wakeUps` entries over both branches (0: its steps never wake another process). */
size_t xgr_rule_nwakeups(const xgr_rule *r);
/* The declared input fields, in document order. */
size_t xgr_rule_ninputs(const xgr_rule *r);
const char *xgr_rule_input_name(const xgr_rule *r, size_t i);
xgr_xrc_type xgr_rule_input_type(const xgr_rule *r, size_t i);
bool xgr_rule_input_required(const xgr_rule *r, size_t i);
/* The `waitSec` of the branch (valid: onValid, else onInvalid), a literal of the document, the
 * wait every step through that branch asks for; 0 when the branch has none. */
uint64_t xgr_rule_branch_wait(const xgr_rule *r, bool valid);

/* ---- I/O interfaces ------------------------------------------------------------------------ */

/* An `--api-map` entry: a URL that starts with `from` is rewritten to start with `to` instead
 * (the first matching entry wins). Used for sandboxes and tests:
 * {"https://api.coinbase.com", "http://127.0.0.1:8081"}. */
typedef struct xgr_api_map_entry {
  const char *from;
  const char *to;
} xgr_api_map_entry;

/* One contract read as the chain backend sees it (everything borrowed for the call). */
typedef struct xgr_chain_call {
  const char *rpc;            /* `rpc` backend selector, NULL for the default backend */
  const char *to;             /* resolved target address, "0x" + 40 hex */
  const char *function;       /* Solidity signature as written, e.g. "balanceOf(address)" */
  size_t nargs;
  const xgr_xrc_type *arg_types;  /* nargs XRC types ... */
  const xgr_value *args;      /* ... and the arguments, cast to those types (NULL in decode) */
  size_t nslots;              /* saveAs return slots 0..nslots-1 ... */
  const xgr_xrc_type *slot_types; /* ... their XRC types (XGR_XRC_TYPE_COUNT_: slot not saved);
                                     a reader decodes by them when `function` declares no
                                     return types */
} xgr_chain_call;

/* The HTTP exchange of one resumable contract read: a JSON-RPC POST. Filled by `prepare` with
 * malloc'd strings that the step engine frees. */
typedef struct xgr_chain_post {
  char *url;
  char *body;
  size_t body_len;
  long timeout_ms;
} xgr_chain_post;

/* Chain-reader interface (eth_call). `call` returns 0 and a new list value in *out (the decoded
 * return values in order; the engine releases it), or a negative xgr_errcode with *e filled; any
 * failure applies the per-slot defaults of spec §6.4. A NULL reader (or NULL call) means "no
 * backend configured": every read fails that way. */
typedef struct xgr_chain_reader {
  int (*call)(void *ctx, const xgr_chain_call *call, xgr_value *out, xgr_error *e);
  void *ctx;
  /* Resumable form (used instead of `call` when both are set): the step describes each read as
   * an HTTP request handed out by xgr_step_next_request before the API calls, so whoever
   * performs API calls (the engine's libcurl multi loop) performs the reads too and no worker
   * waits on the chain. `prepare` fills *post (0) or fails (negative xgr_errcode, *e: the read's
   * defaults apply); `decode` turns the response body into the list of return values (0, *out
   * a new list) or fails with *e (a revert: "execution reverted: <reason>"). */
  int (*prepare)(void *ctx, const xgr_chain_call *call, xgr_chain_post *post, xgr_error *e);
  int (*decode)(void *ctx, const xgr_chain_call *call, const char *body, size_t len, xgr_value *out,
                xgr_error *e);
  /* Optional: told when a prepared read got no usable answer (transport error, timeout, HTTP
   * status), so the backend's health counts it; `decode` is not called then. */
  void (*failed)(void *ctx, const xgr_chain_call *call, const char *why);
} xgr_chain_reader;

/* What the step is run for: the read-only context of SEMANTICS §8 plus the I/O settings.
 * Everything is borrowed for the duration of the step (until xgr_step_finish returns). */
typedef struct xgr_step_ctx {
  const char *owner;          /* session owner address ("0x..."): `__owner` and `from`; NULL = "" */
  uint64_t session_id;        /* rootPid: `__sessionId` (uint) */
  const char *pid;            /* process id "<rootPid>:<iter>": `__pid`; NULL = "" */
  const char *step_id;        /* orchestration step id: `__stepId`; NULL = "" */
  const xgr_api_map_entry *api_map;  /* URL prefix rewriting, napi_map entries (may be NULL) */
  size_t napi_map;
  const xgr_chain_reader *chain;     /* NULL: no backend configured */
  /* The addresses API calls may connect to (xgr/outbound.h); NULL: the default policy (loopback,
   * link-local, private, ... refused). Contract reads go to the operator's chain endpoints and are
   * not subject to it. */
  const xgr_outbound_policy *outbound;
} xgr_step_ctx;

/* An HTTP request the step needs. All pointers are owned by the step state and stay valid until
 * the next xgr_step_feed_http / xgr_step_finish / xgr_step_state_free on that state. */
typedef struct xgr_http_request {
  size_t call_index;          /* index into the rule's apiCalls */
  const char *name;           /* apiCalls[i].name */
  const char *method;         /* "GET", "POST", ... (upper case as written) */
  const char *url;            /* final URL: placeholders percent-encoded, --api-map applied */
  size_t nheaders;
  const char *const *headers; /* nheaders "Name: value" lines (curl_slist-ready) */
  const char *body;           /* rendered bodyTemplate, NULL when the call has none */
  size_t body_len;
  long timeout_ms;            /* total time allowed for the exchange */
  size_t max_response;        /* XGR_HTTP_MAX_RESPONSE: a longer body fails the call */
  /* API calls: the step context's outbound policy, checked on every address connected to (NULL:
   * the default policy). A contract read sets operator_endpoint instead: its URL is the operator's
   * --chain configuration, so every address is allowed, and its connection is never kept for
   * reuse (an API call to the same host could otherwise ride on it unchecked). */
  const xgr_outbound_policy *outbound;
  bool operator_endpoint;
} xgr_http_request;

/* What happened to a request. `error` is 0 when an HTTP response arrived (any status), or a
 * transport failure: XGR_ETIMEOUT (timeoutMs passed), XGR_ELIMIT (body larger than
 * max_response), XGR_EHTTP (connect / protocol failure), XGR_EPERM (the outbound policy refused
 * every address of the host; the message names the host, the address, its class and the flag
 * that allows it). Borrowed by xgr_step_feed_http. */
typedef struct xgr_http_response {
  int error;
  const char *error_message;  /* for error != 0; may be NULL */
  long status;                /* HTTP status (0 when no response) */
  const char *body;           /* response body (need not be NUL-terminated) */
  size_t body_len;
  double ms;                  /* wall time of the exchange, reported in the result */
} xgr_http_response;

/* ---- the step result ----------------------------------------------------------------------- */
typedef enum xgr_rule_action {
  XGR_ACTION_NONE = 0,
  XGR_ACTION_ABORT_STEP = 1,      /* an `abortStep` rule was true: the process is aborted */
  XGR_ACTION_CANCEL_SESSION = 2,  /* a `cancelSession` rule was true (wins over abortStep) */
} xgr_rule_action;

/* "", "abortStep", "cancelSession". */
const char *xgr_rule_action_name(xgr_rule_action a);
/* Whether one of the rule's `rules` entries takes the action a (XGR_ACTION_ABORT_STEP or
 * XGR_ACTION_CANCEL_SESSION) when true; XGR_ACTION_NONE: false. Says what may happen, not what
 * a step did (that is xgr_step_result.action). */
bool xgr_rule_has_action(const xgr_rule *r, xgr_rule_action a);

/* A resolved `wakeUps` entry of the branch taken (spec §8.5). */
typedef struct xgr_wakeup {
  const char *runner;         /* target session owner address (NULL when skipped before resolving) */
  uint64_t session_id;        /* target rootPid, > 0 */
  const char *step_id;        /* target step the session must be waiting on */
  xgr_value payload;          /* map, `_` keys dropped (empty map when none) */
  bool skipped;               /* true: not sent (fields could not be resolved) */
  const char *skip_reason;    /* why, when skipped (names the field and the missing key) */
} xgr_wakeup;

/* A typed value of an execution: its XRC type and the value cast to it. */
typedef struct xgr_typed_value {
  xgr_xrc_type type;
  xgr_value value;
} xgr_typed_value;

/* The resolved `execution` of the branch taken (spec §8.3). */
typedef struct xgr_execution {
  const char *to;             /* address */
  bool has_gas;
  uint64_t gas_limit;
  const char *function;       /* NULL when absent */
  size_t nargs;
  xgr_typed_value *args;
  bool has_value;
  xgr_typed_value value;
  xgr_value extras;           /* the `extras` object as written, or null */
} xgr_execution;

typedef struct xgr_grant {
  const char *address;
  uint32_t rights;            /* bitmask: 1 READ, 2 WRITE, 4 MANAGE */
  uint32_t expire_days;       /* `expireDays`, else the branch's logExpireDays, else 0 (engine default) */
} xgr_grant;

typedef struct xgr_api_call_report {
  const char *name;
  const char *method;         /* the call's HTTP method (borrowed from the rule), NULL when not reached */
  long status;                /* HTTP status, 0 when none arrived or the call was not made */
  double ms;
  const char *error;          /* NULL on success; else why the call's aliases were defaulted */
  const char *url;            /* the final URL with credentials masked (user:password@ and the values
                                 of query keys such as key, token, secret, password, signature), or
                                 NULL when the URL could not be rendered */
} xgr_api_call_report;

/* What one entry of `rules` gave (xgr step prints them, issue 15). */
typedef enum xgr_rule_outcome {
  XGR_RULE_FALSE = 0,
  XGR_RULE_TRUE = 1,
  XGR_RULE_MISSING = 2,       /* a key it reads is missing: counts as false */
  XGR_RULE_ERROR = 3,         /* a hard error (the step's error says which) */
  XGR_RULE_SKIPPED = 4        /* not evaluated: a validate rule when a required input is missing,
                                 or a rule after a hard error */
} xgr_rule_outcome;

typedef struct xgr_rule_report {
  uint8_t outcome;            /* xgr_rule_outcome */
  uint8_t type;               /* 0 validate, 1 abortStep, 2 cancelSession */
  const char *detail;         /* MISSING / ERROR: the evaluator's message, else NULL */
} xgr_rule_report;

typedef struct xgr_read_report {
  const char *function;
  const char *to;             /* NULL when it could not be resolved */
  const char *error;          /* NULL on success */
} xgr_read_report;

/* The outcome of one step. Everything is owned by the result: strings and arrays live in its
 * arena, values hold references; xgr_step_result_free releases it all. Payload maps are
 * insertion-ordered xgr_value maps (never null). Values may borrow the rule's pinned constants:
 * the rule must outlive the result and anything built from it (see xgr_rule_free). */
typedef struct xgr_step_result {
  bool valid;                 /* the branch taken (after a soft-invalid downgrade: false) */
  xgr_rule_action action;     /* when not NONE, no branch was evaluated (SEMANTICS §2) */
  xgr_value payload;          /* sanitized input: casts and defaults applied, _from/_when dropped */
  xgr_value extracted;        /* API extracts and contract-read outputs */
  xgr_value output;           /* outcome payload of the branch taken (`outputPayload`) */
  xgr_value effective;        /* payload ∪ extracted ∪ output: what the next steps receive */
  xgr_value soft_invalid;     /* list of strings: keys that could not be produced */
  bool missing_input;         /* a required input was missing (invalid forced) */
  uint64_t wait_sec;          /* `waitSec` of the branch taken, 0 when absent */
  bool has_log_expire_days;
  uint32_t log_expire_days;
  int encrypt_logs;           /* -1 absent, 0 false, 1 true */
  size_t nwakeups;
  xgr_wakeup *wakeups;
  xgr_execution *execution;   /* NULL when the branch has none (or it was dropped as soft-invalid) */
  size_t ngrants;
  xgr_grant *grants;
  size_t napi_calls;
  xgr_api_call_report *api_calls;   /* one per apiCalls entry, in order */
  size_t nreads;
  xgr_read_report *reads;           /* one per contractReads entry, in order */
  size_t nrule_reports;
  xgr_rule_report *rule_reports;    /* one per rules entry, in order (when the rules ran) */
  xgr_error error;            /* error.code != 0: hard error, no branch ran (valid is false) */
  xgr_arena arena;            /* private: storage of the strings and arrays above */
} xgr_step_result;

/* Release everything the result owns; *r is left zeroed (freeing twice is harmless). */
void xgr_step_result_free(xgr_step_result *r);

/* The JSON form printed by `xgr step --json` (a new jansson reference):
 * {"valid","ruleAction","payload","extracted","outputPayload","effectivePayload","softInvalid",
 *  "waitSec","wakeUps":[{"runner","sessionId","stepId","payload","skipped","reason"}],
 *  "execution":{...}|null,"grants":[{"address","rights","expireDays"}],
 *  "apiCalls":[{"name","status","ms","error"}],"contractReads":[{"function","to","error"}],
 *  "logExpireDays"?,"encryptLogs"?,"error":null|{"path","code","message"}} */
json_t *xgr_step_result_to_json(const xgr_step_result *r);

/* ---- resumable execution ------------------------------------------------------------------- */
typedef struct xgr_step_state xgr_step_state;   /* one step in flight; single owner at a time */

/* Start a step: casts the input payload (a map, borrowed; null is an empty payload) and runs the
 * contract reads. Never fails: errors are carried to the result. rule and ctx (and what ctx
 * points to) must stay alive until xgr_step_finish or xgr_step_state_free. */
xgr_step_state *xgr_step_begin(const xgr_rule *rule, xgr_value payload, const xgr_step_ctx *ctx);

/* The next HTTP request the step needs, or NULL when none is left (then call xgr_step_finish).
 * Calling it again before feeding a response returns the same request. Calls that cannot be made
 * (a urlTemplate placeholder is missing) are settled here without a request: their aliases take
 * their defaults. */
const xgr_http_request *xgr_step_next_request(xgr_step_state *st);

/* Give the response (or transport failure) of the request last returned by
 * xgr_step_next_request; runs that call's extractMap. resp is borrowed for the call. */
void xgr_step_feed_http(xgr_step_state *st, const xgr_http_response *resp);

/* Run the rules and the branch and fill *out (the caller frees it with xgr_step_result_free).
 * Consumes st (freed, also on error). Requests not performed (xgr_step_next_request not driven to
 * NULL) count as failed with "not performed". Returns 0, or the hard error's code (also in
 * out->error). */
int xgr_step_finish(xgr_step_state *st, xgr_step_result *out);

/* Drop a step in flight without a result. NULL is allowed. */
void xgr_step_state_free(xgr_step_state *st);

/* url as reports and logs may show it: a new string (the caller frees it) with the userinfo of the
 * authority ("user:password@") replaced by "***@" and the value of every query parameter whose
 * name contains key, token, secret, pass, auth or sig (any case) replaced by "***"; everything else
 * as given. Never fails (url must not be NULL). The step results' API call URLs are masked so, and
 * the store's URLs in messages (xgr_store_url_redacted). */
char *xgr_rule_mask_url(const char *url);

/* ---- HTTP over libcurl -------------------------------------------------------------------- */
/* One exchange's curl easy handle and buffers, reusable for many requests (not concurrently).
 * Connections are checked against the request's outbound policy when opened, and a connection is
 * reused only under the policy it was checked against: an API call under another policy than the
 * exchange's previous one starts on a new curl handle. Exchanges whose handles share a curl multi
 * handle share its connections, so all the API calls of one multi handle must carry one policy.
 * For a curl multi loop: h = xgr_http_exchange_prepare(x, rq); curl_multi_add_handle(m, h); when
 * the multi handle reports h done with result code rc: xgr_http_exchange_complete(x, rc, &resp),
 * then xgr_step_feed_http(st, &resp). Requires curl_global_init to have been called. */
typedef struct xgr_http_exchange xgr_http_exchange;

xgr_http_exchange *xgr_http_exchange_new(void);   /* NULL if curl cannot make a handle */
void xgr_http_exchange_free(xgr_http_exchange *x);
/* Set the easy handle up for rq (method, URL, headers, body, timeout, size cap). rq is copied:
 * it need not outlive the call. Returns the handle, owned by x. */
CURL *xgr_http_exchange_prepare(xgr_http_exchange *x, const xgr_http_request *rq);
/* Turn curl's result into a response; *out borrows x's buffers until the next prepare. */
void xgr_http_exchange_complete(xgr_http_exchange *x, CURLcode rc, xgr_http_response *out);
/* prepare + curl_easy_perform + complete. */
void xgr_http_exchange_perform(xgr_http_exchange *x, const xgr_http_request *rq, xgr_http_response *out);

/* ---- synchronous execution ---------------------------------------------------------------- */
/* Run a whole step, performing its HTTP requests with x (may be NULL when the rule has no
 * apiCalls; with apiCalls and x NULL a temporary exchange is made). Same result as the resumable
 * form. Returns 0 or the hard error's code. */
int xgr_step_run(const xgr_rule *rule, xgr_value payload, const xgr_step_ctx *ctx,
                 xgr_http_exchange *x, xgr_step_result *out);

#ifdef __cplusplus
}
#endif
#endif
