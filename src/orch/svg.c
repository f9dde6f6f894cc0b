/* svg.c — an orchestration as SVG (xgr/svg.h): the DOT drawing of graph.c, laid out and rendered
 * by Graphviz (gvc + cgraph), with stable element ids for the console's live overlay.
 *
 * The DOT text comes from xgr_orch_graph (one drawing for `xgr graph --format dot`, `--format svg`
 * and xgrd's console). Its node names are positional (s<index>, j<index>_<branch>); after parsing
 * it with cgraph every node and edge gets an `id` attribute made of step ids instead, which
 * Graphviz writes on the SVG group of that node or edge. Graphviz is not thread-safe (global lexer
 * and plugin state), so one process-wide lock serialises the calls: a library-wide resource, not
 * hidden state of ours.
 *
 * The context is made with gvContextPlugins from two built-in plugin libraries, Graphviz's `dot`
 * layout and its `core` renderers (linked from the graphviz plugin directory, see meson.build),
 * instead of gvContext's configured plugins: no pango or fontconfig is loaded (their caches outlive
 * a context and leak), and text is measured with Graphviz's own font metrics, so the drawing is the
 * same on every machine. The browser draws the text itself.
 */
#include "xgr/svg.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>
#include <graphviz/gvplugin.h>
#include <pthread.h>
#include <stdio.h>
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

static pthread_mutex_t gv_lock = PTHREAD_MUTEX_INITIALIZER;

/* exported by libgvplugin_dot_layout and libgvplugin_core */
extern gvplugin_library_t gvplugin_dot_layout_LTX_library;
extern gvplugin_library_t gvplugin_core_LTX_library;

/* Decode a node name of graph.c's DOT: "s<i>" (step i) or "j<i>_<b>" (join declared by step i on
 * branch b). Returns 's', 'j' or 0 when the name is neither. */
static int node_kind(const xgr_orch *o, const char *name, size_t *step, int *branch) {
  char *end;
  if (name[0] == 's') {
    unsigned long i = strtoul(name + 1, &end, 10);
    if (end == name + 1 || *end || i >= o->nsteps) return 0;
    *step = i;
    return 's';
  }
  if (name[0] == 'j') {
    unsigned long i = strtoul(name + 1, &end, 10);
    if (end == name + 1 || *end != '_' || i >= o->nsteps) return 0;
    char *e2;
    unsigned long b = strtoul(end + 1, &e2, 10);
    if (e2 == end + 1 || *e2 || b > 1) return 0;
    *step = i;
    *branch = (int)b;
    return 'j';
  }
  return 0;
}

static const char *branch_name(int b) { return b == XGR_ON_VALID ? "valid" : "invalid"; }

/* Give every node and edge of g its stable id (see xgr/svg.h). */
static void assign_ids(const xgr_orch *o, Agraph_t *g) {
  Agsym_t *nid = agattr(g, AGNODE, "id", "");
  Agsym_t *eid = agattr(g, AGEDGE, "id", "");
  Agsym_t *estyle = agattr(g, AGEDGE, "style", "");
  Agsym_t *elabel = agattr(g, AGEDGE, "label", "");
  char buf[600];
  for (Agnode_t *n = agfstnode(g); n; n = agnxtnode(g, n)) {
    size_t s;
    int b = 0;
    int k = node_kind(o, agnameof(n), &s, &b);
    if (k == 's') snprintf(buf, sizeof buf, "step-%s", o->steps[s].id);
    else if (k == 'j') snprintf(buf, sizeof buf, "join-%s-%s", o->steps[s].id, branch_name(b));
    else continue;
    agxset(n, nid, buf);
  }
  for (Agnode_t *n = agfstnode(g); n; n = agnxtnode(g, n)) {
    for (Agedge_t *e = agfstout(g, n); e; e = agnxtout(g, e)) {
      size_t ts, hs;
      int tb = 0, hb = 0;
      int tk = node_kind(o, agnameof(agtail(e)), &ts, &tb), hk = node_kind(o, agnameof(aghead(e)), &hs, &hb);
      const char *label = agxget(e, elabel);
      if (tk == 's' && hk == 's')
        snprintf(buf, sizeof buf, "spawn-%s-%s-%s", o->steps[ts].id, o->steps[hs].id,
                 !strcmp(label, "invalid") ? "invalid" : "valid");
      else if (tk == 's' && hk == 'j' && !strcmp(agxget(e, estyle), "dotted"))
        snprintf(buf, sizeof buf, "open-%s-%s", o->steps[hs].id, branch_name(hb));
      else if (tk == 's' && hk == 'j')
        snprintf(buf, sizeof buf, "from-%s-%s-%s", o->steps[ts].id, o->steps[hs].id, branch_name(hb));
      else if (tk == 'j' && hk == 's')
        snprintf(buf, sizeof buf, "target-%s-%s", o->steps[ts].id, branch_name(tb));
      else
        continue;
      agxset(e, eid, buf);
    }
  }
}

