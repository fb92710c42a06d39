/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The stack and frame dictionaries. Kept as sqlite rows with a unique
 * index, a stack node or frame cost ~50 bytes on disk and a b-tree
 * descent to intern; on a machine that starts thousands of processes a
 * minute, they were most of the database and of the ingest CPU. Here the
 * writer interns through an index in memory that holds the rows of the
 * current generation (bounded: a generation ends at dict_max_rows()), and
 * the rows go to disk in compressed blocks of up to DICT_BLOCK_ROWS, a few
 * bytes a row. Each commit that added to the open block writes the rows it
 * added as a piece of it, so a committed sample never names a row that is
 * not committed too; the block, once full, replaces its pieces. See
 * doc/storage.md. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "store/store-dict.h"
#include "store/store-private.h"

static const struct dict_sql {
        const char *table, *blocks;     /* the schema-6 table, the blocks table */
        size_t max_rows;
        const char *legacy;             /* the schema-6 table's rows */
} dict_sql[_DICT_KIND_MAX] = {
        /* Just under a power of two, with room for one sample's frames
         * past the limit: the arrays double at powers of two. */
        [DICT_STACKS] = { "stacks", "stack_blocks", 256 * 1024 - 1024,
                          "SELECT id, gen, parent, frame FROM stacks ORDER BY id" },
        [DICT_FRAMES] = { "frames", "frame_blocks", 128 * 1024 - 1024,
                          "SELECT id, gen, kind, addr, symbol_id, offset, module_id, build_id_id FROM frames ORDER BY id" },
};

/* Statements on a kind's blocks table. */
enum { SQL_PUT, SQL_GEN_ROWS, SQL_MAX_ID, SQL_DROP_PIECES, SQL_FIND };

static int prepare_for(sqlite3 *db, dict_kind kind, unsigned which, sqlite3_stmt **ret) {
        const char *t = dict_sql[kind].blocks;
        char buf[256];

        switch (which) {
        case SQL_PUT:
                snprintf(buf, sizeof buf,
                         "INSERT OR REPLACE INTO %s(first_id, last_id, gen, n, data) VALUES (?1, ?2, ?3, ?4, ?5)", t);
                break;
        case SQL_GEN_ROWS:
                snprintf(buf, sizeof buf, "SELECT first_id, last_id, data FROM %s WHERE gen = ?1 ORDER BY first_id", t);
                break;
        case SQL_MAX_ID:
                snprintf(buf, sizeof buf, "SELECT last_id FROM %s ORDER BY first_id DESC LIMIT 1", t);
                break;
        case SQL_DROP_PIECES:
                snprintf(buf, sizeof buf, "DELETE FROM %s WHERE first_id > ?1 AND first_id <= ?2", t);
                break;
        default:
                snprintf(buf, sizeof buf,
                         "SELECT first_id, last_id, data FROM %s WHERE first_id <= ?1 ORDER BY first_id DESC LIMIT 1", t);
                break;
        }
        switch (sqlite3_prepare_v2(db, buf, -1, ret, NULL)) {
        case SQLITE_OK: return 0;
        case SQLITE_BUSY: return -EBUSY;
        case SQLITE_NOMEM: return -ENOMEM;
        default: return -EIO;
        }
}

size_t dict_max_rows(dict_kind kind) {
        return kind < _DICT_KIND_MAX ? dict_sql[kind].max_rows : 0;
}

struct dict {
        store *store;
        dict_kind kind;
        size_t width;           /* int64_t per row: the id and the columns */
        sample_codec *codec;
        sqlite3_stmt *put_st, *drop_st;

        uint64_t gen;
        int64_t next_id;

        /* The generation's rows in id order, and an open-addressing index
         * of their values -> position + 1 (0: empty slot). */
        int64_t *rows;
        size_t n_rows, alloc_rows;
        uint32_t *slots;
        size_t capacity;        /* 0 or a power of two */

        size_t open_start;      /* rows[open_start..] are the open block */
        size_t written;         /* rows[..written] are in the database */
        size_t pieces;          /* rows of the database the open block is in */
        uint64_t bad_blocks;    /* skipped by the last read-back */
        /* The last read-back failed: the state is not the database's, so
         * nothing is interned or written until one succeeds. */
        bool failed;
};

static inline int64_t *row_at(const dict *d, size_t pos) {
        return d->rows + pos * d->width;
}

