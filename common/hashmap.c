/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Open addressing with linear probing over a power-of-two table. Removal
 * shifts the entries after the hole back (backward-shift deletion), so
 * probing needs no tombstones: a lookup stops at the first empty slot. The full 64-bit hashes of the slots are an array
 * of their own: a probe walks 8 bytes a slot (eight to a cache line) and
 * reads a slot's key only when the hashes match, and a grow never rehashes
 * key bytes. Keys up to 16 bytes (integers and pairs) live in the slot;
 * longer keys are copied into an arena that is freed as a whole, or
 * rewritten with only the live keys once removed keys are most of it. */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "macro.h"

#define INLINE_KEY_MAX 16
#define INITIAL_CAPACITY 16
#define ARENA_CHUNK_BYTES (64 * 1024)

typedef struct entry {
        int64_t value;
        uint32_t key_len;
        union {
                uint8_t inline_key[INLINE_KEY_MAX];
                const uint8_t *key;
        };
} entry;

typedef struct arena_chunk {
        struct arena_chunk *next;
        size_t used, size;
        uint8_t data[];
} arena_chunk;

struct hashmap {
        uint64_t *hashes;       /* of each slot; 0 marks an empty slot (real hashes are never 0) */
        entry *entries;         /* valid where hashes[] is not 0 */
        size_t capacity;        /* 0 or a power of two */
        size_t size;
        arena_chunk *arena;     /* head is the chunk being filled */
        size_t arena_bytes;     /* its chunks' sizes: callers ask at every insert */
        size_t arena_dead;      /* bytes of removed keys still in the arena */
};

/* Odd 64-bit constants with well-spread bits, used as multipliers. */
#define K0 0x9e3779b97f4a7c15ULL
#define K1 0xc2b2ae3d27d4eb4fULL
#define K2 0x94d049bb133111ebULL

/* Multiply to 128 bits and fold: every input bit reaches the middle of the
 * product, and the xor of both halves brings them back to the low 64. */
static inline uint64_t fold_mul(uint64_t a, uint64_t b) {
        __uint128_t r = (__uint128_t) a * b;
        return (uint64_t) r ^ (uint64_t) (r >> 64);
}

/* Finalizer: alternating xor-shifts and multiplies so that every input bit
 * affects every output bit (the low bits index the table). */
static inline uint64_t mix64(uint64_t x) {
        x ^= x >> 31;
        x *= K2;
        x ^= x >> 29;
        x *= K0;
        x ^= x >> 32;
        return x;
}

static inline uint64_t load64(const uint8_t *p) {
        uint64_t v;
        memcpy(&v, p, sizeof(v));
        return v;
}

static inline uint64_t hash_u64(uint64_t v) {
        uint64_t h = mix64(fold_mul(v ^ K1, K2) ^ K0);
        return h != 0 ? h : 1;
}

/* What hash_bytes() makes of a 16-byte key (a, b), without its loop and
 * tail copy: the symbolizer looks up a (file, offset) pair per user frame. */
static inline uint64_t hash_pair(uint64_t a, uint64_t b) {
        uint64_t h = K0 ^ (16 * K1);

        h = fold_mul(a ^ K1 ^ h, b ^ K2);
        h = fold_mul(K1 ^ h, K2);
        h = mix64(h);
        return h != 0 ? h : 1;
}

