/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The sqlite store. See store.h for the model; the notes here are about
 * why it is built the way it is.
 *
 * - Integers: sqlite INTEGER is a signed 64-bit value. Addresses, offsets,
 *   times and periods are uint64_t and are stored as their two's-complement
 *   int64_t image, so kernel addresses (0xffff...) read back from SQL as
 *   negative numbers; every reader here casts back to uint64_t. SQL range
 *   conditions are only used on time_ns, which stays below 2^63 until 2262.
 * - "None" in a key column is 0, never NULL: sqlite's UNIQUE treats NULLs as
 *   distinct, which would let the same frame be interned twice.
 * - The ingest path is dominated by the interning lookups, so each kind of
 *   value has an in-memory cache in front of INSERT OR IGNORE + SELECT, and
 *   every statement is prepared once and reused. */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hashmap.h"
#include "macro.h"
#include "store/store.h"
#include "store/store-private.h"
#include "store/store-samples.h"
#include "store/store-dict.h"

/* Readers wait this long for a writer's checkpoint or a schema change;
 * the writer waits this long for a reader holding the WAL. */
#define STORE_BUSY_TIMEOUT_MS 5000

/* sqlite's own default threshold for its automatic checkpoints. */
#define STORE_CHECKPOINT_FRAMES 1000

/* The interning caches (strings; frames by content) are cleared when
 * they reach this many entries, or bytes with the keys kept in their
 * arena (a frame's key holds its strings: ~100 bytes): ids are stable, so
 * a dropped entry only costs the lookup behind it (a sqlite query for a
 * string, the dictionary's index for a frame). */
#define STORE_CACHE_MAX_ENTRIES (64 * 1024)
#define STORE_CACHE_MAX_BYTES (4 * 1024 * 1024)

/* What a stack node and a frame cost on disk in their blocks, roughly
 * (bench/RESULTS.md): for the size of a generation. */
#define STACK_NODE_BYTES 4
#define FRAME_ROW_BYTES 10
/* A stack generation ends after this much sample time, a frame
 * generation (and the stack generation with it) after the second; either
 * also once its rows are estimated at the limit
 * (store_set_dictionary_limit()) or its index is full. */
#define STORE_GENERATION_MAX_NS (3600 * NSEC_PER_SEC)
#define STORE_FRAME_GENERATION_MAX_NS (24 * 3600 * NSEC_PER_SEC)
#define STORE_GENERATION_LIMIT_DEFAULT (64ULL << 20)

/* Lost records from a CPU number above this are ignored by
 * store_get_lost_per_cpu(): it sizes an array by the largest CPU seen.
 * The kernel's NR_CPUS is at most 8192 on x86-64. */
#define STORE_MAX_CPU 65535

enum {
        STMT_BEGIN,
        STMT_COMMIT,
        STMT_ROLLBACK,
        STMT_STRING_INSERT,
        STMT_STRING_SELECT,
        STMT_LOST_INSERT,
        STMT_BOOT_INSERT,
        STMT_BOOT_SELECT,
        _STMT_MAX,
};

static const char *const stmt_sql[_STMT_MAX] = {
        /* IMMEDIATE: take the write lock at the start of a batch, not in
         * the middle of it. */
        [STMT_BEGIN]         = "BEGIN IMMEDIATE",
        [STMT_COMMIT]        = "COMMIT",
        [STMT_ROLLBACK]      = "ROLLBACK",
        [STMT_STRING_INSERT] = "INSERT OR IGNORE INTO strings(s) VALUES (?1)",
        [STMT_STRING_SELECT] = "SELECT id FROM strings WHERE s = ?1",
        [STMT_LOST_INSERT]   = "INSERT INTO lost(time_ns, cpu, count) VALUES (?1, ?2, ?3)",
        [STMT_BOOT_INSERT]   = "INSERT OR IGNORE INTO boots(boot_uuid, build_id, text_addr, release, first_ns) "
                               "VALUES (?1, ?2, ?3, ?4, ?5)",
        [STMT_BOOT_SELECT]   = "SELECT id FROM boots WHERE boot_uuid = ?1 AND build_id = ?2 AND text_addr = ?3",
};

struct store {
        sqlite3 *db;
        char *path;
        store_mode mode;
        bool in_tx;             /* inside store_begin() .. store_commit() */
        int wal_frames;         /* in the WAL after the last commit, see store_checkpoint() */

        sqlite3_stmt *stmts[_STMT_MAX];

        hashmap *string_cache;  /* string bytes -> id */
        hashmap *frame_cache;   /* frame content (see frame_key()) -> id */

        sample_writer *samples; /* the writer's open periods (store-samples.c) */
        dict *stacks, *frames;  /* the writer's dictionaries (store-dict.c) */
        /* Rows made in this stack and this frame generation, estimated. */
        uint64_t stack_gen_bytes, frame_gen_bytes;
        uint64_t gen_limit_bytes;
        int batch_error;        /* a write of the open batch failed: commit must not succeed */

        uint8_t *keybuf;        /* scratch for frame_key() */
        size_t keybuf_size;
};

/* ---- errors and small helpers ---- */

static int errno_from_sqlite(sqlite3 *db, int rc) {
        switch (rc & 0xff) {
        case SQLITE_OK:
        case SQLITE_ROW:
        case SQLITE_DONE:
                return 0;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_READONLY:
                return -EROFS;
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
                return -EBADMSG;
        case SQLITE_CONSTRAINT:
                return -EEXIST;
        case SQLITE_TOOBIG:
                return -E2BIG;
        case SQLITE_PERM:
        case SQLITE_AUTH:
                return -EPERM;
        case SQLITE_MISUSE:
        case SQLITE_RANGE:
                return -EINVAL;
        case SQLITE_CANTOPEN:
        case SQLITE_IOERR: {
                int e = db ? sqlite3_system_errno(db) : 0;
                if (e > 0)
                        return -e;
                return (rc & 0xff) == SQLITE_CANTOPEN ? -ENOENT : -EIO;
        }
        default:
                return -EIO;
        }
}

/* Runs SQL without results. */
static int exec_sql(sqlite3 *db, const char *sql) {
        int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        return errno_from_sqlite(db, rc);
}


DEFINE_TRIVIAL_CLEANUP_FUNC(hashmap *, hashmap_free);
#define _cleanup_hashmap_ _cleanup_(hashmap_freep)

DEFINE_TRIVIAL_CLEANUP_FUNC(store *, store_free);

static int prepare(sqlite3 *db, const char *sql, sqlite3_stmt **ret) {
        int rc = sqlite3_prepare_v2(db, sql, -1, ret, NULL);
        return errno_from_sqlite(db, rc);
}

/* Runs a one-row query and returns its first column as an integer; -ENOENT
 * if there is no row. */
static int query_int64(sqlite3 *db, const char *sql, int64_t *ret) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = prepare(db, sql, &st);
        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return errno_from_sqlite(db, rc);
        *ret = sqlite3_column_int64(st, 0);
        return 0;
}

static int get_stmt(store *s, unsigned idx, sqlite3_stmt **ret) {
        if (!s->stmts[idx]) {
                int rc = sqlite3_prepare_v3(s->db, stmt_sql[idx], -1, SQLITE_PREPARE_PERSISTENT, &s->stmts[idx], NULL);
                if (rc != SQLITE_OK)
                        return errno_from_sqlite(s->db, rc);
        }
        *ret = s->stmts[idx];
        return 0;
}

/* Steps a write statement to completion and resets it. */
static int step_done(store *s, sqlite3_stmt *st) {
        int rc = sqlite3_step(st);
        int r = rc == SQLITE_DONE ? 0 : errno_from_sqlite(s->db, rc);

        sqlite3_reset(st);
        return r == 0 && rc != SQLITE_DONE ? -EIO : r;
}

/* Steps a lookup statement: its single integer column, or -ENOENT. */
static int step_id(store *s, sqlite3_stmt *st, int64_t *ret) {
        int rc = sqlite3_step(st), r;

        if (rc == SQLITE_ROW) {
                *ret = sqlite3_column_int64(st, 0);
                r = 0;
        } else if (rc == SQLITE_DONE)
                r = -ENOENT;
        else
                r = errno_from_sqlite(s->db, rc);

        sqlite3_reset(st);
        return r;
}

static void caches_clear(store *s) {
        hashmap_clear(s->string_cache);
        hashmap_clear(s->frame_cache);
}

/* The open periods and the stack index may hold ids of the batch: read
 * them back as committed. */
static void reload_after_rollback(store *s, int cause) {
        if (s->samples)
                (void) sample_writer_reload(s->samples, cause);
        if (s->stacks)
                (void) dict_reload(s->stacks, sample_writer_generation(s->samples, NULL));
        if (s->frames)
                (void) dict_reload(s->frames, sample_writer_frame_generation(s->samples, NULL));
}

/* Ids cached during a transaction that was rolled back do not exist:
 * forget everything. sqlite rolls a transaction back on its own after
 * some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM), which shows as
 * autocommit being on again. */
static void check_rolled_back(store *s) {
        if (s->in_tx && sqlite3_get_autocommit(s->db)) {
                s->in_tx = false;
                s->batch_error = 0;
                caches_clear(s);
                reload_after_rollback(s, errno_from_sqlite(s->db, sqlite3_errcode(s->db)));
        }
}

size_t store_cache_bytes(const store *s) {
        return hashmap_memory_bytes(s->string_cache) + hashmap_memory_bytes(s->frame_cache) +
               dict_memory_bytes(s->stacks) + dict_memory_bytes(s->frames) +
               (s->samples ? sample_writer_memory_bytes(s->samples) : 0);
}

static int cache_put(hashmap *h, const void *key, size_t len, int64_t id) {
        if (hashmap_size(h) >= STORE_CACHE_MAX_ENTRIES || hashmap_memory_bytes(h) >= STORE_CACHE_MAX_BYTES)
                hashmap_clear(h);
        return hashmap_put(h, key, len, id);
}

/* ---- schema ---- */

