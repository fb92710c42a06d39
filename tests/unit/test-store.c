/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "macro.h"
#include "store-write.h"
#include "store/store-dict.h"
#include "store/store-samples.h"
#include "store/store.h"
#include "test.h"
#include "wire/history-json.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(store *, store_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(query_result *, query_result_free);
#define _cleanup_store_ _cleanup_(store_freep)
#define _cleanup_result_ _cleanup_(query_result_freep)

/* A private directory per test, removed (with the -wal/-shm files) after. */
typedef struct tmpdir {
        char dir[64];
        char db[128];
} tmpdir;

static void tmpdir_make(tmpdir *t) {
        snprintf(t->dir, sizeof(t->dir), "/tmp/test-store-XXXXXX");
        ASSERT_TRUE(mkdtemp(t->dir));
        snprintf(t->db, sizeof(t->db), "%s/samples.db", t->dir);
}

static void tmpdir_remove(tmpdir *t) {
        DIR *d = opendir(t->dir);
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        closedir(d);
        (void) rmdir(t->dir);
}
#define _cleanup_tmpdir_ _cleanup_(tmpdir_remove)

/* Reads one integer straight from the file, bypassing the store. */
static int64_t sql_int(const char *path, const char *sql) {
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        int64_t v;

        ASSERT_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        sqlite3_busy_timeout(db, 5000);
        ASSERT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
        ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
        v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        sqlite3_close(db);
        return v;
}

static const frame K_MEMCPY_10 = { FRAME_KERNEL, 0xffffffff81a00010ULL, "memcpy", 0x10, MODULE_KERNEL, "ab12" };
static const frame K_MEMCPY_20 = { FRAME_KERNEL, 0xffffffff81a00020ULL, "memcpy", 0x20, MODULE_KERNEL, "ab12" };
static const frame K_ENTRY = { FRAME_KERNEL, 0xffffffff82000040ULL, "entry_SYSCALL_64", 0x40, MODULE_KERNEL, "ab12" };
static const frame K_OPEN = { FRAME_KERNEL, 0xffffffff81300100ULL, "do_sys_open", 0x100, MODULE_KERNEL, "ab12" };
static const frame K_BRD = { FRAME_KERNEL, 0xffffffffc0a01234ULL, "brd_submit_bio", 0x34, "[brd]", NULL };
static const frame K_NOSYM = { FRAME_KERNEL, 0xffffffffc0001234ULL, NULL, 0, NULL, NULL };
static const frame U_LIBC = { FRAME_USER, 0x7f0000021234ULL, NULL, 0x1234, "/usr/lib/x86_64-linux-gnu/libc.so.6", NULL };
static const frame U_NOMAP = { FRAME_USER, 0x401000ULL, NULL, 0, NULL, NULL };

#define T0 1700000000000000000ULL
/* The start of the k-th one-second bucket after T0. */
#define S(k) (T0 + (uint64_t) (k) * NSEC_PER_SEC)

static void add(store *s, uint64_t t, uint32_t cpu, uint32_t pid, const char *comm, const frame *frames, size_t n) {
        test_sample smp = {
                .time_ns = t, .cpu = cpu, .pid = pid, .tid = pid, .comm = comm,
                .period = 1, .n_frames = n, .frames = frames,
        };
        ASSERT_OK(test_add_sample(s, 1, &smp));
}

static query_result *run_query(store *s, const query_params *q, uint32_t max_rows, uint32_t max_stacks) {
        query_result *r = NULL;
        ASSERT_OK(store_query(s, q, max_rows, max_stacks, &r));
        ASSERT_TRUE(r);
        return r;
}

static void assert_row(const query_result *r, size_t i, const char *comm, const char *module, const char *symbol,
                       uint64_t samples) {
        ASSERT_LT(i, r->n_rows);
        ASSERT_STREQ(r->rows[i].comm, comm);
        ASSERT_STREQ(r->rows[i].module, module);
        ASSERT_STREQ(r->rows[i].symbol, symbol);
        ASSERT_EQ(r->rows[i].samples, samples);
}

