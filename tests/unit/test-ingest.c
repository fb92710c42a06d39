/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The ingest path (daemon/ingest.c) over synthetic ring buffers written in
 * the kernel's record format (tests/perf-synth.h), a synthetic root and a
 * real sqlite store: records of all CPUs are processed in time order, and
 * the drain horizon keeps the records a later drain may precede. The
 * order is visible in the comm each sample is stored with: a COMM record
 * renames the process for the samples after it. */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "ingest.h"
#include "macro.h"
#include "perf-synth.h"
#include "store/store-samples.h"
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

/* A record far behind its place: moved back past every record it came
 * after, not only the one before it. */
TEST(a_record_goes_back_as_far_as_its_time) {
        fixture f = {};

        setup(&f);
        ASSERT_OK(synth_comm(&f.rb[0], 100, "x", 10, 0, true));
        put_sample(&f, 0, 20);
        put_sample(&f, 0, 30);
        put_sample(&f, 0, 40);
        ASSERT_OK(synth_comm(&f.rb[0], 100, "y", 15, 0, false));
        drain(&f, INGEST_HORIZON_ALL);
        ASSERT_OK(ingest_commit(f.in));

        ASSERT_EQ(ingest_get_stats(f.in)->samples, 3);
        ASSERT_EQ(samples_of(&f, "y"), 3);
        ASSERT_EQ(samples_of(&f, "x"), 0);
        teardown(&f);
}

/* A run far from time order (each record before all the ones ahead of
 * it): past the insertion sort's few moves a record, sorted whole. */