/* Migration N moves a database from user_version N to N + 1. Append new
 * ones; never edit a released one. Each runs in the open transaction. */
static int migrate_0_to_1(sqlite3 *db) {
        /* Indexes are kept to what lookups need: every index costs on each
         * insert, and samples are inserted at the sampling rate. The UNIQUE
         * constraints double as the interning lookups' indexes. */
        return exec_sql(db,
                "CREATE TABLE strings(id INTEGER PRIMARY KEY, s TEXT UNIQUE NOT NULL);"
                "CREATE TABLE frames(id INTEGER PRIMARY KEY, kind INTEGER NOT NULL, addr INTEGER NOT NULL,"
                "  symbol_id INTEGER NOT NULL, offset INTEGER NOT NULL, module_id INTEGER NOT NULL,"
                "  build_id_id INTEGER NOT NULL,"
                "  UNIQUE(kind, addr, symbol_id, offset, module_id, build_id_id));"
                "CREATE TABLE stacks(id INTEGER PRIMARY KEY, parent INTEGER NOT NULL, frame INTEGER NOT NULL,"
                "  UNIQUE(parent, frame));"
                "CREATE TABLE boots(id INTEGER PRIMARY KEY, boot_uuid TEXT NOT NULL, build_id TEXT NOT NULL,"
                "  text_addr INTEGER NOT NULL, release TEXT, first_ns INTEGER,"
                "  UNIQUE(boot_uuid, build_id, text_addr));"
                "CREATE TABLE samples(time_ns INTEGER NOT NULL, cpu INTEGER, pid INTEGER, tid INTEGER,"
                "  comm INTEGER, stack INTEGER, period INTEGER, boot INTEGER);"
                "CREATE INDEX samples_time ON samples(time_ns);"
                "CREATE TABLE lost(time_ns INTEGER NOT NULL, cpu INTEGER, count INTEGER);"
                "CREATE INDEX lost_time ON lost(time_ns);");
}

typedef int (*migration_fn)(sqlite3 *db);

static const migration_fn migrations[] = {
        migrate_0_to_1,
        store_migrate_1_to_2,   /* store-layout.c */
        store_migrate_2_to_3,   /* store-layout.c */
        store_migrate_3_to_4,   /* store-layout.c */
        store_migrate_4_to_5,   /* store-samples.c */
        store_migrate_5_to_6,   /* store-samples.c */
        store_migrate_6_to_7,   /* store-dict.c */
        store_migrate_7_to_8,   /* store-samples.c */
};

_Static_assert(ELEMENTSOF(migrations) == STORE_SCHEMA_VERSION, "one migration per schema version");

static int read_user_version(sqlite3 *db, int64_t *ret) {
        return query_int64(db, "PRAGMA user_version", ret);
}

/* PRAGMA application_id of perfsnapd's databases ("PSND"). */
#define STORE_APPLICATION_ID 0x50534e44

/* Whether db is perfsnapd's: 0 if it is, or empty (no table); -EPROTO,
 * with *ret_why, if it is another application's (sqlite files look
 * alike: the daemon must neither convert one nor write into it). Files
 * of perfsnapd before the application id have its user_version and
 * tables. */
static int identify(sqlite3 *db, const char **ret_why) {
        int64_t app, version, tables, ours;
        int r;

        r = query_int64(db, "PRAGMA application_id", &app);
        if (r < 0)
                return r;
        if (app == STORE_APPLICATION_ID)
                return 0;
        if (app != 0)
                return *ret_why = "its application_id is another application's", -EPROTO;
        r = query_int64(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'", &tables);
        if (r < 0)
                return r;
        if (tables == 0)
                return 0;
        r = read_user_version(db, &version);
        if (r < 0)
                return r;
        r = query_int64(db,
                        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('strings', 'boots', 'lost')",
                        &ours);
        if (r < 0)
                return r;
        if (version < 1 || version > STORE_SCHEMA_VERSION || ours != 3)
                return *ret_why = "it has tables but not perfsnapd's application_id, schema version and tables",
                       -EPROTO;
        return 0;
}

static int schema_migrate(sqlite3 *db) {
        int64_t version;
        char sql[64];
        int r;

        /* IMMEDIATE: two writers starting at once must not both migrate. */
        r = exec_sql(db, "BEGIN IMMEDIATE");
        if (r < 0)
                return r;

        r = read_user_version(db, &version);
        if (r < 0)
                goto fail;
        if (version < 0 || version > STORE_SCHEMA_VERSION) {
                r = -EPROTO;
                goto fail;
        }

        for (int64_t v = version; v < STORE_SCHEMA_VERSION; v++) {
                r = migrations[v](db);
                if (r < 0)
                        goto fail;
        }

        if (version != STORE_SCHEMA_VERSION) {
                snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", STORE_SCHEMA_VERSION);
                r = exec_sql(db, sql);
                if (r < 0)
                        goto fail;
        }
        snprintf(sql, sizeof(sql), "PRAGMA application_id = %d", STORE_APPLICATION_ID);
        r = exec_sql(db, sql);
        if (r < 0)
                goto fail;

        r = exec_sql(db, "COMMIT");
        if (r < 0)
                goto fail;
        return 0;

fail:
        (void) exec_sql(db, "ROLLBACK");
        return r;
}

/* ---- open / close ---- */

static int configure_writer(sqlite3 *db) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int r, rc;

        /* Page size only takes effect before the first table is created.
         * Bigger pages mean fewer b-tree splits and WAL frames per batch of
         * appended samples. */
        r = exec_sql(db, "PRAGMA page_size = 8192");
        if (r < 0)
                return r;

        r = prepare(db, "PRAGMA journal_mode = WAL", &st);
        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return errno_from_sqlite(db, rc) ?: -EIO;
        /* The pragma answers the mode in effect; it stays "delete" e.g. on
         * file systems without shared memory support. Readers concurrent
         * with the writer need WAL. */
        if (strcmp((const char *) sqlite3_column_text(st, 0) ?: "", "wal") != 0)
                return -EOPNOTSUPP;

        /* In WAL mode, NORMAL syncs at checkpoints only: a committed batch
         * survives a crash of the process (it is in the WAL, in the page
         * cache), and a power loss can only lose the last batches, never
         * corrupt the file. */
        return exec_sql(db,
                        "PRAGMA synchronous = NORMAL;"
                        /* Truncate the WAL after checkpoints that found it
                         * larger than this, so a burst does not leave a huge file. */
                        "PRAGMA journal_size_limit = 67108864;"
                        /* 4 MiB page cache: the writer appends blocks and
                         * looks up strings on a miss of its cache; the
                         * dictionaries have indexes of their own in memory. */
                        "PRAGMA cache_size = -4096;"
                        "PRAGMA temp_store = MEMORY;");
}

static int wal_hook(void *userdata, sqlite3 *db, const char *name, int n_frames) {
        store *s = userdata;

        s->wal_frames = n_frames;
        return SQLITE_OK;
}

int store_checkpoint(store *s) {
        int rc;

        if (!s || s->mode != STORE_READWRITE || s->in_tx)
                return -EINVAL;
        if (s->wal_frames < STORE_CHECKPOINT_FRAMES)
                return 0;
        /* PASSIVE: copies what no reader still needs, never waits for one. */
        rc = sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        if (rc != SQLITE_OK && rc != SQLITE_BUSY)
                return errno_from_sqlite(s->db, rc);
        s->wal_frames = 0;
        return 1;
}

bool store_checkpoint_due(store *s) {
        if (!s || s->mode != STORE_READWRITE || s->wal_frames < STORE_CHECKPOINT_FRAMES)
                return false;
        s->wal_frames = 0;
        return true;
}

struct store_checkpointer {
        sqlite3 *db;
};

