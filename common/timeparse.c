/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Time, duration and size expressions for the command line and the
 * configuration. Hand-written rather than strptime()/strtoull(): those
 * accept leading spaces, signs and partial input, and we want "5x", "-5m"
 * and "5m ago" to be errors, not guesses. */

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "timeparse.h"

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

/* One or more decimal digits; advances *p. -EINVAL if none, -ERANGE on overflow. */
static int parse_digits(const char **p, uint64_t *ret) {
        const char *s = *p;
        uint64_t v = 0;

        if (!is_digit(*s))
                return -EINVAL;
        for (; is_digit(*s); s++)
                if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t) (*s - '0'), &v))
                        return -ERANGE;
        *p = s;
        *ret = v;
        return 0;
}

/* Exactly n digits. */
static int parse_fixed(const char **p, unsigned n, unsigned *ret) {
        unsigned v = 0;

        for (unsigned i = 0; i < n; i++) {
                if (!is_digit((*p)[i]))
                        return -EINVAL;
                v = v * 10 + (unsigned) ((*p)[i] - '0');
        }
        *p += n;
        *ret = v;
        return 0;
}

/* "." followed by 1..9 digits -> nanoseconds. */
static int parse_fraction(const char **p, uint64_t *ret_ns) {
        const char *s = *p;
        uint64_t ns = 0;
        unsigned n = 0;

        if (*s != '.')
                return -EINVAL;
        s++;
        for (; is_digit(*s); s++, n++) {
                if (n >= 9)
                        return -EINVAL;
                ns = ns * 10 + (uint64_t) (*s - '0');
        }
        if (n == 0)
                return -EINVAL;
        for (; n < 9; n++)
                ns *= 10;
        *p = s;
        *ret_ns = ns;
        return 0;
}

static int seconds_to_ns(uint64_t sec, uint64_t frac_ns, uint64_t *ret) {
        uint64_t ns;

        if (__builtin_mul_overflow(sec, NSEC_PER_SEC, &ns) || __builtin_add_overflow(ns, frac_ns, &ns))
                return -ERANGE;
        *ret = ns;
        return 0;
}

static const struct {
        const char *name;
        uint64_t ns;
} duration_units[] = {
        { "ns", 1 },
        { "us", NSEC_PER_USEC },
        { "ms", NSEC_PER_MSEC },
        { "s",  NSEC_PER_SEC },
        { "m",  60 * NSEC_PER_SEC },
        { "h",  3600 * NSEC_PER_SEC },
        { "d",  86400 * NSEC_PER_SEC },
        { "w",  7 * 86400 * NSEC_PER_SEC },
};

int duration_parse(const char *s, uint64_t *ret_ns) {
        const char *p = s;
        uint64_t total = 0;
        int r;

        if (!s || !*s)
                return -EINVAL;

        for (;;) {
                const char *unit;
                uint64_t v, mult = 0;
                size_t ulen;

                r = parse_digits(&p, &v);
                if (r < 0)
                        return r;

                unit = p;
                while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))
                        p++;
                ulen = (size_t) (p - unit);

                if (ulen == 0) {
                        /* A unit-less number is seconds, but only on its own:
                         * "1h30" is more likely a typo than 1h + 30s. */
                        if (unit != s + strspn(s, "0123456789") || *p)
                                return -EINVAL;
                        mult = NSEC_PER_SEC;
                } else
                        for (size_t i = 0; i < ELEMENTSOF(duration_units); i++)
                                if (strlen(duration_units[i].name) == ulen &&
                                    memcmp(duration_units[i].name, unit, ulen) == 0) {
                                        mult = duration_units[i].ns;
                                        break;
                                }
                if (mult == 0)
                        return -EINVAL;

                if (__builtin_mul_overflow(v, mult, &v) || __builtin_add_overflow(total, v, &total))
                        return -ERANGE;

                if (!*p)
                        break;
                /* Spaces only between components ("5m 3s"), never trailing. */
                p += strspn(p, " ");
                if (!is_digit(*p))
                        return -EINVAL;
        }

        *ret_ns = total;
        return 0;
}

int size_parse(const char *s, uint64_t *ret_bytes) {
        static const char suffixes[] = "KMGTP";
        const char *p = s, *k;
        uint64_t v, mult = 1;
        int r;

        if (!s)
                return -EINVAL;
        r = parse_digits(&p, &v);
        if (r < 0)
                return r;

        if (*p && (k = strchr(suffixes, *p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p))) {
                for (const char *i = suffixes; i <= k; i++)
                        mult *= 1024;
                p++;
                if (*p == 'i' && p[1] == 'B')
                        p += 2;
                else if (*p == 'B')
                        p++;
        } else if (*p == 'B')
                p++;
        if (*p)
                return -EINVAL;

        if (__builtin_mul_overflow(v, mult, &v))
                return -ERANGE;
        *ret_bytes = v;
        return 0;
}

