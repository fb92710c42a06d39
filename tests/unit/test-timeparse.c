/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Time, duration and size expressions (timeparse.c). */
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "test.h"
#include "timeparse.h"

#define SEC NSEC_PER_SEC
/* 2026-11-21 14:00:00 UTC */
#define T0 1795269600ull

static void set_tz(const char *tz) {
        ASSERT_EQ(setenv("TZ", tz, 1), 0);
        tzset();
}

static void expect_duration(const char *s, uint64_t expected) {
        uint64_t v = 0;
        int r = duration_parse(s, &v);

        if (r < 0 || v != expected)
                TEST_FAIL_("duration_parse(\"%s\"): expected %" PRIu64 ", got %d / %" PRIu64, s, expected, r, v);
}

static void expect_duration_error(const char *s, int err) {
        uint64_t v = 12345;
        int r = duration_parse(s, &v);

        if (r != -err || v != 12345)
                TEST_FAIL_("duration_parse(\"%s\"): expected -%d, got %d / %" PRIu64, s, err, r, v);
}

TEST(duration_valid) {
        expect_duration("30s", 30 * SEC);
        expect_duration("5m", 300 * SEC);
        expect_duration("2h", 7200 * SEC);
        expect_duration("7d", 7 * 86400 * SEC);
        expect_duration("1w", 7 * 86400 * SEC);
        expect_duration("1h30m", 5400 * SEC);
        expect_duration("500ms", 500 * NSEC_PER_MSEC);
        expect_duration("3us", 3000);
        expect_duration("17ns", 17);
        expect_duration("90", 90 * SEC);        /* a bare number is seconds */
        expect_duration("0", 0);
        expect_duration("5m 3s", 303 * SEC);    /* as duration_format() prints */
        expect_duration("1d 2h 3m 4s 5ms", (86400 + 7200 + 180 + 4) * SEC + 5 * NSEC_PER_MSEC);
        expect_duration("213503d", 213503ull * 86400 * SEC);
}