int store_checkpointer_new(const char *path, store_checkpointer **ret) {
        store_checkpointer *c;
        int rc, r;

        if (!path || !ret)
                return -EINVAL;
        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        /* Not CREATE: the writer made the file and its WAL mode. */
        rc = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_READWRITE, NULL);
        if (rc != SQLITE_OK) {
                r = errno_from_sqlite(c->db, rc);
                store_checkpointer_free(c);
                return r;
        }
        sqlite3_extended_result_codes(c->db, 1);
        /* Checkpoints are the writer's to ask for: this connection never
         * runs one inside a statement of its own (it makes none). */
        sqlite3_wal_autocheckpoint(c->db, 0);
        /* A connection finds the file in WAL mode at its first read; until
         * then a checkpoint has no WAL to copy. */
        r = exec_sql(c->db, "PRAGMA schema_version");
        if (r < 0) {
                store_checkpointer_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

store_checkpointer *store_checkpointer_free(store_checkpointer *c) {
        if (!c)
                return NULL;
        /* Not the last connection (the writer's outlives it), so closing
         * neither checkpoints nor removes the WAL. */
        sqlite3_close_v2(c->db);
        free(c);
        return NULL;
}

int store_checkpointer_run(store_checkpointer *c, int *ret_wal_frames, int *ret_copied) {
        int rc, log = 0, copied = 0;

        if (!c)
                return -EINVAL;
        rc = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
        if (rc != SQLITE_OK && rc != SQLITE_BUSY)
                return errno_from_sqlite(c->db, rc);
        if (ret_wal_frames)
                *ret_wal_frames = log;
        if (ret_copied)
                *ret_copied = copied;
        return 0;
}

/* The writer's sample accumulators, read back from the database; a
 * schema-4 samples table is converted first, in one transaction. */
static int open_samples(store *s) {
        uint64_t n = 0;
        int r;

        r = sample_writer_new(s, &s->samples);
        if (r < 0)
                return r;
        r = sample_writer_reload(s->samples, 0);
        if (r < 0)
                return r;
        r = dict_new(s, DICT_STACKS, &s->stacks);
        if (r < 0)
                return r;
        r = dict_new(s, DICT_FRAMES, &s->frames);
        if (r < 0)
                return r;
        r = dict_reload(s->stacks, sample_writer_generation(s->samples, NULL));
        if (r < 0)
                return r;
        r = dict_reload(s->frames, sample_writer_frame_generation(s->samples, NULL));
        if (r < 0)
                return r;

        r = store_begin(s);
        if (r < 0)
                return r;
        r = sample_writer_convert_v4(s->samples, &n);
        if (r < 0) {
                (void) store_rollback(s);
                return r;
        }
        return store_commit(s);
}

int store_open(const char *path, store_mode mode, store **ret) {
        _cleanup_(store_freep) store *s = NULL;
        int64_t version;
        int flags, r, rc;

        if (!path || !ret || (mode != STORE_READWRITE && mode != STORE_READONLY))
                return -EINVAL;

        {
                struct stat st;

                /* sqlite reports a missing file as a generic CANTOPEN,
                 * and one that SQLITE_OPEN_NOFOLLOW refuses as another. */
                if (lstat(path, &st) < 0) {
                        if (mode == STORE_READONLY || errno != ENOENT)
                                return -errno;
                } else if (S_ISLNK(st.st_mode))
                        return -ELOOP;
                else if (!S_ISREG(st.st_mode))
                        return -EINVAL;
        }

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->mode = mode;
        s->gen_limit_bytes = STORE_GENERATION_LIMIT_DEFAULT;
        s->path = strdup(path);
        if (!s->path)
                return -ENOMEM;

        /* NOMUTEX: a connection is used by one thread at a time.
         * NOFOLLOW: a database path that is a symbolic link is refused. */
        flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW |
                (mode == STORE_READONLY ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
        rc = sqlite3_open_v2(path, &s->db, flags, NULL);
        if (rc != SQLITE_OK)
                return errno_from_sqlite(s->db, rc);

        sqlite3_extended_result_codes(s->db, 1);
        rc = sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);
        if (rc != SQLITE_OK)
                return errno_from_sqlite(s->db, rc);

        if (mode == STORE_READWRITE) {
                const char *why = NULL;

                /* Before anything is written (WAL mode is a write). */
                r = identify(s->db, &why);
                if (r < 0)
                        return r;
                r = configure_writer(s->db);
                if (r < 0)
                        return r;
                /* Replaces sqlite's automatic checkpoint, which runs inside
                 * whichever commit crosses its threshold: a journal entry
                 * must not wait for one. store_checkpoint() does it. */
                sqlite3_wal_hook(s->db, wal_hook, s);
                r = schema_migrate(s->db);
                if (r < 0)
                        return r;

                r = hashmap_new(&s->string_cache);
                if (r < 0)
                        return r;
                r = hashmap_new(&s->frame_cache);
                if (r < 0)
                        return r;
                r = open_samples(s);
                if (r < 0)
                        return r;
        } else {
                /* Belt and braces: the connection is read-only already;
                 * query_only also refuses e.g. a PRAGMA that would write. */
                r = exec_sql(s->db, "PRAGMA query_only = 1");
                if (r < 0)
                        return r;
                r = exec_sql(s->db, "PRAGMA cache_size = -16384; PRAGMA temp_store = MEMORY;");
                if (r < 0)
                        return r;
        }

        /* Reading user_version also reads the header: a file that is not a
         * database fails here (-EBADMSG), not at the first query. A reader
         * cannot migrate, so it needs the exact version; a newer version
         * means a newer daemon wrote it and we must not touch it. */
        r = read_user_version(s->db, &version);
        if (r < 0)
                return r;
        if (version != STORE_SCHEMA_VERSION)
                return -EPROTO;

        *ret = TAKE_PTR(s);
        return 0;
}

store *store_free(store *s) {
        if (!s)
                return NULL;

        /* A clean stop writes the open bucket; the open minute and hour
         * are read back from the buckets at the next open. */
        if (s->samples && (s->in_tx || store_begin(s) >= 0)) {
                if (sample_writer_flush_partial(s->samples) < 0)
                        (void) store_rollback(s);
                else
                        (void) store_commit(s);
        }

        sample_writer_free(s->samples);
        dict_free(s->stacks);
        dict_free(s->frames);
        for (unsigned i = 0; i < _STMT_MAX; i++)
                sqlite3_finalize(s->stmts[i]);
        /* The last connection to close checkpoints and removes the WAL. */
        sqlite3_close_v2(s->db);

        hashmap_free(s->string_cache);
        hashmap_free(s->frame_cache);
        free(s->keybuf);
        free(s->path);
        free(s);
        return NULL;
}


/* ---- transactions ---- */

int store_begin(store *s) {
        sqlite3_stmt *st = NULL;
        int r;

        if (!s)
                return -EINVAL;
        if (s->mode != STORE_READWRITE)
                return -EROFS;
        if (s->in_tx)
                return -EBUSY;

        /* A dictionary whose read-back failed (after a rollback) tries
         * again: until it succeeds nothing can be written. */
        if (dict_failed(s->stacks) || dict_failed(s->frames)) {
                r = dict_reload(s->stacks, sample_writer_generation(s->samples, NULL));
                if (r >= 0)
                        r = dict_reload(s->frames, sample_writer_frame_generation(s->samples, NULL));
                if (r < 0)
                        return r;
        }

        r = get_stmt(s, STMT_BEGIN, &st);
        if (r < 0)
                return r;
        r = step_done(s, st);
        if (r < 0)
                return r;

        s->in_tx = true;
        return 0;
}

int store_rollback(store *s) {
        sqlite3_stmt *st = NULL;
        int r, cause;

        if (!s)
                return -EINVAL;
        if (!s->in_tx)
                return -EINVAL;

        cause = s->batch_error ?: errno_from_sqlite(s->db, sqlite3_errcode(s->db));
        s->in_tx = false;
        s->batch_error = 0;
        caches_clear(s);

        r = 0;
        if (!sqlite3_get_autocommit(s->db)) {   /* else sqlite rolled it back already */
                r = get_stmt(s, STMT_ROLLBACK, &st);
                if (r >= 0)
                        r = step_done(s, st);
        }
        reload_after_rollback(s, cause);
        return r;
}

int store_commit(store *s) {
        sqlite3_stmt *st = NULL;
        int r;

        if (!s)
                return -EINVAL;
        if (!s->in_tx)
                return -EINVAL;

        r = s->batch_error;
        if (r >= 0)
                r = dict_before_commit(s->stacks);
        if (r >= 0)
                r = dict_before_commit(s->frames);
        if (r >= 0)
                r = sample_writer_before_commit(s->samples);
        if (r >= 0)
                r = get_stmt(s, STMT_COMMIT, &st);
        if (r >= 0)
                r = step_done(s, st);
        if (r < 0) {
                /* A failed COMMIT leaves the transaction open (e.g. busy);
                 * the batch is lost either way, and the caches must not
                 * keep its ids. */
                (void) store_rollback(s);
                return r;
        }

        s->in_tx = false;
        sample_writer_committed(s->samples);
        return 0;
}

/* Writes outside store_begin() .. store_commit() run in a transaction of
 * their own, so that a multi-statement operation is atomic. */
static int auto_begin(store *s, bool *ret_owned) {
        int r;

        if (s->mode != STORE_READWRITE)
                return -EROFS;

        *ret_owned = false;
        if (s->in_tx)
                return 0;

        r = store_begin(s);
        if (r < 0)
                return r;
        *ret_owned = true;
        return 0;
}

static int auto_end(store *s, bool owned, int r) {
        if (!owned) {
                if (r < 0)
                        check_rolled_back(s);
                return r;
        }
        if (r < 0) {
                (void) store_rollback(s);
                return r;
        }
        return store_commit(s);
}

/* ---- interning ---- */

static int intern_string_locked(store *s, const char *str, size_t len, int64_t *ret_id) {
        sqlite3_stmt *st = NULL;
        int64_t id = 0;
        int r;

        if (hashmap_get(s->string_cache, str, len, ret_id) >= 0)
                return 0;

        r = get_stmt(s, STMT_STRING_INSERT, &st);
        if (r < 0)
                return r;
        if (sqlite3_bind_text(st, 1, str, (int) len, SQLITE_STATIC) != SQLITE_OK)
                return -ENOMEM;
        r = step_done(s, st);
        if (r < 0)
                return r;

        if (sqlite3_changes(s->db) > 0)
                id = sqlite3_last_insert_rowid(s->db);
        else {
                /* Known to the database, not to this cache (e.g. after a
                 * restart). */
                r = get_stmt(s, STMT_STRING_SELECT, &st);
                if (r < 0)
                        return r;
                if (sqlite3_bind_text(st, 1, str, (int) len, SQLITE_STATIC) != SQLITE_OK)
                        return -ENOMEM;
                r = step_id(s, st, &id);
                if (r < 0)
                        return r == -ENOENT ? -EIO : r;
        }

        r = cache_put(s->string_cache, str, len, id);
        if (r < 0)
                return r;

        *ret_id = id;
        return 0;
}

int store_intern_string(store *s, const char *str, int64_t *ret_id) {
        size_t len;
        bool owned;
        int64_t id = 0;
        int r;

        if (!s || !str || !ret_id)
                return -EINVAL;
        len = strlen(str);
        if (len > INT_MAX)
                return -E2BIG;

        r = auto_begin(s, &owned);
        if (r < 0)
                return r;
        r = auto_end(s, owned, intern_string_locked(s, str, len, &id));
        if (r < 0)
                return r;

        *ret_id = id;
        return 0;
}

static int intern_optional_string(store *s, const char *str, int64_t *ret_id) {
        size_t len;

        if (!str) {
                *ret_id = 0;
                return 0;
        }
        len = strlen(str);
        if (len > INT_MAX)
                return -E2BIG;
        return intern_string_locked(s, str, len, ret_id);
}

/* The frame cache is keyed by the frame's content, not by the ids of its
 * strings, so that a cached frame costs one hash of ~100 bytes instead of
 * three string lookups plus one of the id tuple:
 *   kind (1) | addr (8) | offset (8) | presence bits (1) | each present string, NUL terminated.
 * Strings cannot contain NUL, so the encoding is unambiguous. */
static int frame_key(store *s, const frame *f, size_t *ret_len) {
        const char *strs[3] = { f->symbol, f->module, f->build_id };
        size_t lens[3], need = 18;
        uint8_t *p, present = 0;
        int r;

        for (unsigned i = 0; i < 3; i++) {
                lens[i] = strs[i] ? strlen(strs[i]) : 0;
                if (strs[i]) {
                        present |= 1u << i;
                        r = size_add(need, lens[i] + 1, &need);
                        if (r < 0)
                                return r;
                }
        }

        if (GREEDY_REALLOC(s->keybuf, s->keybuf_size, need) < 0)
                return -ENOMEM;

        p = s->keybuf;
        *p++ = (uint8_t) f->kind;
        memcpy(p, &f->addr, 8);
        p += 8;
        memcpy(p, &f->offset, 8);
        p += 8;
        *p++ = present;
        for (unsigned i = 0; i < 3; i++)
                if (strs[i]) {
                        memcpy(p, strs[i], lens[i] + 1);
                        p += lens[i] + 1;
                }

        *ret_len = need;
        return 0;
}

static int intern_frame_locked(store *s, const frame *f, int64_t *ret_id) {
        int64_t symbol_id, module_id, build_id_id, id = 0;
        size_t key_len;
        int r;

        if (f->kind != FRAME_KERNEL && f->kind != FRAME_USER)
                return -EINVAL;

        r = frame_key(s, f, &key_len);
        if (r < 0)
                return r;
        if (hashmap_get(s->frame_cache, s->keybuf, key_len, ret_id) >= 0)
                return 0;

        r = intern_optional_string(s, f->symbol, &symbol_id);
        if (r < 0)
                return r;
        r = intern_optional_string(s, f->module, &module_id);
        if (r < 0)
                return r;
        r = intern_optional_string(s, f->build_id, &build_id_id);
        if (r < 0)
                return r;

        int64_t values[] = { (int64_t) f->kind, i64(f->addr), symbol_id, i64(f->offset), module_id, build_id_id };
        r = dict_intern(s->frames, sample_writer_frame_generation(s->samples, NULL), values, &id);
        if (r < 0)
                return r;
        if (r > 0)
                s->frame_gen_bytes += FRAME_ROW_BYTES;

        /* frame_key() output is still in keybuf: the string interning
         * above does not touch it. */
        r = cache_put(s->frame_cache, s->keybuf, key_len, id);
        if (r < 0)
                return r;

        *ret_id = id;
        return 0;
}

int store_intern_frame(store *s, const frame *f, int64_t *ret_id) {
        bool owned;
        int64_t id = 0;
        int r;

        if (!s || !f || !ret_id)
                return -EINVAL;

        r = auto_begin(s, &owned);
        if (r < 0)
                return r;
        r = auto_end(s, owned, intern_frame_locked(s, f, &id));
        if (r < 0)
                return r;

        *ret_id = id;
        return 0;
}

static int intern_stack_locked(store *s, int64_t parent_id, int64_t frame_id, int64_t *ret_id) {
        int64_t values[] = { parent_id, frame_id };
        int r;

        r = dict_intern(s->stacks, sample_writer_generation(s->samples, NULL), values, ret_id);
        if (r < 0)
                return r;
        if (r > 0)
                s->stack_gen_bytes += STACK_NODE_BYTES;
        return 0;
}

int store_intern_stack(store *s, int64_t parent_id, int64_t frame_id, int64_t *ret_id) {
        bool owned;
        int64_t id = 0;
        int r;

        if (!s || !ret_id || parent_id < 0 || frame_id <= 0)
                return -EINVAL;

        r = auto_begin(s, &owned);
        if (r < 0)
                return r;
        r = auto_end(s, owned, intern_stack_locked(s, parent_id, frame_id, &id));
        if (r < 0)
                return r;

        *ret_id = id;
        return 0;
}

/* ---- inserts ---- */

/* Inside a transaction: the open periods are written, the stack
 * dictionary (and with new_frames the frame dictionary) writes its open
 * block and starts empty, the caches of ids it made are dropped. */
static int start_generation(store *s, uint64_t time_ns, bool new_frames) {
        int r;

        r = sample_writer_new_generation(s->samples, time_ns, new_frames);
        if (r >= 0)
                r = dict_start_generation(s->stacks, sample_writer_generation(s->samples, NULL));
        if (r >= 0)
                r = dict_start_generation(s->frames, sample_writer_frame_generation(s->samples, NULL));
        s->stack_gen_bytes = 0;
        if (new_frames) {
                caches_clear(s);
                s->frame_gen_bytes = 0;
        }
        return r;
}

/* Always inside a transaction (the caller's batch or auto_begin()'s), which
 * store_commit() flushes before committing. */
static int insert_sample_locked(store *s, const stored_sample *in) {
        stored_sample row = *in, *smp = &row;
        int64_t node[2];
        uint64_t start;
        int r;

        /* The leaf frame goes in the blocks beside the stack: a report of
         * functions then needs no stack dictionary. The stack was just
         * interned in this generation. */
        if (row.frame_id == 0 && row.stack_id != 0 && dict_find_id(s->stacks, row.stack_id, node) >= 0)
                row.frame_id = node[1];
        r = sample_writer_add(s->samples, smp);

        if (r >= 0) {
                uint64_t frame_start;
                bool new_frames, new_stacks;

                (void) sample_writer_generation(s->samples, &start);
                (void) sample_writer_frame_generation(s->samples, &frame_start);
                new_frames = s->frame_gen_bytes >= s->gen_limit_bytes ||
                             dict_rows(s->frames) >= dict_max_rows(DICT_FRAMES) ||
                             (smp->time_ns > frame_start && smp->time_ns - frame_start >= STORE_FRAME_GENERATION_MAX_NS);
                new_stacks = new_frames || s->stack_gen_bytes >= s->gen_limit_bytes ||
                             dict_rows(s->stacks) >= dict_max_rows(DICT_STACKS) ||
                             (smp->time_ns > start && smp->time_ns - start >= STORE_GENERATION_MAX_NS);
                /* Between samples: the next one interns afresh. */
                if (new_stacks)
                        r = start_generation(s, smp->time_ns, new_frames);
        }
        /* The batch must not commit with a sample missing. */
        if (r < 0 && s->batch_error == 0)
                s->batch_error = r;
        return r;
}

uint64_t store_generation(const store *s) {
        return s && s->samples ? sample_writer_generation(s->samples, NULL) : 0;
}

void store_set_dictionary_limit(store *s, uint64_t bytes) {
        if (s)
                s->gen_limit_bytes = bytes > 0 ? bytes : STORE_GENERATION_LIMIT_DEFAULT;
}

int store_insert_sample(store *s, const stored_sample *smp) {
        bool owned;
        int r;

        if (!s || !smp)
                return -EINVAL;

        r = auto_begin(s, &owned);
        if (r < 0)
                return r;
        return auto_end(s, owned, insert_sample_locked(s, smp));
}

static int read_begin(store *s, bool *ret_owned);
static void read_end(store *s, bool owned);

int64_t store_link_snapshot(store *s, int64_t boot_id, int64_t snapshot_id, uint64_t from_ns, uint64_t until_ns) {
        bool owned;
        int64_t n;
        int r;

        if (!s || snapshot_id <= 0 || from_ns >= until_ns)
                return -EINVAL;
        r = auto_begin(s, &owned);
        if (r < 0)
                return r;
        n = sample_writer_link_written(s->samples, boot_id, snapshot_id, from_ns, until_ns);
        r = auto_end(s, owned, n < 0 ? (int) n : 0);
        return r < 0 ? r : n;
}

int64_t store_count_snapshot_samples(store *s, int64_t snapshot_id) {
        bool owned;
        int64_t n;
        int r;

        if (!s)
                return -EINVAL;
        r = read_begin(s, &owned);
        if (r < 0)
                return r;
        n = sample_count_snapshot(s, snapshot_id);
        read_end(s, owned);
        return n;
}

static int add_lost_locked(store *s, uint64_t time_ns, uint32_t cpu, uint64_t lost) {
        sqlite3_stmt *st = NULL;
        int r;

        r = get_stmt(s, STMT_LOST_INSERT, &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, i64(time_ns));
        sqlite3_bind_int64(st, 2, cpu);
        sqlite3_bind_int64(st, 3, i64(lost));
        return step_done(s, st);
}

int store_add_lost(store *s, uint64_t time_ns, uint32_t cpu, uint64_t lost) {
        bool owned;
        int r;

        if (!s)
                return -EINVAL;

        r = auto_begin(s, &owned);
        if (r < 0)
                return r;
        return auto_end(s, owned, add_lost_locked(s, time_ns, cpu, lost));
}

static int add_boot_locked(store *s, const char *boot_uuid, const char *build_id, uint64_t text_addr,
                           const char *release, uint64_t time_ns, int64_t *ret_id) {
        sqlite3_stmt *st = NULL;
        int r;

        r = get_stmt(s, STMT_BOOT_INSERT, &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, boot_uuid, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, build_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, i64(text_addr));
        if (release)
                sqlite3_bind_text(st, 4, release, -1, SQLITE_STATIC);
        else
                sqlite3_bind_null(st, 4);
        sqlite3_bind_int64(st, 5, i64(time_ns));
        r = step_done(s, st);
        sqlite3_clear_bindings(st);
        if (r < 0)
                return r;

        if (sqlite3_changes(s->db) > 0) {
                *ret_id = sqlite3_last_insert_rowid(s->db);
                return 0;
        }

        r = get_stmt(s, STMT_BOOT_SELECT, &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, boot_uuid, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, build_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, i64(text_addr));
        r = step_id(s, st, ret_id);
        sqlite3_clear_bindings(st);
        return r == -ENOENT ? -EIO : r;
}

int store_add_boot(store *s, const char *boot_uuid, const char *build_id, uint64_t text_addr,
                   const char *release, uint64_t time_ns, int64_t *ret_id) {
        bool owned;
        int64_t id = 0;
        int r;

        if (!s || !boot_uuid || !ret_id)
                return -EINVAL;

        r = auto_begin(s, &owned);
        if (r < 0)
                return r;
        /* An unknown build id is "", not NULL: see UNIQUE and NULL above. */
        r = auto_end(s, owned, add_boot_locked(s, boot_uuid, build_id ?: "", text_addr, release, time_ns, &id));
        if (r < 0)
                return r;

        *ret_id = id;
        return 0;
}

/* Blocks deleted per call of store_expire(): a retention change that
 * expires days at once is spread over several calls. */
#define EXPIRE_MAX_BLOCKS 4096

static int expire_locked(store *s, uint64_t before_ns, uint64_t *ret_deleted, bool *ret_more) {
        _cleanup_finalize_ sqlite3_stmt *st_lost = NULL;
        int r;

        r = sample_writer_expire(s->samples, before_ns, EXPIRE_MAX_BLOCKS, ret_deleted, ret_more);
        if (r < 0)
                return r;
        r = prepare(s->db, "DELETE FROM lost WHERE time_ns < ?1", &st_lost);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st_lost, 1, before_ns > INT64_MAX ? INT64_MAX : i64(before_ns));
        r = step_done(s, st_lost);
        if (r < 0)
                return r;
        return store_expire_layout(s, before_ns);
}

