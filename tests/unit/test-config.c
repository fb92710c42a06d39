/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "config.h"
#include "fileio.h"
#include "macro.h"
#include "test.h"

/* The shipped conf/perfsnapd.conf documents the defaults: parsing it over
 * the built-in defaults must change nothing, and every key must be in it. */
TEST(shipped_config_equals_defaults) {
        _cleanup_free_ char *shipped = NULL, *a = NULL, *b = NULL, *error = NULL;
        config def, file;

        config_init(&def);
        config_init(&file);
        ASSERT_OK(read_full_file(TEST_SOURCE_DIR "/conf/perfsnapd.conf", 1 << 20, &shipped, NULL));
        if (config_parse(&file, shipped, "perfsnapd.conf", &error) < 0)
                TEST_FAIL_("shipped config does not parse: %s", error);
        a = config_format(&def);
        b = config_format(&file);
        ASSERT_STREQ(a, b);

        /* every effective key appears, uncommented, in the shipped file */
        for (char *line = a, *nl; line && *line; line = nl) {
                char key[64];
                nl = strchr(line, '\n');
                if (nl)
                        *nl++ = 0;
                ASSERT_EQ(sscanf(line, "%63[a-z_]", key), 1);
                char needle[80];
                snprintf(needle, sizeof needle, "\n%s =", key);
                if (!strstr(shipped, needle))
                        TEST_FAIL_("key %s is not documented in conf/perfsnapd.conf", key);
        }
        config_done(&def);
        config_done(&file);
}

/* --check-config output is itself a valid config that round-trips. */
TEST(format_round_trips) {
        _cleanup_free_ char *error = NULL, *a = NULL, *b = NULL;
        config c, d;

        config_init(&c);
        ASSERT_OK(config_parse(&c,
                               "frequency_hz = 999\n"
                               "event = cycles\n"
                               "callchain_depth = 127\n"
                               "ring_buffer_pages = 1024\n"
                               "drain_interval = 1500ms\n"
                               "commit_interval = 2s\n"
                               "database = /tmp/x.db\n"
                               "socket = /tmp/x.sock\n"
                               "group =\n"
                               "retention = forever\n"
                               "max_clients = 3\n"
                               "max_clients_per_user = 4\n"
                               "max_queries_per_user = 16\n"
                               "client_timeout = 90s\n"
                               "query_max_rows = 5\n"
                               "query_max_stacks = 6\n"
                               "query_timeout = 30s\n"
                               "log_level = debug\n"
                               "offcpu_clock = monotonic\n"
                               "root = /tmp/root\n", "t", &error));
        ASSERT_EQ(c.frequency_hz, 999);
        ASSERT_STREQ(c.event, "cycles");
        ASSERT_EQ(c.callchain_depth, 127);
        ASSERT_EQ(c.ring_buffer_pages, 1024);
        ASSERT_U64_EQ(c.drain_interval_ns, 1500 * NSEC_PER_MSEC);
        ASSERT_U64_EQ(c.commit_interval_ns, 2 * NSEC_PER_SEC);
        ASSERT_STREQ(c.group, "");
        ASSERT_U64_EQ(c.retention_ns, 0);
        ASSERT_EQ(c.log_level, LOG_DEBUG);
        ASSERT_EQ(c.max_clients_per_user, 4);
        ASSERT_EQ(c.max_queries_per_user, 16);
        ASSERT_U64_EQ(c.client_timeout_ns, 90 * NSEC_PER_SEC);
        ASSERT_U64_EQ(c.query_timeout_ns, 30 * NSEC_PER_SEC);
        ASSERT_STREQ(c.offcpu_clock, "monotonic");
        ASSERT_OK(config_parse(&c, "query_timeout = none\n", "t2", &error));
        ASSERT_U64_EQ(c.query_timeout_ns, 0);
        a = config_format(&c);
        config_init(&d);
        ASSERT_OK(config_parse(&d, a, "formatted", &error));
        b = config_format(&d);
        ASSERT_STREQ(a, b);
        config_done(&c);
        config_done(&d);
}