static uint64_t hash_bytes(const void *key, size_t len) {
        const uint8_t *p = key;
        uint64_t h = K0 ^ ((uint64_t) len * K1);
        size_t n = len;

        /* Integer keys (pids, tids, ids): the task table looks one up per
         * user frame. */
        if (len == sizeof(uint64_t))
                return hash_u64(load64(p));
        if (len == 2 * sizeof(uint64_t))
                return hash_pair(load64(p), load64(p + 8));

        /* Long keys (whole call stacks): four independent lanes, so the
         * multiplies overlap instead of waiting on each other. Each lane
         * starts from a different seed, so moving data between lanes
         * changes the result. */
        if (n >= 64) {
                uint64_t a = h, b = h ^ K0, c = h ^ K1, d = h ^ K2;

                do {
                        a = fold_mul(load64(p) ^ K1 ^ a, load64(p + 8) ^ K2);
                        b = fold_mul(load64(p + 16) ^ K1 ^ b, load64(p + 24) ^ K2);
                        c = fold_mul(load64(p + 32) ^ K1 ^ c, load64(p + 40) ^ K2);
                        d = fold_mul(load64(p + 48) ^ K1 ^ d, load64(p + 56) ^ K2);
                        p += 64;
                        n -= 64;
                } while (n >= 64);

                h = fold_mul(a ^ K1, b ^ K2);
                h = fold_mul(h ^ c ^ K1, d ^ K2);
        }

        while (n >= 16) {
                h = fold_mul(load64(p) ^ K1 ^ h, load64(p + 8) ^ K2);
                p += 16;
                n -= 16;
        }

        /* Tail of 0..15 bytes, zero padded; the length already went into h,
         * so keys that differ only by trailing zero bytes still differ. */
        uint8_t tail[16] = {};
        memcpy(tail, p, n);
        h = fold_mul(load64(tail) ^ K1 ^ h, load64(tail + 8) ^ K2 ^ n);

        h = mix64(h);
        return h != 0 ? h : 1;
}

static inline const uint8_t *entry_key(const entry *e) {
        return e->key_len <= INLINE_KEY_MAX ? e->inline_key : e->key;
}

int hashmap_new(hashmap **ret) {
        hashmap *h;

        if (!ret)
                return -EINVAL;

        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;

        *ret = h;
        return 0;
}

static void arena_free(arena_chunk *c) {
        while (c) {
                arena_chunk *next = c->next;
                free(c);
                c = next;
        }
}

hashmap *hashmap_free(hashmap *h) {
        if (!h)
                return NULL;

        arena_free(h->arena);
        free(h->hashes);
        free(h->entries);
        free(h);
        return NULL;
}

void hashmap_clear(hashmap *h) {
        if (!h)
                return;

        arena_free(h->arena);
        h->arena = NULL;
        h->arena_bytes = 0;
        h->arena_dead = 0;
        /* Keep the table: a map that is cleared (e.g. a cache at its size
         * limit) is about to fill up to the same size again. */
        if (h->hashes)
                memset(h->hashes, 0, h->capacity * sizeof(uint64_t));
        h->size = 0;
}

size_t hashmap_size(const hashmap *h) {
        return h ? h->size : 0;
}

size_t hashmap_memory_bytes(const hashmap *h) {
        size_t n;

        if (!h)
                return 0;
        n = sizeof *h + h->capacity * (sizeof(uint64_t) + sizeof(entry));
        return n + h->arena_bytes;
}

static const uint8_t *arena_copy(hashmap *h, const void *key, size_t len) {
        arena_chunk *c = h->arena;

        if (!c || c->size - c->used < len) {
                size_t size = MAX((size_t) ARENA_CHUNK_BYTES, len);

                c = malloc(sizeof(arena_chunk) + size);
                if (!c)
                        return NULL;
                c->used = 0;
                c->size = size;
                c->next = h->arena;
                h->arena = c;
                h->arena_bytes += sizeof *c + c->size;
        }

        uint8_t *p = c->data + c->used;
        memcpy(p, key, len);
        c->used += len;
        return p;
}

/* Returns the slot holding key, or the empty slot where it would go. */
static size_t find_slot(const hashmap *h, uint64_t hash, const void *key, size_t len) {
        size_t mask = h->capacity - 1;

        for (size_t i = hash & mask;; i = (i + 1) & mask) {
                uint64_t x = h->hashes[i];

                if (x == 0)
                        return i;
                if (x == hash) {
                        const entry *e = h->entries + i;

                        if (e->key_len != len)
                                continue;
                        if (len == sizeof(uint64_t) ? load64(e->inline_key) == load64(key)
                                                    : memcmp(entry_key(e), key, len) == 0)
                                return i;
                }
        }
}

