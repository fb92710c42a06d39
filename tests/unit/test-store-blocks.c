/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The store's sample blocks against a model: aggregates answer like
 * buckets, the leaf levels of schema 8, the process levels of schema 9,
 * the size cap, dictionary
 * generations across rollbacks and reopens, damaged blocks and the
 * verification of a file. */
#include "cgroup.h"
#include "store/store-private.h"
#include "store/store-samples-private.h"
#include "test-store.h"

typedef struct model_sample {
        uint64_t t;
        uint32_t cpu, pid;
        uint32_t kind;          /* one in five is an off-CPU wait of ns */
        uint64_t ns;
} model_sample;

static const char *model_comm(uint32_t pid) {
        static const char *const comms[] = { "init", "dd", "cc1", "sh" };
        return comms[pid % 4];
}

/* A process's cgroup: pid 3's is not known. */
static const char *model_cgroup(uint32_t pid) {
        static const char *const paths[] = { "/system.slice/a.service", "/system.slice/b.service",
                                             "/user.slice/user-1000.slice/session-1.scope", NULL, "/" };
        return paths[pid % 5];
}

static bool model_cgroup_passes(uint32_t pid, const query_params *q) {
        const char *path = model_cgroup(pid);

        if (!q->unit && !q->cgroup)
                return true;
        return path && (!q->unit || cgroup_unit_matches(path, q->unit)) && (!q->cgroup || cgroup_path_under(path, q->cgroup));
}

/* What a window must count: samples of the buckets it overlaps, or for
 * off-CPU queries their nanoseconds. */
static uint64_t model_count(const model_sample *v, size_t n, const query_params *q) {
        uint64_t c = 0;

        for (size_t i = 0; i < n; i++) {
                uint64_t b = v[i].t / NSEC_PER_SEC * NSEC_PER_SEC;

                if (b + NSEC_PER_SEC <= q->since_ns || (q->until_ns > 0 && b >= q->until_ns))
                        continue;
                if ((q->pid >= 0 && v[i].pid != (uint64_t) q->pid) || (q->cpu >= 0 && v[i].cpu != (uint32_t) q->cpu) ||
                    (q->comm && !streq(q->comm, model_comm(v[i].pid))) || !model_cgroup_passes(v[i].pid, q) ||
                    v[i].kind != q->kind)
                        continue;
                c += v[i].kind == SAMPLE_KIND_OFFCPU ? v[i].ns : 1;
        }
        return c;
}

static uint64_t rng = 88172645463325252ULL;
static uint64_t next_rand(void) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
}

/* [0]: samples, [1]: of them in entries without a leaf frame or with a
 * stack, [2]: of them in entries with a pid or a cgroup. */
static int count_leaf_entries(const scan_block *b, const block_entry *v, size_t n, void *userdata) {
        uint64_t *c = userdata;

        (void) b;
        for (size_t i = 0; i < n; i++) {
                c[0] += v[i].count;
                if (v[i].frame_id == 0 || v[i].stack_id != 0)
                        c[1] += v[i].count;
                if (v[i].pid != 0 || v[i].cgroup_id != 0)
                        c[2] += v[i].count;
        }
        return 0;
}

/* Windows over minutes and hours answer like the buckets they sum. With
 * churn every sample is a new process: the hours sum nothing and are left
 * to the finer levels (markers). */
static void check_aggregates(bool churn) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame a[] = { K_MEMCPY_10, K_ENTRY }, b[] = { K_OPEN, K_ENTRY }, c[] = { U_LIBC }, d[] = { K_BRD };
        const frame *stacks[] = { a, b, c, d };
        const size_t depth[] = { 2, 2, 1, 1 };
        enum { N = 30000 };
        model_sample *v = calloc(N, sizeof *v);
        const uint64_t span = (3 * 3600 + 17 * 60) * NSEC_PER_SEC;
        size_t late = 0;

        ASSERT_TRUE(v);
        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));

        /* Times rise with gaps (idle minutes) and a few late samples, as
         * the ingest horizon lets through; the daemon restarts twice, once
         * in the middle of a minute and of an hour. */
        uint64_t now = T0 + 17 * NSEC_PER_SEC + 123;
        for (size_t i = 0; i < N; i++) {
                now += next_rand() % (2 * span / N);
                if (next_rand() % 500 == 0)
                        now += 7 * 60 * NSEC_PER_SEC;   /* an idle stretch */
                v[i] = (model_sample) { .t = now, .cpu = (uint32_t) (next_rand() % 4),
                                        .pid = churn ? 1000 + (uint32_t) i : 1 + (uint32_t) (next_rand() % 6) };
                if (next_rand() % 5 == 0) {
                        v[i].kind = SAMPLE_KIND_OFFCPU;
                        v[i].ns = 1 + next_rand() % (3 * NSEC_PER_SEC);
                }
                if (i > 10 && next_rand() % 300 == 0) {
                        v[i].t = now - (next_rand() % 3 == 0 ? 90 : 2) * NSEC_PER_SEC;
                        late++;
                }
        }
        for (size_t i = 0; i < N; i += 500) {
                ASSERT_OK(store_begin(s));
                for (size_t j = i; j < i + 500 && j < N; j++) {
                        unsigned k = (unsigned) (next_rand() % 4);
                        test_sample smp = {
                                .time_ns = v[j].t, .cpu = v[j].cpu, .pid = v[j].pid, .tid = v[j].pid,
                                .comm = model_comm(v[j].pid), .cgroup = model_cgroup(v[j].pid),
                                .period = v[j].kind == SAMPLE_KIND_OFFCPU ? v[j].ns : 1000,
                                .n_frames = depth[k], .frames = stacks[k], .kind = v[j].kind,
                        };
                        ASSERT_OK(test_add_sample(s, 1, &smp));
                }
                /* The horizon trails the newest sample a little. */
                ASSERT_OK(store_flush_samples(s, v[MIN(i + 499, (size_t) N - 1)].t - NSEC_PER_SEC));
                ASSERT_OK(store_commit(s));
                build_all(s);
                if (i == 10000 || i == 20000) {
                        s = store_free(s);
                        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
                }
        }
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        build_all(s);

        int64_t minutes = sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 1");
        int64_t hours = sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 2");
        fprintf(stderr, "%d samples (%zu late) over %.0f s: %lld buckets, %lld minute blocks, %lld hour blocks\n", N, late,
                (double) (now - T0) / 1e9, (long long) sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 0"),
                (long long) minutes, (long long) hours);
        ASSERT_GT(minutes, 100);
        ASSERT_GE(hours, 3);
        ASSERT_EQ(sql_int(t.db, "SELECT sum(n_samples) FROM sample_blocks WHERE level = 0"), N);
        /* Each level holds every sample, but a late one of a period left
         * to the finer level is only there. */
        for (int level = 1; level < SAMPLE_LEVELS; level++) {
                char sql[96];

                snprintf(sql, sizeof sql, "SELECT sum(n_samples) FROM sample_blocks WHERE level = %d", level);
                if (churn)
                        ASSERT_GE(sql_int(t.db, sql), N - (int64_t) late);
                else
                        ASSERT_EQ(sql_int(t.db, sql), N);
        }
        /* Leaf entries name their frame, not a stack, also those refed
         * after the restarts from buckets that do not store frames. */
        uint64_t leaf_counts[3] = {}, proc_counts[3] = {};
        ASSERT_OK(sample_scan_level(s, SAMPLE_LEVEL_LEAF_MINUTE, count_leaf_entries, leaf_counts));
        ASSERT_U64_EQ(leaf_counts[0], N);
        ASSERT_U64_EQ(leaf_counts[1], 0);
        ASSERT_U64_EQ(leaf_counts[2], 0);
        /* The process minutes keep the pid (every model pid is > 0). */
        ASSERT_OK(sample_scan_level(s, SAMPLE_LEVEL_PROC_MINUTE, count_leaf_entries, proc_counts));
        ASSERT_U64_EQ(proc_counts[0], N);
        ASSERT_U64_EQ(proc_counts[1], 0);
        ASSERT_U64_EQ(proc_counts[2], N);

        int64_t markers = sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 2 AND data = x'00'");
        fprintf(stderr, "%lld of the hours left to the minutes\n", (long long) markers);
        if (churn)
                ASSERT_GT(markers, 3);
        else
                ASSERT_EQ(markers, 0);
        /* The hours by cgroup sum processes of a command in a cgroup into
         * one entry: kept also where every sample is a new process. */
        int64_t by_cgroup = sql_int(t.db, "SELECT count(DISTINCT start_ns) FROM sample_blocks WHERE level = 7 AND data != x'00'");
        fprintf(stderr, "%lld hours by cgroup\n", (long long) by_cgroup);
        ASSERT_EQ(by_cgroup, sql_int(t.db, "SELECT count(DISTINCT start_ns) FROM sample_blocks WHERE level = 2"));

        /* Windows: everything, whole hours, edges a hair off a bucket, a
         * minute or an hour, and random ones, with and without filters. */
        uint64_t hour0 = (T0 / 3600 + 1) * 3600 * NSEC_PER_SEC;
        query_params fixed[] = {
                { .pid = -1, .cpu = -1 },
                { .since_ns = hour0, .until_ns = hour0 + 2 * 3600 * NSEC_PER_SEC, .pid = -1, .cpu = -1 },
                { .since_ns = hour0 - 1, .until_ns = hour0 + 3600 * NSEC_PER_SEC + 1, .pid = -1, .cpu = -1 },
                { .since_ns = hour0 + 59 * NSEC_PER_SEC + 1, .until_ns = hour0 + 61 * 60 * NSEC_PER_SEC - 1, .pid = -1, .cpu = -1 },
                { .since_ns = hour0 + 1, .pid = 3, .cpu = -1 },
                { .since_ns = hour0 - 3600 * NSEC_PER_SEC / 2, .pid = -1, .cpu = 2, .comm = "sh" },
        };
        for (size_t i = 0; i < ELEMENTSOF(fixed) + 200; i++) {
                query_params q = QUERY_PARAMS_INIT;
                query_result *r;
                uint64_t want, rows = 0;

                if (i < ELEMENTSOF(fixed))
                        q = fixed[i];
                else {
                        q.since_ns = T0 + next_rand() % span;
                        q.until_ns = next_rand() % 4 == 0 ? 0 : q.since_ns + next_rand() % (span / 2) + 1;
                        if (next_rand() % 3 == 0)
                                q.pid = churn ? 1000 + (int64_t) (next_rand() % N) : 1 + (int64_t) (next_rand() % 6);
                        if (next_rand() % 3 == 0)
                                q.cpu = (int32_t) (next_rand() % 4);
                        if (next_rand() % 4 == 0)
                                q.comm = model_comm((uint32_t) next_rand());
                        /* Units and cgroups: the process levels answer. */
                        switch (next_rand() % 8) {
                        case 0: q.unit = "a.service"; break;
                        case 1: q.unit = "system.slice"; break;
                        case 2: q.unit = "*.scope"; break;
                        case 3: q.cgroup = "/system.slice/b.service"; break;
                        case 4: q.cgroup = "/"; break;
                        }
                }
                /* Without stacks, the leaf levels answer (the process
                 * levels with a pid, a unit or a cgroup). */
                q.want_stacks = i % 2 == 0;
                if (i >= ELEMENTSOF(fixed) && next_rand() % 3 == 0)
                        q.kind = SAMPLE_KIND_OFFCPU;
                want = model_count(v, N, &q);
                r = run_query(s, &q, 0, 0);
                for (size_t j = 0; j < r->n_rows; j++)
                        rows += r->rows[j].samples;
                if (r->total_samples != want || rows != want)
                        fprintf(stderr, "window %zu [%llu, %llu) kind %u pid %lld cpu %d comm %s unit %s cgroup %s: want %llu, "
                                "got %llu (rows %llu)\n",
                                i, (unsigned long long) (q.since_ns - T0), (unsigned long long) (q.until_ns ? q.until_ns - T0 : 0),
                                q.kind, (long long) q.pid, q.cpu, q.comm ?: "-", q.unit ?: "-", q.cgroup ?: "-", (unsigned long long) want,
                                (unsigned long long) r->total_samples, (unsigned long long) rows);
                ASSERT_U64_EQ(r->total_samples, want);
                ASSERT_U64_EQ(rows, want);
                /* The same functions from the full levels and from the
                 * leaf or process ones. */
                q.want_stacks = !q.want_stacks;
                query_result *other = run_query(s, &q, 0, 0);
                assert_same_rows(r, other);
                query_result_free(other);
                /* Not told apart by command (units): the same total, and
                 * each function's rows summed over the commands. */
                if (i % 10 == 0) {
                        query_params nc = q;

                        nc.no_comm = true;
                        other = run_query(s, &nc, 0, 0);
                        ASSERT_U64_EQ(other->total_samples, r->total_samples);
                        ASSERT_TRUE(other->n_rows <= r->n_rows);
                        for (size_t j = 0; j < other->n_rows; j++) {
                                uint64_t sum = 0;

                                ASSERT_STREQ(other->rows[j].comm, "[unknown]");
                                for (size_t k = 0; k < r->n_rows; k++)
                                        if (streq(r->rows[k].module, other->rows[j].module) &&
                                            streq(r->rows[k].symbol, other->rows[j].symbol))
                                                sum += r->rows[k].samples;
                                ASSERT_U64_EQ(other->rows[j].samples, sum);
                        }
                        query_result_free(other);
                }
                query_result_free(r);
        }
        free(v);
}

TEST(aggregates_answer_like_buckets) {
        check_aggregates(false);
}

TEST(aggregates_answer_like_buckets_under_churn) {
        check_aggregates(true);
}


/* Makes the file at path what a schema-`version` writer (7 or 8) left:
 * the same blocks and keys, without the levels and tables that came
 * later. */
static void make_schema(const char *path, int version) {
        static const char *const sql[] = {
                [7] = "DELETE FROM sample_blocks WHERE level >= 3;"
                      "DELETE FROM sample_meta WHERE key IN ('complete3', 'complete4', 'fed3', 'fed4', "
                      "'complete5', 'complete6', 'fed5', 'fed6', 'complete7');"
                      "DROP TABLE sample_spill;"
                      "ALTER TABLE events DROP COLUMN sections_of;"
                      "ALTER TABLE sample_blocks DROP COLUMN folded_pids;"
                      "PRAGMA user_version = 7;",
                [8] = "DELETE FROM sample_blocks WHERE level >= 5;"
                      "DELETE FROM sample_meta WHERE key IN ('complete5', 'complete6', 'fed5', 'fed6', 'complete7');"
                      "DROP TABLE sample_spill;"
                      "ALTER TABLE events DROP COLUMN sections_of;"
                      "ALTER TABLE sample_blocks DROP COLUMN folded_pids;"
                      "PRAGMA user_version = 8;",
        };
        ASSERT_TRUE(version == 7 || version == 8);
        (void) sql_exec(path, sql[version]);
}

/* After a migration: the file is of this schema, and the levels from
 * `minute` on have a block for each block of the minutes and hours. */
