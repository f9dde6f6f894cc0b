/* graph.c — diagrams of an orchestration in Mermaid (flowchart) or Graphviz DOT.
 *
 * Steps are boxes labelled with their id and rule. Spawn edges are solid for onValid and dashed
 * for onInvalid. Each join declaration becomes its own join node (a hexagon) annotated
 * "k of n · kill|drain": a dotted edge from the declaring step opens it, every `from` node has
 * an edge into it labelled with its `when`, and a thick edge leads from it to the join target.
 */
#include <stdio.h>
#include <string.h>

#include "xgr/orch.h"

/* Write s escaped for a quoted Mermaid label. */
static void mm_escape(FILE *f, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '"': fputs("#quot;", f); break;
      case '<': fputs("#lt;", f); break;
      case '>': fputs("#gt;", f); break;
      case '#': fputs("#35;", f); break;
      default: fputc(*s, f);
    }
  }
}

/* Write s escaped for a quoted DOT string. */
static void dot_escape(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
}

static void join_label(const xgr_orch *o, const xgr_join *j, char *buf, size_t n) {
  snprintf(buf, n, "join %s · %u of %u · %s", o->steps[j->target].id, j->k, j->n,
           xgr_policy_name(j->policy));
}

static int mermaid(const xgr_orch *o, FILE *f) {
  fprintf(f, "flowchart TD\n");
  fprintf(f, "  %%%% orchestration %s, hash %s\n", o->id[0] ? o->id : "(no id)", o->hash);
  for (size_t s = 0; s < o->nsteps; s++) {
    fprintf(f, "  s%zu[\"<b>", s);
    mm_escape(f, o->steps[s].id);
    fputs("</b><br/><small>", f);
    mm_escape(f, o->steps[s].rule);
    fputs("</small>\"]\n", f);
  }
  for (size_t s = 0; s < o->nsteps; s++) {
    for (int b = 0; b < 2; b++) {
      const xgr_branch *br = &o->steps[s].branch[b];
      const char *arrow = b == XGR_ON_VALID ? "-->|valid|" : "-.->|invalid|";
      for (size_t i = 0; i < br->nspawns; i++) fprintf(f, "  s%zu %s s%u\n", s, arrow, br->spawns[i]);
      if (!br->join) continue;
      const xgr_join *j = br->join;
      char lbl[160];
      join_label(o, j, lbl, sizeof lbl);
      fprintf(f, "  j%zu_%d{{\"", s, b);
      mm_escape(f, lbl);
      fputs("\"}}\n", f);
      fprintf(f, "  s%zu -.-|%s opens| j%zu_%d\n", s, b == XGR_ON_VALID ? "valid" : "invalid", s, b);
      for (size_t k = 0; k < j->n; k++)
        fprintf(f, "  s%u -->|%s| j%zu_%d\n", j->from[k].node, xgr_when_name(j->from[k].when), s, b);
      fprintf(f, "  j%zu_%d ==> s%u\n", s, b, j->target);
      fprintf(f, "  style j%zu_%d fill:#fff4d6,stroke:#c08a00\n", s, b);
    }
  }
  return ferror(f) ? XGR_EIO : 0;
}

static int dot(const xgr_orch *o, FILE *f) {
  fputs("digraph orchestration {\n  rankdir=TB;\n  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n"
        "  edge [fontname=\"Helvetica\", fontsize=10];\n  label=\"",
        f);
  dot_escape(f, o->id[0] ? o->id : "(no id)");
  fprintf(f, " %s\";\n", o->hash);
  for (size_t s = 0; s < o->nsteps; s++) {
    fprintf(f, "  s%zu [label=\"", s);
    dot_escape(f, o->steps[s].id);
    fputs("\\n", f);
    dot_escape(f, o->steps[s].rule);
    fputs("\"];\n", f);
  }
  for (size_t s = 0; s < o->nsteps; s++) {
    for (int b = 0; b < 2; b++) {
      const xgr_branch *br = &o->steps[s].branch[b];
      const char *attr = b == XGR_ON_VALID ? "label=\"valid\", color=\"#2e7d32\""
                                           : "label=\"invalid\", style=dashed, color=\"#c62828\"";
      for (size_t i = 0; i < br->nspawns; i++) fprintf(f, "  s%zu -> s%u [%s];\n", s, br->spawns[i], attr);
      if (!br->join) continue;
      const xgr_join *j = br->join;
      char lbl[160];
      join_label(o, j, lbl, sizeof lbl);
      fprintf(f, "  j%zu_%d [shape=hexagon, style=filled, fillcolor=\"#fff4d6\", label=\"", s, b);
      dot_escape(f, lbl);
      fputs("\"];\n", f);
      fprintf(f, "  s%zu -> j%zu_%d [style=dotted, arrowhead=none, label=\"%s opens\"];\n", s, s, b,
              b == XGR_ON_VALID ? "valid" : "invalid");
      for (size_t k = 0; k < j->n; k++)
        fprintf(f, "  s%u -> j%zu_%d [label=\"%s\"];\n", j->from[k].node, s, b, xgr_when_name(j->from[k].when));
      fprintf(f, "  j%zu_%d -> s%u [penwidth=2];\n", s, b, j->target);
    }
  }
  fputs("}\n", f);
  return ferror(f) ? XGR_EIO : 0;
}

int xgr_orch_graph(const xgr_orch *o, xgr_graph_format fmt, FILE *f) {
  return fmt == XGR_GRAPH_DOT ? dot(o, f) : mermaid(o, f);
}
