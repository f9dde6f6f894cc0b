/* xgrd.c — the xgr daemon: the JSON-RPC server (xgr/rpc.h) in front of the engine and the store.
 *
 *   xgrd [--listen 127.0.0.1:8729] [--store FILE] [--workers N] [--config FILE] [--auth permits|none] ...
 *
 * Start-up: read the config file (a JSON object whose keys are the long options without dashes;
 * flags given on the command line win), open the store and recover its live sessions, start the
 * HTTP server, log `msg=listening`. SIGTERM / SIGINT: stop accepting and finish the requests in
 * flight, let the engine finish the steps that run and the store commit them, exit 0. Logs are
 * key=value lines on stderr: one per request at info level, service events at info/warn/error.
 *
 * A store failure (full disk, read-only or broken file) stops the work, not the process: from the
 * failed commit on nothing more is acted on (sessions stop, writing methods answer -32009 with the
 * store's error, /readyz answers 503), reads of what was committed still work, one error line is
 * logged, and when xgrd is then stopped it exits with status 4 (EXIT_STORE), so a supervisor sees
 * the failure. Everything committed is recovered by the next start on a working store. A store
 * that does not answer at all cannot hold the stop: --shutdown-timeout + 20 s after the signal
 * xgrd exits 4 without waiting for it (stop_watchdog).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli/opts.h"
#include "xgr/alloc.h"
#include "xgr/auth.h"
#include "xgr/chain.h"
#include "xgr/logfmt.h"
#include "xgr/rpc.h"
#include "xgr/secp.h"
#include "xgr/node.h"
#include "xgr/store.h"

#define EXIT_USAGE 2
#define EXIT_HARD 3
#define EXIT_STORE 4   /* the store failed while running (see above) */

#define MAX_OPERATORS 64   /* --operator addresses at most */

typedef struct opts {
  const char *listen, *store, *config, *auth, *port_file, *log_level, *sync, *control_contract, *metrics_listen;
  uint64_t chain_id;
  unsigned workers, threads, timeout_s, max_connections;
  unsigned long max_body;
  long first_step_timeout_ms, shutdown_timeout_ms;
  double time_scale;
  unsigned long store_max_pages;
  xgr_chain *chain;                 /* --chain (repeatable), NULL: none */
  xgr_api_map_entry api_map[32];    /* --api-map FROM=TO (repeatable) */
  size_t napi_map;
  xgr_outbound_policy *outbound;    /* --allow-outbound (repeatable), NULL: the default policy */
  unsigned long max_outbound, max_outbound_per_owner;   /* 0: the engine's defaults */
  const char *engine_key;           /* --engine-key FILE */
  unsigned long max_session_processes, max_session_steps;
  unsigned long max_session_bytes, max_owner_processes, max_owner_bytes;   /* quotas (0: defaults) */
  long long hibernate_after_ms;   /* 0: default; -1: off */
  const char *node_id;            /* cluster node id (PostgreSQL store; "auto": hostname:pid); NULL: single writer */
  const char *node_name;          /* the node's name in the audit trail without --node-id; NULL: the host name */
  unsigned long lease_ms;         /* 0: XGR_STORE_LEASE_MS */
  unsigned long store_writers;    /* 0: XGR_STORE_PG_WRITERS */
  unsigned long max_running;      /* 0: DEFAULT_MAX_RUNNING */
  long long session_ttl_s;        /* -1: not given ($XGR_SESSION_TTL_SECS, else DEFAULT_SESSION_TTL_S) */
  long long history_retention_s;  /* -1: not given (kept forever); 0: forever */
  long long batch_retention_s;    /* -1: not given (then XGR_STORE_BATCH_SECS); 0: forever */
  /* caps per client and owner (0: the default; docs/SECURITY.md, "Event streams and waiting calls") */
  unsigned max_migrate_sessions;
  unsigned max_validates_per_client, max_streams_per_client, max_streams_per_owner, max_streams, stream_max_secs;
  unsigned console_max_nonces, console_max_sessions, console_session_secs;
  const char *otlp_endpoint;      /* tracing (docs/OPERATIONS.md "Tracing"), NULL: off */
  unsigned long otlp_queue_spans; /* 0: XGR_NODE_DEFAULT_OTLP_QUEUE_SPANS */
  unsigned long batch_rate;       /* 0: XGR_NODE_DEFAULT_BATCH_RATE */
  const char *operators[MAX_OPERATORS];   /* --operator (repeatable; docs/SECURITY.md "Access: grants and operators") */
  size_t noperators;
  char grant_fee[72];             /* --grant-fee-wei as 0x-hex ("": 0x0) */
} opts;

#define DEFAULT_MAX_RUNNING 32          /* SEMANTICS: at most 32 processes of a session run at once */
#define DEFAULT_SESSION_TTL_S 86400     /* a finished process's row stays a day */

/* Every option, for getopt and for the keys of a --config file (the same names without dashes);
 * all take a value. set_opt gives each its meaning. */
