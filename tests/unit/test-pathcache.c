/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The symbolizer's chain -> stack id cache (common/pathcache.c). */
#include <errno.h>
#include <stdio.h>

#include "macro.h"
#include "pathcache.h"
#include "test.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(pathcache *, pathcache_free);
#define _cleanup_pathcache_ _cleanup_(pathcache_freep)

TEST(put_get_replace_miss) {
        _cleanup_pathcache_ pathcache *c = NULL;
        const int64_t a[] = { 5, 6, 7 }, b[] = { 5, 6 }, z[] = { 5, 6, 0 }, r[] = { 7, 6, 5 };
        int64_t id = 77;

        ASSERT_OK(pathcache_new(100, 1 << 20, &c));
        ASSERT_TRUE(!pathcache_get(c, a, 3, &id));
        ASSERT_EQ(id, 77);

        ASSERT_OK(pathcache_put(c, a, 3, 10));
        ASSERT_OK(pathcache_put(c, b, 2, 20));
        ASSERT_EQ(pathcache_size(c), 2);
        ASSERT_TRUE(pathcache_get(c, a, 3, &id));
        ASSERT_EQ(id, 10);
        ASSERT_TRUE(pathcache_get(c, b, 2, &id));
        ASSERT_EQ(id, 20);
        /* A prefix, the prefix padded with a zero id, the reversed chain:
         * other keys. */
        ASSERT_TRUE(!pathcache_get(c, a, 1, &id));
        ASSERT_TRUE(!pathcache_get(c, z, 3, &id));
        ASSERT_TRUE(!pathcache_get(c, r, 3, &id));
        /* The empty chain is a key like any other. */
        ASSERT_TRUE(!pathcache_get(c, a, 0, &id));
        ASSERT_OK(pathcache_put(c, a, 0, 30));
        ASSERT_TRUE(pathcache_get(c, NULL, 0, &id));
        ASSERT_EQ(id, 30);

        ASSERT_OK(pathcache_put(c, a, 3, 11));
        ASSERT_EQ(pathcache_size(c), 3);
        ASSERT_TRUE(pathcache_get(c, a, 3, &id));
        ASSERT_EQ(id, 11);

        ASSERT_ERROR(pathcache_put(c, r, 3, 0), EINVAL);
        ASSERT_ERROR(pathcache_put(c, r, 3, -1), EINVAL);
        ASSERT_TRUE(!pathcache_get(c, r, 3, &id));

        pathcache_clear(c);
        ASSERT_EQ(pathcache_size(c), 0);
        ASSERT_TRUE(!pathcache_get(c, a, 3, &id));
}

/* Chains shaped like the real ones (ids that grow, shared prefixes, 1-40
 * frames), many of them: every one found with its own id, through growth. */
TEST(many_chains) {
        _cleanup_pathcache_ pathcache *c = NULL;
        enum { N = 30000, DEPTH = 40 };
        int64_t ids[DEPTH], id;

        const size_t max_bytes = 65536 * 24 + (size_t) N * DEPTH * sizeof(int64_t);

        ASSERT_OK(pathcache_new(N, max_bytes, &c));
        for (int64_t i = 0; i < N; i++) {
                size_t n = 1 + (size_t) i % DEPTH;

                for (size_t k = 0; k < n; k++)
                        ids[k] = 1000 + (int64_t) k + (k + 1 == n ? i : 0);
                ASSERT_OK(pathcache_put(c, ids, n, i + 1));
        }
        ASSERT_EQ(pathcache_size(c), N);
        for (int64_t i = 0; i < N; i++) {
                size_t n = 1 + (size_t) i % DEPTH;

                for (size_t k = 0; k < n; k++)
                        ids[k] = 1000 + (int64_t) k + (k + 1 == n ? i : 0);
                ASSERT_TRUE(pathcache_get(c, ids, n, &id));
                ASSERT_EQ(id, i + 1);
                ids[0]++;
                ASSERT_TRUE(!pathcache_get(c, ids, n, &id));
        }
        /* At most half full: 65,536 slots of 24 bytes, and the keys. */
        ASSERT_LE(pathcache_memory_bytes(c), max_bytes + 128);
}

/* Bounded by entries and by bytes (table and keys): the put past either
 * starts over from empty, and holds its own key. */
