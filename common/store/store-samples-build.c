/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The levels built from written blocks (sample_levels[k].built): the
 * hours by cgroup, level 7, (cpu, comm, cgroup, leaf frame).
 *
 * Where most processes live a second or two, the process hours fold them
 * and a report of a unit reads every process minute; an hour keyed by
 * cgroup holds a third of those minutes' entries there, but more than an
 * accumulator of the daemon may hold. So once an hour is over (its
 * process hour is written) it is built in two passes, a step at a time:
 *
 *  1. minute by minute, its process minutes (the buckets where those are
 *     markers) are summed without the pid, and written to sample_spill
 *     when the accumulator is full and after the last minute, a row for
 *     each part of the keys (one of SPILL_PARTS hash ranges);
 *  2. parts in turn, as many as make about three quarters of a block,
 *     are summed from their rows and written as a block of level 7, and
 *     their rows deleted.
 *
 * Each entry is read once in each pass; an accumulator holds up to
 * ACC_MAX_ENTRIES keys (minutes to spill, or a block's parts; a block of
 * more is written in pieces, which sum a little less).
 *
 * Exact like the levels fed as blocks come: the blocks of the hour the
 * first pass reads are those written when its build began (scan_ctx.max_id);
 * a bucket written later, late to the hour, is copied up as an extra
 * block (feed()), as into any complete period. A build that starts again
 * (a rollback, a restart) first deletes what the earlier one wrote of the
 * hour, late copies included, whose buckets it reads again, and the
 * spilled rows. An hour that sums too little (nine tenths of the entries
 * a reader reads instead) is a marker, as other levels write them. A
 * block that cannot be decoded is left out and counted (bad_blocks), as
 * the writer does when it reads the open periods back. */

#include <errno.h>
#include <stdlib.h>

#include "macro.h"
#include "store/store-private.h"
#include "store/store-samples-private.h"

/* Parts of the keys: enough that one is a small share of a block on a
 * busy machine (about 5,600 keys a part in an hour of 362,000). */
#define SPILL_PARTS 64u

void samples_build_reset(sample_writer *w) {
        samples_acc_free(&w->build.acc);
        w->build.active = false;
}

/* Which of `parts` parts the level-7 entry of e is in: from the columns
 * of its key, without making it. samples_entry_for_level() keeps these
 * and zeroes the others; an entry keeps its stack only without a leaf
 * frame. */
static unsigned part_of(const block_entry *e, unsigned parts) {
        uint64_t x = (uint64_t) e->frame_id ?: (uint64_t) e->stack_id ^ UINT64_C(0x8000000000000000);

        x = (x ^ (uint64_t) e->cgroup_id * UINT64_C(0x9e3779b97f4a7c15)) * UINT64_C(0xff51afd7ed558ccd);
        x = (x ^ (uint64_t) e->comm_id * UINT64_C(0xc2b2ae3d27d4eb4f) ^ ((uint64_t) e->cpu << 32 | e->kind)) *
            UINT64_C(0x94d049bb133111eb);
        x ^= x >> 29;
        return (unsigned) (((x >> 32) * parts) >> 32);
}

/* The first row of an integer query with one or two parameters; -ENOENT
 * if none or NULL. */
static int query_one(sample_writer *w, const char *sql, int64_t a, int64_t b, int64_t *ret) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = samples_prepare2(w->store, sql, a, b, &st);
        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE || (rc == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_NULL))
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return store_step_errno(w->store, rc);
        *ret = sqlite3_column_int64(st, 0);
        return 0;
}

/* A write with up to two integer parameters. */
static int exec2(sample_writer *w, const char *sql, int64_t a, int64_t b) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int r;

        r = samples_prepare2(w->store, sql, a, b, &st);
        return r < 0 ? r : store_step_done(w->store, st);
}

/* The totals of the period's buckets the build reads, the boot of the
 * latest, and the oldest generation it and its process minutes use (the
 * frames the built blocks name). */
