/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The symbolizer's (a, b) -> id cache (common/idcache.c). */
#include <errno.h>
#include <stdio.h>

#include "idcache.h"
#include "macro.h"
#include "test.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(idcache *, idcache_free);
#define _cleanup_idcache_ _cleanup_(idcache_freep)

TEST(put_get_replace_miss) {
        _cleanup_idcache_ idcache *c = NULL;
        int64_t id = 77;

        ASSERT_OK(idcache_new(100, &c));
        /* No table yet: a clean miss, *ret_id untouched. */
        ASSERT_TRUE(!idcache_get(c, 1, 2, &id));
        ASSERT_EQ(id, 77);

        ASSERT_OK(idcache_put(c, 1, 2, 10));
        ASSERT_OK(idcache_put(c, 2, 1, 20));
        ASSERT_EQ(idcache_size(c), 2);
        ASSERT_TRUE(idcache_get(c, 1, 2, &id));
        ASSERT_EQ(id, 10);
        ASSERT_TRUE(idcache_get(c, 2, 1, &id));
        ASSERT_EQ(id, 20);
        ASSERT_TRUE(!idcache_get(c, 1, 1, &id));
        ASSERT_TRUE(!idcache_get(c, 0, 0, &id));

        /* Replacing keeps the size. */
        ASSERT_OK(idcache_put(c, 1, 2, 11));
        ASSERT_EQ(idcache_size(c), 2);
        ASSERT_TRUE(idcache_get(c, 1, 2, &id));
        ASSERT_EQ(id, 11);

        /* 0 marks an empty slot: not an id. */
        ASSERT_ERROR(idcache_put(c, 3, 3, 0), EINVAL);
        ASSERT_ERROR(idcache_put(c, 3, 3, -1), EINVAL);
        ASSERT_TRUE(!idcache_get(c, 3, 3, &id));

        idcache_clear(c);
        ASSERT_EQ(idcache_size(c), 0);
        ASSERT_TRUE(!idcache_get(c, 1, 2, &id));
}

/* Keys shaped like the real ones (aligned kernel addresses with a small
 * epoch; one file's offsets), many of them: every one found, with its own
 * id, through growth. */
TEST(many_aligned_keys) {
        _cleanup_idcache_ idcache *c = NULL;
        enum { N = 50000 };
        int64_t id;

        ASSERT_OK(idcache_new(2 * N, &c));
        for (uint64_t i = 0; i < N; i++)
                ASSERT_OK(idcache_put(c, UINT64_C(0xffffffff81000000) + 16 * i, i % 3, (int64_t) i + 1));
        ASSERT_EQ(idcache_size(c), N);
        for (uint64_t i = 0; i < N; i++) {
                ASSERT_TRUE(idcache_get(c, UINT64_C(0xffffffff81000000) + 16 * i, i % 3, &id));
                ASSERT_EQ(id, (int64_t) i + 1);
                ASSERT_TRUE(!idcache_get(c, UINT64_C(0xffffffff81000000) + 16 * i, 3, &id));
        }
        /* At most half full: the table is the next power of two of 2N. */
        ASSERT_LE(idcache_memory_bytes(c), 131072 * 24 + 64);
}

/* Bounded: the put past max_entries starts over from empty. */
TEST(full_cache_starts_over) {
        _cleanup_idcache_ idcache *c = NULL;
        int64_t id;

        ASSERT_OK(idcache_new(4, &c));
        for (uint64_t i = 1; i <= 4; i++)
                ASSERT_OK(idcache_put(c, i, 0, (int64_t) i));
        ASSERT_EQ(idcache_size(c), 4);
        ASSERT_OK(idcache_put(c, 5, 0, 5));
        ASSERT_EQ(idcache_size(c), 1);
        ASSERT_TRUE(idcache_get(c, 5, 0, &id));
        ASSERT_EQ(id, 5);
        ASSERT_TRUE(!idcache_get(c, 1, 0, &id));
        /* A replacement at the bound starts over too; the new value is held. */
        for (uint64_t i = 6; i <= 8; i++)
                ASSERT_OK(idcache_put(c, i, 0, (int64_t) i));
        ASSERT_OK(idcache_put(c, 8, 0, 80));
        ASSERT_TRUE(idcache_get(c, 8, 0, &id));
        ASSERT_EQ(id, 80);
        ASSERT_EQ(idcache_size(c), 1);
}