static void assert_levels_from_minutes(const char *path, int minute) {
        char sql[2][96];

        ASSERT_EQ(sql_int(path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        ASSERT_GT(sql_int(path, "SELECT count(*) FROM sample_blocks WHERE level = 1"), 100);
        for (int k = 0; k < 2; k++) {
                snprintf(sql[0], sizeof sql[0], "SELECT count(*) FROM sample_blocks WHERE level = %d", minute + k);
                snprintf(sql[1], sizeof sql[1], "SELECT count(*) FROM sample_blocks WHERE level = %d", 1 + k);
                ASSERT_EQ(sql_int(path, sql[0]), sql_int(path, sql[1]));
        }
}

/* After a migration: the windows answer as before[] (which it frees),
 * and the open minute and hour go on from the buckets in every level. */
static void check_migrated(store *s, const char *db, const query_params *windows, query_result **before,
                           size_t n_windows, uint64_t n) {
        const frame a[] = { K_MEMCPY_10, K_ENTRY };

        for (size_t i = 0; i < n_windows; i++) {
                query_result *r = run_query(s, windows + i, 0, 0);

                assert_same_rows(before[i], r);
                query_result_free(r);
                query_result_free(before[i]);
        }
        ASSERT_OK(store_begin(s));
        for (uint64_t sec = 9000; sec < 9100; sec++, n++)
                add(s, S(sec), 0, 7, "a", a, 2);
        ASSERT_OK(store_commit(s));
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        /* The hours by cgroup of the migrated file, from its oldest. */
        build_all(s);
        for (int level = 0; level < SAMPLE_LEVELS; level++) {
                char sql[96];

                snprintf(sql, sizeof sql, "SELECT sum(n_samples) FROM sample_blocks WHERE level = %d", level);
                ASSERT_EQ(sql_int(db, sql), (int64_t) n);
        }
}

/* A schema-7 database has no leaf levels: migration makes them from its
 * minutes and hours, the answers stay, and the open periods go on. */
TEST(migration_from_schema_7_builds_leaf_levels) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame a[] = { K_MEMCPY_10, K_ENTRY }, b[] = { K_OPEN, K_ENTRY };
        query_params windows[] = {
                { .pid = -1, .cpu = -1 },
                { .since_ns = S(3600) + 1, .until_ns = S(7300), .pid = -1, .cpu = -1 },
                { .since_ns = S(100), .pid = -1, .cpu = 1, .comm = "b" },
        };
        query_result *before[ELEMENTSOF(windows)];
        uint64_t n = 0;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        for (uint64_t sec = 0; sec < 9000; sec += 7) {
                ASSERT_OK(store_begin(s));
                for (uint32_t k = 0; k < 3; k++, n++)
                        add(s, S(sec) + k, k % 2, 100 + (uint32_t) (sec % 50), sec % 3 ? "a" : "b", k ? a : b, 2);
                ASSERT_OK(store_flush_samples(s, S(sec) - NSEC_PER_SEC));
                ASSERT_OK(store_commit(s));
        }
        for (size_t i = 0; i < ELEMENTSOF(windows); i++)
                before[i] = run_query(s, windows + i, 0, 0);
        s = store_free(s);

        make_schema(t.db, 7);

        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        assert_levels_from_minutes(t.db, SAMPLE_LEVEL_LEAF_MINUTE);
        ASSERT_EQ(sql_int(t.db, "SELECT value FROM sample_meta WHERE key = 'complete3'"),
                  sql_int(t.db, "SELECT value FROM sample_meta WHERE key = 'complete1'"));
        /* The minutes name stacks; their leaf entries name frames (and
         * keep no stack generation). */
        uint64_t leaf_counts[3] = {};
        ASSERT_OK(sample_scan_level(s, SAMPLE_LEVEL_LEAF_MINUTE, count_leaf_entries, leaf_counts));
        ASSERT_GT(leaf_counts[0], 0);
        ASSERT_U64_EQ(leaf_counts[1], 0);
        check_migrated(s, t.db, windows, before, ELEMENTSOF(windows), n);
}

/* Writes 9,000 s of three samples every 7 s, 50 processes in turn, in
 * units of their own; *ret_n: how many. */
static void write_processes(store *s, uint64_t *ret_n) {
        const frame a[] = { K_MEMCPY_10, K_ENTRY }, b[] = { K_OPEN, K_ENTRY };
        static const char *const cgroups[] = { "/system.slice/a.service", "/system.slice/b.service",
                                                "/user.slice/user-1000.slice/session-1.scope" };
        uint64_t n = 0;

        for (uint64_t sec = 0; sec < 9000; sec += 7) {
                ASSERT_OK(store_begin(s));
                for (uint32_t k = 0; k < 3; k++, n++) {
                        uint32_t pid = 100 + (uint32_t) (sec % 50);
                        test_sample smp = {
                                .time_ns = S(sec) + k, .cpu = k % 2, .pid = pid, .tid = pid + k,
                                .comm = sec % 3 ? "a" : "b", .cgroup = cgroups[pid % 3], .period = 1,
                                .n_frames = 2, .frames = k ? a : b,
                        };
                        ASSERT_OK(test_add_sample(s, 1, &smp));
                }
                ASSERT_OK(store_flush_samples(s, S(sec) - NSEC_PER_SEC));
                ASSERT_OK(store_commit(s));
        }
        *ret_n = n;
}

/* A unit filter over more cgroups than the query's cache of their
 * answers holds (256, by id): each sample counts by its own cgroup. */
TEST(unit_filter_over_many_cgroups) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame f[] = { K_MEMCPY_10, K_ENTRY };
        enum { N = 600 };
        uint64_t want = 0;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_OK(store_begin(s));
        for (uint32_t i = 0; i < N; i++) {
                char cg[64];

                snprintf(cg, sizeof cg, "/system.slice/s%u.service", i);
                /* s1, s10..s19, s100..s199 match s1*.service: 111 of them,
                 * each with i % 3 + 1 samples. */
                for (uint32_t k = 0; k <= i % 3; k++) {
                        test_sample smp = {
                                .time_ns = S(i / 10) + k, .cpu = k % 2, .pid = 1000 + i, .tid = 1000 + i,
                                .comm = "worker", .cgroup = cg, .period = 1, .n_frames = 2, .frames = f,
                        };
                        ASSERT_OK(test_add_sample(s, 1, &smp));
                }
                if (cg[15] == '1')
                        want += i % 3 + 1;
        }
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        ASSERT_OK(store_commit(s));

        query_params q = { .pid = -1, .cpu = -1, .unit = "s1*.service" };
        query_result *r = run_query(s, &q, 0, 0);
        ASSERT_U64_EQ(r->total_samples, want);
        query_result_free(r);
        q.unit = "*";
        r = run_query(s, &q, 0, 0);
        ASSERT_U64_EQ(r->total_samples, (uint64_t) N + N / 3 * 3);     /* 1, 2, 3 samples in turn */
        query_result_free(r);
}

/* Reports of a pid and of units read the process levels: with the
 * buckets and the full minutes and hours of a whole hour gone, they still
 * count it, as a report of stacks (which needs those) no longer does. */
TEST(process_levels_answer_a_pid_and_a_unit) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        uint64_t hour = (S(0) / (3600 * NSEC_PER_SEC) + 1) * 3600 * NSEC_PER_SEC, n;
        query_params windows[] = {
                { .since_ns = hour, .until_ns = hour + 3600 * NSEC_PER_SEC, .pid = 107, .cpu = -1 },
                { .since_ns = hour - 1, .pid = 107, .cpu = 1 },
                { .since_ns = hour, .until_ns = hour + 3600 * NSEC_PER_SEC, .pid = -1, .cpu = -1, .unit = "a.service" },
                { .pid = -1, .cpu = -1, .cgroup = "/user.slice" },
                { .pid = -1, .cpu = -1, .by_cgroup = true, .no_comm = true },
        };
        query_result *before[ELEMENTSOF(windows)];
        char sql[160];

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        write_processes(s, &n);
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        ASSERT_EQ(sql_int(t.db, "SELECT sum(n_samples) FROM sample_blocks WHERE level = 6"), (int64_t) n);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level IN (5, 6) AND data = x'00'"), 0);
        for (size_t i = 0; i < ELEMENTSOF(windows); i++) {
                before[i] = run_query(s, windows + i, 0, 0);
                ASSERT_GT(before[i]->total_samples, 0);
                /* The same functions from the full levels. */
                query_params q = windows[i];
                q.want_stacks = true;
                query_result *full = run_query(s, &q, 0, 0);
                assert_same_rows(before[i], full);
                query_result_free(full);
        }
        query_params stacks = windows[0];
        stacks.want_stacks = true;
        query_result *stacks_before = run_query(s, &stacks, 0, 0);
        s = store_free(s);

        snprintf(sql, sizeof sql, "DELETE FROM sample_blocks WHERE level IN (0, 1, 2) AND start_ns >= %lld AND start_ns < %lld",
                 (long long) hour, (long long) (hour + 3600 * NSEC_PER_SEC));
        ASSERT_GT(sql_exec(t.db, sql), 60);

        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        for (size_t i = 0; i < ELEMENTSOF(windows); i++) {
                query_result *r = run_query(s, windows + i, 0, 0);

                assert_same_rows(before[i], r);
                query_result_free(r);
                query_result_free(before[i]);
        }
        query_result *stacks_after = run_query(s, &stacks, 0, 0);
        ASSERT_GT(stacks_before->total_samples, 0);
        ASSERT_U64_EQ(stacks_after->total_samples, 0);
        query_result_free(stacks_before);
        query_result_free(stacks_after);
}

/* Every 10th second of [from, to): 8 samples, each a new process in one of
 * five cgroups, at 8 of 56 functions; one in four an off-CPU wait. */
static void add_churn(store *s, uint64_t from, uint64_t to, uint32_t *pid) {
        for (uint64_t t = from; t < to; t += 10 * NSEC_PER_SEC) {
                ASSERT_OK(store_begin(s));
                for (uint32_t k = 0; k < 8; k++) {
                        frame f = U_LIBC;
                        uint32_t p = (*pid)++;

                        f.offset = 0x1000 + 0x100 * (k + (uint32_t) (t / NSEC_PER_SEC / 30 % 7) * 8);
                        f.addr = 0x7f0000000000ULL + f.offset;
                        test_sample smp = {
                                .time_ns = t + k * 1000, .cpu = k % 2, .pid = p, .tid = p, .comm = model_comm(p),
                                .cgroup = model_cgroup(p), .period = k % 4 == 0 ? 1000 + k : 1, .n_frames = 1,
                                .frames = &f, .kind = k % 4 == 0 ? SAMPLE_KIND_OFFCPU : SAMPLE_KIND_CPU,
                        };
                        ASSERT_OK(test_add_sample(s, 1, &smp));
                }
                ASSERT_OK(store_flush_samples(s, t));
                ASSERT_OK(store_commit(s));
        }
}

/* Build steps until the hour at start_ns has `minute` minutes spilled and
 * `part` parts or more summed (not all). */
static void build_until(store *s, uint64_t start_ns, unsigned minute, unsigned part) {
        const period_build *b = &s->samples->build;
        bool more = true;

        for (unsigned i = 0; i < 1000; i++) {
                ASSERT_OK(store_build_step(s, 0, &more));
                if (b->active && b->start_ns == start_ns && b->minute == minute && b->part >= part)
                        return;
                ASSERT_TRUE(more);
        }
        ASSERT_TRUE(false);
}

/* Samples of `level` in the hour at start_ns: every block's, and its
 * markers'. */
static int64_t hour_samples(const char *db, unsigned level, uint64_t start_ns) {
        char sql[160];

        snprintf(sql, sizeof sql, "SELECT sum(n_samples) FROM sample_blocks WHERE level = %u AND start_ns >= %lld "
                 "AND start_ns < %lld", level, (long long) start_ns, (long long) (start_ns + 3600 * NSEC_PER_SEC));
        return sql_int(db, sql);
}

/* The hours by cgroup are built through sample_spill a part of their
 * keys at a time (blocks of 64 and of 8 entries here, more written in
 * pieces): a
 * bucket late to an hour being spilled counts once, a restart in the
 * middle of one builds it again, and units and cgroups read them as the
 * full levels say. */
TEST(cgroup_hours_built_in_parts) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const uint64_t H = 3600 * NSEC_PER_SEC, hour = (S(0) / H + 1) * H;
        uint32_t pid = 1000;
        query_params windows[] = {
                { .since_ns = hour, .until_ns = hour + 2 * H, .pid = -1, .cpu = -1, .unit = "a.service" },
                { .since_ns = hour - 1, .pid = -1, .cpu = -1, .cgroup = "/system.slice" },
                { .since_ns = hour, .until_ns = hour + H, .pid = -1, .cpu = 1, .unit = "*.scope" },
                { .pid = -1, .cpu = -1, .by_cgroup = true, .no_comm = true },
                { .since_ns = hour, .pid = -1, .cpu = -1, .by_cgroup = true, .kind = SAMPLE_KIND_OFFCPU },
        };

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        s->samples->build.part_max = 64;

        /* The first hour, over when the next one's samples come. */
        add_churn(s, hour - 5 * 60 * NSEC_PER_SEC, hour + H + 2 * 60 * NSEC_PER_SEC, &pid);
        build_until(s, hour, 10, 0);
        fprintf(stderr, "hour 1: minute %u spilled\n", s->samples->build.minute);
        /* A late bucket of it (of minute 30) while it is spilled. */
        ASSERT_OK(store_begin(s));
        for (uint32_t k = 0; k < 16; k++) {
                test_sample smp = {
                        .time_ns = hour + H / 2 + k, .cpu = k % 2, .pid = 7, .tid = 7, .comm = model_comm(7),
                        .cgroup = model_cgroup(7), .period = 1, .n_frames = 1, .frames = &U_LIBC,
                };
                ASSERT_OK(test_add_sample(s, 1, &smp));
        }
        ASSERT_OK(store_flush_samples(s, hour + H + 3 * 60 * NSEC_PER_SEC));
        ASSERT_OK(store_commit(s));
        build_all(s);
        ASSERT_EQ(hour_samples(t.db, 7, hour), hour_samples(t.db, 0, hour));
        ASSERT_GT(sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 7 AND data != x'00'"), 8);

        /* The second hour: the daemon stops in the middle of its build. */
        add_churn(s, hour + H + 2 * 60 * NSEC_PER_SEC, hour + 2 * H + 2 * 60 * NSEC_PER_SEC, &pid);
        build_until(s, hour + H, 60, 1);
        fprintf(stderr, "hour 2: %u parts summed, then a restart\n", s->samples->build.part);
        s = store_free(s);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        /* Parts of more keys than that: blocks written in pieces. */
        s->samples->build.part_max = 8;
        build_all(s);
        ASSERT_EQ(hour_samples(t.db, 7, hour + H), hour_samples(t.db, 0, hour + H));
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 7 AND data = x'00'"), 0);
        /* What was spilled is gone once summed. */
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM sample_spill"), 0);
        fprintf(stderr, "%lld blocks of hours by cgroup for %lld samples of the first hour\n",
                (long long) sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 7"),
                (long long) hour_samples(t.db, 5, hour));

        for (size_t i = 0; i < ELEMENTSOF(windows); i++) {
                query_result *r = run_query(s, windows + i, 0, 0);
                query_params q = windows[i];

                ASSERT_GT(r->total_samples, 0);
                /* The same functions from the full levels. */
                q.want_stacks = true;
                query_result *full = run_query(s, &q, 0, 0);
                assert_same_rows(r, full);
                query_result_free(full);
                query_result_free(r);
        }
}

/* A process minute that cannot be decoded does not stop the builder: it
 * is left out of its hour, counted, and the hours after it are built. */
TEST(cgroup_hours_skip_a_damaged_block) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const uint64_t H = 3600 * NSEC_PER_SEC, hour = (S(0) / H + 1) * H;
        uint32_t pid = 1000;
        char sql[200];

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        add_churn(s, hour, hour + 2 * H + 2 * 60 * NSEC_PER_SEC, &pid);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 7"), 0);
        snprintf(sql, sizeof sql, "UPDATE sample_blocks SET data = x'01ffffffff0f' WHERE id = (SELECT min(id) FROM "
                 "sample_blocks WHERE level = 5 AND start_ns >= %lld)", (long long) (hour + 30 * 60 * NSEC_PER_SEC));
        ASSERT_EQ(sql_exec(t.db, sql), 1);

        uint64_t bad = store_bad_blocks(s);
        build_all(s);
        ASSERT_U64_EQ(store_bad_blocks(s), bad + 1);
        /* The damaged minute's samples are missing from its hour only. */
        ASSERT_GT(hour_samples(t.db, 7, hour), 0);
        ASSERT_LT(hour_samples(t.db, 7, hour), hour_samples(t.db, 0, hour));
        ASSERT_EQ(hour_samples(t.db, 7, hour + H), hour_samples(t.db, 0, hour + H));
        ASSERT_EQ(sql_int(t.db, "SELECT value FROM sample_meta WHERE key = 'complete7'"), (int64_t) (hour + 2 * H));
}

/* The pids a level's blocks of [from, to) hold, as a bitmap of the first
 * 16,384, and the samples of folded entries. */
typedef struct held_pids {
        uint64_t from, to;
        uint64_t bits[256];
        uint64_t folded;
} held_pids;

static int collect_pids(const scan_block *b, const block_entry *v, size_t n, void *userdata) {
        held_pids *h = userdata;

        if (b->start_ns < h->from || b->start_ns >= h->to)
                return 0;
        for (size_t i = 0; i < n; i++) {
                if (v[i].pid == SAMPLE_PID_BRIEF)
                        h->folded += v[i].count;
                else if (v[i].pid < 16384)
                        h->bits[v[i].pid / 64] |= UINT64_C(1) << (v[i].pid % 64);
        }
        return 0;
}

static bool holds(const held_pids *h, uint32_t pid) {
        return h->bits[pid / 64] >> (pid % 64) & 1;
}

/* One second of pid on both CPUs at 8 functions of libc, from the 8 *
 * `set` th: 16 entries. */
static void add_busy_set(store *s, uint64_t sec, uint32_t pid, const char *cgroup, uint32_t set) {
        for (uint32_t k = 0; k < 16; k++) {
                frame f = U_LIBC;

                f.offset = 0x1000 + 0x100 * (set * 8 + k % 8);
                f.addr = 0x7f0000000000ULL + f.offset;
                test_sample smp = {
                        .time_ns = S(sec) + k * 1000, .cpu = k / 8, .pid = pid, .tid = pid, .comm = "cc1",
                        .cgroup = cgroup, .period = 1, .n_frames = 1, .frames = &f,
                };
                ASSERT_OK(test_add_sample(s, 1, &smp));
        }
}

static void add_busy_second(store *s, uint64_t sec, uint32_t pid, const char *cgroup) {
        add_busy_set(s, sec, pid, cgroup, 0);
}

/* Process hours keep the pids of processes seen in three minutes and fold
 * the others; a report of any pid, or of a unit, is what the full levels
 * say. Through a process hour that fills up in its first minute, a
 * restart inside it, and samples that come after it was written. */
