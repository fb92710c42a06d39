/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The store's write entry points (store.h): interning strings, frames
 * and stack nodes behind their caches and dictionaries, sample rows into
 * the sample writer, lost counts, boots, snapshot links, and the deletions
 * of retention and the size cap. */

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
#include "store/store-dict.h"
#include "store/store-private.h"
#include "store/store-samples.h"
#include "store/store.h"
#include "timeparse.h"

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

/* ---- interning ---- */

static int intern_string_locked(store *s, const char *str, size_t len, int64_t *ret_id) {
        sqlite3_stmt *st = NULL;
        int64_t id = 0;
        int r;

        if (hashmap_get(s->string_cache, str, len, ret_id) >= 0)
                return 0;

        r = store_get_stmt(s, STMT_STRING_INSERT, &st);
        if (r < 0)
                return r;
        if (sqlite3_bind_text(st, 1, str, (int) len, SQLITE_STATIC) != SQLITE_OK)
                return -ENOMEM;
        r = store_step_done(s, st);
        if (r < 0)
                return r;

        if (sqlite3_changes(s->db) > 0)
                id = sqlite3_last_insert_rowid(s->db);
        else {
                /* Known to the database, not to this cache (e.g. after a
                 * restart). */
                r = store_get_stmt(s, STMT_STRING_SELECT, &st);
                if (r < 0)
                        return r;
                if (sqlite3_bind_text(st, 1, str, (int) len, SQLITE_STATIC) != SQLITE_OK)
                        return -ENOMEM;
                r = store_step_id(s, st, &id);
                if (r < 0)
                        return r == -ENOENT ? -EIO : r;
        }

        r = store_cache_put(s->string_cache, str, len, id);
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

        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        r = store_write_end(s, owned, intern_string_locked(s, str, len, &id));
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

/* The frame row values (kind, addr, symbol, offset, module, build_id:
 * ids of strings) in the frame generation, which it adds to. */
static int intern_frame_row_locked(store *s, const int64_t *values, int64_t *ret_id) {
        int r;

        r = dict_intern(s->frames, sample_writer_frame_generation(s->samples, NULL), values, ret_id);
        if (r > 0)
                s->frame_gen_bytes += FRAME_ROW_BYTES;
        return MIN(r, 0);
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
        r = intern_frame_row_locked(s, values, &id);
        if (r < 0)
                return r;

        /* frame_key() output is still in keybuf: the string interning
         * above does not touch it. */
        r = store_cache_put(s->frame_cache, s->keybuf, key_len, id);
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

        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        r = store_write_end(s, owned, intern_frame_locked(s, f, &id));
        if (r < 0)
                return r;

        *ret_id = id;
        return 0;
}

/* A frame of known string ids. */
static int intern_frame_values(store *s, const int64_t *values, int64_t *ret_id) {
        bool owned;
        int64_t id = 0;
        int r;

        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        r = store_write_end(s, owned, intern_frame_row_locked(s, values, &id));
        if (r < 0)
                return r;

        *ret_id = id;
        return 0;
}

int store_intern_file_frame(store *s, uint64_t offset, int64_t module_id, int64_t build_id_id, int64_t *ret_id) {
        if (!s || !ret_id || module_id <= 0 || build_id_id < 0)
                return -EINVAL;
        return intern_frame_values(s, (int64_t[]) { FRAME_USER, i64(offset), 0, i64(offset), module_id, build_id_id },
                                   ret_id);
}

int store_intern_kernel_frame(store *s, uint64_t addr, int64_t symbol_id, uint64_t offset, int64_t module_id,
                              int64_t build_id_id, int64_t *ret_id) {
        if (!s || !ret_id || symbol_id < 0 || module_id < 0 || build_id_id < 0)
                return -EINVAL;
        return intern_frame_values(s, (int64_t[]) { FRAME_KERNEL, i64(addr), symbol_id, i64(offset), module_id,
                                                    build_id_id }, ret_id);
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

        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        r = store_write_end(s, owned, intern_stack_locked(s, parent_id, frame_id, &id));
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
                store_caches_clear(s);
                s->frame_gen_bytes = 0;
        }
        return r;
}

