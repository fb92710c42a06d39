/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Batches held in memory while the disk is full (store.c, "held
 * batches"): a VFS over the default one refuses writes with SQLITE_FULL
 * while `disk_full` is set, the way a full file system does. */
#include "store/store-private.h"
#include "test-store.h"

static bool disk_full;
static sqlite3_vfs *real_vfs;

typedef struct full_file {
        sqlite3_file base;
        sqlite3_file *real;     /* right after this struct */
} full_file;

#define REAL(f) (((full_file *) (f))->real)

static int ff_close(sqlite3_file *f) {
        return REAL(f)->pMethods->xClose(REAL(f));
}
static int ff_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off) {
        return REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
}
static int ff_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off) {
        if (disk_full)
                return SQLITE_FULL;
        return REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
}
static int ff_truncate(sqlite3_file *f, sqlite3_int64 size) {
        return REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int ff_sync(sqlite3_file *f, int flags) {
        return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int ff_file_size(sqlite3_file *f, sqlite3_int64 *size) {
        return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int ff_lock(sqlite3_file *f, int l) {
        return REAL(f)->pMethods->xLock(REAL(f), l);
}
static int ff_unlock(sqlite3_file *f, int l) {
        return REAL(f)->pMethods->xUnlock(REAL(f), l);
}
static int ff_check_reserved(sqlite3_file *f, int *out) {
        return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int ff_file_control(sqlite3_file *f, int op, void *arg) {
        return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int ff_sector_size(sqlite3_file *f) {
        return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int ff_device_characteristics(sqlite3_file *f) {
        return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int ff_shm_map(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp) {
        return REAL(f)->pMethods->xShmMap(REAL(f), pg, pgsz, extend, pp);
}
static int ff_shm_lock(sqlite3_file *f, int offset, int n, int flags) {
        return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}
static void ff_shm_barrier(sqlite3_file *f) {
        REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int ff_shm_unmap(sqlite3_file *f, int delete_flag) {
        return REAL(f)->pMethods->xShmUnmap(REAL(f), delete_flag);
}
/* No memory-mapped I/O: every page goes through xRead and xWrite. */
static int ff_fetch(sqlite3_file *f, sqlite3_int64 off, int amt, void **pp) {
        *pp = NULL;
        return SQLITE_OK;
}
static int ff_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p) {
        return SQLITE_OK;
}

static const sqlite3_io_methods full_io = {
        .iVersion = 3,
        .xClose = ff_close,
        .xRead = ff_read,
        .xWrite = ff_write,
        .xTruncate = ff_truncate,
        .xSync = ff_sync,
        .xFileSize = ff_file_size,
        .xLock = ff_lock,
        .xUnlock = ff_unlock,
        .xCheckReservedLock = ff_check_reserved,
        .xFileControl = ff_file_control,
        .xSectorSize = ff_sector_size,
        .xDeviceCharacteristics = ff_device_characteristics,
        .xShmMap = ff_shm_map,
        .xShmLock = ff_shm_lock,
        .xShmBarrier = ff_shm_barrier,
        .xShmUnmap = ff_shm_unmap,
        .xFetch = ff_fetch,
        .xUnfetch = ff_unfetch,
};

static int fv_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out_flags) {
        full_file *ff = (full_file *) f;
        int rc;

        ff->real = (sqlite3_file *) (ff + 1);
        rc = real_vfs->xOpen(real_vfs, name, ff->real, flags, out_flags);
        /* sqlite calls xClose only if pMethods is set. */
        ff->base.pMethods = rc == SQLITE_OK ? &full_io : NULL;
        return rc;
}
static int fv_delete(sqlite3_vfs *vfs, const char *name, int sync_dir) {
        return real_vfs->xDelete(real_vfs, name, sync_dir);
}
static int fv_access(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
        return real_vfs->xAccess(real_vfs, name, flags, out);
}
static int fv_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out) {
        return real_vfs->xFullPathname(real_vfs, name, n, out);
}
static int fv_randomness(sqlite3_vfs *vfs, int n, char *out) {
        return real_vfs->xRandomness(real_vfs, n, out);
}
static int fv_sleep(sqlite3_vfs *vfs, int us) {
        return real_vfs->xSleep(real_vfs, us);
}
static int fv_current_time(sqlite3_vfs *vfs, double *out) {
        return real_vfs->xCurrentTime(real_vfs, out);
}
static int fv_get_last_error(sqlite3_vfs *vfs, int n, char *out) {
        return real_vfs->xGetLastError(real_vfs, n, out);
}
static int fv_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
        return real_vfs->xCurrentTimeInt64(real_vfs, out);
}

static sqlite3_vfs full_vfs = {
        .iVersion = 2,
        .zName = "test-full",
        .xOpen = fv_open,
        .xDelete = fv_delete,
        .xAccess = fv_access,
        .xFullPathname = fv_full_pathname,
        .xRandomness = fv_randomness,
        .xSleep = fv_sleep,
        .xCurrentTime = fv_current_time,
        .xGetLastError = fv_get_last_error,
        .xCurrentTimeInt64 = fv_current_time_int64,
};

/* The store opens files through the default VFS: this one, for a test. */
static void use_full_vfs(void) {
        if (!real_vfs) {
                ASSERT_EQ(sqlite3_initialize(), SQLITE_OK);
                real_vfs = sqlite3_vfs_find(NULL);
                ASSERT_TRUE(real_vfs);
                full_vfs.szOsFile = (int) sizeof(full_file) + real_vfs->szOsFile;
                full_vfs.mxPathname = real_vfs->mxPathname;
        }
        ASSERT_EQ(sqlite3_vfs_register(&full_vfs, 1), SQLITE_OK);
        disk_full = false;
}

static void restore_vfs(bool *unused) {
        disk_full = false;
        if (real_vfs) {
                (void) sqlite3_vfs_register(real_vfs, 1);
                (void) sqlite3_vfs_unregister(&full_vfs);
        }
}
#define _cleanup_vfs_ _cleanup_(restore_vfs)

static const frame STACK_A[] = { K_MEMCPY_10, K_ENTRY };
static const frame STACK_B[] = { K_BRD, K_OPEN, K_ENTRY };

/* A second of samples at S(sec), half with a comm and frames first seen
 * in it: their ids are interned in the batch that may be held. */
static void add_second(store *s, unsigned sec, unsigned n) {
        char comm[32], sym[32];
        frame f = { FRAME_USER, 0x401000 + sec, NULL, sec, "/usr/bin/held", NULL };

        snprintf(comm, sizeof comm, "held-%u", sec);
        snprintf(sym, sizeof sym, "fn_%u", sec);
        f.symbol = sym;
        ASSERT_OK(store_begin(s));
        for (unsigned i = 0; i < n; i++) {
                frame chain[] = { f, K_ENTRY };

                if (i % 2)
                        add(s, S(sec) + i * (NSEC_PER_SEC / n), i % 4, 100 + sec, comm, chain, 2);
                else
                        add(s, S(sec) + i * (NSEC_PER_SEC / n), i % 4, 7, "steady", i % 4 ? STACK_A : STACK_B,
                            i % 4 ? 2 : 3);
        }
        ASSERT_OK(store_flush_samples(s, S(sec + 1)));
}

/* The rows of a report over everything, through a reader of the file. */
static query_result *query_file(const char *path) {
        _cleanup_store_ store *r = NULL;
        query_params q = QUERY_PARAMS_INIT;

        q.until_ns = UINT64_MAX;

        ASSERT_OK(store_open(path, STORE_READONLY, &r));
        return run_query(r, &q, 1000, 0);
}

TEST(held_batches_are_written_when_the_disk_has_room) {
        _cleanup_vfs_ bool vfs = true;
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        _cleanup_result_ query_result *r = NULL;
        uint64_t held, bytes, since, epoch;
        int64_t id;
        int err;

        use_full_vfs();
        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));

        add_second(s, 1, 40);
        ASSERT_OK(store_commit(s));
        ASSERT_TRUE(!store_held(s, &held, &bytes, &since, &err));
        ASSERT_U64_EQ(held, 0);

        /* Two batches refused: held, with what they hold. */
        disk_full = true;
        add_second(s, 2, 40);
        ASSERT_ERROR(store_commit(s), ENOSPC);
        ASSERT_TRUE(store_held(s, &held, &bytes, &since, &err));
        ASSERT_U64_EQ(held, 40);
        ASSERT_GT(bytes, 0);
        ASSERT_GT(since, T0 / 2);
        ASSERT_EQ(err, -ENOSPC);
        add_second(s, 3, 40);
        ASSERT_ERROR(store_commit(s), ENOSPC);
        ASSERT_TRUE(store_held(s, &held, NULL, NULL, NULL));
        ASSERT_U64_EQ(held, 80);
        ASSERT_U64_EQ(store_dropped_samples(s, NULL, NULL), 0);
        /* A write of its own while held is refused at once; what is held
         * stays held, its ids valid. */
        ASSERT_ERROR(store_intern_string(s, "interned-while-full", &id), ENOSPC);
        ASSERT_TRUE(store_held(s, &held, NULL, NULL, NULL));
        ASSERT_U64_EQ(held, 80);
        epoch = store_epoch(s);

        /* Nothing of them is in the file yet. */
        r = query_file(t.db);
        ASSERT_U64_EQ(r->total_samples, 40);
        r = query_result_free(r);

        /* Room again: the next batch writes them, same ids, same names. */
        disk_full = false;
        add_second(s, 4, 40);
        ASSERT_OK(store_commit(s));
        ASSERT_TRUE(!store_held(s, &held, &bytes, NULL, NULL));
        ASSERT_U64_EQ(held, 0);
        ASSERT_U64_EQ(bytes, 0);
        ASSERT_U64_EQ(store_dropped_samples(s, NULL, NULL), 0);
        ASSERT_U64_EQ(store_epoch(s), epoch);
        ASSERT_OK(store_intern_string(s, "interned-after", &id));

        r = query_file(t.db);
        ASSERT_U64_EQ(r->total_samples, 160);
        for (unsigned sec = 1; sec <= 4; sec++) {
                char comm[32], sym[32];
                bool found = false;

                snprintf(comm, sizeof comm, "held-%u", sec);
                snprintf(sym, sizeof sym, "fn_%u", sec);
                for (size_t i = 0; i < r->n_rows; i++)
                        if (streq(r->rows[i].comm, comm)) {
                                ASSERT_STREQ(r->rows[i].symbol, sym);
                                ASSERT_EQ(r->rows[i].samples, 20);
                                found = true;
                        }
                if (!found)
                        fprintf(stderr, "no row of comm %s among %zu rows\n", comm, r->n_rows);
                ASSERT_TRUE(found);
        }
        r = query_result_free(r);
        ASSERT_EQ(sql_int(t.db, "SELECT sum(n_samples) FROM sample_blocks WHERE level = 0"), 160);

        /* And the file is whole, for the writer reopened too. */
        s = store_free(s);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        add_second(s, 5, 40);
        ASSERT_OK(store_commit(s));
        r = query_file(t.db);
        ASSERT_U64_EQ(r->total_samples, 200);
}

/* The journal's rows (a dynamic symbol, its unregistration, events with
 * and without a detail) are kept in binary while held: replayed, they are
 * what they were, text as text, NULL as NULL. */
TEST(held_journal_rows_replay_as_they_were) {
        _cleanup_vfs_ bool vfs = true;
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        int64_t ksym = 0, ev = 0, ev2 = 0;
        char sql[512];

        use_full_vfs();
        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        add_second(s, 1, 40);
        ASSERT_OK(store_commit(s));

        disk_full = true;
        add_second(s, 2, 40);
        ASSERT_OK(store_add_ksym(s, &(store_ksym) { .boot_id = 1, .name = "bpf_prog_0123456789abcdef_it's",
                                                   .addr = 0xffffffffc0001000ULL, .len = 0x200, .type = "bpf",
                                                   .registered_ns = 7, .registered_how = "perf" }, &ksym));
        ASSERT_OK(store_set_ksym_prog_id(s, ksym, 42));
        ASSERT_OK(store_add_event(s, &(store_event) { .time_ns = 8, .boot_id = 1, .kind = "ksym-register",
                                                     .ksym_id = ksym, .detail = "PERF_RECORD_KSYMBOL",
                                                     .live_ksyms = &ksym, .n_live_ksyms = 1 }, &ev));
        ASSERT_OK(store_unregister_ksym(s, ksym, 9, "rescan"));
        ASSERT_OK(store_add_event(s, &(store_event) { .time_ns = 9, .boot_id = 1, .kind = "ksym-unregister",
                                                     .ksym_id = ksym }, &ev2));
        ASSERT_ERROR(store_commit(s), ENOSPC);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM ksyms"), 0);

        disk_full = false;
        add_second(s, 3, 40);
        ASSERT_OK(store_commit(s));
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM ksyms WHERE id = %lld AND name = 'bpf_prog_0123456789abcdef_it''s' "
                 "AND typeof(name) = 'text' AND addr = %lld AND len = 512 AND type = 'bpf' AND prog_id = 42 "
                 "AND registered_ns = 7 AND registered_how = 'perf' AND unregistered_ns = 9 "
                 "AND unregistered_how = 'rescan'", (long long) ksym, (long long) (int64_t) 0xffffffffc0001000ULL);
        ASSERT_EQ(sql_int(t.db, sql), 1);
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM events WHERE id = %lld AND kind = 'ksym-register' AND typeof(kind) = 'text' "
                 "AND detail = 'PERF_RECORD_KSYMBOL' AND ksym = %lld AND time_ns = 8", (long long) ev, (long long) ksym);
        ASSERT_EQ(sql_int(t.db, sql), 1);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM events WHERE id = %lld AND detail IS NULL", (long long) ev2);
        ASSERT_EQ(sql_int(t.db, sql), 1);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM event_ksyms WHERE event = %lld AND ksym = %lld",
                 (long long) ev, (long long) ksym);
        ASSERT_EQ(sql_int(t.db, sql), 1);
}