int64_t store_expire(store *s, uint64_t before_ns, bool *ret_more) {
        uint64_t deleted = 0;
        bool owned, more = false;
        int r;

        if (!s)
                return -EINVAL;

        r = auto_begin(s, &owned);
        if (r < 0)
                return r;
        r = auto_end(s, owned, expire_locked(s, before_ns, &deleted, &more));
        if (r < 0)
                return r;
        if (ret_more)
                *ret_more = more;
        return (int64_t) deleted;
}

int store_enforce_cap(store *s, uint64_t max_bytes, store_cap_result *ret) {
        cap_result res = {};
        bool owned;
        int r;

        if (!s || !ret)
                return -EINVAL;
        r = auto_begin(s, &owned);
        if (r < 0)
                return r;
        r = sample_writer_enforce_cap(s->samples, max_bytes, EXPIRE_MAX_BLOCKS, &res);
        if (r >= 0 && res.need_new_generation) {
                /* The current generation's stacks and frames are what is
                 * left to delete: start a new one, then its blocks and rows
                 * can go like any other. */
                cap_result more;

                r = start_generation(s, sample_writer_counters(s->samples)->last_ns, true);
                if (r >= 0)
                        r = sample_writer_enforce_cap(s->samples, max_bytes, EXPIRE_MAX_BLOCKS, &more);
                if (r >= 0) {
                        res.blocks += more.blocks;
                        res.samples += more.samples;
                        res.rows += more.rows;
                        res.newest_removed_ns = MAX(res.newest_removed_ns, more.newest_removed_ns);
                }
        }
        r = auto_end(s, owned, r);
        if (r < 0)
                return r;
        *ret = (store_cap_result) {
                .used_bytes = res.used_bytes,
                .blocks = res.blocks,
                .samples = res.samples,
                .rows = res.rows,
                .newest_removed_ns = res.newest_removed_ns,
        };
        return 0;
}

