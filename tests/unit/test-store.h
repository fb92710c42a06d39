/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* What the store's unit tests share (test-store.c, test-store-history.c,
 * test-store-blocks.c): a private directory per test, a side connection
 * to the file, sample frames, and writing and querying samples. */

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

static inline void tmpdir_make(tmpdir *t) {
        snprintf(t->dir, sizeof(t->dir), "/tmp/test-store-XXXXXX");
        ASSERT_TRUE(mkdtemp(t->dir));
        snprintf(t->db, sizeof(t->db), "%s/samples.db", t->dir);
}

static inline void tmpdir_remove(tmpdir *t) {
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
static inline int64_t sql_int(const char *path, const char *sql) {
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

/* Runs sql on the file, bypassing the store: the rows it changed. */
static inline int sql_exec(const char *path, const char *sql) {
        sqlite3 *db = NULL;
        int n;

        ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
        sqlite3_busy_timeout(db, 5000);
        ASSERT_EQ(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
        n = sqlite3_changes(db);
        sqlite3_close(db);
        return n;
}

static const frame _unused_ K_MEMCPY_10 = { FRAME_KERNEL, 0xffffffff81a00010ULL, "memcpy", 0x10, MODULE_KERNEL, "ab12" };
static const frame _unused_ K_MEMCPY_20 = { FRAME_KERNEL, 0xffffffff81a00020ULL, "memcpy", 0x20, MODULE_KERNEL, "ab12" };
static const frame _unused_ K_ENTRY = { FRAME_KERNEL, 0xffffffff82000040ULL, "entry_SYSCALL_64", 0x40, MODULE_KERNEL, "ab12" };
static const frame _unused_ K_OPEN = { FRAME_KERNEL, 0xffffffff81300100ULL, "do_sys_open", 0x100, MODULE_KERNEL, "ab12" };
static const frame _unused_ K_BRD = { FRAME_KERNEL, 0xffffffffc0a01234ULL, "brd_submit_bio", 0x34, "[brd]", NULL };
static const frame _unused_ K_NOSYM = { FRAME_KERNEL, 0xffffffffc0001234ULL, NULL, 0, NULL, NULL };
static const frame _unused_ U_LIBC = { FRAME_USER, 0x7f0000021234ULL, NULL, 0x1234, "/usr/lib/x86_64-linux-gnu/libc.so.6", NULL };
static const frame _unused_ U_NOMAP = { FRAME_USER, 0x401000ULL, NULL, 0, NULL, NULL };

#define T0 1700000000000000000ULL
/* The start of the k-th one-second bucket after T0. */
#define S(k) (T0 + (uint64_t) (k) * NSEC_PER_SEC)

static inline void add(store *s, uint64_t t, uint32_t cpu, uint32_t pid, const char *comm, const frame *frames, size_t n) {
        test_sample smp = {
                .time_ns = t, .cpu = cpu, .pid = pid, .tid = pid, .comm = comm,
                .period = 1, .n_frames = n, .frames = frames,
        };
        ASSERT_OK(test_add_sample(s, 1, &smp));
}

/* What the daemon's housekeeping does each second: builds the hours
 * by cgroup that are over (store_build_step()), here until none is left,
 * a step a transaction; returns the steps it took. */
static inline unsigned build_all(store *s) {
        unsigned steps = 0;
        bool more = true;

        while (more) {
                ASSERT_OK(store_build_step(s, 0, &more));
                steps++;
        }
        return steps;
}

static inline query_result *run_query(store *s, const query_params *q, uint32_t max_rows, uint32_t max_stacks) {
        query_result *r = NULL;
        ASSERT_OK(store_query(s, q, max_rows, max_stacks, &r));
        ASSERT_TRUE(r);
        return r;
}

static inline void assert_row(const query_result *r, size_t i, const char *comm, const char *module, const char *symbol,
                       uint64_t samples) {
        ASSERT_LT(i, r->n_rows);
        ASSERT_STREQ(r->rows[i].comm, comm);
        ASSERT_STREQ(r->rows[i].module, module);
        ASSERT_STREQ(r->rows[i].symbol, symbol);
        ASSERT_EQ(r->rows[i].samples, samples);
}

static inline void assert_same_rows(const query_result *a, const query_result *b) {
        bool same = a->total_samples == b->total_samples && a->n_rows == b->n_rows;

        for (size_t i = 0; same && i < a->n_rows; i++)
                same = a->rows[i].samples == b->rows[i].samples && streq(a->rows[i].comm, b->rows[i].comm) &&
                       streq(a->rows[i].symbol, b->rows[i].symbol) && streq(a->rows[i].module, b->rows[i].module) &&
                       streq(a->rows[i].cgroup ?: "-", b->rows[i].cgroup ?: "-");
        for (size_t i = 0; !same && (i < a->n_rows || i < b->n_rows); i++)
                fprintf(stderr, "row %zu: %s %s %llu | %s %s %llu\n", i, i < a->n_rows ? a->rows[i].comm : "-",
                        i < a->n_rows ? a->rows[i].symbol : "-", i < a->n_rows ? (unsigned long long) a->rows[i].samples : 0,
                        i < b->n_rows ? b->rows[i].comm : "-", i < b->n_rows ? b->rows[i].symbol : "-",
                        i < b->n_rows ? (unsigned long long) b->rows[i].samples : 0);
        ASSERT_U64_EQ(a->total_samples, b->total_samples);
        ASSERT_EQ(a->n_rows, b->n_rows);
        for (size_t i = 0; i < a->n_rows; i++) {
                assert_row(b, i, a->rows[i].comm, a->rows[i].module, a->rows[i].symbol, a->rows[i].samples);
                ASSERT_STREQ(b->rows[i].cgroup ?: "-", a->rows[i].cgroup ?: "-");
        }
}

/* The same stacks, in the same order, with the same samples and frames. */
static inline void assert_same_stacks(const query_result *one, const query_result *other) {
        ASSERT_EQ(one->n_stacks, other->n_stacks);
        for (size_t k = 0; k < one->n_stacks; k++) {
                const query_stack *a = one->stacks + k, *b = other->stacks + k;

                ASSERT_U64_EQ(a->samples, b->samples);
                ASSERT_STREQ(a->comm, b->comm);
                ASSERT_EQ(a->n_frames, b->n_frames);
                for (size_t f = 0; f < a->n_frames; f++)
                        ASSERT_STREQ(a->frames[f], b->frames[f]);
        }
}

/* Frame id as committed in the file, through a connection of its own:
 * its values (kind, addr, symbol, offset, module, build id). */
static inline bool frame_in_file(const char *path, int64_t id, int64_t *v) {
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

static inline void remove_db_dir(const char *dir, const char *path) {
        char p[PATH_MAX];

        unlink(path);
        snprintf(p, sizeof p, "%s-wal", path);
        unlink(p);
        snprintf(p, sizeof p, "%s-shm", path);
        unlink(p);
        rmdir(dir);
}
