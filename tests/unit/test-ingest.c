/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The ingest path (daemon/ingest.c) over synthetic ring buffers written in
 * the kernel's record format (tests/perf-synth.h), a synthetic root and a
 * real sqlite store: records of all CPUs are processed in time order, and
 * the drain horizon keeps the records a later drain may precede. The
 * order is visible in the comm each sample is stored with: a COMM record
 * renames the process for the samples after it. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "ingest.h"
#include "macro.h"
#include "perf-synth.h"
#include "test.h"
#include "timeparse.h"

#define T0 1700000000000000000LL        /* wall clock of monotonic 0 */
#define KADDR 0xffffffff81001010ULL
#define RB_SIZE (64u * 1024u)

typedef struct fixture {
        char dir[64];
        store *store;
        ingest *in;
        synth_rb rb[2];
        ringbuf *bufs[2];
        uint32_t cpus[2];
} fixture;

static void put_file(const char *dir, const char *rel, const char *text) {
        char path[256];
        FILE *f;

        /* Each directory on the way, one level at a time. */
        snprintf(path, sizeof path, "%s/%s", dir, rel);
        for (char *p = strchr(path + strlen(dir) + 1, '/'); p; p = strchr(p + 1, '/')) {
                *p = 0;
                ASSERT_TRUE(mkdir(path, 0755) >= 0 || errno == EEXIST);
                *p = '/';
        }
        f = fopen(path, "we");
        ASSERT_TRUE(f);
        ASSERT_TRUE(fputs(text, f) >= 0);
        ASSERT_EQ(fclose(f), 0);
}

static void setup(fixture *f) {
        char path[128];

        snprintf(f->dir, sizeof f->dir, "/tmp/test-ingest.XXXXXX");
        ASSERT_TRUE(mkdtemp(f->dir));
        put_file(f->dir, "proc/kallsyms",
                 "ffffffff81000000 T _text\n"
                 "ffffffff81001000 T do_one_initcall\n"
                 "ffffffff81002000 T _etext\n");
        put_file(f->dir, "proc/sys/kernel/osrelease", "6.1.0\n");
        put_file(f->dir, "proc/sys/kernel/random/boot_id", "00000000-0000-0000-0000-000000000001\n");
        snprintf(path, sizeof path, "%s/db", f->dir);
        ASSERT_OK(store_open(path, STORE_READWRITE, &f->store));
        ASSERT_OK(ingest_new(f->store, f->dir, &f->in));
        ASSERT_OK(ingest_load_kernel(f->in));
        for (unsigned i = 0; i < 2; i++) {
                ASSERT_OK(synth_rb_init(&f->rb[i], RB_SIZE));
                f->bufs[i] = &f->rb[i].rb;
                f->cpus[i] = i;
        }
}

static void teardown(fixture *f) {
        char cmd[128];

        for (unsigned i = 0; i < 2; i++)
                synth_rb_done(&f->rb[i]);
        ingest_free(f->in);
        store_free(f->store);
        snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
        ASSERT_EQ(system(cmd), 0);
}

static void put_sample(fixture *f, unsigned cpu, uint64_t t) {
        const uint64_t chain[] = { (uint64_t) PERF_CONTEXT_KERNEL, KADDR };

        ASSERT_OK(synth_sample(&f->rb[cpu], 100, 100, t, cpu, 1, chain, ELEMENTSOF(chain), false));
}

static void drain(fixture *f, uint64_t horizon) {
        ASSERT_OK(ingest_drain(f->in, f->bufs, f->cpus, 2, T0, horizon));
}

/* Samples stored for comm (pid 100's only process). */
static uint64_t samples_of(fixture *f, const char *comm) {
        query_params q = QUERY_PARAMS_INIT;
        query_result *r = NULL;
        uint64_t n = 0;

        q.comm = comm;
        ASSERT_OK(store_query(f->store, &q, 0, 0, &r));
        n = r->total_samples;
        query_result_free(r);
        return n;
}

TEST(records_of_all_cpus_are_processed_in_time_order) {
        fixture f = {};

        setup(&f);
        /* CPU 0 is read first, but CPU 1 renamed the process in between. */
        ASSERT_OK(synth_comm(&f.rb[0], 100, "early", 10, 0, true));
        put_sample(&f, 0, 30);
        ASSERT_OK(synth_comm(&f.rb[1], 100, "later", 20, 1, false));
        put_sample(&f, 1, 40);
        drain(&f, INGEST_HORIZON_ALL);
        ASSERT_OK(ingest_commit(f.in));

        ASSERT_EQ(ingest_get_stats(f.in)->samples, 2);
        ASSERT_EQ(ingest_get_stats(f.in)->records, 4);
        ASSERT_EQ(samples_of(&f, "later"), 2);
        ASSERT_EQ(samples_of(&f, "early"), 0);
        teardown(&f);
}

