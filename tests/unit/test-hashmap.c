/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hashmap.h"
#include "macro.h"
#include "test.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(hashmap *, hashmap_free);
#define _cleanup_hashmap_ _cleanup_(hashmap_freep)

TEST(put_get_replace_miss) {
        _cleanup_hashmap_ hashmap *h = NULL;
        int64_t v = 12345;

        ASSERT_OK(hashmap_new(&h));
        ASSERT_EQ(hashmap_size(h), 0);

        /* A lookup in a map that never had a table misses cleanly. */
        ASSERT_ERROR(hashmap_get(h, "a", 1, &v), ENOENT);
        ASSERT_EQ(v, 12345);

        ASSERT_OK(hashmap_put(h, "alpha", 5, 1));
        ASSERT_OK(hashmap_put(h, "beta", 4, 2));
        ASSERT_EQ(hashmap_size(h), 2);

        ASSERT_OK(hashmap_get(h, "alpha", 5, &v));
        ASSERT_EQ(v, 1);
        ASSERT_OK(hashmap_get(h, "beta", 4, &v));
        ASSERT_EQ(v, 2);

        /* Replacing keeps the size and changes the value. */
        ASSERT_OK(hashmap_put(h, "alpha", 5, -7));
        ASSERT_EQ(hashmap_size(h), 2);
        ASSERT_OK(hashmap_get(h, "alpha", 5, &v));
        ASSERT_EQ(v, -7);

        /* Misses: prefix, different length, different bytes. ret untouched. */
        v = 99;
        ASSERT_ERROR(hashmap_get(h, "alph", 4, &v), ENOENT);
        ASSERT_ERROR(hashmap_get(h, "alphaX", 6, &v), ENOENT);
        ASSERT_ERROR(hashmap_get(h, "gamma", 5, &v), ENOENT);
        ASSERT_EQ(v, 99);

        /* The empty key is a key like any other. */
        ASSERT_OK(hashmap_put(h, "", 0, 42));
        ASSERT_OK(hashmap_get(h, "", 0, &v));
        ASSERT_EQ(v, 42);
        ASSERT_EQ(hashmap_size(h), 3);

        /* NULL ret_value is allowed for a membership test. */
        ASSERT_OK(hashmap_get(h, "beta", 4, NULL));

        ASSERT_ERROR(hashmap_put(NULL, "x", 1, 1), EINVAL);
        ASSERT_ERROR(hashmap_put(h, NULL, 1, 1), EINVAL);
        ASSERT_NULL(hashmap_free(NULL));
}

TEST(keys_are_copied) {
        _cleanup_hashmap_ hashmap *h = NULL;
        char short_key[8], long_key[200];
        int64_t v;

        ASSERT_OK(hashmap_new(&h));

        /* Both the inline (short) and the arena (long) storage must copy. */
        memcpy(short_key, "short", 6);
        memset(long_key, 'L', sizeof(long_key));
        ASSERT_OK(hashmap_put(h, short_key, 5, 1));
        ASSERT_OK(hashmap_put(h, long_key, sizeof(long_key), 2));

        memset(short_key, 'x', sizeof(short_key));
        memset(long_key, 'y', sizeof(long_key));
        ASSERT_ERROR(hashmap_get(h, short_key, 5, NULL), ENOENT);
        ASSERT_ERROR(hashmap_get(h, long_key, sizeof(long_key), NULL), ENOENT);

        memcpy(short_key, "short", 6);
        memset(long_key, 'L', sizeof(long_key));
        ASSERT_OK(hashmap_get(h, short_key, 5, &v));
        ASSERT_EQ(v, 1);
        ASSERT_OK(hashmap_get(h, long_key, sizeof(long_key), &v));
        ASSERT_EQ(v, 2);
}

TEST(million_integer_keys) {
        _cleanup_hashmap_ hashmap *h = NULL;
        const uint64_t n = 1000000;
        int64_t v;

        ASSERT_OK(hashmap_new(&h));

        /* Sequential integers and kernel-address-like keys (high bits set,
         * low bits aligned): both are bad for a weak hash. */
        for (uint64_t i = 0; i < n; i++)
                ASSERT_OK(hashmap_put_u64(h, i, (int64_t) (i * 3)));
        for (uint64_t i = 0; i < n; i++)
                ASSERT_OK(hashmap_put_u64(h, 0xffffffff81000000ULL + i * 64, -(int64_t) i));
        ASSERT_EQ(hashmap_size(h), 2 * n);

        for (uint64_t i = 0; i < n; i++) {
                ASSERT_OK(hashmap_get_u64(h, i, &v));
                if (v != (int64_t) (i * 3))
                        ASSERT_EQ(v, (int64_t) (i * 3));
                ASSERT_OK(hashmap_get_u64(h, 0xffffffff81000000ULL + i * 64, &v));
                if (v != -(int64_t) i)
                        ASSERT_EQ(v, -(int64_t) i);
        }

        ASSERT_ERROR(hashmap_get_u64(h, n, NULL), ENOENT);
        ASSERT_ERROR(hashmap_get_u64(h, UINT64_MAX, NULL), ENOENT);
        ASSERT_ERROR(hashmap_get_u64(h, 0xffffffff81000000ULL + 1, NULL), ENOENT);
}