TEST(full_cache_starts_over) {
        _cleanup_pathcache_ pathcache *c = NULL;
        int64_t ids[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, id;

        ASSERT_OK(pathcache_new(4, 1 << 20, &c));
        for (int64_t i = 1; i <= 4; i++) {
                ids[0] = i;
                ASSERT_OK(pathcache_put(c, ids, 2, i));
        }
        ASSERT_EQ(pathcache_size(c), 4);
        ids[0] = 5;
        ASSERT_OK(pathcache_put(c, ids, 2, 5));
        ASSERT_EQ(pathcache_size(c), 1);
        ASSERT_TRUE(pathcache_get(c, ids, 2, &id));
        ASSERT_EQ(id, 5);
        ids[0] = 1;
        ASSERT_TRUE(!pathcache_get(c, ids, 2, &id));

        /* 96 KiB: a table of at most 1,024 slots (a quarter), and 9,216
         * ids of keys (the rest): 9 chains of 1,024 ids fit, the tenth
         * starts over. */
        pathcache_free(c);
        ASSERT_OK(pathcache_new(100, 4 * 1024 * 24, &c));
        int64_t *chain = calloc(9217, sizeof *chain);
        ASSERT_TRUE(chain != NULL);
        for (int64_t i = 1; i <= 9; i++) {
                chain[0] = i;
                ASSERT_OK(pathcache_put(c, chain, 1024, i));
        }
        ASSERT_EQ(pathcache_size(c), 9);
        ASSERT_LE(pathcache_memory_bytes(c), 4 * 1024 * 24 + 128);   /* and the struct */
        chain[0] = 10;
        ASSERT_OK(pathcache_put(c, chain, 1024, 10));
        ASSERT_EQ(pathcache_size(c), 1);
        ASSERT_TRUE(pathcache_get(c, chain, 1024, &id));
        ASSERT_EQ(id, 10);
        /* A key longer than all the room there is: refused, not cached,
         * the cache as it was. */
        ASSERT_ERROR(pathcache_put(c, chain, 9217, 1), E2BIG);
        ASSERT_TRUE(!pathcache_get(c, chain, 9217, &id));
        ASSERT_EQ(pathcache_size(c), 1);
        ASSERT_OK(pathcache_put(c, chain, 9216, 11));
        ASSERT_EQ(pathcache_size(c), 1);       /* the whole room: the cache started over */
        ASSERT_LE(pathcache_memory_bytes(c), 4 * 1024 * 24 + 128);   /* and the struct */
        free(chain);
        pathcache_free(c);

        /* Short chains fill the table before the keys: at most half of
         * the largest table the quarter holds (512 entries). */
        ASSERT_OK(pathcache_new(100000, 4 * 1024 * 24, &c));
        for (int64_t i = 1; i <= 512; i++)
                ASSERT_OK(pathcache_put(c, &i, 1, i));
        ASSERT_EQ(pathcache_size(c), 512);
        ASSERT_OK(pathcache_put(c, &(int64_t) { 513 }, 1, 513));
        ASSERT_EQ(pathcache_size(c), 1);
        ASSERT_LE(pathcache_memory_bytes(c), 4 * 1024 * 24 + 128);   /* and the struct */
}

TEST(bad_arguments) {
        pathcache *c = NULL;

        ASSERT_ERROR(pathcache_new(0, 64, &c), EINVAL);
        ASSERT_ERROR(pathcache_new(1, 0, &c), EINVAL);
        ASSERT_ERROR(pathcache_new(1, 4 * 1024 * 24 - 1, &c), EINVAL);   /* a quarter is less than the first table */
        ASSERT_ERROR(pathcache_new(1, 64, NULL), EINVAL);
        ASSERT_ERROR(pathcache_put(NULL, NULL, 0, 1), EINVAL);
        ASSERT_OK(pathcache_new(1, 4 * 1024 * 24, &c));
        ASSERT_OK(pathcache_put(c, (const int64_t[]) { 1 }, 1, 1));
        ASSERT_ERROR(pathcache_put(c, (const int64_t[]) { 1 }, 1, 0), EINVAL);
        c = pathcache_free(c);
        ASSERT_TRUE(!pathcache_get(NULL, NULL, 0, &(int64_t) { 0 }));
        ASSERT_TRUE(pathcache_free(NULL) == NULL);
}
