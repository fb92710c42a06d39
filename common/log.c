/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Logging to stderr with journal priority prefixes (log.h). */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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

bool log_ratelimit_pass(log_ratelimit *rl, int level, const char *file, int line) {
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        const unsigned long long interval = LOG_RATELIMIT_INTERVAL_SEC * 1000000000ULL;
        unsigned long long now, suppressed = 0;
        struct timespec ts;
        bool pass, last = false;

        if (level > max_level)
                return false;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        now = (unsigned long long) ts.tv_sec * 1000000000ULL + (unsigned long long) ts.tv_nsec;

        pthread_mutex_lock(&lock);
        if (rl->begin_ns == 0 || now - rl->begin_ns >= interval) {
                suppressed = rl->suppressed;
                *rl = (log_ratelimit) { .begin_ns = now };
        }
        pass = rl->shown < LOG_RATELIMIT_BURST;
        if (pass)
                last = ++rl->shown == LOG_RATELIMIT_BURST;
        else
                rl->suppressed++;
        pthread_mutex_unlock(&lock);

        if (suppressed > 0)
                log_internal(level, 0, file, line, "%llu more messages like the next one were not logged.", suppressed);
        if (last)
                log_internal(level, 0, file, line,
                             "Messages like the next one are counted, not logged, for %d s from now on.",
                             LOG_RATELIMIT_INTERVAL_SEC);
        return pass;
}