static void assert_same_rows(const query_result *a, const query_result *b) {
        bool same = a->total_samples == b->total_samples && a->n_rows == b->n_rows;

        for (size_t i = 0; same && i < a->n_rows; i++)
                same = a->rows[i].samples == b->rows[i].samples && streq(a->rows[i].comm, b->rows[i].comm) &&
                       streq(a->rows[i].symbol, b->rows[i].symbol) && streq(a->rows[i].module, b->rows[i].module);
        for (size_t i = 0; !same && (i < a->n_rows || i < b->n_rows); i++)
                fprintf(stderr, "row %zu: %s %s %llu | %s %s %llu\n", i, i < a->n_rows ? a->rows[i].comm : "-",
                        i < a->n_rows ? a->rows[i].symbol : "-", i < a->n_rows ? (unsigned long long) a->rows[i].samples : 0,
                        i < b->n_rows ? b->rows[i].comm : "-", i < b->n_rows ? b->rows[i].symbol : "-",
                        i < b->n_rows ? (unsigned long long) b->rows[i].samples : 0);
        ASSERT_U64_EQ(a->total_samples, b->total_samples);
        ASSERT_EQ(a->n_rows, b->n_rows);
        for (size_t i = 0; i < a->n_rows; i++)
                assert_row(b, i, a->rows[i].comm, a->rows[i].module, a->rows[i].symbol, a->rows[i].samples);
}

/* Frame id as committed in the file, through a connection of its own:
 * its values (kind, addr, symbol, offset, module, build id). */
static bool frame_in_file(const char *path, int64_t id, int64_t *v) {
        sqlite3 *db = NULL;
        dict_reader *r = NULL;
        bool ok;

        ASSERT_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        ASSERT_OK(dict_reader_new(db, DICT_FRAMES, 1 << 20, &r));
        ok = dict_reader_get(r, id, v) >= 0;
        dict_reader_free(r);
        sqlite3_close(db);
        return ok;
}

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
        assert_row(r, 3, "cat", "/usr/lib/x86_64-linux-gnu/libc.so.6", "0x7f0000021234", 1);
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
        assert_row(r, 1, "cat", "/usr/lib/x86_64-linux-gnu/libc.so.6", "0x7f0000021234", 1);
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
                "0x401000", "[libc.so.6]+0x1234", "entry_SYSCALL_64", "0xffffffffc0001234", "do_sys_open",
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

        /* max_stacks keeps the most frequent. */
        r = run_query(s, &q, 0, 2);
        ASSERT_EQ(r->n_stacks, 2);
        ASSERT_EQ(r->stacks[0].samples, 3);
        ASSERT_EQ(r->stacks[1].samples, 2);
        query_result_free(r);

        /* Stacks follow the filters. */
        q.comm = "cp";
        r = run_query(s, &q, 0, 0);
        ASSERT_EQ(r->n_stacks, 1);
        assert_frames(&r->stacks[0], want_abc, ELEMENTSOF(want_abc));
        query_result_free(r);
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
        /* [modA] caller and [modB] caller are different frames, so 3 stacks. */
        ASSERT_EQ(r->n_stacks, 3);
        ASSERT_EQ(r->stacks[0].samples, 2);
        ASSERT_STREQ(r->stacks[0].frames[1], "first_func");
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

