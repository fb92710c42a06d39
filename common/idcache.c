/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Linear probing over a power-of-two table at most half full; an id of 0
 * marks an empty slot. No removal, so no tombstones: the cache is only
 * ever cleared whole. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "idcache.h"
#include "macro.h"

#define INITIAL_CAPACITY 64

/* A slot is (a, b, id) or, with a second value, (a, b, id, aux): words[]
 * holds `width` words a slot, so that a probe still reads one place. */
struct idcache {
        uint64_t *words;
        size_t width;           /* 3 or 4 */
        size_t capacity;        /* 0 or a power of two */
        size_t size, max_entries;
};

static inline uint64_t *slot_at(const idcache *c, size_t i) {
        return c->words + i * c->width;
}

static inline size_t slot_of(const idcache *c, uint64_t a, uint64_t b) {
        /* Multiply-xorshift: addresses are aligned and epochs small, so
         * every input bit must reach the low bits that index the table. */
        uint64_t h = (a ^ (b * UINT64_C(0x9e3779b97f4a7c15))) * UINT64_C(0xbf58476d1ce4e5b9);

        h ^= h >> 31;
        h *= UINT64_C(0x94d049bb133111eb);
        h ^= h >> 29;
        return (size_t) h & (c->capacity - 1);
}

/* The slot holding (a, b), else the empty slot that ends its probe. */
static uint64_t *probe(const idcache *c, uint64_t a, uint64_t b) {
        size_t i = slot_of(c, a, b);
        uint64_t *s;

        while ((s = slot_at(c, i))[2] != 0 && (s[0] != a || s[1] != b))
                i = (i + 1) & (c->capacity - 1);
        return s;
}

static int cache_new(size_t max_entries, size_t width, idcache **ret) {
        idcache *c;

        if (!ret || max_entries == 0 || max_entries > SIZE_MAX / (4 * width * sizeof(uint64_t)))
                return -EINVAL;
        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        c->width = width;
        c->max_entries = max_entries;
        *ret = c;
        return 0;
}

int idcache_new(size_t max_entries, idcache **ret) {
        return cache_new(max_entries, 3, ret);
}

int idcache_new_aux(size_t max_entries, idcache **ret) {
        return cache_new(max_entries, 4, ret);
}

idcache *idcache_free(idcache *c) {
        if (c) {
                free(c->words);
                free(c);
        }
        return NULL;
}

void idcache_clear(idcache *c) {
        if (!c)
                return;
        /* The table stays: a cache that filled up fills up again. */
        if (c->size > 0)
                memset(c->words, 0, c->capacity * c->width * sizeof *c->words);
        c->size = 0;
}

size_t idcache_size(const idcache *c) {
        return c ? c->size : 0;
}

size_t idcache_memory_bytes(const idcache *c) {
        return c ? sizeof *c + c->capacity * c->width * sizeof *c->words : 0;
}

bool idcache_get_aux(const idcache *c, uint64_t a, uint64_t b, int64_t *ret_id, int64_t *ret_aux) {
        const uint64_t *s;

        if (!c || c->size == 0)
                return false;
        s = probe(c, a, b);
        if (s[2] == 0)
                return false;
        *ret_id = (int64_t) s[2];
        if (ret_aux)
                *ret_aux = c->width > 3 ? (int64_t) s[3] : 0;
        return true;
}

bool idcache_get(const idcache *c, uint64_t a, uint64_t b, int64_t *ret_id) {
        return idcache_get_aux(c, a, b, ret_id, NULL);
}

static int grow(idcache *c) {
        size_t capacity = c->capacity ? 2 * c->capacity : INITIAL_CAPACITY;
        uint64_t *old = c->words, *n = calloc(capacity, c->width * sizeof *n);

        if (!n)
                return -ENOMEM;
        c->words = n;
        SWAP(c->capacity, capacity);
        for (size_t i = 0; i < capacity; i++) {
                const uint64_t *o = old + i * c->width;

                if (o[2] != 0)
                        memcpy(probe(c, o[0], o[1]), o, c->width * sizeof *o);
        }
        free(old);
        return 0;
}

int idcache_put(idcache *c, uint64_t a, uint64_t b, int64_t id) {
        uint64_t *s;

        if (!c || id <= 0)
                return -EINVAL;
        if (c->size >= c->max_entries)
                idcache_clear(c);
        if ((c->size + 1) * 2 > c->capacity) {
                int r = grow(c);

                if (r < 0)
                        return r;
        }
        s = probe(c, a, b);
        if (s[2] == 0)
                c->size++;
        s[0] = a;
        s[1] = b;
        s[2] = (uint64_t) id;
        if (c->width > 3)
                s[3] = 0;
        return 0;
}

int idcache_set_aux(idcache *c, uint64_t a, uint64_t b, int64_t aux) {
        uint64_t *s;

        if (!c || c->width < 4)
                return -EINVAL;
        if (c->size == 0)
                return -ENOENT;
        s = probe(c, a, b);
        if (s[2] == 0)
                return -ENOENT;
        s[3] = (uint64_t) aux;
        return 0;
}