TEST(held_batches_past_the_limit_are_dropped_and_counted) {
        _cleanup_vfs_ bool vfs = true;
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        _cleanup_result_ query_result *r = NULL;
        uint64_t held = 0, bytes = 0, dropped, since;
        unsigned sec = 1, failed = 0;
        int err = 0;

        use_full_vfs();
        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        store_set_hold_limit(s, 64 * 1024);
        add_second(s, sec++, 40);
        ASSERT_OK(store_commit(s));

        /* Held until the SQL kept passes 64 KiB, then dropped: all of it. */
        disk_full = true;
        for (;;) {
                uint64_t before = held;

                add_second(s, sec++, 40);
                ASSERT_ERROR(store_commit(s), ENOSPC);
                failed++;
                if (!store_held(s, &held, &bytes, NULL, NULL)) {
                        ASSERT_U64_EQ(held, 0);
                        held = before;
                        break;
                }
                ASSERT_LE(bytes, 64 * 1024);
                ASSERT_LT(failed, 1000);
        }
        ASSERT_GE(failed, 2);
        /* The ids the held batches handed out are gone: those who cache
         * ids see it. */
        ASSERT_GT(store_epoch(s), 0);
        dropped = store_dropped_samples(s, &err, &since);
        /* What was held, the refused batch's 40 and its open bucket's. */
        ASSERT_GE(dropped, held + 40);
        ASSERT_EQ(err, -ENOSPC);
        ASSERT_GT(since, 0);

        /* Room again: writing resumes, nothing more is dropped. */
        disk_full = false;
        add_second(s, sec++, 40);
        ASSERT_OK(store_commit(s));
        ASSERT_U64_EQ(store_dropped_samples(s, NULL, NULL), dropped);
        ASSERT_OK(store_flush_samples(s, UINT64_MAX));
        r = query_file(t.db);
        /* The first second, the last, and what was dropped is not there. */
        ASSERT_U64_EQ(r->total_samples + dropped, (uint64_t) (sec - 1) * 40);
        ASSERT_U64_EQ(r->total_samples, 80);

        /* No hold at all: a refused batch is dropped at once. */
        store_set_hold_limit(s, 0);
        disk_full = true;
        add_second(s, sec++, 40);
        ASSERT_ERROR(store_commit(s), ENOSPC);
        ASSERT_TRUE(!store_held(s, NULL, NULL, NULL, NULL));
        ASSERT_U64_EQ(store_dropped_samples(s, NULL, NULL), dropped + 40);
}

