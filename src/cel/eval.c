/* eval.c — the CEL evaluator: a recursive walk over the compiled node array. Values are passed
 * by value; every call returns an owned value (scalars own nothing). CEL error semantics:
 * errors are values that propagate, `&&`/`||` absorb an error when the other side decides,
 * comprehensions follow the macro expansion of the CEL spec (all/exists absorb errors when a
 * decisive element exists, exists_one/map/filter do not). Arithmetic never converts implicitly;
 * int/uint overflow, division and modulo by zero are errors; numbers compare across kinds. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cel/cel_impl.h"

/* ---- errors ------------------------------------------------------------------------------- */

static xgr_value verr(cel_ctx *c, int code, uint32_t pos, const char *fmt, va_list ap) {
  cel_errrec *r = &c->err[c->nerr % CEL_ERR_RING];
  r->code = code;
  r->pos = pos;
  vsnprintf(r->msg, sizeof r->msg, fmt, ap);
  xgr_value v = {0};
  v.kind = XGR_VERR;
  v.as.u = c->nerr++;
  return v;
}

xgr_value xgr__cel_err(cel_ctx *c, uint32_t pos, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  xgr_value v = verr(c, XGR_EEVAL, pos, fmt, ap);
  va_end(ap);
  return v;
}

xgr_value xgr__cel_err_code(cel_ctx *c, int code, uint32_t pos, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  xgr_value v = verr(c, code, pos, fmt, ap);
  va_end(ap);
  return v;
}

const char *xgr__cel_kind_name(xgr_value v) {
  if (v.kind == XGR_VERR) return "error";
  if (v.kind == XGR_VUNBOUND) return "unbound";
  return xgr_value_kind_name(v);
}

bool xgr__cel_charge(cel_ctx *c, uint32_t pos, uint64_t n, xgr_value *out) {
  c->cost += n;
  if (c->cost <= c->max_cost) return true;
  *out = xgr__cel_err_code(c, XGR_ELIMIT, pos,
                      "evaluation budget exhausted: cost %llu, the maximum is %llu",
                      (unsigned long long)c->cost, (unsigned long long)c->max_cost);
  return false;
}

static xgr_value no_overload2(cel_ctx *c, uint32_t pos, const char *op, xgr_value a, xgr_value b) {
  return xgr__cel_err(c, pos, "no such overload: %s %s %s", xgr__cel_kind_name(a), op, xgr__cel_kind_name(b));
}

/* ---- arithmetic --------------------------------------------------------------------------- */

static bool is_intlike(xgr_value v) {
  return v.kind == XGR_VINT || v.kind == XGR_VUINT || v.kind == XGR_VBIGINT;
}

/* Integer arithmetic where at least one side is a bigint. op: + - * / % */
static xgr_value big_arith(cel_ctx *c, uint32_t pos, char op, xgr_value a, xgr_value b) {
  bool sgn = (a.kind == XGR_VBIGINT && (a.flags & XGR_VF_SIGNED)) ||
             (b.kind == XGR_VBIGINT && (b.flags & XGR_VF_SIGNED));
  mpz_t x, y;
  mpz_inits(x, y, NULL);
  xgr__to_mpz(a, x);
  xgr__to_mpz(b, y);
  xgr_value r;
  if ((op == '/' || op == '%') && mpz_sgn(y) == 0) {
    r = xgr__cel_err(c, pos, op == '/' ? "division by zero" : "modulus by zero");
    goto out;
  }
  switch (op) {
    case '+': mpz_add(x, x, y); break;
    case '-': mpz_sub(x, x, y); break;
    case '*': mpz_mul(x, x, y); break;
    case '/': mpz_tdiv_q(x, x, y); break;
    default: mpz_tdiv_r(x, x, y); break;
  }
  if (!xgr__bigint_in_range(x, sgn))
    r = xgr__cel_err(c, pos, "%s overflow in '%c'", sgn ? "int256" : "uint256", op);
  else
    r = xgr__bigint_from_mpz(x, sgn);
out:
  mpz_clears(x, y, NULL);
  return r;
}