int store_flush_samples(store *s, uint64_t before_ns) {
        bool owned;
        int r;

        if (!s)
                return -EINVAL;
        r = auto_begin(s, &owned);
        if (r < 0)
                return r;
        r = sample_writer_flush(s->samples, before_ns);
        if (r < 0 && s->batch_error == 0)
                s->batch_error = r;
        return auto_end(s, owned, r);
}

uint64_t store_bad_blocks(const store *s) {
        if (!s || !s->samples)
                return 0;
        return sample_writer_bad_blocks(s->samples) + dict_bad_blocks(s->stacks) + dict_bad_blocks(s->frames);
}

uint64_t store_pending_samples(const store *s) {
        return s && s->samples ? sample_writer_pending(s->samples) : 0;
}

uint64_t store_dropped_samples(const store *s, int *ret_error, uint64_t *ret_since_ns) {
        if (!s || !s->samples) {
                if (ret_error)
                        *ret_error = 0;
                if (ret_since_ns)
                        *ret_since_ns = 0;
                return 0;
        }
        return sample_writer_dropped(s->samples, ret_error, ret_since_ns);
}

/* ---- readers ---- */

/* A consistent snapshot for a multi-statement read. On the writer inside a
 * batch the batch's transaction is that snapshot already. */
static int read_begin(store *s, bool *ret_owned) {
        int r;

        *ret_owned = false;
        if (s->in_tx) {
                /* The writer reads its own batch, the open bucket and the
                 * open stack block included. */
                r = dict_before_commit(s->stacks);
                if (r >= 0)
                        r = dict_before_commit(s->frames);
                if (r >= 0)
                        r = sample_writer_flush_partial(s->samples);
                if (r < 0) {
                        /* The batch must not commit without what it wrote. */
                        if (s->batch_error == 0)
                                s->batch_error = r;
                        check_rolled_back(s);
                }
                return r;
        }
        if (s->samples) {
                /* The writer outside a batch: write its open bucket first. */
                r = store_begin(s);
                if (r >= 0)
                        r = sample_writer_flush_partial(s->samples);
                if (r >= 0)
                        r = store_commit(s);
                if (r < 0)
                        return r;
        }
        r = exec_sql(s->db, "BEGIN");
        if (r < 0)
                return r;
        *ret_owned = true;
        return 0;
}

static void read_end(store *s, bool owned) {
        if (owned)
                (void) exec_sql(s->db, "COMMIT");
}

static int file_size(const char *path, const char *suffix, uint64_t *ret) {
        _cleanup_free_ char *p = NULL;
        struct stat st;

        if (asprintf(&p, "%s%s", path, suffix) < 0)
                return -ENOMEM;
        if (stat(p, &st) < 0) {
                if (errno == ENOENT) {
                        *ret = 0;
                        return 0;
                }
                return -errno;
        }
        *ret = (uint64_t) st.st_size;
        return 0;
}

static int stats_locked(store *s, store_stats *st) {
        sample_counters c;
        int64_t v;
        int r;

        /* Counters the writer keeps: no table scan. */
        r = sample_meta_read(s->db, &c);
        if (r < 0)
                return r;
        st->samples = c.samples;
        st->first_ns = c.first_ns;
        st->last_ns = c.last_ns;

        r = query_int64(s->db, "SELECT coalesce(sum(count), 0) FROM lost", &v);
        if (r < 0)
                return r;
        st->lost = u64(v);

        /* The last block's last id: one b-tree descent. */
        r = dict_max_id(s->db, DICT_FRAMES, &v);
        if (r < 0)
                return r;
        st->n_frames = u64(v);
        r = dict_max_id(s->db, DICT_STACKS, &v);
        if (r < 0)
                return r;
        st->n_stacks = u64(v);
        r = query_int64(s->db, "SELECT coalesce(max(id), 0) FROM strings", &v);
        if (r < 0)
                return r;
        st->n_strings = u64(v);
        return 0;
}

int64_t store_memory_used(int64_t *ret_allocations) {
        sqlite3_int64 cur = 0, hi = 0;

        if (ret_allocations) {
                (void) sqlite3_status64(SQLITE_STATUS_MALLOC_COUNT, &cur, &hi, 0);
                *ret_allocations = cur;
        }
        return sqlite3_memory_used();
}

int store_get_stats(store *s, store_stats *ret) {
        store_stats st = {};
        uint64_t main_bytes, wal_bytes;
        bool owned;
        int r;

        if (!s || !ret)
                return -EINVAL;

        r = read_begin(s, &owned);
        if (r < 0)
                return r;
        r = stats_locked(s, &st);
        read_end(s, owned);
        if (r < 0)
                return r;

        r = file_size(s->path, "", &main_bytes);
        if (r < 0)
                return r;
        r = file_size(s->path, "-wal", &wal_bytes);
        if (r < 0)
                return r;
        st.db_bytes = main_bytes + wal_bytes;

        *ret = st;
        return 0;
}

int store_get_lost_per_cpu(store *s, uint64_t since_ns, uint64_t until_ns, uint64_t **ret, size_t *ret_n) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        _cleanup_free_ uint64_t *a = NULL;
        size_t n = 0;
        int r, rc;

        if (!s || !ret || !ret_n)
                return -EINVAL;

        r = prepare(s->db,
                    "SELECT cpu, sum(count) FROM lost WHERE time_ns >= ?1 AND (?2 = 0 OR time_ns < ?2) "
                    "GROUP BY cpu ORDER BY cpu",
                    &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, since_ns > INT64_MAX ? INT64_MAX : i64(since_ns));
        sqlite3_bind_int64(st, 2, until_ns > INT64_MAX ? INT64_MAX : i64(until_ns));

        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                int64_t cpu = sqlite3_column_int64(st, 0);

                /* The array is sized by the largest CPU: do not let one
                 * bogus row allocate gigabytes. */
                if (cpu < 0 || cpu > STORE_MAX_CPU)
                        continue;
                if ((size_t) cpu >= n) {
                        uint64_t *b = realloc(a, ((size_t) cpu + 1) * sizeof(uint64_t));
                        if (!b)
                                return -ENOMEM;
                        memset(b + n, 0, ((size_t) cpu + 1 - n) * sizeof(uint64_t));
                        a = b;
                        n = (size_t) cpu + 1;
                }
                a[cpu] += u64(sqlite3_column_int64(st, 1));
        }
        if (rc != SQLITE_DONE)
                return errno_from_sqlite(s->db, rc) ?: -EIO;

        *ret = TAKE_PTR(a);
        *ret_n = n;
        return 0;
}

/* A check's first finding on one line, without the "*** in database main
 * ***" heading. */