static const struct option long_options[] = {
  {"listen", required_argument, NULL, 0}, {"store", required_argument, NULL, 0}, {"sync", required_argument, NULL, 0},
  {"workers", required_argument, NULL, 0}, {"threads", required_argument, NULL, 0},
  {"config", required_argument, NULL, 0}, {"auth", required_argument, NULL, 0},
  {"chain-id", required_argument, NULL, 0}, {"control-contract", required_argument, NULL, 0},
  {"metrics-listen", required_argument, NULL, 0}, {"max-body", required_argument, NULL, 0},
  {"max-connections", required_argument, NULL, 0}, {"timeout", required_argument, NULL, 0},
  {"first-step-timeout", required_argument, NULL, 0}, {"shutdown-timeout", required_argument, NULL, 0},
  {"log-level", required_argument, NULL, 0}, {"time-scale", required_argument, NULL, 0},
  {"hibernate-after", required_argument, NULL, 0}, {"node-id", required_argument, NULL, 0},
  {"node-name", required_argument, NULL, 0},
  {"lease-ms", required_argument, NULL, 0}, {"store-writers", required_argument, NULL, 0},
  {"store-max-pages", required_argument, NULL, 0}, {"max-session-processes", required_argument, NULL, 0},
  {"max-session-steps", required_argument, NULL, 0}, {"max-running", required_argument, NULL, 0},
  {"session-ttl", required_argument, NULL, 0}, {"history-retention", required_argument, NULL, 0},
  {"batch-retention", required_argument, NULL, 0},
  {"port-file", required_argument, NULL, 0}, {"chain", required_argument, NULL, 0},
  {"api-map", required_argument, NULL, 0}, {"engine-key", required_argument, NULL, 0},
  {"max-validates-per-client", required_argument, NULL, 0}, {"max-migrate-sessions", required_argument, NULL, 0}, {"max-streams-per-client", required_argument, NULL, 0},
  {"max-streams-per-owner", required_argument, NULL, 0}, {"max-streams", required_argument, NULL, 0},
  {"stream-max-secs", required_argument, NULL, 0},
  {"console-max-nonces", required_argument, NULL, 0}, {"console-max-sessions", required_argument, NULL, 0},
  {"console-session-secs", required_argument, NULL, 0},
  {"allow-outbound", required_argument, NULL, 0}, {"max-outbound", required_argument, NULL, 0},
  {"max-outbound-per-owner", required_argument, NULL, 0},
  {"max-session-bytes", required_argument, NULL, 0}, {"max-owner-processes", required_argument, NULL, 0},
  {"max-owner-bytes", required_argument, NULL, 0},
  {"otlp-endpoint", required_argument, NULL, 0}, {"otlp-queue-spans", required_argument, NULL, 0}, {"batch-rate", required_argument, NULL, 0},
  {"operator", required_argument, NULL, 0}, {"grant-fee-wei", required_argument, NULL, 0},
  {"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};

static void usage(FILE *f) {
  fprintf(f,
          "xgrd — the xgr daemon: JSON-RPC 2.0 over HTTP in front of the engine and the store\n\n"
          "usage: xgrd [options]\n\n"
          "  --listen ADDR:PORT     where to listen (default 127.0.0.1:8729; port 0 picks a free port)\n"
          "  --store URL            sqlite:FILE, a plain FILE path, memory: (default memory:, nothing survives), or\n"
          "                         a PostgreSQL database: postgresql://user@host:port/db or, on a unix socket,\n"
          "                         postgresql:///db?host=/socket/dir (a libpq URI; docs/STORE.md)\n"
          "  --sync full|normal     durability: every commit is on disk before it is acknowledged (full, default:\n"
          "                         SQLite synchronous=FULL, PostgreSQL synchronous_commit=on) or not (normal:\n"
          "                         WAL NORMAL / synchronous_commit=off; a crash may lose the last commits)\n"
          "  --workers N            engine worker threads (default: online CPUs)\n"
          "  --threads N            HTTP threads (default 8)\n"
          "  --config FILE          JSON object with any of these options without dashes (\"listen\", \"store\",\n"
          "                         \"workers\", \"max-running\", ...: a string or a number each); command-line\n"
          "                         flags win; an unknown key is refused, naming the nearest option\n"
          "  --auth permits|none    permits (default): every call that starts, controls or reads a session and\n"
          "                         every registry write carries a signed EIP-712 permit (docs/RPC.md, Permits);\n"
          "                         none: no signatures, the caller is the request's from/owner (loopback only)\n"
          "  --chain-id N           the chain id permits must name (default 1887 = 0x75f)\n"
          "  --control-contract A   control permits' verifyingContract (default\n"
          "                         " XGR_AUTH_DEFAULT_CONTROL_CONTRACT ")\n"
          "  --metrics-listen ADDR:PORT  serve GET /metrics on this address only (default: on --listen)\n"
          "  --max-body BYTES       request body cap (default 1048576)\n"
          "  --max-connections N    connection cap (default 1024)\n"
          "  --timeout SECONDS      a request's deadline: its headers and body must arrive, and its answer be\n"
          "                         taken, within it (default 15). It does not end an event stream (GET\n"
          "                         /ui/events): a stream ends with its permit or after --stream-max-secs\n"
          "  --first-step-timeout MS  how long xgr_validateDataTransfer waits for the first step (default 10000);\n"
          "                         it waits without holding an HTTP thread, also inside a batch\n"
          "  --max-validates-per-client N  xgr_validateDataTransfer calls in flight per client address (default\n"
          "                         16); one more is refused with -32005 naming the cap\n"
          "  --max-migrate-sessions N  sessions one xgr.migrateSessions call may name or select (default 1000;\n"
          "                         more are refused with -32005 at params.sessions naming the cap)\n"
          "  --max-streams-per-client N  open event streams (GET /ui/events) per client address (default 8)\n"
          "  --max-streams-per-owner N   open event streams per owner they read (default 32)\n"
          "  --max-streams N        open event streams in all (default: half of --max-connections, so JSON-RPC\n"
          "                         calls always have connections left; below --max-connections). A stream\n"
          "                         over a cap is refused with HTTP 429 naming it\n"
          "  --stream-max-secs N    an event stream ends after N seconds (default 3600; a stream opened with a\n"
          "                         permit ends when the permit expires, if that is sooner); the page reconnects\n"
          "  --console-max-nonces N   console sign-in nonces outstanding (default 1024; each lives 5 minutes; a new\n"
          "                         one when full evicts the oldest)\n"
          "  --console-max-sessions N live console sign-ins (default 256; a new one when full ends the one that\n"
          "                         expires first)\n"
          "  --console-session-secs N a console sign-in (its cookie) lasts N seconds (default 1800)\n"
          "  --shutdown-timeout MS  how long a graceful stop waits for running steps (default 30000); a store\n"
          "                         that does not answer cannot hold the stop: 20 s later xgrd exits 4\n"
          "  --log-level info|warn  info logs one line per request (default info)\n"
          "  --time-scale F         the engine clock runs F times faster than wall time (default 1; at most\n"
          "                         100000): waitSec 60 passes in 60 ms at 1000. The clock is Unix ms x F, so it\n"
          "                         goes on across restarts with the same F (tests and demos)\n"
          "  --hibernate-after MS   evict a session from memory when it waits with nothing due within MS ms of\n"
          "                         the engine clock, or only for wake-ups (default 5000; 0: at once; off: never);\n"
          "                         it is loaded again when called or shortly before its timer (SQLite and\n"
          "                         PostgreSQL stores, also on a cluster node; the memory store keeps every\n"
          "                         session)\n"
          "  --node-id ID           run as a node of a cluster of xgrd on one PostgreSQL store, with this id\n"
          "                         (auto: HOSTNAME:PID; at most 200 bytes). Nodes lease the sessions they run,\n"
          "                         take over those of stopped or dead nodes and forward control calls\n"
          "                         (docs/CLUSTER.md). Without it xgrd is the store's single writer: a second\n"
          "                         xgrd on the same schema is refused, and sessions may hibernate\n"
          "  --node-name NAME       this xgrd's name in the sessions' audit trail (who acted through which node;\n"
          "                         docs/STORE.md) when it is not a cluster node (default: the host name; at most\n"
          "                         200 bytes). A cluster node is named by its --node-id\n"
          "  --lease-ms N           how long a node's session leases last without a heartbeat (default 10000;\n"
          "                         100 to 3600000). A dead node's sessions move at once, a stalled one's after this\n"
          "  --store-writers N      PostgreSQL: writer connections a large group commit is spread over, its\n"
          "                         sessions divided among them (default 2; 1 to 8; docs/STORE.md)\n"
          "  --store-max-pages N    SQLite PRAGMA max_page_count: the store fails as on a full disk once the file\n"
          "                         reaches N pages (tests of the store-failure path; default unlimited)\n"
          "  --max-session-processes N  per-session cap on live processes; a session over it is killed with the\n"
          "                         reason on its processes (default 10000)\n"
          "  --max-session-steps N  per-session cap on steps run, likewise (default 1000000)\n"
          "  --max-session-bytes N  quota on the bytes a session's rows take in the store (payloads, history,\n"
          "                         join pieces, outbox; default 268435456 = 256 MiB): a session whose next\n"
          "                         write would go over it is aborted with the reason on its processes, and\n"
          "                         that write is not stored (docs/SECURITY.md)\n"
          "  --max-owner-processes N  quota on the live processes of all of an owner's sessions on this node\n"
          "                         (default 1000000): the session that takes the owner over it is aborted, and\n"
          "                         the owner's new sessions are refused (-32005) while it is reached\n"
          "  --max-owner-bytes N    quota on the stored bytes of all of an owner's sessions still in the store\n"
          "                         (default 4294967296 = 4 GiB; they count until retention deletes them), likewise\n"
          "  --max-running N        at most N processes of a session run at once (default 32; 1 to 100000); the\n"
          "                         rest wait their turn; a step whose branch declares a join is not held back\n"
          "  --session-ttl SECONDS  how long a finished process's row (and a finished session's processes in\n"
          "                         xgr.getSession / listSessions) is kept after it ended (default 86400, or\n"
          "                         $XGR_SESSION_TTL_SECS when set; 1 to 3153600000)\n"
          "  --otlp-endpoint URL    trace sessions: spans of sessions, steps, API and chain calls, joins and\n"
          "                         wake-ups go as OTLP/HTTP JSON to URL/v1/traces (an OpenTelemetry collector,\n"
          "                         e.g. http://127.0.0.1:4318); an xgr.enqueue's W3C traceparent header continues\n"
          "                         the caller's trace (default: off, nothing is built or sent)\n"
          "  --operator ADDR        an operator (repeatable, at most 64; in --config an array or a string): its\n"
          "                         permits read every owner's sessions (listings show them all) and control\n"
          "                         them (kill, pause, resume, wake); each action is in the session's audit\n"
          "                         trail with the operator's address (docs/SECURITY.md)\n"
          "  --grant-fee-wei N      what xgr_getGrantFeePerYear answers, in wei (decimal, or 0x-hex up to 256\n"
          "                         bits; default 0). xgr bills nothing: the value is reported only\n"
          "  --otlp-queue-spans N   spans waiting for export at most; more are dropped and counted in\n"
          "                         xgr_otlp_spans_dropped_total (default 65536; 1 to 10000000)\n"
          "  --batch-rate N         batch operations (xgr batch, xgr.batchStart) act on at most N sessions a\n"
          "                         second, so live traffic keeps its latency (default 200; 1 to 100000)\n"
          "  --batch-retention SECONDS  how long a finished (done, cancelled, failed) batch operation is kept\n"
          "                         after it ended (default 2592000 = 30 days; 0: forever; a running one always)\n"
          "  --history-retention SECONDS  how long step history (proc_steps, xgr history, getSession's timeline)\n"
          "                         and finished session rows are kept (default 0: forever)\n"
          "  --port-file FILE       write the bound port to FILE once ready, mode 0600 (for tests and scripts)\n"
          "  --chain URL            Ethereum JSON-RPC node (the default backend): contract reads, and registries\n"
          "                         named by an XRC-729 address (xrc729/orchestration + ostcId) read from the chain\n"
          "  --chain NAME=URL       a named backend for reads whose \"rpc\" selects it (repeatable)\n"
          "  --api-map FROM=TO      rewrite API URLs starting with FROM to start with TO (repeatable)\n"
          "  --allow-outbound CIDR  let rules' API calls connect to these addresses although the outbound policy\n"
          "                         refuses them by default (loopback, link-local incl. 169.254.169.254, private,\n"
          "                         CGNAT, unspecified, multicast, reserved; checked on the resolved address when\n"
          "                         connecting). A CIDR, an address, or loopback, link-local, private, cgnat,\n"
          "                         unspecified, multicast, reserved, any; comma-separated or repeated. The --chain\n"
          "                         endpoints are always allowed (docs/SECURITY.md, Outbound calls)\n"
          "  --max-outbound N       at most N API calls in flight at once; the others wait, holding no socket\n"
          "                         (default %u; 1 to 100000)\n"
          "  --max-outbound-per-owner N  at most N of them for one owner's sessions (default %u; 1 to 100000)\n"
          "  --engine-key FILE      private key (64 hex, mode 0600) that signs the steps' executions as EIP-1559\n"
          "                         transactions on the --chain node, each exactly once across crashes: journaled\n"
          "                         beside an SQLite store (PATH-exec), in a PostgreSQL store's database (table\n"
          "                         exec_journal), in memory with a memory store. Cluster nodes (--node-id) share\n"
          "                         that table and take turns sending: one node at a time (docs/CLUSTER.md)\n"
          "  --help                 this text\n\n"
          "Endpoints: POST / (JSON-RPC), GET /metrics, GET /healthz, GET /readyz. Methods: docs/RPC.md.\n",
          XGR_ENGINE_DEFAULT_MAX_OUTBOUND, XGR_ENGINE_DEFAULT_MAX_OUTBOUND_PER_OWNER);
}

/* xgrd's own log lines go to stderr in logfmt (xgr/logfmt.h), like the service's. */
static void log_start(xgr_logfmt *l, const char *level, const char *msg) { xgr_logfmt_begin(l, true, level, msg); }
static void log_end(const xgr_logfmt *l) { xgr_logfmt_write(l, stderr); }

/* level=error msg=MSG KEY=VALUE error="ERROR" */
/* The stop's last resort: a store that does not answer at all (a hung server: no error, no
 * timeout) holds the threads waiting on it, and a graceful stop would wait for ever. Started at
 * the stop signal, this thread waits `ms` and then ends the process with EXIT_STORE; what was
 * committed is in the store, and what was not is done again by the next start (steps run at
 * least once, as after a crash). */
static void *stop_watchdog(void *arg) {
  long ms = (long)(intptr_t)arg;
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) && errno == EINTR) {}
  xgr_logfmt l;
  xgr_logfmt_begin(&l, true, "error", "not stopped in time: the store does not answer; exiting without waiting");
  xgr_logfmt_i64(&l, "waited_ms", ms);
  xgr_logfmt_u64(&l, "exit", EXIT_STORE);
  xgr_logfmt_write(&l, stderr);
  _exit(EXIT_STORE);
  return NULL;
}