static xgr_value concat(cel_ctx *c, uint32_t pos, xgr_value a, xgr_value b) {
  xgr_value r;
  if (a.kind == XGR_VLIST) {
    uint32_t n = a.as.l->len + b.as.l->len;
    if (!xgr__cel_charge(c, pos, n, &r)) return r;
    r = xgr_list_new(n);
    for (uint32_t i = 0; i < a.as.l->len; i++) xgr_list_push(r, xgr_value_retain(a.as.l->items[i]));
    for (uint32_t i = 0; i < b.as.l->len; i++) xgr_list_push(r, xgr_value_retain(b.as.l->items[i]));
    return r;
  }
  size_t n = (size_t)a.as.s->len + b.as.s->len;
  if (!xgr__cel_charge(c, pos, n / 16, &r)) return r;
  if (n > (64u << 20)) return xgr__cel_err_code(c, XGR_ELIMIT, pos, "string of %zu bytes is too long", n);
  xgr_str *s = xgr__xmalloc(sizeof *s + n + 1);
  atomic_init(&s->rc, 1);
  s->len = (uint32_t)n;
  memcpy(s->data, a.as.s->data, a.as.s->len);
  memcpy(s->data + a.as.s->len, b.as.s->data, b.as.s->len);
  s->data[n] = '\0';
  r = xgr_value_null();
  r.kind = a.kind;
  r.as.s = s;
  return r;
}

xgr_value xgr__cel_op_add(cel_ctx *c, uint32_t pos, xgr_value a, xgr_value b) {
  if (a.kind == b.kind) {
    switch (a.kind) {
      case XGR_VINT: {
        int64_t r;
        if (__builtin_add_overflow(a.as.i, b.as.i, &r)) return xgr__cel_err(c, pos, "int overflow in '+'");
        return xgr_value_int(r);
      }
      case XGR_VUINT: {
        uint64_t r;
        if (__builtin_add_overflow(a.as.u, b.as.u, &r)) return xgr__cel_err(c, pos, "uint overflow in '+'");
        return xgr_value_uint(r);
      }
      case XGR_VDOUBLE: return xgr_value_double(a.as.d + b.as.d);
      case XGR_VSTRING: case XGR_VBYTES: case XGR_VLIST: return concat(c, pos, a, b);
      case XGR_VBIGINT: return big_arith(c, pos, '+', a, b);
      default: break;
    }
  }
  if ((a.kind == XGR_VBIGINT || b.kind == XGR_VBIGINT) && is_intlike(a) && is_intlike(b))
    return big_arith(c, pos, '+', a, b);
  return no_overload2(c, pos, "+", a, b);
}

xgr_value xgr__cel_op_sub(cel_ctx *c, uint32_t pos, xgr_value a, xgr_value b) {
  if (a.kind == b.kind) {
    switch (a.kind) {
      case XGR_VINT: {
        int64_t r;
        if (__builtin_sub_overflow(a.as.i, b.as.i, &r)) return xgr__cel_err(c, pos, "int overflow in '-'");
        return xgr_value_int(r);
      }
      case XGR_VUINT: {
        uint64_t r;
        if (__builtin_sub_overflow(a.as.u, b.as.u, &r)) return xgr__cel_err(c, pos, "uint overflow in '-'");
        return xgr_value_uint(r);
      }
      case XGR_VDOUBLE: return xgr_value_double(a.as.d - b.as.d);
      case XGR_VBIGINT: return big_arith(c, pos, '-', a, b);
      default: break;
    }
  }
  if ((a.kind == XGR_VBIGINT || b.kind == XGR_VBIGINT) && is_intlike(a) && is_intlike(b))
    return big_arith(c, pos, '-', a, b);
  return no_overload2(c, pos, "-", a, b);
}

static xgr_value op_mul(cel_ctx *c, uint32_t pos, xgr_value a, xgr_value b) {
  if (a.kind == b.kind) {
    switch (a.kind) {
      case XGR_VINT: {
        int64_t r;
        if (__builtin_mul_overflow(a.as.i, b.as.i, &r)) return xgr__cel_err(c, pos, "int overflow in '*'");
        return xgr_value_int(r);
      }
      case XGR_VUINT: {
        uint64_t r;
        if (__builtin_mul_overflow(a.as.u, b.as.u, &r)) return xgr__cel_err(c, pos, "uint overflow in '*'");
        return xgr_value_uint(r);
      }
      case XGR_VDOUBLE: return xgr_value_double(a.as.d * b.as.d);
      case XGR_VBIGINT: return big_arith(c, pos, '*', a, b);
      default: break;
    }
  }
  if ((a.kind == XGR_VBIGINT || b.kind == XGR_VBIGINT) && is_intlike(a) && is_intlike(b))
    return big_arith(c, pos, '*', a, b);
  return no_overload2(c, pos, "*", a, b);
}

