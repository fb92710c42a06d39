/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The sqlite store: opening a database (checks, schema, migrations,
 * the writer's settings), closing, checkpoints, transactions and the
 * helpers the other files of the store share (store-private.h). See
 * store.h for the model; store-write.c, store-read.c and store-query.c
 * for the rest. Notes on why it is built the way it is:
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
#include <time.h>

#include "hashmap.h"
#include "macro.h"
#include "store/store-dict.h"
#include "store/store-private.h"
#include "store/store-samples.h"
#include "store/store.h"

/* sqlite's own default threshold for its automatic checkpoints. */
#define STORE_CHECKPOINT_FRAMES 1000

/* The interning caches (strings; frames by content) are cleared when
 * they reach this many entries, or bytes with the keys kept in their
 * arena (a frame's key holds its strings: ~100 bytes): ids are stable, so
 * a dropped entry only costs the lookup behind it (a sqlite query for a
 * string, the dictionary's index for a frame). */
#define STORE_CACHE_MAX_ENTRIES (64 * 1024)
#define STORE_CACHE_MAX_BYTES (4 * 1024 * 1024)

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

/* ---- errors and small helpers ---- */

int store_sql_errno(sqlite3 *db, int rc) {
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
int store_sql_exec(sqlite3 *db, const char *sql) {
        int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        return store_sql_errno(db, rc);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(store *, store_free);

int store_sql_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **ret) {
        int rc = sqlite3_prepare_v2(db, sql, -1, ret, NULL);
        return store_sql_errno(db, rc);
}

/* Runs a one-row query and returns its first column as an integer; -ENOENT
 * if there is no row. */
int store_sql_int64(sqlite3 *db, const char *sql, int64_t *ret) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = store_sql_prepare(db, sql, &st);
        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return store_sql_errno(db, rc);
        *ret = sqlite3_column_int64(st, 0);
        return 0;
}

int store_get_stmt_sql(store *s, unsigned idx, const char *sql, sqlite3_stmt **ret) {
        if (!s->stmts[idx]) {
                int rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->stmts[idx], NULL);
                if (rc != SQLITE_OK)
                        return store_sql_errno(s->db, rc);
        }
        *ret = s->stmts[idx];
        return 0;
}

void store_set_progress_handler(store *s, int n, int (*fn)(void *userdata), void *userdata) {
        sqlite3_progress_handler(s->db, n, n > 0 ? fn : NULL, userdata);
}

int store_get_stmt(store *s, unsigned idx, sqlite3_stmt **ret) {
        return store_get_stmt_sql(s, idx, stmt_sql[idx], ret);
}

/* Steps a write statement to completion and resets it. */
int store_step_done(store *s, sqlite3_stmt *st) {
        int rc = sqlite3_step(st);
        int r = rc == SQLITE_DONE ? 0 : store_sql_errno(s->db, rc);

        sqlite3_reset(st);
        return r == 0 && rc != SQLITE_DONE ? -EIO : r;
}

/* Steps a lookup statement: its single integer column, or -ENOENT. */
int store_step_id(store *s, sqlite3_stmt *st, int64_t *ret) {
        int rc = sqlite3_step(st), r;

        if (rc == SQLITE_ROW) {
                *ret = sqlite3_column_int64(st, 0);
                r = 0;
        } else if (rc == SQLITE_DONE)
                r = -ENOENT;
        else
                r = store_sql_errno(s->db, rc);

        sqlite3_reset(st);
        return r;
}

/* ---- held batches ----
 *
 * Every statement that writes in a batch is kept, with its values, until
 * the batch commits: as SQL text (sqlite3_expanded_sql()), or for those
 * that carry blobs in binary (store_step_kept(): printed as hex by
 * sqlite3_expanded_sql(), they took a third of the ingest path's
 * instructions). When the COMMIT
 * itself fails (a full disk, an I/O error), the batch is rolled back in
 * the file but held here: the caches, the dictionaries and the open
 * periods go on as if it had committed, and the next transaction replays
 * it before anything else. The file's rows are what they were when the
 * batch began and this connection is their only writer, so the replay
 * gives every row the id it had, rowids included. What is held is bounded
 * by hold_max_bytes of kept statements: past it, or when a replay fails, the held
 * batches are dropped the way one failed batch was before: rolled back,
 * counted in dropped_samples, and the open periods read back from the
 * file. */

