/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* A bounded cache of a sequence of ids -> id (id > 0): the symbolizer's
 * resolved frame ids of a call chain -> its stack id. Each slot holds the
 * key's hash, its length, where its ids are and the value together (24
 * bytes), and the keys' ids lie in one array: a hit reads the slot and the
 * key, two places, where hashmap.h reads a slot's hash, its entry and the
 * key. The table takes at most a quarter of max_bytes and the keys the
 * rest, so the cache never holds more; at max_entries entries (or as many
 * as that table holds at most half full), or when the keys' room is full,
 * a put starts over from empty (the caller interns the chain again). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pathcache pathcache;

int pathcache_new(size_t max_entries, size_t max_bytes, pathcache **ret);
pathcache *pathcache_free(pathcache *c);
void pathcache_clear(pathcache *c);
size_t pathcache_size(const pathcache *c);
size_t pathcache_memory_bytes(const pathcache *c);

/* true and *ret_id if ids[0..n) is cached. */
bool pathcache_get(const pathcache *c, const int64_t *ids, size_t n, int64_t *ret_id);
/* Caches ids[0..n) -> id, replacing an older id. -EINVAL for id <= 0,
 * -E2BIG for a key longer than the keys' whole room, -ENOMEM if the table
 * cannot grow: then the key is not cached, and the cache is as before or
 * empty. */
int pathcache_put(pathcache *c, const int64_t *ids, size_t n, int64_t id);
