/* expect.h — the expectations of the C tests that are plain programs (not cmocka): each EXPECT
 * checks one property, and when it does not hold prints one line to stdout —
 * `FAIL file:line: <expression>: <the values or the message>` — counts the failure and lets the
 * test go on, so one run shows every broken property, not only the first. The program ends with
 * `return expect_done();`, which prints how many expectations were checked and how many failed
 * and gives the exit status: 0 when nothing failed, 1 otherwise. The count is shared by the whole program (tests/lib/expect.c)
 * and atomic, so EXPECTs may run on any thread; REQUIRE is for a property without which the test
 * cannot go on (a setup step, or a check inside a callback where carrying on would corrupt
 * memory): it prints the same line and aborts.
 *
 * Every macro is an expression that is true when the expectation held, for
 * `if (!EXPECT_OK(rc, err)) return expect_done();`. Operands are evaluated once; EXPECT's message
 * arguments only when it fails.
 *
 *   EXPECT(cond[, fmt, ...])      cond holds; otherwise prints cond and the printf-style message
 *   EXPECT_EQ_INT(got, want)      two integers (as long long) are equal; prints both
 *   EXPECT_EQ_UINT(got, want)     two unsigned integers (as unsigned long long) are equal
 *   EXPECT_EQ_STR(got, want)      two strings are equal (either may be NULL; NULL equals only NULL)
 *   EXPECT_OK(rc, err)            an xgr call returned 0; otherwise prints rc, err.path, err.message
 *   REQUIRE(cond[, fmt, ...])     as EXPECT, but aborts the program when cond does not hold
 *   expect_failures()             the failures so far
 *   expect_done()                 the verdict: prints it, returns the exit status
 */
#ifndef XGR_TESTS_EXPECT_H
#define XGR_TESTS_EXPECT_H

#include <stdbool.h>

#include "xgr/error.h"

/* The message is optional: " " __VA_ARGS__ is a format that is never empty (GCC refuses an empty
 * one) and starts with the space that separates it from the expression. */
#define EXPECT(cond, ...) \
  (expect__held(!!(cond)) ? true : (expect__fail(__FILE__, __LINE__, #cond, " " __VA_ARGS__), false))
#define EXPECT_EQ_INT(got, want) \
  expect__eq_int(__FILE__, __LINE__, #got, #want, (long long)(got), (long long)(want))
#define EXPECT_EQ_UINT(got, want) \
  expect__eq_uint(__FILE__, __LINE__, #got, #want, (unsigned long long)(got), (unsigned long long)(want))
#define EXPECT_EQ_STR(got, want) expect__eq_str(__FILE__, __LINE__, #got, #want, (got), (want))
#define EXPECT_OK(rc, err) expect__ok(__FILE__, __LINE__, #rc, (rc), &(err))
#define REQUIRE(cond, ...) ((cond) ? (void)0 : expect__abort(__FILE__, __LINE__, #cond, " " __VA_ARGS__))

/* The failures counted so far (any thread). */
int expect_failures(void);
/* The verdict: prints "ok: N expectations held" or "FAIL: F of N expectations failed" and returns
 * the exit status, 0 or 1. */
int expect_done(void);

/* The implementation of the macros above; file and line are the EXPECT's, what is its source text,
 * fmt a message that starts with a space (one space alone: none). expect__held counts one
 * expectation checked and returns held. */
bool expect__held(bool held);
void expect__fail(const char *file, int line, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
_Noreturn void expect__abort(const char *file, int line, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
bool expect__eq_int(const char *file, int line, const char *gs, const char *ws, long long got, long long want);
bool expect__eq_uint(const char *file, int line, const char *gs, const char *ws, unsigned long long got,
                     unsigned long long want);
bool expect__eq_str(const char *file, int line, const char *gs, const char *ws, const char *got, const char *want);
bool expect__ok(const char *file, int line, const char *rcs, int rc, const xgr_error *err);

#endif