TEST(process_hours_fold_brief_processes) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const uint64_t h0 = (T0 / (3600 * NSEC_PER_SEC) + 1) * 3600 * NSEC_PER_SEC;
        const uint64_t hs = (h0 - T0) / NSEC_PER_SEC;       /* the hour's first second after T0 */
        const char *busy = "/system.slice/busy.service", *build = "/system.slice/build.service";
        uint32_t burst = 1000, brief = 5000;
        bool next_written = false;
        char sql[128];
        uint64_t n = 0;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        for (uint64_t sec = hs - 180; sec < hs + 3600 + 300; sec += 2) {
                uint64_t m = sec >= hs ? (sec - hs) / 60 : UINT64_MAX;

                ASSERT_OK(store_begin(s));
                /* pid 500 runs from three minutes before the hour on, at
                 * functions of its own every 2 s (the hour's accumulator
                 * fills with them after about half an hour); pid 600 from
                 * its minute 45 to its end, pid 700 from the next hour's
                 * second minute (seen in its third one on). */
                add_busy_set(s, sec, 500, busy, (uint32_t) (sec - hs + 180) / 2);
                n += 16;
                if (m != UINT64_MAX && ((m >= 45 && m < 60) || m >= 61)) {
                        add_busy_second(s, sec, m < 60 ? 600 : 700, busy);
                        n += 16;
                }
                /* In the first minute of each hour, brief processes of
                 * 16 entries each, 40 every 2 s: more than an accumulator
                 * holds. The first hour's are pids 1000-2199; the next
                 * hour's from 2200 on, until it writes its first block.
                 * Else, up to the first hour's end, one every 2 s (from
                 * 5000). */
                bool first = m == 0 || (m == 60 && !next_written);
                for (int i = 0; i < (first ? 40 : m < 60 ? 1 : 0); i++, n += 16)
                        add_busy_second(s, sec, first ? burst++ : brief++, build);
                /* The next hour's brief processes come back once in its
                 * minutes 62 and 63: those it folded at its first write
                 * stay folded, those after it are seen in three minutes. */
                if (sec == hs + 3600 + 120 || sec == hs + 3600 + 180) {
                        for (uint32_t pid = 2200; pid < burst; pid++, n += 16)
                                add_busy_second(s, sec, pid, build);
                }
                /* Brief in its hour's first minute, back in two later
                 * minutes: pid 1005 after the restart below, pid 2300
                 * in an hour without one. */
                if (m == 50 || m == 51 || m == 62 || m == 63) {
                        add_busy_second(s, sec, m < 60 ? 1005 : 2300, build);
                        n += 16;
                }
                ASSERT_OK(store_flush_samples(s, S(sec) - NSEC_PER_SEC));
                ASSERT_OK(store_commit(s));
                if (m == 60 && !next_written) {
                        snprintf(sql, sizeof sql, "SELECT count(*) FROM sample_blocks WHERE level = 6 AND start_ns = %lld",
                                 (long long) (h0 + 3600 * NSEC_PER_SEC));
                        next_written = sql_int(t.db, sql) > 0;
                }
                if (sec == hs + 2400) {
                        /* A restart inside the hour, which has blocks. */
                        snprintf(sql, sizeof sql, "SELECT count(*) FROM sample_blocks WHERE level = 6 AND start_ns = %lld",
                                 (long long) h0);
                        ASSERT_GT(sql_int(t.db, sql), 0);
                        s = store_free(s);
                        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
                }
        }
        /* Late samples of the hour, written: pid 500 and a brief one. */
        ASSERT_OK(store_begin(s));
        add_busy_second(s, hs + 1800, 500, busy);
        add_busy_second(s, hs + 1800, 1100, build);
        n += 32;
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        ASSERT_OK(store_commit(s));
        ASSERT_EQ(sql_int(t.db, "SELECT sum(n_samples) FROM sample_blocks WHERE level = 0"), (int64_t) n);

        /* The hour and the next are stored, not markers (the three
         * minutes before, pid 500 alone at functions it does not run
         * again, are one), with folded entries. The hour holds pid 500
         * (seen in the hour before, then written when its functions
         * filled the accumulator), and no brief one: 1005 was folded before the
         * restart, 1100 is late. After the restart it kept only the pids
         * its blocks held, so 600 too was folded. The next hour holds 500
         * and 700; it folded 2300 when it first wrote its first minute,
         * and kept it folded when it came back (at its close, no pid is
         * left to fold: the writes fold nothing new). */
        snprintf(sql, sizeof sql, "SELECT count(*) FROM sample_blocks WHERE level = 6 AND start_ns >= %lld AND data = x'00'",
                 (long long) h0);
        ASSERT_EQ(sql_int(t.db, sql), 0);
        held_pids h = { .from = h0, .to = h0 + 3600 * NSEC_PER_SEC };
        ASSERT_OK(sample_scan_level(s, SAMPLE_LEVEL_PROC_HOUR, collect_pids, &h));
        ASSERT_TRUE(holds(&h, 500));
        ASSERT_TRUE(!holds(&h, 600));
        ASSERT_TRUE(!holds(&h, 1005));
        ASSERT_TRUE(!holds(&h, 1100));
        ASSERT_TRUE(!holds(&h, 1500));
        ASSERT_GT(h.folded, 1200 * 16);
        ASSERT_GT(sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 6"), 2);
        held_pids next = { .from = h0 + 3600 * NSEC_PER_SEC, .to = h0 + 7200 * NSEC_PER_SEC };
        ASSERT_OK(sample_scan_level(s, SAMPLE_LEVEL_PROC_HOUR, collect_pids, &next));
        ASSERT_TRUE(holds(&next, 500));
        ASSERT_TRUE(holds(&next, 700));
        ASSERT_TRUE(!holds(&next, 2300));
        ASSERT_TRUE(!holds(&next, 2250));
        ASSERT_GT(next.folded, 0);

        const int64_t pids[] = { 500, 600, 700, 1005, 2300, 1100, 1000, 1500, 1234567 };
        for (size_t i = 0; i < ELEMENTSOF(pids) + 2; i++) {
                query_params q = { .since_ns = i % 2 ? h0 - 1 : 0, .pid = -1, .cpu = -1 };

                if (i < ELEMENTSOF(pids))
                        q.pid = pids[i];
                else if (i == ELEMENTSOF(pids))
                        q.unit = "build.service";
                else
                        q.by_cgroup = q.no_comm = true;
                query_result *r = run_query(s, &q, 0, 0);
                q.want_stacks = true;
                query_result *full = run_query(s, &q, 0, 0);

                assert_same_rows(r, full);
                if (i < 8)
                        ASSERT_GT(r->total_samples, 0);
                query_result_free(r);
                query_result_free(full);
        }
}

/* Whether any block of level 6 of the hour at h0 says it folded pid
 * (sample_blocks.folded_pids). */
static bool hour_folded(const char *path, uint64_t h0, uint32_t pid) {
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        bool any = false;

        ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT folded_pids FROM sample_blocks WHERE level = 6 AND start_ns = ?1 "
                                         "AND folded_pids IS NOT NULL", -1, &st, NULL), SQLITE_OK);
        sqlite3_bind_int64(st, 1, (int64_t) h0);
        while (sqlite3_step(st) == SQLITE_ROW) {
                bool has = false;

                ASSERT_OK(pid_set_has(NULL, sqlite3_column_blob(st, 0), (size_t) sqlite3_column_bytes(st, 0), pid, &has));
                any = any || has;
        }
        sqlite3_finalize(st);
        sqlite3_close(db);
        return any;
}

static int query_pid(store *s, int64_t pid, uint64_t *ret_samples) {
        query_params q = { .pid = pid, .cpu = -1 };
        query_result *r = NULL;
        int ret = store_query(s, &q, 0, 0, &r);

        *ret_samples = r ? r->total_samples : 0;
        query_result_free(r);
        return ret;
}

/* A process hour's blocks say which pids they folded, so that a report
 * of a pid the hour neither holds nor folded does not read its minutes,
 * and one of a pid it folded does. Shown with the hour's process minutes
 * damaged: only a report that reads them fails. Blocks that do not say
 * (NULL, as schema 12 wrote them, and a file of schema 12 migrated)
 * send every pid to the minutes. */
TEST(process_hours_say_which_pids_they_folded) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const uint64_t H = 3600 * NSEC_PER_SEC, h0 = (T0 / H + 1) * H;
        const uint64_t hs = (h0 - T0) / NSEC_PER_SEC;
        const char *busy = "/system.slice/busy.service", *build = "/system.slice/build.service";
        uint32_t brief = 1000, next = 0;       /* the next hour's first */
        uint64_t got;
        char sql[200];

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        /* Pid 500 all through the hour and into the next; a brief
         * process every 2 s, each in one minute (the next hour's minutes
         * of them sum nothing: markers, written after the hour). */
        for (uint64_t sec = hs; sec < hs + 3600 + 120; sec += 2) {
                ASSERT_OK(store_begin(s));
                add_busy_second(s, sec, 500, busy);
                if (sec == hs + 3600)
                        next = brief;
                add_busy_second(s, sec, brief++, build);
                ASSERT_OK(store_flush_samples(s, S(sec) - NSEC_PER_SEC));
                ASSERT_OK(store_commit(s));
        }
        /* A brief process late to the written hour. */
        ASSERT_OK(store_begin(s));
        add_busy_second(s, hs + 1800, 7777, build);
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        ASSERT_OK(store_commit(s));

        snprintf(sql, sizeof sql, "SELECT count(*) FROM sample_blocks WHERE level = 6 AND start_ns = %lld "
                 "AND folded_pids IS NOT NULL", (long long) h0);
        ASSERT_GE(sql_int(t.db, sql), 2);       /* the hour's, and the late block's */
        for (uint32_t pid = 1000; pid < next; pid++)
                ASSERT_TRUE(hour_folded(t.db, h0, pid));
        ASSERT_TRUE(hour_folded(t.db, h0, 7777));
        /* Markers and blocks of other levels say nothing. */
        snprintf(sql, sizeof sql, "SELECT count(*) FROM sample_blocks WHERE data = x'00' AND start_ns >= %lld",
                 (long long) (h0 + H));
        ASSERT_GT(sql_int(t.db, sql), 0);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE folded_pids IS NOT NULL AND "
                                "(level != 6 OR data = x'00')"), 0);
        ASSERT_TRUE(!hour_folded(t.db, h0, 500));
        ASSERT_TRUE(!hour_folded(t.db, h0, 999));
        ASSERT_TRUE(!hour_folded(t.db, h0, next));
        ASSERT_OK(query_pid(s, 1010, &got));
        ASSERT_U64_EQ(got, 16);

        snprintf(sql, sizeof sql, "UPDATE sample_blocks SET data = x'01ffffffff0f' WHERE level = 5 AND "
                 "start_ns >= %lld AND start_ns < %lld", (long long) h0, (long long) (h0 + H));
        ASSERT_GE(sql_exec(t.db, sql), 60);    /* and the late block */
        /* Neither held nor folded: the hour says so. */
        ASSERT_OK(query_pid(s, 4242, &got));
        ASSERT_U64_EQ(got, 0);
        /* Held: the hour answers (and the next hour's two minutes). */
        ASSERT_OK(query_pid(s, 500, &got));
        ASSERT_U64_EQ(got, 16 * 1860);
        /* Folded, as it came or late: the minutes are read. */
        ASSERT_ERROR(query_pid(s, 1010, &got), EBADMSG);
        ASSERT_ERROR(query_pid(s, 7777, &got), EBADMSG);

        snprintf(sql, sizeof sql, "UPDATE sample_blocks SET folded_pids = NULL WHERE level = 6 AND start_ns = %lld",
                 (long long) h0);
        ASSERT_GE(sql_exec(t.db, sql), 2);
        ASSERT_ERROR(query_pid(s, 4242, &got), EBADMSG);
        ASSERT_OK(query_pid(s, 500, &got));

        /* A file of schema 12 (no column) gets it, NULL everywhere, and
         * reads as one whose blocks do not say. */
        s = store_free(s);
        ASSERT_EQ(sql_exec(t.db, "ALTER TABLE sample_blocks DROP COLUMN folded_pids; PRAGMA user_version = 12;"), 0);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_EQ(sql_int(t.db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE folded_pids IS NOT NULL"), 0);
        ASSERT_ERROR(query_pid(s, 4242, &got), EBADMSG);
        ASSERT_OK(query_pid(s, 500, &got));
        ASSERT_U64_EQ(got, 16 * 1860);
}

static uint64_t xorshift(uint64_t *state) {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        return *state;
}

/* Three hours of a pid that runs on and 0-4 new ones every 2 s, old pids
 * coming back, samples late to earlier hours, a rollback one batch in
 * 300, a restart one in 500 and stack generations of 256 KiB: for every
 * late pid, pid 500 and every 61st other, a report of the pid from the
 * process levels (with the hours' sets of folded pids) counts what the
 * buckets count. */
TEST(process_hours_fold_under_random_load) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const uint64_t H = 3600 * NSEC_PER_SEC, h0 = (T0 / H + 1) * H;
        const uint64_t hs = (h0 - T0) / NSEC_PER_SEC, dict_limit = 256 << 10;
        const char *busy = "/system.slice/busy.service", *build = "/system.slice/build.service";
        uint32_t late[1024], ring[4096], next = 1000;
        size_t n_late = 0, n_ring = 0;
        uint64_t seed = 88172645463325252ULL;
        unsigned restarts = 0, rollbacks = 0;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        store_set_dictionary_limit(s, dict_limit);
        for (uint64_t sec = hs - 120; sec < hs + 3 * 3600; sec += 2) {
                bool rollback = xorshift(&seed) % 300 == 0;
                unsigned k = (unsigned) (xorshift(&seed) % 5);

                ASSERT_OK(store_begin(s));
                add_busy_set(s, sec, 500, busy, (uint32_t) (sec / 2) % 40);
                for (unsigned i = 0; i < k; i++, next++) {
                        add_busy_set(s, sec, next, build, (uint32_t) (xorshift(&seed) % 4));
                        if (!rollback)
                                ring[n_ring++ % ELEMENTSOF(ring)] = next;
                }
                /* Old pids come back now and then, recent or not. */
                for (unsigned i = 0; n_ring > 0 && i < 3; i++)
                        if (xorshift(&seed) % 4 == 0) {
                                size_t span = MIN(n_ring, (size_t) (xorshift(&seed) % 2 ? 64 : ELEMENTSOF(ring)));
                                uint32_t pid = ring[(n_ring - 1 - xorshift(&seed) % span) % ELEMENTSOF(ring)];

                                add_busy_set(s, sec, pid, build, (uint32_t) (xorshift(&seed) % 4));
                        }
                /* A sample late to an earlier hour: of pid 500, of an old
                 * pid or of a new one. */
                if (sec > hs + 3600 && xorshift(&seed) % 150 == 0 && n_late < ELEMENTSOF(late)) {
                        uint64_t span = (S(sec) / H * H - h0) / NSEC_PER_SEC;
                        uint64_t at = hs + xorshift(&seed) % span;
                        uint64_t x = xorshift(&seed) % 3;
                        uint32_t pid = x == 0 ? 500 : x == 1 ? ring[(n_ring - 1 - xorshift(&seed) % MIN(n_ring, ELEMENTSOF(ring))) %
                                                                     ELEMENTSOF(ring)]
                                                             : next++;

                        add_busy_set(s, at, pid, build, (uint32_t) (xorshift(&seed) % 4));
                        late[n_late++] = pid;
                }
                ASSERT_OK(store_flush_samples(s, S(sec) - NSEC_PER_SEC));
                if (rollback) {
                        ASSERT_OK(store_rollback(s));
                        rollbacks++;
                } else
                        ASSERT_OK(store_commit(s));
                if (xorshift(&seed) % 500 == 0) {
                        s = store_free(s);
                        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
                        store_set_dictionary_limit(s, dict_limit);
                        restarts++;
                }
        }
        ASSERT_OK(store_begin(s));
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        ASSERT_OK(store_commit(s));
        fprintf(stderr, "pids 1000-%u, %u restarts, %u rollbacks, %zu late samples, %lld process-hour blocks "
                "(%lld with sets), %" PRIu64 " stack generations\n", next - 1, restarts, rollbacks, n_late,
                (long long) sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 6"),
                (long long) sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 6 AND folded_pids IS NOT NULL"),
                store_generation(s));
        ASSERT_GT(restarts, 0u);
        ASSERT_GT(rollbacks, 0u);
        ASSERT_GT(n_late, 10u);
        ASSERT_GT(sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 6 AND folded_pids IS NOT NULL"), 3);

        unsigned differ = 0, checked = 0;
        for (size_t j = 0; j < n_late + 1 + (next - 1000) / 61; j++, checked++) {
                uint32_t pid = j < n_late ? late[j] : j == n_late ? 500 : 1000 + (uint32_t) (j - n_late - 1) * 61;
                query_params q = { .pid = pid, .cpu = -1 };
                query_result *r = run_query(s, &q, 0, 0);

                q.want_stacks = true;
                query_result *full = run_query(s, &q, 0, 0);
                if (r->total_samples != full->total_samples) {
                        fprintf(stderr, "pid %" PRIu32 ": %" PRIu64 " samples, the buckets say %" PRIu64 "\n", pid,
                                r->total_samples, full->total_samples);
                        differ++;
                }
                query_result_free(r);
                query_result_free(full);
        }
        fprintf(stderr, "%u pids checked\n", checked);
        ASSERT_EQ(differ, 0u);
}

/* One sample of pid at each of 16 functions of libc, from the 16 * leaves
 * that `set` numbers. */
static void add_leaves(store *s, uint64_t t, uint32_t pid, uint32_t set) {
        for (uint32_t k = 0; k < 16; k++) {
                frame f = U_LIBC;

                f.offset = 0x1000 + 0x10 * (set * 16 + k);
                f.addr = 0x7f0000000000ULL + f.offset;
                test_sample smp = {
                        .time_ns = t + k * 1000, .cpu = 0, .pid = pid, .tid = pid, .comm = "cc1",
                        .cgroup = "/system.slice/build.service", .period = 1, .n_frames = 1, .frames = &f,
                };
                ASSERT_OK(test_add_sample(s, 1, &smp));
        }
}

/* A minute's accumulator starts as large as the last minute's ended (not
 * from its smallest size, re-hashing its entries at every doubling). */
TEST(a_period_starts_as_large_as_the_last_ended) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const uint64_t m0 = (T0 / (60 * NSEC_PER_SEC) + 1) * 60 * NSEC_PER_SEC;
        const acc *a;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        /* 5,120 functions, each twice: the minute sums well and is kept. */
        for (uint32_t i = 0; i < 640; i++) {
                uint64_t ts = m0 + (uint64_t) i * 50 * NSEC_PER_MSEC;

                ASSERT_OK(store_begin(s));
                add_leaves(s, ts, 1000, i % 320);
                ASSERT_OK(store_flush_samples(s, ts - NSEC_PER_SEC));
                ASSERT_OK(store_commit(s));
        }
        a = &s->samples->acc[SAMPLE_LEVEL_LEAF_MINUTE];
        ASSERT_TRUE(a->open && !a->delegated);
        ASSERT_U64_EQ(a->n, 5120);

        /* A second of the next minute closes it and opens the next. */
        ASSERT_OK(store_begin(s));
        add_leaves(s, m0 + 60 * NSEC_PER_SEC, 1000, 0);
        ASSERT_OK(store_flush_samples(s, m0 + 62 * NSEC_PER_SEC));
        ASSERT_OK(store_commit(s));
        ASSERT_TRUE(a->open && a->start_ns == m0 + 60 * NSEC_PER_SEC);
        ASSERT_U64_EQ(a->closed_n, 5120);
        ASSERT_U64_EQ(a->n, 16);
        ASSERT_U64_EQ(a->capacity, 16384);
        /* and as many entries, without a copy on the way */
        ASSERT_U64_EQ(a->alloc, 8192);
}

