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