TEST(held_batches_are_dropped_at_free) {
        _cleanup_vfs_ bool vfs = true;
        _cleanup_tmpdir_ tmpdir t;
        store *s = NULL;
        _cleanup_result_ query_result *r = NULL;

        use_full_vfs();
        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        add_second(s, 1, 40);
        ASSERT_OK(store_commit(s));
        disk_full = true;
        add_second(s, 2, 40);
        ASSERT_ERROR(store_commit(s), ENOSPC);
        ASSERT_TRUE(store_held(s, NULL, NULL, NULL, NULL));
        ASSERT_OK(store_drop_held(s));
        ASSERT_TRUE(!store_held(s, NULL, NULL, NULL, NULL));
        ASSERT_U64_EQ(store_dropped_samples(s, NULL, NULL), 40);
        add_second(s, 3, 40);
        ASSERT_ERROR(store_commit(s), ENOSPC);
        disk_full = false;
        /* Not tried again at the stop: the file keeps what was committed. */
        ASSERT_NULL(store_free(s));
        r = query_file(t.db);
        ASSERT_U64_EQ(r->total_samples, 40);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
}

/* What is held is replayed into sqlite's page cache at each try: more
 * than the cache holds must not spill to the full disk (and fail the try
 * before its COMMIT). */
TEST(held_batches_outgrow_the_page_cache) {
        _cleanup_vfs_ bool vfs = true;
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        _cleanup_result_ query_result *r = NULL;
        uint64_t held, bytes;
        unsigned sec;

        use_full_vfs();
        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        ASSERT_OK(store_sql_exec(store_sqlite(s), "PRAGMA cache_size = 16"));
        add_second(s, 1, 400);
        ASSERT_OK(store_commit(s));

        disk_full = true;
        for (sec = 2; sec <= 200; sec++) {
                add_second(s, sec, 400);
                ASSERT_ERROR(store_commit(s), ENOSPC);
                ASSERT_TRUE(store_held(s, &held, &bytes, NULL, NULL));
        }
        ASSERT_U64_EQ(held, 199 * 400);
        ASSERT_U64_EQ(store_dropped_samples(s, NULL, NULL), 0);
        /* Far more than the cache's 16 pages. */
        ASSERT_GT(bytes, (uint64_t) sql_int(t.db, "PRAGMA page_size") * 16);

        disk_full = false;
        add_second(s, sec, 400);
        ASSERT_OK(store_commit(s));
        ASSERT_U64_EQ(store_dropped_samples(s, NULL, NULL), 0);
        r = query_file(t.db);
        ASSERT_U64_EQ(r->total_samples, 201 * 400);
}