/* Brief processes fold into an entry a CPU, so an hour of them sums well
 * even when its first minute alone fills an accumulator; an hour of kept
 * processes that sum nothing is a marker, with the hour's totals. */
TEST(process_hours_sum_by_folding) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const uint64_t h0 = (T0 / (3600 * NSEC_PER_SEC) + 1) * 3600 * NSEC_PER_SEC;
        char sql[160];

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        /* 1,100 processes of 16 functions each a minute. The first
         * hour's first minute runs brief ones (pids 10000-11099) on 17,600
         * functions (set i), more than an accumulator holds; its second
         * and third minutes pids 12000-13099 on the 16 of set 0. Those go
         * on in the next hour's first two minutes, on functions of their
         * own each minute: kept from the start, they sum nothing. */
        for (uint64_t hour = 0; hour < 2; hour++) {
                for (uint64_t m = 0; m < 3 - hour; m++) {
                        uint64_t start = h0 + hour * 3600 * NSEC_PER_SEC + m * 60 * NSEC_PER_SEC;

                        for (uint32_t i = 0; i < 1100; i++) {
                                uint64_t ts = start + (uint64_t) i * 50 * NSEC_PER_MSEC;

                                ASSERT_OK(store_begin(s));
                                add_leaves(s, ts, (hour == 0 && m == 0 ? 10000 : 12000) + i,
                                           hour == 1 ? (uint32_t) ((m + 1) * 1100 + i) : m == 0 ? i : 0);
                                ASSERT_OK(store_flush_samples(s, ts - NSEC_PER_SEC));
                                ASSERT_OK(store_commit(s));
                        }
                }
        }
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));

        snprintf(sql, sizeof sql, "SELECT count(*) FROM sample_blocks WHERE level = 6 AND start_ns = %lld AND data = x'00'",
                 (long long) h0);
        ASSERT_EQ(sql_int(t.db, sql), 0);
        snprintf(sql, sizeof sql, "SELECT sum(n_samples) FROM sample_blocks WHERE level = 6 AND start_ns = %lld",
                 (long long) h0);
        ASSERT_EQ(sql_int(t.db, sql), 3 * 1100 * 16);
        /* Seen in two minutes of it, pids 12000-13099 are folded there. */
        held_pids h = { .from = h0, .to = h0 + 3600 * NSEC_PER_SEC };
        ASSERT_OK(sample_scan_level(s, SAMPLE_LEVEL_PROC_HOUR, collect_pids, &h));
        ASSERT_TRUE(!holds(&h, 12000) && !holds(&h, 13099));
        ASSERT_U64_EQ(h.folded, 3 * 1100 * 16);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM sample_blocks WHERE level = 6 AND start_ns = %lld",
                 (long long) (h0 + 3600 * NSEC_PER_SEC));
        ASSERT_EQ(sql_int(t.db, sql), 1);
        snprintf(sql, sizeof sql, "SELECT sum(n_samples) FROM sample_blocks WHERE level = 6 AND start_ns = %lld AND data = x'00'",
                 (long long) (h0 + 3600 * NSEC_PER_SEC));
        ASSERT_EQ(sql_int(t.db, sql), 2 * 1100 * 16);
        for (int64_t pid = 10000; pid < 13100; pid += 337) {
                query_params q = { .pid = pid, .cpu = -1 };
                query_result *r = run_query(s, &q, 0, 0);

                q.want_stacks = true;
                query_result *full = run_query(s, &q, 0, 0);
                assert_same_rows(r, full);
                query_result_free(r);
                query_result_free(full);
        }
        query_params u = { .pid = -1, .cpu = -1, .unit = "build.service" };
        query_result *r = run_query(s, &u, 0, 0);
        ASSERT_U64_EQ(r->total_samples, 5 * 1100 * 16);
        query_result_free(r);
}

static int count_entries(const scan_block *b, const block_entry *v, size_t n, void *userdata) {
        uint64_t *c = userdata;

        (void) b;
        c[0] += n;
        for (size_t i = 0; i < n; i++)
                c[1] += v[i].count;
        return 0;
}

/* Entries a scan passed on, by the level of their block. */
static int count_by_level(const scan_block *b, const block_entry *v, size_t n, void *userdata) {
        uint64_t *c = userdata;

        c[b->level] += n;
        return 0;
}

/* A leaf hour holds more functions than an accumulator of a minute: an
 * hour whose minutes run 8,000 functions each, 24,000 in all, is stored
 * whole, in blocks of at most 16,384 entries, not left to its minutes,
 * though a bucket of 16,384 processes comes on top (all in one function
 * it has). One of 44,000 outgrows its accumulator and is left to its
 * minutes, though it would sum to 6/10 of them then. */
TEST(leaf_hours_hold_more_functions_than_a_minute) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const uint64_t h0 = (T0 / (3600 * NSEC_PER_SEC) + 1) * 3600 * NSEC_PER_SEC, h1 = h0 + 3600 * NSEC_PER_SEC;
        uint64_t hour[2] = {}, minutes[2] = {};
        char sql[240];

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        /* In the first hour minute m runs sets (m % 3) * 500 to that + 499
         * twice each: three disjoint sets of 8,000 functions, 80,000
         * minute entries over ten minutes. In the second, sets 0-249 and
         * 250 of its own (1000 + m * 250 on): 4,000 more functions a
         * minute, 32,000 after seven minutes, over 56,000 minute entries. */
        for (uint64_t h = 0; h < 2; h++) {
                for (uint64_t m = 0; m < 10; m++)
                        for (uint32_t i = 0; i < 1000; i++) {
                                uint64_t ts = h0 + h * 3600 * NSEC_PER_SEC + m * 60 * NSEC_PER_SEC +
                                              (uint64_t) i * 50 * NSEC_PER_MSEC;

                                ASSERT_OK(store_begin(s));
                                uint32_t j = i % 500;

                                add_leaves(s, ts, 1000 + (uint32_t) m,
                                           h == 0 ? (uint32_t) (m % 3) * 500 + j : j < 250 ? j : 1000 + (uint32_t) m * 250 + j - 250);
                                ASSERT_OK(store_flush_samples(s, ts - NSEC_PER_SEC));
                                ASSERT_OK(store_commit(s));
                        }
                if (h > 0) {
                        /* A marker holds no entries: its arrays are given
                         * back (2.6 MB at 32,768 entries). */
                        const acc *a = &s->samples->acc[SAMPLE_LEVEL_LEAF_HOUR];

                        ASSERT_TRUE(a->open && a->delegated);
                        ASSERT_U64_EQ(a->alloc + a->capacity, 0);
                        continue;
                }
                /* Minute 10: one second of 16,384 processes at the first
                 * function of set 0, a block of 16,384 entries. */
                ASSERT_OK(store_begin(s));
                for (uint32_t p = 0; p < 16384; p++) {
                        frame f = U_LIBC;

                        f.offset = 0x1000;
                        f.addr = 0x7f0000000000ULL + f.offset;
                        test_sample smp = {
                                .time_ns = h0 + 600 * NSEC_PER_SEC + p * 1000, .cpu = 0, .pid = 20000 + p,
                                .tid = 20000 + p, .comm = "cc1", .cgroup = "/system.slice/build.service", .period = 1,
                                .n_frames = 1, .frames = &f,
                        };
                        ASSERT_OK(test_add_sample(s, 1, &smp));
                }
                ASSERT_OK(store_commit(s));
        }
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        /* Closed periods give their arrays back, but for the buckets'. */
        for (unsigned level = SAMPLE_LEVEL_BUCKET + 1; level < SAMPLE_LEVELS; level++)
                ASSERT_U64_EQ(s->samples->acc[level].alloc + s->samples->acc[level].capacity, 0);

        snprintf(sql, sizeof sql,
                 "SELECT count(*) * 100000 + sum(n_samples) FROM sample_blocks WHERE level = 0 AND start_ns = %lld",
                 (long long) (h0 + 600 * NSEC_PER_SEC));
        ASSERT_EQ(sql_int(t.db, sql), 1 * 100000 + 16384);
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM sample_blocks WHERE level = 4 AND start_ns = %lld AND data = x'00'", (long long) h0);
        ASSERT_EQ(sql_int(t.db, sql), 0);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM sample_blocks WHERE level = 4 AND start_ns = %lld", (long long) h0);
        ASSERT_EQ(sql_int(t.db, sql), 2);
        snprintf(sql, sizeof sql, "SELECT sum(n_samples) FROM sample_blocks WHERE level = 4 AND start_ns = %lld",
                 (long long) h0);
        ASSERT_EQ(sql_int(t.db, sql), 10 * 1000 * 16 + 16384);
        /* The second hour: one marker with its totals. */
        snprintf(sql, sizeof sql,
                 "SELECT count(*) * 1000000 + sum(data = x'00') * 100000 + sum(n_samples) FROM sample_blocks "
                 "WHERE level = 4 AND start_ns = %lld", (long long) h1);
        ASSERT_EQ(sql_int(t.db, sql), 1 * 1000000 + 1 * 100000 + 10 * 1000 * 16);
        ASSERT_OK(sample_scan_level(s, SAMPLE_LEVEL_LEAF_HOUR, count_entries, hour));
        ASSERT_OK(sample_scan_level(s, SAMPLE_LEVEL_LEAF_MINUTE, count_entries, minutes));
        ASSERT_U64_EQ(hour[0], 3 * 500 * 16);
        ASSERT_U64_EQ(hour[1], 10 * 1000 * 16 + 16384);
        ASSERT_U64_EQ(minutes[0], 2 * 10 * 500 * 16 + 1);

        /* The report of functions (leaf levels) is the full levels', for
         * each hour and both. */
        for (int k = 0; k < 3; k++) {
                query_params q = {
                        .pid = -1, .cpu = -1,
                        .since_ns = k == 1 ? h1 : h0, .until_ns = k == 0 ? h1 : h1 + 3600 * NSEC_PER_SEC,
                };
                query_result *r = run_query(s, &q, 0, 0);

                q.want_stacks = true;
                query_result *full = run_query(s, &q, 0, 0);
                ASSERT_EQ(r->n_rows, k == 0 ? 24000 : k == 1 ? 44000 : 56000);
                assert_same_rows(r, full);
                query_result_free(r);
                query_result_free(full);
        }

        /* A report of functions reads the marker's hour from its minutes
         * until its hour by cgroup is built, then from that (44,000
         * entries where the minutes have 80,000), and answers alike; and
         * from the minutes again once the hour by cgroup counts fewer
         * samples than the marker (as when its builder left out a block
         * it could not decode): here one of its blocks is deleted. */
        for (int stage = 0; stage < 3; stage++) {
                uint64_t by_level[SAMPLE_LEVELS] = {};
                query_params q = { .pid = -1, .cpu = -1, .since_ns = h1, .until_ns = h1 + 3600 * NSEC_PER_SEC };
                bool built = stage == 1;

                if (stage == 2) {
                        snprintf(sql, sizeof sql, "DELETE FROM sample_blocks WHERE id = (SELECT max(id) FROM "
                                 "sample_blocks WHERE level = 7 AND start_ns = %lld)", (long long) h1);
                        ASSERT_EQ(sql_exec(t.db, sql), 1);
                }
                if (built) {
                        build_all(s);
                        snprintf(sql, sizeof sql,
                                 "SELECT sum(data = x'00') FROM sample_blocks WHERE level = 7 AND start_ns = %lld",
                                 (long long) h1);
                        ASSERT_EQ(sql_int(t.db, sql), 0);
                }
                ASSERT_OK(sample_scan_some(s, h1, h1 + 3600 * NSEC_PER_SEC, SAMPLE_LEVEL_LEAF_HOUR, -1,
                                           SAMPLE_NEED_ALL, count_by_level, by_level));
                fprintf(stderr, "hour 2, %s: %" PRIu64 " leaf minute entries, %" PRIu64 " of the hour by cgroup\n",
                        stage == 0 ? "not built" : stage == 1 ? "built" : "a block short", by_level[SAMPLE_LEVEL_LEAF_MINUTE],
                        by_level[SAMPLE_LEVEL_CGROUP_HOUR]);
                ASSERT_U64_EQ(by_level[SAMPLE_LEVEL_LEAF_MINUTE], built ? 0 : 10 * 500 * 16);
                ASSERT_U64_EQ(by_level[SAMPLE_LEVEL_CGROUP_HOUR], built ? (250 + 10 * 250) * 16 : 0);
                /* Not for one pid: the hours by cgroup have none. */
                ASSERT_OK(sample_scan_some(s, h1, h1 + 3600 * NSEC_PER_SEC, SAMPLE_LEVEL_LEAF_HOUR, 1001,
                                           SAMPLE_NEED_ALL, count_by_level, by_level));
                ASSERT_U64_EQ(by_level[SAMPLE_LEVEL_CGROUP_HOUR], built ? (250 + 10 * 250) * 16 : 0);

                query_result *r = run_query(s, &q, 0, 0);
                q.want_stacks = true;
                query_result *full = run_query(s, &q, 0, 0);
                ASSERT_EQ(r->n_rows, 44000);
                assert_same_rows(r, full);
                query_result_free(r);
                query_result_free(full);
        }
}

/* A process seen in two minutes of an hour may be one of a few seconds
 * that crossed the start of a minute: folded. Three minutes keep it. */
TEST(process_hours_keep_processes_of_three_minutes) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const uint64_t hs = (T0 / (3600 * NSEC_PER_SEC) + 1) * 3600 - T0 / NSEC_PER_SEC;
        /* Minutes 0-4, 1-2, 1-3: a sample every 10 s of each. */
        const struct { uint32_t pid, first, last; } procs[] = { { 700, 0, 4 }, { 800, 1, 2 }, { 900, 1, 3 } };

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        for (uint64_t sec = hs; sec < hs + 300; sec += 10) {
                ASSERT_OK(store_begin(s));
                for (size_t i = 0; i < ELEMENTSOF(procs); i++)
                        if ((sec - hs) / 60 >= procs[i].first && (sec - hs) / 60 <= procs[i].last)
                                add_busy_second(s, sec, procs[i].pid, "/system.slice/x.service");
                ASSERT_OK(store_flush_samples(s, S(sec) - NSEC_PER_SEC));
                ASSERT_OK(store_commit(s));
        }
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));

        held_pids h = { .from = S(hs), .to = S(hs + 3600) };
        ASSERT_OK(sample_scan_level(s, SAMPLE_LEVEL_PROC_HOUR, collect_pids, &h));
        ASSERT_TRUE(holds(&h, 700) && holds(&h, 900) && !holds(&h, 800));
        ASSERT_U64_EQ(h.folded, 12 * 16);
        for (size_t i = 0; i < ELEMENTSOF(procs); i++) {
                query_params q = { .pid = procs[i].pid, .cpu = -1 };
                query_result *r = run_query(s, &q, 0, 0);

                ASSERT_U64_EQ(r->total_samples, (procs[i].last - procs[i].first + 1) * 6 * 16);
                query_result_free(r);
        }
}

/* A second of n samples of `kind` (see the test below), each of its own
 * process: new ones from *next_pid on ('C', 'B' bursts), the same 200
 * every second ('S', 'B' after its burst: pids 100-299), or 1,500 a
 * second of 5,000 that come back ('W': pids 20000-24999). Returns n. */