static int grow(hashmap *h) {
        size_t new_capacity;
        uint64_t *nh;
        entry *n;

        if (h->capacity == 0)
                new_capacity = INITIAL_CAPACITY;
        else if (__builtin_mul_overflow(h->capacity, (size_t) 2, &new_capacity) ||
                 new_capacity > SIZE_MAX / sizeof(entry))
                return -ENOMEM;

        nh = calloc(new_capacity, sizeof(uint64_t));
        n = malloc(new_capacity * sizeof(entry));
        if (!nh || !n) {
                free(nh);
                free(n);
                return -ENOMEM;
        }

        size_t mask = new_capacity - 1;
        for (size_t i = 0; i < h->capacity; i++) {
                uint64_t x = h->hashes[i];
                size_t j;

                if (x == 0)
                        continue;

                /* Keys are unique already: just find the first empty slot. */
                for (j = x & mask; nh[j] != 0; j = (j + 1) & mask)
                        ;
                nh[j] = x;
                n[j] = h->entries[i];
        }

        free(h->hashes);
        free(h->entries);
        h->hashes = nh;
        h->entries = n;
        h->capacity = new_capacity;
        return 0;
}

int hashmap_put(hashmap *h, const void *key, size_t key_len, int64_t value) {
        uint64_t hash;
        entry *e;
        size_t i;
        int r;

        if (!h || (!key && key_len > 0))
                return -EINVAL;
        if (key_len > UINT32_MAX)
                return -E2BIG;

        /* Grow before the load factor passes 70%: linear probing degrades
         * quickly beyond that. */
        if ((h->size + 1) * 10 > h->capacity * 7) {
                r = grow(h);
                if (r < 0)
                        return r;
        }

        hash = hash_bytes(key, key_len);
        i = find_slot(h, hash, key, key_len);
        e = h->entries + i;
        if (h->hashes[i] != 0) {
                e->value = value;
                return 0;
        }

        if (key_len <= INLINE_KEY_MAX) {
                memset(e->inline_key, 0, sizeof(e->inline_key));
                if (key_len > 0)
                        memcpy(e->inline_key, key, key_len);
        } else {
                const uint8_t *copy = arena_copy(h, key, key_len);
                if (!copy)
                        return -ENOMEM;
                e->key = copy;
        }

        h->hashes[i] = hash;
        e->key_len = (uint32_t) key_len;
        e->value = value;
        h->size++;
        return 0;
}

/* The slot of key, its value in *ret_value. */
static inline __attribute__((always_inline)) int lookup(const hashmap *h, const void *key, size_t key_len,
                                                      size_t *ret_slot, int64_t *ret_value) {
        size_t i;

        if (!h || (!key && key_len > 0))
                return -EINVAL;
        if (h->capacity == 0 || key_len > UINT32_MAX)
                return -ENOENT;

        i = find_slot(h, hash_bytes(key, key_len), key, key_len);
        if (h->hashes[i] == 0)
                return -ENOENT;

        if (ret_value)
                *ret_value = h->entries[i].value;
        *ret_slot = i;
        return 0;
}

int hashmap_get(const hashmap *h, const void *key, size_t key_len, int64_t *ret_value) {
        size_t i;
        return lookup(h, key, key_len, &i, ret_value);
}

int hashmap_put_u64(hashmap *h, uint64_t key, int64_t value) {
        return hashmap_put(h, &key, sizeof(key), value);
}

/* The probe of find_slot() for keys of one or two integers, all inline
 * (len is a constant at each call): the task table looks up a process,
 * and the symbolizer a (file, offset) pair, per user frame. */