static void log_fail(const char *msg, const char *key, const char *value, const char *error) {
  xgr_logfmt l;
  log_start(&l, "error", msg);
  xgr_logfmt_str(&l, key, value);
  xgr_logfmt_quoted(&l, "error", error);
  log_end(&l);
}

/* xgr_auth_config.mark_once on the daemon's store (ctx): used control permits are kept there, so
 * a permit used before a restart stays used after it. */
static int mark_permit_once(void *ctx, const char *key, int64_t expires_at, int64_t now, xgr_error *err) {
  return xgr_store_mark_once(ctx, key, expires_at, now, err);
}

static int parse_uint(const char *flag, const char *v, unsigned long max, unsigned long *out) {
  char *end;
  errno = 0;
  unsigned long u = v && *v ? strtoul(v, &end, 10) : 0;
  if (!v || !*v || *end || errno || u > max) {
    fprintf(stderr, "xgrd: %s is \"%s\"; expected a whole number up to %lu\n", flag, v ? v : "", max);
    return -1;
  }
  *out = u;
  return 0;
}

/* parse_uint for a count that must be at least 1: 0 is refused naming the range. */
static int parse_count(const char *flag, const char *v, unsigned long max, unsigned long *out) {
  if (parse_uint(flag, v, max, out)) return -1;
  if (!*out) {
    fprintf(stderr, "xgrd: %s is 0; expected 1 to %lu\n", flag, max);
    return -1;
  }
  return 0;
}