xgr_value xgr__cel_op_div(cel_ctx *c, uint32_t pos, xgr_value a, xgr_value b) {
  if (a.kind == b.kind) {
    switch (a.kind) {
      case XGR_VINT:
        if (b.as.i == 0) return xgr__cel_err(c, pos, "division by zero");
        if (a.as.i == INT64_MIN && b.as.i == -1) return xgr__cel_err(c, pos, "int overflow in '/'");
        return xgr_value_int(a.as.i / b.as.i);
      case XGR_VUINT:
        if (b.as.u == 0) return xgr__cel_err(c, pos, "division by zero");
        return xgr_value_uint(a.as.u / b.as.u);
      case XGR_VDOUBLE: return xgr_value_double(a.as.d / b.as.d);
      case XGR_VBIGINT: return big_arith(c, pos, '/', a, b);
      default: break;
    }
  }
  if ((a.kind == XGR_VBIGINT || b.kind == XGR_VBIGINT) && is_intlike(a) && is_intlike(b))
    return big_arith(c, pos, '/', a, b);
  return no_overload2(c, pos, "/", a, b);
}

static xgr_value op_mod(cel_ctx *c, uint32_t pos, xgr_value a, xgr_value b) {
  if (a.kind == b.kind) {
    switch (a.kind) {
      case XGR_VINT:
        if (b.as.i == 0) return xgr__cel_err(c, pos, "modulus by zero");
        if (a.as.i == INT64_MIN && b.as.i == -1) return xgr__cel_err(c, pos, "int overflow in '%%'");
        return xgr_value_int(a.as.i % b.as.i);
      case XGR_VUINT:
        if (b.as.u == 0) return xgr__cel_err(c, pos, "modulus by zero");
        return xgr_value_uint(a.as.u % b.as.u);
      case XGR_VBIGINT: return big_arith(c, pos, '%', a, b);
      default: break;
    }
  }
  if ((a.kind == XGR_VBIGINT || b.kind == XGR_VBIGINT) && is_intlike(a) && is_intlike(b))
    return big_arith(c, pos, '%', a, b);
  return no_overload2(c, pos, "%", a, b);
}

/* <, <=, >, >= : returns bool or an error. which: 0 <, 1 <=, 2 >, 3 >= */
static xgr_value op_cmp(cel_ctx *c, uint32_t pos, int which, xgr_value a, xgr_value b) {
  static const char *const names[] = {"<", "<=", ">", ">="};
  int r;
  if (xgr_value_is_number(a) && xgr_value_is_number(b)) {
    r = xgr__num_cmp(a, b);
    if (r == 2) return xgr_value_bool(false);
  } else if (a.kind == b.kind && (a.kind == XGR_VSTRING || a.kind == XGR_VBYTES)) {
    uint32_t n = a.as.s->len < b.as.s->len ? a.as.s->len : b.as.s->len;
    r = memcmp(a.as.s->data, b.as.s->data, n);
    r = r ? (r < 0 ? -1 : 1) : (a.as.s->len < b.as.s->len ? -1 : a.as.s->len > b.as.s->len);
  } else if (a.kind == XGR_VBOOL && b.kind == XGR_VBOOL) {
    r = (int)a.as.b - (int)b.as.b;
  } else {
    return no_overload2(c, pos, names[which], a, b);
  }
  switch (which) {
    case 0: return xgr_value_bool(r < 0);
    case 1: return xgr_value_bool(r <= 0);
    case 2: return xgr_value_bool(r > 0);
    default: return xgr_value_bool(r >= 0);
  }
}

static xgr_value op_in(cel_ctx *c, uint32_t pos, xgr_value a, xgr_value b) {
  if (b.kind == XGR_VLIST) {
    for (uint32_t i = 0; i < b.as.l->len; i++)
      if (xgr_value_equal(a, b.as.l->items[i])) return xgr_value_bool(true);
    return xgr_value_bool(false);
  }
  if (b.kind == XGR_VMAP) {
    xgr_value dummy;
    return xgr_value_bool(xgr__map_get(b.as.m, a, &dummy));
  }
  return no_overload2(c, pos, "in", a, b);
}