static void remove_db_dir(const char *dir, const char *path) {
        char p[PATH_MAX];

        unlink(path);
        snprintf(p, sizeof p, "%s-wal", path);
        unlink(p);
        snprintf(p, sizeof p, "%s-shm", path);
        unlink(p);
        rmdir(dir);
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

static int add_event(store *s, uint64_t t, int64_t boot, const char *kind, int64_t module, int64_t ksym,
                     const int64_t *mods, size_t n_mods, const int64_t *ksyms, size_t n_ksyms) {
        return store_add_event(s, &(store_event) {
                        .time_ns = t, .boot_id = boot, .kind = kind, .module_id = module, .ksym_id = ksym,
                        .live_modules = mods, .n_live_modules = n_mods, .live_ksyms = ksyms, .n_live_ksyms = n_ksyms,
                }, NULL);
}

/* The store's answers as the wire renders them (wire/history-json.c), so
 * the assertions read the protocol's shape. */
static int list_modules_json(store *s, uint64_t since_ns, bool with_sections, uint32_t max_rows, json_object **ret) {
        history h = {};
        int r = store_list_modules(s, since_ns, with_sections, max_rows, &h);

        if (r >= 0)
                r = history_modules_json(&h, ret);
        history_done(&h);
        return r;
}

static int list_ksyms_json(store *s, uint64_t since_ns, uint32_t max_rows, json_object **ret) {
        history h = {};
        int r = store_list_ksyms(s, since_ns, max_rows, &h);

        if (r >= 0)
                r = history_ksyms_json(&h, ret);
        history_done(&h);
        return r;
}

static int list_events_json(store *s, uint64_t since_ns, bool with_records, uint32_t max_events, uint32_t max_records,
                            json_object **ret) {
        history h = {};
        int r = store_list_events(s, since_ns, with_records, max_events, max_records, &h);

        if (r >= 0)
                r = history_events_json(&h, ret);
        history_done(&h);
        return r;
}

TEST(expire_drops_old_journal_entries_and_unloaded_modules) {
        char dir[] = "/tmp/test-store-journal.XXXXXX", path[128];
        store_section secs[2] = {
                { .name = ".text", .addr = 0xffffffffc0a00000, .len = 0x800, .len_source = "next", .exec = true },
                { .name = ".data", .addr = 0xffffffffc0a01000, .len = 0x100, .len_source = "elf" },
        };
        json_object *res = NULL, *a;
        int64_t boot = 0, old_mod = 0, live_mod = 0;
        store *s = NULL;

        ASSERT_TRUE(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/db", dir);
        ASSERT_OK(store_open(path, STORE_READWRITE, &s));
        ASSERT_OK(store_add_boot(s, "uuid", "bid", 0xffffffff81000000, "6.1", 100, &boot));
        ASSERT_OK(store_add_module(s, &(store_module) { .boot_id = boot, .name = "old", .base = 0xffffffffc0a00000,
                                   .size = 0x2000, .loaded_ns = 100, .loaded_how = "startup",
                                   .sections = secs, .n_sections = 2 }, &old_mod));
        ASSERT_OK(store_add_module(s, &(store_module) { .boot_id = boot, .name = "live", .base = 0xffffffffc0b00000,
                                   .size = 0x2000, .loaded_ns = 100, .loaded_how = "startup",
                                   .sections = secs, .n_sections = 1 }, &live_mod));
        ASSERT_OK(add_event(s, 100, boot, "start", 0, 0, (int64_t[]) { old_mod, live_mod }, 2, NULL, 0));
        ASSERT_OK(store_unload_module(s, old_mod, 200, "uevent"));
        ASSERT_ERROR(store_unload_module(s, old_mod, 210, "uevent"), ENOENT);
        ASSERT_OK(add_event(s, 200, boot, "module-remove", old_mod, 0, (int64_t[]) { live_mod }, 1, NULL, 0));
        ASSERT_OK(add_event(s, 300, boot, "module-add", live_mod, 0, (int64_t[]) { live_mod }, 1, NULL, 0));

        ASSERT_OK(list_events_json(s, 0, true, 0, 0, &res));
        ASSERT_TRUE(json_object_object_get_ex(res, "events", &a));
        ASSERT_EQ(json_object_array_length(a), 3);
        ASSERT_EQ(json_object_get_int(json_object_object_get(json_object_array_get_idx(a, 0), "n_records")), 3);
        json_object_put(res);

        /* Everything before 250 goes, except what a kept entry refers to:
         * "old" is only named by the removed remove-entry, so it goes too. */
        ASSERT_GE(store_expire(s, 250, NULL), 0);
        ASSERT_OK(list_events_json(s, 0, true, 0, 0, &res));
        ASSERT_TRUE(json_object_object_get_ex(res, "events", &a));
        ASSERT_EQ(json_object_array_length(a), 1);
        ASSERT_EQ(json_object_get_int(json_object_object_get(json_object_array_get_idx(a, 0), "n_records")), 1);
        json_object_put(res);
        ASSERT_OK(list_modules_json(s, 0, true, 0, &res));
        ASSERT_TRUE(json_object_object_get_ex(res, "modules", &a));
        ASSERT_EQ(json_object_array_length(a), 1);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(json_object_array_get_idx(a, 0), "name")), "live");
        json_object_put(res);

        store_free(s);
        snprintf(path, sizeof path, "rm -rf %s", dir);
        ASSERT_EQ(system(path), 0);
}

