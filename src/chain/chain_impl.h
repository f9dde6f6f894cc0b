/* chain_impl.h — what rpc.c and reader.c share: the backend records of a chain set. Private to
 * src/chain. */
#ifndef XGR_CHAIN_IMPL_H
#define XGR_CHAIN_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "xgr/chain.h"

typedef struct backend {
  char *name;                 /* NULL: the default backend */
  char *url;
  atomic_uint_fast64_t calls, errors, last_block;
  atomic_bool ok;             /* the last probe answered */
  pthread_mutex_t mu;         /* guards last_error */
  char last_error[256];
} backend;

struct xgr_chain {
  backend b[XGR_CHAIN_MAX_BACKENDS];
  size_t n;
  long timeout_ms;
  atomic_uint_fast64_t next_id;
};

/* The backend called `name` (NULL or "": the default); NULL when not configured. */
backend *xgr__chain_backend(const xgr_chain *c, const char *name);
/* Count one call on b; a failed one also counts as an error and becomes last_error. */
void xgr__chain_note(backend *b, bool ok, const char *err);
/* POST body to url with a curl easy handle; 0 and *resp (malloc'd, NUL-terminated) on any HTTP
 * answer that carries a body. */
int xgr__chain_post(const char *url, const char *body, size_t len, long timeout_ms, char **resp, size_t *resp_len,
                    xgr_error *e);

/* Broadcast tx and record its outcome (exec.c): the call (to, data, value as 32-byte hex or NULL,
 * function for the return types) is replayed at the parent block for "return" / "revertReason". */
json_t *xgr__chain_settle(xgr_chain_sender *s, const char *to, const char *data_hex, const char *value_hex,
                          const char *function, const xgr_chain_signed *tx);

#endif
