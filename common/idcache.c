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

typedef struct slot {
        uint64_t a, b;
        int64_t id;
} slot;

struct idcache {
        slot *slots;
        size_t capacity;        /* 0 or a power of two */
        size_t size, max_entries;
};

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
static size_t probe(const idcache *c, uint64_t a, uint64_t b) {
        size_t i = slot_of(c, a, b);

        while (c->slots[i].id != 0 && (c->slots[i].a != a || c->slots[i].b != b))
                i = (i + 1) & (c->capacity - 1);
        return i;
}

int idcache_new(size_t max_entries, idcache **ret) {
        idcache *c;

        if (!ret || max_entries == 0 || max_entries > SIZE_MAX / (4 * sizeof(slot)))
                return -EINVAL;
        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        c->max_entries = max_entries;
        *ret = c;
        return 0;
}

idcache *idcache_free(idcache *c) {
        if (c) {
                free(c->slots);
                free(c);
        }
        return NULL;
}

void idcache_clear(idcache *c) {
        if (!c)
                return;
        /* The table stays: a cache that filled up fills up again. */
        if (c->size > 0)
                memset(c->slots, 0, c->capacity * sizeof *c->slots);
        c->size = 0;
}

size_t idcache_size(const idcache *c) {
        return c ? c->size : 0;
}

size_t idcache_memory_bytes(const idcache *c) {
        return c ? sizeof *c + c->capacity * sizeof(slot) : 0;
}

bool idcache_get(const idcache *c, uint64_t a, uint64_t b, int64_t *ret_id) {
        const slot *s;

        if (!c || c->size == 0)
                return false;
        s = c->slots + probe(c, a, b);
        if (s->id == 0)
                return false;
        *ret_id = s->id;
        return true;
}

static int grow(idcache *c) {
        size_t capacity = c->capacity ? 2 * c->capacity : INITIAL_CAPACITY;
        slot *old = c->slots, *n = calloc(capacity, sizeof *n);

        if (!n)
                return -ENOMEM;
        c->slots = n;
        SWAP(c->capacity, capacity);
        for (size_t i = 0; i < capacity; i++)
                if (old[i].id != 0)
                        n[probe(c, old[i].a, old[i].b)] = old[i];
        free(old);
        return 0;
}

int idcache_put(idcache *c, uint64_t a, uint64_t b, int64_t id) {
        size_t i;

        if (!c || id <= 0)
                return -EINVAL;
        if (c->size >= c->max_entries)
                idcache_clear(c);
        if ((c->size + 1) * 2 > c->capacity) {
                int r = grow(c);

                if (r < 0)
                        return r;
        }
        i = probe(c, a, b);
        if (c->slots[i].id == 0)
                c->size++;
        c->slots[i] = (slot) { .a = a, .b = b, .id = id };
        return 0;
}