static void redo_reset(store *s) {
        if (s->held)
                (void) store_sql_exec(s->db, "PRAGMA cache_spill = ON");
        s->redo_len = 0;
        s->redo_over = false;
        s->held = false;
        s->held_since_ns = 0;
        s->held_error = 0;
        /* A hold may have grown it to hold_max_bytes: give that back. */
        if (s->redo_alloc > 1024 * 1024) {
                free(s->redo);
                s->redo = NULL;
                s->redo_alloc = 0;
        }
}

/* The log's entries: REDO_SQL, then the statement's expanded text, NUL
 * terminated; or REDO_VALUES, the statement's text, NUL terminated, a
 * byte of count and its values (REDO_INT and 8 bytes, REDO_BLOB or
 * REDO_TEXT, 4 bytes of size and the bytes, or REDO_NULL), in host byte
 * order. */
enum { REDO_SQL = 'S', REDO_VALUES = 'V', REDO_INT = 'i', REDO_BLOB = 'b', REDO_TEXT = 't', REDO_NULL = 'n' };

/* Room for n more bytes of log, or false (and nothing more is kept). */
static bool redo_reserve(store *s, size_t n) {
        size_t want;
        char *p;

        if (s->redo_over || s->hold_max_bytes == 0 || s->redo_len + n > s->hold_max_bytes) {
                s->redo_over = true;
                return false;
        }
        if (s->redo_len + n <= s->redo_alloc)
                return true;
        /* Doubling, but never past the limit. */
        want = MIN(MAX(s->redo_len + n, MAX(s->redo_alloc * 2, (size_t) 4096)), s->hold_max_bytes);
        p = realloc(s->redo, want);
        if (!p) {
                s->redo_over = true;
                return false;
        }
        s->redo = p;
        s->redo_alloc = want;
        return true;
}

static void redo_put(store *s, const void *p, size_t n) {
        memcpy(s->redo + s->redo_len, p, n);
        s->redo_len += n;
}

/* sqlite calls this as each statement starts running. */
static int redo_trace(unsigned type, void *userdata, void *p, void *x) {
        store *s = userdata;
        sqlite3_stmt *st = p;
        const char *sql = x;
        char *text;
        size_t n;

        if (type != SQLITE_TRACE_STMT || !s->in_tx || s->replaying || s->redo_over || st == s->redo_kept)
                return 0;
        /* A trigger's start ("-- ..."), and statements that do not write
         * (transaction control among them). */
        if ((sql && sql[0] == '-' && sql[1] == '-') || sqlite3_stmt_readonly(st))
                return 0;

        text = sqlite3_expanded_sql(st);
        n = text ? strlen(text) + 1 : 0;
        if (!text)
                s->redo_over = true;
        else if (redo_reserve(s, 1 + n)) {
                redo_put(s, &(char) { REDO_SQL }, 1);
                redo_put(s, text, n);
        }
        sqlite3_free(text);
        return 0;
}

int store_step_kept(store *s, sqlite3_stmt *st, const store_value *v, size_t n) {
        int r;

        if (s->in_tx && !s->replaying && !s->redo_over) {
                const char *sql = sqlite3_sql(st);
                size_t need = 1 + strlen(sql) + 1 + 1;

                for (size_t i = 0; i < n; i++)
                        need += v[i].blob ? 1 + 4 + v[i].size : 1 + 8;  /* (a NULL: less) */
                if (n > UINT8_MAX)
                        s->redo_over = true;
                else if (redo_reserve(s, need)) {
                        redo_put(s, &(char) { REDO_VALUES }, 1);
                        redo_put(s, sql, strlen(sql) + 1);
                        redo_put(s, &(uint8_t) { (uint8_t) n }, 1);
                        for (size_t i = 0; i < n; i++)
                                if (v[i].text && !v[i].blob)
                                        redo_put(s, &(char) { REDO_NULL }, 1);
                                else if (v[i].blob) {
                                        uint32_t size = (uint32_t) v[i].size;

                                        redo_put(s, &(char) { v[i].text ? REDO_TEXT : REDO_BLOB }, 1);
                                        redo_put(s, &size, 4);
                                        redo_put(s, v[i].blob, v[i].size);
                                } else {
                                        redo_put(s, &(char) { REDO_INT }, 1);
                                        redo_put(s, &v[i].i, 8);
                                }
                }
        }
        s->redo_kept = st;
        r = store_step_done(s, st);
        s->redo_kept = NULL;
        return r;
}