static json_object *member_at(json_object *list, const char *key, size_t i) {
        json_object *a;

        if (!json_object_object_get_ex(list, key, &a))
                return NULL;
        return json_object_array_get_idx(a, i);
}

TEST(ksyms_are_journaled_listed_and_expired) {
        char dir[] = "/tmp/test-store-ksyms.XXXXXX", path[128];
        store_section sec = { .name = ".text", .addr = 0xffffffffc0a00000, .len = 0x800,
                              .len_source = "elf", .exec = true };
        json_object *res = NULL, *a, *e, *rec;
        int64_t boot = 0, mod = 0, gone = 0, live = 0;
        store *s = NULL;

        ASSERT_TRUE(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/db", dir);
        ASSERT_OK(store_open(path, STORE_READWRITE, &s));
        ASSERT_OK(store_add_boot(s, "uuid", "bid", 0xffffffff81000000, "6.1", 100, &boot));
        ASSERT_OK(store_add_module(s, &(store_module) { .boot_id = boot, .name = "m", .base = 0xffffffffc0a00000,
                                   .size = 0x1000, .loaded_ns = 100, .loaded_how = "startup",
                                   .sections = &sec, .n_sections = 1 }, &mod));
        ASSERT_OK(store_add_ksym(s, &(store_ksym) { .boot_id = boot, .name = "bpf_prog_0123456789abcdef_gone",
                                 .addr = 0xffffffffc0200000, .len = 0x40, .type = "bpf", .registered_ns = 150,
                                 .registered_how = "perf" }, &gone));
        ASSERT_OK(store_add_ksym(s, &(store_ksym) { .boot_id = boot, .name = "ftrace_trampoline",
                                 .addr = 0xffffffffc0300000, .len = 0x1000, .type = "ool", .registered_ns = 100,
                                 .registered_how = "startup" }, &live));
        ASSERT_OK(store_set_ksym_prog_id(s, gone, 42));
        ASSERT_OK(add_event(s, 100, boot, "start", 0, 0, &mod, 1, &live, 1));
        ASSERT_OK(add_event(s, 150, boot, "ksym-register", 0, gone, &mod, 1, (int64_t[]) { gone, live }, 2));
        ASSERT_OK(store_unregister_ksym(s, gone, 200, "perf"));
        ASSERT_ERROR(store_unregister_ksym(s, gone, 210, "perf"), ENOENT);
        ASSERT_OK(add_event(s, 200, boot, "ksym-unregister", 0, gone, &mod, 1, &live, 1));

        /* Listed in registration order, with their windows. */
        ASSERT_OK(list_ksyms_json(s, 0, 0, &res));
        ASSERT_STREQ(json_object_get_string(json_object_object_get(member_at(res, "ksyms", 0), "name")), "ftrace_trampoline");
        e = member_at(res, "ksyms", 1);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(e, "name")), "bpf_prog_0123456789abcdef_gone");
        ASSERT_STREQ(json_object_get_string(json_object_object_get(e, "addr")), "0xffffffffc0200000");
        ASSERT_EQ(json_object_get_int(json_object_object_get(e, "prog_id")), 42);
        ASSERT_EQ(json_object_get_int64(json_object_object_get(e, "unregistered_ns")), 200);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(e, "unregistered_how")), "perf");
        json_object_put(res);
        /* Since 201: the unregistered one is not listed. */
        ASSERT_OK(list_ksyms_json(s, 201, 0, &res));
        ASSERT_TRUE(json_object_object_get_ex(res, "ksyms", &a));
        ASSERT_EQ(json_object_array_length(a), 1);
        json_object_put(res);

        /* The register event re-emits the module's section and both symbols. */
        ASSERT_OK(list_events_json(s, 0, true, 0, 0, &res));
        e = member_at(res, "events", 1);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(e, "kind")), "ksym-register");
        ASSERT_STREQ(json_object_get_string(json_object_object_get(e, "ksym")), "bpf_prog_0123456789abcdef_gone");
        ASSERT_EQ(json_object_get_int(json_object_object_get(e, "n_records")), 3);
        ASSERT_TRUE(json_object_object_get_ex(e, "records", &a));
        ASSERT_EQ(json_object_array_length(a), 3);
        rec = json_object_array_get_idx(a, 1);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(rec, "type")), "ksymbol");
        ASSERT_STREQ(json_object_get_string(json_object_object_get(rec, "name")), "bpf_prog_0123456789abcdef_gone");
        ASSERT_EQ(json_object_get_int(json_object_object_get(rec, "len")), 0x40);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(rec, "ksym_type")), "bpf");
        json_object_put(res);

        /* Expiry before 250 takes the first three entries, and the
         * unregistered symbol nothing refers to any more. */
        ASSERT_GE(store_expire(s, 250, NULL), 0);
        ASSERT_OK(list_ksyms_json(s, 0, 0, &res));
        ASSERT_TRUE(json_object_object_get_ex(res, "ksyms", &a));
        ASSERT_EQ(json_object_array_length(a), 1);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(member_at(res, "ksyms", 0), "name")), "ftrace_trampoline");
        json_object_put(res);

        store_free(s);
        snprintf(path, sizeof path, "rm -rf %s", dir);
        ASSERT_EQ(system(path), 0);
}