static uint64_t values_hash(const int64_t *v, size_t n) {
        uint64_t x = 0x9e3779b97f4a7c15ULL;

        for (size_t i = 0; i < n; i++) {
                x = (x ^ (uint64_t) v[i]) * 0xc2b2ae3d27d4eb4fULL;
                x ^= x >> 29;
        }
        x *= 0x94d049bb133111ebULL;
        return x ^ (x >> 32);
}

/* Position of id in n rows of width values sorted by id (the id first),
 * or n. Consecutive ids (all the writer makes) are indexed directly. */
static size_t rows_find(const int64_t *rows, size_t n, size_t width, int64_t id) {
        size_t lo = 0, hi = n;

        if (n == 0 || id < rows[0])
                return n;
        if ((uint64_t) (id - rows[0]) < n && rows[(size_t) (id - rows[0]) * width] == id)
                return (size_t) (id - rows[0]);
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (rows[mid * width] < id)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < n && rows[lo * width] == id ? lo : n;
}

/* Decodes the block of the current row of st (first_id, last_id, data);
 * -EBADMSG also when its ids disagree with the key columns, so that it is
 * neither trusted nor rewritten under them. */
static int decode_row_block(sample_codec *codec, dict_kind kind, size_t width, sqlite3_stmt *st, int64_t **ret,
                            size_t *ret_n) {
        _cleanup_free_ int64_t *v = NULL;
        size_t n;
        int r;

        r = dict_block_decode(codec, kind, sqlite3_column_blob(st, 2), (size_t) sqlite3_column_bytes(st, 2), &v, &n);
        if (r == -EPROTONOSUPPORT)
                r = -EBADMSG;
        if (r < 0)
                return r;
        if (v[0] != sqlite3_column_int64(st, 0) || v[(n - 1) * width] != sqlite3_column_int64(st, 1))
                return -EBADMSG;
        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

static void index_insert(dict *d, size_t pos) {
        size_t mask = d->capacity - 1;
        unsigned shift = slot_shift(d->capacity);
        uint64_t h = values_hash(row_at(d, pos) + 1, d->width - 1);
        size_t i = h & mask;

        while (d->slots[i] != 0)
                i = (i + 1) & mask;
        d->slots[i] = slot_make(slot_tag(h, shift), shift, pos);
}

/* Room for one more row: the index stays at most half full. */
static int index_reserve(dict *d) {
        if (d->n_rows == d->alloc_rows) {
                size_t m = MAX(d->alloc_rows * 2, (size_t) 1024);
                int64_t *p = reallocarray(d->rows, m, d->width * sizeof *p);

                if (!p)
                        return -ENOMEM;
                d->rows = p;
                d->alloc_rows = m;
        }
        if ((d->n_rows + 1) * 2 > d->capacity) {
                size_t c = MAX(d->capacity * 2, (size_t) 2048);
                uint32_t *s;

                if (d->n_rows >= UINT32_MAX - 1)
                        return -E2BIG;
                s = calloc(c, sizeof *s);
                if (!s)
                        return -ENOMEM;
                free(d->slots);
                d->slots = s;
                d->capacity = c;
                for (size_t i = 0; i < d->n_rows; i++)
                        index_insert(d, i);
        }
        return 0;
}

static int index_find(const dict *d, const int64_t *values, int64_t *ret_id) {
        size_t mask = d->capacity - 1, n = d->width - 1;
        unsigned shift;
        uint64_t h;
        uint32_t tag;

        if (d->capacity == 0)
                return -ENOENT;
        shift = slot_shift(d->capacity);
        h = values_hash(values, n);
        tag = slot_tag(h, shift);
        for (size_t i = h & mask; d->slots[i] != 0; i = (i + 1) & mask) {
                if (!slot_has_tag(d->slots[i], tag, shift))
                        continue;

                const int64_t *row = row_at(d, slot_pos(d->slots[i], shift));
                size_t k = 0;

                /* n is 2 or 6: a loop the compiler keeps in registers,
                 * not a call to memcmp. */
                while (k < n && row[1 + k] == values[k])
                        k++;
                if (k == n) {
                        *ret_id = row[0];
                        return 0;
                }
        }
        return -ENOENT;
}

static void index_reset(dict *d) {
        d->n_rows = d->open_start = d->written = d->pieces = 0;
        if (d->slots)
                memset(d->slots, 0, d->capacity * sizeof *d->slots);
}

static int append_row(dict *d, const int64_t *row) {
        int r = index_reserve(d);

        if (r < 0)
                return r;
        memcpy(row_at(d, d->n_rows), row, d->width * sizeof *row);
        index_insert(d, d->n_rows);
        d->n_rows++;
        return 0;
}

int dict_new(store *s, dict_kind kind, dict **ret) {
        dict *d;

        if (kind >= _DICT_KIND_MAX)
                return -EINVAL;
        d = calloc(1, sizeof *d);
        if (!d)
                return -ENOMEM;
        d->store = s;
        d->kind = kind;
        d->width = 1 + dict_columns(kind);
        d->next_id = 1;
        d->codec = sample_codec_new();
        if (!d->codec) {
                free(d);
                return -ENOMEM;
        }
        *ret = d;
        return 0;
}

dict *dict_free(dict *d) {
        if (!d)
                return NULL;
        sqlite3_finalize(d->put_st);
        sqlite3_finalize(d->drop_st);
        sample_codec_free(d->codec);
        free(d->rows);
        free(d->slots);
        free(d);
        return NULL;
}

int dict_max_id(sqlite3 *db, dict_kind kind, int64_t *ret) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        if (kind >= _DICT_KIND_MAX)
                return -EINVAL;
        /* Blocks do not overlap: the last by first_id ends highest. */
        rc = prepare_for(db, kind, SQL_MAX_ID, &st);
        if (rc < 0)
                return rc;
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                *ret = sqlite3_column_int64(st, 0);
        else if (rc == SQLITE_DONE)
                *ret = 0;
        else
                return rc == SQLITE_BUSY ? -EBUSY : -EIO;
        return 0;
}

