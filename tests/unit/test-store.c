/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The store (common/store/): schema and opening, interning, queries,
 * lost counts, retention, statistics, concurrency with a reader, crashes
 * and checkpoints. */
#include "test-store.h"
#include "timeparse.h"

TEST(schema_version_and_wal) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));

        ASSERT_EQ(sql_int(t.db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        /* WAL is a property of the file: a plain connection sees it. */
        ASSERT_EQ(sql_int(t.db, "SELECT journal_mode = 'wal' FROM pragma_journal_mode"), 1);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN "
                                "('strings', 'frame_blocks', 'stack_blocks', 'boots', 'sample_blocks', 'sample_meta', 'lost')"), 7);

        /* Reopening an up-to-date file migrates nothing and succeeds. */
        s = store_free(s);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_EQ(sql_int(t.db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
}

TEST(future_schema_is_refused) {
        _cleanup_tmpdir_ tmpdir t;
        store *s = NULL;
        sqlite3 *db;

        tmpdir_make(&t);
        ASSERT_EQ(sqlite3_open(t.db, &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE x(y); PRAGMA user_version = 99;", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);

        ASSERT_ERROR(store_open(t.db, STORE_READWRITE, &s), EPROTO);
        ASSERT_NULL(s);
        ASSERT_ERROR(store_open(t.db, STORE_READONLY, &s), EPROTO);
        ASSERT_NULL(s);
        /* And the newer file was left alone. */
        ASSERT_EQ(sql_int(t.db, "PRAGMA user_version"), 99);
}

TEST(open_errors) {
        _cleanup_tmpdir_ tmpdir t;
        char path[256];
        store *s = NULL;
        int fd;

        tmpdir_make(&t);

        /* A reader never creates the database. */
        ASSERT_ERROR(store_open(t.db, STORE_READONLY, &s), ENOENT);
        ASSERT_NULL(s);
        ASSERT_TRUE(access(t.db, F_OK) < 0 && errno == ENOENT);

        snprintf(path, sizeof(path), "%s/garbage.db", t.dir);
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ASSERT_GE(fd, 0);
        char junk[4096];
        memset(junk, 'J', sizeof(junk));
        ASSERT_EQ(write(fd, junk, sizeof(junk)), (ssize_t) sizeof(junk));
        close(fd);
        ASSERT_ERROR(store_open(path, STORE_READWRITE, &s), EBADMSG);
        ASSERT_ERROR(store_open(path, STORE_READONLY, &s), EBADMSG);
        ASSERT_NULL(s);

        ASSERT_ERROR(store_open(NULL, STORE_READWRITE, &s), EINVAL);
}

TEST(readonly_refuses_writes) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *w = NULL, *r = NULL;
        int64_t id;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &w));
        ASSERT_OK(store_open(t.db, STORE_READONLY, &r));

        ASSERT_ERROR(store_begin(r), EROFS);
        ASSERT_ERROR(store_intern_string(r, "x", &id), EROFS);
        ASSERT_ERROR(store_add_lost(r, T0, 0, 1), EROFS);
        ASSERT_ERROR(store_expire(r, T0, NULL), EROFS);
}

TEST(interning_is_idempotent_across_reopen) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        int64_t str_a, str_b, f1, f2, f3, f4, f5, st1, st2, st3, id, boot1, boot2;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));

        ASSERT_OK(store_intern_string(s, "alpha", &str_a));
        ASSERT_OK(store_intern_string(s, "beta", &str_b));
        ASSERT_GT(str_a, 0);
        ASSERT_NE(str_a, str_b);
        ASSERT_OK(store_intern_string(s, "alpha", &id));
        ASSERT_EQ(id, str_a);

        ASSERT_OK(store_intern_frame(s, &K_MEMCPY_10, &f1));
        ASSERT_OK(store_intern_frame(s, &K_MEMCPY_20, &f2));    /* same symbol, other offset */
        ASSERT_OK(store_intern_frame(s, &U_LIBC, &f3));
        /* NULL and "" are different values for a frame's module. */
        frame empty_module = U_NOMAP;
        empty_module.module = "";
        ASSERT_OK(store_intern_frame(s, &U_NOMAP, &f4));
        ASSERT_OK(store_intern_frame(s, &empty_module, &f5));
        ASSERT_NE(f1, f2);
        ASSERT_NE(f4, f5);
        ASSERT_OK(store_intern_frame(s, &K_MEMCPY_10, &id));
        ASSERT_EQ(id, f1);

        /* A frame equal in content but built from other string buffers. */
        char sym[] = "memcpy", mod[] = MODULE_KERNEL, bid[] = "ab12";
        frame copy = { FRAME_KERNEL, K_MEMCPY_10.addr, sym, 0x10, mod, bid };
        ASSERT_OK(store_intern_frame(s, &copy, &id));
        ASSERT_EQ(id, f1);

        ASSERT_OK(store_intern_stack(s, 0, f1, &st1));
        ASSERT_OK(store_intern_stack(s, st1, f2, &st2));
        ASSERT_OK(store_intern_stack(s, 0, f2, &st3));
        ASSERT_NE(st2, st3);
        ASSERT_OK(store_intern_stack(s, st1, f2, &id));
        ASSERT_EQ(id, st2);

        ASSERT_OK(store_add_boot(s, "uuid-1", "ab12", 0xffffffff81000000ULL, "6.1.0", T0, &boot1));
        ASSERT_OK(store_add_boot(s, "uuid-1", "ab12", 0xffffffff81000000ULL, "6.1.0", T0 + 5, &id));
        ASSERT_EQ(id, boot1);
        ASSERT_OK(store_add_boot(s, "uuid-1", "ab12", 0xffffffff9a000000ULL, NULL, T0, &boot2));
        ASSERT_NE(boot1, boot2);

        ASSERT_ERROR(store_intern_frame(s, &(frame) { .kind = 7 }, &id), EINVAL);
        ASSERT_ERROR(store_intern_stack(s, 0, 0, &id), EINVAL);

        /* Reopen: the caches are empty, so this exercises the SELECT path. */
        s = store_free(s);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));

        ASSERT_OK(store_intern_string(s, "beta", &id));
        ASSERT_EQ(id, str_b);
        ASSERT_OK(store_intern_frame(s, &K_MEMCPY_20, &id));
        ASSERT_EQ(id, f2);
        ASSERT_OK(store_intern_frame(s, &empty_module, &id));
        ASSERT_EQ(id, f5);
        ASSERT_OK(store_intern_frame(s, &U_LIBC, &id));
        ASSERT_EQ(id, f3);
        ASSERT_OK(store_intern_stack(s, st1, f2, &id));
        ASSERT_EQ(id, st2);
        ASSERT_OK(store_add_boot(s, "uuid-1", "ab12", 0xffffffff81000000ULL, "6.1.0", T0, &id));
        ASSERT_EQ(id, boot1);

        /* Nothing was interned twice. 2 strings + symbol, 2 modules, "",
         * build id: "alpha" "beta" "memcpy" "[kernel.kallsyms]" "ab12"
         * "/usr/.../libc.so.6" "". */
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM strings"), 7);
        ASSERT_EQ(sql_int(t.db, "SELECT coalesce(sum(n), 0) FROM frame_blocks"), 5);
        ASSERT_EQ(sql_int(t.db, "SELECT coalesce(sum(n), 0) FROM stack_blocks"), 3);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM boots"), 2);

        /* Addresses round trip through int64 (the kernel one is negative)
         * and the frame's block. */
        int64_t v[6];
        ASSERT_TRUE(frame_in_file(t.db, f1, v));
        ASSERT_U64_EQ((uint64_t) v[1], K_MEMCPY_10.addr);
        ASSERT_LT(v[1], 0);
}