static char *finding(const char *answer) {
        const char *heading = "*** in database main ***\n";
        char *s;

        if (!answer)
                return strdup("?");
        if (strncmp(answer, heading, strlen(heading)) == 0)
                answer += strlen(heading);
        s = strdup(answer);
        for (char *p = s; p && *p; p++)
                if (*p == '\n')
                        *p = ' ';
        return s;
}

/* Runs one check pragma; -EBADMSG with *ret_why unless all it says is "ok". */
static int run_check(sqlite3 *db, const char *sql, char **ret_why) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        const char *answer;
        int r, rc;

        r = prepare(db, sql, &st);
        if (r < 0) {
                if (r == -EBADMSG && !*ret_why)
                        *ret_why = strdup(sqlite3_errmsg(db));
                return r;
        }
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                answer = (const char *) sqlite3_column_text(st, 0);
                if (answer && streq(answer, "ok"))
                        continue;
                if (!*ret_why)
                        *ret_why = finding(answer);
                r = -EBADMSG;
        }
        if (rc != SQLITE_DONE) {
                r = errno_from_sqlite(db, rc) ?: -EIO;
                if (r == -EBADMSG && !*ret_why)
                        *ret_why = strdup(sqlite3_errmsg(db));
        }
        return r;
}

/* The tables that grow with the samples: a start-up check of a large file
 * after a clean stop leaves them to the readers, which skip and count a
 * damaged block. */
static bool is_block_table(const char *name) {
        return streq(name, "sample_blocks") || streq(name, "stack_blocks") || streq(name, "frame_blocks");
}

int store_verify(const char *path, store_check check, char **ret_why) {
        _cleanup_free_ char *wal = NULL;
        sqlite3 *db = NULL;
        const char *why = NULL;
        struct stat stt;
        bool whole;
        int r, rc;

        *ret_why = NULL;
        if (lstat(path, &stt) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (S_ISLNK(stt.st_mode))
                return -ELOOP;
        if (!S_ISREG(stt.st_mode))
                return -EINVAL;
        if (stt.st_size == 0)
                return 0;
        if (asprintf(&wal, "%s-wal", path) < 0)
                return -ENOMEM;
        /* A WAL with frames left behind: the last writer did not close
         * (crash, kill). A reader's close can leave an empty one. */
        struct stat wst;
        whole = check != STORE_CHECK_START || (uint64_t) stt.st_size <= STORE_CHECK_WHOLE_BYTES ||
                (stat(wal, &wst) >= 0 && wst.st_size > 0);

        rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW, NULL);
        if (rc != SQLITE_OK) {
                r = errno_from_sqlite(db, rc);
                sqlite3_close_v2(db);
                return r;
        }
        sqlite3_busy_timeout(db, STORE_BUSY_TIMEOUT_MS);
        r = identify(db, &why);
        if (r == -EPROTO)
                *ret_why = strdup(why);
        else if (r == -EBADMSG)
                *ret_why = strdup(sqlite3_errmsg(db));
        if (r >= 0 && whole)
                r = run_check(db, check == STORE_CHECK_FULL ? "PRAGMA integrity_check(5)" : "PRAGMA quick_check(5)",
                              ret_why);
        else if (r >= 0) {
                _cleanup_finalize_ sqlite3_stmt *st = NULL;

                r = prepare(db, "SELECT name FROM sqlite_master WHERE type = 'table'", &st);
                while (r >= 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                        const char *name = (const char *) sqlite3_column_text(st, 0);
                        _cleanup_free_ char *sql = NULL;

                        if (!name || is_block_table(name))
                                continue;
                        /* Every page of the table, read: sqlite 3.40's
                         * quick_check(TABLE) still walks the whole file. */
                        sql = sqlite3_mprintf("SELECT count(*) FROM \"%w\" NOT INDEXED", name);
                        int64_t n;
                        r = sql ? query_int64(db, sql, &n) : -ENOMEM;
                        sqlite3_free(TAKE_PTR(sql));
                        if (r == -EBADMSG && !*ret_why && asprintf(ret_why, "table %s: %s", name, sqlite3_errmsg(db)) < 0)
                                *ret_why = NULL;
                }
                if (r >= 0 && rc != SQLITE_DONE)
                        r = errno_from_sqlite(db, rc) ?: -EIO;
        }
        sqlite3_close_v2(db);
        return r;
}

int store_check_integrity(store *s) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        const char *answer;
        int r, rc;

        if (!s)
                return -EINVAL;

        r = prepare(s->db, "PRAGMA integrity_check(1)", &st);
        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return errno_from_sqlite(s->db, rc) ?: -EIO;
        answer = (const char *) sqlite3_column_text(st, 0);
        return answer && strcmp(answer, "ok") == 0 ? 0 : -EBADMSG;
}

/* ---- store_query ---- */

/* Decoded blocks a query keeps per dictionary (24 bytes a stack node, 56
 * a frame): a window with more distinct rows decodes some blocks twice,
 * in bounded memory. */
#define QUERY_DICT_BLOCK_BYTES (32u << 20)

/* Rows and stacks are aggregated by SQL into (comm, stack) -> count, one
 * pass over the matching samples; names are then resolved per distinct
 * stack and frame through small caches, not per sample. */

/* A stack's samples of a comm; or, when the query wants no stacks, a
 * leaf frame's (stack_id 0, frame_id set). */
typedef struct group {
        int64_t comm_id, stack_id, frame_id;
        uint64_t samples;
} group;

typedef struct node_info {
        int64_t parent, frame;
} node_info;

typedef struct frame_info {
        int kind;
        uint64_t addr, offset;
        int64_t symbol_id, module_id;
        char *folded;           /* name in folded stacks, made on first use */
} frame_info;

/* Key of a report row before names are resolved. A symbolized frame is
 * identified by its symbol whatever the offset; an unsymbolized one by its
 * address. */
typedef struct row_key {
        int64_t comm_id, kind, module_id, symbol_id;
        uint64_t addr;
} row_key;

typedef struct row_acc {
        row_key key;
        uint64_t samples;
} row_acc;

typedef struct query_ctx {
        store *s;
        sqlite3_stmt *string_st;
        dict_reader *nodes, *frame_rows;

        hashmap *frame_idx;     /* frame id -> index in frames */
        frame_info *frames;
        size_t n_frames, alloc_frames;

        hashmap *string_idx;    /* string id -> index in strings */
        char **strings;
        size_t n_strings, alloc_strings;
} query_ctx;

static void query_ctx_done(query_ctx *c) {
        dict_reader_free(c->nodes);
        dict_reader_free(c->frame_rows);
        sqlite3_finalize(c->string_st);
        hashmap_free(c->frame_idx);
        hashmap_free(c->string_idx);
        for (size_t i = 0; i < c->n_frames; i++)
                free(c->frames[i].folded);
        free(c->frames);
        for (size_t i = 0; i < c->n_strings; i++)
                free(c->strings[i]);
        free(c->strings);
}

static int query_ctx_init(query_ctx *c, store *s) {
        int r;

        *c = (query_ctx) { .s = s };

        r = dict_reader_new(s->db, DICT_STACKS, QUERY_DICT_BLOCK_BYTES, &c->nodes);
        if (r < 0)
                return r;
        r = dict_reader_new(s->db, DICT_FRAMES, QUERY_DICT_BLOCK_BYTES, &c->frame_rows);
        if (r < 0)
                return r;
        r = prepare(s->db, "SELECT s FROM strings WHERE id = ?1", &c->string_st);
        if (r < 0)
                return r;
        r = hashmap_new(&c->frame_idx);
        if (r < 0)
                return r;
        return hashmap_new(&c->string_idx);
}

static int ctx_node(query_ctx *c, int64_t stack_id, node_info *ret) {
        int64_t v[2];
        node_info n;
        int r;

        r = dict_reader_get(c->nodes, stack_id, v);
        if (r < 0)
                return r;
        n = (node_info) { .parent = v[0], .frame = v[1] };
        /* Nodes are created after their parent, so a parent's id is always
         * smaller: this is what guarantees that walking up terminates,
         * whatever the file contains (the block decoder checks it too). */
        if (n.parent < 0 || n.parent >= stack_id)
                return -EBADMSG;
        *ret = n;
        return 0;
}

/* Returns an index into c->frames (stable; pointers are not). */
static int ctx_frame(query_ctx *c, int64_t frame_id, size_t *ret_idx) {
        int64_t idx, v[6];
        int r;

        if (hashmap_get_u64(c->frame_idx, u64(frame_id), &idx) >= 0) {
                *ret_idx = (size_t) idx;
                return 0;
        }

        r = array_reserve_one((void **) &c->frames, &c->alloc_frames, c->n_frames, sizeof(frame_info));
        if (r < 0)
                return r;

        /* kind, addr, symbol, offset, module, build_id */
        r = dict_reader_get(c->frame_rows, frame_id, v);
        if (r < 0)
                return r;
        c->frames[c->n_frames] = (frame_info) {
                .kind = (int) v[0],
                .addr = u64(v[1]),
                .offset = u64(v[3]),
                .symbol_id = v[2],
                .module_id = v[4],
        };

        r = hashmap_put_u64(c->frame_idx, u64(frame_id), (int64_t) c->n_frames);
        if (r < 0)
                return r;
        *ret_idx = c->n_frames++;
        return 0;
}

/* The string with this id, owned by the context; NULL for id 0. */
static int ctx_string(query_ctx *c, int64_t id, const char **ret) {
        const unsigned char *t;
        int64_t idx;
        char *copy = NULL;
        int r, rc;

        if (id == 0) {
                *ret = NULL;
                return 0;
        }
        if (hashmap_get_u64(c->string_idx, u64(id), &idx) >= 0) {
                *ret = c->strings[idx];
                return 0;
        }

        r = array_reserve_one((void **) &c->strings, &c->alloc_strings, c->n_strings, sizeof(char *));
        if (r < 0)
                return r;

        sqlite3_bind_int64(c->string_st, 1, id);
        rc = sqlite3_step(c->string_st);
        if (rc == SQLITE_ROW) {
                t = sqlite3_column_text(c->string_st, 0);
                copy = strdup(t ? (const char *) t : "");
                r = copy ? 0 : -ENOMEM;
        } else
                r = rc == SQLITE_DONE ? -EBADMSG : (errno_from_sqlite(c->s->db, rc) ?: -EIO);
        sqlite3_reset(c->string_st);
        if (r < 0)
                return r;

        r = hashmap_put_u64(c->string_idx, u64(id), (int64_t) c->n_strings);
        if (r < 0) {
                free(copy);
                return r;
        }
        c->strings[c->n_strings++] = copy;
        *ret = copy;
        return 0;
}