static int reload(dict *d, uint64_t gen) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int64_t max_id;
        bool last_open = false;
        int r, rc;

        index_reset(d);
        d->gen = gen;
        d->bad_blocks = 0;
        r = dict_max_id(store_sqlite(d->store), d->kind, &max_id);
        if (r < 0)
                return r;
        d->next_id = max_id + 1;

        r = prepare_for(store_sqlite(d->store), d->kind, SQL_GEN_ROWS, &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, i64(gen));
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                _cleanup_free_ int64_t *v = NULL;
                size_t n;

                r = decode_row_block(d->codec, d->kind, d->width, st, &v, &n);
                if (r == -EBADMSG) {
                        d->bad_blocks++;
                        last_open = false;
                        continue;
                }
                if (r < 0)
                        return r;
                /* The index is bounded by the rows a generation makes; a
                 * damaged file must not make it bigger. */
                if (d->n_rows + n > dict_max_rows(d->kind) + DICT_BLOCK_MAX_ROWS) {
                        last_open = false;
                        break;
                }
                d->open_start = d->n_rows;
                for (size_t i = 0; i < n; i++) {
                        r = append_row(d, v + i * d->width);
                        if (r < 0)
                                return r;
                }
                /* Only the database's last block may grow: blocks must
                 * not overlap. */
                last_open = n < DICT_BLOCK_ROWS && v[(n - 1) * d->width] == max_id;
        }
        if (rc != SQLITE_DONE && rc != SQLITE_ROW)
                return store_step_errno(d->store, rc);

        if (!last_open)
                d->open_start = d->n_rows;
        d->written = d->n_rows;
        d->pieces = last_open ? 1 : 0;
        return 0;
}

int dict_reload(dict *d, uint64_t gen) {
        int r;

        if (!d)
                return 0;
        r = reload(d, gen);
        d->failed = r < 0;
        return r;
}

bool dict_failed(const dict *d) {
        return d && d->failed;
}

static int bind_block(sqlite3_stmt *st, uint64_t gen, const int64_t *first, const int64_t *last, size_t n,
                      const uint8_t *data, size_t size) {
        sqlite3_bind_int64(st, 1, first[0]);
        sqlite3_bind_int64(st, 2, last[0]);
        sqlite3_bind_int64(st, 3, i64(gen));
        sqlite3_bind_int64(st, 4, (int64_t) n);
        return sqlite3_bind_blob(st, 5, data, (int) size, SQLITE_STATIC) == SQLITE_OK ? 0 : -E2BIG;
}

