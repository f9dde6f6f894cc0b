/* sqlite_col.h — the one reader of a text column that both SQLite users of the library share: the
 * store's SQLite backend (src/store/sqlite.c) and the chain executor's journal
 * (src/chain/exec_journal.c), which may not include each other's private headers: so it is one
 * of the library's shared utilities (src/util). Header-only (static inline): it adds no symbol. */
#ifndef XGR_UTIL_SQLITE_COL_H
#define XGR_UTIL_SQLITE_COL_H

#include <sqlite3.h>

#include "util/alloc.h"

/* Column i of the current row as a new string (the caller frees it), or NULL for SQL NULL. */
static inline char *xgr__sqlite_col_text(sqlite3_stmt *s, int i) {
  const unsigned char *t = sqlite3_column_text(s, i);
  return t ? xgr__xstrdup((const char *)t) : NULL;
}

#endif