static uint32_t add_minute_second(store *s, uint64_t sec, char kind, bool burst, uint32_t *next_pid) {
        uint32_t n = kind == 'C' ? 300 : kind == 'W' ? 1500 : burst ? 1000 : 200;

        for (uint32_t k = 0; k < n; k++) {
                test_sample smp = {
                        .time_ns = S(sec) + k * 1000, .cpu = k % 2, .comm = "cc1", .period = 1, .n_frames = 1,
                        .frames = &U_LIBC,
                };

                smp.pid = kind == 'W' ? 20000 + (uint32_t) ((sec * 1500 + k) % 5000) : burst ? (*next_pid)++ : 100 + k;
                smp.tid = smp.pid;
                ASSERT_OK(test_add_sample(s, 1, &smp));
        }
        return n;
}

/* A minute that sums too little (as many entries as its buckets) is a
 * marker. After one found so in full, the next minute of the levels made
 * from the buckets is tested from EARLY_DELEGATE_ENTRIES entries on:
 * 'B', five seconds of new processes then 55 of 200 again and again, is
 * a marker then, though it would have summed well; 'S' (steady) is kept,
 * and 'B' after it too. 'W', a busy load of keys that come back, looks
 * like churn in its first seconds: after a churning minute it is a
 * marker, but the next is tested in full and kept. The answers are the
 * buckets' in every case. */
TEST(a_minute_after_a_churning_one_is_left_to_the_buckets_early) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const uint64_t m0 = (T0 / (60 * NSEC_PER_SEC) + 1) * 60 - T0 / NSEC_PER_SEC;
        const char *kinds = "CBSBCWW", *markers = "MM..MM.";
        const unsigned minutes = (unsigned) strlen(kinds);
        uint64_t n = 0, of_100[8] = {};
        uint32_t pid = 100000;
        char sql[160];

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        for (uint64_t sec = m0; sec < m0 + 60 * minutes; sec++) {
                unsigned m = (unsigned) ((sec - m0) / 60);
                char kind = kinds[m];
                bool burst = kind == 'C' || (kind == 'B' && (sec - m0) % 60 < 5);

                ASSERT_OK(store_begin(s));
                n += add_minute_second(s, sec, kind, burst, &pid);
                of_100[m] += !burst && kind != 'W';
                ASSERT_OK(store_flush_samples(s, S(sec) - NSEC_PER_SEC));
                ASSERT_OK(store_commit(s));
        }
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));

        for (unsigned level = SAMPLE_LEVEL_MINUTE; level <= SAMPLE_LEVEL_PROC_MINUTE; level += 4)
                for (unsigned m = 0; m < minutes; m++) {
                        bool want = markers[m] == 'M';

                        snprintf(sql, sizeof sql,
                                 "SELECT count(*) FROM sample_blocks WHERE level = %u AND start_ns = %llu AND data = x'00'",
                                 level, (unsigned long long) S(m0 + 60 * m));
                        if (sql_int(t.db, sql) != want) {
                                fprintf(stderr, "level %u, minute %u (%c): %s\n", level, m, kinds[m],
                                        want ? "not a marker" : "a marker");
                                ASSERT_EQ(sql_int(t.db, sql), (int64_t) want);
                        }
                }
        for (int level = 0; level <= SAMPLE_LEVEL_PROC_MINUTE; level++) {
                snprintf(sql, sizeof sql, "SELECT sum(n_samples) FROM sample_blocks WHERE level = %d", level);
                ASSERT_EQ(sql_int(t.db, sql), (int64_t) n);
        }
        for (unsigned m = 0; m < minutes; m++) {
                query_params q = { .since_ns = S(m0 + 60 * m), .until_ns = S(m0 + 60 * (m + 1)), .cpu = -1, .pid = 100 };
                query_result *r = run_query(s, &q, 0, 0);

                ASSERT_U64_EQ(r->total_samples, of_100[m]);
                query_result_free(r);
        }
}

/* A sample of an hour with no block yet, after the next hour opened:
 * late to a process hour that holds no pid, it is folded, and its report
 * reads that hour's minutes. Over many late buckets the hour's pids are
 * read once (a report of the review of e778a83: 600 late buckets took
 * 10 s when each read all the blocks before it). */
TEST(late_samples_of_a_process_hour) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const uint64_t hs = (T0 / (3600 * NSEC_PER_SEC) + 1) * 3600 - T0 / NSEC_PER_SEC;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_OK(store_begin(s));
        add_busy_second(s, hs + 1, 42, "/system.slice/a.service");
        add_busy_second(s, hs - 1, 43, "/system.slice/b.service");
        ASSERT_OK(store_flush_samples(s, S(hs + 2)));
        ASSERT_OK(store_commit(s));
        /* 200 late buckets of pids 42 and 43 into the hour before, one a
         * batch. */
        for (uint64_t k = 0; k < 200; k++) {
                ASSERT_OK(store_begin(s));
                add_busy_second(s, hs - 3599 + k, k % 2 ? 42 : 43, "/system.slice/a.service");
                ASSERT_OK(store_flush_samples(s, S(hs + 3)));
                ASSERT_OK(store_commit(s));
        }
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        ASSERT_GT(sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 6"), 100);
        const int64_t pids[] = { 42, 43 };
        for (size_t i = 0; i < 2 * ELEMENTSOF(pids); i++) {
                query_params q = { .since_ns = i < 2 ? S(hs - 3600) : 0, .pid = pids[i % 2], .cpu = -1 };
                query_result *r = run_query(s, &q, 0, 0);

                q.want_stacks = true;
                query_result *full = run_query(s, &q, 0, 0);
                assert_same_rows(r, full);
                ASSERT_U64_EQ(r->total_samples, 101 * 16);
                query_result_free(r);
                query_result_free(full);
        }
}

/* A schema-8 database has no process levels: migration makes them from
 * its minutes and hours, the answers stay, and the open periods go on. */
TEST(migration_from_schema_8_builds_process_levels) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        query_params windows[] = {
                { .pid = 107, .cpu = -1 },
                { .since_ns = S(3600) + 1, .until_ns = S(7300), .pid = 120, .cpu = -1 },
                { .since_ns = S(100), .pid = -1, .cpu = 1, .unit = "session-*.scope" },
                { .pid = -1, .cpu = -1, .by_cgroup = true, .no_comm = true },
        };
        query_result *before[ELEMENTSOF(windows)];
        uint64_t n;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        write_processes(s, &n);
        for (size_t i = 0; i < ELEMENTSOF(windows); i++) {
                before[i] = run_query(s, windows + i, 0, 0);
                ASSERT_GT(before[i]->total_samples, 0);
        }
        s = store_free(s);

        make_schema(t.db, 8);

        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        assert_levels_from_minutes(t.db, SAMPLE_LEVEL_PROC_MINUTE);
        for (int k = 5; k <= 6; k++) {
                char want[96], got[96];

                snprintf(want, sizeof want, "SELECT value FROM sample_meta WHERE key = 'complete%d'", k - 4);
                snprintf(got, sizeof got, "SELECT value FROM sample_meta WHERE key = 'complete%d'", k);
                ASSERT_EQ(sql_int(t.db, got), sql_int(t.db, want));
                ASSERT_GT(sql_int(t.db, got), 0);
                snprintf(want, sizeof want, "SELECT value FROM sample_meta WHERE key = 'fed%d'", k - 4);
                snprintf(got, sizeof got, "SELECT value FROM sample_meta WHERE key = 'fed%d'", k);
                ASSERT_EQ(sql_int(t.db, got), sql_int(t.db, want));
        }
        /* The minutes name stacks; the process minutes name frames, and
         * keep the pid. */
        uint64_t counts[3] = {};
        ASSERT_OK(sample_scan_level(s, SAMPLE_LEVEL_PROC_MINUTE, count_leaf_entries, counts));
        ASSERT_GT(counts[0], 0);
        ASSERT_U64_EQ(counts[1], 0);
        ASSERT_U64_EQ(counts[2], counts[0]);
        check_migrated(s, t.db, windows, before, ELEMENTSOF(windows), n);
}

/* A minute or an hour that cannot be decoded is a marker of the levels
 * migration makes from it, whichever of the period's blocks it was: the
 * reports read the buckets (or the minutes) for it, with nothing counted
 * twice. */
TEST(migration_marks_a_damaged_period) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame a[] = { K_MEMCPY_10, K_ENTRY };
        const uint64_t min = 60 * NSEC_PER_SEC, hr = 3600 * NSEC_PER_SEC;
        const uint64_t m1 = (S(0) / min + 10) * min, m2 = m1 + 5 * min, h = (S(0) / hr + 1) * hr;
        query_params windows[] = {
                { .since_ns = m1, .until_ns = m1 + min, .pid = -1, .cpu = -1, .unit = "*" },
                { .since_ns = m2, .until_ns = m2 + min, .pid = -1, .cpu = -1, .by_cgroup = true, .no_comm = true },
                { .since_ns = h, .until_ns = h + hr, .pid = 107, .cpu = -1 },
                { .pid = -1, .cpu = -1, .unit = "*" },
        };
        query_result *before[ELEMENTSOF(windows)];
        char sql[1024];
        uint64_t n;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        write_processes(s, &n);
        /* A late sample in each minute: a second block of it. */
        ASSERT_OK(store_begin(s));
        for (uint64_t m = m1; m <= m2; m += m2 - m1) {
                test_sample smp = {
                        .time_ns = m + 30 * NSEC_PER_SEC, .cpu = 1, .pid = 107, .tid = 107, .comm = "a",
                        .cgroup = "/system.slice/b.service", .period = 1, .n_frames = 2, .frames = a,
                };
                ASSERT_OK(test_add_sample(s, 1, &smp));
        }
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        ASSERT_OK(store_commit(s));
        for (size_t i = 0; i < ELEMENTSOF(windows); i++) {
                before[i] = run_query(s, windows + i, 0, 0);
                ASSERT_GT(before[i]->total_samples, 0);
        }
        s = store_free(s);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM sample_blocks WHERE level = 1 AND start_ns IN (%lld, %lld)",
                 (long long) m1, (long long) m2);
        ASSERT_EQ(sql_int(t.db, sql), 4);

        /* Schema 8, with the first block of m1, the second of m2 and the
         * hour h damaged. */
        make_schema(t.db, 8);
        snprintf(sql, sizeof sql,
                 "UPDATE sample_blocks SET data = x'01ffffffff0f' WHERE id IN ("
                 "(SELECT min(id) FROM sample_blocks WHERE level = 1 AND start_ns = %lld),"
                 "(SELECT max(id) FROM sample_blocks WHERE level = 1 AND start_ns = %lld),"
                 "(SELECT id FROM sample_blocks WHERE level = 2 AND start_ns = %lld));",
                 (long long) m1, (long long) m2, (long long) h);
        ASSERT_EQ(sql_exec(t.db, sql), 3);

        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        for (size_t i = 0; i < 3; i++) {
                uint64_t start = i == 0 ? m1 : i == 1 ? m2 : h;

                /* One block, a marker. */
                snprintf(sql, sizeof sql, "SELECT count(*) FROM sample_blocks WHERE level = %d AND start_ns = %lld",
                         i < 2 ? 5 : 6, (long long) start);
                ASSERT_EQ(sql_int(t.db, sql), 1);
                snprintf(sql, sizeof sql, "SELECT count(*) FROM sample_blocks WHERE level = %d AND start_ns = %lld "
                         "AND data = x'00'", i < 2 ? 5 : 6, (long long) start);
                ASSERT_EQ(sql_int(t.db, sql), 1);
        }
        for (size_t i = 0; i < ELEMENTSOF(windows); i++) {
                query_result *r = run_query(s, windows + i, 0, 0);

                assert_same_rows(before[i], r);
                query_result_free(r);
                query_result_free(before[i]);
        }
}

/* Pages in use: what database_max_size holds. */
static uint64_t used_bytes(const char *db) {
        return (uint64_t) (sql_int(db, "PRAGMA page_count") - sql_int(db, "PRAGMA freelist_count")) *
               (uint64_t) sql_int(db, "PRAGMA page_size");
}

TEST(size_cap_deletes_oldest_first) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame f[] = { K_MEMCPY_10, K_ENTRY };
        store_cap_result res;
        store_stats st;
        const uint64_t cap = 2 << 20;
        uint64_t before, oldest_before, n = 0;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        /* 1500 s of 400 samples a second from many tasks: entries hardly
         * merge, the blocks take MiBs (minutes and hours are left to the
         * buckets: markers). */
        for (uint64_t sec = 0; sec < 1500; sec++) {
                ASSERT_OK(store_begin(s));
                for (int i = 0; i < 400; i++) {
                        uint32_t pid = (uint32_t) (next_rand() % 100000);
                        test_sample smp = {
                                .time_ns = T0 + sec * NSEC_PER_SEC + (uint64_t) i * 1000, .cpu = (uint32_t) (i % 2),
                                .pid = pid, .tid = pid, .comm = "worker", .period = 1000 + next_rand() % 1000,
                                .n_frames = 2, .frames = f,
                        };
                        ASSERT_OK(test_add_sample(s, 1, &smp));
                        n++;
                }
                ASSERT_OK(store_flush_samples(s, T0 + sec * NSEC_PER_SEC));
                ASSERT_OK(store_commit(s));
        }
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        before = used_bytes(t.db);
        oldest_before = (uint64_t) sql_int(t.db, "SELECT min(start_ns) FROM sample_blocks WHERE level = 0");
        fprintf(stderr, "%" PRIu64 " samples: %" PRIu64 " bytes in use, %.2f bytes a sample\n", n, before,
                (double) before / (double) n);
        ASSERT_GT(before, cap + cap / 8);

        /* Each call deletes a bounded number of blocks: call until under. */
        uint64_t removed = 0, newest_removed = 0;
        for (int i = 0; i < 100 && used_bytes(t.db) > cap; i++) {
                ASSERT_OK(store_enforce_cap(s, cap, &res));
                fprintf(stderr, "cap step: %" PRIu64 " bytes in use before, %" PRIu64 " blocks (%" PRIu64 " samples) removed, %" PRIu64 " in use after\n",
                        res.used_bytes, res.blocks, res.samples, used_bytes(t.db));
                removed += res.samples;
                newest_removed = MAX(newest_removed, res.newest_removed_ns);
        }
        fprintf(stderr, "after the cap: %" PRIu64 " bytes in use, %" PRIu64 " samples removed, newest removed at +%.0f s\n",
                used_bytes(t.db), removed, (double) (newest_removed - T0) / 1e9);
        ASSERT_LE(used_bytes(t.db), cap);
        ASSERT_GT(removed, 0);

        /* Oldest first: what is left of the buckets is the newest. */
        uint64_t oldest_after = (uint64_t) sql_int(t.db, "SELECT min(start_ns) FROM sample_blocks WHERE level = 0");
        ASSERT_GT(oldest_after, oldest_before);
        ASSERT_GE(oldest_after, newest_removed / NSEC_PER_SEC * NSEC_PER_SEC);
        ASSERT_EQ(sql_int(t.db, "SELECT sum(n_samples) FROM sample_blocks WHERE level = 0"), (int64_t) (n - removed));

        ASSERT_OK(store_get_stats(s, &st));
        ASSERT_U64_EQ(st.samples, n - removed);
        ASSERT_U64_EQ(st.first_ns, oldest_after);

        /* The newest samples answer exactly; so does everything: where the
         * cap cut in, the remaining buckets answer, not the totals. */
        query_params q = QUERY_PARAMS_INIT;
        q.since_ns = T0 + 1400 * NSEC_PER_SEC;
        query_result *r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->total_samples, 100 * 400);
        query_result_free(r);
        q.since_ns = 0;
        r = run_query(s, &q, 0, 0);
        ASSERT_U64_EQ(r->total_samples, n - removed);
        query_result_free(r);
        q.want_stacks = true;
        r = run_query(s, &q, 0, 0);
        ASSERT_U64_EQ(r->total_samples, n - removed);
        query_result_free(r);

        /* Under the cap: nothing to do. */
        ASSERT_OK(store_enforce_cap(s, cap, &res));
        ASSERT_EQ(res.blocks, 0);
}

/* Stacks and frames of generations no block uses any more go with them. */
/* The stack dictionary: blocks that fill and close, an open block that
 * grows, a rolled-back batch, a reopen: the same pair keeps its id, and
 * blocks never overlap. */
