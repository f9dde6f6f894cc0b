#!/usr/bin/env bash
# scripts/check_layout.sh — the project's layout rules, checked from the source text alone (bash and
# awk, no compiler): which module may include which header, how big a C file may grow, how symbols
# and private headers are named, where memory is allocated and where the environment is read. It
# prints one line per violation, `file:line: rule: what`, and exits 1 when there is any, 0 when the
# tree keeps every rule. Meson runs it as the test `check_layout` (suite 'layout'), so `make test`
# and CI fail on a violation; by hand: `scripts/check_layout.sh` from anywhere in the checkout.
#
# The rules (docs/ARCHITECTURE.md explains the layers they protect):
#   layering      nothing under src/{node,engine,store,session,rule,orch,cel,value,util,auth,chain,
#                 runtime,xrc,explore} includes an "rpc/..." header; src/cli (the front ends)
#                 includes only public headers ("xgr/...") and its own ("cli/...");
#   private       a module includes no other module's private header; the shared ones are
#                 src/util/*.h (the library's own utilities) and value/value_impl.h (the layout of
#                 values and the library-private value helpers every evaluator reads);
#   rpc-code      JSON-RPC error codes (XGR_RPC_...) appear only in src/rpc and src/cli; the layers
#                 below return xgr_errcode and the dispatcher maps it in one place;
#   size          no C file under src/ is over 1,500 lines;
#   public-name   every name declared in include/xgr/*.h (functions, types, tags, enum constants,
#                 variables) starts with xgr_, every macro with XGR_; no xgr__ (library-private)
#                 name appears there;
#   impl-header   a header inside src/<module>/ is private to that module and is named *_impl.h
#                 (src/util/*.h, the shared utilities, and src/cli/*.h, the front end's own, are
#                 exempt);
#   symbol        every function or variable defined in src/ without `static` (outside src/cli) is
#                 named xgr_... (public) or xgr__... (library-private);
#   alloc         no raw malloc/calloc/realloc/reallocarray/aligned_alloc/strdup/strndup/asprintf
#                 in src/ outside src/util/alloc.c: memory comes from src/util/alloc.h's family
#                 (in src/cli: its public spelling, xgr/alloc.h);
#   getenv        the library reads no environment variable: getenv only in src/cli;
#   rpc-store     src/rpc calls no xgr_store_...() function: the front end reads through the node's
#                 queries and acts through its commands (xgr/node.h); naming the store's record
#                 types (xgr_store_session, ...) is fine.
# Comments and string literals are blanked before the code is read, so prose never trips a rule.
set -uo pipefail
root=$(cd "${1:-$(dirname "$0")/..}" && pwd)   # ROOT: another tree (the self-test's)
cd "$root" || exit 2

out=$(mktemp "${TMPDIR:-/tmp}/check_layout.XXXXXX") || exit 2
trap 'rm -f "$out"' EXIT
mapfile -t files < <(find src include/xgr -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort)
[ "${#files[@]}" -gt 0 ] || { echo "check_layout: no sources under $root/src" >&2; exit 2; }

LC_ALL=C awk -v sq="'" '
function report(line, rule, msg) { print FILENAME ":" line ": " rule ": " msg; nviol++ }

# The line with comments and the contents of string and character literals blanked (the quotes
# stay); a block comment left open carries over to the next line (incom).
function strip(s,   out, i, n, c, q) {
  if (!incom && index(s, "/") == 0 && index(s, "\"") == 0 && index(s, sq) == 0) return s
  out = ""; n = length(s); i = 1
  while (i <= n) {
    c = substr(s, i, 1)
    if (incom) {
      if (c == "*" && substr(s, i + 1, 1) == "/") { incom = 0; out = out "  "; i += 2 } else { out = out " "; i++ }
      continue
    }
    if (c == "/" && substr(s, i + 1, 1) == "*") { incom = 1; out = out "  "; i += 2; continue }
    if (c == "/" && substr(s, i + 1, 1) == "/") break
    if (c == "\"" || c == sq) {
      q = c; i++
      while (i <= n) { c = substr(s, i, 1); if (c == "\\") { i += 2; continue } if (c == q) break; i++ }
      out = out q q; i++; continue
    }
    out = out c; i++
  }
  return out
}