/* The symbolizer interns a new offset of a mapped file by its strings'
 * ids: the frame must be the one its strings make. */
TEST(file_frames_are_the_frames_of_their_strings) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const char *path = "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13";
        const frame with_bid = { FRAME_USER, 0x2a40, NULL, 0x2a40, path, "5f0c1e" };
        const frame without = { FRAME_USER, 0x2a40, NULL, 0x2a40, path, NULL };
        const frame later = { FRAME_USER, 0x9000, NULL, 0x9000, path, "5f0c1e" };
        int64_t p, b, f1, f2, f3, id;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_OK(store_intern_frame(s, &with_bid, &f1));
        ASSERT_OK(store_intern_frame(s, &without, &f2));
        ASSERT_NE(f1, f2);
        ASSERT_OK(store_intern_string(s, path, &p));
        ASSERT_OK(store_intern_string(s, "5f0c1e", &b));

        ASSERT_OK(store_intern_file_frame(s, 0x2a40, p, b, &id));
        ASSERT_EQ(id, f1);
        ASSERT_OK(store_intern_file_frame(s, 0x2a40, p, 0, &id));
        ASSERT_EQ(id, f2);
        /* A new one first by its strings' ids, then by its strings. */
        ASSERT_OK(store_intern_file_frame(s, 0x9000, p, b, &f3));
        ASSERT_NE(f3, f1);
        ASSERT_OK(store_intern_frame(s, &later, &id));
        ASSERT_EQ(id, f3);

        ASSERT_ERROR(store_intern_file_frame(s, 0x9000, 0, b, &id), EINVAL);
        ASSERT_ERROR(store_intern_file_frame(s, 0x9000, p, -1, &id), EINVAL);

        /* Written as one frame each, found again after a reopen. */
        s = store_free(s);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_OK(store_intern_file_frame(s, 0x9000, p, b, &id));
        ASSERT_EQ(id, f3);
        ASSERT_OK(store_intern_frame(s, &with_bid, &id));
        ASSERT_EQ(id, f1);
        ASSERT_EQ(sql_int(t.db, "SELECT coalesce(sum(n), 0) FROM frame_blocks"), 3);

        int64_t v[6];
        ASSERT_TRUE(frame_in_file(t.db, f3, v));
        ASSERT_EQ(v[0], FRAME_USER);
        ASSERT_EQ(v[1], 0x9000);
        ASSERT_EQ(v[2], 0);
        ASSERT_EQ(v[3], 0x9000);
        ASSERT_EQ(v[4], p);
        ASSERT_EQ(v[5], b);
}

TEST(rollback_forgets_cached_ids) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        int64_t id1, id2, f;
        char sql[128];

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));

        ASSERT_OK(store_begin(s));
        ASSERT_ERROR(store_begin(s), EBUSY);
        ASSERT_OK(store_intern_string(s, "gone", &id1));
        ASSERT_OK(store_intern_frame(s, &K_OPEN, &f));
        ASSERT_OK(store_rollback(s));
        ASSERT_ERROR(store_commit(s), EINVAL);

        /* The cache must not answer with the rolled-back ids: the string
         * has to exist in the file under the id returned now. */
        ASSERT_OK(store_intern_string(s, "gone", &id2));
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM strings WHERE id = %" PRId64 " AND s = 'gone'", id2);
        ASSERT_EQ(sql_int(t.db, sql), 1);
        ASSERT_OK(store_intern_frame(s, &K_OPEN, &f));
        int64_t v[6];
        ASSERT_TRUE(frame_in_file(t.db, f, v));
        ASSERT_EQ(v[0], FRAME_KERNEL);
}

/* The data set of the query tests; times S(1)..12. */
static void fill_query_data(store *s) {
        const frame c1[] = { K_MEMCPY_10, K_ENTRY };
        const frame c2[] = { K_MEMCPY_20, K_ENTRY };
        const frame c3[] = { U_LIBC };
        const frame d1[] = { K_BRD, K_ENTRY };
        const frame n1[] = { K_NOSYM };

        ASSERT_OK(store_begin(s));
        add(s, S(1), 0, 100, "cat", c1, 2);
        add(s, S(2), 0, 100, "cat", c1, 2);
        add(s, S(3), 0, 100, "cat", c1, 2);
        add(s, S(4), 0, 100, "cat", c2, 2);
        add(s, S(5), 0, 100, "cat", c2, 2);
        add(s, S(6), 1, 100, "cat", c3, 1);
        add(s, S(7), 1, 200, "dd", d1, 2);
        add(s, S(8), 1, 200, "dd", d1, 2);
        add(s, S(9), 1, 200, "dd", d1, 2);
        add(s, S(10), 1, 200, "dd", d1, 2);
        add(s, S(11), 3, 0, NULL, NULL, 0);
        add(s, S(12), 3, 300, "kworker/0:1", n1, 1);
        ASSERT_OK(store_add_lost(s, S(3), 0, 7));
        ASSERT_OK(store_add_lost(s, S(8), 1, 5));
        ASSERT_OK(store_add_lost(s, S(20), 1, 100));
        ASSERT_OK(store_commit(s));
}

TEST(query_round_trip_and_filters) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        query_result *r;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        fill_query_data(s);

        /* Everything. */
        query_params q = QUERY_PARAMS_INIT;
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->total_samples, 12);
        ASSERT_U64_EQ(r->first_ns, S(1));
        ASSERT_U64_EQ(r->last_ns, S(12));
        ASSERT_EQ(r->n_cpus, 3);
        ASSERT_EQ(r->lost, 112);
        ASSERT_EQ(r->n_rows, 5);
        ASSERT_EQ(r->n_stacks, 0);
        /* memcpy+0x10 and memcpy+0x20 are one row. Ties at 1 by comm:
         * "[unknown]" < "cat" < "kworker/0:1" in byte order. */
        assert_row(r, 0, "cat", MODULE_KERNEL, "memcpy", 5);
        ASSERT_TRUE(r->rows[0].kernel);
        assert_row(r, 1, "dd", "[brd]", "brd_submit_bio", 4);
        assert_row(r, 2, "[unknown]", "[unknown]", "[unknown]", 1);
        ASSERT_TRUE(!r->rows[2].kernel);
        assert_row(r, 3, "cat", "/usr/lib/x86_64-linux-gnu/libc.so.6", "libc.so.6+0x1234", 1);
        ASSERT_TRUE(!r->rows[3].kernel);
        assert_row(r, 4, "kworker/0:1", "[unknown]", "0xffffffffc0001234", 1);
        ASSERT_TRUE(r->rows[4].kernel);
        query_result_free(r);

        /* pid */
        q = (query_params) QUERY_PARAMS_INIT;
        q.pid = 200;
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->total_samples, 4);
        ASSERT_EQ(r->n_rows, 1);
        assert_row(r, 0, "dd", "[brd]", "brd_submit_bio", 4);
        ASSERT_EQ(r->lost, 112);        /* pid does not filter lost records */
        query_result_free(r);

        /* cpu: filters samples and lost records */
        q = (query_params) QUERY_PARAMS_INIT;
        q.cpu = 1;
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->total_samples, 5);
        ASSERT_EQ(r->n_cpus, 1);
        ASSERT_U64_EQ(r->first_ns, S(6));
        ASSERT_U64_EQ(r->last_ns, S(10));
        ASSERT_EQ(r->lost, 105);
        ASSERT_EQ(r->n_rows, 2);
        assert_row(r, 0, "dd", "[brd]", "brd_submit_bio", 4);
        assert_row(r, 1, "cat", "/usr/lib/x86_64-linux-gnu/libc.so.6", "libc.so.6+0x1234", 1);
        query_result_free(r);

        /* comm: exact match only */
        q = (query_params) QUERY_PARAMS_INIT;
        q.comm = "cat";
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->total_samples, 6);
        ASSERT_EQ(r->n_cpus, 2);
        ASSERT_EQ(r->n_rows, 2);
        query_result_free(r);

        q.comm = "ca";
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->total_samples, 0);
        ASSERT_EQ(r->n_rows, 0);
        ASSERT_U64_EQ(r->first_ns, 0);
        ASSERT_EQ(r->lost, 112);
        query_result_free(r);

        /* time: [since, until) */
        q = (query_params) QUERY_PARAMS_INIT;
        q.since_ns = S(3);
        q.until_ns = S(8);
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->total_samples, 5);         /* T0+3 .. T0+7 */
        ASSERT_U64_EQ(r->first_ns, S(3));
        ASSERT_U64_EQ(r->last_ns, S(7));
        ASSERT_EQ(r->lost, 7);                  /* T0+3 in, T0+8 out */
        assert_row(r, 0, "cat", MODULE_KERNEL, "memcpy", 3);
        query_result_free(r);

        q.until_ns = 0;
        q.since_ns = S(11);
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->total_samples, 2);
        ASSERT_EQ(r->lost, 100);
        query_result_free(r);

        /* Everything combined. */
        q = (query_params) QUERY_PARAMS_INIT;
        q.since_ns = S(2);
        q.until_ns = S(9);
        q.pid = 100;
        q.cpu = 0;
        q.comm = "cat";
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->total_samples, 4);
        ASSERT_EQ(r->lost, 7);
        ASSERT_EQ(r->n_rows, 1);
        assert_row(r, 0, "cat", MODULE_KERNEL, "memcpy", 4);
        query_result_free(r);

        /* An empty window is not an error; an inverted one is. */
        q = (query_params) QUERY_PARAMS_INIT;
        q.since_ns = S(100);
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->total_samples, 0);
        ASSERT_EQ(r->n_cpus, 0);
        query_result_free(r);
        q.until_ns = S(50);
        r = NULL;
        ASSERT_ERROR(store_query(s, &q, 0, 0, &r), EINVAL);
        ASSERT_NULL(r);
}

