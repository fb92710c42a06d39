/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The perfsnapd.conf parser and its defaults (config.h). */
#include <ctype.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>

#include "config.h"
#include "fileio.h"
#include "macro.h"
#include "timeparse.h"

#define CONFIG_MAX_BYTES (1024 * 1024)

void config_init(config *c) {
        *c = (config) {
                .frequency_hz = 99,
                .event = strdup("cpu-clock"),
                .callchain_depth = 64,
                .ring_buffer_pages = 0,         /* auto */
                .drain_interval_ns = 3 * NSEC_PER_SEC,
                .commit_interval_ns = 1 * NSEC_PER_SEC,
                .database = strdup("/var/lib/perfsnapd/perfsnapd.db"),
                .socket = strdup("/run/perfsnapd/perfsnapd.sock"),
                .group = strdup("perfsnap"),
                .retention_ns = 7ULL * 24 * 3600 * NSEC_PER_SEC,
                .database_max_size_auto = true,
                .hold_max_size_bytes = 16ULL << 20,
                .rescan_interval_ns = 60 * NSEC_PER_SEC,
                .max_clients = 64,
                .max_clients_per_user = 8,
                .max_queries_per_user = 2,
                .client_timeout_ns = 60 * NSEC_PER_SEC,
                .query_max_rows = 10000,
                .query_max_stacks = 20000,
                .query_timeout_ns = 120 * NSEC_PER_SEC,
                .log_level = LOG_INFO,
                .root = strdup("/"),
                .cache_dir = strdup("/var/cache/perfsnapd"),
                .snapshot_delay_ns = 2 * NSEC_PER_SEC,
                .cache_max_size_bytes = 2ULL << 30,
                .cache_max_age_ns = 30ULL * 24 * 3600 * NSEC_PER_SEC,
                .symbols_max_size_bytes = 256ULL << 20,
                .debug_root = strdup("/usr/lib/debug"),
                .offcpu_max_threads = 8192,
                .offcpu_max_sums = 4096,
                .offcpu_clock = "auto",
                .debuginfod_urls = strdup(""),
                .export_url = strdup(""),
                .export_interval_ns = 60 * NSEC_PER_SEC,
                .export_queue_max = 60,
                .debuginfod_timeout_ns = 30 * NSEC_PER_SEC,
        };
}

void config_done(config *c) {
        free(c->event);
        free(c->database);
        free(c->socket);
        free(c->group);
        free(c->root);
        free(c->cache_dir);
        free(c->debug_root);
        free(c->debuginfod_urls);
        free(c->export_url);
        *c = (config) {};
}

int config_copy(const config *from, config *to) {
        config n = *from;

        n.event = strdup(from->event);
        n.database = strdup(from->database);
        n.socket = strdup(from->socket);
        n.group = strdup(from->group);
        n.root = strdup(from->root);
        n.cache_dir = strdup(from->cache_dir);
        n.debug_root = strdup(from->debug_root);
        n.debuginfod_urls = strdup(from->debuginfod_urls);
        n.export_url = strdup(from->export_url);
        if (!n.event || !n.database || !n.socket || !n.group || !n.root || !n.cache_dir || !n.debug_root ||
            !n.debuginfod_urls || !n.export_url) {
                config_done(&n);
                return -ENOMEM;
        }
        *to = n;
        return 0;
}

static const char *const log_levels[] = {
        [LOG_ERR] = "err",
        [LOG_WARNING] = "warning",
        [LOG_NOTICE] = "notice",
        [LOG_INFO] = "info",
        [LOG_DEBUG] = "debug",
};

const char *log_level_to_string(int level) {
        if (level < 0 || (size_t) level >= ELEMENTSOF(log_levels) || !log_levels[level])
                return NULL;
        return log_levels[level];
}

int log_level_from_string(const char *s) {
        for (size_t i = 0; i < ELEMENTSOF(log_levels); i++)
                if (log_levels[i] && strcmp(log_levels[i], s) == 0)
                        return (int) i;
        return -EINVAL;
}