static inline int get_inline(const hashmap *h, uint64_t hash, uint32_t len, uint64_t a, uint64_t b, int64_t *ret_value) {
        size_t mask;

        if (!h)
                return -EINVAL;
        if (h->capacity == 0)
                return -ENOENT;

        mask = h->capacity - 1;
        for (size_t i = hash & mask;; i = (i + 1) & mask) {
                uint64_t x = h->hashes[i];

                if (x == 0)
                        return -ENOENT;
                if (x == hash) {
                        const entry *e = h->entries + i;

                        if (e->key_len == len && load64(e->inline_key) == a &&
                            (len == sizeof(uint64_t) || load64(e->inline_key + 8) == b)) {
                                if (ret_value)
                                        *ret_value = e->value;
                                return 0;
                        }
                }
        }
}

int hashmap_get_u64(const hashmap *h, uint64_t key, int64_t *ret_value) {
        return get_inline(h, hash_u64(key), sizeof(key), key, 0, ret_value);
}

int hashmap_put_pair(hashmap *h, uint64_t a, uint64_t b, int64_t value) {
        uint64_t key[2] = { a, b };
        return hashmap_put(h, key, sizeof(key), value);
}

int hashmap_get_pair(const hashmap *h, uint64_t a, uint64_t b, int64_t *ret_value) {
        return get_inline(h, hash_pair(a, b), 2 * sizeof(uint64_t), a, b, ret_value);
}

/* Copies the live long keys into one chunk of their size and frees the
 * old chunks. Without memory for it, the arena stays as it is. */
static void arena_compact(hashmap *h) {
        size_t live = 0;
        arena_chunk *c;

        for (size_t i = 0; i < h->capacity; i++)
                if (h->hashes[i] != 0 && h->entries[i].key_len > INLINE_KEY_MAX)
                        live += h->entries[i].key_len;

        c = malloc(sizeof(arena_chunk) + MAX(live, (size_t) 1));
        if (!c)
                return;
        c->next = NULL;
        c->size = MAX(live, (size_t) 1);
        c->used = 0;
        for (size_t i = 0; i < h->capacity; i++) {
                entry *e = h->entries + i;

                if (h->hashes[i] == 0 || e->key_len <= INLINE_KEY_MAX)
                        continue;
                memcpy(c->data + c->used, e->key, e->key_len);
                e->key = c->data + c->used;
                c->used += e->key_len;
        }
        arena_free(h->arena);
        h->arena = c;
        h->arena_bytes = sizeof *c + c->size;
        h->arena_dead = 0;
}

int hashmap_remove(hashmap *h, const void *key, size_t key_len, int64_t *ret_value) {
        size_t i, j, mask;
        int r;

        r = lookup(h, key, key_len, &i, ret_value);
        if (r < 0)
                return r;
        if (key_len > INLINE_KEY_MAX)
                h->arena_dead += key_len;

        /* Move back each later entry of the run whose home slot is not
         * cyclically in (hole, its slot]: a lookup for it would otherwise
         * stop at the hole. */
        mask = h->capacity - 1;
        for (j = (i + 1) & mask; h->hashes[j] != 0; j = (j + 1) & mask) {
                size_t home = h->hashes[j] & mask;

                if (((j - home) & mask) >= ((j - i) & mask)) {
                        h->hashes[i] = h->hashes[j];
                        h->entries[i] = h->entries[j];
                        i = j;
                }
        }
        h->hashes[i] = 0;
        h->size--;

        if (h->arena_dead > ARENA_CHUNK_BYTES && h->arena_dead * 2 > h->arena_bytes)
                arena_compact(h);
        return 0;
}

int hashmap_remove_u64(hashmap *h, uint64_t key, int64_t *ret_value) {
        return hashmap_remove(h, &key, sizeof(key), ret_value);
}

bool hashmap_iterate(const hashmap *h, size_t *state, int64_t *ret_value) {
        if (!h || !state)
                return false;
        for (; *state < h->capacity; (*state)++)
                if (h->hashes[*state] != 0) {
                        if (ret_value)
                                *ret_value = h->entries[*state].value;
                        (*state)++;
                        return true;
                }
        return false;
}