static int ctx_comm(query_ctx *c, int64_t comm_id, char **ret) {
        const char *comm;
        int r;

        r = ctx_string(c, comm_id, &comm);
        if (r < 0)
                return r;
        *ret = strdup(comm ?: "[unknown]");
        return *ret ? 0 : -ENOMEM;
}

/* The name of a frame in a folded stack; see store.h. */
static int ctx_folded(query_ctx *c, size_t fi, const char **ret) {
        frame_info *f = c->frames + fi;
        const char *symbol, *module;
        char *name;
        int r;

        if (f->folded) {
                *ret = f->folded;
                return 0;
        }

        r = ctx_string(c, f->symbol_id, &symbol);
        if (r < 0)
                return r;
        r = ctx_string(c, f->module_id, &module);
        if (r < 0)
                return r;
        f = c->frames + fi;

        if (symbol)
                name = strdup(symbol);
        else if (f->kind == FRAME_USER && module) {
                const char *base = strrchr(module, '/');
                base = base ? base + 1 : module;
                r = asprintf(&name, "[%s]+0x%" PRIx64, base, f->offset);
                if (r < 0)
                        name = NULL;
        } else {
                r = asprintf(&name, "0x%" PRIx64, f->addr);
                if (r < 0)
                        name = NULL;
        }
        if (!name)
                return -ENOMEM;

        f->folded = name;
        *ret = name;
        return 0;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(query_result *, query_result_free);

static int row_cmp_names(const query_row *a, const query_row *b) {
        int d = strcmp(a->comm, b->comm);
        if (d == 0)
                d = strcmp(a->module, b->module);
        if (d == 0)
                d = strcmp(a->symbol, b->symbol);
        return d;
}

static int row_cmp_by_name(const void *x, const void *y) {
        return row_cmp_names(x, y);
}

static int row_cmp_by_samples(const void *x, const void *y) {
        const query_row *a = x, *b = y;

        if (a->samples != b->samples)
                return a->samples > b->samples ? -1 : 1;
        return row_cmp_names(a, b);
}

static int group_cmp(const void *x, const void *y) {
        const group *a = x, *b = y;

        if (a->samples != b->samples)
                return a->samples > b->samples ? -1 : 1;
        if (a->comm_id != b->comm_id)
                return a->comm_id < b->comm_id ? -1 : 1;
        if (a->stack_id != b->stack_id)
                return a->stack_id < b->stack_id ? -1 : 1;
        if (a->frame_id != b->frame_id)
                return a->frame_id < b->frame_id ? -1 : 1;
        return 0;
}

static int stack_cmp(const void *x, const void *y) {
        const query_stack *a = x, *b = y;
        int d;

        if (a->samples != b->samples)
                return a->samples > b->samples ? -1 : 1;
        d = strcmp(a->comm, b->comm);
        if (d != 0)
                return d;
        for (size_t i = 0; i < a->n_frames && i < b->n_frames; i++) {
                d = strcmp(a->frames[i], b->frames[i]);
                if (d != 0)
                        return d;
        }
        return a->n_frames < b->n_frames ? -1 : a->n_frames > b->n_frames;
}

/* Filters shared by the statements of one query. Named parameters are
 * bound only where the clause is present. */
/* The filters of the lost records: they have no pid or comm, only a time
 * and a CPU. Named parameters are bound only where the clause has them. */
static void lost_where_clause(const query_params *q, char *buf, size_t size) {
        snprintf(buf, size, "time_ns >= :since%s%s",
                 q->until_ns > 0 ? " AND time_ns < :until" : "",
                 q->cpu >= 0 ? " AND cpu = :cpu" : "");
}

static void bind_named(sqlite3_stmt *st, const char *name, int64_t v) {
        int idx = sqlite3_bind_parameter_index(st, name);
        if (idx > 0)
                sqlite3_bind_int64(st, idx, v);
}

static void bind_lost_filters(sqlite3_stmt *st, const query_params *q) {
        bind_named(st, ":since", q->since_ns > INT64_MAX ? INT64_MAX : i64(q->since_ns));
        bind_named(st, ":until", q->until_ns > INT64_MAX ? INT64_MAX : i64(q->until_ns));
        bind_named(st, ":cpu", q->cpu);
}

static int query_lost(store *s, const query_params *q, query_result *res) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        char where[256], sql[512];
        int r, rc;

        lost_where_clause(q, where, sizeof(where));
        snprintf(sql, sizeof(sql), "SELECT coalesce(sum(count), 0) FROM lost WHERE %s", where);
        r = prepare(s->db, sql, &st);
        if (r < 0)
                return r;
        bind_lost_filters(st, q);
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return errno_from_sqlite(s->db, rc) ?: -EIO;
        res->lost = u64(sqlite3_column_int64(st, 0));
        return 0;
}

/* One pass over the blocks of the window: totals, distinct CPUs and
 * (comm, stack) -> samples, filtered in C. */
typedef struct group_acc {
        const query_params *q;
        int64_t comm_id;
        hashmap *idx;           /* (comm, stack or leaf frame) -> index in v */
        group *v;
        size_t n, alloc;
        uint64_t total, first_ns, last_ns;
        uint64_t cpus[(STORE_MAX_CPU + 1) / 64];
} group_acc;

static int group_block(const scan_block *b, const block_entry *v, size_t n, void *userdata) {
        group_acc *g = userdata;
        const query_params *q = g->q;
        uint64_t matched = 0;
        int r;

        for (size_t i = 0; i < n; i++) {
                const block_entry *e = v + i;
                int64_t j;

                if ((q->pid >= 0 && e->pid != (uint64_t) q->pid) || (q->cpu >= 0 && e->cpu != (uint32_t) q->cpu) ||
                    (q->comm && e->comm_id != g->comm_id))
                        continue;
                matched += e->count;
                if (e->cpu <= STORE_MAX_CPU)
                        g->cpus[e->cpu / 64] |= UINT64_C(1) << (e->cpu % 64);

                /* Without stacks, entries that know their leaf frame group
                 * by it: fewer groups, and no stack to resolve. The top bit
                 * keeps frame keys apart from stack ids. */
                bool by_frame = !q->want_stacks && e->frame_id > 0;
                uint64_t k = by_frame ? (uint64_t) e->frame_id | (UINT64_C(1) << 63) : (uint64_t) e->stack_id;

                if (hashmap_get_pair(g->idx, (uint64_t) e->comm_id, k, &j) >= 0) {
                        g->v[j].samples += e->count;
                        continue;
                }
                r = array_reserve_one((void **) &g->v, &g->alloc, g->n, sizeof(group));
                if (r < 0)
                        return r;
                r = hashmap_put_pair(g->idx, (uint64_t) e->comm_id, k, (int64_t) g->n);
                if (r < 0)
                        return r;
                g->v[g->n++] = (group) {
                        .comm_id = e->comm_id,
                        .stack_id = by_frame ? 0 : e->stack_id,
                        .frame_id = e->frame_id,
                        .samples = e->count,
                };
        }
        if (matched > 0) {
                if (g->total == 0 || b->first_ns < g->first_ns)
                        g->first_ns = b->first_ns;
                g->last_ns = MAX(g->last_ns, b->last_ns);
                g->total += matched;
        }
        return 0;
}

static int query_groups(store *s, const query_params *q, int64_t comm_id, query_result *res, group **ret,
                        size_t *ret_n) {
        _cleanup_hashmap_ hashmap *idx = NULL;
        _cleanup_free_ group_acc *g = NULL;
        int r;

        g = calloc(1, sizeof *g);
        if (!g)
                return -ENOMEM;
        r = hashmap_new(&idx);
        if (r < 0)
                return r;
        g->q = q;
        g->comm_id = comm_id;
        g->idx = idx;

        /* A profile of functions for any pid reads the leaf levels; whole
         * stacks or one pid need the full ones. */
        r = sample_scan(s, q->since_ns, q->until_ns,
                        !q->want_stacks && q->pid < 0 ? SAMPLE_LEVEL_LEAF_HOUR : SAMPLE_LEVEL_HOUR, group_block, g);
        if (r < 0) {
                free(g->v);
                return r;
        }

        res->total_samples = g->total;
        res->first_ns = g->first_ns;
        res->last_ns = g->last_ns;
        res->n_cpus = 0;
        for (size_t i = 0; i < ELEMENTSOF(g->cpus); i++)
                res->n_cpus += (uint32_t) __builtin_popcountll(g->cpus[i]);
        *ret = g->v;
        *ret_n = g->n;
        return 0;
}

typedef struct order_item {
        int64_t key;
        size_t i;
} order_item;

static int order_cmp(const void *x, const void *y) {
        const order_item *a = x, *b = y;

        return a->key != b->key ? (a->key < b->key ? -1 : 1) : 0;
}

/* *ret[i]: the leaf frame of groups[i] (0: no frames); every frame is in
 * c->frames afterwards. */