# The file-level facts of FILENAME: module (src/<module>/...), kind of file, exemptions.
function begin_file(   p, n) {
  incom = 0; depth = 0; stmt = ""; inenum = 0; enumbody = ""; cont = 0; skipcpp = 0; cppnest = 0
  n = split(FILENAME, p, "/")
  public = (p[1] == "include")
  module = (p[1] == "src" && n >= 3) ? p[2] : ""
  isc = (FILENAME ~ /\.c$/)
  incli = (module == "cli")
  rpcstore = (module == "rpc")
  lower = (module ~ /^(node|engine|store|session|rule|orch|cel|value|util|auth|chain|runtime|xrc|explore)$/)
  if (p[1] == "src" && FILENAME ~ /\.h$/ && module != "util" && module != "cli" && p[n] !~ /_impl\.h$/)
    report(1, "impl-header", "a private header of src/" module " is named <something>_impl.h, not " p[n])
}

function end_file() {
  if (FILENAME == "") return
  if (p_isc && p_module != "" && p_lines > 1500)
    { print p_name ":" p_lines ": size: " p_lines " lines; a C file under src/ has at most 1,500 (split it by concern)"; nviol++ }
}

# Checks of one #include "..." line.
function check_include(raw, line,   h, m) {
  if (!match(raw, /"[^"]*"/)) return
  h = substr(raw, RSTART + 1, RLENGTH - 2)
  if (module == "") return
  if (h ~ /^rpc\// && lower) report(line, "layering", "src/" module " includes the rpc layer header \"" h "\"")
  if (incli) {
    if (h !~ /^(xgr|cli)\//) report(line, "layering", "src/cli includes \"" h "\"; the front ends include only public headers (xgr/...) and their own (cli/...)")
    return
  }
  m = h; sub(/\/.*/, "", m)
  if (index(h, "/") && m != module && m != "xgr" && m != "util" && h != "value/value_impl.h" && h !~ /^rpc\//)
    report(line, "private", "src/" module " includes \"" h "\", a private header of src/" m "; what crosses modules is a public function in include/xgr")
}

# The line of the first whole-word occurrence of name in the statement text (which carries a
# \034<line>\035 mark at each line start).
function line_of(name,   s, pos, pre, k, l, L) {
  s = stmt; pos = 0; L = length(name)
  while ((k = index(s, name)) > 0) {
    if (substr(s, k - 1, 1) !~ /[A-Za-z0-9_]/ && substr(s, k + L, 1) !~ /[A-Za-z0-9_]/) { pos += k; break }
    pos += k + L - 1; s = substr(s, k + L)
  }
  pre = substr(stmt, 1, pos); l = stmt_line
  while ((k = index(pre, "\034")) > 0) { pre = substr(pre, k + 1); l = substr(pre, 1, index(pre, "\035") - 1) + 0 }
  return l
}

function clean(s) {
  gsub(/\034[0-9]*\035/, " ", s)
  gsub(/__attribute__[ \t]*\(\([^()]*(\([^()]*\)[^()]*)*\)\)/, " ", s)
  gsub(/[ \t]+/, " ", s); sub(/^ /, "", s); sub(/ $/, "", s)
  return s
}

function check_name(name, what, isstatic) {
  if (name == "" || name == "_Static_assert" || name == "static_assert") return
  if (!public && what == "function" && name ~ /^[A-Z_][A-Z0-9_]*$/) return   # a macro that defines one
  if (public) {
    # (an xgr__ name is reported where it appears, in the main rule below)
    if (name !~ /^xgr_/) report(line_of(name), "public-name", what " " name " in a public header does not start with xgr_")
  } else if (!isstatic && !incli && isc && name !~ /^xgr_/) {
    report(line_of(name), "symbol", what " " name " is not static and not named xgr_... (public) or xgr__... (library-private)")
  }
}

# The declarators of a top-level declaration ending in ";" (s: cleaned, brace bodies as {}).
function declaration(s,   isstatic, istypedef, t, name, parts, k, n) {
  if (s == "") return
  isstatic = (s ~ /(^| )static( |$)/)
  istypedef = (s ~ /(^| )typedef( |$)/)
  # tags declared here: struct/union/enum NAME { ... } or a bare forward declaration
  t = s
  while (match(t, /(struct|union|enum) [A-Za-z_][A-Za-z0-9_]* ?\{/)) {
    name = substr(t, RSTART, RLENGTH); sub(/^(struct|union|enum) /, "", name); sub(/ ?\{$/, "", name)
    if (public) check_name(name, "tag", 1)
    t = substr(t, RSTART + RLENGTH)
  }
  if (s ~ /^(struct|union|enum) [A-Za-z_][A-Za-z0-9_]*$/) {
    if (public) { name = s; sub(/^[a-z]+ /, "", name); check_name(name, "tag", 1) }
    return
  }
  if (s ~ /^(struct|union|enum)( [A-Za-z_][A-Za-z0-9_]*)? ?\{\}$/) return
  if (!public && (isstatic || s ~ /(^| )extern( |$)/ && !isc)) return
  if (!public && s ~ /(^| )extern( |$)/) return
  # the text outside the type bodies, split into declarators at top-level commas
  gsub(/\{\}/, "", s)
  n = split_top(s, parts)
  for (k = 1; k <= n; k++) {
    name = declarator_name(parts[k], k == 1)
    if (name == "") continue
    if (istypedef) check_name(name, "type", 1)
    else if (parts[k] ~ /\(/ && parts[k] !~ /\( ?\*/) check_name(name, "function", isstatic)
    else check_name(name, "variable", isstatic)
  }
}

# s split at commas outside parentheses and brackets; returns the count.
function split_top(s, parts,   n, i, c, d, start) {
  n = 0; d = 0; start = 1
  for (i = 1; i <= length(s); i++) {
    c = substr(s, i, 1)
    if (c == "(" || c == "[") d++
    else if (c == ")" || c == "]") d--
    else if (c == "," && d == 0) { parts[++n] = substr(s, start, i - start); start = i + 1 }
  }
  parts[++n] = substr(s, start)
  return n
}

# The name a declarator declares: (*name)(...) for pointers to functions, the word before the first
# "(" for functions, else the last word before "=" or "[".
function declarator_name(d, first,   t) {
  sub(/=.*/, "", d)
  if (index(d, "(")) {
    t = substr(d, index(d, "(") + 1)
    if (t ~ /^ ?\*/) { sub(/^ ?\* ?(const )?/, "", t); sub(/[^A-Za-z0-9_].*/, "", t); return t }
    match(d, /[A-Za-z_][A-Za-z0-9_]* ?\(/)
    t = substr(d, RSTART, RLENGTH); sub(/ ?\($/, "", t); return t
  }
  sub(/\[.*/, "", d); sub(/ +$/, "", d)
  if (!match(d, /[A-Za-z_][A-Za-z0-9_]*$/)) return ""
  t = substr(d, RSTART, RLENGTH)
  if (first && d == t) return ""      # a lone word: a macro invocation, not a declaration
  if (t ~ /^(int|char|void|long|short|unsigned|signed|float|double|bool|const|volatile|struct|union|enum)$/) return ""
  return t
}

# A "{" at file level: a function body, a type body or an initializer.
function open_brace(   s, name) {
  s = clean(stmt)
  if (s ~ /\)$/ || s ~ /\) ?(const )?$/) {
    if (s ~ /(^| )(struct|union|enum)( |$)/ && s !~ /\(/) return "type"
    if (s ~ /=/) return "init"
    if (match(s, /[A-Za-z_][A-Za-z0-9_]* ?\(/)) {
      name = substr(s, RSTART, RLENGTH); sub(/ ?\($/, "", name)
      check_name(name, "function", s ~ /(^| )static( |$)/)
    }
    return "func"
  }
  if (s ~ /(^| )enum( [A-Za-z_][A-Za-z0-9_]*)? ?$/) return "enum"
  if (s ~ /=$/ || s ~ /= ?$/) return "init"
  return "type"
}

function enum_constants(body,   parts, n, k, t) {
  n = split(body, parts, ",")
  for (k = 1; k <= n; k++) {
    t = parts[k]; gsub(/\034[0-9]*\035/, " ", t); sub(/=.*/, "", t); gsub(/[ \t]/, "", t)
    if (t == "") continue
    if (public && t !~ /^XGR_/ && t !~ /^xgr_/) report(enum_line(t), "public-name", "enum constant " t " in a public header does not start with XGR_")
  }
}
function enum_line(t,   save, l) { save = stmt; stmt = enumbody; l = line_of(t); stmt = save; return l }

# The code of one line (comments and literals blanked) through the file-level scanner.
function scan(s, line,   c, pre) {
  if (depth == 0) stmt = stmt "\034" line "\035"
  else if (inenum && depth == 1) enumbody = enumbody "\034" line "\035"
  while (match(s, /[{};]/)) {
    pre = substr(s, 1, RSTART - 1); c = substr(s, RSTART, 1); s = substr(s, RSTART + 1)
    if (depth == 0) stmt = stmt pre
    else if (inenum && depth == 1) enumbody = enumbody pre
    if (c == "{") {
      if (depth == 0) { opened = open_brace(); stmt_open_line = line; if (opened == "enum") { inenum = 1; enumbody = "\034" line "\035" } }
      depth++
    } else if (c == "}") {
      if (depth > 0) depth--
      if (depth == 0) {
        if (inenum) { enum_constants(enumbody); inenum = 0 }
        if (opened == "func") { stmt = ""; stmt_line = line } else stmt = stmt "{}"
      }
    } else if (c == ";" && depth == 0) {
      declaration(clean(stmt)); stmt = ""; stmt_line = line
    }
  }
  if (depth == 0) stmt = stmt s
  else if (inenum && depth == 1) enumbody = enumbody s
}

FNR == 1 {
  if (NR > 1) end_file()
  begin_file()
  stmt_line = 1
}
{
  p_name = FILENAME; p_lines = FNR; p_isc = isc; p_module = module
  raw = $0
  # preprocessor lines (and their continuations) are not code for the scanner
  if (cont) { cont = (raw ~ /\\$/); strip(raw); next }
  code = strip(raw)
  if (skipcpp) {
    if (code ~ /^[ \t]*#[ \t]*if/) cppnest++
    else if (code ~ /^[ \t]*#[ \t]*endif/) { if (cppnest == 0) skipcpp = 0; else cppnest-- }
    next
  }
  if (code ~ /^[ \t]*#/) {
    cont = (raw ~ /\\$/)
    if (code ~ /^[ \t]*#[ \t]*if(def)?[ \t]+(defined[ \t]*\(?[ \t]*)?__cplusplus/) { skipcpp = 1; cppnest = 0; next }
    if (code ~ /^[ \t]*#[ \t]*include[ \t]*"/) check_include(raw, FNR)
    if (public && code ~ /^[ \t]*#[ \t]*define[ \t]/) {
      m = code; sub(/^[ \t]*#[ \t]*define[ \t]+/, "", m); sub(/[^A-Za-z0-9_].*/, "", m)
      if (m !~ /^XGR_/) report(FNR, "public-name", "macro " m " in a public header does not start with XGR_")
    }
    next
  }
  if (public && match(code, /(^|[^A-Za-z0-9_])xgr__[A-Za-z0-9_]*/)) {
    m = substr(code, RSTART, RLENGTH); sub(/^[^x]/, "", m)
    report(FNR, "public-name", "a public header names " m "; xgr__ names are library-private, public ones are xgr_...")
  }
  if (module != "" && !incli && module != "rpc" && code ~ /(^|[^A-Za-z0-9_])XGR_RPC_[A-Z0-9_]/) {
    match(code, /XGR_RPC_[A-Z0-9_]*/)
    report(FNR, "rpc-code", "src/" module " uses the JSON-RPC code " substr(code, RSTART, RLENGTH) "; below src/rpc only xgr_errcode is returned")
  }
  if (module != "" && FILENAME != "src/util/alloc.c" && match(code, /(^|[^A-Za-z0-9_.>])(malloc|calloc|realloc|reallocarray|aligned_alloc|strdup|strndup|v?asprintf)[ \t]*\(/)) {
    f = substr(code, RSTART, RLENGTH); sub(/^[^a-z]/, "", f); sub(/[ \t]*\($/, "", f)
    if (incli) report(FNR, "alloc", "raw " f "(); the front ends allocate through xgr/alloc.h (xgr_alloc_bytes, xgr_alloc_zeroed, xgr_alloc_resize, xgr_alloc_strdup)")
    else report(FNR, "alloc", "raw " f "(); allocate through src/util/alloc.h (xgr__xmalloc, xgr__xcalloc, xgr__xrealloc, xgr__xstrdup, ...)")
  }
  if (module != "" && !incli && code ~ /(^|[^A-Za-z0-9_])(secure_)?getenv[ \t]*\(/)
    report(FNR, "getenv", "the library reads the environment; only the front ends (src/cli) call getenv and pass the value in")
  if (rpcstore && match(code, /(^|[^A-Za-z0-9_])xgr_store_[A-Za-z0-9_]*[ \t]*\(/)) {
    f = substr(code, RSTART, RLENGTH); sub(/^[^x]/, "", f); sub(/[ \t]*\($/, "", f)
    report(FNR, "rpc-store", "src/rpc calls " f "(); the front end reads through the queries of the node and acts through its commands (xgr/node.h)")
  }
  scan(code, FNR)
}
END { end_file() }
' "${files[@]}" >"$out" || { echo "check_layout: awk failed" >&2; exit 2; }
n=$(wc -l <"$out")
LC_ALL=C sort -t: -k1,1 -k2,2n -k3 "$out"
[ "$n" -eq 0 ] || { echo "check_layout: $n violation(s)"; exit 1; }