/* A query past its deadline stops with -ETIME and no answer; one before
 * it answers as without one. */
TEST(query_deadline) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        query_result *r = NULL;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        fill_query_data(s);

        for (int stacks = 0; stacks < 2; stacks++) {
                query_params q = QUERY_PARAMS_INIT;

                q.want_stacks = stacks;
                q.deadline_ns = clock_ns(CLOCK_MONOTONIC) - 1;
                ASSERT_ERROR(store_query(s, &q, 0, 0, &r), ETIME);
                ASSERT_TRUE(r == NULL);

                q.deadline_ns = clock_ns(CLOCK_MONOTONIC) + 3600 * NSEC_PER_SEC;
                r = run_query(s, &q, 0, 0);
                ASSERT_EQ(r->total_samples, 12);
                ASSERT_EQ(r->n_rows, 5);
                ASSERT_EQ(r->n_stacks, stacks ? 5 : 0);
                query_result_free(r);
                r = NULL;
        }
}

TEST(query_ordering_ties_and_top) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame fa[] = { { FRAME_KERNEL, 0xffffffff81000010ULL, "a_func", 0, MODULE_KERNEL, NULL } };
        const frame fb[] = { { FRAME_KERNEL, 0xffffffff81000020ULL, "b_func", 0, MODULE_KERNEL, NULL } };
        const frame fm[] = { { FRAME_KERNEL, 0xffffffffc0000020ULL, "a_func", 0, "[amod]", NULL } };
        query_result *r;
        uint64_t tm = T0;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));

        /* Insert in an order unrelated to the expected one. Six rows of
         * 2 samples each, one of 3. */
        ASSERT_OK(store_begin(s));
        for (int i = 0; i < 2; i++) {
                add(s, ++tm, 0, 1, "zed", fa, 1);
                add(s, ++tm, 0, 1, "abc", fb, 1);
                add(s, ++tm, 0, 1, "abc", fa, 1);
                add(s, ++tm, 0, 1, "abc", fm, 1);
                add(s, ++tm, 0, 1, "mid", fb, 1);
                add(s, ++tm, 0, 1, "mid", fa, 1);
        }
        add(s, ++tm, 0, 1, "zed", fb, 1);
        add(s, ++tm, 0, 1, "zed", fb, 1);
        add(s, ++tm, 0, 1, "zed", fb, 1);
        ASSERT_OK(store_commit(s));

        query_params q = QUERY_PARAMS_INIT;
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->n_rows, 7);
        assert_row(r, 0, "zed", MODULE_KERNEL, "b_func", 3);
        /* samples desc, then comm, module ("[amod]" < "[kernel.kallsyms]"), symbol */
        assert_row(r, 1, "abc", "[amod]", "a_func", 2);
        assert_row(r, 2, "abc", MODULE_KERNEL, "a_func", 2);
        assert_row(r, 3, "abc", MODULE_KERNEL, "b_func", 2);
        assert_row(r, 4, "mid", MODULE_KERNEL, "a_func", 2);
        assert_row(r, 5, "mid", MODULE_KERNEL, "b_func", 2);
        assert_row(r, 6, "zed", MODULE_KERNEL, "a_func", 2);
        query_result_free(r);

        /* top limits rows, not the totals. */
        q.top = 3;
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->n_rows, 3);
        ASSERT_EQ(r->total_samples, 15);
        assert_row(r, 2, "abc", MODULE_KERNEL, "a_func", 2);
        query_result_free(r);

        /* The server cap wins over a larger top, and applies to top = 0. */
        q.top = 5;
        r = run_query(s, &q, 2, 0);
        ASSERT_EQ(r->n_rows, 2);
        query_result_free(r);
        q.top = 0;
        r = run_query(s, &q, 4, 0);
        ASSERT_EQ(r->n_rows, 4);
        assert_row(r, 3, "abc", MODULE_KERNEL, "b_func", 2);
        query_result_free(r);
        q.top = 1;
        r = run_query(s, &q, 4, 0);
        ASSERT_EQ(r->n_rows, 1);
        assert_row(r, 0, "zed", MODULE_KERNEL, "b_func", 3);
        query_result_free(r);
}

static void assert_frames(const query_stack *st, const char *const *want, size_t n) {
        ASSERT_EQ(st->n_frames, n);
        for (size_t i = 0; i < n; i++)
                ASSERT_STREQ(st->frames[i], want[i]);
}

