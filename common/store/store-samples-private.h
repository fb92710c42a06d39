/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* What the two files of the sample writer share (store-samples.c: the
 * accumulators, writing and reading blocks; store-samples-upkeep.c: the
 * sample tables' schema and conversion, retention, the size cap and
 * snapshot links). Not for users of the store. */

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/sample-block.h"
#include "store/store-dict.h"
#include "store/store-private.h"
#include "store/store-samples.h"

/* A block holds at most this many entries; a bigger period is written as
 * several blocks. Bounds the accumulators' memory (72 to 80 bytes an entry
 * with its index). */
#define ACC_MAX_ENTRIES (16 * 1024)

/* Below this many entries a period is stored whatever it sums. */
#define DELEGATE_MIN_ENTRIES 256

/* After a period that summed too little when it was tested in full (at
 * ACC_MAX_ENTRIES or at its close), the next one of a level made from the
 * buckets is tested from this many entries on, at each bucket fed: on a
 * churning machine a minute by stack or by process is fed a second or
 * two of buckets, not ten, before it is left to the buckets. A period
 * left to them so early leaves the next one to the full test. */
#define EARLY_DELEGATE_ENTRIES 2048

/* Dictionary blocks (frame rows and stack nodes, up to 16,384 each)
 * deleted per step of the cap or of retention. */
#define CAP_CHUNK_DICT_BLOCKS 64

typedef struct level_info {
        uint64_t width_ns;
        unsigned source;        /* the level its blocks are made from (none for 0) */
        unsigned finer;         /* the level a reader goes down to for what this one lacks */
        /* Keyed by the leaf frame, not the stack: (cpu, comm, leaf frame)
         * only, or with `proc` also the pid and the cgroup. */
        bool leaf;
        /* Writes the leaf frame column. The buckets do, for reports of
         * functions over the periods the leaf and process levels do not
         * hold (edges of a window, markers): the full minutes and hours,
         * kept where they sum well, have few stacks to look up; churn
         * makes them markers and sends readers to the buckets, whose
         * stacks are too many to look up one by one. */
        bool frames;
        /* A period whose entries would be more than keep_num/keep_den of
         * the entries it sums is not stored: a marker block says to read
         * the finer level instead, which costs a reader not many more
         * entries, and the writer no bytes. The leaf and process levels,
         * which reports of functions read, are kept more readily. */
        unsigned keep_num, keep_den;
        bool proc;              /* a leaf level that keeps the pid and the cgroup */
        bool fold;              /* folds the pids of brief processes (store-samples.c) */
        /* 0: its accumulator is written when it holds ACC_MAX_ENTRIES
         * or more, as it is. Else a period with a new entry when it holds
         * acc_max is left to the finer level (one written already is
         * written after that bucket, past the limit); one of more than
         * ACC_MAX_ENTRIES entries is written in several blocks. */
        size_t acc_max;
        /* Made from the written blocks of the finer levels once a period
         * is over, a part of its keys at a time (store-samples-build.c),
         * not fed as its source's blocks are written: only a block late
         * to a period built or being built is copied up (feed()). */
        bool built;
        bool no_pid;            /* a process level without the pid: (cpu, comm, cgroup, leaf frame) */
        /* A built level whose key holds this one's and more: a reader of
         * all pids reads this one's markers from it where it has the
         * period and is no marker there, before the finer level. 0: none. */
        unsigned wider;
} level_info;

extern const level_info sample_levels[SAMPLE_LEVELS];

typedef struct acc {
        bool open;
        uint64_t start_ns, end_ns;
        int64_t boot_id;
        uint64_t first_ns, last_ns, samples;
        int64_t fed_max_id;
        uint64_t gen_min;       /* the oldest dictionary generation its entries use; UINT64_MAX if none */
        /* Entries a reader of the open period would read from the finer
         * level instead: the buckets merged, or the finer level's blocks
         * of the period written so far. */
        uint64_t finer_entries;
        bool written;           /* a block of the open period is written */
        bool delegated;         /* the open period is left to the finer level: a marker at its close */
        /* The last period closed was left to the finer level for summing
         * too little, found by the full test (kept across periods): the
         * load churns, and the open one is tested from
         * EARLY_DELEGATE_ENTRIES on. */
        bool churned;
        /* Open addressing over v's keys: position + 1, 0 empty; at most
         * half full. */
        uint32_t *slots;
        size_t capacity;        /* 0 or a power of two */
        block_entry *v;
        size_t n, alloc;
        /* Entries the last period closed held: the table of the next
         * starts that large (acc_close()). */
        size_t closed_n;
} acc;

/* What the level that folds brief processes knows of the pids of its
 * open period: six bitmaps of SAMPLE_PID_LIMIT bits (FOLD_*), and the
 * range of words that may have bits set. */
typedef struct pid_fold {
        uint64_t *bits;
        size_t lo, hi;
        uint64_t minute_ns;     /* the minute of the last source block */
        uint64_t end_ns;        /* the end of the period they are of */
        /* The period had blocks when it was opened (written before a
         * restart or a rollback): only the pids those hold stay. */
        bool sealed;
        /* The pids the blocks of a written period hold, sorted, for the
         * samples that come late to it (fold_late()): late blocks add
         * none, so they are read once a period. */
        uint32_t *late_pids;
        size_t n_late_pids;
        uint64_t late_start_ns;
        bool late_valid;
} pid_fold;

