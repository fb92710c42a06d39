/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* What the files of the store share (store.c, store-write.c,
 * store-read.c, store-query.c, store-layout.c); not for users of the
 * store. */

#include <errno.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "macro.h"
#include "store/store-dict.h"
#include "store/store-samples.h"
#include "store/store.h"

static inline void sqlite3_finalizep(sqlite3_stmt **st) {
        if (*st)
                sqlite3_finalize(*st);
}
#define _cleanup_finalize_ _cleanup_(sqlite3_finalizep)

/* Unsigned values as sqlite's signed INTEGER and back (see store.c). */
static inline int64_t i64(uint64_t v) {
        return (int64_t) v;
}

static inline uint64_t u64(int64_t v) {
        return (uint64_t) v;
}

/* Slots of the store's open-addressing indexes (the dictionaries' and
 * the sample accumulators'): a uint32_t holding position + 1 of the row
 * (0: empty) in the low `shift` bits, shift = log2 of the table's
 * capacity (more than any position), and in the bits above them a tag
 * from the hash's high half. A probe reads a row only when the tags
 * match, so a lookup that misses seldom touches the rows at all. The
 * slot's position in the table comes from the hash's low bits. */
static inline unsigned slot_shift(size_t capacity) {
        return (unsigned) __builtin_ctzll((unsigned long long) capacity);
}

static inline uint32_t slot_tag(uint64_t hash, unsigned shift) {
        return shift >= 32 ? 0 : (uint32_t) ((hash >> 32) & ((UINT64_C(1) << (32 - shift)) - 1));
}

static inline uint32_t slot_make(uint32_t tag, unsigned shift, size_t pos) {
        return (uint32_t) (((uint64_t) tag << shift) | (uint64_t) (pos + 1));
}

static inline bool slot_has_tag(uint32_t slot, uint32_t tag, unsigned shift) {
        return (uint32_t) ((uint64_t) slot >> shift) == tag;
}

static inline size_t slot_pos(uint32_t slot, unsigned shift) {
        return (size_t) ((uint64_t) slot & ((UINT64_C(1) << shift) - 1)) - 1;
}

/* Readers wait this long for a writer's checkpoint or a schema change;
 * the writer waits this long for a reader holding the WAL. */
#define STORE_BUSY_TIMEOUT_MS 5000

/* Lost records from a CPU number above this are ignored by
 * store_get_lost_per_cpu(): it sizes an array by the largest CPU seen.
 * The kernel's NR_CPUS is at most 8192 on x86-64. */
#define STORE_MAX_CPU 65535

/* A generation's rows, estimated, before it ends (store_set_dictionary_limit()). */
#define STORE_GENERATION_LIMIT_DEFAULT (64ULL << 20)

/* Kept statements of batches held after a failed commit (store_set_hold_limit()). */
#define STORE_HOLD_MAX_DEFAULT (16U << 20)

DEFINE_TRIVIAL_CLEANUP_FUNC(hashmap *, hashmap_free);
#define _cleanup_hashmap_ _cleanup_(hashmap_freep)

/* Statements prepared once per writer: store.c's stmt_sql, or the text
 * given to store_get_stmt_sql() (store-layout.c's: a storm of BPF programs
 * journals thousands of events a second). */
enum {
        STMT_BEGIN,
        STMT_COMMIT,
        STMT_ROLLBACK,
        STMT_STRING_INSERT,
        STMT_STRING_SELECT,
        STMT_LOST_INSERT,
        STMT_BOOT_INSERT,
        STMT_BOOT_SELECT,
        STMT_EVENT_INSERT,
        STMT_EVENT_SECTIONS_INSERT,
        STMT_EVENT_KSYMS_INSERT,
        STMT_KSYM_INSERT,
        STMT_KSYM_UNREGISTER,
        STMT_KSYM_PROG_ID,
        _STMT_MAX,
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
        size_t query_group_slots; /* store_set_query_group_slots() */
        int batch_error;        /* a write of the open batch failed: commit must not succeed */