static int parse_u32(const char *v, uint32_t min, uint32_t max, uint32_t *ret) {
        char *end;
        unsigned long long x;

        if (!isdigit((unsigned char) *v))
                return -EINVAL;
        errno = 0;
        x = strtoull(v, &end, 10);
        if (errno || *end || x < min || x > max)
                return -ERANGE;
        *ret = (uint32_t) x;
        return 0;
}

/* A duration from 1s to max_ns, in whole seconds (a fraction is dropped). */
static int parse_seconds(const char *v, uint64_t max_ns, uint64_t *ret) {
        uint64_t ns;

        if (duration_parse(v, &ns) < 0 || ns < NSEC_PER_SEC || ns > max_ns)
                return -EINVAL;
        *ret = ns - ns % NSEC_PER_SEC;
        return 0;
}

static int set_string(char **p, const char *v) {
        char *n = strdup(v);

        if (!n)
                return -ENOMEM;
        free(*p);
        *p = n;
        return 0;
}

static int fail(char **ret_error, const char *source, unsigned line, const char *fmt, ...) _printf_(4, 5);
static int fail(char **ret_error, const char *source, unsigned line, const char *fmt, ...) {
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (ret_error && asprintf(ret_error, "%s:%u: %s", source, line, msg) < 0)
                *ret_error = NULL;
        return -EINVAL;
}

static char *strip(char *s) {
        char *e;

        while (isspace((unsigned char) *s))
                s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char) e[-1]))
                *--e = 0;
        return s;
}

static bool is_power_of_two(uint32_t x) {
        return x && !(x & (x - 1));
}

