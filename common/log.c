/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"

static int max_level = LOG_INFO;
static const char *log_ident = NULL;
static bool to_journal = false;

void log_open(const char *ident) {
        const char *js = getenv("JOURNAL_STREAM");
        struct stat st;

        log_ident = ident;
        to_journal = false;
        /* JOURNAL_STREAM is "DEV:INODE" of the stream systemd connected us to. */
        if (js && fstat(STDERR_FILENO, &st) >= 0) {
                unsigned long long dev, ino;
                if (sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
                    dev == (unsigned long long) st.st_dev && ino == (unsigned long long) st.st_ino)
                        to_journal = true;
        }
}

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) {
        int saved = errno;
        char msg[2048];
        va_list ap;

        if (error < 0)
                error = -error;

        if (level <= max_level) {
                /* Make %m refer to the error passed in, not whatever errno is now. */
                errno = error;
                va_start(ap, fmt);
                vsnprintf(msg, sizeof msg, fmt, ap);
                va_end(ap);

                if (to_journal)
                        fprintf(stderr, "<%d>%s\n", level, msg);
                else if (log_ident)
                        fprintf(stderr, "%s: %s\n", log_ident, msg);
                else
                        fprintf(stderr, "%s\n", msg);
                if (max_level >= LOG_DEBUG && level == LOG_DEBUG)
                        fprintf(stderr, "  (at %s:%d)\n", file, line);
        }

        errno = saved;
        return error > 0 ? -error : -EIO;
}