static int period_totals(sample_writer *w, unsigned level, period_build *b) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        uint64_t end = b->start_ns + sample_levels[level].width_ns;
        int64_t g;
        int r, rc;

        r = store_prepare(w->store,
                          "SELECT coalesce(sum(n_samples), 0), min(first_ns), max(last_ns), "
                          "(SELECT boot FROM sample_blocks WHERE level = 0 AND start_ns >= ?1 AND start_ns < ?2 "
                          " AND id <= ?3 ORDER BY start_ns DESC LIMIT 1) "
                          "FROM sample_blocks WHERE level = 0 AND start_ns >= ?1 AND start_ns < ?2 AND id <= ?3",
                          &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, i64(b->start_ns));
        sqlite3_bind_int64(st, 2, i64(end));
        sqlite3_bind_int64(st, 3, b->max_id);
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return store_step_errno(w->store, rc);
        b->samples = u64(sqlite3_column_int64(st, 0));
        b->first_ns = u64(sqlite3_column_int64(st, 1));
        b->last_ns = u64(sqlite3_column_int64(st, 2));
        b->boot_id = sqlite3_column_int64(st, 3);
        r = query_one(w, "SELECT min(gen_min) FROM sample_blocks WHERE level IN (0, 5) AND start_ns >= ?1 "
                         "AND start_ns < ?2", i64(b->start_ns), i64(end), &g);
        if (r < 0 && r != -ENOENT)
                return r;
        b->gen_min = r < 0 ? w->c.gen : u64(g);
        return 0;
}

/* From the start: forgets what an earlier build wrote of the period, and
 * what it spilled. */
static int build_begin(sample_writer *w, unsigned level, uint64_t start_ns) {
        period_build *b = &w->build;
        int64_t max_id = 0;
        int r;

        r = exec2(w, "DELETE FROM sample_blocks WHERE level = ?1 AND start_ns = ?2", level, i64(start_ns));
        if (r >= 0)
                r = exec2(w, "DELETE FROM sample_spill", 0, 0);
        if (r < 0)
                return r;
        r = query_one(w, "SELECT max(id) FROM sample_blocks WHERE id >= ?1", 0, 0, &max_id);
        if (r < 0 && r != -ENOENT)
                return r;
        samples_acc_free(&b->acc);
        *b = (period_build) {
                .active = true,
                .start_ns = start_ns,
                .part_max = b->part_max ?: ACC_MAX_ENTRIES,
                .max_id = max_id,
        };
        samples_acc_reset(&b->acc);
        return period_totals(w, level, b);
}

/* The next period of `level` to build, if it is over: the one after the
 * last built, or after the size cap's cut, or the first with buckets
 * (the empty ones before it are complete as they are). */
static int next_period(sample_writer *w, unsigned level, uint64_t *ret_start, bool *ret_ready) {
        uint64_t width = sample_levels[level].width_ns, t = w->c.complete[level];
        int64_t first;
        int r;

        *ret_ready = false;
        /* Over when the process hour is written (a flush at a stop
         * writes it before its last minute ends). */
        if (t + width > w->c.complete[SAMPLE_LEVEL_PROC_HOUR])
                return 0;       /* none is (the daemon asks each second) */
        if (w->c.trimmed_ns > t)
                t = w->c.trimmed_ns % width == 0 ? w->c.trimmed_ns : (w->c.trimmed_ns / width + 1) * width;
        r = query_one(w, "SELECT min(start_ns) FROM sample_blocks WHERE level = 0 AND start_ns >= ?1", i64(t), 0,
                      &first);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        t = MAX(t, u64(first) / width * width);
        if (t > w->c.complete[level])
                w->c.complete[level] = t;
        if (t + width > w->c.complete[SAMPLE_LEVEL_PROC_HOUR])
                return 0;
        *ret_start = t;
        *ret_ready = true;
        return 0;
}

/* Writes the accumulator's entries to sample_spill, a row per part (in
 * place, by part: a counting sort that swaps). */