/* ---- evaluation --------------------------------------------------------------------------- */

static xgr_value ev(cel_ctx *c, int32_t id);

static xgr_value select_field(cel_ctx *c, const cel_node *n, xgr_value obj, int32_t field) {
  const xgr_cel_program *p = c->p;
  xgr_value f = p->consts[field];
  if (obj.kind == XGR_VMAP) {
    xgr_value out;
    if (xgr__map_get_str_hashed(obj.as.m, f.as.s->data, f.as.s->len, p->hashes[field], &out))
      return xgr_value_retain(out);
    return xgr__cel_err(c, n->pos, "no such key: '%s'", f.as.s->data);
  }
  return xgr__cel_err(c, n->pos, "type '%s' does not support field selection (field '%s')",
                 xgr__cel_kind_name(obj), f.as.s->data);
}

static xgr_value ev_index(cel_ctx *c, const cel_node *n, xgr_value obj, xgr_value ix) {
  if (obj.kind == XGR_VLIST) {
    int64_t i;
    if (ix.kind == XGR_VINT) i = ix.as.i;
    else if (ix.kind == XGR_VUINT) i = ix.as.u > INT64_MAX ? INT64_MAX : (int64_t)ix.as.u;
    else if (ix.kind == XGR_VDOUBLE && ix.as.d == floor(ix.as.d) && fabs(ix.as.d) < 9e18) i = (int64_t)ix.as.d;
    else if (ix.kind == XGR_VDOUBLE) return xgr__cel_err(c, n->pos, "invalid list index %g: not an integer", ix.as.d);
    else return xgr__cel_err(c, n->pos, "no such overload: list[%s]", xgr__cel_kind_name(ix));
    if (i < 0 || i >= (int64_t)obj.as.l->len)
      return xgr__cel_err(c, n->pos, "index %lld out of range for a list of %u elements", (long long)i,
                     obj.as.l->len);
    return xgr_value_retain(obj.as.l->items[i]);
  }
  if (obj.kind == XGR_VMAP) {
    xgr_value out;
    if (xgr__map_get(obj.as.m, ix, &out)) return xgr_value_retain(out);
    if (ix.kind == XGR_VSTRING) return xgr__cel_err(c, n->pos, "no such key: '%s'", ix.as.s->data);
    char *t = xgr_value_render(ix, NULL);
    xgr_value r = xgr__cel_err(c, n->pos, "no such key: %s (%s)", t, xgr__cel_kind_name(ix));
    free(t);
    return r;
  }
  return xgr__cel_err(c, n->pos, "no such overload: %s[%s]", xgr__cel_kind_name(obj), xgr__cel_kind_name(ix));
}

static xgr_value ev_qual(cel_ctx *c, const cel_node *n) {
  const xgr_cel_program *p = c->p;
  int nf = n->nargs;
  const int32_t *k = p->kids + n->args;
  for (int i = nf; i >= 0; i--) {
    xgr_value v = c->slots[k[nf + i]];
    if (v.kind == XGR_VUNBOUND) continue;
    v = xgr_value_retain(v);
    for (int j = i; j < nf; j++) {
      xgr_value nv = select_field(c, n, v, k[j]);
      xgr_value_release(v);
      v = nv;
      if (cel_is_err(v)) break;
    }
    return v;
  }
  return xgr__cel_err(c, n->pos, "undeclared reference to '%s'", p->vars[k[nf]].name);
}

static xgr_value ev_list(cel_ctx *c, const cel_node *n) {
  xgr_value l = xgr_list_new(n->nargs);
  for (uint32_t i = 0; i < n->nargs; i++) {
    xgr_value v = ev(c, c->p->kids[n->args + i]);
    if (cel_is_err(v)) {
      xgr_value_release(l);
      return v;
    }
    xgr_list_push(l, v);
  }
  return l;
}