/* Longer runs of both CPUs, interleaved: every sample takes the comm of
 * the last COMM before it in time, whichever CPU either came from. */
TEST(runs_of_both_cpus_are_merged_by_time) {
        fixture f = {};

        setup(&f);
        ASSERT_OK(synth_comm(&f.rb[0], 100, "a", 10, 0, true));
        put_sample(&f, 0, 12);
        put_sample(&f, 0, 14);
        put_sample(&f, 0, 30);
        ASSERT_OK(synth_comm(&f.rb[0], 100, "c", 50, 0, false));
        put_sample(&f, 0, 55);
        ASSERT_OK(synth_comm(&f.rb[1], 100, "b", 20, 1, false));
        put_sample(&f, 1, 22);
        put_sample(&f, 1, 25);
        put_sample(&f, 1, 60);
        drain(&f, INGEST_HORIZON_ALL);
        ASSERT_OK(ingest_commit(f.in));

        ASSERT_EQ(ingest_get_stats(f.in)->samples, 7);
        ASSERT_EQ(samples_of(&f, "a"), 2);
        ASSERT_EQ(samples_of(&f, "b"), 3);
        ASSERT_EQ(samples_of(&f, "c"), 2);
        teardown(&f);
}

/* A CPU's records out of time order (a side-band record takes its time
 * before its space in the ring buffer, so a sample can be written ahead
 * of it): they are sorted, not merged as they came. */
TEST(a_run_out_of_time_order_is_sorted) {
        fixture f = {};

        setup(&f);
        ASSERT_OK(synth_comm(&f.rb[1], 100, "first", 5, 1, true));
        ASSERT_OK(synth_comm(&f.rb[0], 100, "second", 100, 0, false));
        put_sample(&f, 0, 90);          /* before "second", though after it in the buffer */
        put_sample(&f, 0, 110);
        drain(&f, INGEST_HORIZON_ALL);
        ASSERT_OK(ingest_commit(f.in));

        ASSERT_EQ(ingest_get_stats(f.in)->samples, 2);
        ASSERT_EQ(samples_of(&f, "first"), 1);
        ASSERT_EQ(samples_of(&f, "second"), 1);
        teardown(&f);
}

TEST(records_at_the_horizon_wait_for_the_next_drain) {
        fixture f = {};

        setup(&f);
        ASSERT_OK(synth_comm(&f.rb[0], 100, "a", 10, 0, true));
        put_sample(&f, 0, 40);
        drain(&f, 35);
        /* The sample is after the horizon: kept, not stored. */
        ASSERT_EQ(ingest_get_stats(f.in)->samples, 0);
        ASSERT_EQ(ingest_get_stats(f.in)->deferred, 1);

        /* A record older than the kept one shows up on another CPU: it
         * still comes first. */
        ASSERT_OK(synth_comm(&f.rb[1], 100, "b", 36, 1, false));
        drain(&f, INGEST_HORIZON_ALL);
        ASSERT_OK(ingest_commit(f.in));
        ASSERT_EQ(ingest_get_stats(f.in)->samples, 1);
        ASSERT_EQ(samples_of(&f, "b"), 1);
        ASSERT_EQ(samples_of(&f, "a"), 0);
        teardown(&f);
}

TEST(a_time_far_past_the_horizon_is_not_kept) {
        fixture f = {};

        setup(&f);
        ASSERT_OK(synth_comm(&f.rb[0], 100, "a", 10, 0, true));
        /* 61 s past the horizon: no clock runs that far ahead. */
        put_sample(&f, 0, 35 + 61 * NSEC_PER_SEC);
        drain(&f, 35);
        ASSERT_OK(ingest_commit(f.in));
        ASSERT_EQ(ingest_get_stats(f.in)->samples, 1);
        ASSERT_EQ(ingest_get_stats(f.in)->deferred, 0);
        teardown(&f);
}

TEST(a_malformed_record_is_counted_and_skipped) {
        uint64_t bad[4] = {};
        fixture f = {};

        setup(&f);
        put_sample(&f, 0, 10);
        /* A sample too short for its declared sample type. */
        *(struct perf_event_header *) (void *) bad = (struct perf_event_header) {
                .type = PERF_RECORD_SAMPLE, .size = sizeof bad };
        bad[2] = 20;    /* where the decoder finds nothing: no time at the right place */
        ASSERT_OK(synth_put(&f.rb[0], bad, sizeof bad));
        put_sample(&f, 1, 30);
        drain(&f, INGEST_HORIZON_ALL);
        ASSERT_OK(ingest_commit(f.in));
        ASSERT_EQ(ingest_get_stats(f.in)->samples, 2);
        ASSERT_EQ(ingest_get_stats(f.in)->bad_records, 1);
        teardown(&f);
}