TEST(bad_arguments) {
        idcache *c = NULL;

        ASSERT_ERROR(idcache_new(0, &c), EINVAL);
        ASSERT_ERROR(idcache_new(1, NULL), EINVAL);
        ASSERT_ERROR(idcache_put(NULL, 1, 1, 1), EINVAL);
        ASSERT_TRUE(!idcache_get(NULL, 1, 1, &(int64_t) { 0 }));
        ASSERT_TRUE(idcache_free(NULL) == NULL);
}

/* A second value a slot: 0 until set, set only for a cached key, reset
 * by a put of the key, kept through growth, gone with a clear; refused
 * by a cache made without it. */
TEST(second_values) {
        _cleanup_idcache_ idcache *c = NULL, *plain = NULL;
        int64_t id = 0, aux = -1;

        ASSERT_OK(idcache_new_aux(1000, &c));
        ASSERT_ERROR(idcache_set_aux(c, 1, 2, 5), ENOENT);
        ASSERT_OK(idcache_put(c, 1, 2, 10));
        ASSERT_TRUE(idcache_get_aux(c, 1, 2, &id, &aux));
        ASSERT_EQ(id, 10);
        ASSERT_EQ(aux, 0);
        ASSERT_OK(idcache_set_aux(c, 1, 2, 99));
        ASSERT_ERROR(idcache_set_aux(c, 2, 1, 5), ENOENT);
        ASSERT_TRUE(idcache_get_aux(c, 1, 2, &id, &aux));
        ASSERT_EQ(aux, 99);
        ASSERT_TRUE(idcache_get(c, 1, 2, &id));
        ASSERT_EQ(id, 10);

        /* Through growth (64 slots at first), every key keeps both. */
        for (uint64_t i = 100; i < 600; i++) {
                ASSERT_OK(idcache_put(c, i, 7, (int64_t) i));
                ASSERT_OK(idcache_set_aux(c, i, 7, (int64_t) (i * 3)));
        }
        for (uint64_t i = 100; i < 600; i++) {
                ASSERT_TRUE(idcache_get_aux(c, i, 7, &id, &aux));
                ASSERT_EQ(id, (int64_t) i);
                ASSERT_EQ(aux, (int64_t) (i * 3));
        }
        ASSERT_TRUE(idcache_get_aux(c, 1, 2, &id, &aux));
        ASSERT_EQ(aux, 99);
        /* 32 bytes a slot, at most half full. */
        ASSERT_LE(idcache_memory_bytes(c), 2048 * 32 + 64);

        /* A new id for the key: its second value was the old id's. */
        ASSERT_OK(idcache_put(c, 1, 2, 11));
        ASSERT_TRUE(idcache_get_aux(c, 1, 2, &id, &aux));
        ASSERT_EQ(id, 11);
        ASSERT_EQ(aux, 0);

        idcache_clear(c);
        ASSERT_TRUE(!idcache_get_aux(c, 100, 7, &id, &aux));
        ASSERT_ERROR(idcache_set_aux(c, 100, 7, 1), ENOENT);

        ASSERT_OK(idcache_new(10, &plain));
        ASSERT_OK(idcache_put(plain, 1, 2, 10));
        ASSERT_ERROR(idcache_set_aux(plain, 1, 2, 5), EINVAL);
        ASSERT_TRUE(idcache_get_aux(plain, 1, 2, &id, &aux));
        ASSERT_EQ(aux, 0);
}
