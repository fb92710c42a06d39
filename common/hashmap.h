/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Open-addressing hash maps: the ingest path's interning caches and the
 * task table's processes, threads and files. Keys are byte strings
 * (copied into the map) or 64-bit integers; values are int64_t (a pointer
 * fits: see HASHMAP_PTR()). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hashmap hashmap;

int hashmap_new(hashmap **ret);
hashmap *hashmap_free(hashmap *h);
void hashmap_clear(hashmap *h);
size_t hashmap_size(const hashmap *h);
/* Bytes allocated for the table and the copies of long keys. */
size_t hashmap_memory_bytes(const hashmap *h);

/* Byte-string keys. put replaces an existing value. get: 0 or -ENOENT. */
int hashmap_put(hashmap *h, const void *key, size_t key_len, int64_t value);
int hashmap_get(const hashmap *h, const void *key, size_t key_len, int64_t *ret_value);

/* Integer keys (a separate key space from byte strings of the same map
 * is not guaranteed: use one kind of key per map). */
int hashmap_put_u64(hashmap *h, uint64_t key, int64_t value);
int hashmap_get_u64(const hashmap *h, uint64_t key, int64_t *ret_value);

/* Two-integer keys, e.g. (parent stack, frame). */
int hashmap_put_pair(hashmap *h, uint64_t a, uint64_t b, int64_t value);
int hashmap_get_pair(const hashmap *h, uint64_t a, uint64_t b, int64_t *ret_value);

/* Removes key; its value in *ret_value. 0 or -ENOENT. */
int hashmap_remove(hashmap *h, const void *key, size_t key_len, int64_t *ret_value);
int hashmap_remove_u64(hashmap *h, uint64_t key, int64_t *ret_value);

/* Visits every value once, in no order: start with *state = 0; false at
 * the end. The map must not change in between. */
bool hashmap_iterate(const hashmap *h, size_t *state, int64_t *ret_value);

/* Pointers as values and back. */
#define HASHMAP_PTR(p) ((int64_t) (intptr_t) (p))
#define HASHMAP_TO_PTR(v) ((void *) (intptr_t) (v))