static bool is_leap(unsigned y) {
        return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static unsigned days_in_month(unsigned y, unsigned m) {
        static const unsigned days[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
        return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* "YYYY-MM-DD[( |T)HH:MM[:SS[.frac]]]" in local time. */
static int parse_local(const char *s, uint64_t *ret_ns) {
        unsigned year, mon, day, hour = 0, min = 0, sec = 0;
        uint64_t frac = 0;
        const char *p = s;
        struct tm tm;
        time_t t;
        int r;

        if (parse_fixed(&p, 4, &year) < 0 || *p++ != '-' ||
            parse_fixed(&p, 2, &mon) < 0 || *p++ != '-' ||
            parse_fixed(&p, 2, &day) < 0)
                return -EINVAL;
        if (mon < 1 || mon > 12 || day < 1 || day > days_in_month(year, mon))
                return -EINVAL;

        if (*p == ' ' || *p == 'T') {
                p++;
                if (parse_fixed(&p, 2, &hour) < 0 || *p++ != ':' || parse_fixed(&p, 2, &min) < 0)
                        return -EINVAL;
                if (*p == ':') {
                        p++;
                        if (parse_fixed(&p, 2, &sec) < 0)
                                return -EINVAL;
                        if (*p == '.' && parse_fraction(&p, &frac) < 0)
                                return -EINVAL;
                }
                /* No 60th second: mktime() would silently roll it over. */
                if (hour > 23 || min > 59 || sec > 59)
                        return -EINVAL;
        }
        if (*p)
                return -EINVAL;
        if (year < 1970)
                return -ERANGE;

        tm = (struct tm) {
                .tm_year = (int) year - 1900,
                .tm_mon = (int) mon - 1,
                .tm_mday = (int) day,
                .tm_hour = (int) hour,
                .tm_min = (int) min,
                .tm_sec = (int) sec,
                .tm_isdst = -1,         /* let the zone rules say whether DST applies */
        };
        t = mktime(&tm);
        /* (time_t) -1 is also the error return; either way it precedes the epoch. */
        if (t < 0)
                return -ERANGE;

        r = seconds_to_ns((uint64_t) t, frac, ret_ns);
        return r;
}

int time_parse(const char *s, uint64_t now_ns, uint64_t *ret_ns) {
        uint64_t v, frac = 0;
        const char *p;
        int r;

        if (!s || !*s)
                return -EINVAL;

        if (strcmp(s, "now") == 0) {
                *ret_ns = now_ns;
                return 0;
        }

        if (s[0] == '@') {
                p = s + 1;
                r = parse_digits(&p, &v);
                if (r < 0)
                        return r;
                if (*p == '.' && parse_fraction(&p, &frac) < 0)
                        return -EINVAL;
                if (*p)
                        return -EINVAL;
                return seconds_to_ns(v, frac, ret_ns);
        }

        /* A date starts with four digits and a dash; anything else that
         * starts with a digit is a duration. */
        if (strlen(s) >= 5 && is_digit(s[0]) && is_digit(s[1]) && is_digit(s[2]) && is_digit(s[3]) && s[4] == '-')
                return parse_local(s, ret_ns);

        r = duration_parse(s, &v);
        if (r < 0)
                return r;
        if (v > now_ns)
                return -ERANGE;
        *ret_ns = now_ns - v;
        return 0;
}

char *time_format_local_decimals(uint64_t ns, unsigned decimals, char *buf, size_t size) {
        time_t t = (time_t) (ns / NSEC_PER_SEC);
        uint64_t frac = ns % NSEC_PER_SEC;
        struct tm tm;
        size_t n;

        if (decimals > 9 || !buf || size == 0)
                return NULL;
        if (!localtime_r(&t, &tm))
                return NULL;
        n = strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
        if (n == 0)
                return NULL;
        if (decimals > 0) {
                int k;

                for (unsigned i = decimals; i < 9; i++)
                        frac /= 10;
                k = snprintf(buf + n, size - n, ".%0*" PRIu64, (int) decimals, frac);
                if (k < 0 || (size_t) k >= size - n)
                        return NULL;
        }
        return buf;
}

char *time_format_local(uint64_t ns, char *buf, size_t size) {
        return time_format_local_decimals(ns, 3, buf, size);
}

char *duration_format(uint64_t ns, char *buf, size_t size) {
        /* Largest first; the units that get a second, smaller component. */
        static const struct {
                const char *name;
                uint64_t ns;
        } units[] = {
                { "d",  86400 * NSEC_PER_SEC },
                { "h",  3600 * NSEC_PER_SEC },
                { "m",  60 * NSEC_PER_SEC },
                { "s",  NSEC_PER_SEC },
                { "ms", NSEC_PER_MSEC },
                { "us", NSEC_PER_USEC },
                { "ns", 1 },
        };
        size_t i;
        int k;

        if (!buf || size == 0)
                return NULL;
        if (ns == 0) {
                k = snprintf(buf, size, "0s");
                return k >= 0 && (size_t) k < size ? buf : NULL;
        }

        for (i = 0; i < ELEMENTSOF(units) - 1; i++)
                if (ns >= units[i].ns)
                        break;

        /* "30s", not "30s 0ms"; but "5m 0s" keeps the minutes' precision visible. */
        if (units[i].ns >= NSEC_PER_SEC && !(units[i].ns == NSEC_PER_SEC && ns % NSEC_PER_SEC < NSEC_PER_MSEC))
                k = snprintf(buf, size, "%" PRIu64 "%s %" PRIu64 "%s",
                             ns / units[i].ns, units[i].name,
                             (ns % units[i].ns) / units[i + 1].ns, units[i + 1].name);
        else
                k = snprintf(buf, size, "%" PRIu64 "%s", ns / units[i].ns, units[i].name);
        return k >= 0 && (size_t) k < size ? buf : NULL;
}

uint64_t clock_ns(clockid_t id) {
        struct timespec ts;

        clock_gettime(id, &ts);
        return (uint64_t) ts.tv_sec * NSEC_PER_SEC + (uint64_t) ts.tv_nsec;
}

int64_t clock_mono_to_wall_ns(void) {
        return (int64_t) (clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC));
}