enum {
        WSTMT_INSERT_BLOCK,
        WSTMT_PERIOD_DATA,
        WSTMT_SET_META,
        WSTMT_PERIOD_BLOCKS,
        WSTMT_PAGE_COUNT,
        WSTMT_FREELIST_COUNT,
        WSTMT_PAGE_SIZE,
        WSTMT_INSERT_SPILL,
        _WSTMT_MAX,
};

/* The period of a built level being built (store-samples-build.c): its
 * minutes spilled in parts, a step each, then its parts summed, a block's
 * worth a step. */
typedef struct period_build {
        bool active;
        uint64_t start_ns;
        unsigned minute;        /* the next minute to spill */
        unsigned part;          /* the next part to sum */
        size_t part_max;        /* the entries a block of parts holds (more: written in pieces) */
        int64_t max_id;         /* blocks written after the build began are copied up as late ones */
        uint64_t finer_entries; /* what a reader of the finer levels reads instead */
        uint64_t entries;       /* written to the level */
        uint64_t first_ns, last_ns, samples;    /* of the buckets it reads */
        int64_t boot_id;        /* of the latest of them */
        uint64_t gen_min;
        acc acc;
} period_build;

struct sample_writer {
        store *store;
        sample_codec *codec;
        sqlite3_stmt *stmts[_WSTMT_MAX];
        acc acc[SAMPLE_LEVELS];
        pid_fold fold;
        sample_counters c;              /* as committed + this batch */
        sample_counters committed;      /* as of the last commit */
        uint64_t dropped;               /* samples of batches that failed to commit */
        /* Since the last commit: samples added to the open bucket, and
         * level-0 samples written to blocks. A rollback loses only these. */
        uint64_t tx_added, tx_written;
        uint64_t bad_blocks;            /* blocks that failed to decode when read back */
        period_build build;
        int dropped_error;              /* why, the last time */
        uint64_t dropped_since_ns;      /* CLOCK_REALTIME of the first drop */
};

/* The sample_meta keys of the counters, in the order of
 * samples_meta_field(). */
#define SAMPLES_META_KEYS 21
extern const char *const samples_meta_keys[SAMPLES_META_KEYS];

typedef struct scan_ctx {
        store *store;
        sample_codec *codec;
        sqlite3_stmt *range[SAMPLE_LEVELS];
        sqlite3_stmt *period;   /* the blocks of one period (scan_folded()) */
        sqlite3_stmt *periods;  /* the periods with blocks (scan_folded()) */
        sqlite3_stmt *held;     /* whether a period of a level is stored (scan_marker()) */
        sample_counters c;
        sample_scan_cb cb;
        void *userdata;
        bool one_level;         /* markers are skipped, not followed */
        int64_t pid;            /* -1, or the only pid the caller counts */
        int64_t max_id;         /* blocks of higher ids are left out (INT64_MAX: none) */
        /* If set, blocks that cannot be decoded are counted here and left
         * out; else they fail the scan. */
        uint64_t *bad;
        unsigned need;          /* SAMPLE_NEED_* */
} scan_ctx;

/* Helpers of store-samples.c for store-samples-upkeep.c (see there). */
uint64_t *samples_meta_field(sample_counters *c, size_t i);
block_entry samples_entry_for_level(const block_entry *e, unsigned level);
/* The writer's statement idx (WSTMT_*), prepared at its first use. */
int samples_wstmt(sample_writer *w, unsigned idx, sqlite3_stmt **ret);
void samples_acc_reset(acc *a);
void samples_acc_free(acc *a);
int samples_acc_flush(sample_writer *w, unsigned level, bool closing);
int samples_acc_add(acc *a, const block_entry *e);
int samples_resolve_leaf_frames(sqlite3 *db, dict_reader **reader, block_entry *v, size_t n);
int64_t samples_clamp_i64(uint64_t v);
int samples_scan_range(scan_ctx *x, unsigned level, uint64_t from, uint64_t to);
/* [from, to) from whole periods of `level` where they are complete, the
 * rest from the levels below; x->c must be set. */
int samples_scan_plan(scan_ctx *x, unsigned level, uint64_t from, uint64_t to);
void samples_scan_done(scan_ctx *x);
uint64_t samples_entry_hash(const block_entry *e);
/* samples_acc_add() of an entry whose samples_entry_hash() is h; with a
 * limit, 1 if it is a new key and the accumulator holds `limit` entries
 * (it is not added). */
int samples_acc_add_hashed(acc *a, const block_entry *e, uint64_t h, size_t limit);
/* An encoded pid_set_encode() set (malloc'ed). */
typedef struct pid_set {
        uint8_t *data;
        size_t size;
} pid_set;

static inline void pid_set_done(pid_set *s) {
        free(s->data);
        s->data = NULL;
}

/* folded: of a level that folds brief processes, the pids folded into
 * the block's SAMPLE_PID_BRIEF entries, or more (sample_blocks.folded_pids,
 * written only if it has such an entry); NULL: not known. */
int samples_write_block(sample_writer *w, unsigned level, uint64_t start_ns, uint64_t end_ns, int64_t boot_id,
                        uint64_t first_ns, uint64_t last_ns, uint64_t samples, uint64_t gen_min, block_entry *v,
                        size_t n, const pid_set *folded, int64_t *ret_id);
int samples_write_marker(sample_writer *w, unsigned level, const acc *a);
/* sql prepared, its first two parameters (those it has) bound to a and b. */
int samples_prepare2(store *s, const char *sql, int64_t a, int64_t b, sqlite3_stmt **ret);
/* Forgets a period being built: it starts again (store-samples-build.c). */
void samples_build_reset(sample_writer *w);
