/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* What store.c shares with the other files of the store (store-layout.c);
 * not for users of the store. */

#include <errno.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "store/store.h"

#include "macro.h"

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

sqlite3 *store_sqlite(store *s);
int store_prepare(store *s, const char *sql, sqlite3_stmt **ret);
int store_step_done(store *s, sqlite3_stmt *st);
int store_step_errno(store *s, int rc);         /* a sqlite result code as a negative errno */

/* Writes outside store_begin() .. store_commit() get a transaction of their
 * own; inside a batch they join it. */
int store_write_begin(store *s, bool *ret_owned);
int store_write_end(store *s, bool owned, int r);

int store_migrate_1_to_2(sqlite3 *db);
int store_migrate_2_to_3(sqlite3 *db);
int store_migrate_3_to_4(sqlite3 *db);
int store_expire_layout(store *s, uint64_t before_ns);
