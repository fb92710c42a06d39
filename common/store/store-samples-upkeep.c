/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The sample tables' upkeep (store-samples.h): their schema and the
 * conversion of older versions, retention by age and the size cap (which
 * delete whole blocks and the dictionary generations no block uses any
 * more), and the links of samples to kcore snapshots. */

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

/* ---- schema, conversion, expiry ---- */

int store_migrate_4_to_5(sqlite3 *db) {
        /* The old samples table is converted by the writer at open
         * (sample_writer_convert_v4()), through the same path new
         * samples take. */
        int rc = sqlite3_exec(db,
                "CREATE TABLE sample_blocks(id INTEGER PRIMARY KEY AUTOINCREMENT, level INTEGER NOT NULL,"
                "  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, first_ns INTEGER NOT NULL,"
                "  last_ns INTEGER NOT NULL, boot INTEGER NOT NULL, n_samples INTEGER NOT NULL, data BLOB NOT NULL);"
                "CREATE INDEX sample_blocks_period ON sample_blocks(level, start_ns);"
                "CREATE TABLE sample_meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
                "CREATE TABLE snapshot_links(boot INTEGER NOT NULL, snapshot INTEGER NOT NULL,"
                "  from_ns INTEGER NOT NULL, until_ns INTEGER NOT NULL);"
                "ALTER TABLE samples RENAME TO samples_v4;",
                NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : -EIO;
}

int store_migrate_5_to_6(sqlite3 *db) {
        /* Dictionary rows get a generation (those there are: 0), and the
         * interning keys include it; blocks name the oldest they use. */
        int rc = sqlite3_exec(db,
                "CREATE TABLE stacks_v6(id INTEGER PRIMARY KEY, gen INTEGER NOT NULL, parent INTEGER NOT NULL,"
                "  frame INTEGER NOT NULL, UNIQUE(gen, parent, frame));"
                "INSERT INTO stacks_v6(id, gen, parent, frame) SELECT id, 0, parent, frame FROM stacks;"
                "DROP TABLE stacks;"
                "ALTER TABLE stacks_v6 RENAME TO stacks;"
                "CREATE TABLE frames_v6(id INTEGER PRIMARY KEY, gen INTEGER NOT NULL, kind INTEGER NOT NULL,"
                "  addr INTEGER NOT NULL, symbol_id INTEGER NOT NULL, offset INTEGER NOT NULL, module_id INTEGER NOT NULL,"
                "  build_id_id INTEGER NOT NULL, UNIQUE(gen, kind, addr, symbol_id, offset, module_id, build_id_id));"
                "INSERT INTO frames_v6(id, gen, kind, addr, symbol_id, offset, module_id, build_id_id)"
                "  SELECT id, 0, kind, addr, symbol_id, offset, module_id, build_id_id FROM frames;"
                "DROP TABLE frames;"
                "ALTER TABLE frames_v6 RENAME TO frames;"
                "ALTER TABLE sample_blocks ADD COLUMN gen_min INTEGER NOT NULL DEFAULT 0;"
                "CREATE INDEX sample_blocks_gen ON sample_blocks(gen_min, start_ns);",
                NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : -EIO;
}

/* Runs `sql` with ?1 = level and ?2 = a start time; *ret_any (if not
 * NULL): it returned a row. */
static int period_sql(sqlite3 *db, const char *sql, unsigned level, int64_t start_ns, bool *ret_any) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
                return -EIO;
        sqlite3_bind_int64(st, 1, level);
        sqlite3_bind_int64(st, 2, start_ns);
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                return -EIO;
        if (ret_any)
                *ret_any = rc == SQLITE_ROW;
        return 0;
}

/* One block of a minute or an hour as the same period of a level keyed by
 * leaf frame (`minute` for a minute's, `minute` + 1 for an hour's):
 * entries keyed as that level keys them, merged. */
static int migrate_leaf_block(sqlite3 *db, sample_codec *codec, dict_reader **reader, acc *a, int64_t id,
                              unsigned minute) {
        _cleanup_finalize_ sqlite3_stmt *get = NULL, *put = NULL;
        _cleanup_free_ block_entry *v = NULL;
        _cleanup_free_ uint8_t *data = NULL;
        size_t n, size;
        unsigned level;
        bool marked;
        int r, rc;

        if (sqlite3_prepare_v2(db, "SELECT level, start_ns, end_ns, first_ns, last_ns, boot, n_samples, gen_min, data "
                               "FROM sample_blocks WHERE id = ?1", -1, &get, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(db, "INSERT INTO sample_blocks(level, start_ns, end_ns, first_ns, last_ns, boot, "
                               "n_samples, gen_min, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)", -1, &put,
                               NULL) != SQLITE_OK)
                return -EIO;
        sqlite3_bind_int64(get, 1, id);
        rc = sqlite3_step(get);
        if (rc != SQLITE_ROW)
                return rc == SQLITE_DONE ? 0 : -EIO;
        level = (unsigned) sqlite3_column_int64(get, 0) == SAMPLE_LEVEL_MINUTE ? minute : minute + 1;
        sqlite3_bind_int64(put, 1, level);
        for (int c = 1; c <= 7; c++)
                sqlite3_bind_int64(put, c + 1, sqlite3_column_int64(get, c));
        if (sample_block_is_marker(sqlite3_column_blob(get, 8), (size_t) sqlite3_column_bytes(get, 8))) {
                /* A period left to the finer level is left to it here too. */
                sqlite3_bind_blob(put, 9, SAMPLE_BLOCK_MARKER, 1, SQLITE_STATIC);
                return sqlite3_step(put) == SQLITE_DONE ? 0 : -EIO;
        }
        /* A period with a damaged block is a marker (below): this block
         * of it is read from the finer level too. */
        r = period_sql(db, "SELECT 1 FROM sample_blocks WHERE level = ?1 AND start_ns = ?2 AND data = x'00'", level,
                       sqlite3_column_int64(get, 1), &marked);
        if (r < 0 || marked)
                return r;
        r = sample_block_decode(codec, sqlite3_column_blob(get, 8), (size_t) sqlite3_column_bytes(get, 8), &v, &n);
        if (r == -EBADMSG || r == -EPROTONOSUPPORT) {
                /* Damaged (a reader of it fails): the period is read
                 * from the finer level, in place of what was written of
                 * it. */
                r = period_sql(db, "DELETE FROM sample_blocks WHERE level = ?1 AND start_ns = ?2", level,
                               sqlite3_column_int64(get, 1), NULL);
                if (r < 0)
                        return r;
                sqlite3_bind_blob(put, 9, SAMPLE_BLOCK_MARKER, 1, SQLITE_STATIC);
                return sqlite3_step(put) == SQLITE_DONE ? 0 : -EIO;
        }
        /* Keyed by frame, the entries need no stack generation kept. */
        if (r >= 0)
                r = samples_resolve_leaf_frames(db, reader, v, n);
        if (r < 0)
                return r;
        samples_acc_reset(a);
        for (size_t i = 0; i < n; i++) {
                block_entry e = samples_entry_for_level(v + i, level);

                r = samples_acc_add(a, &e);
                if (r < 0)
                        return r;
        }
        r = sample_block_encode(codec, a->v, a->n, true, &data, &size);
        if (r < 0)
                return r;
        sqlite3_bind_blob(put, 9, data, (int) size, SQLITE_STATIC);
        return sqlite3_step(put) == SQLITE_DONE ? 0 : -EIO;
}

/* The minutes and hours there are, block by block, as the levels keyed by
 * leaf frame that start at `minute` (new rows are not inserted under a
 * running scan). A period the minutes or hours left to the finer level is
 * left to it there too. */
static int leaf_levels_from_minutes(sqlite3 *db, unsigned minute) {
        _cleanup_finalize_ sqlite3_stmt *ids = NULL;
        _cleanup_free_ int64_t *v = NULL;
        size_t n = 0, alloc = 0;
        sample_codec *codec = NULL;
        dict_reader *reader = NULL;
        acc a = {};
        int r, rc;

        if (sqlite3_prepare_v2(db, "SELECT id FROM sample_blocks WHERE level IN (1, 2) ORDER BY id", -1, &ids,
                               NULL) != SQLITE_OK)
                return -EIO;
        while ((rc = sqlite3_step(ids)) == SQLITE_ROW) {
                r = array_reserve_one((void **) &v, &alloc, n, sizeof *v);
                if (r < 0)
                        return r;
                v[n++] = sqlite3_column_int64(ids, 0);
        }
        if (rc != SQLITE_DONE)
                return -EIO;

        codec = sample_codec_new();
        r = codec ? 0 : -ENOMEM;
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = migrate_leaf_block(db, codec, &reader, &a, v[i], minute);
        sample_codec_free(codec);
        dict_reader_free(reader);
        samples_acc_free(&a);
        return r;
}

/* Writes the counters whose keys start with one of prefixes[]. */
static int write_meta_keys(sqlite3 *db, sample_counters *c, const char *const *prefixes, size_t n_prefixes) {
        _cleanup_finalize_ sqlite3_stmt *meta = NULL;

        if (sqlite3_prepare_v2(db, "INSERT INTO sample_meta(key, value) VALUES (?1, ?2) "
                               "ON CONFLICT(key) DO UPDATE SET value = excluded.value", -1, &meta, NULL) != SQLITE_OK)
                return -EIO;
        for (size_t i = 0; i < ELEMENTSOF(samples_meta_keys); i++) {
                bool match = false;

                for (size_t k = 0; k < n_prefixes; k++)
                        match = match || strncmp(samples_meta_keys[i], prefixes[k], strlen(prefixes[k])) == 0;
                if (!match)
                        continue;
                sqlite3_bind_text(meta, 1, samples_meta_keys[i], -1, SQLITE_STATIC);
                sqlite3_bind_int64(meta, 2, i64(*samples_meta_field(c, i)));
                if (sqlite3_step(meta) != SQLITE_DONE)
                        return -EIO;
                sqlite3_reset(meta);
        }
        return 0;
}

int store_migrate_7_to_8(sqlite3 *db) {
        sample_counters c;
        int r;

        r = sample_meta_read(db, &c);
        if (r < 0)
                return r;
        r = leaf_levels_from_minutes(db, SAMPLE_LEVEL_LEAF_MINUTE);
        if (r < 0)
                return r;

        /* Every generation had frames of its own until now. */
        c.frame_gen = c.gen;
        c.frame_gen_start_ns = c.gen_start_ns;
        /* The leaf minutes are fed from the buckets as the minutes are. */
        c.complete[SAMPLE_LEVEL_LEAF_MINUTE] = c.complete[SAMPLE_LEVEL_MINUTE];
        c.fed[SAMPLE_LEVEL_LEAF_MINUTE] = c.fed[SAMPLE_LEVEL_MINUTE];
        c.complete[SAMPLE_LEVEL_LEAF_HOUR] = c.complete[SAMPLE_LEVEL_HOUR];
        /* Hours are made from the buckets now, not from the minutes: what
         * is written of the open hour goes, and the writer makes it again
         * from its buckets. */
        for (unsigned level = SAMPLE_LEVEL_HOUR; level <= SAMPLE_LEVEL_LEAF_HOUR; level += 2) {
                r = period_sql(db, "DELETE FROM sample_blocks WHERE level = ?1 AND start_ns >= ?2", level,
                               i64(c.complete[level]), NULL);
                if (r < 0)
                        return r;
                c.fed[level] = 0;
        }
        return write_meta_keys(db, &c, (const char *const[]) { "complete", "fed", "frame_gen" }, 3);
}

int store_migrate_8_to_9(sqlite3 *db) {
        sample_counters c;
        int r;

        /* The process levels of the minutes and hours there are; like
         * them, they are complete up to where those are, and fed from the
         * buckets after the same one. */
        r = sample_meta_read(db, &c);
        if (r < 0)
                return r;
        r = leaf_levels_from_minutes(db, SAMPLE_LEVEL_PROC_MINUTE);
        if (r < 0)
                return r;
        c.complete[SAMPLE_LEVEL_PROC_MINUTE] = c.complete[SAMPLE_LEVEL_MINUTE];
        c.fed[SAMPLE_LEVEL_PROC_MINUTE] = c.fed[SAMPLE_LEVEL_MINUTE];
        c.complete[SAMPLE_LEVEL_PROC_HOUR] = c.complete[SAMPLE_LEVEL_HOUR];
        c.fed[SAMPLE_LEVEL_PROC_HOUR] = c.fed[SAMPLE_LEVEL_HOUR];
        return write_meta_keys(db, &c, (const char *const[]) { "complete5", "complete6", "fed5", "fed6" }, 4);
}

/* Schema 10: process hours may fold the pids of brief processes
 * (store-samples.c). Those of schema 9 fold none, and a reader of schema
 * 10 reads them as they are. The new version keeps a reader of schema 9,
 * which would count a folded hour as holding all of a pid it lacks,
 * away from the files the new writer makes. */
int store_migrate_9_to_10(sqlite3 *db) {
        (void) db;
        return 0;
}

/* Schema 11: hours by cgroup (level 7), built from the written process
 * minutes through sample_spill (store-samples-build.c). Nothing to
 * convert: without complete7 the builder starts at the oldest hour there
 * is and catches up a step at a time; readers read the levels below up to
 * where it is. The new version keeps a writer of schema 10, which would
 * not build them, away from the files the new writer makes. */
int store_migrate_10_to_11(sqlite3 *db) {
        int rc = sqlite3_exec(db,
                "CREATE TABLE sample_spill(id INTEGER PRIMARY KEY, part INTEGER NOT NULL, data BLOB NOT NULL);"
                "CREATE INDEX sample_spill_part ON sample_spill(part);",
                NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : -EIO;
}

/* Schema 13: a block of a process hour with a folded entry says which
 * pids it folded (sample_blocks.folded_pids, sample-block.h), so that a
 * report of one pid reads the minutes of only the hours that folded it.
 * Blocks written before have none (NULL): their hours' minutes are read
 * as before. The new version keeps a writer of schema 12, whose blocks
 * would not say, away from the files whose readers rely on it. */
int store_migrate_12_to_13(sqlite3 *db) {
        int rc = sqlite3_exec(db, "ALTER TABLE sample_blocks ADD COLUMN folded_pids BLOB;", NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : -EIO;
}

int sample_writer_convert_v4(sample_writer *w, uint64_t *ret_converted) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        sqlite3 *db = store_sqlite(w->store);
        uint64_t n = 0;
        int r, rc;

        *ret_converted = 0;
        rc = sqlite3_prepare_v2(db, "SELECT time_ns, cpu, pid, tid, comm, stack, period, boot, snapshot "
                                    "FROM samples_v4 ORDER BY time_ns", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return 0;       /* no such table: nothing to convert */

        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                stored_sample smp = {
                        .time_ns = u64(sqlite3_column_int64(st, 0)),
                        .cpu = (uint32_t) sqlite3_column_int64(st, 1),
                        .pid = (uint32_t) sqlite3_column_int64(st, 2),
                        .tid = (uint32_t) sqlite3_column_int64(st, 3),
                        .comm_id = sqlite3_column_int64(st, 4),
                        .stack_id = sqlite3_column_int64(st, 5),
                        .period = u64(sqlite3_column_int64(st, 6)),
                        .boot_id = sqlite3_column_int64(st, 7),
                        .snapshot_id = sqlite3_column_int64(st, 8),
                };

                r = sample_writer_add(w, &smp);
                if (r < 0)
                        return r;
                n++;
        }
        if (rc != SQLITE_DONE)
                return store_step_errno(w->store, rc);
        sqlite3_finalize(TAKE_PTR(st));

        r = sample_writer_flush(w, UINT64_MAX);
        if (r < 0)
                return r;
        rc = sqlite3_exec(db, "DROP TABLE samples_v4", NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return store_step_errno(w->store, rc);
        *ret_converted = n;
        return 1;
}

int samples_prepare2(store *s, const char *sql, int64_t a, int64_t b, sqlite3_stmt **ret) {
        int r = store_prepare(s, sql, ret);

        if (r < 0)
                return r;
        if (sqlite3_bind_parameter_count(*ret) >= 1)
                sqlite3_bind_int64(*ret, 1, a);
        if (sqlite3_bind_parameter_count(*ret) >= 2)
                sqlite3_bind_int64(*ret, 2, b);
        return 0;
}

/* Runs a one-row integer query with up to two integer parameters. */
static int query_u64(store *s, const char *sql, int64_t a, int64_t b, uint64_t *ret) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = samples_prepare2(s, sql, a, b, &st);
        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
                *ret = 0;
                return 0;
        }
        if (rc != SQLITE_ROW)
                return store_step_errno(s, rc);
        *ret = u64(sqlite3_column_int64(st, 0));
        return 0;
}

/* After level-0 blocks were deleted: the counters from what is left. */
static int recount_after_delete(sample_writer *w, uint64_t deleted_samples) {
        int r;

        w->c.samples = w->c.samples > deleted_samples ? w->c.samples - deleted_samples : 0;
        r = query_u64(w->store, "SELECT first_ns FROM sample_blocks WHERE level = 0 ORDER BY start_ns LIMIT 1", 0, 0,
                      &w->c.first_ns);
        if (r < 0)
                return r;
        if (w->c.samples == 0 && !w->acc[0].open)
                w->c.first_ns = w->c.last_ns = 0;
        return 0;
}

/* Deletes the oldest `limit` blocks of a level that end by before_ns;
 * says how many, with how many samples, the newest of them when. */
typedef struct deleted {
        uint64_t blocks, samples, newest_ns, end_ns;
} deleted;

/* Runs a pair of statements over one selection of blocks: the first
 * says what they hold (samples of level 0, how many, the newest level-0
 * sample, the latest end), the second deletes them. Parameters ?1.. are
 * binds[]. */
static int delete_selected(sample_writer *w, const char *const sql[2], const int64_t *binds, size_t n_binds,
                           deleted *ret) {
        deleted d = {};
        int r;

        for (size_t i = 0; i < 2; i++) {
                _cleanup_finalize_ sqlite3_stmt *st = NULL;

                r = store_prepare(w->store, sql[i], &st);
                if (r < 0)
                        return r;
                for (size_t k = 0; k < n_binds; k++)
                        sqlite3_bind_int64(st, (int) k + 1, binds[k]);
                if (i == 0) {
                        int rc = sqlite3_step(st);

                        if (rc != SQLITE_ROW)
                                return store_step_errno(w->store, rc) ?: -EIO;
                        d = (deleted) {
                                        .samples = u64(sqlite3_column_int64(st, 0)),
                                        .blocks = u64(sqlite3_column_int64(st, 1)),
                                        .newest_ns = u64(sqlite3_column_int64(st, 2)),
                                        .end_ns = u64(sqlite3_column_int64(st, 3)),
                                };
                        if (d.blocks == 0)
                                break;
                } else {
                        r = store_step_done(w->store, st);
                        if (r < 0)
                                return r;
                }
        }
        *ret = d;
        return 0;
}

#define BLOCKS_SUMMARY \
        "SELECT coalesce(sum(CASE WHEN level = 0 THEN n_samples ELSE 0 END), 0), count(*)," \
        " coalesce(max(CASE WHEN level = 0 THEN last_ns ELSE 0 END), 0), coalesce(max(end_ns), 0)" \
        " FROM sample_blocks WHERE id IN "

/* The oldest `limit` blocks of a level that end by before_ns. */
static int delete_oldest(sample_writer *w, unsigned level, uint64_t before_ns, size_t limit, deleted *ret) {
#define OLDEST_BLOCKS "(SELECT id FROM sample_blocks WHERE level = ?1 AND start_ns < ?2 AND end_ns <= ?2 " \
                      "ORDER BY start_ns LIMIT ?3)"
        static const char *const sql[] = {
                BLOCKS_SUMMARY OLDEST_BLOCKS,
                "DELETE FROM sample_blocks WHERE id IN " OLDEST_BLOCKS,
        };
        int64_t binds[] = { level, samples_clamp_i64(before_ns), (int64_t) limit };

        return delete_selected(w, sql, binds, ELEMENTSOF(binds), ret);
}

int sample_writer_expire(sample_writer *w, uint64_t before_ns, size_t max_blocks, uint64_t *ret_samples,
                         bool *ret_more) {
        uint64_t samples = 0, rows;
        bool more = false;
        int r;

        for (unsigned level = 0; level < SAMPLE_LEVELS; level++) {
                deleted d;

                r = delete_oldest(w, level, before_ns, max_blocks, &d);
                if (r < 0)
                        return r;
                if (d.blocks >= max_blocks)
                        more = true;
                if (level == 0)
                        samples = d.samples;
        }

        /* Minutes and hours that reach past before_ns keep their older
         * samples: read what is left there from the buckets. */
        w->c.trimmed_ns = MAX(w->c.trimmed_ns, before_ns);
        r = recount_after_delete(w, samples);
        if (r < 0)
                return r;
        r = sample_writer_collect(w, CAP_CHUNK_DICT_BLOCKS, &rows);
        if (r < 0)
                return r;
        *ret_samples = samples;
        *ret_more = more || rows >= CAP_CHUNK_DICT_BLOCKS;
        return 0;
}

/* Bytes of the pages in use (not on the freelist), as this connection
 * sees them (its open transaction included). */
static int pages_in_use(sample_writer *w, uint64_t *ret) {
        static const unsigned idx[] = { WSTMT_PAGE_COUNT, WSTMT_FREELIST_COUNT, WSTMT_PAGE_SIZE };
        int64_t v[ELEMENTSOF(idx)];

        for (size_t i = 0; i < ELEMENTSOF(idx); i++) {
                sqlite3_stmt *st;
                int r = samples_wstmt(w, idx[i], &st);

                if (r >= 0)
                        r = store_step_id(w->store, st, &v[i]);
                if (r < 0)
                        return r == -ENOENT ? -EIO : r;
        }
        *ret = v[0] > v[1] && v[2] > 0 ? u64(v[0] - v[1]) * u64(v[2]) : 0;
        return 0;
}

#define CAP_CHUNK_BLOCKS 32

/* Deletes the CAP_CHUNK_BLOCKS blocks of the oldest generations, oldest
 * first, whatever their level. */
static int delete_for_cap(sample_writer *w, deleted *ret) {
#define OLDEST_GENERATION_BLOCKS "(SELECT id FROM sample_blocks ORDER BY gen_min, start_ns LIMIT ?1)"
        static const char *const sql[] = {
                BLOCKS_SUMMARY OLDEST_GENERATION_BLOCKS,
                "DELETE FROM sample_blocks WHERE id IN " OLDEST_GENERATION_BLOCKS,
        };
        int64_t binds[] = { CAP_CHUNK_BLOCKS };

        return delete_selected(w, sql, binds, ELEMENTSOF(binds), ret);
}

int sample_writer_enforce_cap(sample_writer *w, uint64_t max_bytes, size_t max_blocks, cap_result *ret) {
        uint64_t used, target, rows;
        cap_result res = {};
        int r;

        *ret = res;
        if (max_bytes == 0)
                return 0;
        r = pages_in_use(w, &used);
        if (r < 0)
                return r;
        res.used_bytes = used;
        if (used <= max_bytes) {
                *ret = res;
                return 0;
        }

        /* Down to 90% of the cap, so that the next writes do not bring it
         * back at once. Oldest first: the blocks of the oldest dictionary
         * generation, then the stacks and frames no block uses any more.
         * What is left of a period the cap cut into is read from its
         * buckets, not its minute or hour totals (trimmed_ns). */
        target = max_bytes / 10 * 9;
        while (used > target && res.blocks < max_blocks) {
                deleted d;

                r = delete_for_cap(w, &d);
                if (r < 0)
                        return r;
                r = sample_writer_collect(w, CAP_CHUNK_DICT_BLOCKS, &rows);
                if (r < 0)
                        return r;
                if (d.blocks == 0 && rows == 0) {
                        /* No block is left, and no stack or frame goes:
                         * what is left is the current generation and what
                         * the open periods hold. A new generation writes
                         * those periods as blocks, and they can all go
                         * (the caller starts it). */
                        res.need_new_generation = true;
                        break;
                }
                res.blocks += d.blocks;
                res.rows += rows;
                res.samples += d.samples;
                res.newest_removed_ns = MAX(res.newest_removed_ns, d.newest_ns);
                w->c.trimmed_ns = MAX(w->c.trimmed_ns, d.end_ns);
                r = pages_in_use(w, &used);
                if (r < 0)
                        return r;
        }

        r = recount_after_delete(w, res.samples);
        if (r < 0)
                return r;
        *ret = res;
        return 0;
}

/* The oldest generation still in use by a block, an open period or the
 * writer: of stacks (`leaf` false) or of frames (true). The leaf levels
 * name frames, not stacks (their entries read from blocks without frames
 * are given them, samples_resolve_leaf_frames()): their gen_min, the stack
 * generation they were fed in, tells only the frame generation they
 * need, the one that stack generation began in. */
static int oldest_generation(sample_writer *w, bool leaf, uint64_t *ret) {
        uint64_t g = w->c.gen, b;
        int r;

        static_assert(SAMPLE_LEVEL_LEAF_MINUTE == 3 && SAMPLE_LEVEL_LEAF_HOUR == 4 && SAMPLE_LEVEL_PROC_MINUTE == 5 &&
                              SAMPLE_LEVEL_PROC_HOUR == 6 && SAMPLE_LEVEL_CGROUP_HOUR == 7 && SAMPLE_LEVELS == 8,
                      "the levels keyed by leaf frame in the SQL below");
        for (unsigned level = 0; level < SAMPLE_LEVELS; level++)
                if (w->acc[level].open && (leaf || !sample_levels[level].leaf))
                        g = MIN(g, w->acc[level].gen_min);
        r = query_u64(w->store,
                      leaf ? "SELECT coalesce(min(gen_min), -1) FROM sample_blocks"
                           : "SELECT coalesce(min(gen_min), -1) FROM sample_blocks WHERE level NOT IN (3, 4, 5, 6, 7)",
                      0, 0, &b);
        if (r < 0)
                return r;
        *ret = MIN(g, b);
        return 0;
}

int sample_writer_collect(sample_writer *w, size_t max_blocks, uint64_t *ret_blocks) {
        static const char *const sql[] = {
                "DELETE FROM stack_blocks WHERE first_id IN "
                "(SELECT first_id FROM stack_blocks WHERE gen < ?1 LIMIT ?2)",
                /* The frame generation of stack generation ?1 began at the
                 * greatest frame generation not after it (or later, if that
                 * one interned no frame: then an older one is kept). */
                "DELETE FROM frame_blocks WHERE first_id IN "
                "(SELECT first_id FROM frame_blocks WHERE gen < "
                "(SELECT coalesce(max(gen), 0) FROM frame_blocks WHERE gen <= ?1) LIMIT ?2)",
        };
        uint64_t n = 0;
        int r;

        *ret_blocks = 0;
        for (size_t i = 0; i < ELEMENTSOF(sql) && n < max_blocks; i++) {
                _cleanup_finalize_ sqlite3_stmt *st = NULL;
                uint64_t oldest;

                r = oldest_generation(w, i == 1, &oldest);
                if (r < 0)
                        return r;
                if (oldest == 0)
                        continue;
                r = store_prepare(w->store, sql[i], &st);
                if (r < 0)
                        return r;
                sqlite3_bind_int64(st, 1, samples_clamp_i64(oldest));
                sqlite3_bind_int64(st, 2, (int64_t) (max_blocks - n));
                r = store_step_done(w->store, st);
                if (r < 0)
                        return r;
                n += (uint64_t) sqlite3_changes64(store_sqlite(w->store));
        }
        *ret_blocks = n;
        return 0;
}

/* ---- snapshot links ---- */

typedef struct link_count {
        int64_t boot_id, snapshot_id;
        uint64_t from_ns, until_ns;
        uint64_t n;
} link_count;

static int count_unlinked(const scan_block *b, const block_entry *v, size_t n, void *userdata) {
        link_count *c = userdata;

        if (b->boot_id != c->boot_id || b->last_ns < c->from_ns || b->first_ns >= c->until_ns)
                return 0;
        for (size_t i = 0; i < n; i++)
                if (v[i].snapshot_id == 0)
                        c->n += v[i].count;
        return 0;
}

int64_t sample_writer_link_written(sample_writer *w, int64_t boot_id, int64_t snapshot_id, uint64_t from_ns,
                                   uint64_t until_ns) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        link_count c = { .boot_id = boot_id, .snapshot_id = snapshot_id, .from_ns = from_ns, .until_ns = until_ns };
        int r;

        /* Written blocks are not rewritten: their entries without a
         * snapshot read it from snapshot_links. */
        r = sample_scan(w->store, from_ns, until_ns, 0, -1, count_unlinked, &c);
        if (r < 0)
                return r;
        r = store_prepare(w->store, "INSERT INTO snapshot_links(boot, snapshot, from_ns, until_ns) VALUES (?1, ?2, ?3, ?4)",
                          &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, boot_id);
        sqlite3_bind_int64(st, 2, snapshot_id);
        sqlite3_bind_int64(st, 3, samples_clamp_i64(from_ns));
        sqlite3_bind_int64(st, 4, samples_clamp_i64(until_ns));
        r = store_step_done(w->store, st);
        if (r < 0)
                return r;
        return (int64_t) (c.n + sample_writer_link_snapshot(w, boot_id, snapshot_id, from_ns, until_ns));
}

typedef struct snap_count {
        int64_t snapshot_id;
        struct { int64_t boot; uint64_t from, until; } *links;
        size_t n_links;
        uint64_t n;
} snap_count;

static int count_snapshot(const scan_block *b, const block_entry *v, size_t n, void *userdata) {
        snap_count *c = userdata;
        bool linked = false;

        for (size_t i = 0; i < c->n_links; i++)
                if (c->links[i].boot == b->boot_id && b->last_ns >= c->links[i].from && b->first_ns < c->links[i].until)
                        linked = true;
        for (size_t i = 0; i < n; i++)
                if (v[i].snapshot_id == c->snapshot_id || (linked && v[i].snapshot_id == 0))
                        c->n += v[i].count;
        return 0;
}

int64_t sample_count_snapshot(store *s, int64_t snapshot_id) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        snap_count c = { .snapshot_id = snapshot_id };
        size_t alloc = 0;
        int r, rc;

        r = store_prepare(s, "SELECT boot, from_ns, until_ns FROM snapshot_links WHERE snapshot = ?1", &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, snapshot_id);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (GREEDY_REALLOC(c.links, alloc, c.n_links + 1) < 0) {
                        free(c.links);
                        return -ENOMEM;
                }
                c.links[c.n_links].boot = sqlite3_column_int64(st, 0);
                c.links[c.n_links].from = u64(sqlite3_column_int64(st, 1));
                c.links[c.n_links].until = u64(sqlite3_column_int64(st, 2));
                c.n_links++;
        }
        r = rc == SQLITE_DONE ? sample_scan(s, 0, 0, 0, -1, count_snapshot, &c) : store_step_errno(s, rc);
        free(c.links);
        return r < 0 ? r : (int64_t) c.n;
}

int sample_writer_flush_partial(sample_writer *w) {
        return samples_acc_flush(w, 0, false);
}

int sample_scan_level(store *s, unsigned level, sample_scan_cb cb, void *userdata) {
        scan_ctx x = { .store = s, .cb = cb, .userdata = userdata, .one_level = true, .need = SAMPLE_NEED_ALL,
                       .max_id = INT64_MAX };
        int r;

        if (level >= SAMPLE_LEVELS)
                return -EINVAL;
        r = samples_scan_range(&x, level, 0, UINT64_MAX);
        sqlite3_finalize(x.range[level]);
        return r;
}