static int resolve_leaf_frames(query_ctx *c, const group *groups, size_t n, int64_t **ret) {
        _cleanup_free_ int64_t *leaf = calloc(MAX(n, (size_t) 1), sizeof *leaf);
        _cleanup_free_ order_item *order = calloc(MAX(n, (size_t) 1), sizeof *order);
        size_t m = 0, fi;
        int r;

        if (!leaf || !order)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                leaf[i] = groups[i].frame_id;
                if (leaf[i] == 0 && groups[i].stack_id != 0)
                        order[m++] = (order_item) { groups[i].stack_id, i };
        }
        qsort(order, m, sizeof *order, order_cmp);
        for (size_t k = 0; k < m; k++) {
                node_info nd;

                r = ctx_node(c, order[k].key, &nd);
                if (r < 0)
                        return r;
                leaf[order[k].i] = nd.frame;
        }

        m = 0;
        for (size_t i = 0; i < n; i++)
                if (leaf[i] != 0)
                        order[m++] = (order_item) { leaf[i], i };
        qsort(order, m, sizeof *order, order_cmp);
        for (size_t k = 0; k < m; k++) {
                r = ctx_frame(c, order[k].key, &fi);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(leaf);
        return 0;
}

static int build_rows(query_ctx *c, const group *groups, size_t n_groups, size_t limit, query_result *res) {
        _cleanup_hashmap_ hashmap *idx = NULL;
        _cleanup_free_ int64_t *leaf = NULL;
        _cleanup_free_ row_acc *acc = NULL;
        _cleanup_free_ query_row *rows = NULL;
        size_t n_acc = 0, alloc_acc = 0, n_rows = 0;
        int r;

        r = hashmap_new(&idx);
        if (r < 0)
                return r;

        /* Leaf frames of the groups that lack one, looked up in stack id
         * order, then the frames in frame id order: each dictionary block
         * is decoded once however many groups it serves, and the reader
         * needs room for one block only. */
        r = resolve_leaf_frames(c, groups, n_groups, &leaf);
        if (r < 0)
                return r;

        for (size_t i = 0; i < n_groups; i++) {
                row_key key = { .comm_id = groups[i].comm_id };
                int64_t j;

                if (leaf[i] != 0) {
                        size_t fi;

                        r = ctx_frame(c, leaf[i], &fi);
                        if (r < 0)
                                return r;
                        key.kind = c->frames[fi].kind;
                        key.module_id = c->frames[fi].module_id;
                        key.symbol_id = c->frames[fi].symbol_id;
                        key.addr = key.symbol_id != 0 ? 0 : c->frames[fi].addr;
                }

                if (hashmap_get(idx, &key, sizeof(key), &j) >= 0) {
                        acc[j].samples += groups[i].samples;
                        continue;
                }
                r = array_reserve_one((void **) &acc, &alloc_acc, n_acc, sizeof(row_acc));
                if (r < 0)
                        return r;
                acc[n_acc] = (row_acc) { .key = key, .samples = groups[i].samples };
                r = hashmap_put(idx, &key, sizeof(key), (int64_t) n_acc);
                if (r < 0)
                        return r;
                n_acc++;
        }

        if (n_acc == 0)
                return 0;

        rows = calloc(n_acc, sizeof(query_row));
        if (!rows)
                return -ENOMEM;

        for (size_t i = 0; i < n_acc; i++) {
                const row_key *k = &acc[i].key;
                query_row *row = rows + n_rows;
                const char *module, *symbol;

                r = ctx_comm(c, k->comm_id, &row->comm);
                n_rows++;
                if (r < 0)
                        goto fail;
                r = ctx_string(c, k->module_id, &module);
                if (r < 0)
                        goto fail;
                r = ctx_string(c, k->symbol_id, &symbol);
                if (r < 0)
                        goto fail;

                row->module = strdup(module ?: "[unknown]");
                if (symbol)
                        row->symbol = strdup(symbol);
                else if (k->kind == 0)
                        row->symbol = strdup("[unknown]");      /* a sample without frames */
                else if (asprintf(&row->symbol, "0x%" PRIx64, k->addr) < 0)
                        row->symbol = NULL;
                row->kernel = k->kind == FRAME_KERNEL;
                row->samples = acc[i].samples;
                if (!row->module || !row->symbol) {
                        r = -ENOMEM;
                        goto fail;
                }
        }

        /* Different keys can still name the same row (e.g. a module path
         * that reads "[unknown]"): merge by name. */
        qsort(rows, n_rows, sizeof(query_row), row_cmp_by_name);
        size_t w = 0;
        for (size_t i = 0; i < n_rows; i++) {
                if (w > 0 && row_cmp_names(rows + w - 1, rows + i) == 0) {
                        rows[w - 1].samples += rows[i].samples;
                        query_rows_free(rows + i, 1);
                        continue;
                }
                rows[w++] = rows[i];
        }
        n_rows = w;

        qsort(rows, n_rows, sizeof(query_row), row_cmp_by_samples);
        if (limit > 0 && n_rows > limit) {
                query_rows_free(rows + limit, n_rows - limit);
                n_rows = limit;
        }

        res->rows = TAKE_PTR(rows);
        res->n_rows = n_rows;
        return 0;

fail:
        query_rows_free(rows, n_rows);
        return r;
}

/* Walks a stack from its leaf node up to the root. */
static int expand_stack(query_ctx *c, const group *g, query_stack *ret) {
        _cleanup_free_ int64_t *frame_ids = NULL;
        size_t n = 0, alloc = 0;
        query_stack st = { .samples = g->samples };
        int r;

        for (int64_t id = g->stack_id; id != 0;) {
                node_info node;

                r = ctx_node(c, id, &node);
                if (r < 0)
                        return r;
                r = array_reserve_one((void **) &frame_ids, &alloc, n, sizeof(int64_t));
                if (r < 0)
                        return r;
                frame_ids[n++] = node.frame;
                id = node.parent;
        }

        r = ctx_comm(c, g->comm_id, &st.comm);
        if (r < 0)
                return r;

        if (n > 0) {
                st.frames = calloc(n, sizeof(char *));
                if (!st.frames) {
                        query_stack_done(&st);
                        return -ENOMEM;
                }
        }

        /* frame_ids is leaf first; the result is outermost caller first. */
        for (size_t i = 0; i < n; i++) {
                const char *name;
                size_t fi;

                r = ctx_frame(c, frame_ids[n - 1 - i], &fi);
                if (r >= 0)
                        r = ctx_folded(c, fi, &name);
                if (r >= 0) {
                        st.frames[i] = strdup(name);
                        if (!st.frames[i])
                                r = -ENOMEM;
                }
                if (r < 0) {
                        query_stack_done(&st);
                        return r;
                }
                st.n_frames++;
        }

        *ret = st;
        return 0;
}

static int build_stacks(query_ctx *c, group *groups, size_t n_groups, size_t limit, query_result *res) {
        size_t n;
        int r;

        qsort(groups, n_groups, sizeof(group), group_cmp);
        n = limit > 0 ? MIN(limit, n_groups) : n_groups;
        if (n == 0)
                return 0;

        res->stacks = calloc(n, sizeof(query_stack));
        if (!res->stacks)
                return -ENOMEM;

        for (size_t i = 0; i < n; i++) {
                r = expand_stack(c, groups + i, res->stacks + i);
                if (r < 0)
                        return r;       /* the caller frees what is in res */
                res->n_stacks++;
        }

        qsort(res->stacks, res->n_stacks, sizeof(query_stack), stack_cmp);
        return 0;
}

static int query_locked(store *s, const query_params *q, uint32_t max_rows, uint32_t max_stacks, query_result *res) {
        _cleanup_(query_ctx_done) query_ctx c = {};
        _cleanup_free_ group *groups = NULL;
        size_t n_groups = 0, row_limit;
        int64_t comm_id = 0;
        int r;

        r = query_lost(s, q, res);
        if (r < 0)
                return r;

        if (q->comm) {
                _cleanup_finalize_ sqlite3_stmt *st = NULL;

                r = prepare(s->db, "SELECT id FROM strings WHERE s = ?1", &st);
                if (r < 0)
                        return r;
                sqlite3_bind_text(st, 1, q->comm, -1, SQLITE_STATIC);
                r = step_id(s, st, &comm_id);
                if (r == -ENOENT)
                        return 0;       /* no sample ever had this comm */
                if (r < 0)
                        return r;
        }

        r = query_groups(s, q, comm_id, res, &groups, &n_groups);
        if (r < 0)
                return r;
        if (res->total_samples == 0)
                return 0;

        r = query_ctx_init(&c, s);
        if (r < 0)
                return r;

        /* q->top = 0 asks for all rows; max_rows = 0 means no server cap. */
        row_limit = q->top;
        if (max_rows > 0 && (row_limit == 0 || row_limit > max_rows))
                row_limit = max_rows;

        r = build_rows(&c, groups, n_groups, row_limit, res);
        if (r < 0)
                return r;

        if (q->want_stacks) {
                r = build_stacks(&c, groups, n_groups, max_stacks, res);
                if (r < 0)
                        return r;
        }
        return 0;
}

int store_query(store *s, const query_params *q, uint32_t max_rows, uint32_t max_stacks, query_result **ret) {
        _cleanup_(query_result_freep) query_result *res = NULL;
        bool owned;
        int r;

        if (!s || !q || !ret)
                return -EINVAL;
        if (q->until_ns > 0 && q->until_ns <= q->since_ns)
                return -EINVAL;

        res = calloc(1, sizeof(*res));
        if (!res)
                return -ENOMEM;

        r = read_begin(s, &owned);
        if (r < 0)
                return r;
        r = query_locked(s, q, max_rows, max_stacks, res);
        read_end(s, owned);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(res);
        return 0;
}

/* ---- for store-layout.c (store-private.h) ---- */

sqlite3 *store_sqlite(store *s) {
        return s->db;
}

int store_prepare(store *s, const char *sql, sqlite3_stmt **ret) {
        return prepare(s->db, sql, ret);
}

int store_step_done(store *s, sqlite3_stmt *st) {
        return step_done(s, st);
}

int store_step_errno(store *s, int rc) {
        return errno_from_sqlite(s->db, rc);
}

int store_write_begin(store *s, bool *ret_owned) {
        return auto_begin(s, ret_owned);
}

int store_write_end(store *s, bool owned, int r) {
        return auto_end(s, owned, r);
}
