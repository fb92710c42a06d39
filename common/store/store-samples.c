/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Samples: aggregated per time bucket into compressed blocks, with
 * per-minute and per-hour aggregates kept up to date as buckets close.
 * doc/storage.md says why; the notes here say how.
 *
 * sample_blocks rows: (level, start_ns, end_ns) is the period a block
 * covers (level 0: a bucket, 1: a minute, 2: an hour), first_ns/last_ns
 * the exact times of its first and last sample, data a sample-block.h
 * encoding. A period can have several blocks (a bucket that outgrew its
 * accumulator, samples that came late, a reboot inside a minute): readers
 * add them up.
 *
 * Level 0 keeps every attribute; levels 1 and 2 drop the thread (tid =
 * pid) and the snapshot link; levels 3 and 4 (the leaf levels) keep only
 * cpu, comm and the leaf frame, so that a process that lives a second
 * adds nothing to them if another ran the same function; levels 5 and 6
 * (the process levels) keep those, the pid and the cgroup; level 7 (the
 * hours by cgroup) those but the pid, built from the written process
 * minutes by store-samples-build.c once an hour is over. Each level
 * k > 0 is made from the buckets (sample_levels[k].source) and read down
 * to a finer level where it lacks a period (sample_levels[k].finer: the
 * hours to their minutes, the minutes to the buckets). An accumulator per
 * level collects the open period in memory; level 0 is fed by samples,
 * level k by the blocks of its source as they are written. When a period
 * closes its block is written and sample_meta.complete<k> moves to its
 * end: every period of level k that ends at or before it is complete, so
 * a reader may use level k for it. A source block of a period already
 * complete (a late sample) is copied up as an extra block at once. sample_meta.fed<k> is the id of the last
 * source block whose samples are in a written level k block: on open, the
 * blocks after it (of periods not complete) are fed again, so a restart
 * loses nothing of the open periods.
 *
 * This file: the accumulators, writing blocks, rebuilding the open
 * periods at open and reading blocks back; store-samples-upkeep.c: the
 * tables' schema and conversion, retention, the size cap, snapshot links. */

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "store/sample-block.h"
#include "store/store-dict.h"
#include "store/store-private.h"
#include "store/store-samples-private.h"
#include "store/store-samples.h"

/* Decoded stack blocks kept while refeeding the leaf levels. */
#define REFEED_DICT_BYTES (4u << 20)

const level_info sample_levels[SAMPLE_LEVELS] = {
        [SAMPLE_LEVEL_BUCKET]      = { STORE_BUCKET_NS, 0, 0, false, true, 1, 1 },
        [SAMPLE_LEVEL_MINUTE]      = { 60 * NSEC_PER_SEC, SAMPLE_LEVEL_BUCKET, SAMPLE_LEVEL_BUCKET, false, false, 1, 2 },
        [SAMPLE_LEVEL_HOUR]        = { 3600 * NSEC_PER_SEC, SAMPLE_LEVEL_BUCKET, SAMPLE_LEVEL_MINUTE, false, false, 1, 2 },
        [SAMPLE_LEVEL_LEAF_MINUTE] = { 60 * NSEC_PER_SEC, SAMPLE_LEVEL_BUCKET, SAMPLE_LEVEL_BUCKET, true, true, 9, 10 },
        /* An hour of a churning machine's functions can have more entries
         * than a minute: written at every ACC_MAX_ENTRIES, its blocks
         * would sum little more than its minutes', and it would be a
         * marker. As many entries as the other accumulators allocate when
         * a bucket takes them past ACC_MAX_ENTRIES. */
        [SAMPLE_LEVEL_LEAF_HOUR]   = { 3600 * NSEC_PER_SEC, SAMPLE_LEVEL_BUCKET, SAMPLE_LEVEL_LEAF_MINUTE, true, true, 9, 10,
                                       false, false, 2 * ACC_MAX_ENTRIES, false, false, SAMPLE_LEVEL_CGROUP_HOUR },
        [SAMPLE_LEVEL_PROC_MINUTE] = { 60 * NSEC_PER_SEC, SAMPLE_LEVEL_BUCKET, SAMPLE_LEVEL_BUCKET, true, true, 9, 10, true },
        [SAMPLE_LEVEL_PROC_HOUR]   = { 3600 * NSEC_PER_SEC, SAMPLE_LEVEL_BUCKET, SAMPLE_LEVEL_PROC_MINUTE, true, true, 9, 10, true,
                                       true },
        /* Where the process hours fold brief processes (every hour of a
         * machine that starts many), a report of a unit read every
         * process minute. An hour keyed by cgroup has more entries than an
         * accumulator may hold there: it is built from the written
         * minutes a part of its keys at a time. Late buckets are copied
         * up from the buckets (the source). */
        [SAMPLE_LEVEL_CGROUP_HOUR] = { 3600 * NSEC_PER_SEC, SAMPLE_LEVEL_BUCKET, SAMPLE_LEVEL_PROC_HOUR, true, true, 9, 10, true,
                                       false, 0, true, true },
};

static const char *const wstmt_sql[_WSTMT_MAX] = {
        [WSTMT_INSERT_BLOCK] = "INSERT INTO sample_blocks(level, start_ns, end_ns, first_ns, last_ns, boot, n_samples, "
                               "gen_min, data, folded_pids) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        [WSTMT_SET_META]     = "INSERT INTO sample_meta(key, value) VALUES (?1, ?2) "
                               "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [WSTMT_PERIOD_BLOCKS] = "SELECT count(*), coalesce(sum(data = x'00'), 0) FROM sample_blocks "
                                "WHERE level = ?1 AND start_ns = ?2",
        [WSTMT_PERIOD_DATA]   = "SELECT data FROM sample_blocks WHERE level = ?1 AND start_ns = ?2",
        /* The size cap's measure, each second: PRAGMA statements prepared
         * once (the pragma_*() table-valued functions prepare a statement
         * of their own at every run). */
        [WSTMT_PAGE_COUNT]     = "PRAGMA page_count",
        [WSTMT_FREELIST_COUNT] = "PRAGMA freelist_count",
        [WSTMT_PAGE_SIZE]      = "PRAGMA page_size",
        /* A part of an hour being built (store-samples-build.c). */
        [WSTMT_INSERT_SPILL]   = "INSERT INTO sample_spill(part, data) VALUES (?1, ?2)",
};

uint64_t sample_level_width(unsigned level) {
        return level < SAMPLE_LEVELS ? sample_levels[level].width_ns : 0;
}

/* ---- small helpers ---- */

int samples_wstmt(sample_writer *w, unsigned idx, sqlite3_stmt **ret) {
        if (!w->stmts[idx]) {
                int rc = sqlite3_prepare_v3(store_sqlite(w->store), wstmt_sql[idx], -1, SQLITE_PREPARE_PERSISTENT,
                                            &w->stmts[idx], NULL);
                if (rc != SQLITE_OK)
                        return store_step_errno(w->store, rc);
        }
        *ret = w->stmts[idx];
        return 0;
}

static int set_meta(sample_writer *w, const char *key, uint64_t value) {
        sqlite3_stmt *st;
        int r;

        r = samples_wstmt(w, WSTMT_SET_META, &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, i64(value));
        return store_step_done(w->store, st);
}

const char *const samples_meta_keys[SAMPLES_META_KEYS] = {
        "samples", "first_ns", "last_ns", "complete1", "complete2", "fed1", "fed2", "gen", "gen_start_ns", "trimmed_ns",
        "complete3", "complete4", "fed3", "fed4", "frame_gen", "frame_gen_start_ns",
        "complete5", "complete6", "fed5", "fed6", "complete7",
};

uint64_t *samples_meta_field(sample_counters *c, size_t i) {
        uint64_t *f[] = {
                &c->samples, &c->first_ns, &c->last_ns, &c->complete[1], &c->complete[2],
                (uint64_t *) &c->fed[1], (uint64_t *) &c->fed[2], &c->gen, &c->gen_start_ns, &c->trimmed_ns,
                &c->complete[3], &c->complete[4], (uint64_t *) &c->fed[3], (uint64_t *) &c->fed[4],
                &c->frame_gen, &c->frame_gen_start_ns,
                &c->complete[5], &c->complete[6], (uint64_t *) &c->fed[5], (uint64_t *) &c->fed[6],
                &c->complete[7],
        };
        _Static_assert(ELEMENTSOF(f) == ELEMENTSOF(samples_meta_keys), "a field per key");
        /* A built level is fed by no block: it has no fed<k>. */
        _Static_assert(SAMPLE_LEVELS == 8, "a complete<k> and fed<k> key per level");
        return f[i];
}

int sample_meta_read(sqlite3 *db, sample_counters *ret) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        sample_counters c = {};
        int rc;

        rc = sqlite3_prepare_v2(db, "SELECT key, value FROM sample_meta", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return -EIO;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                const char *k = (const char *) sqlite3_column_text(st, 0);

                for (size_t i = 0; k && i < ELEMENTSOF(samples_meta_keys); i++)
                        if (streq(k, samples_meta_keys[i]))
                                *samples_meta_field(&c, i) = u64(sqlite3_column_int64(st, 1));
        }
        if (rc != SQLITE_DONE)
                return rc == SQLITE_BUSY ? -EBUSY : -EIO;
        *ret = c;
        return 0;
}

