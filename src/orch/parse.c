/* parse.c — XRC-729 orchestration documents into the immutable model of xgr/orch.h.
 *
 * Parsing runs in three passes over the jansson tree:
 *   1. collect the step ids of `structure` (identifiers, MaxStepIdLen, MaxSteps) and build a
 *      sorted index for lookups by id;
 *   2. parse every step, branch and join, resolving references to step indices; every load error
 *      is recorded (with its JSON path) and parsing goes on, so `xgr check` reports them all;
 *   3. if no error was found, compute reachability (reach.c).
 * All memory of the model lives in one arena owned by the orchestration.
 */
#include <ctype.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orch/orch_impl.h"
#include "util/alloc.h"
#include "xgr/json.h"
#include "xgr/keccak.h"

typedef struct pctx {
  xgr_orch *o;
  orch_impl *im;
  xgr_diags *diags;       /* may be NULL */
  xgr_error *first;       /* first error, may be NULL */
  int nerr;
  xgr_path path;
} pctx;

static void perr(pctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void perr(pctx *c, int code, const char *fmt, ...) {
  char msg[XGR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (c->nerr++ == 0 && c->first) xgr_error_set(c->first, code, c->path.buf, "%s", msg);
  if (c->diags) xgr_diags_add(c->diags, XGR_SEV_ERROR, xgr_errcode_name(code), c->path.buf, "%s", msg);
}

static void pwarn(pctx *c, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void pwarn(pctx *c, const char *code, const char *fmt, ...) {
  if (!c->diags) return;
  char msg[XGR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  xgr_diags_add(c->diags, XGR_SEV_WARNING, code, c->path.buf, "%s", msg);
}

/* Record a schema error from xgr_json_expect's message. */
static int expect(pctx *c, const json_t *v, json_type t) {
  xgr_error e;
  if (xgr_json_expect(v, t, &c->path, &e) == 0) return 0;
  perr(c, e.code, "%s", e.message);
  return -1;
}

static void preview(const json_t *v, char *buf, size_t n) { xgr_json_preview(v, buf, n); }

/* ASCII identifier of XDaLa_Limits.md: [A-Za-z0-9_-]+. Returns 0 or records an error. */
static int check_ident(pctx *c, const char *s, const char *what) {
  size_t n = strlen(s);
  if (n == 0) {
    perr(c, XGR_EIDENT, "%s is empty; expected an ASCII identifier [A-Za-z0-9_-]", what);
    return -1;
  }
  if (n > XGR_MAX_STEP_ID_LEN) {
    perr(c, XGR_ELIMIT, "MaxStepIdLen exceeded: %s is %zu characters, maximum %d", what, n,
         XGR_MAX_STEP_ID_LEN);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (!(isalnum(ch) || ch == '_' || ch == '-') || ch > 127) {
      perr(c, XGR_EIDENT, "%s \"%.64s\" has character '%c' at %zu; expected an ASCII identifier [A-Za-z0-9_-]",
           what, s, isprint(ch) ? ch : '?', i);
      return -1;
    }
  }
  return 0;
}

/* Resolve a step reference (string) at the current path; returns the index or -1. */
static int step_ref(pctx *c, const json_t *v, const char *what) {
  if (expect(c, v, JSON_STRING)) return -1;
  const char *s = json_string_value(v);
  if (check_ident(c, s, what)) return -1;
  int i = xgr_orch_find(c->o, s);
  if (i < 0) perr(c, XGR_EREF, "%s \"%s\" is not a step of `structure`", what, s);
  return i;
}

static const char *const legacy_hint =
    "that is the old (v0) document model, which xgr does not accept (docs/SEMANTICS.md, \"Documents\"); declare the join on the branch instead: "
    "\"join\": {\"joinid\": STEP, \"mode\": \"any\"|\"all\"|{\"k\": N}, \"waitonjoin\": \"kill\"|\"drain\", "
    "\"from\": [{\"node\": STEP, \"when\": \"valid\"|\"invalid\"|\"any\"}]} and list the producers in \"spawns\"";

/* ---- rule reference -------------------------------------------------------------------------- */

static void check_rule_ref(pctx *c, const char *r) {
  size_t n = strlen(r);
  if (n == 0) {
    perr(c, XGR_ENORULE, "`rule` is empty; expected an XRC-137 address (0x + 40 hex), ${addr:ALIAS} or an alias");
    return;
  }
  if ((r[0] == '0' && (r[1] == 'x' || r[1] == 'X'))) {
    bool hex = true;
    for (size_t i = 2; i < n; i++) hex &= isxdigit((unsigned char)r[i]) != 0;
    if (hex && n != 42)
      perr(c, XGR_ESCHEMA, "`rule` \"%.80s\" looks like an address but has %zu hex digits; expected 40", r, n - 2);
    return;
  }
  if (!strncmp(r, "${addr:", 7)) {
    if (n < 9 || r[n - 1] != '}')
      perr(c, XGR_ESCHEMA, "`rule` \"%.80s\" is not a complete ${addr:ALIAS} reference", r);
    return;
  }
  for (size_t i = 0; i < n; i++)
    if (isspace((unsigned char)r[i]) || iscntrl((unsigned char)r[i])) {
      perr(c, XGR_ESCHEMA, "`rule` \"%.80s\" contains white space; expected an address, ${addr:ALIAS} or an alias", r);
      return;
    }
}

/* ---- join ------------------------------------------------------------------------------------ */

static int parse_when(pctx *c, const json_t *v, xgr_when *out) {
  *out = XGR_WHEN_ANY;
  if (!v || json_is_null(v)) return 0;
  if (expect(c, v, JSON_STRING)) return -1;
  const char *s = json_string_value(v);
  if (!strcmp(s, "valid")) *out = XGR_WHEN_VALID;
  else if (!strcmp(s, "invalid")) *out = XGR_WHEN_INVALID;
  else if (!strcmp(s, "any") || !strcmp(s, "both") || !*s) *out = XGR_WHEN_ANY;
  else {
    perr(c, XGR_ESCHEMA, "`when` is \"%.40s\"; expected \"valid\", \"invalid\" or \"any\"", s);
    return -1;
  }
  return 0;
}

/* Integer k of a mode form at the current path; returns the value or -1 after an error. */
static long parse_k(pctx *c, const json_t *v, const char *name) {
  if (!json_is_integer(v)) {
    char p[64];
    preview(v, p, sizeof p);
    perr(c, XGR_ESCHEMA, "`%s` is %s %s; expected a positive integer", name, v ? xgr_json_type_name(v) : "missing", v ? p : "");
    return LONG_MIN;
  }
  json_int_t k = json_integer_value(v);   /* the value as written (`k:-1` says -1); range checked against n later */
  return k < -1000000000 ? -1000000000 : k > 1000000000 ? 1000000000 : (long)k;
}

static xgr_join *parse_join(pctx *c, const json_t *j) {
  if (expect(c, j, JSON_OBJECT)) return NULL;
  xgr_join *jn = xgr_arena_alloc(&c->im->arena, sizeof *jn);
  if (!jn) return NULL;
  int errs = c->nerr;
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)j, key, val) {
    static const char *const known[] = {"joinid", "joinId", "mode", "k", "waitonjoin", "waitOnJoin", "from", NULL};
    bool ok = false;
    for (int i = 0; known[i]; i++) ok |= !strcmp(key, known[i]);
    size_t m = xgr_path_key(&c->path, key);
    if (!strcmp(key, "inputs") || !strcmp(key, "labels"))
      perr(c, XGR_ELEGACY, "`%s` is not supported; %s", key, legacy_hint);
    else if (!ok)
      pwarn(c, "unknown_key", "unknown key `%s` in a join is ignored (known: joinid, mode, k, waitonjoin, from)", key);
    xgr_path_pop(&c->path, m);
  }

  /* joinid */
  const json_t *jid = json_object_get(j, "joinid");
  const char *jidkey = "joinid";
  if (!jid && (jid = json_object_get(j, "joinId"))) jidkey = "joinId";
  size_t m = xgr_path_key(&c->path, jidkey);
  if (!jid) perr(c, XGR_ESCHEMA, "missing; expected the step id of the join target");
  int target = jid ? step_ref(c, jid, "join target") : -1;
  xgr_path_pop(&c->path, m);

  /* from */
  const json_t *from = json_object_get(j, "from");
  m = xgr_path_key(&c->path, "from");
  size_t n = 0;
  if (!from) {
    perr(c, XGR_ESCHEMA, "missing; expected an array of {\"node\": STEP, \"when\": \"valid\"|\"invalid\"|\"any\"}");
  } else if (expect(c, from, JSON_ARRAY) == 0) {
    n = json_array_size(from);
    if (n > XGR_MAX_JOIN_INPUTS) {
      perr(c, XGR_ELIMIT, "MaxJoinInputs exceeded: %zu join inputs, maximum %d", n, XGR_MAX_JOIN_INPUTS);
      n = 0;
    } else if (n == 0) {
      perr(c, XGR_ESCHEMA, "empty; a join needs at least one `from` entry");
    }
  }
  jn->from = xgr_arena_alloc(&c->im->arena, (n ? n : 1) * sizeof *jn->from);
  if (!jn->from) return NULL;
  xgr_stepset seen = {{0, 0}};
  for (size_t i = 0; i < n; i++) {
    const json_t *fe = json_array_get(from, i);
    size_t mi = xgr_path_index(&c->path, i);
    if (json_is_string(fe)) {
      perr(c, XGR_ESCHEMA, "is the string \"%.64s\"; expected {\"node\": \"%.64s\", \"when\": \"valid\"|\"invalid\"|\"any\"}",
           json_string_value(fe), json_string_value(fe));
    } else if (expect(c, fe, JSON_OBJECT) == 0) {
      json_object_foreach((json_t *)fe, key, val) {
        size_t mk = xgr_path_key(&c->path, key);
        if (!strcmp(key, "label"))
          perr(c, XGR_ELEGACY, "`label` belongs to the v0 join model; join inputs are identified by `node` alone");
        else if (strcmp(key, "node") && strcmp(key, "when"))
          pwarn(c, "unknown_key", "unknown key `%s` in a join input is ignored (known: node, when)", key);
        xgr_path_pop(&c->path, mk);
      }
      const json_t *node = json_object_get(fe, "node");
      size_t mk = xgr_path_key(&c->path, "node");
      int ni = -1;
      if (!node) perr(c, XGR_ESCHEMA, "missing; expected the step id of an expected producer");
      else ni = step_ref(c, node, "join input");
      xgr_path_pop(&c->path, mk);
      mk = xgr_path_key(&c->path, "when");
      parse_when(c, json_object_get(fe, "when"), &jn->from[i].when);
      xgr_path_pop(&c->path, mk);
      if (ni >= 0) {
        jn->from[i].node = (uint16_t)ni;
        if (xgr_stepset_has(&seen, (unsigned)ni))
          perr(c, XGR_EDUP, "step \"%s\" is expected twice; a join takes one piece per step",
               c->o->steps[ni].id);
        xgr_stepset_add(&seen, (unsigned)ni);
      }
    }
    xgr_path_pop(&c->path, mi);
  }
  xgr_path_pop(&c->path, m);
  jn->n = (uint16_t)n;

  /* mode and k */
  const json_t *mode = json_object_get(j, "mode");
  const json_t *ksib = json_object_get(j, "k");
  long k = LONG_MIN;   /* LONG_MIN: not known (missing or reported already) */
  xgr_path kpath;   /* where k was written, for the range error */
  m = xgr_path_key(&c->path, "mode");
  kpath = c->path;
  if (!mode) {
    perr(c, XGR_ESCHEMA, "missing; expected \"any\", \"all\", \"kofn\" with \"k\", {\"k\": N} or {\"kofn\": N}");
  } else if (json_is_string(mode)) {
    const char *s = json_string_value(mode);
    if (!strcmp(s, "any")) k = 1;
    else if (!strcmp(s, "all")) k = (long)n;
    else if (!strcmp(s, "kofn")) {
      if (!ksib) {
        perr(c, XGR_ESCHEMA, "mode \"kofn\" needs a sibling \"k\": N");
      } else {
        xgr_path_pop(&c->path, m);
        m = xgr_path_key(&c->path, "k");
        kpath = c->path;
        k = parse_k(c, ksib, "k");
      }
    } else if (!strcmp(s, "exact")) {
      perr(c, XGR_ELEGACY, "mode \"exact\" is not supported; %s", legacy_hint);
    } else {
      perr(c, XGR_ESCHEMA, "mode is \"%.40s\"; expected \"any\", \"all\", \"kofn\" with \"k\", {\"k\": N} or {\"kofn\": N}", s);
    }
    if (ksib && strcmp(s, "kofn") && k > 0)
      pwarn(c, "k_ignored", "sibling \"k\" is ignored with mode \"%s\"; use mode \"kofn\" to set a threshold", s);
  } else if (json_is_object(mode)) {
    const json_t *kv = json_object_get(mode, "k");
    const char *kname = "k";
    if (!kv) {
      kv = json_object_get(mode, "kofn");
      kname = "kofn";
    }
    if (!kv || json_object_size(mode) != 1) {
      perr(c, XGR_ESCHEMA, "object mode must be {\"k\": N} or {\"kofn\": N}");
    } else {
      size_t mk = xgr_path_key(&c->path, kname);
      kpath = c->path;
      k = parse_k(c, kv, kname);
      xgr_path_pop(&c->path, mk);
    }
  } else {
    char p[64];
    preview(mode, p, sizeof p);
    perr(c, XGR_ESCHEMA, "mode is %s %s; expected \"any\", \"all\", \"kofn\" with \"k\", {\"k\": N} or {\"kofn\": N}",
         xgr_json_type_name(mode), p);
  }
  xgr_path_pop(&c->path, m);
  if (k != LONG_MIN && n > 0 && (k < 1 || (size_t)k > n)) {
    xgr_path here = c->path;
    c->path = kpath;
    perr(c, XGR_EKRANGE, "k is %ld but the join has %zu `from` entr%s; expected 1 <= k <= %zu", k, n,
         n == 1 ? "y" : "ies", n);
    c->path = here;
  }
  jn->k = k > 0 ? (uint16_t)(k > 65535 ? 65535 : k) : 1;

  /* waitonjoin */
  const json_t *w = json_object_get(j, "waitonjoin");
  const char *wkey = "waitonjoin";
  if (!w && (w = json_object_get(j, "waitOnJoin"))) wkey = "waitOnJoin";
  m = xgr_path_key(&c->path, wkey);
  jn->policy = XGR_POLICY_DRAIN;
  if (!w) {
    jn->policy_defaulted = true;
  } else if (json_is_boolean(w)) {
    perr(c, XGR_ELEGACY, "a boolean waitOnJoin belongs to the v0 model; write \"kill\" or \"drain\"");
  } else if (expect(c, w, JSON_STRING) == 0) {
    const char *s = json_string_value(w);
    if (!strcmp(s, "kill")) jn->policy = XGR_POLICY_KILL;
    else if (strcmp(s, "drain")) perr(c, XGR_ESCHEMA, "waitonjoin is \"%.40s\"; expected \"kill\" or \"drain\"", s);
  }
  xgr_path_pop(&c->path, m);

  if (target >= 0) jn->target = (uint16_t)target;
  return c->nerr == errs ? jn : NULL;
}

/* ---- branch and step ------------------------------------------------------------------------- */

static void parse_branch(pctx *c, const json_t *b, xgr_branch *out) {
  if (!b || json_is_null(b)) return;
  if (expect(c, b, JSON_OBJECT)) return;
  out->present = true;
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)b, key, val) {
    size_t m = xgr_path_key(&c->path, key);
    if (!strcmp(key, "continue"))
      perr(c, XGR_ELEGACY, "`continue` is not supported; %s", legacy_hint);
    else if (strcmp(key, "spawns") && strcmp(key, "join"))
      pwarn(c, "unknown_key", "unknown key `%s` in a branch is ignored (known: spawns, join)", key);
    xgr_path_pop(&c->path, m);
  }
  const json_t *sp = json_object_get(b, "spawns");
  size_t m = xgr_path_key(&c->path, "spawns");
  if (sp && !json_is_null(sp) && expect(c, sp, JSON_ARRAY) == 0) {
    size_t n = json_array_size(sp);
    if (n > XGR_MAX_SPAWNS_PER_BRANCH) {
      perr(c, XGR_ELIMIT, "MaxSpawnsPerBranch exceeded: %zu spawns, maximum %d", n, XGR_MAX_SPAWNS_PER_BRANCH);
    } else {
      out->spawns = xgr_arena_alloc(&c->im->arena, (n ? n : 1) * sizeof *out->spawns);
      if (!out->spawns) return;
      for (size_t i = 0; i < n; i++) {
        size_t mi = xgr_path_index(&c->path, i);
        const json_t *e = json_array_get(sp, i);
        if (json_is_object(e)) {
          perr(c, XGR_ELEGACY, "spawn entries are step ids, not objects (labelled spawns belong to the v0 model)");
        } else {
          int si = step_ref(c, e, "spawn target");
          if (si >= 0) out->spawns[out->nspawns++] = (uint16_t)si;
        }
        xgr_path_pop(&c->path, mi);
      }
    }
  }
  xgr_path_pop(&c->path, m);
  const json_t *j = json_object_get(b, "join");
  if (j && !json_is_null(j)) {
    m = xgr_path_key(&c->path, "join");
    out->join = parse_join(c, j);
    xgr_path_pop(&c->path, m);
  }
}