/* Set one option by name (without dashes) from its text. */
static int set_opt(opts *o, const char *name, const char *v) {
  unsigned long u;
  if (!strcmp(name, "listen")) o->listen = v;
  else if (!strcmp(name, "store")) o->store = v;
  else if (!strcmp(name, "auth")) o->auth = v;
  else if (!strcmp(name, "port-file")) o->port_file = v;
  else if (!strcmp(name, "log-level")) o->log_level = v;
  else if (!strcmp(name, "sync")) o->sync = v;
  else if (!strcmp(name, "config")) o->config = v;
  else if (!strcmp(name, "control-contract")) o->control_contract = v;
  else if (!strcmp(name, "metrics-listen")) o->metrics_listen = v;
  else if (!strcmp(name, "chain-id")) {
    char *end;
    errno = 0;
    int hex = v && v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
    unsigned long long c = v && *v && *v != '-' ? strtoull(v, &end, hex ? 16 : 10) : 0;
    if (!v || !*v || *v == '-' || *end || errno || !c) {
      fprintf(stderr, "xgrd: --chain-id is \"%s\"; expected a chain id above 0 (decimal or 0x-hex)\n", v ? v : "");
      return -1;
    }
    o->chain_id = c;
  }
  else if (!strcmp(name, "workers")) { if (parse_uint("--workers", v, 1024, &u)) return -1; o->workers = (unsigned)u; }
  else if (!strcmp(name, "threads")) { if (parse_uint("--threads", v, 1024, &u) || !u) return -1; o->threads = (unsigned)u; }
  else if (!strcmp(name, "timeout")) { if (parse_uint("--timeout", v, 3600, &u) || !u) return -1; o->timeout_s = (unsigned)u; }
  else if (!strcmp(name, "max-connections")) { if (parse_uint("--max-connections", v, 1000000, &u) || !u) return -1; o->max_connections = (unsigned)u; }
  else if (!strcmp(name, "max-body")) { if (parse_uint("--max-body", v, 1ul << 30, &u) || !u) return -1; o->max_body = u; }
  else if (!strcmp(name, "first-step-timeout")) { if (parse_uint("--first-step-timeout", v, 3600000, &u)) return -1; o->first_step_timeout_ms = (long)u; }
  else if (!strcmp(name, "time-scale")) {
    char *end;
    errno = 0;
    double f = v ? strtod(v, &end) : 0;
    if (!v || !*v || *end || errno || !(f > 0) || f > 100000) {
      fprintf(stderr, "xgrd: --time-scale is \"%s\"; expected a number above 0, at most 100000\n", v ? v : "");
      return -1;
    }
    o->time_scale = f;
  }
  else if (!strcmp(name, "chain")) {
    if (!v) {
      fprintf(stderr, "xgrd: --chain needs a URL\n");
      return -1;
    }
    if (xgr_cli_chain_arg("xgrd", v, &o->chain)) return -1;
  }
  else if (!strcmp(name, "engine-key")) o->engine_key = v;
  else if (!strcmp(name, "api-map")) {
    char *copy = xgr_alloc_strdup(v ? v : "");   /* lives as long as xgrd (freed through api_map[i].from) */
    if (xgr_cli_api_map_arg("xgrd", copy, o->api_map, &o->napi_map, sizeof o->api_map / sizeof o->api_map[0])) {
      free(copy);
      return -1;
    }
  }
  else if (!strcmp(name, "allow-outbound")) { if (xgr_cli_outbound_arg("xgrd", v, &o->outbound)) return -1; }
  else if (!strcmp(name, "max-outbound") || !strcmp(name, "max-outbound-per-owner")) {
    char flag[32];
    snprintf(flag, sizeof flag, "--%s", name);
    if (parse_uint(flag, v, 100000, &u)) return -1;
    if (!u) {
      fprintf(stderr, "xgrd: %s is 0; expected 1 to 100000\n", flag);
      return -1;
    }
    if (!strcmp(name, "max-outbound")) o->max_outbound = u;
    else o->max_outbound_per_owner = u;
  }
  else if (!strcmp(name, "hibernate-after")) {
    if (v && !strcmp(v, "off")) o->hibernate_after_ms = -1;
    else if (parse_uint("--hibernate-after", v, 86400000UL * 365, &u)) return -1;
    else o->hibernate_after_ms = u ? (long long)u : 1;   /* 0: evict at once (1 ms) */
  }
  else if (!strcmp(name, "node-id")) {
    if (!v || !*v || strlen(v) > 200) {
      fprintf(stderr, "xgrd: --node-id \"%.60s\": expected 1 to 200 bytes\n", v ? v : "");
      return -1;
    }
    o->node_id = v;
  }
  else if (!strcmp(name, "node-name")) {
    if (!v || !*v || strlen(v) > 200) {
      fprintf(stderr, "xgrd: --node-name \"%.60s\": expected 1 to 200 bytes\n", v ? v : "");
      return -1;
    }
    o->node_name = v;
  }
  else if (!strcmp(name, "lease-ms")) {
    if (parse_uint("--lease-ms", v, 3600000UL, &u)) return -1;
    if (u < 100) {
      fprintf(stderr, "xgrd: --lease-ms is %lu; expected 100 to 3600000\n", u);
      return -1;
    }
    o->lease_ms = u;
  }
  else if (!strcmp(name, "store-writers")) {
    if (parse_uint("--store-writers", v, XGR_STORE_PG_WRITERS_MAX, &u)) return -1;
    if (u < 1) {
      fprintf(stderr, "xgrd: --store-writers is %lu; expected 1 to %d\n", u, XGR_STORE_PG_WRITERS_MAX);
      return -1;
    }
    o->store_writers = u;
  }
  else if (!strcmp(name, "store-max-pages")) { if (parse_uint("--store-max-pages", v, 0xffffffffUL, &u)) return -1; o->store_max_pages = u; }
  else if (!strcmp(name, "max-session-processes")) { if (parse_uint("--max-session-processes", v, 100000000UL, &u) || !u) return -1; o->max_session_processes = u; }
  else if (!strcmp(name, "max-session-bytes")) { if (parse_uint("--max-session-bytes", v, 1ul << 50, &u) || !u) return -1; o->max_session_bytes = u; }
  else if (!strcmp(name, "max-owner-processes")) { if (parse_uint("--max-owner-processes", v, 1000000000UL, &u) || !u) return -1; o->max_owner_processes = u; }
  else if (!strcmp(name, "max-owner-bytes")) { if (parse_uint("--max-owner-bytes", v, 1ul << 50, &u) || !u) return -1; o->max_owner_bytes = u; }
  else if (!strcmp(name, "otlp-endpoint")) {
    xgr_error e;
    if (xgr_node_check_otlp_endpoint(v, &e)) {
      fprintf(stderr, "xgrd: --%s: %s\n", e.path, e.message);
      return -1;
    }
    o->otlp_endpoint = v;
  }
  else if (!strcmp(name, "batch-rate")) { if (parse_count("--batch-rate", v, XGR_NODE_MAX_BATCH_RATE, &u)) return -1; o->batch_rate = u; }
  else if (!strcmp(name, "operator")) {
    if (!v || !xgr_rpc_is_address(v)) {
      fprintf(stderr, "xgrd: --operator \"%.60s\": expected an address (0x + 40 hex)\n", v ? v : "");
      return -1;
    }
    if (o->noperators == MAX_OPERATORS) {
      fprintf(stderr, "xgrd: --operator: at most %d operators\n", MAX_OPERATORS);
      return -1;
    }
    o->operators[o->noperators++] = v;
  }
  else if (!strcmp(name, "grant-fee-wei")) {
    bool hex = v && v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
    const char *digits = hex ? v + 2 : v;
    size_t nd = digits ? strlen(digits) : 0;
    bool ok = nd > 0 && nd <= (hex ? 64u : 19u) && strspn(digits, hex ? "0123456789abcdefABCDEF" : "0123456789") == nd;
    if (!ok) {
      fprintf(stderr, "xgrd: --grant-fee-wei \"%.80s\": expected wei as a decimal number (up to 19 digits) or 0x + up "
                      "to 64 hex digits\n", v ? v : "");
      return -1;
    }
    if (hex) {
      while (nd > 1 && *digits == '0') digits++, nd--;
      snprintf(o->grant_fee, sizeof o->grant_fee, "0x%s", digits);
      for (char *c = o->grant_fee + 2; *c; c++)
        if (*c >= 'A' && *c <= 'F') *c = (char)(*c - 'A' + 'a');
    } else {
      snprintf(o->grant_fee, sizeof o->grant_fee, "0x%llx", strtoull(digits, NULL, 10));
    }
  }
  else if (!strcmp(name, "otlp-queue-spans")) { if (parse_count("--otlp-queue-spans", v, 10000000UL, &u)) return -1; o->otlp_queue_spans = u; }
  else if (!strcmp(name, "max-session-steps")) { if (parse_uint("--max-session-steps", v, 0xffffffffffffUL, &u) || !u) return -1; o->max_session_steps = u; }
  else if (!strcmp(name, "max-running")) { if (parse_count("--max-running", v, 100000, &u)) return -1; o->max_running = u; }
  else if (!strcmp(name, "session-ttl")) {
    if (parse_uint("--session-ttl", v, 3153600000UL, &u)) return -1;
    if (!u) {
      fprintf(stderr, "xgrd: --session-ttl is 0; expected 1 to 3153600000 seconds\n");
      return -1;
    }
    o->session_ttl_s = (long long)u;
  }
  else if (!strcmp(name, "batch-retention")) {
    if (parse_uint("--batch-retention", v, 3153600000UL, &u)) return -1;
    o->batch_retention_s = (long long)u;
  }
  else if (!strcmp(name, "history-retention")) {
    if (parse_uint("--history-retention", v, 3153600000UL, &u)) return -1;
    o->history_retention_s = (long long)u;
  }
  else if (!strcmp(name, "max-migrate-sessions")) { if (parse_uint("--max-migrate-sessions", v, 1000000, &u) || !u) return -1; o->max_migrate_sessions = (unsigned)u; }
  else if (!strcmp(name, "max-validates-per-client")) { if (parse_uint("--max-validates-per-client", v, 1000000, &u) || !u) return -1; o->max_validates_per_client = (unsigned)u; }
  else if (!strcmp(name, "max-streams-per-client")) { if (parse_uint("--max-streams-per-client", v, 1000000, &u) || !u) return -1; o->max_streams_per_client = (unsigned)u; }
  else if (!strcmp(name, "max-streams-per-owner")) { if (parse_uint("--max-streams-per-owner", v, 1000000, &u) || !u) return -1; o->max_streams_per_owner = (unsigned)u; }
  else if (!strcmp(name, "max-streams")) { if (parse_uint("--max-streams", v, 1000000, &u) || !u) return -1; o->max_streams = (unsigned)u; }
  else if (!strcmp(name, "stream-max-secs")) { if (parse_uint("--stream-max-secs", v, 31536000, &u) || !u) return -1; o->stream_max_secs = (unsigned)u; }
  else if (!strcmp(name, "console-max-nonces")) { if (parse_count("--console-max-nonces", v, 1000000, &u)) return -1; o->console_max_nonces = (unsigned)u; }
  else if (!strcmp(name, "console-max-sessions")) { if (parse_count("--console-max-sessions", v, 1000000, &u)) return -1; o->console_max_sessions = (unsigned)u; }
  else if (!strcmp(name, "console-session-secs")) { if (parse_count("--console-session-secs", v, 604800, &u)) return -1; o->console_session_secs = (unsigned)u; }
  else if (!strcmp(name, "shutdown-timeout")) { if (parse_uint("--shutdown-timeout", v, 3600000, &u)) return -1; o->shutdown_timeout_ms = (long)u; }
  else {
    assert(!"an option of long_options without a meaning in set_opt");
    return -1;
  }
  return 0;
}