static int bind_values(sqlite3_stmt *st, const store_value *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                int rc;

                if (v[i].text && !v[i].blob)
                        rc = sqlite3_bind_null(st, (int) i + 1);
                else if (v[i].text)
                        rc = sqlite3_bind_text(st, (int) i + 1, v[i].blob, (int) v[i].size, SQLITE_STATIC);
                else if (v[i].blob)
                        rc = sqlite3_bind_blob(st, (int) i + 1, v[i].blob, (int) v[i].size, SQLITE_STATIC);
                else
                        rc = sqlite3_bind_int64(st, (int) i + 1, v[i].i);
                if (rc != SQLITE_OK)
                        return rc == SQLITE_NOMEM ? -ENOMEM : -EINVAL;
        }
        return 0;
}

int store_run_kept(store *s, sqlite3_stmt *st, const store_value *v, size_t n) {
        int r = bind_values(st, v, n);

        return r < 0 ? r : store_step_kept(s, st, v, n);
}

/* The COMMIT failed: keep the batch, unless it cannot be (see above). */
static bool hold_batch(store *s, int cause) {
        sqlite3_stmt *st = NULL;

        if (s->redo_over)
                return false;
        if (!sqlite3_get_autocommit(s->db) &&
            (store_get_stmt(s, STMT_ROLLBACK, &st) < 0 || store_step_done(s, st) < 0))
                return false;
        if (!s->held) {
                struct timespec ts;

                clock_gettime(CLOCK_REALTIME, &ts);
                s->held_since_ns = (uint64_t) ts.tv_sec * NSEC_PER_SEC + (uint64_t) ts.tv_nsec;
        }
        s->held = true;
        s->held_error = cause;
        s->in_tx = false;
        s->batch_error = 0;
        /* Each try replays what is held into sqlite's page cache: a cache
         * that spilled to the full disk would fail the try before its
         * COMMIT, and drop it all. */
        (void) store_sql_exec(s->db, "PRAGMA cache_spill = OFF");
        return true;
}

/* The file is what it was when the statement first ran, so one that
 * fails a constraint now failed it then (and its caller handled that):
 * skipped. Any other error ends the replay. */
static int replay_step(store *s, int rc) {
        if (rc == SQLITE_DONE || rc == SQLITE_ROW || rc == SQLITE_OK || (rc & 0xff) == SQLITE_CONSTRAINT)
                return 0;
        return store_sql_errno(s->db, rc);
}

/* One REDO_VALUES entry at p: prepared, bound and run. */
static int replay_values(store *s, const uint8_t **p) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        const char *sql = (const char *) *p;
        const uint8_t *q = *p + strlen(sql) + 1;
        unsigned n = *q++;
        int r;

        r = store_sql_prepare(s->db, sql, &st);
        for (unsigned i = 0; i < n; i++) {
                int rc;

                char tag = (char) *q++;

                if (tag == REDO_NULL)
                        rc = r < 0 ? SQLITE_OK : sqlite3_bind_null(st, (int) i + 1);
                else if (tag == REDO_BLOB || tag == REDO_TEXT) {
                        uint32_t size;

                        memcpy(&size, q, 4);
                        rc = r < 0 ? SQLITE_OK
                           : tag == REDO_TEXT ? sqlite3_bind_text(st, (int) i + 1, (const char *) q + 4, (int) size, SQLITE_STATIC)
                                              : sqlite3_bind_blob(st, (int) i + 1, q + 4, (int) size, SQLITE_STATIC);
                        q += 4 + size;
                } else {
                        int64_t v;

                        memcpy(&v, q, 8);
                        rc = r < 0 ? SQLITE_OK : sqlite3_bind_int64(st, (int) i + 1, v);
                        q += 8;
                }
                if (rc != SQLITE_OK && r >= 0)
                        r = -EINVAL;
        }
        *p = q;
        if (r < 0)
                return r;
        return replay_step(s, sqlite3_step(st));
}