static int spill(sample_writer *w) {
        period_build *b = &w->build;
        _cleanup_free_ uint16_t *pt = NULL;
        size_t at[SPILL_PARTS + 1] = {}, next[SPILL_PARTS];
        block_entry *v = b->acc.v;
        size_t n = b->acc.n;
        int r;

        if (n == 0)
                return 0;
        pt = malloc(n * sizeof *pt);
        if (!pt)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                pt[i] = (uint16_t) part_of(v + i, SPILL_PARTS);
                at[pt[i] + 1]++;
        }
        for (unsigned p = 0; p < SPILL_PARTS; p++) {
                at[p + 1] += at[p];
                next[p] = at[p];
        }
        for (unsigned p = 0; p < SPILL_PARTS; p++)
                while (next[p] < at[p + 1]) {
                        size_t i = next[p], j;
                        unsigned q = pt[i];

                        if (q == p) {
                                next[p]++;
                                continue;
                        }
                        j = next[q]++;
                        SWAP(v[i], v[j]);
                        SWAP(pt[i], pt[j]);
                }

        for (unsigned p = 0; p < SPILL_PARTS; p++) {
                _cleanup_free_ uint8_t *data = NULL;
                sqlite3_stmt *st;
                size_t size;

                if (at[p + 1] == at[p])
                        continue;
                r = sample_block_encode(w->codec, v + at[p], at[p + 1] - at[p], true, &data, &size);
                if (r >= 0)
                        r = samples_wstmt(w, WSTMT_INSERT_SPILL, &st);
                if (r < 0)
                        return r;
                r = store_run_kept(w->store, st, (store_value[]) { { .i = p }, { .blob = data, .size = size } }, 2);
                if (r < 0)
                        return r;
        }
        samples_acc_reset(&b->acc);
        return 0;
}

typedef struct minute_ctx {
        sample_writer *w;
        unsigned level;
        dict_reader *reader;
} minute_ctx;

static int minute_block(const scan_block *sb, const block_entry *v, size_t n, void *userdata) {
        minute_ctx *m = userdata;
        period_build *b = &m->w->build;
        int r;

        (void) sb;
        /* What a reader of the finer levels reads instead. */
        b->finer_entries += n;
        for (size_t i = 0; i < n; i++) {
                block_entry e = v[i];

                if (e.frame_id == 0 && e.stack_id != 0) {
                        /* Buckets of old writers name only the stack. */
                        r = samples_resolve_leaf_frames(store_sqlite(m->w->store), &m->reader, &e, 1);
                        if (r < 0)
                                return r;
                }
                e = samples_entry_for_level(&e, m->level);
                r = samples_acc_add_hashed(&b->acc, &e, samples_entry_hash(&e), 0);
                if (r >= 0 && b->acc.n >= ACC_MAX_ENTRIES)
                        r = spill(m->w);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Pass 1: the next minute of the period, summed into the accumulator. */
static int spill_minute(sample_writer *w, unsigned level) {
        period_build *b = &w->build;
        uint64_t from = b->start_ns + b->minute * sample_level_width(SAMPLE_LEVEL_PROC_MINUTE);
        minute_ctx m = { .w = w, .level = level };
        scan_ctx x = {
                .store = w->store,
                .codec = w->codec,
                .c = w->c,
                .cb = minute_block,
                .userdata = &m,
                .pid = -1,
                .max_id = b->max_id,
                .need = SAMPLE_NEED_PERIOD,
                .bad = &w->bad_blocks,
        };
        int r;

        /* As sample_scan_some() reads it: the bucket the cap cut into
         * from the buckets' side (the builder starts after it anyway). */
        if (x.c.trimmed_ns % STORE_BUCKET_NS != 0)
                x.c.trimmed_ns = (x.c.trimmed_ns / STORE_BUCKET_NS + 1) * STORE_BUCKET_NS;
        r = samples_scan_plan(&x, SAMPLE_LEVEL_PROC_MINUTE, from, from + sample_level_width(SAMPLE_LEVEL_PROC_MINUTE));
        samples_scan_done(&x);
        dict_reader_free(m.reader);
        if (r < 0)
                return r;
        /* Minutes are summed until the accumulator is full, and the last. */
        if (++b->minute == sample_level_width(level) / sample_level_width(SAMPLE_LEVEL_PROC_MINUTE))
                return spill(w);
        return 0;
}

/* The accumulator's entries as blocks of the period. */
static int write_part(sample_writer *w, unsigned level) {
        period_build *b = &w->build;
        uint64_t width = sample_levels[level].width_ns;

        for (size_t at = 0; at < b->acc.n; at += ACC_MAX_ENTRIES) {
                size_t m = MIN(b->acc.n - at, (size_t) ACC_MAX_ENTRIES);
                uint64_t samples = 0;
                int64_t id;
                int r;

                for (size_t i = 0; i < m; i++)
                        samples += b->acc.v[at + i].count;
                r = samples_write_block(w, level, b->start_ns, b->start_ns + width, b->boot_id, b->first_ns,
                                        b->last_ns, samples, b->gen_min, b->acc.v + at, m, NULL, &id);
                if (r < 0)
                        return r;
        }
        b->entries += b->acc.n;
        samples_acc_reset(&b->acc);
        return 0;
}

/* The rows of the next part, summed into the accumulator (and deleted). */
static int sum_part(sample_writer *w, unsigned level, sqlite3_stmt *st) {
        period_build *b = &w->build;
        int r, rc;

        sqlite3_bind_int64(st, 1, b->part);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                _cleanup_free_ block_entry *v = NULL;
                size_t n;

                r = sample_block_decode(w->codec, sqlite3_column_blob(st, 0), (size_t) sqlite3_column_bytes(st, 0),
                                        &v, &n);
                if (r == -EBADMSG || r == -EPROTONOSUPPORT) {
                        w->bad_blocks++;
                        continue;
                }
                for (size_t i = 0; r >= 0 && i < n; i++) {
                        r = samples_acc_add_hashed(&b->acc, v + i, samples_entry_hash(v + i), b->part_max);
                        if (r > 0) {
                                /* More than a part holds: in pieces. */
                                r = write_part(w, level);
                                if (r >= 0)
                                        r = samples_acc_add_hashed(&b->acc, v + i, samples_entry_hash(v + i), 0);
                        }
                }
                if (r < 0)
                        return r;
        }
        sqlite3_reset(st);
        if (rc != SQLITE_DONE)
                return store_step_errno(w->store, rc);
        r = exec2(w, "DELETE FROM sample_spill WHERE part = ?1", b->part, 0);
        if (r < 0)
                return r;
        b->part++;
        return 0;
}

/* Pass 2: the next parts, as many as make three quarters of a block,
 * summed and written. */
static int build_part(sample_writer *w, unsigned level) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        period_build *b = &w->build;
        int r;

        r = store_prepare(w->store, "SELECT data FROM sample_spill WHERE part = ?1 ORDER BY id", &st);
        if (r < 0)
                return r;
        do
                r = sum_part(w, level, st);
        while (r >= 0 && b->part < SPILL_PARTS && b->acc.n < b->part_max / 4 * 3);
        return r < 0 ? r : write_part(w, level);
}