/* Writes rows[from..n_rows) as one block. */
static int write_rows(dict *d, size_t from) {
        _cleanup_free_ uint8_t *data = NULL;
        size_t n = d->n_rows - from, size;
        int r;

        r = dict_block_encode(d->codec, d->kind, row_at(d, from), n, &data, &size);
        if (r < 0)
                return r;
        if (!d->put_st) {
                r = prepare_for(store_sqlite(d->store), d->kind, SQL_PUT, &d->put_st);
                if (r < 0)
                        return r;
        }
        r = bind_block(d->put_st, d->gen, row_at(d, from), row_at(d, d->n_rows - 1), n, data, size);
        if (r >= 0)
                r = store_step_kept(d->store, d->put_st, (store_value[]) {
                                { .i = row_at(d, from)[0] }, { .i = row_at(d, d->n_rows - 1)[0] },
                                { .i = i64(d->gen) }, { .i = (int64_t) n }, { .blob = data, .size = size } }, 5);
        sqlite3_clear_bindings(d->put_st);
        return r;
}

/* The rows not yet written. While the open block is not full, they are
 * written as a piece of it (rows[written..]), not the block again: on an
 * idle machine a commit adds a few rows to a block of thousands, and
 * re-encoding and rewriting the whole block at every commit was a quarter
 * of the daemon's CPU (bench/RESULTS.md). A full block, or with close
 * the open block as it is (a generation's last), replaces its pieces (the
 * first has its first id) and is closed. */
static int write_open_block(dict *d, bool close) {
        size_t n = d->n_rows - d->open_start;
        int r;

        if (n == 0 || (d->written == d->n_rows && (!close || d->pieces <= 1)))
                return 0;
        if (n < DICT_BLOCK_ROWS && !close) {
                r = write_rows(d, d->written);
                if (r < 0)
                        return r;
                d->written = d->n_rows;
                d->pieces++;
                return 0;
        }
        r = write_rows(d, d->open_start);
        if (r < 0)
                return r;
        if (d->pieces > 1) {
                if (!d->drop_st) {
                        r = prepare_for(store_sqlite(d->store), d->kind, SQL_DROP_PIECES, &d->drop_st);
                        if (r < 0)
                                return r;
                }
                r = store_run_kept(d->store, d->drop_st, (store_value[]) {
                                { .i = row_at(d, d->open_start)[0] }, { .i = row_at(d, d->n_rows - 1)[0] } }, 2);
                sqlite3_clear_bindings(d->drop_st);
                if (r < 0)
                        return r;
        }
        d->written = d->n_rows;
        d->open_start = d->n_rows;
        d->pieces = 0;
        return 0;
}

int dict_start_generation(dict *d, uint64_t gen) {
        int r;

        if (!d || gen == d->gen)
                return 0;
        if (d->failed)
                return -EIO;
        /* The old generation's open block is complete. */
        r = write_open_block(d, true);
        if (r < 0)
                return r;
        index_reset(d);
        d->gen = gen;
        return 0;
}

int dict_intern(dict *d, uint64_t gen, const int64_t *values, int64_t *ret_id) {
        int64_t row[1 + DICT_MAX_COLUMNS];
        int r;

        r = dict_start_generation(d, gen);
        if (r < 0)
                return r;

        if (index_find(d, values, ret_id) >= 0)
                return 0;
        if (d->next_id == INT64_MAX)
                return -E2BIG;
        row[0] = d->next_id;
        memcpy(row + 1, values, (d->width - 1) * sizeof *values);
        if (!dict_row_valid(d->kind, row))
                return -EINVAL;
        r = append_row(d, row);
        if (r < 0)
                return r;
        d->next_id++;
        if (d->n_rows - d->open_start >= DICT_BLOCK_ROWS) {
                r = write_open_block(d, false);
                if (r < 0)
                        return r;
        }
        *ret_id = row[0];
        return 1;
}

int dict_find_id(const dict *d, int64_t id, int64_t *ret_values) {
        size_t i;

        if (!d)
                return -ENOENT;
        i = rows_find(d->rows, d->n_rows, d->width, id);
        if (i == d->n_rows)
                return -ENOENT;
        memcpy(ret_values, row_at(d, i) + 1, (d->width - 1) * sizeof *ret_values);
        return 0;
}

int dict_before_commit(dict *d) {
        if (!d)
                return 0;
        return d->failed ? -EIO : write_open_block(d, false);
}

size_t dict_rows(const dict *d) {
        return d ? d->n_rows : 0;
}

size_t dict_memory_bytes(const dict *d) {
        return d ? sizeof *d + d->alloc_rows * d->width * sizeof(int64_t) + d->capacity * sizeof(uint32_t) +
                           sample_codec_memory_bytes(d->codec)
                 : 0;
}

uint64_t dict_bad_blocks(const dict *d) {
        return d ? d->bad_blocks : 0;
}

/* ---- reading ---- */