TEST(query_stacks) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        /* leaf first, as perf delivers them */
        const frame full[] = { K_OPEN, K_NOSYM, K_ENTRY, U_LIBC, U_NOMAP };
        const frame abc[] = { K_MEMCPY_10, K_BRD, K_ENTRY };
        const frame axc[] = { K_MEMCPY_10, K_OPEN, K_ENTRY };
        store_stats stats;
        query_result *r;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));

        ASSERT_OK(store_begin(s));
        add(s, S(1), 0, 1, "sh", full, 5);
        add(s, S(2), 0, 1, "sh", full, 5);
        add(s, S(3), 0, 1, "sh", full, 5);
        /* abc, then axc diverging in the middle, then abc again: the
         * second abc must land on the first one's node, not on axc's. */
        add(s, S(4), 0, 2, "io", abc, 3);
        add(s, S(5), 0, 2, "io", axc, 3);
        add(s, S(6), 0, 2, "io", abc, 3);
        add(s, S(7), 0, 2, "io", NULL, 0);
        /* Same stack, other comm: a separate stack entry. */
        add(s, S(8), 0, 3, "cp", abc, 3);
        ASSERT_OK(store_commit(s));

        /* Trie nodes: full = 5; abc = 3; axc shares entry_SYSCALL_64 = 2. */
        ASSERT_OK(store_get_stats(s, &stats));
        ASSERT_EQ(stats.n_stacks, 10);

        query_params q = QUERY_PARAMS_INIT;
        q.want_stacks = true;
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->n_stacks, 5);

        static const char *const want_full[] = {
                "0x401000", "libc.so.6+0x1234", "entry_SYSCALL_64", "0xffffffffc0001234", "do_sys_open",
        };
        static const char *const want_abc[] = { "entry_SYSCALL_64", "brd_submit_bio", "memcpy" };
        static const char *const want_axc[] = { "entry_SYSCALL_64", "do_sys_open", "memcpy" };

        ASSERT_STREQ(r->stacks[0].comm, "sh");
        ASSERT_EQ(r->stacks[0].samples, 3);
        assert_frames(&r->stacks[0], want_full, ELEMENTSOF(want_full));
        ASSERT_STREQ(r->stacks[1].comm, "io");
        ASSERT_EQ(r->stacks[1].samples, 2);
        assert_frames(&r->stacks[1], want_abc, ELEMENTSOF(want_abc));
        /* Ties at 1: by comm, then frames: "cp" < "io"; then in "io" the
         * empty stack sorts before any frames, then brd < do_sys_open. */
        ASSERT_STREQ(r->stacks[2].comm, "cp");
        assert_frames(&r->stacks[2], want_abc, ELEMENTSOF(want_abc));
        ASSERT_STREQ(r->stacks[3].comm, "io");
        ASSERT_EQ(r->stacks[3].n_frames, 0);
        ASSERT_STREQ(r->stacks[4].comm, "io");
        assert_frames(&r->stacks[4], want_axc, ELEMENTSOF(want_axc));
        ASSERT_EQ(r->stacks[4].samples, 1);

        /* Rows still group by leaf symbol: memcpy in io (2 + 1). */
        assert_row(r, 0, "io", MODULE_KERNEL, "memcpy", 3);
        assert_row(r, 1, "sh", MODULE_KERNEL, "do_sys_open", 3);
        query_result_free(r);

        /* max_stacks keeps the most frequent; the samples of the others
         * are a stack "[other stacks]" per comm: io's axc and empty stack,
         * cp's abc. */
        r = run_query(s, &q, 0, 2);
        ASSERT_EQ(r->n_stacks, 4);
        ASSERT_EQ(r->stacks[0].samples, 3);
        ASSERT_STREQ(r->stacks[0].comm, "sh");
        ASSERT_EQ(r->stacks[1].samples, 2);
        ASSERT_STREQ(r->stacks[1].comm, "io");
        ASSERT_STREQ(r->stacks[1].frames[0], "[other stacks]");
        ASSERT_EQ(r->stacks[1].n_frames, 1);
        ASSERT_EQ(r->stacks[2].samples, 2);
        assert_frames(&r->stacks[2], want_abc, ELEMENTSOF(want_abc));
        ASSERT_EQ(r->stacks[3].samples, 1);
        ASSERT_STREQ(r->stacks[3].comm, "cp");
        ASSERT_STREQ(r->stacks[3].frames[0], "[other stacks]");
        query_result_free(r);

        /* Stacks follow the filters. */
        q.comm = "cp";
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->n_stacks, 1);
        assert_frames(&r->stacks[0], want_abc, ELEMENTSOF(want_abc));
        query_result_free(r);

        /* User frames only: sh's kernel time goes to the user frame that
         * entered the kernel (libc); io's samples have none: [unknown].
         * Stacks lose their kernel part. */
        q = (query_params) QUERY_PARAMS_INIT;
        q.want_stacks = true;
        q.frames = QUERY_FRAMES_USER;
        r = run_query(s, &q, 0, 0);
        static const char *const want_full_user[] = { "0x401000", "libc.so.6+0x1234" };
        ASSERT_EQ(r->n_rows, 3);
        assert_row(r, 0, "io", "[unknown]", "[unknown]", 4);
        assert_row(r, 1, "sh", "/usr/lib/x86_64-linux-gnu/libc.so.6", "libc.so.6+0x1234", 3);
        assert_row(r, 2, "cp", "[unknown]", "[unknown]", 1);
        ASSERT_STREQ(r->stacks[0].comm, "io");
        ASSERT_EQ(r->stacks[0].n_frames, 0);
        ASSERT_EQ(r->stacks[0].samples, 4);
        ASSERT_STREQ(r->stacks[1].comm, "sh");
        assert_frames(&r->stacks[1], want_full_user, ELEMENTSOF(want_full_user));
        query_result_free(r);

        /* One module: rows of [brd] only ("brd" names "[brd]"), stacks
         * through it (abc in io and cp). */
        q = (query_params) QUERY_PARAMS_INIT;
        q.want_stacks = true;
        q.dso = "brd";
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->n_rows, 0);        /* brd is in the middle of abc, no leaf */
        ASSERT_EQ(r->n_stacks, 2);
        assert_frames(&r->stacks[0], want_abc, ELEMENTSOF(want_abc));
        assert_frames(&r->stacks[1], want_abc, ELEMENTSOF(want_abc));
        ASSERT_EQ(r->total_samples, 8);       /* still all samples */
        query_result_free(r);
        /* By the path's last component, for a user file: sh's stack. */
        q.dso = "libc.so.6";
        q.frames = QUERY_FRAMES_USER;
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->n_rows, 1);
        assert_row(r, 0, "sh", "/usr/lib/x86_64-linux-gnu/libc.so.6", "libc.so.6+0x1234", 3);
        ASSERT_EQ(r->n_stacks, 1);
        assert_frames(&r->stacks[0], want_full_user, ELEMENTSOF(want_full_user));
        query_result_free(r);
        q.dso = NULL;

        /* Kernel frames only: the same leaves as before; stacks lose the
         * user part. */
        q.frames = QUERY_FRAMES_KERNEL;
        r = run_query(s, &q, 0, 0);
        static const char *const want_full_kernel[] = { "entry_SYSCALL_64", "0xffffffffc0001234", "do_sys_open" };
        assert_row(r, 0, "io", MODULE_KERNEL, "memcpy", 3);
        assert_row(r, 1, "sh", MODULE_KERNEL, "do_sys_open", 3);
        ASSERT_STREQ(r->stacks[0].comm, "sh");
        assert_frames(&r->stacks[0], want_full_kernel, ELEMENTSOF(want_full_kernel));
        query_result_free(r);
}

/* What exports ask: stacks per pid and CPU, each frame's module, how
 * many frames are the kernel's, and a timeline with stacks per slot. */