static void parse_step(pctx *c, const json_t *s, xgr_step *st) {
  if (expect(c, s, JSON_OBJECT)) return;
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)s, key, val) {
    size_t m = xgr_path_key(&c->path, key);
    if (!strcmp(key, "continue"))
      perr(c, XGR_ELEGACY, "`continue` is not supported; %s", legacy_hint);
    else if (strcmp(key, "rule") && strcmp(key, "onValid") && strcmp(key, "onInvalid"))
      pwarn(c, "unknown_key", "unknown key `%s` in a step is ignored (known: rule, onValid, onInvalid)", key);
    xgr_path_pop(&c->path, m);
  }
  const json_t *r = json_object_get(s, "rule");
  size_t m = xgr_path_key(&c->path, "rule");
  if (!r) {
    perr(c, XGR_ENORULE, "step \"%s\" has no `rule`; expected an XRC-137 address, ${addr:ALIAS} or an alias", st->id);
  } else if (expect(c, r, JSON_STRING) == 0) {
    st->rule = xgr_arena_strdup(&c->im->arena, json_string_value(r));
    check_rule_ref(c, st->rule);
  }
  xgr_path_pop(&c->path, m);
  static const char *const names[2] = {"onValid", "onInvalid"};
  for (int b = 0; b < 2; b++) {
    m = xgr_path_key(&c->path, names[b]);
    parse_branch(c, json_object_get(s, names[b]), &st->branch[b]);
    xgr_path_pop(&c->path, m);
  }
  if (!st->rule) st->rule = "";
}

