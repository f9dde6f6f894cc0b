/* versions.c — which versions live sessions run (issue 36, `xgr versions`, xgr.listVersions): the
 * live sessions of a store grouped by registry, orchestration (id and hash) and pinned bundle hash,
 * with how many run on each and at which steps their processes wait. One reading of the store's
 * live sessions (xgr_store_load_live), so the CLI on a store file and xgrd answer alike. */
#include <string.h>
#include <strings.h>

#include "util/alloc.h"
#include "xgr/store.h"

typedef struct vctx {
  const char *owner, *registry;
  json_t *groups;   /* key -> group object */
} vctx;

static int on_live(void *ctx, const xgr_store_live *l) {
  vctx *c = ctx;
  const xgr_store_session *s = l->session;
  if (c->owner && strcasecmp(c->owner, s->owner)) return 0;
  if (c->registry && strcmp(c->registry, s->registry ? s->registry : "")) return 0;
  char key[512];
  snprintf(key, sizeof key, "%s\x1f%s\x1f%s\x1f%s", s->registry ? s->registry : "", s->ostc_id ? s->ostc_id : "",
           s->ostc_hash ? s->ostc_hash : "", s->bundle_hash ? s->bundle_hash : "");
  json_t *g = json_object_get(c->groups, key);
  if (!g) {
    g = json_pack("{s:s, s:s, s:s, s:s, s:i, s:{}, s:{}}", "registry", s->registry ? s->registry : "", "ostcId",
                  s->ostc_id ? s->ostc_id : "", "ostcHash", s->ostc_hash ? s->ostc_hash : "", "bundleHash",
                  s->bundle_hash ? s->bundle_hash : "", "sessions", 0, "waiting", "running");
    json_object_set_new(c->groups, key, g);
  }
  json_object_set_new(g, "sessions", json_integer(json_integer_value(json_object_get(g, "sessions")) + 1));
  for (size_t i = 0; i < l->nprocs; i++) {
    const xgr_store_proc *p = &l->procs[i];
    json_t *m = json_object_get(g, p->status == 1 /* XGR_PROC_RUNNING */ ? "running" : "waiting");
    const char *id = p->step_id ? p->step_id : "";
    json_object_set_new(m, id, json_integer(json_integer_value(json_object_get(m, id)) + 1));
  }
  return 0;
}

int xgr_store_versions(xgr_store *st, const char *owner, const char *registry, json_t **out, xgr_error *err) {
  vctx c = {owner && owner[0] ? owner : NULL, registry && registry[0] ? registry : NULL, json_object()};
  *out = NULL;
  int rc = xgr_store_load_live(st, on_live, &c, err);
  if (rc) {
    json_decref(c.groups);
    return rc;
  }
  json_t *list = json_array();
  const char *k;
  json_t *g;
  json_object_foreach(c.groups, k, g) json_array_append(list, g);
  json_decref(c.groups);
  *out = list;
  return 0;
}