static int redo_replay(store *s) {
        const uint8_t *p = (const uint8_t *) s->redo, *end = p + s->redo_len;
        int r = 0;

        s->replaying = true;
        while (r >= 0 && p < end) {
                char tag = (char) *p++;

                if (tag == REDO_SQL) {
                        r = replay_step(s, sqlite3_exec(s->db, (const char *) p, NULL, NULL, NULL));
                        p += strlen((const char *) p) + 1;
                } else
                        r = replay_values(s, &p);
        }
        s->replaying = false;
        return r;
}

uint64_t store_epoch(const store *s) {
        return s ? s->epoch : 0;
}

void store_set_hold_limit(store *s, uint64_t bytes) {
        if (s)
                s->hold_max_bytes = (size_t) MIN(bytes, (uint64_t) SIZE_MAX / 2);
}

bool store_held(const store *s, uint64_t *ret_samples, uint64_t *ret_bytes, uint64_t *ret_since_ns, int *ret_error) {
        bool held = s && s->held;

        if (ret_samples)
                *ret_samples = held ? sample_writer_uncommitted(s->samples) : 0;
        if (ret_bytes)
                *ret_bytes = held ? s->redo_len : 0;
        if (ret_since_ns)
                *ret_since_ns = held ? s->held_since_ns : 0;
        if (ret_error)
                *ret_error = held ? s->held_error : 0;
        return held;
}

int store_drop_held(store *s) {
        int r;

        if (!s || !s->held || s->in_tx)
                return 0;
        /* An empty transaction to roll back: the drop of a failed batch. */
        r = store_sql_exec(s->db, "BEGIN");
        if (r < 0)
                return r;
        s->in_tx = true;
        s->batch_error = s->held_error;
        return store_rollback(s);
}

void store_caches_clear(store *s) {
        hashmap_clear(s->string_cache);
        hashmap_clear(s->frame_cache);
        s->map_event = 0;
}

/* The open periods and the stack index may hold ids of the batch: read
 * them back as committed. */
