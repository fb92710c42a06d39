/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The daemon (daemon/daemon.c) started in-process on this machine's real
 * perf events, with its own database and socket, and stopped by SIGTERM
 * the way systemd stops it: the kernel and the start of the layout journal
 * are recorded, the samples of the run are stored, and the files it made
 * are private. Needs root (perf events system-wide, kallsyms addresses);
 * skipped otherwise. The whole daemon as a process, with the client, is
 * the root tier's (tests/integration/). */

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "macro.h"
#include "store/store.h"
#include "pusher.h"
#include "test-store.h"
#include "test.h"
#include "timeparse.h"

static void *stop_later(void *userdata) {
        /* Sampling for a second (or userdata's nanoseconds), with
         * something to sample. */
        uint64_t t0 = clock_ns(CLOCK_MONOTONIC), ns = userdata ? *(const uint64_t *) userdata : NSEC_PER_SEC;
        volatile uint64_t x = 0;

        while (clock_ns(CLOCK_MONOTONIC) - t0 < ns)
                x += 1;
        (void) x;
        kill(getpid(), SIGTERM);
        return NULL;
}

/* A daemon of its own in a new directory at dir (a mkdtemp() template):
 * database, socket, no cache, 99 Hz. */
static void config_in(config *c, char *dir) {
        ASSERT_TRUE(mkdtemp(dir));
        config_init(c);
        free(c->database);
        ASSERT_TRUE(asprintf(&c->database, "%s/state/perfsnapd.db", dir) > 0);
        free(c->socket);
        ASSERT_TRUE(asprintf(&c->socket, "%s/run/perfsnapd.sock", dir) > 0);
        free(c->cache_dir);
        c->cache_dir = strdup("");
        c->frequency_hz = 99;
}

TEST(start_sample_and_stop_on_sigterm) {
        char dir[] = "/tmp/test-daemon.XXXXXX", cmd[128];
        daemon_ctx *d = NULL;
        store *st = NULL;
        store_stats stats = {};
        history h = {};
        struct stat sb;
        pthread_t th;
        config c;

        if (geteuid() != 0)
                TEST_SKIP("perf events system-wide need root\n");
        config_in(&c, dir);

        /* Whatever the caller's umask. */
        umask(0);
        ASSERT_OK(daemon_new(&c, NULL, &d));
        ASSERT_OK(daemon_start(d));
        ASSERT_EQ(pthread_create(&th, NULL, stop_later, NULL), 0);
        ASSERT_OK(daemon_run(d));
        ASSERT_EQ(pthread_join(th, NULL), 0);
        daemon_free(d);
        umask(022);

        ASSERT_OK(stat(c.database, &sb));
        if ((sb.st_mode & 077) != 0)
                fprintf(stderr, "database mode %o\n", (unsigned) (sb.st_mode & 07777));
        ASSERT_EQ(sb.st_mode & 077, 0);

        ASSERT_OK(store_open(c.database, STORE_READONLY, &st));
        ASSERT_OK(store_get_stats(st, &stats));
        fprintf(stderr, "stored %llu samples in about a second at 99 Hz\n", (unsigned long long) stats.samples);
        ASSERT_GT(stats.samples, 0);
        ASSERT_OK(store_list_events(st, 0, false, 0, 0, &h));
        ASSERT_GE(h.n_events, 1);
        ASSERT_STREQ(h.events[0].kind, "start");
        ASSERT_TRUE(h.events[0].kernel_release != NULL);
        history_done(&h);
        store_free(st);

        config_done(&c);
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        ASSERT_EQ(system(cmd), 0);
}

/* A file whose hours by cgroup are not built, as a migration from schema
 * 10 or a stop leaves it: the running daemon builds them by itself, from
 * its housekeeping timer. */
TEST(daemon_builds_hours_by_cgroup) {
        static const uint64_t H = 3600 * NSEC_PER_SEC, run_ns = 2500 * NSEC_PER_MSEC;
        char dir[] = "/tmp/test-daemon.XXXXXX", path[96], sql[160], cmd[128];
        uint64_t h0 = (clock_ns(CLOCK_REALTIME) / H - 3) * H, n = 0;
        daemon_ctx *d = NULL;
        store *st = NULL;
        pthread_t th;
        config c;

        if (geteuid() != 0)
                TEST_SKIP("perf events system-wide need root\n");
        config_in(&c, dir);
        snprintf(path, sizeof path, "%s/state", dir);
        ASSERT_OK(mkdir(path, 0700));

        /* Two hours three hours ago: brief processes of a service. */
        ASSERT_OK(store_open(c.database, STORE_READWRITE, &st));
        ASSERT_OK(store_begin(st));
        for (uint64_t t = h0; t < h0 + 2 * H; t += 10 * NSEC_PER_SEC, n++) {
                test_sample smp = {
                        .time_ns = t, .cpu = (uint32_t) (n % 2), .pid = 1000 + (uint32_t) n, .tid = 1000 + (uint32_t) n,
                        .comm = "cc1", .cgroup = "/system.slice/build.service", .period = 1, .n_frames = 1, .frames = &U_LIBC,
                };
                ASSERT_OK(test_add_sample(st, 1, &smp));
        }
        ASSERT_OK(store_commit(st));
        ASSERT_OK(store_flush_samples(st, UINT64_MAX));
        st = store_free(st);
        ASSERT_EQ(sql_int(c.database, "SELECT count(*) FROM sample_blocks WHERE level = 7"), 0);

        ASSERT_OK(daemon_new(&c, NULL, &d));
        ASSERT_OK(daemon_start(d));
        ASSERT_EQ(pthread_create(&th, NULL, stop_later, (void *) &run_ns), 0);
        ASSERT_OK(daemon_run(d));
        ASSERT_EQ(pthread_join(th, NULL), 0);
        daemon_free(d);

        snprintf(sql, sizeof sql, "SELECT coalesce(sum(n_samples), 0) FROM sample_blocks WHERE level = 7 AND start_ns >= %lld "
                 "AND start_ns < %lld", (long long) h0, (long long) (h0 + 2 * H));
        fprintf(stderr, "%llu samples over two hours, %lld in their hours by cgroup\n", (unsigned long long) n,
                (long long) sql_int(c.database, sql));
        ASSERT_EQ(sql_int(c.database, sql), (int64_t) n);
        ASSERT_GE(sql_int(c.database, "SELECT value FROM sample_meta WHERE key = 'complete7'"), (int64_t) (h0 + 2 * H));
        ASSERT_EQ(sql_int(c.database, "SELECT count(*) FROM sample_spill"), 0);

        config_done(&c);
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        ASSERT_EQ(system(cmd), 0);
}

TEST(push_url_is_shown_without_credentials_or_query) {
        static const struct {
                const char *url, *shown;
        } cases[] = {
                { "http://pyroscope:4040/ingest?name=a.cpu&format=pprof&from={from}", "http://pyroscope:4040/ingest" },
                { "https://user:secret@store.example/ingest?token=x", "https://store.example/ingest" },
                { "http://h/p#frag", "http://h/p" },
                { "http://h", "http://h" },
        };
        char buf[256];

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                pusher_url_for_display(cases[i].url, buf, sizeof buf);
                ASSERT_STREQ(buf, cases[i].shown);
        }
}
