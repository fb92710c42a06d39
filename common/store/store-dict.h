/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The dictionaries of the store (store-dict.c): stack nodes and frames in
 * compressed blocks (stack_blocks, frame_blocks), interned through an
 * index in memory that holds the current generation's rows; for the
 * store's own files. */

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/sample-block.h"
#include "store/store.h"

/* The writer closes a block at this many rows; until then it is
 * rewritten at each commit that added rows to it, so a small number keeps
 * that cost down. Blocks converted from schema 6 hold up to
 * DICT_BLOCK_MAX_ROWS. */
#define DICT_BLOCK_ROWS 4096

/* The generation ends (store.c) once a dictionary's index holds this many
 * rows: bounds the writer's memory (stack nodes 32 bytes a row with the
 * index, frames 64). */
size_t dict_max_rows(dict_kind kind);

typedef struct dict dict;

int dict_new(store *s, dict_kind kind, dict **ret);
dict *dict_free(dict *d);

/* Reads generation gen's rows back from the database as committed: at
 * open, and after a batch was rolled back. Blocks that fail to decode are
 * skipped and counted (their rows are interned anew when seen again).
 * After a failure the dictionary refuses to intern and to write (-EIO)
 * until a read-back succeeds (dict_failed()). */
int dict_reload(dict *d, uint64_t gen);
bool dict_failed(const dict *d);

/* Inside a transaction: writes the open block and starts generation gen
 * with an empty index. */
int dict_start_generation(dict *d, uint64_t gen);

/* Inside a transaction of the store. The id of the row with these
 * dict_columns() values in generation gen, made if new (-EINVAL if the
 * values break dict_row_valid()'s rules); a new generation starts an
 * empty index. Returns 1 if it made the row, 0 if it had it. */
int dict_intern(dict *d, uint64_t gen, const int64_t *values, int64_t *ret_id);

/* The values of row id if it is in the current generation's index. */
int dict_find_id(const dict *d, int64_t id, int64_t *ret_values);

/* Writes the open block if it has rows the database does not. */
int dict_before_commit(dict *d);

size_t dict_rows(const dict *d);        /* of the current generation */
size_t dict_memory_bytes(const dict *d);
uint64_t dict_bad_blocks(const dict *d);       /* skipped by the last read-back */

/* The highest id in the database (0: none). */
int dict_max_id(sqlite3 *db, dict_kind kind, int64_t *ret);

/* Reading, for queries: id -> values, decoding the blocks it needs; at
 * most max_bytes of decoded blocks are kept. */
typedef struct dict_reader dict_reader;

int dict_reader_new(sqlite3 *db, dict_kind kind, size_t max_bytes, dict_reader **ret);
dict_reader *dict_reader_free(dict_reader *r);
/* Copies the dict_columns() values of row id; -EBADMSG when no block holds
 * it, or its block is damaged. */
int dict_reader_get(dict_reader *r, int64_t id, int64_t *ret_values);
/* The row of id (its id first, then its values) and the *ret_n - 1 rows
 * after it in its block, in id order, valid until the reader's next call;
 * -EBADMSG as for dict_reader_get(). */
int dict_reader_rows(dict_reader *r, int64_t id, const int64_t **ret_rows, size_t *ret_n);

/* Schema 6 -> 7: the stacks and frames tables into blocks. */
int store_migrate_6_to_7(sqlite3 *db);
