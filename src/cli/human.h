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

/* One line of a session's audit trail (an entry as xgr_rpc_audit_json writes it) to stdout:
 * `lead` (the caller's time column), the process or session and step it applied to, then what
 * (kind), who (actor), through which node, when (UTC), the payload keys, the waking session, the
 * refusal's reason and the permit digest's first bytes. root: the session's rootPid. */
struct json_t;
void xgr_cli_print_audit(const struct json_t *a, const char *root, const char *lead);

#endif