static xgr_value ev_map(cel_ctx *c, const cel_node *n) {
  xgr_value m = xgr_map_new(n->nargs);
  for (uint32_t i = 0; i < n->nargs; i++) {
    const cel_node *kn = &c->p->nodes[c->p->kids[n->args + 2 * i]];
    xgr_value k = ev(c, c->p->kids[n->args + 2 * i]);
    if (cel_is_err(k)) {
      xgr_value_release(m);
      return k;
    }
    xgr_value v = ev(c, c->p->kids[n->args + 2 * i + 1]);
    if (cel_is_err(v)) {
      xgr_value_release(k);
      xgr_value_release(m);
      return v;
    }
    xgr_value dummy;
    if (k.kind != XGR_VSTRING && k.kind != XGR_VINT && k.kind != XGR_VUINT && k.kind != XGR_VBOOL) {
      xgr_value r = xgr__cel_err(c, kn->pos, "unsupported map key type '%s'", xgr__cel_kind_name(k));
      xgr_value_release(k);
      xgr_value_release(v);
      xgr_value_release(m);
      return r;
    }
    if (xgr__map_get(m.as.m, k, &dummy)) {
      char *t = xgr_value_render(k, NULL);
      xgr_value r = xgr__cel_err(c, kn->pos, "repeated map key %s", t);
      free(t);
      xgr_value_release(k);
      xgr_value_release(v);
      xgr_value_release(m);
      return r;
    }
    xgr_map_set(m, k, v);
  }
  return m;
}

static xgr_value not_bool(cel_ctx *c, const cel_node *n, xgr_value v, const char *what) {
  if (cel_is_err(v)) return v;
  xgr_value r = xgr__cel_err(c, n->pos, "no such overload: %s needs a bool, got %s", what, xgr__cel_kind_name(v));
  xgr_value_release(v);
  return r;
}

static xgr_value ev_comp(cel_ctx *c, const cel_node *n) {
  xgr_value range = ev(c, n->a);
  if (cel_is_err(range)) return range;
  uint32_t len;
  if (range.kind == XGR_VLIST) len = range.as.l->len;
  else if (range.kind == XGR_VMAP) len = range.as.m->len;
  else {
    xgr_value r = xgr__cel_err(c, n->pos, "no such overload: comprehension over %s (needs a list or map)",
                          xgr__cel_kind_name(range));
    xgr_value_release(range);
    return r;
  }
  xgr_value *slot = &c->slots[n->slot];
  xgr_value acc = xgr_value_null(), err = xgr_value_null();
  bool have_err = false;
  int64_t count = 0;
  macro_kind mk = (macro_kind)n->fn;
  if (mk == M_MAP || mk == M_MAP3 || mk == M_FILTER) acc = xgr_list_new(len);
  for (uint32_t i = 0; i < len; i++) {
    xgr_value out;
    if (!xgr__cel_charge(c, n->pos, 1u + n->nargs, &out)) {
      xgr_value_release(acc);
      if (have_err) xgr_value_release(err);
      xgr_value_release(range);
      return out;
    }
    *slot = range.kind == XGR_VLIST ? range.as.l->items[i] : range.as.m->e[i].key;
    xgr_value v = ev(c, n->b);
    switch (mk) {
      case M_ALL:
      case M_EXISTS: {
        bool decisive = mk == M_EXISTS;
        if (v.kind == XGR_VBOOL) {
          if (v.as.b == decisive) {
            if (have_err) xgr_value_release(err);
            xgr_value_release(range);
            return xgr_value_bool(decisive);
          }
        } else if (!have_err) {
          err = not_bool(c, n, v, mk == M_ALL ? "all()" : "exists()");
          have_err = true;
        } else {
          xgr_value_release(v);
        }
        break;
      }
      case M_EXISTS_ONE:
        if (v.kind != XGR_VBOOL) {
          xgr_value_release(range);
          return not_bool(c, n, v, "exists_one()");
        }
        count += v.as.b;
        break;
      case M_MAP:
        if (cel_is_err(v)) {
          xgr_value_release(acc);
          xgr_value_release(range);
          return v;
        }
        xgr_list_push(acc, v);
        break;
      case M_MAP3:
      case M_FILTER:
        if (v.kind != XGR_VBOOL) {
          xgr_value_release(acc);
          xgr_value_release(range);
          return not_bool(c, n, v, mk == M_FILTER ? "filter()" : "map() filter");
        }
        if (v.as.b) {
          xgr_value t = mk == M_FILTER ? xgr_value_retain(*slot) : ev(c, n->c);
          if (cel_is_err(t)) {
            xgr_value_release(acc);
            xgr_value_release(range);
            return t;
          }
          xgr_list_push(acc, t);
        }
        break;
    }
  }
  xgr_value_release(range);
  switch (mk) {
    case M_ALL: return have_err ? err : xgr_value_bool(true);
    case M_EXISTS: return have_err ? err : xgr_value_bool(false);
    case M_EXISTS_ONE: return xgr_value_bool(count == 1);
    default: return acc;
  }
}