/* ---- migration from schema 4 (one row per sample) ---- */

static void copy_file(const char *from, const char *to) {
        char buf[65536];
        FILE *in = fopen(from, "re"), *out = fopen(to, "we");
        size_t n;

        ASSERT_TRUE(in && out);
        while ((n = fread(buf, 1, sizeof buf, in)) > 0)
                ASSERT_EQ(fwrite(buf, 1, n, out), n);
        fclose(in);
        ASSERT_EQ(fclose(out), 0);
}

static int row_name_cmp(const void *a, const void *b) {
        const query_row *x = a, *y = b;
        int c;

        if ((c = strcmp(x->comm, y->comm)) || (c = strcmp(x->module, y->module)) || (c = strcmp(x->symbol, y->symbol)))
                return c;
        return (int) x->kernel - (int) y->kernel;
}

/* The answer schema 4's perfsnapctl gave (json), against store_query()'s
 * on the migrated file: the same rows with the same counts. */
static void expect_same_answer(store *s, const char *json_file, const char *comm, int cpu, uint64_t until_ns) {
        json_object *o = json_object_from_file(json_file), *res, *rows, *v;
        query_params q = QUERY_PARAMS_INIT;
        query_result *r;
        size_t n;

        ASSERT_TRUE(o);
        ASSERT_TRUE(json_object_object_get_ex(o, "result", &res));
        ASSERT_TRUE(json_object_object_get_ex(res, "rows", &rows));
        q.until_ns = until_ns;
        q.comm = comm;
        q.cpu = cpu;
        r = run_query(s, &q, 0, 0);

        ASSERT_TRUE(json_object_object_get_ex(res, "total", &v));
        fprintf(stderr, "%s: schema 4 said %" PRId64 " samples in %zu rows, now %" PRIu64 " in %zu rows\n", json_file,
                json_object_get_int64(v), json_object_array_length(rows), r->total_samples, r->n_rows);
        ASSERT_U64_EQ(r->total_samples, (uint64_t) json_object_get_int64(v));
        ASSERT_TRUE(json_object_object_get_ex(res, "cpus", &v));
        ASSERT_EQ(r->n_cpus, json_object_get_int64(v));
        ASSERT_TRUE(json_object_object_get_ex(res, "lost", &v));
        ASSERT_U64_EQ(r->lost, (uint64_t) json_object_get_int64(v));
        if (!comm && cpu < 0) {
                ASSERT_TRUE(json_object_object_get_ex(res, "first_ns", &v));
                ASSERT_U64_EQ(r->first_ns, (uint64_t) json_object_get_int64(v));
                ASSERT_TRUE(json_object_object_get_ex(res, "last_ns", &v));
                ASSERT_U64_EQ(r->last_ns, (uint64_t) json_object_get_int64(v));
        }

        n = json_object_array_length(rows);
        ASSERT_EQ(r->n_rows, n);
        query_row *want = calloc(n, sizeof *want);
        ASSERT_TRUE(want);
        for (size_t i = 0; i < n; i++) {
                json_object *row = json_object_array_get_idx(rows, i), *f;

                ASSERT_TRUE(json_object_object_get_ex(row, "comm", &f));
                want[i].comm = (char *) json_object_get_string(f);
                ASSERT_TRUE(json_object_object_get_ex(row, "module", &f));
                want[i].module = (char *) json_object_get_string(f);
                ASSERT_TRUE(json_object_object_get_ex(row, "symbol", &f));
                want[i].symbol = (char *) json_object_get_string(f);
                ASSERT_TRUE(json_object_object_get_ex(row, "kernel", &f));
                want[i].kernel = json_object_get_boolean(f);
                ASSERT_TRUE(json_object_object_get_ex(row, "samples", &f));
                want[i].samples = (uint64_t) json_object_get_int64(f);
        }
        qsort(want, n, sizeof *want, row_name_cmp);
        qsort(r->rows, n, sizeof *r->rows, row_name_cmp);
        for (size_t i = 0; i < n; i++) {
                if (row_name_cmp(want + i, r->rows + i) != 0 || want[i].samples != r->rows[i].samples)
                        fprintf(stderr, "row %zu: want %s %s %s %" PRIu64 ", got %s %s %s %" PRIu64 "\n", i,
                                want[i].comm, want[i].module, want[i].symbol, want[i].samples, r->rows[i].comm,
                                r->rows[i].module, r->rows[i].symbol, r->rows[i].samples);
                ASSERT_EQ(row_name_cmp(want + i, r->rows + i), 0);
                ASSERT_U64_EQ(want[i].samples, r->rows[i].samples);
        }
        free(want);
        query_result_free(r);
        json_object_put(o);
}