TEST(query_stacks_for_exports) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame full[] = { K_OPEN, K_NOSYM, K_ENTRY, U_LIBC, U_NOMAP };
        query_result *r;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_OK(store_begin(s));
        add(s, S(1), 0, 1, "sh", full, 5);
        add(s, S(2), 1, 1, "sh", full, 5);
        add(s, S(3), 0, 2, "sh", full, 5);
        add(s, S(10), 0, 1, "sh", full, 5);
        ASSERT_OK(store_commit(s));

        query_params q = QUERY_PARAMS_INIT;
        q.want_stacks = true;
        q.by_pid = q.by_cpu = q.want_modules = true;
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->n_stacks, 3);
        /* (pid 1, CPU 0) twice, then the others by pid and CPU. */
        ASSERT_EQ(r->stacks[0].samples, 2);
        ASSERT_EQ(r->stacks[0].pid, 1);
        ASSERT_EQ(r->stacks[0].cpu, 0);
        ASSERT_EQ(r->stacks[1].pid, 1);
        ASSERT_EQ(r->stacks[1].cpu, 1);
        ASSERT_EQ(r->stacks[2].pid, 2);
        ASSERT_EQ(r->stacks[2].cpu, 0);
        for (size_t i = 0; i < r->n_stacks; i++) {
                const query_stack *st = &r->stacks[i];

                ASSERT_EQ(st->slot, -1);
                ASSERT_EQ(st->n_frames, 5);
                ASSERT_EQ(st->n_kernel, 3);
                ASSERT_TRUE(st->modules);
                ASSERT_LT(st->modules[1], r->n_modules);
                ASSERT_STREQ(r->modules[st->modules[1]].name, "/usr/lib/x86_64-linux-gnu/libc.so.6");
                ASSERT_TRUE(!r->modules[st->modules[1]].kernel);
                ASSERT_LT(st->modules[4], r->n_modules);
                ASSERT_STREQ(r->modules[st->modules[4]].name, MODULE_KERNEL);
                ASSERT_STREQ(r->modules[st->modules[4]].build_id, "ab12");
                ASSERT_TRUE(r->modules[st->modules[4]].kernel);
        }
        ASSERT_TRUE(r->timeline == NULL);
        query_result_free(r);

        /* 4 slots of 5 s from S(0): samples at 1, 2, 3 and 10 s. */
        q = (query_params) QUERY_PARAMS_INIT;
        q.want_stacks = true;
        q.since_ns = S(0);
        q.until_ns = S(20);
        q.timeline = 4;
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->n_timeline, 4);
        ASSERT_EQ(r->timeline_start_ns, S(0));
        ASSERT_EQ(r->timeline_slot_ns, 5 * NSEC_PER_SEC);
        ASSERT_EQ(r->timeline[0], 3);
        ASSERT_EQ(r->timeline[1], 0);
        ASSERT_EQ(r->timeline[2], 1);
        ASSERT_EQ(r->timeline[3], 0);
        ASSERT_EQ(r->n_stacks, 2);
        ASSERT_EQ(r->stacks[0].slot, 0);
        ASSERT_EQ(r->stacks[0].samples, 3);
        ASSERT_EQ(r->stacks[0].pid, -1);
        ASSERT_TRUE(r->stacks[0].modules == NULL);
        ASSERT_EQ(r->stacks[1].slot, 2);
        ASSERT_EQ(r->stacks[1].samples, 1);
        query_result_free(r);

        /* Without stacks, a timeline alone. */
        q.want_stacks = false;
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->n_timeline, 4);
        ASSERT_EQ(r->timeline[0] + r->timeline[2], 4);
        ASSERT_EQ(r->total_samples, 4);
        query_result_free(r);

        /* Threads: by_tid tells apart two threads of one process (the
         * blocks of seconds keep the thread). */
        const frame k1[] = { K_OPEN, K_ENTRY };
        ASSERT_OK(store_begin(s));
        for (uint32_t k = 0; k < 3; k++) {
                test_sample smp = {
                        .time_ns = S(50) + k, .cpu = 1, .pid = 77, .tid = k == 0 ? 77 : 78, .comm = "mt",
                        .period = 1, .n_frames = 2, .frames = k1,
                };
                ASSERT_OK(test_add_sample(s, 1, &smp));
        }
        ASSERT_OK(store_commit(s));
        q = (query_params) QUERY_PARAMS_INIT;
        q.want_stacks = q.by_tid = true;
        q.comm = "mt";
        q.since_ns = S(49);
        q.until_ns = S(52);
        q.timeline = 3;
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->n_stacks, 2);
        ASSERT_EQ(r->stacks[0].samples, 2);
        ASSERT_EQ(r->stacks[0].tid, 78);
        ASSERT_EQ(r->stacks[0].pid, 77);
        ASSERT_EQ(r->stacks[0].cpu, 1);
        ASSERT_EQ(r->stacks[0].slot, 1);
        ASSERT_EQ(r->stacks[1].tid, 77);
        query_result_free(r);
        q.comm = NULL;

        /* A timeline needs a closed window. */
        q.until_ns = 0;
        ASSERT_ERROR(store_query(s, &q, 0, 0, &r), EINVAL);

        /* Leaves at two offsets of memcpy under the same caller count as
         * one stack when the most frequent are chosen: with room for one,
         * it has both samples, ahead of a single other one. */
        const frame m10[] = { K_MEMCPY_10, K_ENTRY }, m20[] = { K_MEMCPY_20, K_ENTRY }, o[] = { K_OPEN, K_ENTRY };
        ASSERT_OK(store_begin(s));
        add(s, S(30), 0, 5, "cp", m10, 2);
        add(s, S(31), 0, 5, "cp", m20, 2);
        add(s, S(32), 0, 5, "cp", o, 2);
        add(s, S(33), 0, 5, "cp", o, 2);
        add(s, S(34), 0, 5, "cp", m10, 2);
        ASSERT_OK(store_commit(s));
        q = (query_params) QUERY_PARAMS_INIT;
        q.want_stacks = true;
        q.comm = "cp";
        r = run_query(s, &q, 0, 1);
        ASSERT_EQ(r->n_stacks, 2);      /* and cp's "[other stacks]" */
        ASSERT_EQ(r->stacks[0].samples, 3);
        ASSERT_STREQ(r->stacks[0].frames[1], "memcpy");
        ASSERT_EQ(r->stacks[1].samples, 2);
        ASSERT_STREQ(r->stacks[1].frames[0], "[other stacks]");
        query_result_free(r);
}

/* A raw stack and an entry (with its shape) of the shapes answer: the same
 * samples of the same frames in the same thread, CPU and slot. */
static bool stack_is_entry(const query_result *raw, const query_stack *st, const query_result *sh,
                           const query_entry *e) {
        query_stack v = query_entry_stack(sh, e);

        if (strcmp(st->comm, v.comm) != 0 || st->pid != v.pid || st->tid != v.tid || st->cpu != v.cpu ||
            st->slot != v.slot || st->samples != v.samples || st->n_frames != v.n_frames || st->n_kernel != v.n_kernel)
                return false;
        for (size_t j = 0; j < st->n_frames; j++)
                if (st->addrs[j] != v.addrs[j] ||
                    strcmp(raw->modules[st->modules[j]].name, sh->modules[v.modules[j]].name) != 0)
                        return false;
        return true;
}

/* perf.data exports: each distinct stack once (a shape), its samples per
 * comm, thread, CPU and slot as entries; the same samples and addresses
 * as the raw stacks, no rows, and no names. */