typedef struct loaded_block {
        int64_t first, last;
        int64_t *v;
        size_t n;
        uint64_t used;          /* the reader's clock at the last lookup */
} loaded_block;

struct dict_reader {
        sqlite3_stmt *st;
        dict_kind kind;
        size_t width;
        sample_codec *codec;
        loaded_block *blocks;   /* sorted by first */
        size_t n_blocks, alloc_blocks;
        size_t bytes, max_bytes;
        uint64_t clock;
        size_t last;            /* the block of the last id found (a hint: checked) */
};

int dict_reader_new(sqlite3 *db, dict_kind kind, size_t max_bytes, dict_reader **ret) {
        dict_reader *r;
        int k;

        if (kind >= _DICT_KIND_MAX)
                return -EINVAL;
        r = calloc(1, sizeof *r);
        if (!r)
                return -ENOMEM;
        r->kind = kind;
        r->width = 1 + dict_columns(kind);
        r->max_bytes = max_bytes;
        r->codec = sample_codec_new();
        if (!r->codec) {
                dict_reader_free(r);
                return -ENOMEM;
        }
        k = prepare_for(db, kind, SQL_FIND, &r->st);
        if (k < 0) {
                dict_reader_free(r);
                return k;
        }
        *ret = r;
        return 0;
}

static void reader_drop_blocks(dict_reader *r) {
        for (size_t i = 0; i < r->n_blocks; i++)
                free(r->blocks[i].v);
        r->n_blocks = 0;
        r->bytes = 0;
}

dict_reader *dict_reader_free(dict_reader *r) {
        if (!r)
                return NULL;
        reader_drop_blocks(r);
        free(r->blocks);
        sqlite3_finalize(r->st);
        sample_codec_free(r->codec);
        free(r);
        return NULL;
}

/* Index of the loaded block that may hold id: the last with first <= id,
 * or n_blocks when there is none. *ret_at: where a block for id goes. */
static size_t reader_find(const dict_reader *r, int64_t id, size_t *ret_at) {
        size_t lo = 0, hi = r->n_blocks;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (r->blocks[mid].first <= id)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *ret_at = lo;
        return lo > 0 && id <= r->blocks[lo - 1].last ? lo - 1 : r->n_blocks;
}

static int reader_load(dict_reader *r, int64_t id, size_t *ret_idx) {
        _cleanup_free_ int64_t *v = NULL;
        loaded_block b;
        size_t n, at, bytes;
        int rc, k;

        sqlite3_bind_int64(r->st, 1, id);
        rc = sqlite3_step(r->st);
        if (rc != SQLITE_ROW) {
                sqlite3_reset(r->st);
                return rc == SQLITE_DONE ? -EBADMSG : rc == SQLITE_BUSY ? -EBUSY : -EIO;
        }
        b.first = sqlite3_column_int64(r->st, 0);
        b.last = sqlite3_column_int64(r->st, 1);
        k = id > b.last ? -EBADMSG : decode_row_block(r->codec, r->kind, r->width, r->st, &v, &n);
        sqlite3_reset(r->st);
        if (k < 0)
                return k;

        /* The least recently used blocks make room. */
        bytes = n * r->width * sizeof *v;
        while (r->n_blocks > 0 && r->bytes + bytes > r->max_bytes) {
                size_t lru = 0;

                for (size_t i = 1; i < r->n_blocks; i++)
                        if (r->blocks[i].used < r->blocks[lru].used)
                                lru = i;
                r->bytes -= r->blocks[lru].n * r->width * sizeof *v;
                free(r->blocks[lru].v);
                memmove(r->blocks + lru, r->blocks + lru + 1, (r->n_blocks - lru - 1) * sizeof *r->blocks);
                r->n_blocks--;
        }
        (void) reader_find(r, id, &at);
        if (r->n_blocks == r->alloc_blocks) {
                size_t m = MAX(r->alloc_blocks * 2, (size_t) 16);
                loaded_block *p = reallocarray(r->blocks, m, sizeof *p);

                if (!p)
                        return -ENOMEM;
                r->blocks = p;
                r->alloc_blocks = m;
        }
        memmove(r->blocks + at + 1, r->blocks + at, (r->n_blocks - at) * sizeof *r->blocks);
        b.v = TAKE_PTR(v);
        b.n = n;
        b.used = 0;
        r->blocks[at] = b;
        r->n_blocks++;
        r->bytes += bytes;
        *ret_idx = at;
        return 0;
}

