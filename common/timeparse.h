/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Time expressions accepted by --since/--until:
 *   durations before now:  "30s", "5m", "2h", "7d", "1h30m", "500ms"
 *   absolute local time:   "2026-11-21 14:00", "2026-11-21 14:00:05", "2026-11-21"
 *   epoch seconds:         "@1763733600" (optionally "@1763733600.5")
 *   "now"
 * Returns wall-clock nanoseconds since the epoch in *ret_ns, or -EINVAL. */
int time_parse(const char *s, uint64_t now_ns, uint64_t *ret_ns);

/* A duration ("30s", "5m", "1h30m", "7d", "500ms"; a bare number is seconds)
 * in nanoseconds. -EINVAL or -ERANGE. */
int duration_parse(const char *s, uint64_t *ret_ns);

/* A size ("64M", "1G", "512K", "100" bytes; binary multiples). -EINVAL/-ERANGE. */
int size_parse(const char *s, uint64_t *ret_bytes);

/* What time_parse() accepts, for error messages. */
#define TIME_EXPRESSION_HELP \
        "a duration before now (30s, 5m, 2h, 7d, 1h30m), a local time (\"2026-11-21 14:00[:SS]\"), @EPOCH_SECONDS or now"

/* "2026-11-21 14:00:05.123" in local time. buf needs 32 bytes. */
char *time_format_local(uint64_t ns, char *buf, size_t size);
/* "1d 2h", "5m 3s", "250ms" */
char *duration_format(uint64_t ns, char *buf, size_t size);