/* Always inside a transaction (the caller's batch or store_write_begin()'s), which
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

        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        return store_write_end(s, owned, insert_sample_locked(s, smp));
}

int64_t store_link_snapshot(store *s, int64_t boot_id, int64_t snapshot_id, uint64_t from_ns, uint64_t until_ns) {
        bool owned;
        int64_t n;
        int r;

        if (!s || snapshot_id <= 0 || from_ns >= until_ns)
                return -EINVAL;
        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        n = sample_writer_link_written(s->samples, boot_id, snapshot_id, from_ns, until_ns);
        r = store_write_end(s, owned, n < 0 ? (int) n : 0);
        return r < 0 ? r : n;
}

int64_t store_count_snapshot_samples(store *s, int64_t snapshot_id) {
        bool owned;
        int64_t n;
        int r;

        if (!s)
                return -EINVAL;
        r = store_read_begin(s, &owned);
        if (r < 0)
                return r;
        n = sample_count_snapshot(s, snapshot_id);
        store_read_end(s, owned);
        return n;
}

static int add_lost_locked(store *s, uint64_t time_ns, uint32_t cpu, uint64_t lost) {
        sqlite3_stmt *st = NULL;
        int r;

        r = store_get_stmt(s, STMT_LOST_INSERT, &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, i64(time_ns));
        sqlite3_bind_int64(st, 2, cpu);
        sqlite3_bind_int64(st, 3, i64(lost));
        return store_step_done(s, st);
}

int store_add_lost(store *s, uint64_t time_ns, uint32_t cpu, uint64_t lost) {
        bool owned;
        int r;

        if (!s)
                return -EINVAL;

        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        return store_write_end(s, owned, add_lost_locked(s, time_ns, cpu, lost));
}

static int add_boot_locked(store *s, const char *boot_uuid, const char *build_id, uint64_t text_addr,
                           const char *release, uint64_t time_ns, int64_t *ret_id) {
        sqlite3_stmt *st = NULL;
        int r;

        r = store_get_stmt(s, STMT_BOOT_INSERT, &st);
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
        r = store_step_done(s, st);
        sqlite3_clear_bindings(st);
        if (r < 0)
                return r;

        if (sqlite3_changes(s->db) > 0) {
                *ret_id = sqlite3_last_insert_rowid(s->db);
                return 0;
        }

        r = store_get_stmt(s, STMT_BOOT_SELECT, &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, boot_uuid, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, build_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, i64(text_addr));
        r = store_step_id(s, st, ret_id);
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

        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        /* An unknown build id is "", not NULL: see UNIQUE and NULL above. */
        r = store_write_end(s, owned, add_boot_locked(s, boot_uuid, build_id ?: "", text_addr, release, time_ns, &id));
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
        r = store_sql_prepare(s->db, "DELETE FROM lost WHERE time_ns < ?1", &st_lost);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st_lost, 1, before_ns > INT64_MAX ? INT64_MAX : i64(before_ns));
        r = store_step_done(s, st_lost);
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

        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        r = store_write_end(s, owned, expire_locked(s, before_ns, &deleted, &more));
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
        r = store_write_begin(s, &owned);
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
        r = store_write_end(s, owned, r);
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

static int build_steps(store *s, uint64_t budget_ns, bool *ret_more) {
        uint64_t start = clock_ns(CLOCK_MONOTONIC);
        int r;

        do
                r = sample_writer_build_step(s->samples, ret_more);
        while (r >= 0 && *ret_more && clock_ns(CLOCK_MONOTONIC) - start < budget_ns);
        return r;
}

int store_build_step(store *s, uint64_t budget_ns, bool *ret_more) {
        bool owned, more = false;
        int r;

        if (!s || !ret_more)
                return -EINVAL;
        *ret_more = false;
        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        r = store_write_end(s, owned, build_steps(s, budget_ns, &more));
        if (r < 0)
                return r;
        *ret_more = more;
        return 0;
}

int store_flush_samples(store *s, uint64_t before_ns) {
        bool owned;
        int r;

        if (!s)
                return -EINVAL;
        r = store_write_begin(s, &owned);
        if (r < 0)
                return r;
        r = sample_writer_flush(s->samples, before_ns);
        if (r < 0 && s->batch_error == 0)
                s->batch_error = r;
        return store_write_end(s, owned, r);
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