/* Writes the counters that differ from the committed ones. */
static int write_meta(sample_writer *w) {
        int r;

        for (size_t i = 0; i < ELEMENTSOF(samples_meta_keys); i++) {
                uint64_t now = *samples_meta_field(&w->c, i), was = *samples_meta_field(&w->committed, i);

                if (now == was)
                        continue;
                r = set_meta(w, samples_meta_keys[i], now);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- accumulators ---- */

/* Both halves of a * b, folded. */
static inline uint64_t fold_mul(uint64_t a, uint64_t b) {
        unsigned __int128 r = (unsigned __int128) a * b;

        return (uint64_t) r ^ (uint64_t) (r >> 64);
}

/* The key's words in pairs, each pair one multiplication of its own (they
 * run side by side, where a chain of seven waited on each other), then
 * one that mixes them: a sixth of the daemon's instructions went to
 * accumulators, and this hash was a third of those. In memory only
 * (tables of accumulators): nothing written depends on its values. */
uint64_t samples_entry_hash(const block_entry *e) {
        _Static_assert(BLOCK_ENTRY_KEY_SIZE == 7 * sizeof(uint64_t), "the key is seven words");
        uint64_t w[7];

        memcpy(w, e, sizeof w);
        uint64_t a = fold_mul(w[0] ^ UINT64_C(0xa0761d6478bd642f), w[1] ^ UINT64_C(0xe7037ed1a0b428db));
        uint64_t b = fold_mul(w[2] ^ UINT64_C(0x8ebc6af09c88c6e3), w[3] ^ UINT64_C(0x589965cc75374cc3));
        uint64_t c = fold_mul(w[4] ^ UINT64_C(0x1d8e4e27c47d124f), w[5] ^ UINT64_C(0x9e3779b97f4a7c15));

        return fold_mul(a ^ c ^ UINT64_C(0xc2b2ae3d27d4eb4f), b ^ w[6] ^ UINT64_C(0x94d049bb133111eb));
}

static bool same_key(const block_entry *a, const block_entry *b) {
        return a->cpu == b->cpu && a->kind == b->kind && a->pid == b->pid && a->tid == b->tid && a->comm_id == b->comm_id &&
               a->cgroup_id == b->cgroup_id && a->snapshot_id == b->snapshot_id && a->stack_id == b->stack_id && a->frame_id == b->frame_id;
}

static void acc_index_insert(acc *a, size_t pos) {
        unsigned shift = slot_shift(a->capacity);
        uint64_t h = samples_entry_hash(a->v + pos);
        size_t mask = a->capacity - 1, i = h & mask;

        while (a->slots[i] != 0)
                i = (i + 1) & mask;
        a->slots[i] = slot_make(slot_tag(h, shift), shift, pos);
}

/* Indexes v[0..n) again, in a table of at least `capacity` slots. */
static int acc_reindex(acc *a, size_t capacity) {
        if (capacity > a->capacity) {
                uint32_t *p = reallocarray(a->slots, capacity, sizeof *p);

                if (!p)
                        return -ENOMEM;
                a->slots = p;
                a->capacity = capacity;
        }
        if (a->capacity > 0)
                memset(a->slots, 0, a->capacity * sizeof *a->slots);
        for (size_t i = 0; i < a->n; i++)
                acc_index_insert(a, i);
        return 0;
}

/* Gives its arrays back; it stays usable, empty. */
void samples_acc_free(acc *a) {
        free(a->slots);
        free(a->v);
        a->slots = NULL;
        a->v = NULL;
        a->capacity = a->alloc = a->n = 0;
}

static void acc_drop_entries(acc *a) {
        if (a->n > 0 && a->capacity > 0)
                memset(a->slots, 0, a->capacity * sizeof *a->slots);
        a->n = 0;
}

void samples_acc_reset(acc *a) {
        a->gen_min = UINT64_MAX;
        acc_drop_entries(a);
        a->samples = 0;
        a->first_ns = a->last_ns = 0;
}

static void acc_close(acc *a, unsigned level) {
        /* A minute or an hour grows to 32,768 entries (2.6 MB) on a busy
         * machine, and its next period grows again in a few steps;
         * buckets close every second and stay small. */
        if (level > SAMPLE_LEVEL_BUCKET) {
                a->closed_n = a->n;
                samples_acc_free(a);
        }
        samples_acc_reset(a);
        a->open = false;
        a->fed_max_id = 0;
        a->finer_entries = 0;
        a->written = a->delegated = false;
}

static void acc_open(acc *a, unsigned level, uint64_t start_ns, int64_t boot_id) {
        samples_acc_reset(a);
        a->open = true;
        a->start_ns = start_ns;
        a->end_ns = start_ns + sample_levels[level].width_ns;
        a->boot_id = boot_id;
}

/* Adds e, whose samples_entry_hash() is h. With a limit, 1 if e is a new key
 * and the accumulator holds `limit` entries (e is not added). */
int samples_acc_add_hashed(acc *a, const block_entry *e, uint64_t h, size_t limit) {
        bool full = limit > 0 && a->n >= limit;
        size_t mask, i;
        unsigned shift;
        uint32_t tag;
        int r;

        if (!full && (a->n + 1) * 2 > a->capacity) {
                size_t capacity = MAX(a->capacity * 2, (size_t) 2048);

                /* An empty table starts as large as the last period's
                 * ended: grown from the smallest, a period of 16,384
                 * entries re-hashed 15,360 of them on the way. */
                while (a->capacity == 0 && capacity < 2 * MIN(a->closed_n, (size_t) 2 * ACC_MAX_ENTRIES))
                        capacity *= 2;
                r = acc_reindex(a, capacity);
                if (r < 0)
                        return r;
        }
        mask = a->capacity - 1;
        shift = slot_shift(a->capacity);
        tag = slot_tag(h, shift);
        for (i = h & mask; a->slots[i] != 0; i = (i + 1) & mask) {
                if (!slot_has_tag(a->slots[i], tag, shift))
                        continue;

                block_entry *x = a->v + slot_pos(a->slots[i], shift);

                if (same_key(x, e)) {
                        x->count += e->count;
                        x->period += e->period;
                        return 0;
                }
        }
        if (full)
                return 1;
        if (a->n == a->alloc) {
                size_t n = MAX(a->alloc * 2, (size_t) 1024);

                /* So do its entries: grown from 1,024, realloc() copied
                 * 31,744 of a period of 32,768 on the way. */
                while (a->alloc == 0 && n < MIN(a->closed_n, (size_t) 2 * ACC_MAX_ENTRIES))
                        n *= 2;
                block_entry *p = reallocarray(a->v, n, sizeof *p);
                if (!p)
                        return -ENOMEM;
                a->v = p;
                a->alloc = n;
        }
        a->v[a->n] = *e;
        a->slots[i] = slot_make(tag, shift, a->n++);
        return 0;
}

int samples_acc_add(acc *a, const block_entry *e) {
        return samples_acc_add_hashed(a, e, samples_entry_hash(e), 0);
}

/* Adds the level-`level` entries of v[0..n). A block's entries are known
 * ahead, so the table's slot of an entry a few ahead is fetched from
 * memory while this one is added, and the entry that slot points to a few
 * after that: an aggregate's table is larger than the caches, and a probe
 * is mostly waiting for them. */
#define FEED_AHEAD 8
static void fold_entry(pid_fold *f, block_entry *e);

/* With a limit (not with f: the entries ahead are folded already), 1 when
 * the accumulator holds `limit` entries and v[*ret_done] is a new key. */
static int acc_add_level(acc *a, unsigned level, const block_entry *v, size_t n, pid_fold *f, size_t limit,
                         size_t *ret_done) {
        block_entry e[FEED_AHEAD];
        uint64_t h[FEED_AHEAD];
        int r;

        assert(limit == 0 || !f);
        *ret_done = n;
        for (size_t i = 0; i < n + FEED_AHEAD; i++) {
                size_t k = i % FEED_AHEAD;

                if (i >= FEED_AHEAD) {
                        r = samples_acc_add_hashed(a, &e[k], h[k], limit);
                        if (r < 0)
                                return r;
                        if (r > 0) {
                                *ret_done = i - FEED_AHEAD;
                                return 1;
                        }
                }
                if (i < n) {
                        e[k] = samples_entry_for_level(v + i, level);
                        if (f)
                                fold_entry(f, &e[k]);
                        h[k] = samples_entry_hash(&e[k]);
                        if (a->capacity > 0)
                                __builtin_prefetch(&a->slots[h[k] & (a->capacity - 1)]);
                }
                /* Half way: the slot is in the cache by now, its entry not. */
                size_t j = (k + FEED_AHEAD / 2) % FEED_AHEAD;
                if (i >= FEED_AHEAD / 2 && i - FEED_AHEAD / 2 < n && a->capacity > 0) {
                        uint32_t slot = a->slots[h[j] & (a->capacity - 1)];

                        if (slot != 0)
                                __builtin_prefetch(a->v + slot_pos(slot, slot_shift(a->capacity)));
                }
        }
        return 0;
}

static void acc_times(acc *a, uint64_t first_ns, uint64_t last_ns, uint64_t samples) {
        if (a->samples == 0 || first_ns < a->first_ns)
                a->first_ns = first_ns;
        a->last_ns = MAX(a->last_ns, last_ns);
        a->samples += samples;
}

/* The key a level-k entry has. */
block_entry samples_entry_for_level(const block_entry *e, unsigned level) {
        block_entry x = *e;

        if (level > 0) {
                x.tid = x.pid;
                x.snapshot_id = 0;
        }
        /* Not written: not a key either (refed blocks without frames and
         * new ones with them make one entry). */
        if (!sample_levels[level].frames)
                x.frame_id = 0;
        if (sample_levels[level].leaf) {
                /* Reports of functions: a cgroup would multiply the
                 * entries (short-lived processes in many); reports of a
                 * process or a unit read the levels that keep them. */
                if (!sample_levels[level].proc) {
                        x.pid = x.tid = 0;
                        x.cgroup_id = 0;
                }
                if (sample_levels[level].no_pid)
                        x.pid = x.tid = 0;
                /* Entries read from format-1 blocks know only their stack. */
                if (x.frame_id != 0)
                        x.stack_id = 0;
        }
        return x;
}

/* Feeds a block just written at `level` to the levels made from it. */
static int feed(sample_writer *w, unsigned level, int64_t lower_id, const block_entry *v, size_t n,
                uint64_t lower_start_ns, int64_t boot_id, uint64_t first_ns, uint64_t last_ns, uint64_t samples,
                uint64_t gen_min);

static int feed_up(sample_writer *w, unsigned level, int64_t id, const block_entry *v, size_t n, uint64_t start_ns,
                   int64_t boot_id, uint64_t first_ns, uint64_t last_ns, uint64_t samples, uint64_t gen_min) {
        for (unsigned k = level + 1; k < SAMPLE_LEVELS; k++) {
                if (sample_levels[k].source != level)
                        continue;
                int r = feed(w, k, id, v, n, start_ns, boot_id, first_ns, last_ns, samples, gen_min);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- writing blocks ---- */

static bool block_folds(const block_entry *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (v[i].pid == SAMPLE_PID_BRIEF)
                        return true;
        return false;
}

int samples_write_block(sample_writer *w, unsigned level, uint64_t start_ns, uint64_t end_ns, int64_t boot_id,
                       uint64_t first_ns, uint64_t last_ns, uint64_t samples, uint64_t gen_min, block_entry *v,
                       size_t n, const pid_set *folded, int64_t *ret_id) {
        _cleanup_free_ uint8_t *data = NULL;
        sqlite3_stmt *st;
        size_t size;
        int r;

        /* Minutes and hours find leaf frames from their stacks. */
        r = sample_block_encode(w->codec, v, n, sample_levels[level].frames, &data, &size);
        if (r < 0)
                return r;
        r = samples_wstmt(w, WSTMT_INSERT_BLOCK, &st);
        if (r < 0)
                return r;
        r = store_run_kept(w->store, st, (store_value[]) {
                        { .i = level }, { .i = i64(start_ns) }, { .i = i64(end_ns) }, { .i = i64(first_ns) },
                        { .i = i64(last_ns) }, { .i = boot_id }, { .i = i64(samples) }, { .i = i64(gen_min) },
                        { .blob = data, .size = size },
                        /* Only on a block with a folded entry; else NULL. */
                        folded && block_folds(v, n) ? (store_value) { .blob = folded->data, .size = folded->size }
                                                    : STORE_NULL }, 10);
        if (r < 0)
                return r;
        *ret_id = sqlite3_last_insert_rowid(store_sqlite(w->store));
        return 0;
}

/* The marker of a delegated period: its totals, no entries. */
int samples_write_marker(sample_writer *w, unsigned level, const acc *a) {
        sqlite3_stmt *st;
        int r;

        r = samples_wstmt(w, WSTMT_INSERT_BLOCK, &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, level);
        sqlite3_bind_int64(st, 2, i64(a->start_ns));
        sqlite3_bind_int64(st, 3, i64(a->end_ns));
        sqlite3_bind_int64(st, 4, i64(a->first_ns));
        sqlite3_bind_int64(st, 5, i64(a->last_ns));
        sqlite3_bind_int64(st, 6, a->boot_id);
        sqlite3_bind_int64(st, 7, i64(a->samples));
        /* It names no stacks (gen_min is UINT64_MAX, which as -1 would
         * read "no block" to oldest_generation()): the current
         * generation, the one it is written in. */
        sqlite3_bind_int64(st, 8, i64(MIN(a->gen_min, w->c.gen)));
        sqlite3_bind_blob(st, 9, SAMPLE_BLOCK_MARKER, 1, SQLITE_STATIC);
        /* Bound by the last block written: a set freed since. */
        sqlite3_bind_null(st, 10);
        return store_step_done(w->store, st);
}

/* Statement idx (WSTMT_PERIOD_*) bound to the period of `level` that
 * starts at start_ns. */
static int period_stmt(sample_writer *w, unsigned idx, unsigned level, uint64_t start_ns, sqlite3_stmt **ret) {
        int r = samples_wstmt(w, idx, ret);

        if (r < 0)
                return r;
        sqlite3_bind_int64(*ret, 1, level);
        sqlite3_bind_int64(*ret, 2, i64(start_ns));
        return 0;
}

/* Whether `level` has a block for the period starting at start_ns
 * (*ret_marker: a marker among them). */
static int period_blocks(sample_writer *w, unsigned level, uint64_t start_ns, bool *ret_any, bool *ret_marker) {
        sqlite3_stmt *st;
        int r, rc;

        r = period_stmt(w, WSTMT_PERIOD_BLOCKS, level, start_ns, &st);
        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                *ret_any = sqlite3_column_int64(st, 0) > 0;
                *ret_marker = sqlite3_column_int64(st, 1) > 0;
        }
        sqlite3_reset(st);
        return rc == SQLITE_ROW ? 0 : store_step_errno(w->store, rc);
}

/* ---- brief processes ----
 *
 * Where most processes live a second or two, each is a new pid, and a
 * process hour keyed by pid sums no better than its minutes: it was a
 * marker, and a week's report of one pid read every process minute. So
 * the process hours keep the entries of a process seen in three minutes
 * or more (of the hour, or the previous hour's last ones: a process of
 * a few seconds may cross the start of a minute) and fold the others into
 * an entry a CPU and kind of SAMPLE_PID_BRIEF (fold_out()). A report of
 * one pid reads an hour that holds the pid, or that folded none; other
 * reports an hour that folded none; the minutes of any other hour
 * (scan_folded()).
 *
 * That is exact while every pid of an hour is kept in all its entries or
 * folded in all of them. A pid not seen in three minutes is folded when
 * the accumulator is written (a full one, or the period's close), or
 * when the accumulator is full and the pid is not seen in this minute and
 * an earlier one (fold_pass()); from then on
 * its entries are folded as they come (FOLD_F). A pid written as it is
 * was seen in three minutes (FOLD_M, or FOLD_2 and FOLD_C), which stays
 * true to the period's end. A period that had blocks when it was opened
 * (written before a restart or a rollback) keeps the pids those hold and
 * folds every other ("sealed"), some of which were folded before. */
enum {
        FOLD_F,         /* folded */
        FOLD_M,         /* seen in three minutes (sealed: in the period's earlier blocks) */
        FOLD_2,         /* seen in two earlier minutes */
        FOLD_P,         /* seen in an earlier minute */
        FOLD_C,         /* seen in the current minute */
        FOLD_W,         /* folded into the accumulator since it was last written */
        _FOLD_MAX,
};
#define FOLD_WORDS (SAMPLE_PID_LIMIT / 64)

static uint64_t *fold_map(const pid_fold *f, unsigned which) {
        return f->bits + (size_t) which * FOLD_WORDS;
}

static bool fold_test(const pid_fold *f, unsigned which, uint32_t pid) {
        return fold_map(f, which)[pid / 64] >> (pid % 64) & 1;
}

static void fold_set(pid_fold *f, unsigned which, uint32_t pid) {
        size_t i = pid / 64;

        fold_map(f, which)[i] |= UINT64_C(1) << (pid % 64);
        if (f->lo >= f->hi) {
                f->lo = i;
                f->hi = i + 1;
        } else {
                f->lo = MIN(f->lo, i);
                f->hi = MAX(f->hi, i + 1);
        }
}

static bool fold_multi(const pid_fold *f, uint32_t pid) {
        return fold_test(f, FOLD_M, pid) || (!f->sealed && fold_test(f, FOLD_2, pid) && fold_test(f, FOLD_C, pid));
}

/* A source block of minute_ns: a later minute moves the current one's
 * pids to the earlier ones. */
static void fold_minute(pid_fold *f, uint64_t minute_ns) {
        uint64_t *m = fold_map(f, FOLD_M), *two = fold_map(f, FOLD_2), *p = fold_map(f, FOLD_P);
        uint64_t *c = fold_map(f, FOLD_C);

        if (minute_ns <= f->minute_ns)
                return;
        f->minute_ns = minute_ns;
        for (size_t i = f->lo; i < f->hi; i++) {
                if (!f->sealed) {
                        m[i] |= two[i] & c[i];
                        two[i] |= p[i] & c[i];
                }
                p[i] |= c[i];
                c[i] = 0;
        }
}

/* A folded entry keeps its CPU and kind: one a CPU and kind says how
 * many samples the hour does not hold. */
static void fold_out(block_entry *e) {
        e->pid = e->tid = SAMPLE_PID_BRIEF;
        e->comm_id = e->cgroup_id = e->stack_id = e->frame_id = 0;
}

/* An entry of a folded pid: it goes into the accumulator folded, and
 * the pid into the list of the block it is written in. */
static void fold_into(pid_fold *f, block_entry *e) {
        fold_set(f, FOLD_W, e->pid);
        fold_out(e);
}

static void fold_entry(pid_fold *f, block_entry *e) {
        if (e->pid >= SAMPLE_PID_LIMIT)
                return;
        fold_set(f, FOLD_C, e->pid);
        if (fold_test(f, FOLD_F, e->pid))
                fold_into(f, e);
}

/* Calls cb for the decoded blocks of a period of `level` (markers and
 * blocks that do not decode left out). */
static int period_entries(sample_writer *w, unsigned level, uint64_t start_ns,
                          void (*cb)(const block_entry *v, size_t n, void *userdata), void *userdata) {
        sqlite3_stmt *st;
        int r, rc;

        r = period_stmt(w, WSTMT_PERIOD_DATA, level, start_ns, &st);
        if (r < 0)
                return r;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                _cleanup_free_ block_entry *v = NULL;
                const void *data = sqlite3_column_blob(st, 0);
                size_t size = (size_t) sqlite3_column_bytes(st, 0), n;

                if (sample_block_is_marker(data, size))
                        continue;
                r = sample_block_decode(w->codec, data, size, &v, &n);
                if (r == -EBADMSG || r == -EPROTONOSUPPORT)
                        continue;
                if (r < 0) {
                        sqlite3_reset(st);
                        return r;
                }
                cb(v, n, userdata);
        }
        sqlite3_reset(st);
        return rc == SQLITE_DONE ? 0 : store_step_errno(w->store, rc);
}

static void fold_keep_written(const block_entry *v, size_t n, void *userdata) {
        pid_fold *f = userdata;

        for (size_t i = 0; i < n; i++)
                if (v[i].pid < SAMPLE_PID_LIMIT)
                        fold_set(f, FOLD_M, v[i].pid);
}

/* A new period of `level`: if the previous one ended where this one
 * starts, the pids of its last minute are seen in an earlier minute, and
 * in two if it saw them before. */
static int fold_open(sample_writer *w, unsigned level, uint64_t start_ns) {
        pid_fold *f = &w->fold;
        bool carry = f->bits && f->end_ns == start_ns, any = false, marker = false;
        int r;

        if (!f->bits) {
                f->bits = calloc((size_t) _FOLD_MAX * FOLD_WORDS, sizeof(uint64_t));
                if (!f->bits)
                        return -ENOMEM;
                f->lo = f->hi = 0;
        }
        for (size_t i = f->lo; i < f->hi; i++) {
                uint64_t last = carry ? fold_map(f, FOLD_C)[i] : 0;

                fold_map(f, FOLD_F)[i] = fold_map(f, FOLD_M)[i] = 0;
                fold_map(f, FOLD_2)[i] = last & fold_map(f, FOLD_P)[i];
                fold_map(f, FOLD_P)[i] = last;
                fold_map(f, FOLD_C)[i] = fold_map(f, FOLD_W)[i] = 0;
        }
        if (!carry)
                f->lo = f->hi = 0;
        f->minute_ns = start_ns;
        f->end_ns = start_ns + sample_levels[level].width_ns;
        f->sealed = false;

        r = period_blocks(w, level, start_ns, &any, &marker);
        if (r < 0 || !any)
                return r;
        f->sealed = true;
        return period_entries(w, level, start_ns, fold_keep_written, f);
}

/* Folds the pids of accumulator `level` not seen in three minutes: all of
 * them (it is about to be written), or (it is full) all but those seen in
 * this minute and an earlier one, which may be seen in a third. A process
 * that starts in the minute the accumulator fills is folded for the rest
 * of the hour, whatever it lives: the price of an accumulator that does
 * not fill again with the same minute's new pids. */
static int fold_pass(sample_writer *w, unsigned level, bool all) {
        pid_fold *f = &w->fold;
        acc *a = &w->acc[level];
        size_t n = a->n;
        bool any = false;
        int r;

        for (size_t i = 0; i < n; i++) {
                uint32_t pid = a->v[i].pid;

                if (pid >= SAMPLE_PID_LIMIT)
                        continue;
                /* Folded as it came (fold_entry()); checked here too, so
                 * that whatever is written has every folded pid folded. */
                if (fold_test(f, FOLD_F, pid)) {
                        any = true;
                        continue;
                }
                if (fold_multi(f, pid))
                        continue;
                if (!all && !f->sealed && fold_test(f, FOLD_P, pid) && fold_test(f, FOLD_C, pid))
                        continue;
                fold_set(f, FOLD_F, pid);
                any = true;
        }
        if (!any)
                return 0;
        /* Added again in place: an entry goes to a position at or before
         * its own, and the table keeps its size. */
        acc_drop_entries(a);
        for (size_t i = 0; i < n; i++) {
                block_entry e = a->v[i];

                if (e.pid < SAMPLE_PID_LIMIT && fold_test(f, FOLD_F, e.pid))
                        fold_into(f, &e);
                r = samples_acc_add(a, &e);
                if (r < 0)
                        return r;
        }
        return 0;
}

typedef struct pid_list {
        uint32_t *v;
        size_t n, alloc;
        bool failed;
} pid_list;

static void pid_list_add(const block_entry *v, size_t n, void *userdata) {
        pid_list *l = userdata;

        for (size_t i = 0; i < n && !l->failed; i++) {
                if (l->n == l->alloc) {
                        size_t m = MAX(l->alloc * 2, (size_t) 256);
                        uint32_t *p = reallocarray(l->v, m, sizeof *p);

                        if (!p) {
                                l->failed = true;
                                return;
                        }
                        l->v = p;
                        l->alloc = m;
                }
                l->v[l->n++] = v[i].pid;
        }
}

static int cmp_u32(const void *x, const void *y) {
        uint32_t a = *(const uint32_t *) x, b = *(const uint32_t *) y;

        return a < b ? -1 : a > b;
}

/* Sorts v[0..n) and drops repeats: how many are left. */
static size_t sort_unique_u32(uint32_t *v, size_t n) {
        size_t k = 0;

        if (n > 1)
                qsort(v, n, sizeof *v, cmp_u32);
        for (size_t i = 0; i < n; i++)
                if (k == 0 || v[i] != v[k - 1])
                        v[k++] = v[i];
        return k;
}

/* Every pid that folds fits a set. */
_Static_assert(SAMPLE_PID_LIMIT <= SAMPLE_BLOCK_MAX_ENTRIES, "a set of every pid that folds");

/* The pids folded into the accumulator since it was last written
 * (FOLD_W), as a set for its blocks; the list starts again. */
static int fold_written(sample_writer *w, pid_set *ret) {
        pid_fold *f = &w->fold;
        uint64_t *bits = fold_map(f, FOLD_W);
        _cleanup_free_ uint32_t *pids = NULL;
        size_t n = 0, alloc = 0;
        int r;

        for (size_t i = f->lo; i < f->hi; i++)
                for (uint64_t m = bits[i]; m != 0; m &= m - 1) {
                        if (GREEDY_REALLOC(pids, alloc, n + 1) < 0)
                                return -ENOMEM;
                        pids[n++] = (uint32_t) (i * 64 + (size_t) __builtin_ctzll(m));
                }
        r = pid_set_encode(w->codec, pids, n, &ret->data, &ret->size);
        if (r < 0)
                return r;
        memset(bits + f->lo, 0, (f->hi - f->lo) * sizeof *bits);
        return 0;
}

/* Entries that come after their period of `level` was written: a pid its
 * blocks hold stays, any other is folded. The pids are read once a period
 * (the late blocks written keep only those). */
static int fold_late(sample_writer *w, unsigned level, uint64_t start_ns, block_entry *v, size_t n,
                     pid_set *ret_folded) {
        _cleanup_free_ uint32_t *folded = NULL;
        pid_fold *f = &w->fold;
        size_t k = 0;

        if (!f->late_valid || f->late_start_ns != start_ns) {
                pid_list l = {};
                int r;

                r = period_entries(w, level, start_ns, pid_list_add, &l);
                if (r >= 0 && l.failed)
                        r = -ENOMEM;
                if (r < 0) {
                        free(l.v);
                        return r;
                }
                free(f->late_pids);
                f->late_pids = l.v;
                f->n_late_pids = sort_unique_u32(l.v, l.n);
                f->late_start_ns = start_ns;
                f->late_valid = true;
        }
        folded = malloc(MAX(n, (size_t) 1) * sizeof *folded);
        if (!folded)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (v[i].pid < SAMPLE_PID_LIMIT &&
                    (f->n_late_pids == 0 || !bsearch(&v[i].pid, f->late_pids, f->n_late_pids, sizeof(uint32_t), cmp_u32))) {
                        folded[k++] = v[i].pid;
                        fold_out(v + i);
                }
        k = sort_unique_u32(folded, k);
        return pid_set_encode(w->codec, folded, k, &ret_folded->data, &ret_folded->size);
}

/* An aggregate whose entries sum too little, or that outgrew
 * level_info.acc_max, is left to the finer level, if none of its period
 * is written yet (by this writer, or before a restart). */
static int maybe_delegate(sample_writer *w, unsigned level, bool outgrown) {
        acc *a = &w->acc[level];
        bool any = false, marker = false;
        int r;

        if (level == 0 || a->delegated || a->written || a->n < DELEGATE_MIN_ENTRIES ||
            (!outgrown && a->n * sample_levels[level].keep_den <= a->finer_entries * sample_levels[level].keep_num))
                return 0;
        r = period_blocks(w, level, a->start_ns, &any, &marker);
        if (r < 0)
                return r;
        if (any) {
                a->written = true;
                return 0;
        }
        a->delegated = true;
        a->churned = !outgrown;
        samples_acc_free(a);    /* a marker holds no entries */
        a->gen_min = UINT64_MAX;        /* a marker names no generation */
        return 0;
}

/* Writes what accumulator `level` holds; closes its period if `closing`.
 * A delegated period writes its marker when it closes. */
int samples_acc_flush(sample_writer *w, unsigned level, bool closing) {
        _cleanup_(pid_set_done) pid_set folded = {};
        acc *a = &w->acc[level];
        uint64_t read_instead = 0;      /* what a reader of the coarser level reads for this */
        int64_t id;
        int r;

        if (!a->open)
                return 0;

        if (sample_levels[level].fold && !a->delegated && a->n > 0) {
                r = fold_pass(w, level, true);
                if (r < 0)
                        return r;
                r = fold_written(w, &folded);
                if (r < 0)
                        return r;
        }
        r = maybe_delegate(w, level, false);
        if (r < 0)
                return r;
        if (a->delegated) {
                if (!closing)
                        return 0;       /* the period's totals go on to its close */
                r = samples_write_marker(w, level, a);
                if (r < 0)
                        return r;
                w->c.fed[level] = MAX(w->c.fed[level], a->fed_max_id);
                read_instead = a->finer_entries;
        } else if (a->n > 0) {
                read_instead = a->n;
                if (closing)
                        a->churned = false;
                /* At most ACC_MAX_ENTRIES a block, each of a range of keys
                 * (the encoder finds each part in order). */
                if (a->n > ACC_MAX_ENTRIES)
                        sample_block_sort(w->codec, a->v, a->n);
                for (size_t at = 0; at < a->n; at += ACC_MAX_ENTRIES) {
                        size_t m = MIN(a->n - at, (size_t) ACC_MAX_ENTRIES);
                        uint64_t samples = 0;

                        for (size_t i = 0; m < a->n && i < m; i++)
                                samples += a->v[at + i].count;
                        r = samples_write_block(w, level, a->start_ns, a->end_ns, a->boot_id, a->first_ns, a->last_ns,
                                        m < a->n ? samples : a->samples, a->gen_min, a->v + at, m,
                                        folded.data ? &folded : NULL, &id);
                        if (r < 0)
                                return r;
                }
                a->written = true;
                if (level == 0) {
                        if (w->c.samples == 0 || a->first_ns < w->c.first_ns)
                                w->c.first_ns = a->first_ns;
                        w->c.last_ns = MAX(w->c.last_ns, a->last_ns);
                        w->c.samples += a->samples;
                        w->tx_written += a->samples;
                        r = feed_up(w, level, id, a->v, a->n, a->start_ns, a->boot_id, a->first_ns, a->last_ns,
                                    a->samples, a->gen_min);
                        if (r < 0)
                                return r;
                } else
                        w->c.fed[level] = MAX(w->c.fed[level], a->fed_max_id);
        }
        if (closing && level > 0)
                w->c.complete[level] = MAX(w->c.complete[level], a->end_ns);
        for (unsigned k = level + 1; level > 0 && k < SAMPLE_LEVELS; k++)
                if (sample_levels[k].finer == level && w->acc[k].open)
                        w->acc[k].finer_entries += read_instead;

        if (closing)
                acc_close(a, level);
        else
                samples_acc_reset(a);
        return 0;
}

/* Merges the entries of a block of sample_levels[level].source into accumulator
 * `level`. */
static int feed(sample_writer *w, unsigned level, int64_t lower_id, const block_entry *v, size_t n,
                uint64_t lower_start_ns, int64_t boot_id, uint64_t first_ns, uint64_t last_ns, uint64_t samples,
                uint64_t gen_min) {
        uint64_t width = sample_levels[level].width_ns;
        uint64_t start = lower_start_ns / width * width;
        acc *a = &w->acc[level];
        bool outgrown = false;  /* a new entry did not fit sample_levels[level].acc_max */
        bool building = sample_levels[level].built && w->build.active && w->build.start_ns == start;
        int r;

        if (sample_levels[level].built && !building && start + width > w->c.complete[level])
                return 0;       /* the builder reads it when the period is over */
        if (start + width <= w->c.complete[level] || (a->open && start < a->start_ns) || building) {
                /* Late: the period's block is written already, or it is
                 * older than the open one (it had no samples until now).
                 * Add a block beside it, unless the period is left to the
                 * finer level (which has this block already); from now
                 * on the period is complete (a restart must not feed this
                 * block again). */
                _cleanup_free_ block_entry *copy = malloc(MAX(n, (size_t) 1) * sizeof *copy);
                bool any = false, marker = false;
                int64_t id;

                if (!copy)
                        return -ENOMEM;
                r = period_blocks(w, level, start, &any, &marker);
                if (r < 0)
                        return r;
                if (!marker) {
                        _cleanup_(pid_set_done) pid_set folded = {};

                        for (size_t i = 0; i < n; i++)
                                copy[i] = samples_entry_for_level(v + i, level);
                        if (sample_levels[level].fold) {
                                r = fold_late(w, level, start, copy, n, &folded);
                                if (r < 0)
                                        return r;
                        }
                        r = samples_write_block(w, level, start, start + width, boot_id, first_ns, last_ns, samples, gen_min,
                                        copy, n, folded.data ? &folded : NULL, &id);
                        if (r < 0)
                                return r;
                }
                /* A period being built is complete when the builder is
                 * done with it. */
                if (!building)
                        w->c.complete[level] = MAX(w->c.complete[level], start + width);
                return 0;
        }

        if (a->open && (a->start_ns != start || a->boot_id != boot_id)) {
                /* A later period closes this one; another boot in the same
                 * period gets blocks of its own. */
                r = samples_acc_flush(w, level, a->start_ns != start);
                if (r < 0)
                        return r;
        }
        if (!a->open) {
                /* Before the accumulator opens: it must not be open
                 * without its bitmaps. */
                if (sample_levels[level].fold) {
                        r = fold_open(w, level, start);
                        if (r < 0)
                                return r;
                }
                acc_open(a, level, start, boot_id);
        }
        a->boot_id = boot_id;

        if (!a->delegated) {
                size_t done;

                if (sample_levels[level].fold) {
                        /* Minutes are the periods of the level it is read down to. */
                        uint64_t minute = sample_levels[sample_levels[level].finer].width_ns;

                        fold_minute(&w->fold, lower_start_ns / minute * minute);
                }
                r = acc_add_level(a, level, v, n, sample_levels[level].fold ? &w->fold : NULL,
                                  sample_levels[level].acc_max, &done);
                if (r < 0)
                        return r;
                if (r > 0) {
                        /* A period of more entries than it holds is left to
                         * the finer level; one written already goes on past
                         * the limit and is written after this block (a
                         * restart must not find part of it written). */
                        outgrown = true;
                        r = maybe_delegate(w, level, true);
                        if (r >= 0 && !a->delegated)
                                r = acc_add_level(a, level, v + done, n - done, NULL, 0, &done);
                        if (r < 0)
                                return r;
                }
        }
        if (sample_levels[level].finer == SAMPLE_LEVEL_BUCKET)
                a->finer_entries += n;
        acc_times(a, first_ns, last_ns, samples);
        a->fed_max_id = MAX(a->fed_max_id, lower_id);
        if (!a->delegated)
                a->gen_min = MIN(a->gen_min, gen_min);

        /* Of the levels made from the buckets, whose fed entries count
         * what a reader would read instead all along (a level that folds
         * tests what is left after folding). */
        if (a->churned && !a->delegated && !a->written && a->n >= EARLY_DELEGATE_ENTRIES &&
            sample_levels[level].finer == SAMPLE_LEVEL_BUCKET && !sample_levels[level].fold) {
                r = maybe_delegate(w, level, false);
                if (r < 0)
                        return r;
                if (a->delegated) {
                        /* A guess from a few buckets, which a busy load
                         * of keys that come back makes too: the next
                         * period is tested in full, or one such guess
                         * would make every minute after it a marker. */
                        a->churned = false;
                        return 0;
                }
        }
        if (a->n >= ACC_MAX_ENTRIES && !sample_levels[level].acc_max && sample_levels[level].fold) {
                /* Folding may leave room to go on: it is written only if
                 * it is still full. */
                r = fold_pass(w, level, false);
                if (r < 0)
                        return r;
        }
        if (sample_levels[level].acc_max ? outgrown && !a->delegated : a->n >= ACC_MAX_ENTRIES)
                return samples_acc_flush(w, level, false);
        return 0;
}

int sample_writer_add(sample_writer *w, const stored_sample *smp) {
        uint64_t start = smp->time_ns / STORE_BUCKET_NS * STORE_BUCKET_NS;
        acc *a = &w->acc[0];
        block_entry e = {
                .cpu = smp->cpu,
                .pid = smp->pid,
                .tid = smp->tid,
                .comm_id = smp->comm_id,
                .cgroup_id = smp->cgroup_id,
                .snapshot_id = smp->snapshot_id,
                .stack_id = smp->stack_id,
                .kind = smp->kind,
                .count = MAX(smp->count, (uint64_t) 1),
                .period = smp->period,
                .frame_id = smp->frame_id,
        };
        int r;

        if (smp->kind >= _SAMPLE_KIND_MAX)
                return -EINVAL;
        if (w->c.gen_start_ns == 0)
                w->c.gen_start_ns = smp->time_ns;
        if (w->c.frame_gen_start_ns == 0)
                w->c.frame_gen_start_ns = smp->time_ns;
        if (a->open && (a->start_ns != start || a->boot_id != smp->boot_id)) {
                r = samples_acc_flush(w, 0, true);
                if (r < 0)
                        return r;
        }
        if (!a->open)
                acc_open(a, 0, start, smp->boot_id);

        r = samples_acc_add(a, &e);
        if (r < 0)
                return r;
        acc_times(a, smp->time_ns, smp->time_ns, e.count);
        a->gen_min = MIN(a->gen_min, w->c.gen);
        w->tx_added += e.count;
        if (a->n >= ACC_MAX_ENTRIES)
                return samples_acc_flush(w, 0, false);
        return 0;
}

int sample_writer_flush(sample_writer *w, uint64_t before_ns) {
        int r;

        for (unsigned level = 0; level < SAMPLE_LEVELS; level++) {
                acc *a = &w->acc[level];

                if (a->open && a->end_ns <= before_ns) {
                        r = samples_acc_flush(w, level, true);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

/* A new dictionary generation: the open periods are written as they are,
 * so that no block has entries of two generations' ids but for the
 * oldest it names, and new samples start afresh. The leaf levels name no
 * stacks: they go on through a generation of stacks alone. */
int sample_writer_new_generation(sample_writer *w, uint64_t time_ns, bool new_frames) {
        int r;

        for (unsigned level = 0; level < SAMPLE_LEVELS; level++) {
                if (sample_levels[level].leaf && !new_frames)
                        continue;
                r = samples_acc_flush(w, level, false);
                if (r < 0)
                        return r;
        }
        w->c.gen++;
        w->c.gen_start_ns = time_ns;
        if (new_frames) {
                w->c.frame_gen = w->c.gen;
                w->c.frame_gen_start_ns = time_ns;
        }
        return 0;
}

uint64_t sample_writer_generation(const sample_writer *w, uint64_t *ret_start_ns) {
        if (ret_start_ns)
                *ret_start_ns = w->c.gen_start_ns;
        return w->c.gen;
}

uint64_t sample_writer_frame_generation(const sample_writer *w, uint64_t *ret_start_ns) {
        if (ret_start_ns)
                *ret_start_ns = w->c.frame_gen_start_ns;
        return w->c.frame_gen;
}

uint64_t sample_writer_pending(const sample_writer *w) {
        return w->acc[0].open ? w->acc[0].samples : 0;
}

uint64_t sample_writer_uncommitted(const sample_writer *w) {
        return w->tx_written;
}

int sample_writer_before_commit(sample_writer *w) {
        return write_meta(w);
}

void sample_writer_committed(sample_writer *w) {
        w->tx_added = w->tx_written = 0;
        w->committed = w->c;
}

/* ---- rebuilding the open periods ---- */

/* The leaf frames of entries read back from blocks without them (buckets
 * of format 1, and of the first schema-8 writers): a stack id is its leaf
 * node, whose frame it is. Those blocks are committed, so are their
 * stacks. */
int samples_resolve_leaf_frames(sqlite3 *db, dict_reader **reader, block_entry *v, size_t n) {
        int r;

        for (size_t i = 0; i < n; i++) {
                int64_t node[2];

                if (v[i].frame_id != 0 || v[i].stack_id == 0)
                        continue;
                if (!*reader) {
                        r = dict_reader_new(db, DICT_STACKS, REFEED_DICT_BYTES, reader);
                        if (r < 0)
                                return r;
                }
                r = dict_reader_get(*reader, v[i].stack_id, node);
                if (r == -EBADMSG)
                        continue;       /* a damaged stack block: the entry stays keyed by its stack */
                if (r < 0)
                        return r;
                v[i].frame_id = node[1];
        }
        return 0;
}

static int refeed(sample_writer *w, unsigned level) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        dict_reader *reader = NULL;
        bool first_of_source = true;
        int r, rc;

        for (unsigned k = 1; k < level; k++)
                if (sample_levels[k].source == sample_levels[level].source)
                        first_of_source = false;

        r = store_prepare(w->store,
                          "SELECT id, start_ns, boot, first_ns, last_ns, n_samples, data, gen_min FROM sample_blocks "
                          "WHERE level = ?1 AND id > ?2 AND start_ns >= ?3 ORDER BY id", &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, sample_levels[level].source);
        sqlite3_bind_int64(st, 2, w->c.fed[level]);
        sqlite3_bind_int64(st, 3, i64(w->c.complete[level]));

        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                _cleanup_free_ block_entry *v = NULL;
                size_t n;

                r = sample_block_decode(w->codec, sqlite3_column_blob(st, 6), (size_t) sqlite3_column_bytes(st, 6), &v, &n);
                if (r == -EBADMSG || r == -EPROTONOSUPPORT) {
                        /* A damaged block must not keep the daemon from
                         * starting: the totals go on without it, counted
                         * once (the leaf minutes read the buckets the
                         * minutes read). */
                        if (first_of_source)
                                w->bad_blocks++;
                        continue;
                }
                if (r >= 0 && sample_levels[level].leaf && !sample_levels[sample_levels[level].source].leaf)
                        r = samples_resolve_leaf_frames(store_sqlite(w->store), &reader, v, n);
                if (r >= 0)
                        r = feed(w, level, sqlite3_column_int64(st, 0), v, n, u64(sqlite3_column_int64(st, 1)),
                                 sqlite3_column_int64(st, 2), u64(sqlite3_column_int64(st, 3)),
                                 u64(sqlite3_column_int64(st, 4)), u64(sqlite3_column_int64(st, 5)),
                                 u64(sqlite3_column_int64(st, 7)));
                if (r < 0) {
                        dict_reader_free(reader);
                        return r;
                }
        }
        dict_reader_free(reader);
        return rc == SQLITE_DONE ? 0 : store_step_errno(w->store, rc);
}

/* Forgets the open periods and reads them back from the database as
 * committed: after open, and after a batch was rolled back. */
int sample_writer_reload(sample_writer *w, int cause) {
        /* The open bucket survives a failed transaction that did not touch
         * it (retention, the cap, a journal entry): its ids are committed. */
        bool keep_bucket = w->tx_added == 0 && w->tx_written == 0 && w->acc[0].open;
        acc kept = {};
        uint64_t lost;
        int r;

        /* What the failed batch held: the samples it added to the open
         * bucket and those it wrote in blocks (gone with the rollback). */
        lost = keep_bucket ? 0 : w->tx_written + w->acc[0].samples;
        w->tx_added = w->tx_written = 0;
        if (lost > 0) {
                struct timespec ts;

                if (w->dropped == 0) {
                        clock_gettime(CLOCK_REALTIME, &ts);
                        w->dropped_since_ns = (uint64_t) ts.tv_sec * NSEC_PER_SEC + (uint64_t) ts.tv_nsec;
                }
                w->dropped += lost;
                w->dropped_error = cause < 0 ? cause : -EIO;
        }
        if (keep_bucket)
                SWAP(kept, w->acc[0]);
        for (unsigned level = 0; level < SAMPLE_LEVELS; level++)
                acc_close(&w->acc[level], level);
        w->fold.end_ns = 0;     /* what it knew of the open period is read back */
        samples_build_reset(w);
        w->fold.late_valid = false;

        r = sample_meta_read(store_sqlite(w->store), &w->committed);
        if (r >= 0) {
                w->c = w->committed;
                /* Every level is made from the buckets: its open period
                 * from the buckets after the last it holds. */
                for (unsigned level = SAMPLE_LEVELS - 1; r >= 0 && level > 0; level--)
                        if (!sample_levels[level].built)
                                r = refeed(w, level);
        }
        if (keep_bucket) {
                /* Its table and index back in place of the empty ones. */
                SWAP(kept, w->acc[0]);
                samples_acc_free(&kept);
        }
        return r;
}

int sample_writer_new(store *s, sample_writer **ret) {
        sample_writer *w;

        w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        w->store = s;
        w->codec = sample_codec_new();
        if (!w->codec) {
                sample_writer_free(w);
                return -ENOMEM;
        }
        for (unsigned level = 0; level < SAMPLE_LEVELS; level++)
                samples_acc_reset(&w->acc[level]);
        *ret = w;
        return 0;
}

sample_writer *sample_writer_free(sample_writer *w) {
        if (!w)
                return NULL;
        for (unsigned i = 0; i < _WSTMT_MAX; i++)
                sqlite3_finalize(w->stmts[i]);
        sample_codec_free(w->codec);
        for (unsigned level = 0; level < SAMPLE_LEVELS; level++)
                samples_acc_free(&w->acc[level]);
        samples_acc_free(&w->build.acc);
        free(w->fold.bits);
        free(w->fold.late_pids);
        free(w);
        return NULL;
}

const sample_counters *sample_writer_counters(const sample_writer *w) {
        return &w->c;
}

uint64_t sample_writer_dropped(const sample_writer *w, int *ret_error, uint64_t *ret_since_ns) {
        if (ret_error)
                *ret_error = w->dropped_error;
        if (ret_since_ns)
                *ret_since_ns = w->dropped_since_ns;
        return w->dropped;
}

uint64_t sample_writer_bad_blocks(const sample_writer *w) {
        return w->bad_blocks;
}

size_t sample_writer_memory_bytes(const sample_writer *w) {
        size_t n = 0;

        for (unsigned level = 0; level < SAMPLE_LEVELS; level++)
                n += w->acc[level].capacity * sizeof(uint32_t) + w->acc[level].alloc * sizeof(block_entry);
        n += w->build.acc.capacity * sizeof(uint32_t) + w->build.acc.alloc * sizeof(block_entry);
        if (w->fold.bits)
                n += (size_t) _FOLD_MAX * FOLD_WORDS * sizeof(uint64_t);
        return n + sample_codec_memory_bytes(w->codec);
}

/* Samples the still-open level-0 period holds that [from, until) covers,
 * with no snapshot yet: they get snapshot_id. */
uint64_t sample_writer_link_snapshot(sample_writer *w, int64_t boot_id, int64_t snapshot_id, uint64_t from_ns,
                                     uint64_t until_ns) {
        acc *a = &w->acc[0];
        uint64_t n = 0;

        if (!a->open || a->boot_id != boot_id || a->end_ns <= from_ns || a->start_ns >= until_ns)
                return 0;
        for (size_t i = 0; i < a->n; i++) {
                if (a->v[i].snapshot_id == 0) {
                        a->v[i].snapshot_id = snapshot_id;
                        n += a->v[i].count;
                }
        }
        /* Keys changed: index again (entries that now share a key stay
         * separate, which the encoding allows). */
        (void) acc_reindex(a, a->capacity);
        return n;
}

/* ---- reading ---- */


int64_t samples_clamp_i64(uint64_t v) {
        return v > INT64_MAX ? INT64_MAX : (int64_t) v;
}

static int scan_plan(scan_ctx *x, unsigned level, uint64_t from, uint64_t to);

int samples_scan_plan(scan_ctx *x, unsigned level, uint64_t from, uint64_t to) {
        return scan_plan(x, level, from, to);
}

void samples_scan_done(scan_ctx *x) {
        for (unsigned i = 0; i < SAMPLE_LEVELS; i++) {
                sqlite3_finalize(x->range[i]);
                x->range[i] = NULL;
        }
        sqlite3_finalize(x->period);
        sqlite3_finalize(x->periods);
        sqlite3_finalize(x->held);
        x->period = x->periods = x->held = NULL;
}

/* *st, prepared from sql at its first use in this scan. */
static int scan_stmt(scan_ctx *x, sqlite3_stmt **st, const char *sql) {
        return *st ? 0 : store_prepare(x->store, sql, st);
}

/* The block of a row (boot, start_ns, end_ns, first_ns, last_ns, ...). */
static scan_block scan_block_of(sqlite3_stmt *st, unsigned level) {
        return (scan_block) {
                .level = level,
                .boot_id = sqlite3_column_int64(st, 0),
                .start_ns = u64(sqlite3_column_int64(st, 1)),
                .end_ns = u64(sqlite3_column_int64(st, 2)),
                .first_ns = u64(sqlite3_column_int64(st, 3)),
                .last_ns = u64(sqlite3_column_int64(st, 4)),
        };
}

/* Whether x->pid may be among the pids a block with folded entries
 * folded: its set (column 6 of st) has it, or there is none or it does
 * not decode (the minutes tell). */
static bool scan_may_have_folded(scan_ctx *x, sqlite3_stmt *st) {
        const void *set = sqlite3_column_blob(st, 6);
        bool has = true;

        if (x->pid < 0 || x->pid >= SAMPLE_PID_BRIEF || !set)
                return true;
        if (pid_set_has(x->codec, set, (size_t) sqlite3_column_bytes(st, 6), (uint32_t) x->pid, &has) < 0)
                return true;
        return has;
}

/* One read of the blocks of a period of a level that folds: whether the
 * period is a marker, holds x->pid, or folded processes, and whether
 * x->pid may be among those (*maybe); with `call`, passes its blocks on
 * (with a pid, those that hold it). */
static int scan_period(scan_ctx *x, unsigned level, uint64_t start_ns, bool call, bool *held, bool *folded,
                       bool *maybe, bool *marker) {
        sqlite3_stmt *st;
        int r, rc;

        r = scan_stmt(x, &x->period,
                      "SELECT boot, start_ns, end_ns, first_ns, last_ns, data, folded_pids FROM sample_blocks "
                      "WHERE level = ?1 AND start_ns = ?2");
        if (r < 0)
                return r;
        st = x->period;
        sqlite3_bind_int64(st, 1, level);
        sqlite3_bind_int64(st, 2, samples_clamp_i64(start_ns));
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                _cleanup_free_ block_entry *v = NULL;
                const void *data = sqlite3_column_blob(st, 5);
                size_t size = (size_t) sqlite3_column_bytes(st, 5), n;
                scan_block b = scan_block_of(st, level);
                bool has = false, folds = false;

                if (sample_block_is_marker(data, size)) {
                        *marker = true;
                        continue;
                }
                /* The pids: what the period holds. */
                r = sample_block_decode_some(x->codec, data, size, x->need | SAMPLE_NEED_PID, &v, &n);
                for (size_t i = 0; r >= 0 && i < n; i++) {
                        if (x->pid >= 0 && v[i].pid == (uint64_t) x->pid)
                                has = true;
                        else if (v[i].pid == SAMPLE_PID_BRIEF)
                                folds = true;
                }
                *folded = *folded || folds;
                if (folds && !*maybe)
                        *maybe = scan_may_have_folded(x, st);
                *held = *held || has;
                if (r >= 0 && call && (x->pid < 0 || has))
                        r = x->cb(&b, v, n, x->userdata);
                if (r < 0) {
                        sqlite3_reset(st);
                        return r;
                }
                if (!call && *folded) {
                        /* Without a pid, that is all it needs to know. */
                        rc = SQLITE_DONE;
                        break;
                }
        }
        sqlite3_reset(st);
        return rc == SQLITE_DONE ? 0 : store_step_errno(x->store, rc);
}

/* The periods of a level that folds brief processes in [from, to). For
 * one pid, an hour that holds it, or that folded none, answers (its
 * blocks without the pid are left out), and so does one whose blocks say
 * which pids they folded, none of them the pid (it has none of the
 * pid's samples); for anything else, an hour that folded none. Other
 * hours, and markers, are read from the finer level. */
static int scan_folded(scan_ctx *x, unsigned level, uint64_t from, uint64_t to) {
        uint64_t width = sample_levels[level].width_ns;
        sqlite3_stmt *st;
        int r = 0, rc;

        /* The periods that have blocks: a window may be years of hours
         * that have none. */
        r = scan_stmt(x, &x->periods,
                      "SELECT DISTINCT start_ns FROM sample_blocks "
                      "WHERE level = ?1 AND start_ns >= ?2 AND start_ns < ?3 ORDER BY start_ns");
        if (r < 0)
                return r;
        st = x->periods;
        sqlite3_bind_int64(st, 1, level);
        sqlite3_bind_int64(st, 2, samples_clamp_i64(from / width * width));
        sqlite3_bind_int64(st, 3, samples_clamp_i64(to));
        while (r >= 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                uint64_t t = u64(sqlite3_column_int64(st, 0));
                bool held = false, folded = false, maybe = false, marker = false;

                /* Without a pid, the blocks are passed on once the hour
                 * is known to have folded none: a second read. */
                r = scan_period(x, level, t, x->pid >= 0, &held, &folded, &maybe, &marker);
                if (r >= 0 && x->pid < 0 && !folded && !marker)
                        r = scan_period(x, level, t, true, &held, &folded, &maybe, &marker);
                if (r >= 0 && (marker || (folded && !held && maybe)))
                        r = scan_plan(x, sample_levels[level].finer, MAX(from, t), MIN(to, t + width));
        }
        sqlite3_reset(st);
        if (r < 0)
                return r;
        return rc == SQLITE_DONE ? 0 : store_step_errno(x->store, rc);
}

/* The blocks of a period of `level` written up to x->max_id: how many,
 * how many are markers (length() leaves the blobs unread), and the
 * samples they count. */
static int scan_period_sums(scan_ctx *x, unsigned level, uint64_t start, int64_t *ret_blocks, int64_t *ret_markers,
                            int64_t *ret_samples) {
        int r, rc;

        r = scan_stmt(x, &x->held,
                      "SELECT count(*), coalesce(sum(length(data) = 1 AND data = x'00'), 0), "
                      "coalesce(sum(n_samples), 0) FROM sample_blocks WHERE level = ?1 AND start_ns = ?2 AND id <= ?3");
        if (r < 0)
                return r;
        sqlite3_bind_int64(x->held, 1, level);
        sqlite3_bind_int64(x->held, 2, samples_clamp_i64(start));
        sqlite3_bind_int64(x->held, 3, x->max_id);
        rc = sqlite3_step(x->held);
        *ret_blocks = sqlite3_column_int64(x->held, 0);
        *ret_markers = sqlite3_column_int64(x->held, 1);
        *ret_samples = sqlite3_column_int64(x->held, 2);
        sqlite3_reset(x->held);
        return rc == SQLITE_ROW ? 0 : store_step_errno(x->store, rc);
}

/* A marker's period [start, end) of `level`, [from, to) of it wanted:
 * read from the wider level (level_info.wider) if that has the whole
 * period stored, with no marker and the samples the marker counts, else
 * from the finer level. (The builder of the hours by cgroup leaves out a
 * block it cannot decode, whose samples the leaf minutes still have; a
 * bucket late to the hour, copied up to the wider level, also sends the
 * reader to the finer one.) The leaf hours of a real machine's load are
 * markers: gcc's code alone gave an hour more leaf frames than an
 * accumulator holds, and a week's report of functions read 8,400 leaf
 * minutes, where the hours by cgroup hold the same counts in a third of
 * the bytes (bench/RESULTS.md). */
static int scan_marker(scan_ctx *x, unsigned level, uint64_t start, uint64_t end, uint64_t from, uint64_t to) {
        unsigned wider = sample_levels[level].wider;
        int r;

        if (wider != 0 && x->pid < 0 && from == start && to == end && end <= x->c.complete[wider] &&
            start >= x->c.trimmed_ns) {
                int64_t blocks, markers, samples, own_blocks, own_markers, own_samples;

                r = scan_period_sums(x, wider, start, &blocks, &markers, &samples);
                if (r >= 0 && blocks > 0 && markers == 0)
                        r = scan_period_sums(x, level, start, &own_blocks, &own_markers, &own_samples);
                if (r < 0)
                        return r;
                if (blocks > 0 && markers == 0 && samples == own_samples)
                        return samples_scan_range(x, wider, start, end);
        }
        return scan_plan(x, sample_levels[level].finer, from, to);
}

/* The blocks of `level` whose period overlaps [from, to). */
int samples_scan_range(scan_ctx *x, unsigned level, uint64_t from, uint64_t to) {
        sqlite3_stmt *st;
        int r, rc;

        if (from >= to)
                return 0;
        if (sample_levels[level].fold && !x->one_level)
                return scan_folded(x, level, from, to);
        /* start_ns bounds the index range; a block starts at most one
         * period before `from` and still overlaps it. */
        r = scan_stmt(x, &x->range[level],
                      "SELECT boot, start_ns, end_ns, first_ns, last_ns, data FROM sample_blocks "
                      "WHERE level = ?1 AND start_ns >= ?2 AND start_ns < ?3 AND end_ns > ?4 AND id <= ?5");
        if (r < 0)
                return r;
        st = x->range[level];
        sqlite3_bind_int64(st, 1, level);
        sqlite3_bind_int64(st, 2, samples_clamp_i64(from > sample_levels[level].width_ns ? from - sample_levels[level].width_ns : 0));
        sqlite3_bind_int64(st, 3, samples_clamp_i64(to));
        sqlite3_bind_int64(st, 4, samples_clamp_i64(from));
        sqlite3_bind_int64(st, 5, x->max_id);

        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                _cleanup_free_ block_entry *v = NULL;
                const void *data = sqlite3_column_blob(st, 5);
                size_t size = (size_t) sqlite3_column_bytes(st, 5);
                scan_block b = scan_block_of(st, level);
                size_t n;

                if (level > 0 && sample_block_is_marker(data, size))
                        /* Not stored: the period from the finer level
                         * (its own statement; this one stays where it is). */
                        r = x->one_level ? 0 : scan_marker(x, level, b.start_ns, b.end_ns, MAX(from, b.start_ns), MIN(to, b.end_ns));
                else {
                        r = sample_block_decode_some(x->codec, data, size, x->need, &v, &n);
                        if (r >= 0)
                                r = x->cb(&b, v, n, x->userdata);
                        else if ((r == -EBADMSG || r == -EPROTONOSUPPORT) && x->bad) {
                                (*x->bad)++;
                                r = 0;
                        }
                }
                if (r < 0) {
                        sqlite3_reset(st);
                        return r;
                }
        }
        sqlite3_reset(st);
        return rc == SQLITE_DONE ? 0 : store_step_errno(x->store, rc);
}

/* [from, to) from whole periods of `level` where they are complete, the
 * rest from the levels below. */
static int scan_plan(scan_ctx *x, unsigned level, uint64_t from, uint64_t to) {
        uint64_t w, a, b;
        unsigned src;
        int r;

        if (from >= to)
                return 0;
        if (level == 0)
                return samples_scan_range(x, 0, from, to);

        w = sample_levels[level].width_ns;
        src = sample_levels[level].finer;
        /* Where the size cap cut into periods, only buckets are left. */
        if (to <= x->c.trimmed_ns)
                return scan_plan(x, src, from, to);
        if (from < x->c.trimmed_ns) {
                r = scan_plan(x, src, from, x->c.trimmed_ns);
                return r < 0 ? r : scan_plan(x, level, x->c.trimmed_ns, to);
        }
        a = from % w == 0 ? from : (from / w + 1) * w;
        if (a < from)           /* overflow */
                return scan_plan(x, src, from, to);
        b = MIN(to / w * w, x->c.complete[level]);
        if (a >= b)
                return scan_plan(x, src, from, to);

        r = scan_plan(x, src, from, a);
        if (r >= 0)
                r = samples_scan_range(x, level, a, b);
        if (r >= 0)
                r = scan_plan(x, src, b, to);
        return r;
}

int sample_scan(store *s, uint64_t since_ns, uint64_t until_ns, unsigned top, int64_t pid, sample_scan_cb cb,
                void *userdata) {
        return sample_scan_some(s, since_ns, until_ns, top, pid, SAMPLE_NEED_ALL, cb, userdata);
}

int sample_scan_some(store *s, uint64_t since_ns, uint64_t until_ns, unsigned top, int64_t pid, unsigned need,
                     sample_scan_cb cb, void *userdata) {
        scan_ctx x = {
                .store = s, .cb = cb, .userdata = userdata, .codec = sample_codec_new(), .pid = pid, .need = need,
                .max_id = INT64_MAX,
        };
        int r;

        if (!x.codec)
                return -ENOMEM;
        r = sample_meta_read(store_sqlite(s), &x.c);
        /* Expiry cuts at any time and keeps the bucket it cuts into
         * whole: read that bucket on the buckets' side of the cut only. */
        if (x.c.trimmed_ns % STORE_BUCKET_NS != 0)
                x.c.trimmed_ns = x.c.trimmed_ns > UINT64_MAX - STORE_BUCKET_NS
                                         ? UINT64_MAX
                                         : (x.c.trimmed_ns / STORE_BUCKET_NS + 1) * STORE_BUCKET_NS;
        if (r >= 0)
                r = scan_plan(&x, MIN(top, (unsigned) SAMPLE_LEVELS - 1), since_ns,
                              until_ns == 0 ? UINT64_MAX : until_ns);
        samples_scan_done(&x);
        sample_codec_free(x.codec);
        return r;
}