int dict_reader_rows(dict_reader *r, int64_t id, const int64_t **ret_rows, size_t *ret_n) {
        const loaded_block *b;
        size_t at, i;
        int k;

        /* Ids are mostly asked for in runs within a block. */
        if (r->last < r->n_blocks && r->blocks[r->last].first <= id && id <= r->blocks[r->last].last)
                i = r->last;
        else
                i = reader_find(r, id, &at);
        if (i == r->n_blocks) {
                k = reader_load(r, id, &i);
                if (k < 0)
                        return k;
        }
        r->blocks[i].used = ++r->clock;
        r->last = i;
        b = r->blocks + i;
        i = rows_find(b->v, b->n, r->width, id);
        if (i == b->n)
                return -EBADMSG;
        *ret_rows = b->v + i * r->width;
        *ret_n = b->n - i;
        return 0;
}

int dict_reader_get(dict_reader *r, int64_t id, int64_t *ret_values) {
        const int64_t *row;
        size_t n;
        int k;

        k = dict_reader_rows(r, id, &row, &n);
        if (k < 0)
                return k;
        memcpy(ret_values, row + 1, (r->width - 1) * sizeof *ret_values);
        return 0;
}

/* ---- migration ---- */

static int put_block(sqlite3_stmt *st, dict_kind kind, uint64_t gen, const int64_t *v, size_t n, size_t width) {
        _cleanup_free_ uint8_t *data = NULL;
        size_t size;
        int r, rc;

        r = dict_block_encode(NULL, kind, v, n, &data, &size);
        if (r < 0)
                return r;
        r = bind_block(st, gen, v, v + (n - 1) * width, n, data, size);
        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return rc == SQLITE_DONE ? 0 : rc == SQLITE_FULL ? -ENOSPC : -EIO;
}

/* Rows that break the rules a block keeps (a parent that is not older, a
 * frame id <= 0) were unreadable by queries before too: left out. */
static int migrate_table(sqlite3 *db, dict_kind kind) {
        _cleanup_finalize_ sqlite3_stmt *rd = NULL, *wr = NULL;
        _cleanup_free_ int64_t *v = NULL;
        size_t width = 1 + dict_columns(kind), n = 0;
        char sql[64];
        uint64_t gen = 0;
        int r, rc;

        if (sqlite3_prepare_v2(db, dict_sql[kind].legacy, -1, &rd, NULL) != SQLITE_OK)
                return -EIO;
        r = prepare_for(db, kind, SQL_PUT, &wr);
        if (r < 0)
                return r;
        v = calloc(DICT_BLOCK_MAX_ROWS * width, sizeof *v);
        if (!v)
                return -ENOMEM;

        while ((rc = sqlite3_step(rd)) == SQLITE_ROW) {
                int64_t *row = v + n * width;
                uint64_t g = u64(sqlite3_column_int64(rd, 1));

                if (n > 0 && (g != gen || n == DICT_BLOCK_MAX_ROWS)) {
                        r = put_block(wr, kind, gen, v, n, width);
                        if (r < 0)
                                return r;
                        n = 0;
                        row = v;
                }
                row[0] = sqlite3_column_int64(rd, 0);
                for (size_t c = 1; c < width; c++)
                        row[c] = sqlite3_column_int64(rd, (int) c + 1);
                if (!dict_row_valid(kind, row))
                        continue;
                gen = g;
                n++;
        }
        if (rc != SQLITE_DONE)
                return -EIO;
        if (n > 0) {
                r = put_block(wr, kind, gen, v, n, width);
                if (r < 0)
                        return r;
        }
        snprintf(sql, sizeof sql, "DROP TABLE %s", dict_sql[kind].table);
        return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -EIO;
}

int store_migrate_6_to_7(sqlite3 *db) {
        int r;

        if (sqlite3_exec(db,
                         "CREATE TABLE stack_blocks(first_id INTEGER PRIMARY KEY, last_id INTEGER NOT NULL,"
                         "  gen INTEGER NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL);"
                         "CREATE INDEX stack_blocks_gen ON stack_blocks(gen);"
                         "CREATE TABLE frame_blocks(first_id INTEGER PRIMARY KEY, last_id INTEGER NOT NULL,"
                         "  gen INTEGER NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL);"
                         "CREATE INDEX frame_blocks_gen ON frame_blocks(gen);", NULL, NULL, NULL) != SQLITE_OK)
                return -EIO;
        r = migrate_table(db, DICT_STACKS);
        if (r < 0)
                return r;
        return migrate_table(db, DICT_FRAMES);
}
