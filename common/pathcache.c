/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Linear probing over a power-of-two table at most half full; a hash of 0
 * marks an empty slot (real hashes are never 0). No removal: the cache is
 * only ever cleared whole, keys and all. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "pathcache.h"

#define INITIAL_CAPACITY 1024

typedef struct slot {
        uint64_t hash;
        int64_t id;
        uint32_t key;           /* index of the key's first id in keys[] */
        uint32_t len;           /* ids in the key */
} slot;

struct pathcache {
        slot *slots;
        size_t capacity;        /* 0 or a power of two, at most max_capacity */
        size_t max_capacity;    /* slots in at most a quarter of the bound */
        size_t size, max_entries;
        int64_t *keys;
        size_t n_keys, max_keys;        /* in ids: the rest of the bound */
        size_t keys_used;               /* the most n_keys ever was */
};

static uint64_t fold_mul(uint64_t a, uint64_t b) {
        __uint128_t r = (__uint128_t) a * b;
        return (uint64_t) r ^ (uint64_t) (r >> 64);
}

/* Two ids a step, each step's multiply taking the one before it; the
 * length first, so that a key and its prefix padded with zeros differ. */
static uint64_t key_hash(const int64_t *ids, size_t n) {
        uint64_t h = UINT64_C(0x9e3779b97f4a7c15) ^ ((uint64_t) n * UINT64_C(0xc2b2ae3d27d4eb4f));
        size_t i = 0;

        for (; i + 2 <= n; i += 2)
                h = fold_mul((uint64_t) ids[i] ^ UINT64_C(0xc2b2ae3d27d4eb4f) ^ h,
                             (uint64_t) ids[i + 1] ^ UINT64_C(0x94d049bb133111eb));
        if (i < n)
                h = fold_mul((uint64_t) ids[i] ^ UINT64_C(0xc2b2ae3d27d4eb4f) ^ h, UINT64_C(0x94d049bb133111eb));
        h ^= h >> 31;
        h *= UINT64_C(0x94d049bb133111eb);
        h ^= h >> 29;
        return h != 0 ? h : 1;
}

/* The slot holding the key, else the empty slot that ends its probe. */
static size_t probe(const pathcache *c, uint64_t h, const int64_t *ids, size_t n) {
        size_t mask = c->capacity - 1, i = h & mask;

        for (; c->slots[i].hash != 0; i = (i + 1) & mask)
                if (c->slots[i].hash == h && c->slots[i].len == n &&
                    (n == 0 || memcmp(c->keys + c->slots[i].key, ids, n * sizeof *ids) == 0))
                        break;
        return i;
}

int pathcache_new(size_t max_entries, size_t max_bytes, pathcache **ret) {
        pathcache *c;

        if (!ret || max_entries == 0 || max_bytes / 4 < INITIAL_CAPACITY * sizeof(slot) ||
            max_bytes / sizeof(int64_t) > UINT32_MAX)
                return -EINVAL;
        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        /* The table in a quarter of the bound at most, the keys in the
         * rest: together never more, however the chains' lengths mix
         * (a clear keeps both, so their high-water marks count). */
        c->max_capacity = INITIAL_CAPACITY;
        while (c->max_capacity * 2 * sizeof(slot) <= max_bytes / 4)
                c->max_capacity *= 2;
        c->max_entries = MIN(max_entries, c->max_capacity / 2);
        c->max_keys = (max_bytes - c->max_capacity * sizeof(slot)) / sizeof(int64_t);
        *ret = c;
        return 0;
}

pathcache *pathcache_free(pathcache *c) {
        if (c) {
                free(c->slots);
                free(c->keys);
                free(c);
        }
        return NULL;
}

void pathcache_clear(pathcache *c) {
        if (!c)
                return;
        /* The table and the keys' array stay: a cache that filled up fills
         * up again. */
        if (c->size > 0)
                memset(c->slots, 0, c->capacity * sizeof *c->slots);
        c->size = 0;
        c->n_keys = 0;
}

size_t pathcache_size(const pathcache *c) {
        return c ? c->size : 0;
}

size_t pathcache_memory_bytes(const pathcache *c) {
        /* The keys' array as far as it was ever filled: the rest is not
         * resident. */
        return c ? sizeof *c + c->capacity * sizeof(slot) + c->keys_used * sizeof(int64_t) : 0;
}

bool pathcache_get(const pathcache *c, const int64_t *ids, size_t n, int64_t *ret_id) {
        size_t i;

        if (!c || c->size == 0)
                return false;
        i = probe(c, key_hash(ids, n), ids, n);
        if (c->slots[i].hash == 0)
                return false;
        *ret_id = c->slots[i].id;
        return true;
}

static int grow(pathcache *c, size_t capacity) {
        slot *s = calloc(capacity, sizeof *s);

        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < c->capacity; i++) {
                size_t j;

                if (c->slots[i].hash == 0)
                        continue;
                for (j = c->slots[i].hash & (capacity - 1); s[j].hash != 0; j = (j + 1) & (capacity - 1))
                        ;
                s[j] = c->slots[i];
        }
        free(c->slots);
        c->slots = s;
        c->capacity = capacity;
        return 0;
}

int pathcache_put(pathcache *c, const int64_t *ids, size_t n, int64_t id) {
        uint64_t h;
        size_t i;
        int r;

        if (!c || id <= 0)
                return -EINVAL;
        if (n > c->max_keys)
                return -E2BIG;
        h = key_hash(ids, n);
        if (c->size > 0) {
                i = probe(c, h, ids, n);
                if (c->slots[i].hash != 0) {
                        c->slots[i].id = id;
                        return 0;
                }
        }
        if (c->size >= c->max_entries || n > c->max_keys - c->n_keys)
                pathcache_clear(c);
        /* size < max_entries <= max_capacity / 2: the table never needs
         * more than max_capacity. */
        if ((c->size + 1) * 2 > c->capacity) {
                r = grow(c, MAX(c->capacity * 2, (size_t) INITIAL_CAPACITY));
                if (r < 0)
                        return r;
        }
        if (!c->keys) {
                /* All the room at once (growing would copy what is
                 * there); its pages become resident as they are written. */
                c->keys = malloc(c->max_keys * sizeof *c->keys);
                if (!c->keys)
                        return -ENOMEM;
        }
        if (n > 0)
                memcpy(c->keys + c->n_keys, ids, n * sizeof *ids);
        i = probe(c, h, ids, n);
        c->slots[i] = (slot) { .hash = h, .id = id, .key = (uint32_t) c->n_keys, .len = (uint32_t) n };
        c->n_keys += n;
        c->keys_used = MAX(c->keys_used, c->n_keys);
        c->size++;
        return 0;
}
