/* shared_dir.h — for the tests that check xgr against the material in ../shared (the public
 * examples, the CEL conformance corpus, the specification's vectors). That folder sits beside the
 * project's CI checkout only; a clone of the repository has no such folder, so these tests are in
 * the meson suite 'shared' and skip (exit 77, which meson shows as SKIP) when it is absent.
 * tests/meson.build passes its location as XGR_SHARED (the meson option shared_dir, by default
 * ../shared beside the source tree). Everything else a test needs is inside the repository.
 */
#ifndef XGR_TEST_SHARED_DIR_H
#define XGR_TEST_SHARED_DIR_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* $XGR_SHARED when it names a directory. Otherwise print one line saying that `what` was skipped
 * and why, and exit 77. */
static inline const char *shared_dir_or_skip(const char *test, const char *what) {
  const char *dir = getenv("XGR_SHARED");
  struct stat st;
  if (dir && *dir && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return dir;
  printf("SKIP %s: %s not checked: %s is not there (the public specification material, beside the "
         "project's CI checkout only; README.md, \"Tests against ../shared\")\n",
         test, what, dir && *dir ? dir : "XGR_SHARED (unset)");
  fflush(stdout);
  exit(77);
}

#endif
