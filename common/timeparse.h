/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Clocks and time arguments: clock readings in nanoseconds, the offset
 * from CLOCK_MONOTONIC to wall-clock time, and the parsers of durations
 * and times that the configuration and perfsnapctl accept. */

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* clock_gettime(id) in nanoseconds. */
uint64_t clock_ns(clockid_t id);

/* CLOCK_REALTIME - CLOCK_MONOTONIC now: added to a CLOCK_MONOTONIC time
 * (the perf events' clock) it gives wall-clock time. */
int64_t clock_mono_to_wall_ns(void);

/* Time expressions accepted by --since/--until:
 *   durations before now:  "30s", "5m", "2h", "7d", "1h30m", "500ms"
 *                          (as duration_parse(); "5m ago", "-5m" are refused)
 *   absolute local time:   "2026-11-21 14:00", "2026-11-21 14:00:05", "2026-11-21"
 *                          (also "14:00:05.25" fractions and 'T' as separator,
 *                          so time_format_local() output parses back; local
 *                          time via mktime() with tm_isdst = -1, so the C
 *                          library resolves DST gaps and overlaps)
 *   epoch seconds:         "@1763733600" (optionally "@1763733600.5")
 *   "now"
 * Returns wall-clock nanoseconds since the epoch in *ret_ns, -EINVAL for a
 * malformed expression, -ERANGE for a time before the epoch or too large. */
int time_parse(const char *s, uint64_t now_ns, uint64_t *ret_ns);

/* A duration ("30s", "5m", "1h30m", "7d", "500ms"; a bare number is seconds)
 * in nanoseconds. Units: ns us ms s m h d w; integer counts only; components
 * may be separated by spaces ("5m 3s", as duration_format() prints).
 * -EINVAL or -ERANGE (overflows 64 bits). */
int duration_parse(const char *s, uint64_t *ret_ns);

/* A size ("64M", "1G", "512K", "100" bytes; binary multiples). Suffixes
 * K M G T P (either case), optionally followed by "B" or "iB"; a plain "B"
 * means bytes. -EINVAL/-ERANGE. */
int size_parse(const char *s, uint64_t *ret_bytes);

/* What time_parse() accepts, for error messages. */
#define TIME_EXPRESSION_HELP \
        "a duration before now (30s, 5m, 2h, 7d, 1h30m), a local time (\"2026-11-21 14:00[:SS]\"), @EPOCH_SECONDS or now"

#define TIME_FORMAT_MAX 32

/* "2026-11-21 14:00:05.123" in local time. buf needs TIME_FORMAT_MAX bytes.
 * Returns buf, or NULL if it is too small or the time is not representable. */
char *time_format_local(uint64_t ns, char *buf, size_t size);
/* Same with 0..9 decimals of the second ("14:00:05.12" for 2). */
char *time_format_local_decimals(uint64_t ns, unsigned decimals, char *buf, size_t size);

#define DURATION_FORMAT_MAX 32

/* The two most significant units, truncated: "1d 2h", "1h 0m", "5m 3s",
 * "5s 250ms" (but "30s" for whole seconds); below a second one unit:
 * "250ms", "3us", "17ns"; "0s". Returns buf, or NULL if size is too small. */
char *duration_format(uint64_t ns, char *buf, size_t size);