int xgr_orch_svg(const xgr_orch *o, char **out, size_t *len, xgr_error *err) {
  assert(o && out && len);
  *out = NULL;
  *len = 0;
  char *dot = NULL;
  size_t dlen = 0;
  FILE *f = open_memstream(&dot, &dlen);
  if (!f) return xgr_error_set(err, XGR_EIO, NULL, "cannot open a memory stream for the DOT text");
  int rc = xgr_orch_graph(o, XGR_GRAPH_DOT, f);
  if (fclose(f) || rc) {
    free(dot);
    return xgr_error_set(err, XGR_EIO, NULL, "cannot write the DOT text of the orchestration");
  }
  pthread_mutex_lock(&gv_lock);
  const lt_symlist_t builtins[] = {{"gvplugin_dot_layout_LTX_library", &gvplugin_dot_layout_LTX_library},
                                   {"gvplugin_core_LTX_library", &gvplugin_core_LTX_library},
                                   {NULL, NULL}};
  GVC_t *gvc = gvContextPlugins(builtins, 0);
  Agraph_t *g = gvc ? agmemread(dot) : NULL;
  free(dot);
  if (!g) {
    if (gvc) gvFreeContext(gvc);
    pthread_mutex_unlock(&gv_lock);
    return xgr_error_set(err, XGR_EIO, NULL, "Graphviz cannot read the orchestration's DOT text");
  }
  assign_ids(o, g);
  /* a little more room between ranks than `xgr graph --format dot`: the console writes each node's
   * live state under it */
  agattr(g, AGRAPH, "ranksep", "1.0");
  agattr(g, AGRAPH, "labelloc", "t");   /* the title on top, clear of the last rank's live labels */
  agattr(g, AGRAPH, "fontname", "Helvetica");   /* measured with Graphviz's metrics, drawn by a browser */
  agattr(g, AGRAPH, "fontsize", "11");
  rc = 0;
  char *data = NULL;
  unsigned int n = 0;
  if (gvLayout(gvc, g, "dot") != 0) {
    rc = xgr_error_set(err, XGR_EIO, NULL, "Graphviz has no `dot` layout (is libgvc's dot_layout plugin installed?)");
  } else {
    if (gvRenderData(gvc, g, "svg", &data, &n) != 0 || !data)
      rc = xgr_error_set(err, XGR_EIO, NULL, "Graphviz cannot render SVG (is libgvc's core plugin installed?)");
    gvFreeLayout(gvc, g);
  }
  if (!rc) {
    *out = xgr__xmalloc((size_t)n + 1);
    memcpy(*out, data, n);
    (*out)[n] = '\0';
    *len = n;
  }
  if (data) gvFreeRenderData(data);
  agclose(g);
  gvFreeContext(gvc);
  pthread_mutex_unlock(&gv_lock);
  return rc;
}