/* ---- index ------------------------------------------------------------------------------------ */

/* Sort step indices by id (insertion sort: n <= 128). */
static void build_index(xgr_orch *o, orch_impl *im) {
  for (size_t i = 0; i < o->nsteps; i++) {
    uint16_t v = (uint16_t)i;
    size_t j = i;
    while (j > 0 && strcmp(o->steps[im->sorted[j - 1]].id, o->steps[v].id) > 0) {
      im->sorted[j] = im->sorted[j - 1];
      j--;
    }
    im->sorted[j] = v;
  }
}

int xgr_orch_find(const xgr_orch *o, const char *id) {
  const orch_impl *im = o->impl_;
  size_t lo = 0, hi = o->nsteps;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(o->steps[im->sorted[mid]].id, id);
    if (c == 0) return im->sorted[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

/* ---- entry points ----------------------------------------------------------------------------- */

void xgr_orch_free(xgr_orch *o) {
  if (!o) return;
  orch_impl *im = o->impl_;
  if (im) xgr_arena_free(&im->arena);
  free(im);
  free(o);
}

int xgr_orch_parse(const char *bytes, size_t len, xgr_orch **out, xgr_error *err, xgr_diags *diags) {
  *out = NULL;
  xgr_error_clear(err);
  if (len > XGR_MAX_OSTC_BYTES) {
    xgr_error e;
    xgr_error_set(&e, XGR_ELIMIT, "", "MaxOSTCBytes exceeded: document is %zu bytes, maximum %d", len,
                  XGR_MAX_OSTC_BYTES);
    if (err) *err = e;
    if (diags) xgr_diags_add_error(diags, &e);
    return XGR_ELIMIT;
  }
  json_t *root = NULL;
  xgr_error e;
  if (xgr_json_parse(bytes, len, &root, &e)) {
    if (err) *err = e;
    if (diags) xgr_diags_add_error(diags, &e);
    return e.code;
  }
  xgr_orch *o = xgr__xcalloc(1, sizeof *o);
  orch_impl *im = xgr__xcalloc(1, sizeof *im);
  o->impl_ = im;
  xgr_arena_init(&im->arena, 16384);
  xgr_keccak256_hex(bytes, len, o->hash);
  pctx c = {.o = o, .im = im, .diags = diags, .first = err};
  xgr_path_init(&c.path);

  if (!json_is_object(root)) {
    expect(&c, root, JSON_OBJECT);
    goto done;
  }
  const json_t *idv = json_object_get(root, "id");
  size_t m = xgr_path_key(&c.path, "id");
  if (idv && !json_is_null(idv) && expect(&c, idv, JSON_STRING) == 0)
    o->id = xgr_arena_strdup(&im->arena, json_string_value(idv));
  xgr_path_pop(&c.path, m);
  if (!o->id) o->id = xgr_arena_strdup(&im->arena, "");

  const json_t *st = json_object_get(root, "structure");
  m = xgr_path_key(&c.path, "structure");
  if (!st) {
    perr(&c, XGR_ESCHEMA, "missing; expected an object of steps {\"STEP\": {\"rule\": ..., \"onValid\": ..., \"onInvalid\": ...}}");
    goto done;
  }
  if (expect(&c, st, JSON_OBJECT)) goto done;
  size_t n = json_object_size(st);
  if (n == 0) {
    perr(&c, XGR_ESCHEMA, "no steps; an orchestration needs at least one step");
    goto done;
  }
  if (n > XGR_MAX_STEPS) {
    perr(&c, XGR_ELIMIT, "MaxSteps exceeded: %zu steps, maximum %d", n, XGR_MAX_STEPS);
    goto done;
  }
  o->steps = xgr_arena_alloc(&im->arena, n * sizeof *o->steps);
  if (!o->steps) goto oom;
  /* pass 1: ids */
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)st, key, val) {
    size_t mk = xgr_path_key(&c.path, key);
    check_ident(&c, key, "step id");   /* recorded; the step is kept so references resolve */
    o->steps[o->nsteps].id = xgr_arena_strdup(&im->arena, key);
    if (!o->steps[o->nsteps].id) goto oom;
    o->nsteps++;
    xgr_path_pop(&c.path, mk);
  }
  build_index(o, im);
  /* pass 2: steps */
  size_t i = 0;
  json_object_foreach((json_t *)st, key, val) {
    size_t mk = xgr_path_key(&c.path, key);
    parse_step(&c, val, &o->steps[i++]);
    xgr_path_pop(&c.path, mk);
  }
  xgr_path_pop(&c.path, m);
  if (c.nerr == 0 && xgr__orch_compute_reach(o, im) != 0) goto oom;

done:
  json_decref(root);
  if (c.nerr) {
    int code = err ? err->code : XGR_ESCHEMA;
    xgr_orch_free(o);
    return code ? code : XGR_ESCHEMA;
  }
  *out = o;
  return 0;
oom:
  json_decref(root);
  xgr_orch_free(o);
  return xgr_error_set(err, XGR_ENOMEM, NULL, "out of memory");
}

int xgr_orch_load_file(const char *path, xgr_orch **out, xgr_error *err, xgr_diags *diags) {
  char *buf;
  size_t len;
  xgr_error e;
  *out = NULL;
  int rc = xgr_file_read(path, &buf, &len, XGR_MAX_OSTC_BYTES + 1, &e);
  if (rc == XGR_ELIMIT)
    xgr_error_set(&e, XGR_ELIMIT, "", "MaxOSTCBytes exceeded: %s is larger than %d bytes", path, XGR_MAX_OSTC_BYTES);
  if (rc) {
    if (err) *err = e;
    if (diags) xgr_diags_add_error(diags, &e);
    return rc;
  }
  rc = xgr_orch_parse(buf, len, out, err, diags);
  free(buf);
  return rc;
}

const char *xgr_when_name(xgr_when w) {
  return w == XGR_WHEN_VALID ? "valid" : w == XGR_WHEN_INVALID ? "invalid" : "any";
}

const char *xgr_policy_name(xgr_policy p) { return p == XGR_POLICY_KILL ? "kill" : "drain"; }
