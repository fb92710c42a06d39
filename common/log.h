/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Logging for the programs (common/ code only logs at debug level).
 * Messages go to stderr; when stderr is connected to the journal
 * (JOURNAL_STREAM matches it), each line carries a "<N>" syslog priority
 * prefix so journalctl shows the right priority. */

#include <errno.h>
#include <syslog.h>

#include "macro.h"

void log_open(const char *ident);
void log_set_max_level(int level);
int log_get_max_level(void);

/* Returns -abs(error) (or -EIO for 0), so "return log_error_errno(r, ...)"
 * works. %m in fmt is the error's text. */
int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) _printf_(5, 6);

#define log_full_errno(level, error, ...) \
        log_internal((level), (error), __FILE__, __LINE__, __VA_ARGS__)

#define log_debug(...)   log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...)    log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...)  log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...)   log_full_errno(LOG_ERR, 0, __VA_ARGS__)

#define log_debug_errno(e, ...)   log_full_errno(LOG_DEBUG, (e), __VA_ARGS__)
#define log_info_errno(e, ...)    log_full_errno(LOG_INFO, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, (e), __VA_ARGS__)
#define log_error_errno(e, ...)   log_full_errno(LOG_ERR, (e), __VA_ARGS__)

#define log_oom() log_full_errno(LOG_ERR, ENOMEM, "Out of memory.")

/* Messages that outside input can repeat at will (a forged uevent, a bad
 * record): at most LOG_RATELIMIT_BURST per LOG_RATELIMIT_INTERVAL_SEC per
 * call site. The last one allowed says that more are only counted; the
 * first one of a later interval says how many were. Callers keep the exact
 * counts in their statistics. */
#define LOG_RATELIMIT_BURST 5
#define LOG_RATELIMIT_INTERVAL_SEC 30

typedef struct log_ratelimit {
        unsigned long long begin_ns;    /* CLOCK_MONOTONIC start of the interval, 0 before the first */
        unsigned shown;                 /* messages logged in it */
        unsigned long long suppressed;  /* and not logged */
} log_ratelimit;

/* Whether this occurrence may be logged; logs the notes above itself. */
bool log_ratelimit_pass(log_ratelimit *rl, int level, const char *file, int line);

#define log_ratelimited_errno(level, error, ...)                                        \
        ({                                                                              \
                static log_ratelimit rl_;                                               \
                log_ratelimit_pass(&rl_, (level), __FILE__, __LINE__)                   \
                        ? log_full_errno((level), (error), __VA_ARGS__)                 \
                        : log_errno_value(error);                                       \
        })
#define log_warning_ratelimited(...) log_ratelimited_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_warning_errno_ratelimited(e, ...) log_ratelimited_errno(LOG_WARNING, (e), __VA_ARGS__)

/* What log_internal() returns for error. */
static inline int log_errno_value(int error) {
        return error > 0 ? -error : error < 0 ? error : -EIO;
}