/* Apply the options of a config file (a JSON object: option name without dashes -> string or
 * number) to o. Command-line flags are applied afterwards, so they win. The strings stay alive in
 * the returned document (freed at exit); NULL on error (reported). */
static json_t *load_config(const char *path, opts *o) {
  json_error_t je;
  json_t *c = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
  if (!c) {
    fprintf(stderr, "xgrd: --config %s: %s (line %d)\n", path, je.text, je.line);
    return NULL;
  }
  if (!json_is_object(c)) {
    fprintf(stderr, "xgrd: --config %s: expected a JSON object of options\n", path);
    json_decref(c);
    return NULL;
  }
  const char *k;
  json_t *v;
  json_object_foreach(c, k, v) {
    char buf[40];
    const char *text;
    const struct option *opt = long_options;
    while (opt->name && strcmp(opt->name, k)) opt++;
    if (!opt->name || opt->has_arg != required_argument || !strcmp(k, "config")) {
      const char *near = xgr_cli_nearest_option(k, long_options);
      if (near && (!strcmp(near, "config") || !strcmp(near, "help"))) near = NULL;
      fprintf(stderr, "xgrd: --config %s: unknown key \"%s\"%s%s%s (the keys are xgrd's options without dashes; xgrd "
              "--help)\n", path, k, near ? "; did you mean \"" : "", near ? near : "", near ? "\"?" : "");
      json_decref(c);
      return NULL;
    }
    if (json_is_array(v) && !strcmp(k, "operator")) {   /* repeatable: each element */
      size_t i;
      json_t *e;
      json_array_foreach(v, i, e) {
        if (!json_is_string(e) || set_opt(o, k, json_string_value(e))) {
          fprintf(stderr, "xgrd: --config %s: \"operator\"[%zu] is not accepted (an address string each)\n", path, i);
          json_decref(c);
          return NULL;
        }
      }
      continue;
    }
    if (json_is_string(v)) {
      text = json_string_value(v);
    } else if (json_is_integer(v)) {
      snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
      text = buf;
    } else if (json_is_real(v)) {
      snprintf(buf, sizeof buf, "%.17g", json_real_value(v));
      text = buf;
    } else {
      fprintf(stderr, "xgrd: --config %s: \"%s\" must be a string or a number\n", path, k);
      json_decref(c);
      return NULL;
    }
    if (set_opt(o, k, text)) {
      fprintf(stderr, "xgrd: --config %s: option \"%s\" is not accepted\n", path, k);
      json_decref(c);
      return NULL;
    }
  }
  return c;
}