TEST(query_shapes_are_the_raw_stacks) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame a[] = { K_OPEN, K_NOSYM, K_ENTRY, U_LIBC, U_NOMAP }, b[] = { K_BRD, K_ENTRY, U_LIBC },
                    c[] = { K_MEMCPY_10, K_ENTRY };
        query_result *raw, *sh;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_OK(store_begin(s));
        for (uint32_t k = 0; k < 40; k++) {
                test_sample smp = {
                        .time_ns = S(k / 4) + k, .cpu = k % 3, .pid = 100 + k % 5, .tid = 100 + k % 5 + (k % 2) * 1000,
                        .comm = k % 5 == 4 ? "cc" : "sh", .period = 1,
                        .cgroup = k % 4 == 0 ? NULL : k % 4 == 1 ? "/system.slice/a.service" : "/b.scope",
                        .n_frames = k % 3 == 0 ? 5 : k % 3 == 1 ? 3 : 2, .frames = k % 3 == 0 ? a : k % 3 == 1 ? b : c,
                };
                ASSERT_OK(test_add_sample(s, 1, &smp));
        }
        ASSERT_OK(store_commit(s));

        query_params q = QUERY_PARAMS_INIT;
        q.since_ns = S(0);
        q.until_ns = S(10);
        q.timeline = 10;
        q.want_stacks = q.by_pid = q.by_cpu = q.by_tid = q.want_modules = q.raw = true;
        raw = run_query(s, &q, 0, 0);
        q.shapes = true;
        sh = run_query(s, &q, 0, 0);

        ASSERT_U64_EQ(sh->total_samples, 40);
        ASSERT_EQ(sh->n_rows, 0);
        ASSERT_EQ(sh->n_stacks, 0);
        ASSERT_EQ(sh->n_shapes, 3);     /* a, b and c */
        ASSERT_EQ(sh->n_comms, 2);
        ASSERT_EQ(sh->n_entries, raw->n_stacks);
        for (size_t i = 0; i < sh->n_shapes; i++)
                ASSERT_NULL(sh->shapes[i].frames);
        uint64_t total = 0;
        for (size_t i = 0; i < raw->n_stacks; i++) {
                size_t found = 0;

                for (size_t j = 0; j < sh->n_entries; j++)
                        found += stack_is_entry(raw, &raw->stacks[i], sh, &sh->entries[j]);
                if (found != 1)
                        TEST_FAIL_("raw stack %zu (pid %lld tid %lld cpu %d slot %d, %zu frames): %zu entries match", i,
                                   (long long) raw->stacks[i].pid, (long long) raw->stacks[i].tid, raw->stacks[i].cpu,
                                   raw->stacks[i].slot, raw->stacks[i].n_frames, found);
                total += raw->stacks[i].samples;
        }
        ASSERT_U64_EQ(total, 40);
        query_result_free(sh);

        /* Told apart by cgroup: each entry's cgroup is its samples'. */
        q.by_cgroup = true;
        sh = run_query(s, &q, 0, 0);
        ASSERT_EQ(sh->n_cgroups, 2);
        total = 0;
        for (size_t j = 0; j < sh->n_entries; j++) {
                const query_entry *e = &sh->entries[j];

                ASSERT_LE(e->cgroup, sh->n_cgroups);
                if (e->cgroup > 0 && strcmp(sh->cgroups[e->cgroup - 1], "/b.scope") == 0)
                        total += e->samples;
        }
        ASSERT_U64_EQ(total, 20);       /* k % 4 == 2 or 3 of 0..39 */
        query_result_free(sh);
        q.by_cgroup = false;

        /* A module's stacks only: the shapes through [brd]. */
        q.dso = "brd";
        sh = run_query(s, &q, 0, 0);
        ASSERT_EQ(sh->n_shapes, 1);
        total = 0;
        for (size_t j = 0; j < sh->n_entries; j++)
                total += sh->entries[j].samples;
        ASSERT_U64_EQ(total, 13);       /* k % 3 == 1 of 0..39 */
        query_result_free(sh);
        q.dso = NULL;

        /* Past the cap, the rest are "[other stacks]" stacks. */
        sh = run_query(s, &q, 0, 5);
        ASSERT_EQ(sh->n_entries, 5);
        ASSERT_GE(sh->n_stacks, 1);
        total = 0;
        for (size_t j = 0; j < sh->n_entries; j++)
                total += sh->entries[j].samples;
        for (size_t j = 0; j < sh->n_stacks; j++) {
                ASSERT_TRUE(query_stack_is_other(&sh->stacks[j]));
                total += sh->stacks[j].samples;
        }
        ASSERT_U64_EQ(total, 40);
        query_result_free(sh);
        query_result_free(raw);
}

TEST(stack_cache_follows_content_not_pointers) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        char sym[32], mod[32];
        query_result *r;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));

        /* The symbolizer may reuse a buffer (e.g. after a module unload):
         * the same pointers with other text are another stack. */
        snprintf(sym, sizeof(sym), "first_func");
        snprintf(mod, sizeof(mod), "[modA]");
        frame f[2] = {
                { FRAME_KERNEL, 0xffffffffc0000010ULL, sym, 0x10, mod, NULL },
                { FRAME_KERNEL, 0xffffffffc0000100ULL, "caller", 0x0, mod, NULL },
        };
        ASSERT_OK(store_begin(s));
        add(s, S(1), 0, 1, "x", f, 2);
        snprintf(sym, sizeof(sym), "other_func");
        add(s, S(2), 0, 1, "x", f, 2);
        snprintf(mod, sizeof(mod), "[modB]");
        add(s, S(3), 0, 1, "x", f, 2);

        /* The same text from other buffers, and with different pointer
         * sharing between frames, is the same stack. */
        char sym2[] = "first_func", mod2[] = "[modA]", mod3[] = "[modA]";
        frame g[2] = {
                { FRAME_KERNEL, 0xffffffffc0000010ULL, sym2, 0x10, mod2, NULL },
                { FRAME_KERNEL, 0xffffffffc0000100ULL, "caller", 0x0, mod3, NULL },
        };
        add(s, S(4), 0, 1, "x", g, 2);
        ASSERT_OK(store_commit(s));

        query_params q = QUERY_PARAMS_INIT;
        q.want_stacks = true;
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->n_rows, 3);
        assert_row(r, 0, "x", "[modA]", "first_func", 2);
        assert_row(r, 1, "x", "[modA]", "other_func", 1);
        assert_row(r, 2, "x", "[modB]", "other_func", 1);
        /* [modA] caller and [modB] caller are different frames (3 stack
         * ids), but folded frames carry no module: x;caller;other_func is
         * one line of 2 samples. */
        ASSERT_EQ(r->n_stacks, 2);
        ASSERT_EQ(r->stacks[0].samples, 2);
        ASSERT_STREQ(r->stacks[0].frames[1], "first_func");
        ASSERT_EQ(r->stacks[1].samples, 2);
        ASSERT_STREQ(r->stacks[1].frames[1], "other_func");
        query_result_free(r);
}

TEST(lost_sums) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        _cleanup_free_ uint64_t *per_cpu = NULL;
        size_t n = 99;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));

        ASSERT_OK(store_get_lost_per_cpu(s, 0, 0, &per_cpu, &n));
        ASSERT_EQ(n, 0);
        ASSERT_NULL(per_cpu);

        /* Outside a batch each runs in its own transaction. */
        ASSERT_OK(store_add_lost(s, S(1), 0, 10));
        ASSERT_OK(store_add_lost(s, S(2), 2, 20));
        ASSERT_OK(store_add_lost(s, S(3), 2, 30));
        ASSERT_OK(store_add_lost(s, S(4), 0, 40));
        /* A bogus CPU number does not make the per-CPU array huge. */
        ASSERT_OK(store_add_lost(s, S(4), 4000000000u, 1));

        ASSERT_OK(store_get_lost_per_cpu(s, 0, 0, &per_cpu, &n));
        ASSERT_EQ(n, 3);
        ASSERT_EQ(per_cpu[0], 50);
        ASSERT_EQ(per_cpu[1], 0);
        ASSERT_EQ(per_cpu[2], 50);
        free(per_cpu);
        per_cpu = NULL;

        ASSERT_OK(store_get_lost_per_cpu(s, S(2), S(4), &per_cpu, &n));
        ASSERT_EQ(n, 3);
        ASSERT_EQ(per_cpu[0], 0);
        ASSERT_EQ(per_cpu[2], 50);
        free(per_cpu);
        per_cpu = NULL;

        query_params q = QUERY_PARAMS_INIT;
        query_result *r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->lost, 101);
        ASSERT_EQ(r->total_samples, 0);
        query_result_free(r);

        q.cpu = 2;
        q.since_ns = S(3);
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->lost, 30);
        query_result_free(r);
}