/* ring_buffer_pages = auto (the default): half a buffer holds a drain
 * interval of samples at 512 bytes, in 128..1024 pages; a number is
 * taken as it is. */
TEST(ring_buffer_pages_auto) {
        _cleanup_free_ char *error = NULL, *text = NULL;
        static const struct {
                const char *conf;
                uint32_t pages_4k, pages_64k;
        } cases[] = {
                { "", 128, 128 },                               /* 99 Hz, 3s */
                { "frequency_hz = 170\n", 128, 128 },          /* 261,120 bytes: under half of 128 pages */
                { "frequency_hz = 171\n", 256, 128 },
                { "frequency_hz = 682\n", 512, 128 },
                { "frequency_hz = 683\n", 1024, 128 },         /* 1,049,088 bytes: past half of 512 pages */
                { "frequency_hz = 999\n", 1024, 128 },
                { "frequency_hz = 512\ndrain_interval = 1s\n", 128, 128 },  /* 262,144 bytes: half of 128 pages */
                { "frequency_hz = 513\ndrain_interval = 1s\n", 256, 128 },
                { "frequency_hz = 999\ndrain_interval = 1s\n", 256, 128 },
                { "frequency_hz = 4999\n", 1024, 256 },       /* 7,678,464 bytes: past half of 128 pages of 64 KiB */
                { "frequency_hz = 99999\ndrain_interval = 60s\n", 1024, 1024 },
                { "frequency_hz = 999\ndrain_interval = 100ms\n", 128, 128 },
                { "frequency_hz = 999\nring_buffer_pages = 64\n", 64, 64 },
                { "ring_buffer_pages = 64\nring_buffer_pages = auto\n", 128, 128 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                config c;

                config_init(&c);
                ASSERT_OK(config_parse(&c, cases[i].conf, "t", &error));
                fprintf(stderr, "%s-> %u pages of 4 KiB, %u of 64 KiB\n", cases[i].conf,
                        config_ring_buffer_pages(&c, 4096), config_ring_buffer_pages(&c, 65536));
                ASSERT_EQ(config_ring_buffer_pages(&c, 4096), cases[i].pages_4k);
                ASSERT_EQ(config_ring_buffer_pages(&c, 65536), cases[i].pages_64k);
                free(text);
                text = config_format(&c);
                ASSERT_TRUE(strstr(text, c.ring_buffer_pages ? "\nring_buffer_pages = 64\n"
                                                             : "\nring_buffer_pages = auto\n") != NULL);
                config_done(&c);
        }
}

static void expect_error(const char *text, const char *expected_message) {
        _cleanup_free_ char *error = NULL;
        config c;

        config_init(&c);
        ASSERT_ERROR(config_parse(&c, text, "bad.conf", &error), EINVAL);
        if (!error || !strstr(error, expected_message))
                TEST_FAIL_("for %s: expected an error containing \"%s\", got \"%s\"", text, expected_message,
                           error ?: "(null)");
        config_done(&c);
}

TEST(errors_name_file_line_and_problem) {
        expect_error("frequency_hz = 0\n", "bad.conf:1: invalid value \"0\" for frequency_hz");
        expect_error("\n\nfrequency_hz = 100001\n", "bad.conf:3:");
        expect_error("frequency_hz = 12abc\n", "frequency_hz");
        expect_error("frequency_hz = -5\n", "frequency_hz");
        expect_error("nonsense = 1\n", "bad.conf:1: unknown key \"nonsense\"");
        expect_error("just words\n", "expected \"key = value\"");
        expect_error("= 5\n", "missing key");
        expect_error("ring_buffer_pages = 100\n", "power of two");
        expect_error("callchain_depth = 128\n", "1..127");
        expect_error("event = instructions\n", "cpu-clock or cycles");
        expect_error("database = relative/path.db\n", "absolute path");
        expect_error("retention = 10s\n", "at least 1m");
        expect_error("drain_interval = 2m\n", "1ms and 60s");
        expect_error("commit_interval = 1ms\n", "10ms and 60s");
        expect_error("log_level = loud\n", "err, warning");
        expect_error("group = a b\n", "group name");
        expect_error("max_clients = 2\n", "3..4096");
        expect_error("max_clients_per_user = 0\n", "1..4096");
        expect_error("max_queries_per_user = 17\n", "1..16");
        expect_error("client_timeout = 500ms\n", "1s and 1h");
        expect_error("query_timeout = 500ms\n", "none or a duration between 1s and 1d");
        expect_error("query_timeout = 2d\n", "none or a duration between 1s and 1d");
        expect_error("offcpu_clock = tsc\n", "expected auto, sched or monotonic");
        /* sun_path holds 107 bytes and the NUL */
        char line[200] = "socket = /", *p = line + strlen(line);
        memset(p, 'a', 107);
        strcpy(p + 107, "\n");
        expect_error(line, "107 bytes");
        p[106] = '\n';
        p[107] = 0;
        config c;
        _cleanup_free_ char *error = NULL;
        config_init(&c);
        ASSERT_OK(config_parse(&c, line, "t", &error));
        ASSERT_EQ(strlen(c.socket), 107);
        config_done(&c);
}

TEST(comments_blank_lines_and_spaces) {
        _cleanup_free_ char *error = NULL;
        config c;

        config_init(&c);
        ASSERT_OK(config_parse(&c, "# comment\n\n   \n  frequency_hz=250  \n\t# x = y\nretention = 2h\n", "t", &error));
        ASSERT_EQ(c.frequency_hz, 250);
        ASSERT_U64_EQ(c.retention_ns, 2 * 3600 * NSEC_PER_SEC);
        config_done(&c);
}

TEST(missing_file) {
        _cleanup_free_ char *error = NULL;
        config c;

        config_init(&c);
        ASSERT_ERROR(config_load(&c, "/nonexistent/perfsnapd.conf", &error), ENOENT);
        ASSERT_TRUE(error && strstr(error, "/nonexistent/perfsnapd.conf"));
        config_done(&c);
}

/* What is not a text file is refused, and --check-config returns at once
 * on a FIFO (no writer) instead of waiting for one. */
TEST(only_a_text_file_is_a_config) {
        char dir[] = "/tmp/test-config-XXXXXX", path[64];
        _cleanup_free_ char *error = NULL;
        config c;
        FILE *f;

        ASSERT_TRUE(mkdtemp(dir));
        config_init(&c);

        snprintf(path, sizeof path, "%s/nul.conf", dir);
        ASSERT_TRUE(f = fopen(path, "w"));
        fwrite("frequency_hz = 99\nretention = 1d\0\nnonsense = 1\n", 1, 47, f);
        fclose(f);
        ASSERT_ERROR(config_load(&c, path, &error), EINVAL);
        if (!error || !strstr(error, "nul.conf:2: a NUL byte"))
                TEST_FAIL_("NUL byte: %s", error ?: "(no message)");
        free(error);
        error = NULL;
        unlink(path);

        snprintf(path, sizeof path, "%s/fifo.conf", dir);
        ASSERT_OK(mkfifo(path, 0600) < 0 ? -errno : 0);
        ASSERT_ERROR(config_load(&c, path, &error), EINVAL);
        if (!error || !strstr(error, "fifo.conf: not a regular file"))
                TEST_FAIL_("FIFO: %s", error ?: "(no message)");
        free(error);
        error = NULL;
        unlink(path);

        ASSERT_ERROR(config_load(&c, dir, &error), EINVAL);
        if (!error || !strstr(error, "a directory"))
                TEST_FAIL_("directory: %s", error ?: "(no message)");
        rmdir(dir);
        config_done(&c);
}
