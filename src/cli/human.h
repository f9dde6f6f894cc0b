/* human.h — how the CLI's text output writes times (issue 15): durations in human units ("250ms",
 * "2.5s", "1m30s", "1d") and wall-clock instants as UTC ("2026-11-26 05:45:52.123Z"). JSON output
 * keeps numbers (milliseconds); these are for text only. */
#ifndef XGR_CLI_HUMAN_H
#define XGR_CLI_HUMAN_H

#include <stddef.h>
#include <stdint.h>

/* ms as a duration into buf (32 bytes suffice): the non-zero units from days down, seconds with
 * their fraction ("1h0.25s"); "0ms" for 0, "never" for INT64_MAX, a leading "-" when negative. */
const char *xgr_cli_duration(int64_t ms, char *buf, size_t n);
/* Milliseconds since the Unix epoch as UTC "YYYY-MM-DD HH:MM:SS.mmmZ" into buf (32 bytes suffice);
 * "-" for 0 or a negative time. */
const char *xgr_cli_utc(int64_t epoch_ms, char *buf, size_t n);
/* A session-clock time into buf (32 bytes suffice): UTC (xgr_cli_utc) when it is a wall-clock time
 * (xgrd's session clock is Unix ms), else "<t>ms" (a virtual clock that starts at 0). */
const char *xgr_cli_clock(int64_t t, char *buf, size_t n);

#endif