TEST(expire) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame f[] = { K_OPEN };
        store_stats st;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));

        /* One sample in each of ten buckets, 0.5 s into it. */
        ASSERT_OK(store_begin(s));
        for (uint64_t i = 1; i <= 10; i++)
                add(s, T0 + i * NSEC_PER_SEC + NSEC_PER_SEC / 2, 0, 1, "x", f, 1);
        ASSERT_OK(store_add_lost(s, S(2), 0, 3));
        ASSERT_OK(store_add_lost(s, S(8), 0, 4));
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        ASSERT_OK(store_commit(s));

        /* Whole buckets that end by the time: T0+1s .. T0+4s go; the
         * bucket of T0+5s ends after T0+5.5s and stays. */
        ASSERT_EQ(store_expire(s, S(5) + NSEC_PER_SEC / 2, NULL), 4);
        ASSERT_EQ(store_expire(s, S(5) + NSEC_PER_SEC / 2, NULL), 0);

        ASSERT_OK(store_get_stats(s, &st));
        ASSERT_EQ(st.samples, 6);
        ASSERT_U64_EQ(st.first_ns, S(5) + NSEC_PER_SEC / 2);
        ASSERT_U64_EQ(st.last_ns, S(10) + NSEC_PER_SEC / 2);
        ASSERT_EQ(st.lost, 4);

        /* Inside a batch it is part of the batch. */
        ASSERT_OK(store_begin(s));
        ASSERT_EQ(store_expire(s, S(7), NULL), 2);
        ASSERT_OK(store_rollback(s));
        ASSERT_OK(store_get_stats(s, &st));
        ASSERT_EQ(st.samples, 6);

        ASSERT_EQ(store_expire(s, UINT64_MAX, NULL), 6);
        ASSERT_OK(store_get_stats(s, &st));
        ASSERT_EQ(st.samples, 0);
        ASSERT_EQ(st.first_ns, 0);
        ASSERT_EQ(st.lost, 0);
        /* Interned values stay: ids are stable for the database's life. */
        ASSERT_EQ(st.n_frames, 1);
}

/* Expiry cuts at any time, mostly inside a bucket; the bucket it cut
 * into stays whole and is counted once by queries that reach across the
 * cut, from the minute and hour levels as from the buckets. */
TEST(expire_inside_a_bucket_counts_it_once) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        const frame f[] = { K_OPEN, K_ENTRY };
        uint64_t hour0 = (T0 / NSEC_PER_SEC / 3600 + 1) * 3600 * NSEC_PER_SEC;
        /* Two samples a second for three hours from hour0. */
        const uint64_t n = 3 * 3600;
        uint64_t cut = hour0 + 1800 * NSEC_PER_SEC + NSEC_PER_SEC / 4, kept;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_OK(store_begin(s));
        for (uint64_t i = 0; i < n; i++) {
                add(s, hour0 + i * NSEC_PER_SEC + NSEC_PER_SEC / 8, 0, 1, "x", f, 2);
                add(s, hour0 + i * NSEC_PER_SEC + NSEC_PER_SEC / 2, 1, 1, "x", f, 2);
        }
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        ASSERT_OK(store_commit(s));

        /* The bucket of second 1800 ends after the cut and stays whole. */
        ASSERT_GT(store_expire(s, cut, NULL), 0);
        kept = 2 * (n - 1800);

        uint64_t from[] = { 0, hour0, cut - 1, cut, cut + 1, hour0 + 3600 * NSEC_PER_SEC - 1 };
        for (size_t i = 0; i < ELEMENTSOF(from); i++)
                for (int stacks = 0; stacks <= 1; stacks++) {
                        query_params q = QUERY_PARAMS_INIT;
                        uint64_t want;
                        query_result *r;

                        q.since_ns = from[i];
                        q.want_stacks = stacks;
                        /* Whole buckets from the one `since` falls in. */
                        want = from[i] <= hour0 + 1800 * NSEC_PER_SEC ? kept
                                                                      : 2 * (n - (from[i] - hour0) / NSEC_PER_SEC);
                        r = run_query(s, &q, 0, 0);
                        if (r->total_samples != want)
                                fprintf(stderr, "since %+lld ns from the cut, stacks %d: want %llu, got %llu\n",
                                        (long long) (from[i] - cut), stacks, (unsigned long long) want,
                                        (unsigned long long) r->total_samples);
                        ASSERT_U64_EQ(r->total_samples, want);
                        query_result_free(r);
                }
}

TEST(stats) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        char wal[160];
        struct stat a, b;
        store_stats st;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        fill_query_data(s);

        ASSERT_OK(store_get_stats(s, &st));
        ASSERT_EQ(st.samples, 12);
        ASSERT_EQ(st.lost, 112);
        ASSERT_U64_EQ(st.first_ns, S(1));
        ASSERT_U64_EQ(st.last_ns, S(12));
        ASSERT_EQ(st.n_frames, 6);
        /* memcpy10>entry, memcpy20>entry share entry: 3; libc 1; brd 1
         * under entry; nosym 1. */
        ASSERT_EQ(st.n_stacks, 6);
        /* cat dd kworker/0:1 memcpy entry_SYSCALL_64 brd_submit_bio
         * [kernel.kallsyms] [brd] ab12 libc-path */
        ASSERT_EQ(st.n_strings, 10);

        /* The WAL has not been checkpointed into the main file yet: both count. */
        snprintf(wal, sizeof(wal), "%s-wal", t.db);
        ASSERT_EQ(stat(t.db, &a), 0);
        ASSERT_EQ(stat(wal, &b), 0);
        ASSERT_GT(b.st_size, 0);
        ASSERT_EQ(st.db_bytes, (uint64_t) (a.st_size + b.st_size));
}

TEST(reader_concurrent_with_writer) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *w = NULL, *rd = NULL;
        const frame f[] = { K_OPEN, K_ENTRY };
        store_stats st;
        query_result *r;

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &w));
        ASSERT_OK(store_begin(w));
        for (uint64_t i = 0; i < 10; i++)
                add(w, S(i), 0, 1, "a", f, 2);
        /* Buckets are written when they end: the ingest horizon says when. */
        ASSERT_OK(store_flush_samples(w, S(10)));
        ASSERT_OK(store_commit(w));

        /* The writer holds an open batch while the reader opens and reads:
         * in WAL mode neither waits, and the reader sees the last commit. */
        ASSERT_OK(store_begin(w));
        for (uint64_t i = 10; i < 15; i++)
                add(w, S(i), 0, 1, "a", f, 2);

        ASSERT_OK(store_open(t.db, STORE_READONLY, &rd));
        query_params q = QUERY_PARAMS_INIT;
        q.want_stacks = true;
        r = run_query(rd, &q, 0, 0);
        ASSERT_EQ(r->total_samples, 10);
        ASSERT_EQ(r->n_stacks, 1);
        query_result_free(r);

        /* The writer sees its own uncommitted batch. */
        r = run_query(w, &q, 0, 0);
        ASSERT_EQ(r->total_samples, 15);
        query_result_free(r);

        ASSERT_OK(store_commit(w));
        r = run_query(rd, &q, 0, 0);
        ASSERT_EQ(r->total_samples, 15);
        query_result_free(r);

        /* A reader on a file whose writer has gone away (WAL checkpointed
         * and removed) still works. */
        rd = store_free(rd);
        w = store_free(w);
        ASSERT_OK(store_open(t.db, STORE_READONLY, &rd));
        ASSERT_OK(store_get_stats(rd, &st));
        ASSERT_EQ(st.samples, 15);
        ASSERT_OK(store_check_integrity(rd));
}

TEST(free_commits_open_batch) {
        _cleanup_tmpdir_ tmpdir t;
        store *s = NULL;
        const frame f[] = { K_OPEN };

        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_OK(store_begin(s));
        add(s, T0, 0, 1, "a", f, 1);
        add(s, T0 + 1, 0, 1, "a", f, 1);
        ASSERT_NULL(store_free(s));

        ASSERT_EQ(sql_int(t.db, "SELECT sum(n_samples) FROM sample_blocks WHERE level = 0"), 2);
}