TEST(stack_dictionary_blocks_across_rollback_and_reopen) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        enum { FRAMES = 500, CHAINS = 12000, DEPTH = 5 };
        int64_t frames[FRAMES], *ids = calloc(CHAINS * DEPTH, sizeof(int64_t)), id, max_before, nodes;
        uint64_t x = 12345;

        ASSERT_TRUE(ids);
        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        for (int i = 0; i < FRAMES; i++) {
                frame f = U_LIBC;
                f.offset = 0x1000 + (uint64_t) i * 16;
                ASSERT_OK(store_intern_frame(s, &f, &frames[i]));
        }

        /* Chains over a few roots, committed in batches of 1000 chains. */
        for (int c = 0; c < CHAINS; c++) {
                int64_t parent = 0;

                if (c % 1000 == 0)
                        ASSERT_OK(store_begin(s));
                for (int d = 0; d < DEPTH; d++) {
                        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                        int64_t f = frames[d == 0 ? (uint64_t) (c % 7) : (x >> 33) % FRAMES];
                        ASSERT_OK(store_intern_stack(s, parent, f, &ids[c * DEPTH + d]));
                        ASSERT_GT(ids[c * DEPTH + d], parent);
                        parent = ids[c * DEPTH + d];
                }
                if (c % 1000 == 999)
                        ASSERT_OK(store_commit(s));
        }
        nodes = sql_int(t.db, "SELECT coalesce(sum(n), 0) FROM stack_blocks");
        max_before = sql_int(t.db, "SELECT max(last_id) FROM stack_blocks");
        fprintf(stderr, "%lld nodes in %lld blocks, %lld bytes\n", (long long) nodes,
                (long long) sql_int(t.db, "SELECT count(*) FROM stack_blocks"),
                (long long) sql_int(t.db, "SELECT sum(length(data)) FROM stack_blocks"));
        ASSERT_GT(nodes, 2 * DICT_BLOCK_ROWS);
        ASSERT_GE(max_before, ids[CHAINS * DEPTH - 1]);

        /* A batch rolled back: its nodes are gone, and its ids are given
         * again, to nodes that exist. */
        ASSERT_OK(store_begin(s));
        ASSERT_OK(store_intern_stack(s, 0, frames[FRAMES - 1], &id));
        ASSERT_OK(store_intern_stack(s, id, frames[FRAMES - 2], &id));
        ASSERT_OK(store_rollback(s));
        ASSERT_EQ(sql_int(t.db, "SELECT max(last_id) FROM stack_blocks"), max_before);
        ASSERT_OK(store_intern_stack(s, 0, frames[FRAMES - 3], &id));
        ASSERT_EQ(id, max_before + 1);
        ASSERT_EQ(sql_int(t.db, "SELECT max(last_id) FROM stack_blocks"), max_before + 1);

        /* Reopened: every pair has its id, nothing is made twice. */
        s = store_free(s);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        x = 12345;
        ASSERT_OK(store_begin(s));
        for (int c = 0; c < CHAINS; c++) {
                int64_t parent = 0;

                for (int d = 0; d < DEPTH; d++) {
                        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                        int64_t f = frames[d == 0 ? (uint64_t) (c % 7) : (x >> 33) % FRAMES];
                        ASSERT_OK(store_intern_stack(s, parent, f, &id));
                        ASSERT_EQ(id, ids[c * DEPTH + d]);
                        parent = id;
                }
        }
        ASSERT_OK(store_commit(s));
        ASSERT_EQ(sql_int(t.db, "SELECT coalesce(sum(n), 0) FROM stack_blocks"), nodes + 1);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM stack_blocks a, stack_blocks b "
                                "WHERE a.first_id < b.first_id AND a.last_id >= b.first_id"), 0);
        ASSERT_LE(sql_int(t.db, "SELECT max(n) FROM stack_blocks"), DICT_BLOCK_ROWS);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM stack_blocks WHERE last_id - first_id + 1 <> n"), 0);

        /* A reader with room for one decoded block, jumping between all of
         * them: every node still reads back right. */
        sqlite3 *db = NULL;
        dict_reader *rd = NULL;
        ASSERT_EQ(sqlite3_open_v2(t.db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        ASSERT_OK(dict_reader_new(db, DICT_STACKS, DICT_BLOCK_ROWS * 3 * sizeof(int64_t), &rd));
        for (int k = 0; k < CHAINS; k++) {
                int c = (int) (((long) k * 7919) % CHAINS);
                for (int d = 0; d < DEPTH; d++) {
                        int64_t v[2];
                        ASSERT_OK(dict_reader_get(rd, ids[c * DEPTH + d], v));
                        ASSERT_EQ(v[0], d == 0 ? 0 : ids[c * DEPTH + d - 1]);
                }
        }
        int64_t v[2];
        ASSERT_ERROR(dict_reader_get(rd, max_before + 2, v), EBADMSG);

        /* Rows in place: the row asked for, then the rest of its block in
         * id order, each as dict_reader_get() reads it; the count ends at
         * the block's last row. */
        const size_t w = 1 + dict_columns(DICT_STACKS);     /* a row: the id, then its columns */
        for (int64_t want = 1; want <= max_before; want += DICT_BLOCK_ROWS / 3) {
                const int64_t *rows;
                char sql[160];
                size_t n;

                ASSERT_OK(dict_reader_rows(rd, want, &rows, &n));
                ASSERT_EQ(rows[0], want);
                snprintf(sql, sizeof sql,
                         "SELECT last_id - %lld + 1 FROM stack_blocks WHERE first_id <= %lld AND last_id >= %lld",
                         (long long) want, (long long) want, (long long) want);
                ASSERT_EQ((int64_t) n, sql_int(t.db, sql));
                /* Copied first: the reads below may drop the block. */
                _cleanup_free_ int64_t *copy = malloc(n * w * sizeof(int64_t));
                ASSERT_TRUE(copy);
                memcpy(copy, rows, n * w * sizeof(int64_t));
                for (size_t i = 0; i < n; i++) {
                        ASSERT_EQ(copy[i * w], want + (int64_t) i);
                        ASSERT_OK(dict_reader_get(rd, copy[i * w], v));
                        ASSERT_EQ(v[0], copy[i * w + 1]);
                        ASSERT_EQ(v[1], copy[i * w + 2]);
                }
        }
        {
                const int64_t *rows;
                size_t n;

                ASSERT_ERROR(dict_reader_rows(rd, max_before + 2, &rows, &n), EBADMSG);
        }
        dict_reader_free(rd);
        sqlite3_close(db);
        free(ids);
}

/* A commit that adds a few rows to the open block writes them as a piece
 * of it, not the block again; the block, once full, replaces its pieces;
 * a reopened store reads the pieces back and goes on. */
TEST(open_block_is_written_in_pieces) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        enum { PER_COMMIT = 3, COMMITS = 10 };
        _Static_assert(PER_COMMIT == 3, "the SQL below says 3");
        int64_t fid, ids[2 * COMMITS * PER_COMMIT], id, n_ids = 0, first_full;
        frame f = U_LIBC;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_OK(store_begin(s));
        ASSERT_OK(store_intern_frame(s, &f, &fid));
        ASSERT_OK(store_commit(s));
        for (int pass = 0; pass < 2; pass++) {
                for (int c = 0; c < COMMITS; c++) {
                        int64_t parent = 0;

                        ASSERT_OK(store_begin(s));
                        /* The chain goes on from the last node, an
                         * earlier commit's: three new rows. */
                        if (n_ids > 0)
                                parent = ids[n_ids - 1];
                        for (int k = 0; k < PER_COMMIT; k++) {
                                ASSERT_OK(store_intern_stack(s, parent, fid, &ids[n_ids]));
                                parent = ids[n_ids++];
                        }
                        ASSERT_OK(store_commit(s));
                }
                ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM stack_blocks"), (pass + 1) * COMMITS);
                ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM stack_blocks WHERE n <> 3"), 0);     /* PER_COMMIT */
                ASSERT_EQ(sql_int(t.db, "SELECT sum(n) FROM stack_blocks"), n_ids);
                /* Reopened: the pieces read back, every pair has its id. */
                s = store_free(s);
                ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
                ASSERT_OK(store_begin(s));
                for (int64_t k = 0; k < n_ids; k++) {
                        ASSERT_OK(store_intern_stack(s, k ? ids[k - 1] : 0, fid, &id));
                        ASSERT_EQ(id, ids[k]);
                }
                ASSERT_OK(store_commit(s));
                ASSERT_EQ(sql_int(t.db, "SELECT sum(n) FROM stack_blocks"), n_ids);
        }

        /* Filled: the open block (since the reopen, from the last piece)
         * is one block of DICT_BLOCK_ROWS rows, and its pieces are gone. */
        first_full = sql_int(t.db, "SELECT max(first_id) FROM stack_blocks");
        ASSERT_OK(store_begin(s));
        id = ids[n_ids - 1];
        for (int k = 0; k < DICT_BLOCK_ROWS; k++)
                ASSERT_OK(store_intern_stack(s, id, fid, &id));
        ASSERT_OK(store_commit(s));
        ASSERT_EQ(DICT_BLOCK_ROWS, 4096);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM stack_blocks WHERE n = 4096"), 1);
        ASSERT_EQ(sql_int(t.db, "SELECT first_id FROM stack_blocks WHERE n = 4096"), first_full);
        ASSERT_EQ(sql_int(t.db, "SELECT sum(n) FROM stack_blocks"), n_ids + DICT_BLOCK_ROWS);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM stack_blocks a, stack_blocks b "
                                "WHERE a.first_id < b.first_id AND a.last_id >= b.first_id"), 0);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM stack_blocks WHERE last_id - first_id + 1 <> n"), 0);
}

/* Stack generations turn over while the frames stay: the leaf levels
 * keep one id per frame, and frame rows go only with the last stack
 * generation that used them. */
TEST(frames_outlive_stack_generations) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const uint64_t hour0 = (T0 / (3600 * NSEC_PER_SEC) + 1) * 3600 * NSEC_PER_SEC;
        const uint64_t cut = hour0 + 3600 * NSEC_PER_SEC;
        uint64_t gen0, n = 0, kept = 0;
        bool more;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        /* A stack generation every ~1,000 nodes. */
        store_set_dictionary_limit(s, 4 << 10);
        gen0 = store_generation(s);
        /* Three hours and more, a second of samples every 30 s. */
        for (uint64_t sec = 0; sec < 3 * 3600 + 600; sec += 30) {
                ASSERT_OK(store_begin(s));
                for (int i = 0; i < 40; i++, n++) {
                        uint64_t time_ns = T0 + sec * NSEC_PER_SEC + (uint64_t) i * 1000;
                        frame f[4];

                        /* 8 functions, 4,096 orders of them. */
                        for (int k = 0; k < 4; k++) {
                                f[k] = U_LIBC;
                                f[k].offset = 0x1000 + 0x100 * (next_rand() % 8);
                                f[k].addr = 0x7f0000000000ULL + f[k].offset;
                        }
                        test_sample smp = {
                                .time_ns = time_ns, .cpu = 0, .pid = 100 + (uint32_t) sec,
                                .tid = 100 + (uint32_t) sec, .comm = "cc1", .period = 1000, .n_frames = 4, .frames = f,
                        };
                        ASSERT_OK(test_add_sample(s, 1, &smp));
                        kept += time_ns >= cut;
                }
                ASSERT_OK(store_flush_samples(s, T0 + sec * NSEC_PER_SEC));
                ASSERT_OK(store_commit(s));
        }
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        fprintf(stderr, "stack generations %" PRIu64 " .. %" PRIu64 ", %lld stack rows, %lld frame rows in %lld generations\n",
                gen0, store_generation(s), (long long) sql_int(t.db, "SELECT sum(n) FROM stack_blocks"),
                (long long) sql_int(t.db, "SELECT sum(n) FROM frame_blocks"),
                (long long) sql_int(t.db, "SELECT count(DISTINCT gen) FROM frame_blocks"));
        ASSERT_GT(store_generation(s), gen0 + 3);
        ASSERT_EQ(sql_int(t.db, "SELECT sum(n) FROM frame_blocks"), 8);
        ASSERT_EQ(sql_int(t.db, "SELECT count(DISTINCT gen) FROM frame_blocks"), 1);

        /* Eight functions from the leaf levels, the same from the full ones. */
        query_params q = QUERY_PARAMS_INIT;
        query_result *a = run_query(s, &q, 0, 0);
        ASSERT_EQ(a->n_rows, 8);
        ASSERT_U64_EQ(a->total_samples, n);
        q.want_stacks = true;
        query_result *b = run_query(s, &q, 0, 0);
        assert_same_rows(a, b);
        query_result_free(a);
        query_result_free(b);

        /* Retention drops the older stack generations (hour blocks too);
         * the frames stay while a block uses them, and every stack left
         * resolves. */
        int64_t stack_rows = sql_int(t.db, "SELECT sum(n) FROM stack_blocks");
        for (int i = 0; i < 100; i++) {
                ASSERT_GE(store_expire(s, cut, &more), 0);
                if (!more)
                        break;
        }
        ASSERT_LT(sql_int(t.db, "SELECT sum(n) FROM stack_blocks"), stack_rows);
        ASSERT_EQ(sql_int(t.db, "SELECT sum(n) FROM frame_blocks"), 8);
        q.since_ns = 0;
        b = run_query(s, &q, 0, 0);
        ASSERT_U64_EQ(b->total_samples, kept);
        ASSERT_GT(b->n_stacks, 0);
        for (size_t i = 0; i < b->n_stacks; i++)
                ASSERT_EQ(b->stacks[i].n_frames, 4);
        query_result_free(b);
}

/* Second `sec` after t0 of a build: 50 samples of process pid, each with
 * a new stack (user code at new offsets), committed with the flush
 * horizon a second behind, as the daemon's. */
static void add_new_stacks(store *s, uint64_t t0, uint64_t sec, uint32_t pid) {
        ASSERT_OK(store_begin(s));
        for (int i = 0; i < 50; i++) {
                frame f[3] = { K_OPEN, K_ENTRY, U_LIBC };
                f[2].offset = sec * 1000 + (uint64_t) i;
                f[2].addr = 0x7f0000000000ULL + f[2].offset;
                test_sample smp = {
                        .time_ns = t0 + sec * NSEC_PER_SEC + (uint64_t) i * 1000, .cpu = (uint32_t) i % 2, .pid = pid,
                        .tid = pid, .comm = "cc1", .period = 1000, .n_frames = 3, .frames = f,
                };
                ASSERT_OK(test_add_sample(s, 1, &smp));
        }
        ASSERT_OK(store_flush_samples(s, t0 + sec * NSEC_PER_SEC));
        ASSERT_OK(store_commit(s));
}

/* A stack is chosen for max_stacks by its name, not by its ids: a call
 * chain that is sampled all along is interned again in every stack
 * generation, and its leaf is at two offsets of one function; it must
 * outrank a stack with more samples than any one of its ids but fewer
 * than all of them, whatever the table's size. */
TEST(stacks_by_name_across_generations) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame spin10 = { FRAME_USER, 0x401010, "spin", 0x1010, "/usr/bin/app", NULL };
        const frame spin20 = { FRAME_USER, 0x401020, "spin", 0x1020, "/usr/bin/app", NULL };
        const frame work = { FRAME_USER, 0x402040, "work", 0x2040, "/usr/bin/app", NULL };
        const frame mainf = { FRAME_USER, 0x403080, "main", 0x3080, "/usr/bin/app", NULL };
        const frame burst[] = { K_MEMCPY_10, K_ENTRY, mainf };
        static const char *const want_hot[] = { "main", "work", "spin" };
        uint64_t gen0;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        store_set_dictionary_limit(s, 4 << 10);
        gen0 = store_generation(s);
        for (uint64_t sec = 0; sec < 60; sec++) {
                add_new_stacks(s, T0, sec, 100);
                ASSERT_OK(store_begin(s));
                for (int i = 0; i < 2; i++) {
                        const frame hot[] = { i ? spin20 : spin10, work, mainf };

                        add(s, S(sec) + 500000 + (uint64_t) i, 0, 200, "app", hot, 3);
                }
                for (int i = 0; sec == 30 && i < 30; i++)
                        add(s, S(sec) + 600000 + (uint64_t) i, 1, 200, "app", burst, 3);
                ASSERT_OK(store_flush_samples(s, S(sec)));
                ASSERT_OK(store_commit(s));
        }
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        fprintf(stderr, "stack generations %" PRIu64 " .. %" PRIu64 "\n", gen0, store_generation(s));
        ASSERT_GT(store_generation(s), gen0 + 3);

        query_params q = QUERY_PARAMS_INIT;
        q.want_stacks = true;
        for (size_t slots = 64; slots <= STORE_QUERY_GROUP_SLOTS_DEFAULT; slots *= 8192) {
                store_set_query_group_slots(s, slots);
                _cleanup_result_ query_result *all = run_query(s, &q, 0, 0);
                _cleanup_result_ query_result *one = run_query(s, &q, 0, 1);
                const query_stack *hot = NULL;
                size_t others = 0;

                fprintf(stderr, "%zu slots: %zu stacks in all (%u passes); with max_stacks 1, %zu (%u passes)\n",
                        slots, all->n_stacks, all->passes, one->n_stacks, one->passes);
                ASSERT_U64_EQ(all->total_samples, 60 * 50 + 60 * 2 + 30);
                for (size_t i = 0; i < one->n_stacks; i++) {
                        if (streq(one->stacks[i].frames[0], "[other stacks]")) {
                                others += one->stacks[i].samples;
                                continue;
                        }
                        ASSERT_TRUE(!hot);
                        hot = one->stacks + i;
                }
                ASSERT_TRUE(hot);
                ASSERT_STREQ(hot->comm, "app");
                ASSERT_U64_EQ(hot->samples, 120);
                ASSERT_EQ(hot->n_frames, ELEMENTSOF(want_hot));
                for (size_t f = 0; f < ELEMENTSOF(want_hot); f++)
                        ASSERT_STREQ(hot->frames[f], want_hot[f]);
                ASSERT_U64_EQ(others, 60 * 50 + 30);
                /* Uncapped, the same line once, with all of its samples. */
                size_t n_hot = 0;
                for (size_t i = 0; i < all->n_stacks; i++)
                        if (streq(all->stacks[i].comm, "app") && all->stacks[i].n_frames == 3 &&
                            streq(all->stacks[i].frames[2], "spin")) {
                                n_hot++;
                                ASSERT_U64_EQ(all->stacks[i].samples, 120);
                        }
                ASSERT_EQ(n_hot, 1);
                if (slots == 64)
                        ASSERT_GT(all->passes, 1);
        }
}