TEST(duration_invalid) {
        static const char *bad[] = {
                "", "5x", "-5m", "+5m", "5m ago", "5m ", " 5m", "1h30", "m", "5.5m",
                "5M", "5 m", "5min", "5mss", "1h,30m", "0x10s", "5\n",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                expect_duration_error(bad[i], EINVAL);
}

TEST(duration_overflow) {
        expect_duration_error("18446744073709551616", ERANGE);  /* the number itself */
        expect_duration_error("18446744073709551616ns", ERANGE);
        expect_duration_error("300000d", ERANGE);               /* number * unit */
        expect_duration_error("213503d 1d", ERANGE);            /* the sum */
        expect_duration("18446744073709551615ns", UINT64_MAX);
}

static void expect_time(const char *s, uint64_t now, uint64_t expected) {
        uint64_t v = 0;
        int r = time_parse(s, now, &v);

        if (r < 0 || v != expected)
                TEST_FAIL_("time_parse(\"%s\"): expected %" PRIu64 ", got %d / %" PRIu64, s, expected, r, v);
}

static void expect_time_error(const char *s, uint64_t now, int err) {
        uint64_t v = 12345;
        int r = time_parse(s, now, &v);

        if (r != -err || v != 12345)
                TEST_FAIL_("time_parse(\"%s\"): expected -%d, got %d / %" PRIu64, s, err, r, v);
}

TEST(time_relative_and_epoch) {
        const uint64_t now = T0 * SEC + 123;

        expect_time("now", now, now);
        expect_time("5m", now, now - 300 * SEC);
        expect_time("1h30m", now, now - 5400 * SEC);
        expect_time("0s", now, now);
        expect_time("@1763733600", now, 1763733600ull * SEC);
        expect_time("@1763733600.5", now, 1763733600ull * SEC + 500000000);
        expect_time("@0", now, 0);
        expect_time("@1.123456789", now, SEC + 123456789);

        expect_time_error("", now, EINVAL);
        expect_time_error("5x", now, EINVAL);
        expect_time_error("-5m", now, EINVAL);
        expect_time_error("5m ago", now, EINVAL);
        expect_time_error("yesterday", now, EINVAL);
        expect_time_error("Now", now, EINVAL);
        expect_time_error("@", now, EINVAL);
        expect_time_error("@-1", now, EINVAL);
        expect_time_error("@1.", now, EINVAL);
        expect_time_error("@1.1234567891", now, EINVAL);
        expect_time_error("@1x", now, EINVAL);
        expect_time_error("@18446744074", now, ERANGE);
        /* further back than the epoch */
        expect_time_error("100000d", now, ERANGE);
        expect_time("2h", 2 * 3600 * SEC, 0);
        expect_time_error("2h", 2 * 3600 * SEC - 1, ERANGE);
}

TEST(time_local_utc) {
        const uint64_t now = 1;

        set_tz("UTC");
        expect_time("2026-11-21 14:00", now, T0 * SEC);
        expect_time("2026-11-21 14:00:05", now, (T0 + 5) * SEC);
        expect_time("2026-11-21T14:00:05", now, (T0 + 5) * SEC);
        expect_time("2026-11-21 14:00:05.25", now, (T0 + 5) * SEC + 250000000);
        expect_time("2026-11-21", now, (T0 - 14 * 3600) * SEC);
        expect_time("2024-02-29", now, 1709164800ull * SEC);    /* leap day */
        expect_time("1970-01-01", now, 0);

        static const char *bad[] = {
                "2026-02-29", "2026-13-01", "2026-00-10", "2026-11-31", "2026-11-00",
                "2026-11-21 24:00", "2026-11-21 14:60", "2026-11-21 14:00:60",
                "2026-11-21 14", "2026-11-21 14:0", "2026-11-21 14:00:05.",
                "2026-11-21 14:00 ", "2026-1-21", "2026-11-21  14:00", "2026-11-21x",
                "2026-11-21 14:00:05.1234567891",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                expect_time_error(bad[i], now, EINVAL);
        expect_time_error("1969-12-31 23:59", now, ERANGE);
}

TEST(time_local_berlin) {
        const uint64_t now = 1;
        uint64_t v;

        if (access("/usr/share/zoneinfo/Europe/Berlin", F_OK) < 0)
                TEST_SKIP("no /usr/share/zoneinfo/Europe/Berlin");
        set_tz("Europe/Berlin");
        /* CET (UTC+1) in November, CEST (UTC+2) in July */
        expect_time("2026-11-21 14:00", now, (T0 - 3600) * SEC);
        expect_time("2026-07-01 12:00", now, 1782900000ull * SEC);
        /* 1970-01-01 00:00 in Berlin was an hour before the epoch */
        expect_time_error("1970-01-01", now, ERANGE);
        /* a time in the spring-forward gap still resolves (the C library's
         * choice); it lies between the instants around the gap */
        ASSERT_OK(time_parse("2026-03-29 02:30", now, &v));
        ASSERT_GE(v, 1774746000ull * SEC - 3600 * SEC);
        ASSERT_LE(v, 1774746000ull * SEC + 3600 * SEC);
        set_tz("UTC");
}

TEST(time_format_local) {
        char buf[TIME_FORMAT_MAX];
        const uint64_t t = (T0 + 5) * SEC + 123456789;
        uint64_t back;

        set_tz("UTC");
        ASSERT_STREQ(time_format_local(t, buf, sizeof(buf)), "2026-11-21 14:00:05.123");
        ASSERT_STREQ(time_format_local_decimals(t, 2, buf, sizeof(buf)), "2026-11-21 14:00:05.12");
        ASSERT_STREQ(time_format_local_decimals(t, 0, buf, sizeof(buf)), "2026-11-21 14:00:05");
        ASSERT_STREQ(time_format_local_decimals(t, 9, buf, sizeof(buf)), "2026-11-21 14:00:05.123456789");
        ASSERT_STREQ(time_format_local(0, buf, sizeof(buf)), "1970-01-01 00:00:00.000");
        ASSERT_NULL(time_format_local_decimals(t, 10, buf, sizeof(buf)));
        ASSERT_NULL(time_format_local(t, buf, 23));     /* needs 24 with the NUL */
        ASSERT_TRUE(time_format_local(t, buf, 24));

        /* what we print parses back (to the printed precision) */
        ASSERT_OK(time_parse(time_format_local(t, buf, sizeof(buf)), 0, &back));
        ASSERT_U64_EQ(back, (T0 + 5) * SEC + 123000000);

        if (access("/usr/share/zoneinfo/Europe/Berlin", F_OK) == 0) {
                set_tz("Europe/Berlin");
                ASSERT_STREQ(time_format_local(t, buf, sizeof(buf)), "2026-11-21 15:00:05.123");
                ASSERT_OK(time_parse(buf, 0, &back));
                ASSERT_U64_EQ(back, (T0 + 5) * SEC + 123000000);
                set_tz("UTC");
        }
}

TEST(duration_format) {
        static const struct {
                uint64_t ns;
                const char *text;
        } cases[] = {
                { 0,                                   "0s" },
                { 17,                                  "17ns" },
                { 3 * NSEC_PER_USEC + 999,             "3us" },
                { 250 * NSEC_PER_MSEC,                 "250ms" },
                { 5 * SEC + 250 * NSEC_PER_MSEC,       "5s 250ms" },
                { 30 * SEC + 999 * NSEC_PER_USEC,      "30s" },
                { 30 * SEC + NSEC_PER_MSEC,            "30s 1ms" },
                { 300 * SEC,                           "5m 0s" },
                { 303 * SEC + 999,                     "5m 3s" },
                { 3600 * SEC,                          "1h 0m" },
                { 26 * 3600 * SEC + 59 * SEC,          "1d 2h" },
                { UINT64_MAX,                          "213503d 23h" },
        };
        char buf[DURATION_FORMAT_MAX];

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                uint64_t back;

                ASSERT_STREQ(duration_format(cases[i].ns, buf, sizeof(buf)), cases[i].text);
                /* and it is a valid duration expression */
                ASSERT_OK(duration_parse(buf, &back));
                ASSERT_LE(back, cases[i].ns);
        }
        ASSERT_NULL(duration_format(300 * SEC, buf, 5));        /* "5m 0s" needs 6 */
        ASSERT_TRUE(duration_format(300 * SEC, buf, 6));
}

TEST(size_parse) {
        static const struct {
                const char *s;
                uint64_t bytes;
        } good[] = {
                { "0", 0 },
                { "100", 100 },
                { "100B", 100 },
                { "512K", 512 * 1024 },
                { "512k", 512 * 1024 },
                { "64M", 64ull << 20 },
                { "64MiB", 64ull << 20 },
                { "64MB", 64ull << 20 },
                { "1G", 1ull << 30 },
                { "2T", 2ull << 40 },
                { "1P", 1ull << 50 },
                { "16383P", 16383ull << 50 },
        };
        static const char *bad[] = { "", "K", "1.5G", "-1", "1X", "1 G", "1Gb", "1Ki", "1GiBx", " 1", "1E" };
        uint64_t v;

        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                v = 0;
                ASSERT_OK(size_parse(good[i].s, &v));
                ASSERT_U64_EQ(v, good[i].bytes);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r;

                v = 7;
                r = size_parse(bad[i], &v);
                if (r != -EINVAL || v != 7)
                        TEST_FAIL_("size_parse(\"%s\"): expected -EINVAL, got %d", bad[i], r);
        }
        ASSERT_ERROR(size_parse("16384P", &v), ERANGE);
        ASSERT_ERROR(size_parse("17179869184G", &v), ERANGE);
        ASSERT_ERROR(size_parse("99999999999999999999", &v), ERANGE);
}