/* Functions that only read their first argument (never keep a reference to the list itself):
 * a small list literal in that position is built on the stack instead of the heap. */
static bool borrows_list_arg0(int fn) {
  switch (fn) {
    case F_SIZE: case F_MAX: case F_MIN: case F_SUM: case F_AVG: case F_MEDIAN: case F_STDEV:
    case F_CV: case F_MAD: case F_QUORUM: case F_CONSENSUS: case F_JOIN:
      return true;
    default: return false;
  }
}

static xgr_value ev_call(cel_ctx *c, const cel_node *n) {
  xgr_value args[8];
  xgr_value *a = n->nargs <= 8 ? args : xgr__xmalloc(n->nargs * sizeof *a);
  xgr_value r;
  uint32_t k = 0;
  /* stack list for a literal first argument */
  xgr_value items[16];
  xgr_list tmp;
  uint32_t nitems = 0;
  bool stack_list = false;
  const cel_node *a0 = n->nargs ? &c->p->nodes[c->p->kids[n->args]] : NULL;
  if (a0 && a0->op == N_LIST && a0->nargs <= 16 && borrows_list_arg0(n->fn)) {
    stack_list = true;
    uint32_t deep = a0->nargs;
    for (; nitems < a0->nargs; nitems++) {
      items[nitems] = ev(c, c->p->kids[a0->args + nitems]);
      if (cel_is_err(items[nitems])) break;
      uint32_t d = xgr_value_max_list_len(items[nitems]);
      if (d > deep) deep = d;
    }
    if (nitems < a0->nargs) {
      r = items[nitems];
      for (uint32_t i = 0; i < nitems; i++) xgr_value_release(items[i]);
      if (a != args) free(a);
      return r;
    }
    atomic_init(&tmp.rc, 1);
    tmp.len = tmp.cap = nitems;
    tmp.deepmax = deep;
    tmp.items = items;
    a[0] = xgr_value_null();
    a[0].kind = XGR_VLIST;
    a[0].as.l = &tmp;
    k = 1;
  }
  for (; k < n->nargs; k++) {
    a[k] = ev(c, c->p->kids[n->args + k]);
    if (cel_is_err(a[k])) break;
  }
  if (k < n->nargs) r = a[k];
  else r = xgr__cel_call(c, n, n->fn, a, n->nargs);
  for (uint32_t i = stack_list ? 1 : 0; i < k; i++) xgr_value_release(a[i]);
  for (uint32_t i = 0; i < nitems; i++) xgr_value_release(items[i]);
  if (a != args) free(a);
  return r;
}