/* A statement that failed inside a batch (its caller handled the error)
 * is kept with the rest; replayed on the same file it fails the same
 * way, and is skipped, not taken for a failed replay. */
TEST(held_batch_with_a_failed_statement_replays) {
        _cleanup_vfs_ bool vfs = true;
        _cleanup_tmpdir_ tmpdir t;
        _cleanup_store_ store *s = NULL;
        _cleanup_result_ query_result *r = NULL;
        int64_t ev, ks[2] = { 5, 5 };

        use_full_vfs();
        tmpdir_make(&t);
        ASSERT_OK(store_open(t.db, STORE_READWRITE, &s));
        add_second(s, 1, 40);
        ASSERT_OK(store_commit(s));

        disk_full = true;
        add_second(s, 2, 40);
        /* The same ksym twice: the event's second link fails its key. */
        ASSERT_ERROR(store_add_event(s, &(store_event) { .time_ns = S(2), .boot_id = 1, .kind = "x",
                                                         .live_ksyms = ks, .n_live_ksyms = 2 }, &ev), EEXIST);
        ASSERT_ERROR(store_commit(s), ENOSPC);
        ASSERT_TRUE(store_held(s, NULL, NULL, NULL, NULL));

        disk_full = false;
        add_second(s, 3, 40);
        ASSERT_OK(store_commit(s));
        ASSERT_TRUE(!store_held(s, NULL, NULL, NULL, NULL));
        ASSERT_U64_EQ(store_dropped_samples(s, NULL, NULL), 0);
        ASSERT_U64_EQ(store_epoch(s), 0);
        r = query_file(t.db);
        ASSERT_U64_EQ(r->total_samples, 120);
        ASSERT_EQ(sql_int(t.db, "SELECT count(*) FROM event_ksyms"), 1);
}