/* Stacks through a dso, by name: the same names are one stack wherever
 * on them the dso's first frame is: g;f, 10 samples with g in libY and 10
 * with g in libX, outranks h (15). */
TEST(stacks_by_name_with_a_dso) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame g_y = { FRAME_USER, 0x502020, "g", 0x2020, "/usr/lib/libY.so", NULL };
        const frame f_x = { FRAME_USER, 0x601010, "f", 0x1010, "/usr/lib/libX.so", NULL };
        const frame g_x = { FRAME_USER, 0x602020, "g", 0x2020, "/usr/lib/libX.so", NULL };
        const frame h_x = { FRAME_USER, 0x603030, "h", 0x3030, "/usr/lib/libX.so", NULL };
        /* Leaf first: g calls f; the first frame in libX is f in a, g in b. */
        const frame a[] = { f_x, g_y }, b[] = { f_x, g_x }, c[] = { h_x };

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_OK(store_begin(s));
        for (int i = 0; i < 10; i++) {
                add(s, S(i), 0, 300, "app", a, 2);
                add(s, S(i) + 1000, 0, 300, "app", b, 2);
                add(s, S(i) + 2000, 0, 300, "app", c, 1);
                if (i % 2)
                        add(s, S(i) + 3000, 0, 300, "app", c, 1);
        }
        ASSERT_OK(store_commit(s));
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));

        query_params q = QUERY_PARAMS_INIT;
        q.want_stacks = true;
        q.dso = "libX.so";
        _cleanup_result_ query_result *r = run_query(s, &q, 0, 1);
        ASSERT_EQ(r->n_stacks, 1);
        ASSERT_U64_EQ(r->stacks[0].samples, 20);
        ASSERT_EQ(r->stacks[0].n_frames, 2);
        ASSERT_STREQ(r->stacks[0].frames[0], "g");
        ASSERT_STREQ(r->stacks[0].frames[1], "f");
}

/* Stacks of one kind of frame: stacks that differ only in the frames of
 * the other kind are one class, counted as one against max_stacks. */
TEST(stacks_by_name_of_one_kind_of_frame) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame k_read = { FRAME_KERNEL, 0xffffffff81234560, "ksys_read", 0x10, MODULE_KERNEL, NULL };
        const frame k_entry = { FRAME_KERNEL, 0xffffffff81000040, "entry_SYSCALL_64", 0x40, MODULE_KERNEL, NULL };
        const frame u_read = { FRAME_USER, 0x601010, "read", 0x1010, "/usr/lib/libc.so.6", NULL };
        const frame u_fread = { FRAME_USER, 0x602020, "fread", 0x2020, "/usr/lib/libc.so.6", NULL };
        const frame u_main = { FRAME_USER, 0x401000, "main", 0x1000, "/usr/bin/app", NULL };
        /* Leaf first: the same kernel part under two user parts. */
        const frame a[] = { k_read, k_entry, u_read, u_main }, b[] = { k_read, k_entry, u_fread, u_main };

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_OK(store_begin(s));
        for (int i = 0; i < 10; i++) {
                add(s, S(i), 0, 300, "app", a, 4);
                if (i % 2)
                        add(s, S(i) + 1000, 0, 300, "app", b, 4);
        }
        ASSERT_OK(store_commit(s));
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));

        query_params q = QUERY_PARAMS_INIT;
        q.want_stacks = true;
        q.frames = QUERY_FRAMES_KERNEL;
        _cleanup_result_ query_result *k = run_query(s, &q, 0, 1);
        ASSERT_EQ(k->n_stacks, 1);
        ASSERT_U64_EQ(k->stacks[0].samples, 15);
        ASSERT_EQ(k->stacks[0].n_frames, 2);
        ASSERT_STREQ(k->stacks[0].frames[0], "entry_SYSCALL_64");
        ASSERT_STREQ(k->stacks[0].frames[1], "ksys_read");

        q.frames = QUERY_FRAMES_USER;
        _cleanup_result_ query_result *u = run_query(s, &q, 0, 0);
        ASSERT_EQ(u->n_stacks, 2);
        ASSERT_U64_EQ(u->stacks[0].samples, 10);
        ASSERT_U64_EQ(u->stacks[1].samples, 5);
        ASSERT_EQ(u->stacks[1].n_frames, 2);
        ASSERT_STREQ(u->stacks[1].frames[0], "main");
        ASSERT_STREQ(u->stacks[1].frames[1], "fread");
}

/* Classes that outgrow their table in a capped query: the frequent ones
 * kept (class_shrink()) and counted again exactly, when that proves the
 * answer (2 passes); else parts. Both answer as one pass does. */
TEST(stacks_by_name_when_classes_outgrow_their_table) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        static const char *const names[] = { "h0", "h1", "h2", "h3", "h4" };

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        /* 3,000 stacks seen once, and 5 seen 100, 90, ... 60 times, in
         * between them. */
        for (int sec = 0; sec < 30; sec++) {
                ASSERT_OK(store_begin(s));
                for (int i = 0; i < 100; i++) {
                        frame f = { FRAME_USER, 0x700000 + (uint64_t) (sec * 100 + i) * 16, NULL,
                                    (uint64_t) (sec * 100 + i) * 16, "/usr/bin/many", NULL };

                        add(s, S(sec) + (uint64_t) i * 1000, 0, 400, "many", &f, 1);
                }
                for (int h = 0; h < 5; h++)
                        for (int i = 0; i < 10 - h; i++)
                                if (sec % 3 == 0) {
                                        frame f = { FRAME_USER, 0x800000 + (uint64_t) h * 64, names[h],
                                                    (uint64_t) h * 64, "/usr/bin/many", NULL };

                                        add(s, S(sec) + 500000 + (uint64_t) (h * 10 + i), 1, 400, "many", &f, 1);
                                }
                ASSERT_OK(store_flush_samples(s, S(sec)));
                ASSERT_OK(store_commit(s));
        }
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));

        query_params q = QUERY_PARAMS_INIT;
        q.want_stacks = true;
        for (uint32_t max_stacks = 5; max_stacks <= 50; max_stacks += 45) {
                store_set_query_group_slots(s, STORE_QUERY_GROUP_SLOTS_DEFAULT);
                _cleanup_result_ query_result *one = run_query(s, &q, 0, max_stacks);
                store_set_query_group_slots(s, 256);
                _cleanup_result_ query_result *small = run_query(s, &q, 0, max_stacks);

                fprintf(stderr, "max_stacks %u: %zu stacks, %u and %u passes\n", max_stacks, one->n_stacks, one->passes,
                        small->passes);
                ASSERT_EQ(one->passes, 1);
                assert_same_stacks(one, small);
                assert_same_rows(one, small);   /* counted in the first pass only */
                ASSERT_U64_EQ(small->total_samples, 3000 + 10 * (100 + 90 + 80 + 70 + 60) / 10);
                if (max_stacks == 5) {
                        /* The frequent five, and the others in one line. */
                        ASSERT_EQ(small->passes, 2);
                        ASSERT_EQ(small->n_stacks, 6);
                        ASSERT_STREQ(small->stacks[0].frames[0], "[other stacks]");
                        ASSERT_U64_EQ(small->stacks[0].samples, 3000);
                        for (int h = 0; h < 5; h++) {
                                ASSERT_STREQ(small->stacks[1 + h].frames[0], names[h]);
                                ASSERT_U64_EQ(small->stacks[1 + h].samples, (uint64_t) (10 - h) * 10);
                        }
                } else
                        ASSERT_GT(small->passes, 2);    /* the 50th has 1 sample: not proven, parts */
        }
}

TEST(size_cap_collects_old_stacks_and_frames) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        store_cap_result res;
        uint64_t gen0, rows = 0;
        int64_t stacks_before, frames_before;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        /* Small generations: a new one every ~40 KiB of rows (estimated). */
        store_set_dictionary_limit(s, 40 << 10);
        gen0 = store_generation(s);
        /* 600 s of samples with ever new stacks (a new process's user
         * code at new offsets each second), like a build. */
        for (uint64_t sec = 0; sec < 600; sec++)
                add_new_stacks(s, T0, sec, 100);
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        stacks_before = sql_int(t.db, "SELECT coalesce(sum(n), 0) FROM stack_blocks");
        frames_before = sql_int(t.db, "SELECT coalesce(sum(n), 0) FROM frame_blocks");
        fprintf(stderr, "generations %" PRIu64 " .. %" PRIu64 ", %lld stack and %lld frame rows, %" PRIu64 " bytes in use\n",
                gen0, store_generation(s), (long long) stacks_before, (long long) frames_before, used_bytes(t.db));
        ASSERT_GT(store_generation(s), gen0 + 5);

        for (int i = 0; i < 100 && used_bytes(t.db) > (320 << 10); i++) {
                ASSERT_OK(store_enforce_cap(s, 320 << 10, &res));
                rows += res.rows;
        }
        fprintf(stderr, "after a 320 KiB cap: %lld stack and %lld frame rows (%" PRIu64 " deleted), %" PRIu64 " bytes in use\n",
                (long long) sql_int(t.db, "SELECT coalesce(sum(n), 0) FROM stack_blocks"), (long long) sql_int(t.db, "SELECT coalesce(sum(n), 0) FROM frame_blocks"),
                rows, used_bytes(t.db));
        ASSERT_LE(used_bytes(t.db), 320 << 10);
        ASSERT_GT(rows, 0);
        ASSERT_LT(sql_int(t.db, "SELECT coalesce(sum(n), 0) FROM stack_blocks"), stacks_before);
        /* No block refers to a generation that was deleted. */
        ASSERT_GT(sql_int(t.db, "SELECT count(*) FROM sample_blocks"), 0);
        ASSERT_GE(sql_int(t.db, "SELECT min(gen_min) FROM sample_blocks"), sql_int(t.db, "SELECT min(gen) FROM stack_blocks"));
        ASSERT_GE(sql_int(t.db, "SELECT min(gen_min) FROM sample_blocks"), sql_int(t.db, "SELECT min(gen) FROM frame_blocks"));

        /* Every stack left resolves: the folded stacks of all that is left. */
        query_params q = QUERY_PARAMS_INIT;
        q.want_stacks = true;
        query_result *r = run_query(s, &q, 0, 0);
        uint64_t sum = 0;
        for (size_t i = 0; i < r->n_stacks; i++) {
                ASSERT_EQ(r->stacks[i].n_frames, 3);
                ASSERT_STREQ(r->stacks[i].frames[2], "do_sys_open");
                sum += r->stacks[i].samples;
        }
        ASSERT_U64_EQ(sum, r->total_samples);
        ASSERT_GT(sum, 0);
        query_result_free(r);
}

/* A rollback loses what its batch held, counted once, and nothing else. */
/* While the daemon runs, the minute and hour of now stay open, and the
 * hour is often left to the finer levels: neither keeps old stack
 * generations from going under the cap. */
TEST(size_cap_is_not_held_by_open_periods) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        store_cap_result res;
        uint64_t gen0, hour0 = (T0 / NSEC_PER_SEC / 3600 + 1) * 3600 * NSEC_PER_SEC;
        int64_t oldest_stacks;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        store_set_dictionary_limit(s, 40 << 10);
        gen0 = store_generation(s);
        /* 20 minutes into one hour, ever new stacks and processes; the
         * flush horizon trails by a second, as the daemon's does. */
        for (uint64_t sec = 0; sec < 1200; sec++)
                add_new_stacks(s, hour0, sec, 100 + (uint32_t) sec);
        fprintf(stderr, "generations %" PRIu64 " .. %" PRIu64 ", %" PRIu64 " bytes in use, hour markers %lld\n", gen0,
                store_generation(s), used_bytes(t.db),
                (long long) sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 2 AND data = x'00'"));
        ASSERT_GT(store_generation(s), gen0 + 5);

        for (int i = 0; i < 100 && used_bytes(t.db) > (272 << 10); i++)
                ASSERT_OK(store_enforce_cap(s, 272 << 10, &res));
        oldest_stacks = sql_int(t.db, "SELECT coalesce(min(gen), -1) FROM stack_blocks");
        fprintf(stderr, "after a 272 KiB cap: %" PRIu64 " bytes in use, oldest stack generation %lld of %" PRIu64 "\n",
                used_bytes(t.db), (long long) oldest_stacks, store_generation(s));
        ASSERT_LE(used_bytes(t.db), 272 << 10);
        ASSERT_GT(oldest_stacks, (int64_t) gen0 + 5);
        /* What is left answers, and the writer goes on. */
        ASSERT_OK(store_begin(s));
        add(s, hour0 + 1200 * NSEC_PER_SEC, 0, 1, "x", (const frame[]) { K_OPEN }, 1);
        ASSERT_OK(store_commit(s));
        query_params q = QUERY_PARAMS_INIT;
        q.since_ns = hour0 + 1200 * NSEC_PER_SEC;
        query_result *r = run_query(s, &q, 0, 0);
        ASSERT_U64_EQ(r->total_samples, 1);
        query_result_free(r);
}

TEST(rollback_counts_what_it_lost_and_keeps_the_open_bucket) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame f[] = { K_OPEN, K_ENTRY };
        uint64_t since;
        int err;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));

        /* 10 buckets written and committed, 3 samples in the open one. */
        ASSERT_OK(store_begin(s));
        for (int i = 0; i < 10; i++)
                add(s, S(i), 0, 1, "a", f, 2);
        add(s, S(10), 0, 1, "a", f, 2);
        add(s, S(10) + 1, 0, 1, "a", f, 2);
        add(s, S(10) + 2, 0, 1, "a", f, 2);
        ASSERT_OK(store_flush_samples(s, S(10)));
        ASSERT_OK(store_commit(s));
        ASSERT_EQ(store_pending_samples(s), 3);

        /* A transaction that deletes samples and then fails (retention, the
         * cap): the open bucket is not its business, and what it deleted
         * comes back; nothing counts as dropped. */
        ASSERT_OK(store_begin(s));
        ASSERT_EQ(store_expire(s, S(5), NULL), 5);
        ASSERT_OK(store_rollback(s));
        ASSERT_EQ(store_dropped_samples(s, &err, &since), 0);
        ASSERT_EQ(store_pending_samples(s), 3);
        store_stats st;
        ASSERT_OK(store_get_stats(s, &st));
        ASSERT_EQ(st.samples, 13);      /* the reader flushed the open bucket */

        /* A batch that adds samples and fails: those are dropped, counted
         * once, with the reason; the committed ones stay. */
        ASSERT_OK(store_begin(s));
        add(s, S(20), 0, 1, "a", f, 2);
        add(s, S(21), 0, 1, "a", f, 2);
        ASSERT_OK(store_rollback(s));
        ASSERT_EQ(store_dropped_samples(s, &err, &since), 2);
        ASSERT_GT(since, 0);
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        ASSERT_OK(store_get_stats(s, &st));
        ASSERT_EQ(st.samples, 13);
        ASSERT_EQ(sql_int(t.db, "SELECT sum(n_samples) FROM sample_blocks WHERE level = 0"), 13);
}

/* A damaged block of the open minute does not keep the writer from opening. */
TEST(damaged_block_is_skipped_at_open) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame f[] = { K_OPEN };
        sqlite3 *db = NULL;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_OK(store_begin(s));
        for (int i = 0; i < 5; i++)
                add(s, S(i), 0, 1, "a", f, 1);
        ASSERT_OK(store_flush_samples(s, S(4)));
        ASSERT_OK(store_commit(s));
        s = store_free(s);

        ASSERT_EQ(sqlite3_open(t.db, &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, "UPDATE sample_blocks SET data = x'01ffffffff0f' WHERE id = "
                                   "(SELECT min(id) FROM sample_blocks WHERE level = 0)", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);

        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_EQ(store_bad_blocks(s), 1);
        /* A query over it says so. */
        query_params q = QUERY_PARAMS_INIT;
        query_result *r = NULL;
        ASSERT_ERROR(store_query(s, &q, 0, 0, &r), EBADMSG);
}

/* A damaged dictionary block of the current generation: the writer starts
 * anyway, counts it, and interns what it held anew, under new ids and in
 * a block that overlaps no other. */
TEST(damaged_dictionary_block_is_skipped_at_open) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame f[] = { K_OPEN, K_ENTRY };
        int64_t old_max, fid, sid;
        sqlite3 *db = NULL;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_OK(store_begin(s));
        for (int i = 0; i < 5; i++)
                add(s, S(i), 0, 1, "a", f, 2);
        ASSERT_OK(store_commit(s));
        s = store_free(s);
        old_max = sql_int(t.db, "SELECT max(last_id) FROM frame_blocks");

        ASSERT_EQ(sqlite3_open(t.db, &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, "UPDATE frame_blocks SET data = x'02ffffffff0f'", NULL, NULL, NULL), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, "UPDATE stack_blocks SET data = x'0102'", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);

        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_EQ(store_bad_blocks(s), 2);
        ASSERT_OK(store_intern_frame(s, &K_OPEN, &fid));
        ASSERT_GT(fid, old_max);
        ASSERT_OK(store_intern_stack(s, 0, fid, &sid));
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM frame_blocks a, frame_blocks b "
                                "WHERE a.first_id < b.first_id AND a.last_id >= b.first_id"), 0);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM stack_blocks a, stack_blocks b "
                                "WHERE a.first_id < b.first_id AND a.last_id >= b.first_id"), 0);
        int64_t v[6];
        ASSERT_TRUE(frame_in_file(t.db, fid, v));
        ASSERT_EQ(v[0], FRAME_KERNEL);
        ASSERT_TRUE(!frame_in_file(t.db, old_max, v));
}