static void reload_after_rollback(store *s, int cause) {
        s->epoch++;
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
void store_check_rolled_back(store *s) {
        if (s->in_tx && sqlite3_get_autocommit(s->db)) {
                s->in_tx = false;
                s->batch_error = 0;
                redo_reset(s);
                store_caches_clear(s);
                reload_after_rollback(s, store_sql_errno(s->db, sqlite3_errcode(s->db)));
        }
}

size_t store_cache_bytes(const store *s) {
        return hashmap_memory_bytes(s->string_cache) + hashmap_memory_bytes(s->frame_cache) +
               dict_memory_bytes(s->stacks) + dict_memory_bytes(s->frames) +
               (s->samples ? sample_writer_memory_bytes(s->samples) : 0);
}

int store_cache_put(hashmap *h, const void *key, size_t len, int64_t id) {
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
        return store_sql_exec(db,
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
        store_migrate_4_to_5,   /* store-samples-upkeep.c */
        store_migrate_5_to_6,   /* store-samples-upkeep.c */
        store_migrate_6_to_7,   /* store-dict.c */
        store_migrate_7_to_8,   /* store-samples-upkeep.c */
        store_migrate_8_to_9,   /* store-samples-upkeep.c */
        store_migrate_9_to_10,  /* store-samples-upkeep.c */
        store_migrate_10_to_11, /* store-samples-upkeep.c */
        store_migrate_11_to_12, /* store-layout.c */
        store_migrate_12_to_13, /* store-samples-upkeep.c */
};

_Static_assert(ELEMENTSOF(migrations) == STORE_SCHEMA_VERSION, "one migration per schema version");

static int read_user_version(sqlite3 *db, int64_t *ret) {
        return store_sql_int64(db, "PRAGMA user_version", ret);
}

/* PRAGMA application_id of perfsnapd's databases ("PSND"). */
#define STORE_APPLICATION_ID 0x50534e44

/* Whether db is perfsnapd's: 0 if it is, or empty (no table); -EPROTO,
 * with *ret_why, if it is another application's (sqlite files look
 * alike: the daemon must neither convert one nor write into it). Files
 * of perfsnapd before the application id have its user_version and
 * tables. */
int store_identify(sqlite3 *db, const char **ret_why) {
        int64_t app, version, tables, ours;
        int r;

        r = store_sql_int64(db, "PRAGMA application_id", &app);
        if (r < 0)
                return r;
        if (app == STORE_APPLICATION_ID)
                return 0;
        if (app != 0)
                return *ret_why = "its application_id is another application's", -EPROTO;
        r = store_sql_int64(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'", &tables);
        if (r < 0)
                return r;
        if (tables == 0)
                return 0;
        r = read_user_version(db, &version);
        if (r < 0)
                return r;
        r = store_sql_int64(db,
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
        r = store_sql_exec(db, "BEGIN IMMEDIATE");
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
                r = store_sql_exec(db, sql);
                if (r < 0)
                        goto fail;
        }
        snprintf(sql, sizeof(sql), "PRAGMA application_id = %d", STORE_APPLICATION_ID);
        r = store_sql_exec(db, sql);
        if (r < 0)
                goto fail;

        r = store_sql_exec(db, "COMMIT");
        if (r < 0)
                goto fail;
        return 0;

fail:
        (void) store_sql_exec(db, "ROLLBACK");
        return r;
}

/* ---- open / close ---- */

static int configure_writer(sqlite3 *db) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int r, rc;

        /* Page size only takes effect before the first table is created.
         * Bigger pages mean fewer b-tree splits and WAL frames per batch of
         * appended samples. */
        r = store_sql_exec(db, "PRAGMA page_size = 8192");
        if (r < 0)
                return r;

        r = store_sql_prepare(db, "PRAGMA journal_mode = WAL", &st);
        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return store_sql_errno(db, rc) ?: -EIO;
        /* The pragma answers the mode in effect; it stays "delete" e.g. on
         * file systems without shared memory support. Readers concurrent
         * with the writer need WAL. */
        if (strcmp((const char *) sqlite3_column_text(st, 0) ?: "", "wal") != 0)
                return -EOPNOTSUPP;

        /* In WAL mode, NORMAL syncs at checkpoints only: a committed batch
         * survives a crash of the process (it is in the WAL, in the page
         * cache), and a power loss can only lose the last batches, never
         * corrupt the file. */
        return store_sql_exec(db,
                        "PRAGMA synchronous = NORMAL;"
                        /* Truncate the WAL after checkpoints that found it
                         * larger than this, so a burst does not leave a huge file. */
                        "PRAGMA journal_size_limit = 67108864;"
                        /* 2 MiB page cache: the writer appends blocks and
                         * looks up strings on a miss of its cache; the
                         * dictionaries have indexes of their own in memory.
                         * At 4 MiB, mostly pages it wrote, the peak at an
                         * hour's close was 3.1 MiB higher and the CPU the
                         * same (bench/RESULTS.md). */
                        "PRAGMA cache_size = -2048;"
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
                return store_sql_errno(s->db, rc);
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
                r = store_sql_errno(c->db, rc);
                store_checkpointer_free(c);
                return r;
        }
        sqlite3_extended_result_codes(c->db, 1);
        /* Checkpoints are the writer's to ask for: this connection never
         * runs one inside a statement of its own (it makes none). */
        sqlite3_wal_autocheckpoint(c->db, 0);
        /* A connection finds the file in WAL mode at its first read; until
         * then a checkpoint has no WAL to copy. */
        r = store_sql_exec(c->db, "PRAGMA schema_version");
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
                return store_sql_errno(c->db, rc);
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
        s->query_group_slots = STORE_QUERY_GROUP_SLOTS_DEFAULT;
        s->path = strdup(path);
        if (!s->path)
                return -ENOMEM;

        /* NOMUTEX: a connection is used by one thread at a time.
         * NOFOLLOW: a database path that is a symbolic link is refused. */
        flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW |
                (mode == STORE_READONLY ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
        rc = sqlite3_open_v2(path, &s->db, flags, NULL);
        if (rc != SQLITE_OK)
                return store_sql_errno(s->db, rc);

        sqlite3_extended_result_codes(s->db, 1);
        rc = sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);
        if (rc != SQLITE_OK)
                return store_sql_errno(s->db, rc);

        if (mode == STORE_READWRITE) {
                const char *why = NULL;

                /* Before anything is written (WAL mode is a write). */
                r = store_identify(s->db, &why);
                if (r < 0)
                        return r;
                r = configure_writer(s->db);
                if (r < 0)
                        return r;
                /* Replaces sqlite's automatic checkpoint, which runs inside
                 * whichever commit crosses its threshold: a journal entry
                 * must not wait for one. store_checkpoint() does it. */
                sqlite3_wal_hook(s->db, wal_hook, s);
                s->hold_max_bytes = STORE_HOLD_MAX_DEFAULT;
                if (sqlite3_trace_v2(s->db, SQLITE_TRACE_STMT, redo_trace, s) != SQLITE_OK)
                        return -EIO;
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
                r = store_sql_exec(s->db, "PRAGMA query_only = 1");
                if (r < 0)
                        return r;
                r = store_sql_exec(s->db, "PRAGMA cache_size = -4096; PRAGMA temp_store = MEMORY;");
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
         * are read back from the buckets at the next open. Batches still
         * held failed their last try: dropped, not tried again. */
        (void) store_drop_held(s);
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
        free(s->map_mods);
        free(s->redo);
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

        r = store_get_stmt(s, STMT_BEGIN, &st);
        if (r < 0)
                return r;
        r = store_step_done(s, st);
        if (r < 0)
                return r;
        s->in_tx = true;

        if (s->held) {
                r = redo_replay(s);
                if (r < 0) {
                        /* Dropped, counted with the error of the commit
                         * that failed; this transaction starts afresh. */
                        s->batch_error = s->held_error;
                        (void) store_rollback(s);
                        r = store_get_stmt(s, STMT_BEGIN, &st);
                        if (r >= 0)
                                r = store_step_done(s, st);
                        if (r < 0)
                                return r;
                        s->in_tx = true;
                }
        }
        return 0;
}

int store_rollback(store *s) {
        sqlite3_stmt *st = NULL;
        int r, cause;

        if (!s)
                return -EINVAL;
        if (!s->in_tx)
                return -EINVAL;

        cause = s->batch_error ?: store_sql_errno(s->db, sqlite3_errcode(s->db));
        s->in_tx = false;
        s->batch_error = 0;
        redo_reset(s);
        store_caches_clear(s);

        r = 0;
        if (!sqlite3_get_autocommit(s->db)) {   /* else sqlite rolled it back already */
                r = store_get_stmt(s, STMT_ROLLBACK, &st);
                if (r >= 0)
                        r = store_step_done(s, st);
        }
        reload_after_rollback(s, cause);
        return r;
}

static int commit(store *s, bool may_hold) {
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
                r = store_get_stmt(s, STMT_COMMIT, &st);
        if (r >= 0) {
                r = store_step_done(s, st);
                /* Everything was written but the file refused it: held
                 * (see "held batches"). */
                if (r < 0 && may_hold && hold_batch(s, r))
                        return r;
        }
        if (r < 0) {
                /* A failed COMMIT leaves the transaction open (e.g. busy);
                 * the batch is lost either way, and the caches must not
                 * keep its ids. */
                (void) store_rollback(s);
                return r;
        }

        s->in_tx = false;
        redo_reset(s);
        sample_writer_committed(s->samples);
        return 0;
}

int store_commit(store *s) {
        return commit(s, true);
}

int store_commit_owned(store *s) {
        return commit(s, false);
}

/* ---- for the other files of the store (store-private.h) ---- */

sqlite3 *store_sqlite(store *s) {
        return s->db;
}

int store_prepare(store *s, const char *sql, sqlite3_stmt **ret) {
        return store_sql_prepare(s->db, sql, ret);
}

int store_step_errno(store *s, int rc) {
        return store_sql_errno(s->db, rc);
}