/* Parse argv into o (pass 1 only looks for --config). */
static int parse_args(int argc, char **argv, opts *o, bool config_only) {
  int ch, idx;
  optind = 0;   /* getopt starts afresh in each pass */
  while ((ch = (idx = -1, xgr_cli_getopt_index(argc, argv, "", long_options, "xgrd", &idx))) != -1) {
    if (ch == '?') return -1;   /* reported */
    if (ch == 'h') {   /* --help, or a prefix of it */
      usage(stdout);
      return 1;
    }
    assert(idx >= 0);
    const char *name = long_options[idx].name;
    if (config_only != !strcmp(name, "config")) continue;
    if (set_opt(o, name, optarg)) return -1;
  }
  if (optind < argc) {
    fprintf(stderr, "xgrd: unexpected argument \"%s\" (every value goes with its option; xgrd --help)\n", argv[optind]);
    return -1;
  }
  return 0;
}

static int xgrd(int argc, char **argv, opts *o) {
  o->session_ttl_s = o->history_retention_s = o->batch_retention_s = -1;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  json_t *cfgdoc = NULL;
  int prc = parse_args(argc, argv, o, true);
  if (prc) return prc > 0 ? 0 : EXIT_USAGE;
  if (o->config && !(cfgdoc = load_config(o->config, o))) return EXIT_USAGE;
  if (parse_args(argc, argv, o, false)) {
    json_decref(cfgdoc);
    return EXIT_USAGE;
  }
  if (o->session_ttl_s < 0) {   /* the environment is a fallback of the flag (the library reads none) */
    const char *e = getenv("XGR_SESSION_TTL_SECS");
    unsigned long u = 0;
    if (e && *e && parse_uint("$XGR_SESSION_TTL_SECS", e, 3153600000UL, &u)) {
      json_decref(cfgdoc);
      return EXIT_USAGE;
    }
    o->session_ttl_s = e && *e && u ? (long long)u : DEFAULT_SESSION_TTL_S;
  }
  if (o->history_retention_s < 0) o->history_retention_s = 0;
  if (o->batch_retention_s < 0) o->batch_retention_s = XGR_STORE_BATCH_SECS;
  if (!o->max_running) o->max_running = DEFAULT_MAX_RUNNING;
  if (!o->workers) {   /* the engine's default, made explicit so that the log says how many run */
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    o->workers = n > 0 ? (unsigned)n : 1;
  }
  /* event streams take connections: by default at most half of them, so JSON-RPC calls always
   * have connections left; a cap at or above the connection cap would let streams take them all */
  unsigned conn_cap = o->max_connections ? o->max_connections : 1024;
  if (!o->max_streams) o->max_streams = conn_cap / 2 ? conn_cap / 2 : 1;
  if (o->max_streams >= conn_cap && conn_cap > 1) {
    fprintf(stderr, "xgrd: --max-streams is %u; expected fewer than --max-connections (%u), so that JSON-RPC calls "
            "always have connections left\n", o->max_streams, conn_cap);
    return EXIT_USAGE;
  }
  if (o->auth && strcmp(o->auth, "none") && strcmp(o->auth, "permits")) {
    fprintf(stderr, "xgrd: --auth %s: expected permits (the default) or none\n", o->auth);
    return EXIT_USAGE;
  }
  bool auth_none = o->auth && !strcmp(o->auth, "none");
  xgr_auth_config ac = {.none = auth_none, .chain_id = o->chain_id, .control_contract = o->control_contract};
  xgr_error aerr;
  xgr_auth *auth = xgr_auth_new(&ac, &aerr);   /* checked here; made again with the store below */
  if (!auth) {
    fprintf(stderr, "xgrd: --%s: %s\n", aerr.path, aerr.message);
    return EXIT_USAGE;
  }
  bool info = !o->log_level || !strcmp(o->log_level, "info");
  if (o->log_level && strcmp(o->log_level, "info") && strcmp(o->log_level, "warn")) {
    fprintf(stderr, "xgrd: --log-level %s: expected info or warn\n", o->log_level);
    return EXIT_USAGE;
  }
  if (o->sync && strcmp(o->sync, "full") && strcmp(o->sync, "normal")) {
    fprintf(stderr, "xgrd: --sync %s: expected full or normal\n", o->sync);
    return EXIT_USAGE;
  }

  /* signals: every thread created from here on inherits the mask; main waits for them */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);

  xgr_error err;
  xgr_error_clear(&err);
  int rc = 0;
  xgr_rpc_config rc_cfg = {.listen = o->listen ? o->listen : "127.0.0.1:8729",
                           .max_body = o->max_body,
                           .max_connections = o->max_connections,
                           .timeout_s = o->timeout_s,
                           .threads = o->threads ? o->threads : 8,
                           .auth_none = auth_none,
                           .auth = auth,
                           .metrics_listen = o->metrics_listen,
                           .log = info ? stderr : NULL,
                           .errlog = stderr};
  rc_cfg.start_closed = true;
  xgr_rpc_server *srv = xgr_rpc_server_new(&rc_cfg, &err);
  if (!srv) {
    log_fail("cannot configure the server", "path", err.path, err.message);
    xgr_auth_free(auth);
    curl_global_cleanup();
    json_decref(cfgdoc);
    /* a malformed address is a usage error; an address xgrd may not listen on is a failure to start */
    return err.code == XGR_EINVAL ? EXIT_USAGE : EXIT_HARD;
  }
  /* --node-id on a PostgreSQL store: this xgrd is a cluster node (docs/CLUSTER.md); "auto" is
   * HOSTNAME:PID. Without it, it is the schema's single writer (and may hibernate sessions). */
  bool pg_store = xgr_store_url_is_postgres(o->store);
  char node_buf[300] = "";
  if (o->node_id && pg_store) {
    if (strcmp(o->node_id, "auto")) {
      snprintf(node_buf, sizeof node_buf, "%s", o->node_id);
    } else {
      char hn[256] = "";
      if (gethostname(hn, sizeof hn - 1)) snprintf(hn, sizeof hn, "localhost");
      snprintf(node_buf, sizeof node_buf, "%s:%ld", hn, (long)getpid());
    }
  }
  /* executions: the engine key's executor, its journal beside the store file or in the store's
   * PostgreSQL database; on a cluster node that table is shared and one node at a time sends */
  xgr_secp *secp = NULL;
  xgr_chain_executor *executor = NULL;
  if (o->engine_key) {
    if (!o->chain) {
      fprintf(stderr, "xgrd: --engine-key needs --chain URL (the node executions are sent to)\n");
      xgr_rpc_server_free(srv);
      xgr_auth_free(auth);
      curl_global_cleanup();
      json_decref(cfgdoc);
      return EXIT_USAGE;
    }
    uint8_t key[32];
    char journal[4096] = "";
    const char *sp = o->store ? (!strncmp(o->store, "sqlite:", 7) ? o->store + 7 : strncmp(o->store, "memory:", 7) ? o->store : NULL) : NULL;
    bool pg = xgr_store_url_is_postgres(sp);
    if (sp && !pg) snprintf(journal, sizeof journal, "%s-exec", sp);
    const char *where = pg ? sp : sp ? journal : NULL;   /* PostgreSQL: the table exec_journal in the store's database */
    secp = xgr_secp_new();
    bool key_ok = secp && !xgr_secp_key_load(secp, o->engine_key, key, &err);
    if (key_ok && *node_buf)
      executor = xgr_chain_executor_new_node(o->chain, secp, key, sp, node_buf,
                                             o->lease_ms ? (int64_t)o->lease_ms : XGR_STORE_LEASE_MS, stderr, &err);
    else if (key_ok)
      executor = xgr_chain_executor_new(o->chain, secp, key, where, stderr, &err);
    if (!executor) {
      log_fail("cannot start the executor", "engine_key", o->engine_key, secp ? err.message : "no secp256k1 context");
      memset(key, 0, sizeof key);
      xgr_secp_free(secp);
      xgr_rpc_server_free(srv);
      xgr_auth_free(auth);
      curl_global_cleanup();
      json_decref(cfgdoc);
      /* a bad key file is a usage error; a journal that cannot be opened (or is in use) a failure to
       * start, as for the store */
      return key_ok ? EXIT_HARD : EXIT_USAGE;
    }
    memset(key, 0, sizeof key);
    xgr_logfmt l;
    log_start(&l, "info", "executions enabled");
    xgr_logfmt_str(&l, "from", xgr_chain_executor_address(executor));
    xgr_logfmt_quoted(&l, "journal", xgr_chain_executor_journal(executor));
    log_end(&l);
  }
  /* listen first: while the store's sessions are recovered, /readyz answers 503 and every call a
   * clear -32009, instead of clients seeing "connection refused" */
  if (xgr_rpc_start(srv, &err)) {
    log_fail("cannot listen", "listen", rc_cfg.listen, err.message);
    xgr_rpc_server_free(srv);
    xgr_auth_free(auth);
    curl_global_cleanup();
    json_decref(cfgdoc);
    return EXIT_HARD;
  }
  char host[64];
  snprintf(host, sizeof host, "%s", rc_cfg.listen);
  char *colon = strrchr(host, ':');
  if (colon) *colon = '\0';
  xgr_logfmt l;
  log_start(&l, "info", "listening");
  xgr_logfmt_printf(&l, "addr", "%s:%u", host, xgr_rpc_port(srv));
  xgr_logfmt_str(&l, "auth", auth_none ? "none" : "permits");
  xgr_logfmt_str(&l, "ready", "false");
  log_end(&l);
  xgr_node_config dc = {.store = o->store,
                        .store_sync = o->sync && !strcmp(o->sync, "normal"),
                        .workers = o->workers,
                        .max_running = (uint32_t)o->max_running,
                        .session_ttl_secs = o->session_ttl_s,
                        .history_secs = o->history_retention_s,
                        .batch_secs = o->batch_retention_s ? o->batch_retention_s : -1,   /* 0: forever */
                        .log = stderr,
                        .time_scale = o->time_scale,
                        .store_max_pages = (uint32_t)o->store_max_pages,
                        .chain = o->chain,
                        .api_map = o->api_map,
                        .napi_map = o->napi_map,
                        .outbound = o->outbound,
                        .max_outbound = (uint32_t)o->max_outbound,
                        .max_outbound_per_owner = (uint32_t)o->max_outbound_per_owner,
                        .executor = executor,
                        .max_live = o->max_session_processes,
                        .max_session_steps = o->max_session_steps,
                        .max_session_bytes = o->max_session_bytes,
                        .max_owner_processes = o->max_owner_processes,
                        .max_owner_bytes = o->max_owner_bytes,
                        .metrics = xgr_rpc_metrics(srv),
                        .hibernate_after_ms = o->hibernate_after_ms,
                        .lease_ms = (int64_t)o->lease_ms,
                        .store_writers = (int)o->store_writers,
                        .otlp_endpoint = o->otlp_endpoint,
                        .otlp_queue_spans = o->otlp_queue_spans, .batch_rate = (uint32_t)o->batch_rate,
                        .operators = o->operators,
                        .noperators = o->noperators};
  if (*node_buf) dc.node_id = node_buf;
  dc.node_name = o->node_name;
  char store_name[512];   /* the store as logged: no password */
  char *redacted = xgr_store_url_redacted(o->store ? o->store : "memory:");
  snprintf(store_name, sizeof store_name, "%s", redacted);
  free(redacted);
  log_start(&l, "info", "starting");
  xgr_logfmt_str(&l, "store", store_name);
  xgr_logfmt_u64(&l, "workers", o->workers);
  xgr_logfmt_printf(&l, "time_scale", "%g", o->time_scale > 0 ? o->time_scale : 1.0);
  xgr_logfmt_u64(&l, "max_running", o->max_running);
  xgr_logfmt_i64(&l, "session_ttl_s", o->session_ttl_s);
  xgr_logfmt_i64(&l, "history_retention_s", o->history_retention_s);
  xgr_logfmt_i64(&l, "batch_retention_s", o->batch_retention_s);
  log_end(&l);
  /* the node (store, engine), its JSON-RPC service subscribed to its events, then recovery */
  xgr_node *node = xgr_node_new(&dc, &err);
  xgr_rpcd_config sc = {.first_step_timeout_ms = o->first_step_timeout_ms,
                        .max_validates_per_client = o->max_validates_per_client,
                        .max_migrate_sessions = o->max_migrate_sessions,
                        .max_streams_per_client = o->max_streams_per_client,
                        .max_streams_per_owner = o->max_streams_per_owner,
                        .max_streams = o->max_streams,
                        .stream_max_secs = o->stream_max_secs,
                        .console_max_nonces = o->console_max_nonces,
                        .console_max_sessions = o->console_max_sessions,
                        .console_session_secs = o->console_session_secs,
                        .grant_fee_wei = o->grant_fee};
  xgr_rpcd *d = node ? xgr_rpcd_new(node, &sc, &err) : NULL;
  if (!d || xgr_rpcd_register(d, srv) || xgr_node_recover(node, &err)) {
    log_fail("cannot start the service", "path", err.path, err.message);
    xgr_rpc_server_free(srv);
    xgr_node_free(node);
    xgr_rpcd_free(d);
    xgr_auth_free(auth);
    xgr_chain_executor_free(executor);
    xgr_secp_free(secp);
    curl_global_cleanup();
    json_decref(cfgdoc);
    return EXIT_HARD;
  }
  /* used control permits are kept in the store: the server's permit gate is made again with it
   * before the server opens (nothing used the first one: every call was refused until then) */
  ac.mark_ctx = xgr_node_store(node);
  ac.mark_once = ac.mark_ctx ? mark_permit_once : NULL;
  xgr_auth *sauth = xgr_auth_new(&ac, &aerr);
  if (!sauth) {
    log_fail("cannot start the service", "path", aerr.path, aerr.message);
    xgr_rpc_server_free(srv);
    xgr_node_free(node);
    xgr_rpcd_free(d);
    xgr_auth_free(auth);
    xgr_chain_executor_free(executor);
    xgr_secp_free(secp);
    curl_global_cleanup();
    json_decref(cfgdoc);
    return EXIT_HARD;
  }
  xgr_rpc_set_auth(srv, sauth);
  xgr_auth_free(auth);
  auth = sauth;
  xgr_rpc_open(srv, xgr_rpcd_ready, d);
  size_t restored, failed, hibernated;
  xgr_node_recovered(node, &restored, &failed, &hibernated);
  log_start(&l, "info", "ready");
  xgr_logfmt_printf(&l, "addr", "%s:%u", host, xgr_rpc_port(srv));
  xgr_logfmt_str(&l, "auth", auth_none ? "none" : "permits");
  xgr_logfmt_u64(&l, "chain_id", xgr_auth_chain_id(auth));
  xgr_logfmt_str(&l, "control_contract", xgr_auth_control_contract(auth));
  xgr_logfmt_u64(&l, "recovered", restored);
  xgr_logfmt_u64(&l, "recover_failed", failed);
  xgr_logfmt_u64(&l, "hibernated", hibernated);
  xgr_logfmt_u64(&l, "workers", o->workers);
  log_end(&l);
  if (o->metrics_listen) {
    log_start(&l, "info", "metrics listening");
    xgr_logfmt_str(&l, "addr", o->metrics_listen);
    xgr_logfmt_u64(&l, "port", xgr_rpc_metrics_port(srv));
    log_end(&l);
  }
  /* the port file is written once xgrd is ready, so that whoever waits for it can work at once
   * (the port is also in the msg=listening line logged before recovery) */
  if (o->port_file) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", o->port_file);
    /* 0600: the port file is nobody else's business */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f && fd >= 0) close(fd);
    if (!f || fprintf(f, "%u\n", xgr_rpc_port(srv)) < 0 || fclose(f) || rename(tmp, o->port_file)) {
      log_start(&l, "error", "cannot write the port file");
      xgr_logfmt_str(&l, "file", o->port_file);
      log_end(&l);
      rc = EXIT_HARD;
    }
  }
  /* wait for a signal; watch the store meanwhile (its failure is logged once, xgrd keeps serving
   * reads and refusing writes until it is stopped) */
  int sig = 0;
  bool store_failed = false;
  int chain_ticks = 0;
  while (!rc) {
    struct timespec tick = {0, 200 * 1000000L};
    sig = sigtimedwait(&set, NULL, &tick);
    if (sig > 0) break;
    sig = 0;
    if (o->chain && ++chain_ticks == 10) {   /* every 2 s: health probe and cache refresh from logs */
      chain_ticks = 0;
      xgr_node_chain_tick(node);
    }
    xgr_error se;
    if (!store_failed && xgr_node_store_failed(node, &se)) {
      store_failed = true;
      log_fail("store failed: no more work is accepted (writes answer -32009, /readyz 503); fix the store and restart "
               "xgrd, which recovers everything committed", "store", store_name, se.message);
    }
  }
  log_start(&l, "info", "stopping");
  xgr_logfmt_str(&l, "signal", sig == SIGTERM ? "TERM" : sig == SIGINT ? "INT" : "none");
  log_end(&l);
  long tmo = o->shutdown_timeout_ms ? o->shutdown_timeout_ms : 30000;
  /* the answers' wait (10 s), the steps' (tmo) and the store's close, with room: then exit anyway */
  pthread_t wd;
  pthread_attr_t wda;
  pthread_attr_init(&wda);
  pthread_attr_setdetachstate(&wda, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&wd, &wda, stop_watchdog, (void *)(intptr_t)(tmo + 20000))) {
    log_start(&l, "warn", "cannot start the stop's watchdog; a hung store may hold the stop");
    log_end(&l);
  }
  pthread_attr_destroy(&wda);
  xgr_rpc_stop(srv);
  xgr_rpcd_shutdown(d);   /* waiting answers go first */
  if (xgr_node_shutdown(node, tmo)) {
    log_start(&l, "warn", "steps still running after the shutdown timeout");
    xgr_logfmt_i64(&l, "timeout_ms", tmo);
    log_end(&l);
  }
  if (xgr_node_store_failed(node, NULL)) store_failed = true;   /* also a failure while stopping */
  xgr_node_free(node);   /* the engine first: it calls the service's event callbacks */
  xgr_rpcd_free(d);
  xgr_rpc_server_free(srv);
  xgr_auth_free(auth);
  xgr_chain_executor_free(executor);
  xgr_secp_free(secp);
  curl_global_cleanup();
  json_decref(cfgdoc);
  if (!rc && store_failed) rc = EXIT_STORE;
  log_start(&l, rc == EXIT_STORE ? "error" : "info", "stopped");
  if (rc == EXIT_STORE) {
    xgr_logfmt_u64(&l, "exit", 4);
    xgr_logfmt_quoted(&l, "reason", "the store failed");
  }
  log_end(&l);
  return rc;
}

/* What parsing the options allocated: the chain backends, the --api-map copies, the outbound policy. */
static void opts_free(opts *o) {
  xgr_chain_free(o->chain);
  for (size_t i = 0; i < o->napi_map; i++) free((char *)o->api_map[i].from);
  xgr_outbound_policy_free(o->outbound);
}

int main(int argc, char **argv) {
  opts o = {0};
  int rc = xgrd(argc, argv, &o);
  opts_free(&o);   /* on every path, early usage errors too */
  return rc;
}