/* The page number of a table's root, from the schema. */
static int64_t root_page(const char *path, const char *table) {
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        int64_t page = 0;

        ASSERT_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_master WHERE name = ?1", -1, &st, NULL), SQLITE_OK);
        sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW)
                page = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        sqlite3_close(db);
        ASSERT_GT(page, 0);
        return page;
}

static void damage_page(const char *path, int64_t page) {
        int fd = open(path, O_WRONLY);
        const uint8_t junk[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

        ASSERT_GE(fd, 0);
        ASSERT_EQ(pwrite(fd, junk, sizeof junk, (off_t) ((page - 1) * 8192)), (ssize_t) sizeof junk);
        close(fd);
}

/* store_verify(): another application's file is refused and not touched;
 * an older perfsnapd file (no application id) is ours; at start a large
 * file after a clean stop has its small tables checked, not its blocks
 * (which --check-db, STORE_CHECK_FULL, does). */
TEST(verify_tells_foreign_damaged_and_ours) {
        char dir[] = "/tmp/test-store-verify.XXXXXX", path[128], *why = NULL;
        sqlite3 *db = NULL;
        store *s = NULL;
        struct stat st;

        ASSERT_TRUE(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/db", dir);
        ASSERT_EQ(store_verify(path, STORE_CHECK_START, &why), 0);      /* none yet */

        /* Another application's. */
        ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE notes(x); INSERT INTO notes VALUES (1)", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
        ASSERT_EQ(stat(path, &st), 0);
        off_t size = st.st_size;
        ASSERT_ERROR(store_verify(path, STORE_CHECK_START, &why), EPROTO);
        ASSERT_TRUE(why && strstr(why, "application_id"));
        free(why);
        ASSERT_ERROR(store_open(path, STORE_READWRITE, &s), EPROTO);
        ASSERT_EQ(stat(path, &st), 0);
        ASSERT_EQ(st.st_size, size);
        char wal[160];
        snprintf(wal, sizeof wal, "%s-wal", path);
        ASSERT_LT(access(wal, F_OK), 0);
        remove_db_dir(dir, path);

        /* Ours without the application id (before it was set): opened. */
        ASSERT_TRUE(mkdtemp(strcpy(dir, "/tmp/test-store-verify.XXXXXX")));
        snprintf(path, sizeof path, "%s/db", dir);
        ASSERT_OK(store_open(path, STORE_READWRITE, &s));
        store_free(s);
        ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, "PRAGMA application_id = 0", NULL, NULL, NULL), SQLITE_OK);
        /* 70 MiB of blocks: past STORE_CHECK_WHOLE_BYTES. */
        ASSERT_EQ(sqlite3_exec(db, "WITH RECURSIVE n(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM n WHERE v < 70) "
                                   "INSERT INTO sample_blocks(level, start_ns, end_ns, first_ns, last_ns, boot, "
                                   "n_samples, data) SELECT 0, v, v + 1, v, v, 1, 1, zeroblob(1048576) FROM n",
                               NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
        ASSERT_EQ(store_verify(path, STORE_CHECK_START, &why), 0);
        ASSERT_OK(store_open(path, STORE_READWRITE, &s));
        store_free(s);
        ASSERT_EQ(store_verify(path, STORE_CHECK_START, &why), 0);
        ASSERT_EQ(stat(path, &st), 0);
        ASSERT_GT(st.st_size, STORE_CHECK_WHOLE_BYTES);

        /* A damaged block table: left to the readers at start, found by
         * the full check. */
        damage_page(path, root_page(path, "sample_blocks"));
        ASSERT_EQ(store_verify(path, STORE_CHECK_START, &why), 0);
        ASSERT_ERROR(store_verify(path, STORE_CHECK_FULL, &why), EBADMSG);
        ASSERT_TRUE(why != NULL);
        free(why);
        /* A damaged small table: found at start. */
        damage_page(path, root_page(path, "boots"));
        ASSERT_ERROR(store_verify(path, STORE_CHECK_START, &why), EBADMSG);
        ASSERT_TRUE(why && strstr(why, "table boots"));
        free(why);
        remove_db_dir(dir, path);
}

/* A window with more distinct groups than the query's table holds is
 * grouped in parts, over several reads of its blocks, and answers exactly
 * what one read does: the same rows, totals and most frequent stacks. */
/* The stacks that are "[other stacks]" (others) or not. */
static size_t count_stacks(const query_result *r, bool others) {
        size_t n = 0;

        for (size_t i = 0; i < r->n_stacks; i++)
                n += query_stack_is_other(r->stacks + i) == others;
        return n;
}

static uint64_t stacks_samples(const query_result *r) {
        uint64_t n = 0;

        for (size_t i = 0; i < r->n_stacks; i++)
                n += r->stacks[i].samples;
        return n;
}

static bool stack_names_differ(const query_stack *a, const query_stack *b) {
        if (strcmp(a->comm, b->comm) != 0 || a->n_frames != b->n_frames)
                return true;
        for (size_t f = 0; f < a->n_frames; f++)
                if (strcmp(a->frames[f], b->frames[f]) != 0)
                        return true;
        return false;
}

/* by_cgroup: each cgroup's total is the sum of its rows (one has them
 * all), its kernel samples those of its kernel rows, its top one of its
 * rows of most samples; counted in parts, and under a row cap, the same. */
static void assert_cgroup_totals(store *s, const query_params *q, const query_result *one, const query_result *parts) {
        uint64_t sum = 0;

        ASSERT_EQ(one->n_cgroup_totals, 3);
        for (size_t k = 0; k < one->n_cgroup_totals; k++) {
                const query_cgroup_total *t = &one->cgroup_totals[k];
                uint64_t samples = 0, kernel = 0, top = 0;
                bool top_found = false;

                for (size_t i = 0; i < one->n_rows; i++) {
                        const query_row *row = &one->rows[i];

                        if (!streq(row->cgroup, t->cgroup))
                                continue;
                        samples += row->samples;
                        kernel += row->kernel ? row->samples : 0;
                        top = MAX(top, row->samples);
                        top_found = top_found || (row->samples == t->top.samples && streq(row->symbol, t->top.symbol) &&
                                                  streq(row->module, t->top.module) && row->kernel == t->top.kernel);
                }
                fprintf(stderr, "  %s: %llu samples, %llu in the kernel, top %s %llu\n", t->cgroup,
                        (unsigned long long) t->samples, (unsigned long long) t->kernel, t->top.symbol,
                        (unsigned long long) t->top.samples);
                ASSERT_U64_EQ(t->samples, samples);
                ASSERT_U64_EQ(t->kernel, kernel);
                if (q->frames != QUERY_FRAMES_USER && !q->dso)
                        ASSERT_GT(kernel, 0);
                ASSERT_U64_EQ(t->top.samples, top);
                ASSERT_TRUE(top_found);
                ASSERT_TRUE(k == 0 || t->samples <= one->cgroup_totals[k - 1].samples);
                sum += t->samples;

                const query_cgroup_total *p = &parts->cgroup_totals[k];
                ASSERT_STREQ(p->cgroup, t->cgroup);
                ASSERT_U64_EQ(p->samples, t->samples);
                ASSERT_U64_EQ(p->kernel, t->kernel);
                ASSERT_STREQ(p->top.symbol, t->top.symbol);
        }
        /* With a dso, only its rows are counted. */
        if (!q->dso)
                ASSERT_U64_EQ(sum, one->total_samples);
        ASSERT_EQ(parts->n_cgroup_totals, one->n_cgroup_totals);

        /* A cap of 2 rows: 2 rows, the 2 cgroups of most samples. */
        query_result *capped = run_query(s, q, 2, 0);
        ASSERT_EQ(capped->n_rows, 2);
        ASSERT_EQ(capped->n_cgroup_totals, 2);
        for (size_t k = 0; k < 2; k++) {
                ASSERT_STREQ(capped->cgroup_totals[k].cgroup, one->cgroup_totals[k].cgroup);
                ASSERT_U64_EQ(capped->cgroup_totals[k].samples, one->cgroup_totals[k].samples);
        }
        query_result_free(capped);
}

TEST(query_in_parts_answers_like_one_pass) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        static const char *const comms[] = { "cc1", "sh", "dd", "make", "as" };
        static const char *const syms[] = { "memcpy", "do_sys_open", "entry_SYSCALL_64", "vfs_read", "schedule" };
        static const char *const cgroups[] = { "/system.slice/a.service", "/system.slice/b.service",
                                                "/user.slice/user-1000.slice/session-1.scope" };
        enum { N = 20000, USER_FUNCS = 400 };
        char names[USER_FUNCS][16];

        for (size_t i = 0; i < USER_FUNCS; i++)
                snprintf(names[i], sizeof names[i], "f%zu", i);
        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));

        /* Stacks 1-8 user frames deep over 400 functions of two objects,
         * half of them under one of five kernel functions: thousands of
         * distinct stacks, some frequent, most seen once. */
        for (size_t i = 0; i < N; i += 1000) {
                ASSERT_OK(store_begin(s));
                for (size_t j = i; j < i + 1000; j++) {
                        frame f[9];
                        size_t n = 0, depth = 1 + next_rand() % 8;
                        uint32_t pid = 100 + (uint32_t) (next_rand() % 50);

                        if (next_rand() % 2)
                                f[n++] = (frame) { FRAME_KERNEL, 0xffffffff81000000ULL + next_rand() % 5 * 0x100,
                                                   syms[next_rand() % 5], 0, MODULE_KERNEL, "ab12" };
                        for (size_t k = 0; k < depth; k++) {
                                size_t fn = next_rand() % 4 == 0 ? next_rand() % USER_FUNCS : next_rand() % 8;
                                f[n++] = (frame) { FRAME_USER, 0x400000 + fn * 0x40, fn % 3 == 0 ? NULL : names[fn],
                                                   fn * 0x40, fn % 2 ? "/usr/bin/cc1" : "/usr/lib/libc.so.6", NULL };
                        }
                        test_sample smp = {
                                .time_ns = S(j / 100) + j % 100, .cpu = (uint32_t) (j % 4), .pid = pid, .tid = pid,
                                .comm = comms[pid % 5], .cgroup = cgroups[pid % 3], .period = 1, .n_frames = n,
                                .frames = f,
                        };
                        ASSERT_OK(test_add_sample(s, 1, &smp));
                }
                ASSERT_OK(store_flush_samples(s, S(i / 100 + 10)));
                ASSERT_OK(store_commit(s));
        }
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));

        query_params qs[] = {
                { .pid = -1, .cpu = -1, .want_stacks = true },
                { .pid = -1, .cpu = -1 },
                { .pid = 103, .cpu = -1, .want_stacks = true },
                { .pid = 103, .cpu = -1 },
                { .since_ns = S(50), .until_ns = S(150), .pid = -1, .cpu = 2, .want_stacks = true },
                { .pid = -1, .cpu = -1, .comm = "sh", .want_stacks = true },
                /* perfsnapctl units, and a unit's functions */
                { .pid = -1, .cpu = -1, .by_cgroup = true, .no_comm = true, .cgroup_totals = true },
                { .pid = -1, .cpu = -1, .unit = "*.service" },
                { .pid = -1, .cpu = -1, .by_cgroup = true },   /* no totals unless asked */
                /* units with the filters and modes of query */
                { .pid = -1, .cpu = -1, .by_cgroup = true, .cgroup_totals = true, .frames = QUERY_FRAMES_KERNEL },
                { .pid = -1, .cpu = -1, .by_cgroup = true, .no_comm = true, .cgroup_totals = true,
                  .frames = QUERY_FRAMES_USER },
                { .pid = -1, .cpu = -1, .by_cgroup = true, .cgroup_totals = true, .offsets = true },
                { .pid = -1, .cpu = -1, .by_cgroup = true, .cgroup_totals = true, .dso = "cc1" },
                { .since_ns = S(0), .until_ns = S(250), .pid = -1, .cpu = -1, .by_cgroup = true, .cgroup_totals = true,
                  .timeline = 7 },
        };
        for (size_t i = 0; i < ELEMENTSOF(qs); i++)
                for (uint32_t max_stacks = 0; max_stacks <= 100; max_stacks += 100) {
                        store_set_query_group_slots(s, STORE_QUERY_GROUP_SLOTS_DEFAULT);
                        query_result *one = run_query(s, qs + i, 0, max_stacks);
                        store_set_query_group_slots(s, 64);
                        query_result *parts = run_query(s, qs + i, 0, max_stacks);

                        fprintf(stderr, "query %zu, max_stacks %u: %llu samples, %zu rows, %zu stacks; %u and %u passes\n", i,
                                max_stacks, (unsigned long long) one->total_samples, one->n_rows, one->n_stacks,
                                one->passes, parts->passes);
                        ASSERT_EQ(one->passes, 1);
                        /* Rows only: a full table is named into rows
                         * as the one pass goes (1466 rows through a table
                         * of 48 groups). */
                        if (qs[i].want_stacks)
                                ASSERT_GT(parts->passes, 4);
                        else
                                ASSERT_EQ(parts->passes, 1);
                        ASSERT_GT(one->total_samples, 100);
                        assert_same_rows(one, parts);
                        if (qs[i].cgroup_totals)
                                assert_cgroup_totals(s, qs + i, one, parts);
                        else
                                ASSERT_EQ(one->n_cgroup_totals, 0);
                        ASSERT_U64_EQ(one->first_ns, parts->first_ns);
                        ASSERT_U64_EQ(one->last_ns, parts->last_ns);
                        ASSERT_EQ(one->n_cpus, parts->n_cpus);
                        /* With a cap, stacks whose leaves are other offsets
                         * of one function are merged before the most
                         * frequent are chosen, within each part: a class
                         * whose stacks fall in different parts is counted in
                         * pieces. So in parts, a capped answer may differ:
                         * each of its stacks is one of the window's, with at
                         * most its samples (checked below). */
                        bool exact = max_stacks == 0 || !qs[i].want_stacks;
                        if (exact)
                                ASSERT_EQ(one->n_stacks, parts->n_stacks);
                        if (qs[i].want_stacks) {
                                /* The top max_stacks stack ids, then those whose
                                 * names read the same merged into one line. */
                                ASSERT_GE(one->n_stacks, 50u);
                                ASSERT_TRUE(max_stacks == 0 || count_stacks(one, false) <= max_stacks);
                                /* What the cap leaves out is "[other stacks]"
                                 * of each comm: the stacks add up to the total. */
                                ASSERT_LE(count_stacks(one, true), 5);
                                ASSERT_U64_EQ(stacks_samples(one), one->total_samples);
                                ASSERT_U64_EQ(stacks_samples(parts), parts->total_samples);
                        }
                        if (!exact) {
                                store_set_query_group_slots(s, STORE_QUERY_GROUP_SLOTS_DEFAULT);
                                query_result *all = run_query(s, qs + i, 0, 0);

                                ASSERT_LE(count_stacks(parts, false), max_stacks);
                                for (size_t k = 0; k < parts->n_stacks; k++) {
                                        const query_stack *b = parts->stacks + k;
                                        size_t x = 0;

                                        if (query_stack_is_other(b))
                                                continue;

                                        while (x < all->n_stacks && stack_names_differ(all->stacks + x, b))
                                                x++;
                                        ASSERT_LT(x, all->n_stacks);
                                        ASSERT_LE(b->samples, all->stacks[x].samples);
                                }
                                query_result_free(all);
                        }
                        if (exact)
                                assert_same_stacks(one, parts);
                        /* A table that needs tens of parts: stacks are read
                         * in parts by ranges of stack ids, all of which
                         * fit (no fallback to parts by hash). */
                        store_set_query_group_slots(s, 2048);
                        query_result *ranges = run_query(s, qs + i, 0, max_stacks);
                        fprintf(stderr, "  2048 slots: %u passes\n", ranges->passes);
                        assert_same_rows(one, ranges);
                        ASSERT_U64_EQ(one->total_samples, ranges->total_samples);
                        if (exact)
                                assert_same_stacks(one, ranges);
                        if (qs[i].want_stacks && one->n_stacks > 2000 && max_stacks == 0)
                                ASSERT_TRUE(ranges->passes > 2 && ranges->passes <= 2 + 64);
                        query_result_free(ranges);
                        query_result_free(one);
                        query_result_free(parts);
                }

        /* Stacks told apart by process need more than 64 reads of the
         * window at 64 slots: refused, not read 1029 times. */
        query_params split = { .pid = -1, .cpu = -1, .want_stacks = true, .by_pid = true };
        query_result *none = NULL;
        store_set_query_group_slots(s, 64);
        ASSERT_ERROR(store_query(s, &split, 0, 100, &none), ERANGE);
        store_set_query_group_slots(s, STORE_QUERY_GROUP_SLOTS_DEFAULT);
        none = run_query(s, &split, 0, 100);
        ASSERT_GT(none->n_stacks, 50u);
        query_result_free(none);
}