#define CRASH_BATCH 50
/* A batch fills one bucket, which is written before the commit. */
#define CRASH_STEP (NSEC_PER_SEC / CRASH_BATCH)

static _Noreturn void crash_child(const char *path, int fd) {
        const frame f[] = { K_MEMCPY_10, K_OPEN, K_ENTRY, U_LIBC };
        store *s = NULL;
        uint32_t commits = 0;

        if (store_open(path, STORE_READWRITE, &s) < 0)
                _exit(EXIT_FAILURE);
        for (uint64_t t = T0 - 1;;) {
                if (store_begin(s) < 0)
                        _exit(EXIT_FAILURE);
                for (int i = 0; i < CRASH_BATCH; i++) {
                        test_sample smp = {
                                .time_ns = (t += CRASH_STEP), .cpu = (uint32_t) (t & 1), .pid = 7, .comm = "writer",
                                .n_frames = 1 + (t % ELEMENTSOF(f)), .frames = f,
                        };
                        if (test_add_sample(s, 0, &smp) < 0)
                                _exit(EXIT_FAILURE);
                }
                if (store_flush_samples(s, t + 1) < 0 || store_commit(s) < 0)
                        _exit(EXIT_FAILURE);
                commits++;
                if (write(fd, &commits, sizeof(commits)) != sizeof(commits))
                        _exit(EXIT_FAILURE);
        }
}

TEST(crash_keeps_committed_batches) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        uint32_t reported = 0, c;
        store_stats st;
        int pipefd[2], status;
        pid_t pid;

        tmpdir_make(&t);
        ASSERT_EQ(pipe2(pipefd, O_CLOEXEC), 0);

        pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
                close(pipefd[0]);
                crash_child(t.db, pipefd[1]);
        }
        close(pipefd[1]);

        /* Let it commit a while, then kill it mid-stream: it starts the
         * next batch right after reporting one. */
        while (reported < 500) {
                ssize_t n = read(pipefd[0], &c, sizeof(c));
                if (n != sizeof(c))
                        break;
                reported = c;
        }
        ASSERT_EQ(kill(pid, SIGKILL), 0);
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        close(pipefd[0]);
        ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        ASSERT_GE(reported, 500);

        /* The killed writer left its WAL behind; a reader copes with that... */
        ASSERT_OK(store_open(t.db, STORE_READONLY, &s));
        ASSERT_OK(store_check_integrity(s));
        ASSERT_OK(store_get_stats(s, &st));
        s = store_free(s);

        /* ...and so does a new writer, which recovers the WAL. */
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_OK(store_check_integrity(s));
        ASSERT_EQ(sql_int(t.db, "SELECT integrity_check = 'ok' FROM pragma_integrity_check"), 1);
        ASSERT_OK(store_get_stats(s, &st));
        fprintf(stderr, "reported %u commits, found %" PRIu64 " samples\n", reported, st.samples);

        /* Every reported commit is there, and batches are all or nothing. */
        ASSERT_GE(st.samples, (uint64_t) reported * CRASH_BATCH);
        ASSERT_EQ(st.samples % CRASH_BATCH, 0);
        ASSERT_U64_EQ(st.first_ns, T0 - 1 + CRASH_STEP);
        ASSERT_U64_EQ(st.last_ns, T0 - 1 + st.samples * CRASH_STEP);

        /* And it takes writes again. */
        const frame f[] = { K_OPEN };
        add(s, T0 + st.samples, 0, 1, "after", f, 1);
}

typedef struct ckpt_thread {
        store_checkpointer *c;
        volatile bool stop;
        int runs, failures, max_copied;
} ckpt_thread;

static void *checkpoint_loop(void *userdata) {
        ckpt_thread *t = userdata;

        while (!t->stop) {
                int log = 0, copied = 0;

                if (store_checkpointer_run(t->c, &log, &copied) < 0)
                        t->failures++;
                t->runs++;
                t->max_copied = MAX(t->max_copied, copied);
                usleep(500);
        }
        return NULL;
}


static void write_strings(store *s, int batch, int n) {
        ASSERT_OK(store_begin(s));
        for (int i = 0; i < n; i++) {
                char name[64];
                int64_t id;
                snprintf(name, sizeof name, "string-%d-%d-padding-padding-padding-padding", batch, i);
                ASSERT_OK(store_intern_string(s, name, &id));
        }
        ASSERT_OK(store_commit(s));
}

/* The daemon's way: the writer says a checkpoint is due, another thread
 * makes it on a connection of its own, while the writer goes on. */
TEST(checkpoint_on_its_own_connection) {
        char dir[] = "/tmp/test-store-ckpt2.XXXXXX", path[128], wal[160];
        store_checkpointer *c = NULL;
        ckpt_thread t = {};
        pthread_t th;
        int log = 0, copied = 0;
        store *s = NULL;
        struct stat st;

        ASSERT_TRUE(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/db", dir);
        snprintf(wal, sizeof wal, "%s-wal", path);
        ASSERT_OK(store_open(path, STORE_READWRITE, &s));
        ASSERT_OK(store_checkpointer_new(path, &c));
        ASSERT_TRUE(!store_checkpoint_due(s));
        for (int b = 0; b < 400; b++)
                write_strings(s, b, 50);
        /* Due once: the caller takes it. */
        ASSERT_TRUE(store_checkpoint_due(s));
        ASSERT_TRUE(!store_checkpoint_due(s));

        /* A batch open on the writer does not stop it. */
        ASSERT_OK(store_begin(s));
        int64_t id;
        ASSERT_OK(store_intern_string(s, "in-an-open-batch", &id));
        ASSERT_OK(store_checkpointer_run(c, &log, &copied));
        ASSERT_GE(log, 1000);
        ASSERT_EQ(copied, log);
        ASSERT_OK(store_commit(s));

        /* Concurrently with 200 more batches. */
        t.c = c;
        ASSERT_EQ(pthread_create(&th, NULL, checkpoint_loop, &t), 0);
        for (int b = 400; b < 600; b++)
                write_strings(s, b, 50);
        t.stop = true;
        ASSERT_EQ(pthread_join(th, NULL), 0);
        ASSERT_EQ(t.failures, 0);
        ASSERT_GT(t.runs, 0);
        ASSERT_GT(t.max_copied, 0);

        /* Closing the checkpointer first leaves the writer the last
         * connection: its close copies the rest and removes the WAL. */
        c = store_checkpointer_free(c);
        ASSERT_OK(store_check_integrity(s));
        store_free(s);
        ASSERT_LT(stat(wal, &st), 0);

        ASSERT_OK(store_open(path, STORE_READWRITE, &s));
        int64_t again;
        ASSERT_OK(store_intern_string(s, "string-599-49-padding-padding-padding-padding", &again));
        ASSERT_OK(store_check_integrity(s));
        store_free(s);
        remove_db_dir(dir, path);
}

TEST(checkpoint_is_explicit) {
        char dir[] = "/tmp/test-store-ckpt.XXXXXX", path[128], wal[160];
        struct stat st;
        store *s = NULL;

        ASSERT_TRUE(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/db", dir);
        snprintf(wal, sizeof wal, "%s-wal", path);
        ASSERT_OK(store_open(path, STORE_READWRITE, &s));
        /* Not due: nothing done. */
        ASSERT_EQ(store_checkpoint(s), 0);
        /* Enough commits to pass 1000 WAL frames: sqlite does not
         * checkpoint by itself, store_checkpoint() then does. */
        for (int b = 0; b < 400; b++)
                write_strings(s, b, 50);
        ASSERT_EQ(stat(wal, &st), 0);
        ASSERT_GT(st.st_size, 1000 * 8192);
        ASSERT_EQ(store_checkpoint(s), 1);
        ASSERT_EQ(store_checkpoint(s), 0);
        store_free(s);
        remove_db_dir(dir, path);
}