/* The last part is written: the period is complete (a marker if it sums
 * too little). */
static int build_end(sample_writer *w, unsigned level) {
        period_build *b = &w->build;
        uint64_t width = sample_levels[level].width_ns;
        int r;

        if (b->entries >= DELEGATE_MIN_ENTRIES &&
            b->entries * sample_levels[level].keep_den > b->finer_entries * sample_levels[level].keep_num) {
                acc m = {
                        .start_ns = b->start_ns,
                        .end_ns = b->start_ns + width,
                        .boot_id = b->boot_id,
                        .first_ns = b->first_ns,
                        .last_ns = b->last_ns,
                        .samples = b->samples,
                        .gen_min = UINT64_MAX,
                };

                r = exec2(w, "DELETE FROM sample_blocks WHERE level = ?1 AND start_ns = ?2", level, i64(b->start_ns));
                if (r >= 0)
                        r = samples_write_marker(w, level, &m);
                if (r < 0)
                        return r;
        }
        w->c.complete[level] = MAX(w->c.complete[level], b->start_ns + width);
        samples_build_reset(w);        /* its memory back until the next hour */
        return 0;
}

static int build_step(sample_writer *w, bool *ret_more) {
        const unsigned level = SAMPLE_LEVEL_CGROUP_HOUR;
        period_build *b = &w->build;
        int r = 0;

        if (!b->active) {
                uint64_t start;
                bool ready;

                r = next_period(w, level, &start, &ready);
                if (r < 0 || !ready)
                        return r;
                r = build_begin(w, level, start);
                if (r < 0)
                        return r;
        }
        *ret_more = true;
        if (b->minute < sample_level_width(level) / sample_level_width(SAMPLE_LEVEL_PROC_MINUTE))
                return spill_minute(w, level);
        if (b->part < SPILL_PARTS)
                r = build_part(w, level);
        if (r >= 0 && b->part >= SPILL_PARTS)
                r = build_end(w, level);
        return r;
}

int sample_writer_build_step(sample_writer *w, bool *ret_more) {
        int r;

        *ret_more = false;
        r = build_step(w, ret_more);
        if (r < 0)
                /* From the start at the next step. */
                samples_build_reset(w);
        return r;
}