static xgr_value ev(cel_ctx *c, int32_t id) {
  const cel_node *n = &c->p->nodes[id];
  xgr_value l, r, out;
  switch ((node_op)n->op) {
    case N_CONST: return xgr_value_retain(c->p->consts[n->a]);
    case N_VAR:
    case N_LOCAL:
      l = c->slots[n->a];
      if (l.kind == XGR_VUNBOUND) {
        if (n->op == N_VAR) return xgr__cel_err(c, n->pos, "undeclared reference to '%s'", c->p->vars[n->a].name);
        return xgr__cel_err(c, n->pos, "comprehension variable used outside its comprehension");
      }
      return xgr_value_retain(l);
    case N_QUAL: return ev_qual(c, n);
    case N_SELECT:
      l = ev(c, n->a);
      if (cel_is_err(l)) return l;
      out = select_field(c, n, l, n->b);
      xgr_value_release(l);
      return out;
    case N_HAS: {
      l = ev(c, n->a);
      if (cel_is_err(l)) return l;
      if (l.kind != XGR_VMAP) {
        out = xgr__cel_err(c, n->pos, "has() on type '%s' (needs a map)", xgr__cel_kind_name(l));
      } else {
        xgr_value f = c->p->consts[n->b], dummy;
        out = xgr_value_bool(xgr__map_get_str_hashed(l.as.m, f.as.s->data, f.as.s->len, c->p->hashes[n->b], &dummy));
      }
      xgr_value_release(l);
      return out;
    }
    case N_INDEX:
      l = ev(c, n->a);
      if (cel_is_err(l)) return l;
      r = ev(c, n->b);
      if (cel_is_err(r)) {
        xgr_value_release(l);
        return r;
      }
      out = ev_index(c, n, l, r);
      xgr_value_release(l);
      xgr_value_release(r);
      return out;
    case N_LIST: return ev_list(c, n);
    case N_MAP: return ev_map(c, n);
    case N_NOT:
      l = ev(c, n->a);
      if (l.kind == XGR_VBOOL) return xgr_value_bool(!l.as.b);
      return not_bool(c, n, l, "'!'");
    case N_NEG:
      l = ev(c, n->a);
      switch (l.kind) {
        case XGR_VINT:
          if (l.as.i == INT64_MIN) return xgr__cel_err(c, n->pos, "int overflow in unary '-'");
          return xgr_value_int(-l.as.i);
        case XGR_VDOUBLE: return xgr_value_double(-l.as.d);
        case XGR_VBIGINT: out = big_arith(c, n->pos, '-', xgr_value_int(0), l); xgr_value_release(l); return out;
        case XGR_VERR: return l;
        default:
          out = xgr__cel_err(c, n->pos, "no such overload: -%s", xgr__cel_kind_name(l));
          xgr_value_release(l);
          return out;
      }
    case N_AND:
    case N_OR: {
      bool decisive = n->op == N_OR;
      l = ev(c, n->a);
      if (l.kind == XGR_VBOOL && l.as.b == decisive) return l;
      r = ev(c, n->b);
      if (r.kind == XGR_VBOOL && r.as.b == decisive) {
        xgr_value_release(l);
        return r;
      }
      if (l.kind == XGR_VBOOL && r.kind == XGR_VBOOL) return r;
      if (cel_is_err(l)) {
        xgr_value_release(r);
        return l;
      }
      if (cel_is_err(r)) {
        xgr_value_release(l);
        return r;
      }
      out = xgr__cel_err(c, n->pos, "no such overload: %s %s %s", xgr__cel_kind_name(l), decisive ? "||" : "&&",
                    xgr__cel_kind_name(r));
      xgr_value_release(l);
      xgr_value_release(r);
      return out;
    }
    case N_COND:
      l = ev(c, n->a);
      if (l.kind != XGR_VBOOL) return not_bool(c, n, l, "'?:'");
      return ev(c, l.as.b ? n->b : n->c);
    case N_COMP: return ev_comp(c, n);
    case N_CALL: return ev_call(c, n);
    case N_ERROR: {
      /* arguments are evaluated first so that their errors win, as in CEL */
      for (uint32_t i = 0; i < n->nargs; i++) {
        l = ev(c, c->p->kids[n->args + i]);
        if (cel_is_err(l)) return l;
        xgr_value_release(l);
      }
      return xgr__cel_err(c, n->pos, "%s", c->p->consts[n->b].as.s->data);
    }
    case N_IDENT: return xgr__cel_err(c, n->pos, "internal error: unresolved identifier");
    default: break;
  }
  /* binary operators: both sides evaluated, errors propagate */
  l = ev(c, n->a);
  if (cel_is_err(l)) return l;
  r = ev(c, n->b);
  if (cel_is_err(r)) {
    xgr_value_release(l);
    return r;
  }
  switch ((node_op)n->op) {
    case N_ADD: out = xgr__cel_op_add(c, n->pos, l, r); break;
    case N_SUB: out = xgr__cel_op_sub(c, n->pos, l, r); break;
    case N_MUL: out = op_mul(c, n->pos, l, r); break;
    case N_DIV: out = xgr__cel_op_div(c, n->pos, l, r); break;
    case N_MOD: out = op_mod(c, n->pos, l, r); break;
    case N_EQ: out = xgr_value_bool(xgr_value_equal(l, r)); break;
    case N_NE: out = xgr_value_bool(!xgr_value_equal(l, r)); break;
    case N_LT: out = op_cmp(c, n->pos, 0, l, r); break;
    case N_LE: out = op_cmp(c, n->pos, 1, l, r); break;
    case N_GT: out = op_cmp(c, n->pos, 2, l, r); break;
    case N_GE: out = op_cmp(c, n->pos, 3, l, r); break;
    case N_IN: out = op_in(c, n->pos, l, r); break;
    default: out = xgr__cel_err(c, n->pos, "internal error: bad node %d", n->op); break;
  }
  xgr_value_release(l);
  xgr_value_release(r);
  return out;
}