        /* The writing statements of the batches since the last commit, as
         * SQL text or statements and values (store.c, "held batches"). */
        char *redo;
        size_t redo_len, redo_alloc;
        size_t hold_max_bytes;  /* store_set_hold_limit() */
        bool redo_over;         /* a statement was not kept: the batch cannot be held */
        bool replaying;
        sqlite3_stmt *redo_kept; /* being run by store_step_kept() */
        bool held;              /* a failed commit's batches are held in redo */
        uint64_t held_since_ns; /* CLOCK_REALTIME of the first failed commit */
        int held_error;         /* the last commit's error */
        uint64_t epoch;         /* store_epoch() */

        /* The section map the journal wrote last (store_add_event()): the
         * live modules it is of, the entry whose rows hold it, and the
         * epoch it was written in (a batch rolled back takes it along). */
        int64_t *map_mods;
        size_t n_map_mods;
        int64_t map_event;
        uint64_t map_epoch;

        uint8_t *keybuf;        /* scratch for frame_key() */
        size_t keybuf_size;
};

sqlite3 *store_sqlite(store *s);
int store_prepare(store *s, const char *sql, sqlite3_stmt **ret);
int store_step_errno(store *s, int rc);         /* a sqlite result code as a negative errno */

/* Helpers of store.c for the other files (see there). */
int store_sql_errno(sqlite3 *db, int rc);
int store_sql_exec(sqlite3 *db, const char *sql);
int store_sql_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **ret);
int store_sql_int64(sqlite3 *db, const char *sql, int64_t *ret);
int store_get_stmt(store *s, unsigned idx, sqlite3_stmt **ret);
/* The statement idx, prepared from sql the first time. */
int store_get_stmt_sql(store *s, unsigned idx, const char *sql, sqlite3_stmt **ret);
int store_step_done(store *s, sqlite3_stmt *st);
/* store_commit() of a write's own transaction: never held (see
 * store_write_begin()). */
int store_commit_owned(store *s);
/* store_step_done() of a write whose values are kept for a held batch
 * (store.c, "held batches") as given here, in binary, instead of as
 * expanded SQL text: for statements that carry blobs. v: its parameters
 * in order, bound already; blob NULL for an integer. */
typedef struct store_value {
        const void *blob;       /* with text: the text (size bytes), NULL for SQL NULL */
        size_t size;
        int64_t i;
        bool text;
} store_value;
#define STORE_INT(x) ((store_value) { .i = (x) })
#define STORE_TEXT(t) ((store_value) { .blob = (t), .size = (t) ? strlen(t) : 0, .text = true })
#define STORE_NULL ((store_value) { .text = true })
int store_step_kept(store *s, sqlite3_stmt *st, const store_value *v, size_t n);
/* Binds v[0..n) to ?1..?n of st (text and blobs not copied), then runs it
 * as store_step_kept() does. */
int store_run_kept(store *s, sqlite3_stmt *st, const store_value *v, size_t n);
int store_step_id(store *s, sqlite3_stmt *st, int64_t *ret);
void store_caches_clear(store *s);
void store_check_rolled_back(store *s);
int store_cache_put(hashmap *h, const void *key, size_t len, int64_t id);
int store_identify(sqlite3 *db, const char **ret_why);
/* Readers take a read transaction of their own unless one is open. */
int store_read_begin(store *s, bool *ret_owned);
void store_read_end(store *s, bool owned);


int store_migrate_1_to_2(sqlite3 *db);
int store_migrate_2_to_3(sqlite3 *db);
int store_migrate_3_to_4(sqlite3 *db);
int store_migrate_11_to_12(sqlite3 *db);
int store_expire_layout(store *s, uint64_t before_ns);

/* Writes outside store_begin() .. store_commit() run in a transaction of
 * their own, so that a multi-statement operation is atomic. */
static inline int store_write_begin(store *s, bool *ret_owned) {
        int r;

        if (s->mode != STORE_READWRITE)
                return -EROFS;

        *ret_owned = false;
        if (s->in_tx)
                return 0;
        /* Held batches are written by the next batch (store_commit()), not
         * by a write of its own: one that failed would drop them, and ids
         * it handed out could be handed out again after a drop. */
        if (s->held)
                return s->held_error;

        r = store_begin(s);
        if (r < 0)
                return r;
        *ret_owned = true;
        return 0;
}

static inline int store_write_end(store *s, bool owned, int r) {
        if (!owned) {
                if (r < 0)
                        store_check_rolled_back(s);
                return r;
        }
        if (r < 0) {
                (void) store_rollback(s);
                return r;
        }
        return store_commit_owned(s);
}