TEST(migration_from_schema_4_keeps_every_answer) {
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        unsigned long long until_s;
        query_params q = QUERY_PARAMS_INIT;
        query_result *r;
        char line[8192];
        size_t n_lines = 0;

        tmpdir_make(&t);
        copy_file(TEST_DATA("store-v4/perfsnapd.db"), t.db);
        ASSERT_EQ(sql_int(t.db, "PRAGMA user_version"), 4);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM samples"), 1596);
        f = fopen(TEST_DATA("store-v4/until"), "re");
        ASSERT_TRUE(f && fscanf(f, "%llu", &until_s) == 1);
        fclose(TAKE_PTR(f));

        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_EQ(sql_int(t.db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM sqlite_schema WHERE name IN ('samples', 'samples_v4')"), 0);
        ASSERT_EQ(sql_int(t.db, "SELECT sum(n_samples) FROM sample_blocks WHERE level = 0"), 1596);

        expect_same_answer(s, TEST_DATA("store-v4/all.json"), NULL, -1, until_s * NSEC_PER_SEC);
        expect_same_answer(s, TEST_DATA("store-v4/dd.json"), "dd", -1, until_s * NSEC_PER_SEC);
        expect_same_answer(s, TEST_DATA("store-v4/cpu1.json"), NULL, 1, until_s * NSEC_PER_SEC);

        /* The folded stacks: the same lines with the same counts (names as
         * the client prints them: ';', blanks and controls become '_').
         * Stacks that differ only in offsets print alike: compare the sums
         * per line. */
        q.until_ns = until_s * NSEC_PER_SEC;
        q.want_stacks = true;
        r = run_query(s, &q, 0, 0);
        char **got = calloc(r->n_stacks, sizeof *got);
        ASSERT_TRUE(got);
        for (size_t i = 0; i < r->n_stacks; i++) {
                char buf[8192];
                size_t len = (size_t) snprintf(buf, sizeof buf, "%s", r->stacks[i].comm);

                for (size_t j = 0; j < r->stacks[i].n_frames; j++)
                        len += (size_t) snprintf(buf + len, sizeof buf - MIN(len, sizeof buf), "\x01%s", r->stacks[i].frames[j]);
                for (char *c = buf; *c; c++)
                        if (*c == ';' || *c == ' ' || (*c > 1 && *c < 0x20) || *c == 0x7f)
                                *c = '_';
                        else if (*c == 1)
                                *c = ';';
                got[i] = strdup(buf);
                ASSERT_TRUE(got[i]);
        }
        char (*lines)[8192] = calloc(2000, sizeof *lines);
        uint64_t *counts = calloc(2000, sizeof *counts);
        ASSERT_TRUE(lines && counts);
        f = fopen(TEST_DATA("store-v4/all.folded"), "re");
        ASSERT_TRUE(f);
        while (n_lines < 2000 && fgets(line, sizeof line, f)) {
                char *sp = strrchr(line, ' ');

                ASSERT_TRUE(sp);
                *sp = 0;
                counts[n_lines] = strtoull(sp + 1, NULL, 10);
                strcpy(lines[n_lines++], line);
        }
        uint64_t total_want = 0, total_got = 0;
        for (size_t k = 0; k < n_lines; k++) {
                uint64_t want = 0, have = 0;

                for (size_t m = 0; m < n_lines; m++)
                        if (streq(lines[m], lines[k]))
                                want += counts[m];
                for (size_t i = 0; i < r->n_stacks; i++)
                        if (streq(got[i], lines[k]))
                                have += r->stacks[i].samples;
                if (want != have)
                        fprintf(stderr, "%s: schema 4 %" PRIu64 ", now %" PRIu64 "\n", lines[k], want, have);
                ASSERT_U64_EQ(have, want);
                total_want += counts[k];
        }
        for (size_t i = 0; i < r->n_stacks; i++) {
                total_got += r->stacks[i].samples;
                free(got[i]);
        }
        fprintf(stderr, "folded: %zu lines, %" PRIu64 " samples; now %zu stacks, %" PRIu64 " samples\n", n_lines,
                total_want, r->n_stacks, total_got);
        ASSERT_U64_EQ(total_got, total_want);
        free(got);
        free(lines);
        free(counts);
        query_result_free(r);

        /* Opening again converts nothing twice. */
        s = store_free(s);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_EQ(sql_int(t.db, "SELECT sum(n_samples) FROM sample_blocks WHERE level = 0"), 1596);
}

/* ---- buckets, minutes and hours ---- */

typedef struct model_sample {
        uint64_t t;
        uint32_t cpu, pid;
} model_sample;

static const char *model_comm(uint32_t pid) {
        static const char *const comms[] = { "init", "dd", "cc1", "sh" };
        return comms[pid % 4];
}

/* What a window must count: samples of the buckets it overlaps. */
static uint64_t model_count(const model_sample *v, size_t n, const query_params *q) {
        uint64_t c = 0;

        for (size_t i = 0; i < n; i++) {
                uint64_t b = v[i].t / NSEC_PER_SEC * NSEC_PER_SEC;

                if (b + NSEC_PER_SEC <= q->since_ns || (q->until_ns > 0 && b >= q->until_ns))
                        continue;
                if ((q->pid >= 0 && v[i].pid != (uint64_t) q->pid) || (q->cpu >= 0 && v[i].cpu != (uint32_t) q->cpu) ||
                    (q->comm && !streq(q->comm, model_comm(v[i].pid))))
                        continue;
                c++;
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

/* [0]: samples, [1]: of them in entries without a leaf frame or with a stack. */
static int count_leaf_entries(const scan_block *b, const block_entry *v, size_t n, void *userdata) {
        uint64_t *c = userdata;

        (void) b;
        for (size_t i = 0; i < n; i++) {
                c[0] += v[i].count;
                if (v[i].frame_id == 0 || v[i].stack_id != 0)
                        c[1] += v[i].count;
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
                                .comm = model_comm(v[j].pid), .period = 1000, .n_frames = depth[k], .frames = stacks[k],
                        };
                        ASSERT_OK(test_add_sample(s, 1, &smp));
                }
                /* The horizon trails the newest sample a little. */
                ASSERT_OK(store_flush_samples(s, v[MIN(i + 499, (size_t) N - 1)].t - NSEC_PER_SEC));
                ASSERT_OK(store_commit(s));
                if (i == 10000 || i == 20000) {
                        s = store_free(s);
                        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
                }
        }
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));

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
        for (int level = 1; level <= 4; level++) {
                char sql[96];

                snprintf(sql, sizeof sql, "SELECT sum(n_samples) FROM sample_blocks WHERE level = %d", level);
                if (churn)
                        ASSERT_GE(sql_int(t.db, sql), N - (int64_t) late);
                else
                        ASSERT_EQ(sql_int(t.db, sql), N);
        }
        /* Leaf entries name their frame, not a stack, also those refed
         * after the restarts from buckets that do not store frames. */
        uint64_t leaf_counts[2] = {};
        ASSERT_OK(sample_scan_level(s, SAMPLE_LEVEL_LEAF_MINUTE, count_leaf_entries, leaf_counts));
        ASSERT_U64_EQ(leaf_counts[0], N);
        ASSERT_U64_EQ(leaf_counts[1], 0);

        int64_t markers = sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 2 AND data = x'00'");
        fprintf(stderr, "%lld of the hours left to the minutes\n", (long long) markers);
        if (churn)
                ASSERT_GT(markers, 3);
        else
                ASSERT_EQ(markers, 0);

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
                }
                /* Without stacks and pid, the leaf levels answer. */
                q.want_stacks = i % 2 == 0;
                want = model_count(v, N, &q);
                r = run_query(s, &q, 0, 0);
                for (size_t j = 0; j < r->n_rows; j++)
                        rows += r->rows[j].samples;
                if (r->total_samples != want || rows != want)
                        fprintf(stderr, "window %zu [%llu, %llu) pid %lld cpu %d comm %s: want %llu, got %llu (rows %llu)\n",
                                i, (unsigned long long) (q.since_ns - T0), (unsigned long long) (q.until_ns ? q.until_ns - T0 : 0),
                                (long long) q.pid, q.cpu, q.comm ?: "-", (unsigned long long) want,
                                (unsigned long long) r->total_samples, (unsigned long long) rows);
                ASSERT_U64_EQ(r->total_samples, want);
                ASSERT_U64_EQ(rows, want);
                /* The same functions from the full levels and the leaf
                 * ones. */
                q.want_stacks = !q.want_stacks;
                query_result *other = run_query(s, &q, 0, 0);
                assert_same_rows(r, other);
                query_result_free(other);
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
        sqlite3 *db = NULL;
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

        /* What the schema-7 writer left: the same blocks and keys, no leaf
         * levels. */
        ASSERT_EQ(sqlite3_open(t.db, &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, "DELETE FROM sample_blocks WHERE level >= 3;"
                                   "DELETE FROM sample_meta WHERE key IN ('complete3', 'complete4', 'fed3', 'fed4');"
                                   "PRAGMA user_version = 7;", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);

        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_EQ(sql_int(t.db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        ASSERT_GT(sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 1"), 100);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 3"),
                  sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 1"));
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 4"),
                  sql_int(t.db, "SELECT count(*) FROM sample_blocks WHERE level = 2"));
        ASSERT_EQ(sql_int(t.db, "SELECT value FROM sample_meta WHERE key = 'complete3'"),
                  sql_int(t.db, "SELECT value FROM sample_meta WHERE key = 'complete1'"));
        /* The minutes name stacks; their leaf entries name frames (and
         * keep no stack generation). */
        uint64_t leaf_counts[2] = {};
        ASSERT_OK(sample_scan_level(s, SAMPLE_LEVEL_LEAF_MINUTE, count_leaf_entries, leaf_counts));
        ASSERT_GT(leaf_counts[0], 0);
        ASSERT_U64_EQ(leaf_counts[1], 0);
        for (size_t i = 0; i < ELEMENTSOF(windows); i++) {
                query_result *r = run_query(s, windows + i, 0, 0);

                assert_same_rows(before[i], r);
                query_result_free(r);
                query_result_free(before[i]);
        }

        /* The open minute and hour go on from the buckets, in both kinds. */
        ASSERT_OK(store_begin(s));
        for (uint64_t sec = 9000; sec < 9100; sec++, n++)
                add(s, S(sec), 0, 7, "a", a, 2);
        ASSERT_OK(store_commit(s));
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        for (int level = 0; level <= 4; level++) {
                char sql[96];

                snprintf(sql, sizeof sql, "SELECT sum(n_samples) FROM sample_blocks WHERE level = %d", level);
                ASSERT_EQ(sql_int(t.db, sql), (int64_t) n);
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
        dict_reader_free(rd);
        sqlite3_close(db);
        free(ids);
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

        for (int i = 0; i < 100 && used_bytes(t.db) > (256 << 10); i++)
                ASSERT_OK(store_enforce_cap(s, 256 << 10, &res));
        oldest_stacks = sql_int(t.db, "SELECT coalesce(min(gen), -1) FROM stack_blocks");
        fprintf(stderr, "after a 256 KiB cap: %" PRIu64 " bytes in use, oldest stack generation %lld of %" PRIu64 "\n",
                used_bytes(t.db), (long long) oldest_stacks, store_generation(s));
        ASSERT_LE(used_bytes(t.db), 256 << 10);
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