static int config_set(config *c, const char *key, const char *v, const char **ret_why) {
        uint64_t ns;
        int r;

        if (strcmp(key, "frequency_hz") == 0)
                return parse_u32(v, 1, CONFIG_MAX_FREQUENCY_HZ, &c->frequency_hz) < 0
                        ? (*ret_why = "expected a number of samples per second per CPU, 1..100000", -EINVAL) : 0;
        if (strcmp(key, "event") == 0) {
                if (strcmp(v, "cpu-clock") != 0 && strcmp(v, "cycles") != 0)
                        return *ret_why = "expected cpu-clock or cycles", -EINVAL;
                return set_string(&c->event, v);
        }
        if (strcmp(key, "callchain_depth") == 0)
                return parse_u32(v, 1, CONFIG_MAX_CALLCHAIN_DEPTH, &c->callchain_depth) < 0
                        ? (*ret_why = "expected a number of frames, 1..127", -EINVAL) : 0;
        if (strcmp(key, "ring_buffer_pages") == 0) {
                uint32_t x;
                if (strcmp(v, "auto") == 0) {
                        c->ring_buffer_pages = 0;
                        return 0;
                }
                if (parse_u32(v, 1, 1u << 16, &x) < 0 || !is_power_of_two(x))
                        return *ret_why = "expected auto or a power of two number of pages, 1..65536", -EINVAL;
                c->ring_buffer_pages = x;
                return 0;
        }
        if (strcmp(key, "drain_interval") == 0) {
                if (duration_parse(v, &ns) < 0 || ns < NSEC_PER_MSEC || ns > 60 * NSEC_PER_SEC)
                        return *ret_why = "expected a duration between 1ms and 60s (e.g. 250ms)", -EINVAL;
                /* Whole milliseconds, so --check-config prints what is used. */
                c->drain_interval_ns = ns - ns % NSEC_PER_MSEC;
                return 0;
        }
        if (strcmp(key, "commit_interval") == 0) {
                if (duration_parse(v, &ns) < 0 || ns < 10 * NSEC_PER_MSEC || ns > 60 * NSEC_PER_SEC)
                        return *ret_why = "expected a duration between 10ms and 60s (e.g. 1s)", -EINVAL;
                c->commit_interval_ns = ns - ns % NSEC_PER_MSEC;
                return 0;
        }
        if (strcmp(key, "database") == 0 || strcmp(key, "socket") == 0 || strcmp(key, "root") == 0) {
                if (v[0] != '/')
                        return *ret_why = "expected an absolute path", -EINVAL;
                if (streq(key, "socket") && strlen(v) >= sizeof(((struct sockaddr_un *) NULL)->sun_path))
                        return *ret_why = "longer than the 107 bytes a socket's path may have", -EINVAL;
                return set_string(strcmp(key, "database") == 0 ? &c->database :
                                  strcmp(key, "socket") == 0 ? &c->socket : &c->root, v);
        }
        if (streq(key, "cache_dir")) {
                if (v[0] != '/' && v[0] != '\0')
                        return *ret_why = "expected an absolute path, or nothing for no snapshots", -EINVAL;
                return set_string(&c->cache_dir, v);
        }
        if (streq(key, "debug_root")) {
                if (v[0] != '/' && v[0] != '\0')
                        return *ret_why = "expected an absolute path, or nothing for none", -EINVAL;
                return set_string(&c->debug_root, v);
        }
        if (streq(key, "debuginfod_urls")) {
                for (const char *p = v; *p; p++)
                        if ((unsigned char) *p < 0x20 || *p == 0x7f)
                                return *ret_why = "expected URLs separated by spaces", -EINVAL;
                return set_string(&c->debuginfod_urls, v);
        }
        if (streq(key, "export_url")) {
                for (const char *p = v; *p; p++)
                        if ((unsigned char) *p <= 0x20 || *p == 0x7f)
                                return *ret_why = "expected an http:// or https:// URL without spaces, or nothing for none",
                                       -EINVAL;
                if (v[0] && strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
                        return *ret_why = "expected an http:// or https:// URL, or nothing for none", -EINVAL;
                return set_string(&c->export_url, v);
        }
        if (streq(key, "export_interval")) {
                if (parse_seconds(v, 24 * 3600 * NSEC_PER_SEC, &c->export_interval_ns) < 0)
                        return *ret_why = "expected a duration between 1s and 1d (e.g. 60s)", -EINVAL;
                return 0;
        }
        if (streq(key, "offcpu")) {
                if (streq(v, "on") || streq(v, "yes") || streq(v, "true") || streq(v, "1"))
                        c->offcpu = true;
                else if (streq(v, "off") || streq(v, "no") || streq(v, "false") || streq(v, "0"))
                        c->offcpu = false;
                else
                        return *ret_why = "expected on or off", -EINVAL;
                return 0;
        }
        if (streq(key, "offcpu_clock")) {
                static const char *const clocks[] = { "auto", "sched", "monotonic" };

                for (size_t i = 0; i < ELEMENTSOF(clocks); i++)
                        if (streq(v, clocks[i]))
                                return c->offcpu_clock = clocks[i], 0;
                return *ret_why = "expected auto, sched or monotonic", -EINVAL;
        }
        if (streq(key, "offcpu_max_threads"))
                return parse_u32(v, 256, 1u << 20, &c->offcpu_max_threads) < 0
                        ? (*ret_why = "expected a number of threads, 256..1048576", -EINVAL) : 0;
        if (streq(key, "offcpu_max_sums"))
                return parse_u32(v, 256, 1u << 20, &c->offcpu_max_sums) < 0
                        ? (*ret_why = "expected a number of sums, 256..1048576", -EINVAL) : 0;
        if (streq(key, "offcpu_min_wait")) {
                if (duration_parse(v, &ns) < 0 || ns > 60 * NSEC_PER_SEC)
                        return *ret_why = "expected a duration between 0 and 60s (e.g. 10us)", -EINVAL;
                c->offcpu_min_wait_ns = ns;
                return 0;
        }
        if (streq(key, "export_queue_max"))
                return parse_u32(v, 1, 10000, &c->export_queue_max) < 0
                        ? (*ret_why = "expected a number of profiles 1..10000", -EINVAL) : 0;
        if (streq(key, "debuginfod_timeout")) {
                if (parse_seconds(v, 3600 * NSEC_PER_SEC, &c->debuginfod_timeout_ns) < 0)
                        return *ret_why = "expected a duration between 1s and 1h (e.g. 30s)", -EINVAL;
                return 0;
        }
        if (streq(key, "symbols_max_size")) {
                uint64_t bytes;
                if (streq(v, "0") || streq(v, "unlimited")) {
                        c->symbols_max_size_bytes = 0;
                        return 0;
                }
                if (size_parse(v, &bytes) < 0 || bytes < (1ULL << 20))
                        return *ret_why = "expected a size of at least 1M (e.g. 256M), or unlimited", -EINVAL;
                c->symbols_max_size_bytes = bytes;
                return 0;
        }
        if (streq(key, "snapshot_delay")) {
                if (duration_parse(v, &ns) < 0 || ns < 100 * NSEC_PER_MSEC || ns > 3600 * NSEC_PER_SEC)
                        return *ret_why = "expected a duration between 100ms and 1h (e.g. 2s)", -EINVAL;
                c->snapshot_delay_ns = ns - ns % NSEC_PER_MSEC;
                return 0;
        }
        if (streq(key, "cache_max_size")) {
                uint64_t bytes;
                if (streq(v, "0") || streq(v, "unlimited")) {
                        c->cache_max_size_bytes = 0;
                        return 0;
                }
                if (size_parse(v, &bytes) < 0 || bytes < (1ULL << 20))
                        return *ret_why = "expected a size of at least 1M (e.g. 2G), or unlimited", -EINVAL;
                c->cache_max_size_bytes = bytes;
                return 0;
        }
        if (streq(key, "cache_max_age")) {
                if (streq(v, "0") || streq(v, "forever")) {
                        c->cache_max_age_ns = 0;
                        return 0;
                }
                if (duration_parse(v, &ns) < 0 || ns < 60 * NSEC_PER_SEC)
                        return *ret_why = "expected a duration of at least 1m (e.g. 30d), or forever", -EINVAL;
                c->cache_max_age_ns = ns - ns % NSEC_PER_SEC;
                return 0;
        }
        if (strcmp(key, "group") == 0) {
                for (const char *p = v; *p; p++)
                        if (!isalnum((unsigned char) *p) && !strchr("_-.", *p))
                                return *ret_why = "expected a group name (letters, digits, _ - .) or nothing for root only", -EINVAL;
                return set_string(&c->group, v);
        }
        if (strcmp(key, "retention") == 0) {
                if (strcmp(v, "0") == 0 || strcmp(v, "forever") == 0) {
                        c->retention_ns = 0;
                        return 0;
                }
                if (duration_parse(v, &ns) < 0 || ns < 60 * NSEC_PER_SEC)
                        return *ret_why = "expected a duration of at least 1m (e.g. 7d), or forever", -EINVAL;
                c->retention_ns = ns - ns % NSEC_PER_SEC;
                return 0;
        }
        if (streq(key, "database_max_size")) {
                uint64_t bytes;
                c->database_max_size_auto = false;
                if (streq(v, "auto")) {
                        c->database_max_size_auto = true;
                        c->database_max_size_bytes = 0;
                        return 0;
                }
                if (streq(v, "0") || streq(v, "unlimited")) {
                        c->database_max_size_bytes = 0;
                        return 0;
                }
                if (size_parse(v, &bytes) < 0 || bytes < (1ULL << 20))
                        return *ret_why = "expected a size of at least 1M (e.g. 500M), auto, or unlimited", -EINVAL;
                c->database_max_size_bytes = bytes;
                return 0;
        }
        if (streq(key, "hold_max_size")) {
                uint64_t bytes;
                if (streq(v, "0") || streq(v, "none")) {
                        c->hold_max_size_bytes = 0;
                        return 0;
                }
                if (size_parse(v, &bytes) < 0 || bytes < 4096 || bytes > (1ULL << 30))
                        return *ret_why = "expected a size between 4K and 1G (e.g. 16M), or none", -EINVAL;
                c->hold_max_size_bytes = bytes;
                return 0;
        }
        if (strcmp(key, "rescan_interval") == 0) {
                if (strcmp(v, "0") == 0 || strcmp(v, "never") == 0) {
                        c->rescan_interval_ns = 0;
                        return 0;
                }
                if (parse_seconds(v, 24 * 3600 * NSEC_PER_SEC, &c->rescan_interval_ns) < 0)
                        return *ret_why = "expected a duration between 1s and 1d (e.g. 60s), or never", -EINVAL;
                return 0;
        }
        if (strcmp(key, "max_clients") == 0)
                return parse_u32(v, CONFIG_ROOT_CLIENTS + 1, 4096, &c->max_clients) < 0
                        ? (*ret_why = "expected a number 3..4096", -EINVAL) : 0;
        if (strcmp(key, "max_clients_per_user") == 0)
                return parse_u32(v, 1, 4096, &c->max_clients_per_user) < 0
                        ? (*ret_why = "expected a number 1..4096", -EINVAL) : 0;
        if (strcmp(key, "max_queries_per_user") == 0)
                return parse_u32(v, 1, 16, &c->max_queries_per_user) < 0
                        ? (*ret_why = "expected a number 1..16", -EINVAL) : 0;
        if (strcmp(key, "client_timeout") == 0) {
                if (parse_seconds(v, 3600 * NSEC_PER_SEC, &c->client_timeout_ns) < 0)
                        return *ret_why = "expected a duration between 1s and 1h (e.g. 60s)", -EINVAL;
                return 0;
        }
        if (strcmp(key, "query_max_rows") == 0)
                return parse_u32(v, 1, 1000000, &c->query_max_rows) < 0
                        ? (*ret_why = "expected a number 1..1000000", -EINVAL) : 0;
        if (strcmp(key, "query_max_stacks") == 0)
                return parse_u32(v, 1, 1000000, &c->query_max_stacks) < 0
                        ? (*ret_why = "expected a number 1..1000000", -EINVAL) : 0;
        if (strcmp(key, "query_timeout") == 0) {
                if (strcmp(v, "none") == 0) {
                        c->query_timeout_ns = 0;
                        return 0;
                }
                if (parse_seconds(v, 24 * 3600 * NSEC_PER_SEC, &c->query_timeout_ns) < 0)
                        return *ret_why = "expected none or a duration between 1s and 1d (e.g. 120s)", -EINVAL;
                return 0;
        }
        if (strcmp(key, "log_level") == 0) {
                r = log_level_from_string(v);
                if (r < 0)
                        return *ret_why = "expected err, warning, notice, info or debug", -EINVAL;
                c->log_level = r;
                return 0;
        }
        *ret_why = NULL;
        return -ENOKEY;
}

int config_parse(config *c, const char *text, const char *source, char **ret_error) {
        _cleanup_free_ char *copy = strdup(text);
        char *line, *next;
        unsigned lineno = 0;

        if (!copy)
                return -ENOMEM;

        for (line = copy; line; line = next) {
                const char *why = NULL;
                char *key, *value, *eq;
                int r;

                next = strchr(line, '\n');
                if (next)
                        *next++ = 0;
                lineno++;

                key = strip(line);
                if (!*key || *key == '#')
                        continue;

                eq = strchr(key, '=');
                if (!eq)
                        return fail(ret_error, source, lineno, "expected \"key = value\", got \"%.64s\"", key);
                *eq = 0;
                value = strip(eq + 1);
                key = strip(key);
                if (!*key)
                        return fail(ret_error, source, lineno, "missing key before '='");

                r = config_set(c, key, value, &why);
                if (r == -ENOKEY)
                        return fail(ret_error, source, lineno, "unknown key \"%.64s\"", key);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return fail(ret_error, source, lineno, "invalid value \"%.64s\" for %s: %s", value, key, why);
        }
        return 0;
}

int config_load(config *c, const char *path, char **ret_error) {
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -1;
        const char *nul, *why = NULL;
        struct stat st;
        size_t size = 0;
        int r;

        /* Not blocking on a FIFO or a device before fstat() tells what
         * it is: only a regular file is a configuration. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        r = fd < 0 ? negative_errno() : fstat(fd, &st) < 0 ? negative_errno() : 0;
        if (r >= 0 && !S_ISREG(st.st_mode)) {
                r = -EINVAL;
                why = S_ISDIR(st.st_mode) ? "a directory, not a file" : "not a regular file";
        }
        if (r >= 0)
                r = read_full_fd(fd, CONFIG_MAX_BYTES, &text, &size);
        if (r < 0) {
                if (ret_error && asprintf(ret_error, "%s: %s", path, why ?: strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        /* Text only: a NUL would end the text the parser sees early. */
        nul = memchr(text, 0, size);
        if (nul) {
                unsigned lineno = 1;

                for (const char *p = text; p < nul; p++)
                        lineno += *p == '\n';
                return fail(ret_error, path, lineno, "a NUL byte: not a text file");
        }
        return config_parse(c, text, path, ret_error);
}

static char *fmt_duration_key(uint64_t ns, char *buf, size_t size) {
        /* Print in the largest unit that divides exactly, so the output parses back to the same value. */
        static const struct { const char *unit; uint64_t ns; } units[] = {
                { "d", 24ULL * 3600 * NSEC_PER_SEC }, { "h", 3600 * NSEC_PER_SEC },
                { "m", 60 * NSEC_PER_SEC }, { "s", NSEC_PER_SEC }, { "ms", NSEC_PER_MSEC }, { "us", 1000 }, { "ns", 1 },
        };
        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (ns % units[i].ns == 0) {
                        snprintf(buf, size, "%llu%s", (unsigned long long) (ns / units[i].ns), units[i].unit);
                        return buf;
                }
        snprintf(buf, size, "%llums", (unsigned long long) (ns / NSEC_PER_MSEC));
        return buf;
}

/* The largest binary unit that divides exactly, so it parses back. */
static void fmt_size_key(uint64_t bytes, char *buf, size_t size) {
        static const char units[] = "TGMK";

        for (size_t i = 0; i < 4; i++) {
                uint64_t m = 1ULL << (10 * (4 - i));
                if (bytes % m == 0) {
                        snprintf(buf, size, "%llu%c", (unsigned long long) (bytes / m), units[i]);
                        return;
                }
        }
        snprintf(buf, size, "%llu", (unsigned long long) bytes);
}

char *config_format(const config *c) {
        char pages[16], drain[32], commit[32], retention[32], rescan[32], delay[32], max_age[32], max_size[32], db_max[32];
        char client_timeout[32], hold_max[32], sym_max[32], dtimeout[32], export_interval[32], offcpu_min[32];
        char query_timeout[32];
        char *s;

        fmt_duration_key(c->client_timeout_ns, client_timeout, sizeof client_timeout);
        if (c->query_timeout_ns)
                fmt_duration_key(c->query_timeout_ns, query_timeout, sizeof query_timeout);
        else
                strcpy(query_timeout, "none");
        fmt_duration_key(c->snapshot_delay_ns, delay, sizeof delay);
        if (c->cache_max_age_ns)
                fmt_duration_key(c->cache_max_age_ns, max_age, sizeof max_age);
        else
                strcpy(max_age, "forever");
        if (c->cache_max_size_bytes)
                fmt_size_key(c->cache_max_size_bytes, max_size, sizeof max_size);
        else
                strcpy(max_size, "unlimited");

        if (c->database_max_size_auto)
                strcpy(db_max, "auto");
        else if (c->database_max_size_bytes)
                fmt_size_key(c->database_max_size_bytes, db_max, sizeof db_max);
        else
                strcpy(db_max, "unlimited");

        if (c->hold_max_size_bytes)
                fmt_size_key(c->hold_max_size_bytes, hold_max, sizeof hold_max);
        else
                strcpy(hold_max, "none");

        fmt_duration_key(c->debuginfod_timeout_ns, dtimeout, sizeof dtimeout);
        fmt_duration_key(c->export_interval_ns, export_interval, sizeof export_interval);
        fmt_duration_key(c->offcpu_min_wait_ns, offcpu_min, sizeof offcpu_min);
        if (c->symbols_max_size_bytes)
                fmt_size_key(c->symbols_max_size_bytes, sym_max, sizeof sym_max);
        else
                strcpy(sym_max, "unlimited");

        if (c->rescan_interval_ns)
                fmt_duration_key(c->rescan_interval_ns, rescan, sizeof rescan);
        else
                strcpy(rescan, "never");

        if (c->ring_buffer_pages)
                snprintf(pages, sizeof pages, "%u", c->ring_buffer_pages);
        else
                strcpy(pages, "auto");
        fmt_duration_key(c->drain_interval_ns, drain, sizeof drain);
        fmt_duration_key(c->commit_interval_ns, commit, sizeof commit);
        if (c->retention_ns)
                fmt_duration_key(c->retention_ns, retention, sizeof retention);
        else
                strcpy(retention, "forever");

        if (asprintf(&s,
                     "frequency_hz = %u\n"
                     "event = %s\n"
                     "callchain_depth = %u\n"
                     "ring_buffer_pages = %s\n"
                     "drain_interval = %s\n"
                     "commit_interval = %s\n"
                     "database = %s\n"
                     "socket = %s\n"
                     "group = %s\n"
                     "retention = %s\n"
                     "database_max_size = %s\n"
                     "hold_max_size = %s\n"
                     "rescan_interval = %s\n"
                     "max_clients = %u\n"
                     "max_clients_per_user = %u\n"
                     "max_queries_per_user = %u\n"
                     "client_timeout = %s\n"
                     "query_max_rows = %u\n"
                     "query_max_stacks = %u\n"
                     "query_timeout = %s\n"
                     "log_level = %s\n"
                     "root = %s\n"
                     "cache_dir = %s\n"
                     "snapshot_delay = %s\n"
                     "cache_max_size = %s\n"
                     "cache_max_age = %s\n"
                     "symbols_max_size = %s\n"
                     "debug_root = %s\n"
                     "debuginfod_urls = %s\n"
                     "debuginfod_timeout = %s\n"
                     "export_url = %s\n"
                     "export_interval = %s\n"
                     "export_queue_max = %u\n"
                     "offcpu = %s\n"
                     "offcpu_min_wait = %s\n"
                     "offcpu_max_threads = %u\n"
                     "offcpu_max_sums = %u\n"
                     "offcpu_clock = %s\n",
                     c->frequency_hz, c->event, c->callchain_depth, pages, drain, commit,
                     c->database, c->socket, c->group, retention, db_max, hold_max, rescan, c->max_clients,
                     c->max_clients_per_user, c->max_queries_per_user, client_timeout,
                     c->query_max_rows, c->query_max_stacks, query_timeout,
                     log_level_to_string(c->log_level) ?: "info", c->root, c->cache_dir, delay, max_size,
                     max_age, sym_max, c->debug_root, c->debuginfod_urls, dtimeout, c->export_url, export_interval,
                     c->export_queue_max, c->offcpu ? "on" : "off", offcpu_min,
                     c->offcpu_max_threads, c->offcpu_max_sums, c->offcpu_clock) < 0)
                return NULL;
        return s;
}

uint32_t config_ring_buffer_pages(const config *c, size_t page_size) {
        uint64_t half, pages = 128;

        if (c->ring_buffer_pages)
                return c->ring_buffer_pages;
        /* A drain's samples at 512 bytes each (a chain of about 60
         * frames), in half the buffer: the kernel's wake-up at half full
         * comes after the timer's drain, not before it. Drains of 1,000
         * samples a CPU instead of about 500 cost 8-10 % less CPU a sample
         * at 999 Hz (bench/RESULTS.md): their first records find the
         * caches cold. */
        half = (uint64_t) c->frequency_hz * 512 * (c->drain_interval_ns / NSEC_PER_MSEC) / 1000;
        while (pages < 1024 && pages * page_size / 2 < half)
                pages *= 2;
        return (uint32_t) pages;
}

uint64_t config_database_max_size(const config *c, uint64_t fs_bytes) {
        if (!c->database_max_size_auto)
                return c->database_max_size_bytes;
        if (fs_bytes == 0)
                return 1ULL << 30;
        return MIN(1ULL << 30, MAX(fs_bytes / 20, 1ULL << 20));
}