TEST(collisions_and_growth) {
        _cleanup_hashmap_ hashmap *h = NULL;
        uint8_t key[64];
        int64_t v;
        size_t n = 0;

        ASSERT_OK(hashmap_new(&h));

        /* Keys that differ only in length (all zero bytes, 0..64 long) and
         * keys that differ in a single bit: with the length mixed in and a
         * full finalizer these are all distinct, and with linear probing
         * in small tables many of them share a home slot. After every put
         * all earlier keys must still be found, across each grow. */
        memset(key, 0, sizeof(key));
        for (size_t len = 0; len <= sizeof(key); len++) {
                ASSERT_OK(hashmap_put(h, key, len, (int64_t) len));
                n++;
                for (size_t l = 0; l <= len; l++) {
                        ASSERT_OK(hashmap_get(h, key, l, &v));
                        ASSERT_EQ(v, (int64_t) l);
                }
        }
        for (size_t bit = 0; bit < sizeof(key) * 8; bit++) {
                memset(key, 0, sizeof(key));
                key[bit / 8] = (uint8_t) (1u << (bit % 8));
                ASSERT_OK(hashmap_put(h, key, sizeof(key), 1000 + (int64_t) bit));
                n++;
        }
        ASSERT_EQ(hashmap_size(h), n);

        for (size_t bit = 0; bit < sizeof(key) * 8; bit++) {
                memset(key, 0, sizeof(key));
                key[bit / 8] = (uint8_t) (1u << (bit % 8));
                ASSERT_OK(hashmap_get(h, key, sizeof(key), &v));
                ASSERT_EQ(v, 1000 + (int64_t) bit);
        }
        memset(key, 0, sizeof(key));
        for (size_t len = 0; len <= sizeof(key); len++) {
                ASSERT_OK(hashmap_get(h, key, len, &v));
                ASSERT_EQ(v, (int64_t) len);
        }
}

TEST(clear) {
        _cleanup_hashmap_ hashmap *h = NULL;
        char key[100];
        int64_t v;

        ASSERT_OK(hashmap_new(&h));
        hashmap_clear(h);       /* clearing an empty map is fine */

        memset(key, 'k', sizeof(key));
        for (int i = 0; i < 1000; i++) {
                key[0] = (char) (i & 0xff);
                key[1] = (char) (i >> 8);
                ASSERT_OK(hashmap_put(h, key, sizeof(key), i));
        }
        ASSERT_EQ(hashmap_size(h), 1000);
        /* 1000 keys of 100 bytes are in the arena: counted. */
        size_t full = hashmap_memory_bytes(h);
        ASSERT_GE(full, 1000 * sizeof(key));

        hashmap_clear(h);
        ASSERT_EQ(hashmap_size(h), 0);
        /* The table stays, the arena goes. */
        ASSERT_LE(hashmap_memory_bytes(h), full - 1000 * sizeof(key));
        key[0] = 5;
        key[1] = 0;
        ASSERT_ERROR(hashmap_get(h, key, sizeof(key), &v), ENOENT);

        /* The map is usable after a clear, with fresh values. */
        ASSERT_OK(hashmap_put(h, key, sizeof(key), 77));
        ASSERT_OK(hashmap_get(h, key, sizeof(key), &v));
        ASSERT_EQ(v, 77);
        ASSERT_EQ(hashmap_size(h), 1);
}

TEST(pair_keys) {
        _cleanup_hashmap_ hashmap *h = NULL;
        int64_t v;

        ASSERT_OK(hashmap_new(&h));

        /* (a, b) and (b, a) are different keys; so are (0, x) and (x, 0). */
        for (uint64_t a = 0; a < 300; a++)
                for (uint64_t b = 0; b < 300; b++)
                        ASSERT_OK(hashmap_put_pair(h, a, b, (int64_t) (a * 1000 + b)));
        ASSERT_EQ(hashmap_size(h), 300 * 300);

        for (uint64_t a = 0; a < 300; a++)
                for (uint64_t b = 0; b < 300; b++) {
                        ASSERT_OK(hashmap_get_pair(h, a, b, &v));
                        if (v != (int64_t) (a * 1000 + b))
                                ASSERT_EQ(v, (int64_t) (a * 1000 + b));
                }

        ASSERT_ERROR(hashmap_get_pair(h, 300, 0, NULL), ENOENT);
        ASSERT_ERROR(hashmap_get_pair(h, 0, 300, NULL), ENOENT);

        ASSERT_OK(hashmap_put_pair(h, 7, 9, -1));
        ASSERT_OK(hashmap_get_pair(h, 7, 9, &v));
        ASSERT_EQ(v, -1);
        ASSERT_OK(hashmap_get_pair(h, 9, 7, &v));
        ASSERT_EQ(v, 9007);
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_rand(void) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
}