TEST(a_run_in_reverse_time_order_is_sorted) {
        fixture f = {};

        setup(&f);
        for (uint64_t t = 120; t >= 10; t -= 10)
                put_sample(&f, 0, t);
        ASSERT_OK(synth_comm(&f.rb[0], 100, "one", 5, 0, true));
        ASSERT_OK(synth_comm(&f.rb[0], 100, "two", 65, 0, false));
        drain(&f, INGEST_HORIZON_ALL);
        ASSERT_OK(ingest_commit(f.in));

        ASSERT_EQ(ingest_get_stats(f.in)->samples, 12);
        ASSERT_EQ(samples_of(&f, "one"), 6);
        ASSERT_EQ(samples_of(&f, "two"), 6);
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

/* What the kernel writes while a drain works through its records: each
 * KSYMBOL record the drain processes (a BPF storm's journaling is slow)
 * is followed by 5 samples into CPU 1's ring buffer, and in the middle a
 * COMM record on CPU 0 renames the process. */
typedef struct storm {
        fixture *f;
        unsigned ksyms;
        unsigned refused;       /* records the full ring buffer could not take: the kernel's drops */
} storm;

static void write_during_drain(const perf_record *rec, int64_t mono_to_wall_ns, void *userdata) {
        storm *s = userdata;
        uint64_t t = 1000 + 5 * (uint64_t) s->ksyms;

        if (rec->type != PERF_RECORD_KSYMBOL)
                return;
        if (s->ksyms == 100 && synth_comm(&s->f->rb[0], 100, "late", t - 1, 0, false) < 0)
                s->refused++;
        for (unsigned j = 0; j < 5; j++) {
                const uint64_t chain[] = { (uint64_t) PERF_CONTEXT_KERNEL, KADDR };

                if (synth_sample(&s->f->rb[1], 100, 100, t + j, 1, 1, chain, ELEMENTSOF(chain), false) < 0)
                        s->refused++;
        }
        s->ksyms++;
}

/* 200 KSYMBOL records make 1,000 samples (about 100 KiB) come into a
 * ring buffer of 64 KiB during the drain: a ring buffer past half full
 * is emptied every 64 records, so none is refused, and the next drain
 * merges what was rescued in time order with the rest (the rename, left
 * in CPU 0's ring buffer). */
TEST(a_ring_filled_during_a_drain_is_rescued) {
        fixture f = {};
        storm s = { .f = &f };
        char name[32];

        setup(&f);
        ASSERT_OK(synth_comm(&f.rb[0], 100, "early", 1, 0, true));
        for (unsigned k = 0; k < 200; k++) {
                snprintf(name, sizeof name, "bpf_prog_%u", k);
                ASSERT_OK(synth_ksymbol(&f.rb[0], 0xffffffffc0000000ULL + k * 4096, 100, PERF_RECORD_KSYMBOL_TYPE_BPF,
                                        0, name, 2 + k, 0));
        }
        ingest_set_record_handler(f.in, write_during_drain, &s);
        drain(&f, INGEST_HORIZON_ALL);
        ASSERT_EQ(s.ksyms, 200);
        ASSERT_EQ(s.refused, 0);
        ASSERT_GE(ingest_get_stats(f.in)->rescued, 500);
        ASSERT_EQ(ingest_get_stats(f.in)->samples, 0);

        drain(&f, INGEST_HORIZON_ALL);
        ASSERT_OK(ingest_commit(f.in));
        ASSERT_EQ(ingest_get_stats(f.in)->samples, 1000);
        ASSERT_EQ(ingest_get_stats(f.in)->records, 1 + 200 + 1 + 1000);
        /* The samples from time 1500 on come after the rename. */
        ASSERT_EQ(samples_of(&f, "late"), 500);
        ASSERT_EQ(samples_of(&f, "early"), 500);
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

/* Samples of pid in a unit, cgroup or container (NULL: no filter). */
static uint64_t samples_in(fixture *f, const char *unit, const char *cgroup) {
        query_params q = QUERY_PARAMS_INIT;
        query_result *r = NULL;
        uint64_t n;

        q.unit = unit;
        q.cgroup = cgroup;
        ASSERT_OK(store_query(f->store, &q, 0, 0, &r));
        n = r->total_samples;
        query_result_free(r);
        return n;
}

static void put_sample_cg(fixture *f, uint32_t pid, uint64_t t, uint64_t cgroup) {
        const uint64_t chain[] = { (uint64_t) PERF_CONTEXT_KERNEL, KADDR };

        ASSERT_OK(synth_sample_cg(&f->rb[0], pid, pid, t, 0, 1, chain, ELEMENTSOF(chain), false, &cgroup));
}

/* PERF_SAMPLE_CGROUP: ids named from a walk of the hierarchy (found in
 * the root's mountinfo) and from PERF_RECORD_CGROUP; an id nobody names
 * is counted, and its samples stored without a cgroup. */
TEST(samples_are_attributed_to_their_cgroups) {
        fixture f = {};
        char hier[128], mi[300], mk[160];

        setup(&f);
        snprintf(hier, sizeof hier, "%s/cg", f.dir);
        snprintf(mk, sizeof mk, "%s/system.slice/a.service", hier);
        ASSERT_EQ(system((snprintf(mi, sizeof mi, "mkdir -p '%s'", mk), mi)), 0);
        snprintf(mi, sizeof mi, "31 25 0:27 / %s rw shared:9 - cgroup2 cgroup2 rw\n", "/cg");
        put_file(f.dir, "proc/self/mountinfo", mi);
        ingest_set_sample_type(f.in, PERFSNAP_SAMPLE_TYPE | PERF_SAMPLE_CGROUP);
        ASSERT_STREQ(ingest_cgroup_source(f.in), "perf");
        ASSERT_EQ(ingest_cgroups_known(f.in), 3);      /* /, system.slice, a.service */

        /* The walked cgroup's id is its directory's file handle. */
        union {
                struct file_handle fh;
                uint8_t buf[sizeof(struct file_handle) + 64];
        } h = { .fh.handle_bytes = 64 };
        int mount_id;
        uint64_t a_id;
        if (name_to_handle_at(AT_FDCWD, mk, &h.fh, &mount_id, 0) < 0 || h.fh.handle_bytes < 8) {
                teardown(&f);
                TEST_SKIP("no 8-byte file handles in /tmp\n");
        }
        memcpy(&a_id, h.fh.f_handle, sizeof a_id);

        ASSERT_OK(synth_cgroup(&f.rb[0], 0xabc0000001ULL, "/user.slice/user-1000.slice/session-2.scope", 5, 0));
        put_sample_cg(&f, 100, 10, a_id);
        put_sample_cg(&f, 100, 11, a_id);
        put_sample_cg(&f, 101, 12, 0xabc0000001ULL);
        put_sample_cg(&f, 102, 13, 0xdead0000beefULL);     /* named by nothing */
        drain(&f, INGEST_HORIZON_ALL);
        ASSERT_OK(ingest_commit(f.in));

        ASSERT_EQ(ingest_get_stats(f.in)->samples, 4);
        ASSERT_EQ(ingest_get_stats(f.in)->cgroups_unknown, 1);
        ASSERT_EQ(samples_in(&f, "a.service", NULL), 2);
        ASSERT_EQ(samples_in(&f, "system.slice", NULL), 2);
        ASSERT_EQ(samples_in(&f, "session-*.scope", NULL), 1);
        ASSERT_EQ(samples_in(&f, NULL, "/user.slice"), 1);
        ASSERT_EQ(samples_in(&f, NULL, "/"), 3);        /* the unknown one is in none */
        teardown(&f);
}

/* Kernels before 5.7: the process's /proc/PID/cgroup at its first
 * sample; a process that exits and whose pid comes back is read again. */
TEST(without_perf_cgroups_the_process_cgroup_is_read) {
        fixture f = {};
        const uint64_t chain[] = { (uint64_t) PERF_CONTEXT_KERNEL, KADDR };

        setup(&f);
        ASSERT_STREQ(ingest_cgroup_source(f.in), "proc");
        put_file(f.dir, "proc/100/cgroup", "1:name=systemd:/x\n0::/system.slice/old.service\n");
        ASSERT_OK(synth_sample(&f.rb[0], 100, 100, 10, 0, 1, chain, ELEMENTSOF(chain), false));
        drain(&f, INGEST_HORIZON_ALL);
        /* Moved: not read again while the process lives. */
        put_file(f.dir, "proc/100/cgroup", "0::/system.slice/new.service\n");
        ASSERT_OK(synth_sample(&f.rb[0], 100, 100, 20, 0, 1, chain, ELEMENTSOF(chain), false));
        ASSERT_OK(synth_task(&f.rb[0], PERF_RECORD_EXIT, 100, 1, 30, 0));
        ASSERT_OK(synth_sample(&f.rb[0], 100, 100, 40, 0, 1, chain, ELEMENTSOF(chain), false));
        /* A process without a v2 line (or gone): no cgroup. */
        put_file(f.dir, "proc/101/cgroup", "4:memory:/x\n");
        ASSERT_OK(synth_sample(&f.rb[0], 101, 101, 50, 0, 1, chain, ELEMENTSOF(chain), false));
        /* The idle task: the root cgroup's. */
        ASSERT_OK(synth_sample(&f.rb[0], 0, 0, 60, 0, 1, chain, ELEMENTSOF(chain), false));
        drain(&f, INGEST_HORIZON_ALL);
        ASSERT_OK(ingest_commit(f.in));
        ASSERT_EQ(samples_in(&f, "old.service", NULL), 2);
        ASSERT_EQ(samples_in(&f, "new.service", NULL), 1);
        ASSERT_EQ(samples_in(&f, NULL, "/"), 4);
        teardown(&f);
}

/* A machine with cgroup v1 only: attribution is off, and says so. */
TEST(without_a_cgroup2_hierarchy_nothing_is_attributed) {
        fixture f = {};

        setup(&f);
        put_file(f.dir, "proc/self/mountinfo", "30 25 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n");
        ingest_set_sample_type(f.in, PERFSNAP_SAMPLE_TYPE | PERF_SAMPLE_CGROUP);
        ASSERT_STREQ(ingest_cgroup_source(f.in), "none");
        put_sample_cg(&f, 100, 10, 12345);
        drain(&f, INGEST_HORIZON_ALL);
        ASSERT_OK(ingest_commit(f.in));
        ASSERT_EQ(ingest_get_stats(f.in)->samples, 1);
        ASSERT_EQ(samples_in(&f, NULL, "/"), 0);
        teardown(&f);
}

/* Off-CPU sums (ingest_set_offcpu_source()): stored in the drain's batch
 * as waits (query type offcpu weighs their ns), all at the drain's time
 * whatever order they come in, so one bucket holds them; the frames
 * down to __schedule/schedule are left out, so the leaf is the waiting
 * function. */
typedef struct offcpu_feed {
        size_t n;
        bool last_seen;
} offcpu_feed;

#define K_TRACE 0xffffffff81001c10ULL          /* the tracepoint's frame */
#define K_SCHED_ 0xffffffff81001d10ULL         /* __schedule */
#define K_SCHED 0xffffffff81001e10ULL          /* schedule */
#define K_WAIT 0xffffffff81001f10ULL           /* do_nanosleep */

static int feed_offcpu(ingest *in, bool last, void *userdata) {
        offcpu_feed *fd = userdata;
        const uint64_t chain[] = { (uint64_t) PERF_CONTEXT_KERNEL, K_TRACE, K_SCHED_, K_SCHED, K_WAIT, KADDR };
        const uint64_t bare[] = { (uint64_t) PERF_CONTEXT_KERNEL, K_SCHED };   /* schedule alone: kept */

        fd->last_seen = fd->last_seen || last;
        for (size_t i = 0; i < fd->n; i++) {
                /* The callback's chain is scratch ingest_offcpu() may cut. */
                uint64_t ips[ELEMENTSOF(chain)];
                size_t nr = i == 0 ? ELEMENTSOF(bare) : ELEMENTSOF(chain);
                int r;

                memcpy(ips, i == 0 ? bare : chain, nr * sizeof *ips);
                r = ingest_offcpu(in, 200 + (uint32_t) (i % 7), 200 + (uint32_t) i, (uint32_t) (i % 2), 0, ips, nr, 2,
                                  1000000);
                if (r < 0)
                        return r;
        }
        fd->n = 0;
        return 0;
}

static int count_level0(const scan_block *b, const block_entry *v, size_t n, void *userdata) {
        uint64_t *c = userdata;

        c[0]++;
        for (size_t i = 0; i < n; i++)
                if (v[i].kind == SAMPLE_KIND_OFFCPU)
                        c[1] += v[i].count;
        return 0;
}

TEST(offcpu_sums_go_into_the_drains_bucket) {
        fixture f = {};
        offcpu_feed feed = { .n = 200 };
        query_params q = QUERY_PARAMS_INIT;
        query_result *r = NULL;
        uint64_t blocks[2] = {};

        setup(&f);
        put_file(f.dir, "proc/kallsyms",
                 "ffffffff81000000 T _text\n"
                 "ffffffff81001000 T do_one_initcall\n"
                 "ffffffff81001c00 T bpf_trace_run4\n"
                 "ffffffff81001d00 T __schedule\n"
                 "ffffffff81001e00 T schedule\n"
                 "ffffffff81001f00 T do_nanosleep\n"
                 "ffffffff81002000 T _etext\n");
        ingest_free(f.in);
        ASSERT_OK(ingest_new(f.store, f.dir, &f.in));
        ASSERT_OK(ingest_load_kernel(f.in));
        ingest_set_offcpu_source(f.in, feed_offcpu, &feed);

        /* CPU samples on either side of a second's edge, then the sums. */
        put_sample(&f, 0, 900000000);
        put_sample(&f, 1, 1100000000);
        drain(&f, 1500000000);
        ASSERT_OK(ingest_commit(f.in));
        ASSERT_TRUE(!feed.last_seen);
        drain(&f, INGEST_HORIZON_ALL);
        ASSERT_OK(ingest_commit(f.in));
        ASSERT_TRUE(feed.last_seen);

        ASSERT_EQ(ingest_get_stats(f.in)->samples, 2);
        ASSERT_EQ(ingest_get_stats(f.in)->offcpu_waits, 400);
        ASSERT_EQ(ingest_get_stats(f.in)->offcpu_ns, 200000000);
        /* Two buckets of CPU samples; the 200 sums in one of them. */
        ASSERT_OK(sample_scan_level(f.store, 0, count_level0, blocks));
        ASSERT_EQ(blocks[0], 2);
        ASSERT_EQ(blocks[1], 400);

        q.kind = SAMPLE_KIND_OFFCPU;
        ASSERT_OK(store_query(f.store, &q, 0, 0, &r));
        ASSERT_EQ(r->total_samples, 200000000);
        ASSERT_EQ(r->n_rows, 2);
        /* 199 sums at do_nanosleep, one whose stack was schedule alone. */
        ASSERT_STREQ(r->rows[0].symbol, "do_nanosleep");
        ASSERT_EQ(r->rows[0].samples, 199000000);
        ASSERT_STREQ(r->rows[1].symbol, "schedule");
        query_result_free(r);
        /* CPU queries see the two samples only. */
        ASSERT_EQ(samples_of(&f, NULL), 2);
        teardown(&f);
}