/* ---- entry point -------------------------------------------------------------------------- */

static bool lookup(const xgr_cel_vars *vars, const cel_var *v, xgr_value *out) {
  for (const xgr_cel_vars *l = vars; l; l = l->next) {
    switch (l->type) {
      case XGR_CEL_VARS_MAP:
        if (l->map.kind == XGR_VMAP &&
            xgr__map_get_str_hashed(l->map.as.m, v->name, v->len, v->hash, out))
          return true;
        break;
      case XGR_CEL_VARS_ONE:
        if (l->name && strlen(l->name) == v->len && !memcmp(l->name, v->name, v->len)) {
          *out = l->value;
          return true;
        }
        break;
      case XGR_CEL_VARS_FN:
        if (l->fn && l->fn(l->ctx, v->name, v->len, out)) return true;
        break;
    }
  }
  return false;
}

int xgr__cel_eval_program(const xgr_cel_program *p, const xgr_cel_vars *vars, xgr_value *result,
                     xgr_error *e) {
  cel_ctx c;
  c.p = p;
  c.cost = 0;
  c.max_cost = p->max_cost;
  c.nerr = 0;
  c.md = NULL;
  xgr_value local[16];
  c.slots = p->nslots <= 16 ? local : xgr__xmalloc(p->nslots * sizeof(xgr_value));
  int status = XGR_CEL_OK;
  *result = xgr_value_null();
  xgr_value unbound = {0};
  unbound.kind = XGR_VUNBOUND;
  for (uint32_t i = 0; i < p->nvars; i++) {
    if (!lookup(vars, &p->vars[i], &c.slots[i])) {
      c.slots[i] = unbound;
      if (p->mode != XGR_CEL_MODE_PLAIN && i < p->nroots) {
        xgr_error_set(e, XGR_ENOTFOUND, NULL, "missing key '%s'", p->vars[i].name);
        if (p->mode == XGR_CEL_MODE_RULE) {
          *result = xgr_value_bool(false);
          status = XGR_CEL_MISSING;
        } else {
          status = XGR_CEL_SOFT_INVALID;
        }
        goto done;
      }
    } else if (p->max_list_cap && xgr_value_max_list_len(c.slots[i]) > p->max_list_cap) {
      xgr_error_set(e, XGR_ELIMIT, NULL, "variable '%s' holds a list of %zu elements, MaxListCap is %zu",
                    p->vars[i].name, xgr_value_max_list_len(c.slots[i]), p->max_list_cap);
      status = XGR_CEL_ERROR;
      goto done;
    }
  }
  for (uint32_t i = p->nvars; i < p->nslots; i++) c.slots[i] = unbound;
  xgr_value r = ev(&c, (int32_t)p->root);
  if (r.kind == XGR_VERR) {
    const cel_errrec *er = &c.err[r.as.u % CEL_ERR_RING];
    if (c.nerr - r.as.u > CEL_ERR_RING) xgr_error_set(e, XGR_EEVAL, NULL, "evaluation error");
    else xgr_error_set(e, er->code, NULL, "at %u: %s", er->pos, er->msg);
    status = XGR_CEL_ERROR;
  } else if (p->mode == XGR_CEL_MODE_RULE && r.kind != XGR_VBOOL) {
    xgr_error_set(e, XGR_EEVAL, NULL, "a rule must evaluate to bool, got %s", xgr__cel_kind_name(r));
    xgr_value_release(r);
    status = XGR_CEL_ERROR;
  } else {
    *result = r;
  }
done:
  if (c.md) pcre2_match_data_free(c.md);
  if (c.slots != local) free(c.slots);
  return status;
}