/* Random puts and removes of a few hundred integer keys (dense runs of
 * colliding probes at a 70% load) against an array as the model: after
 * each step, every key the model has is found with its value and every
 * other key misses, so a wrong backward shift shows at once. */
TEST(remove_matches_a_model) {
        _cleanup_hashmap_ hashmap *h = NULL;
        enum { KEYS = 300 };
        int64_t model[KEYS], v;
        size_t n = 0;

        for (size_t k = 0; k < KEYS; k++)
                model[k] = -1;
        ASSERT_OK(hashmap_new(&h));
        for (int step = 0; step < 20000; step++) {
                size_t k = next_rand() % KEYS;

                if (next_rand() % 2) {
                        n += model[k] < 0;
                        model[k] = step;
                        ASSERT_OK(hashmap_put_u64(h, k * 0x100000000ULL, step));
                } else if (model[k] >= 0) {
                        ASSERT_OK(hashmap_remove_u64(h, k * 0x100000000ULL, &v));
                        ASSERT_EQ(v, model[k]);
                        model[k] = -1;
                        n--;
                } else
                        ASSERT_ERROR(hashmap_remove_u64(h, k * 0x100000000ULL, NULL), ENOENT);
                ASSERT_EQ(hashmap_size(h), n);
                if (step % 97 != 0)
                        continue;
                for (size_t j = 0; j < KEYS; j++) {
                        int r = hashmap_get_u64(h, j * 0x100000000ULL, &v);
                        if (model[j] >= 0) {
                                ASSERT_OK(r);
                                ASSERT_EQ(v, model[j]);
                        } else
                                ASSERT_ERROR(r, ENOENT);
                }
        }
}

TEST(iterate_visits_each_value_once) {
        _cleanup_hashmap_ hashmap *h = NULL;
        static bool seen[5000];
        size_t state = 0, count = 0;
        int64_t v;

        ASSERT_OK(hashmap_new(&h));
        ASSERT_TRUE(!hashmap_iterate(h, &state, &v));
        for (uint64_t k = 0; k < 5000; k++)
                ASSERT_OK(hashmap_put_u64(h, k, (int64_t) k));
        for (uint64_t k = 0; k < 5000; k += 2)
                ASSERT_OK(hashmap_remove_u64(h, k, NULL));
        while (hashmap_iterate(h, &state, &v)) {
                ASSERT_TRUE(v >= 0 && v < 5000 && v % 2 == 1);
                ASSERT_TRUE(!seen[v]);
                seen[v] = true;
                count++;
        }
        ASSERT_EQ(count, 2500);
}

/* Long keys live in the arena: removing them must not leave it growing
 * (a task table sees every process's paths come and go for months). */
TEST(long_keys_removed_do_not_accumulate) {
        _cleanup_hashmap_ hashmap *h = NULL;
        char key[200];
        size_t peak = 0;
        int64_t v;

        ASSERT_OK(hashmap_new(&h));
        for (int round = 0; round < 200; round++) {
                for (int i = 0; i < 100; i++) {
                        snprintf(key, sizeof key, "/usr/lib/x86_64-linux-gnu/some/long/path/libround%d-%d.so.1.2.3"
                                 "--padding-to-make-the-key-longer-than-sixteen-bytes", round, i);
                        ASSERT_OK(hashmap_put(h, key, strlen(key), round * 1000 + i));
                }
                /* The previous round goes away; this one stays readable. */
                for (int i = 0; round > 0 && i < 100; i++) {
                        snprintf(key, sizeof key, "/usr/lib/x86_64-linux-gnu/some/long/path/libround%d-%d.so.1.2.3"
                                 "--padding-to-make-the-key-longer-than-sixteen-bytes", round - 1, i);
                        ASSERT_OK(hashmap_remove(h, key, strlen(key), NULL));
                }
                for (int i = 0; i < 100; i++) {
                        snprintf(key, sizeof key, "/usr/lib/x86_64-linux-gnu/some/long/path/libround%d-%d.so.1.2.3"
                                 "--padding-to-make-the-key-longer-than-sixteen-bytes", round, i);
                        ASSERT_OK(hashmap_get(h, key, strlen(key), &v));
                        ASSERT_EQ(v, round * 1000 + i);
                }
                ASSERT_EQ(hashmap_size(h), 100);
                peak = MAX(peak, hashmap_memory_bytes(h));
        }
        /* 200 rounds wrote ~2.5 MB of keys; the live ones are ~13 KB. */
        fprintf(stderr, "peak %zu bytes\n", peak);
        ASSERT_LT(peak, (size_t) 300 * 1024);
}
