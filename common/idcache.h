/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* A bounded cache of (a, b) -> id (id > 0), for the symbolizer's hottest
 * lookups: a kernel frame by (address, layout epoch), a user frame by
 * (file, offset), a sample's comm. Each slot holds its key and value
 * together (24 bytes; 32 with a second value), so a probe reads one
 * place, where hashmap.h reads a slot's hash and then its entry: on the
 * ingest path these tables are cold after the workload ran, and each
 * place read is a cache miss. At
 * max_entries a put starts over from empty (the callers re-intern). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct idcache idcache;

int idcache_new(size_t max_entries, idcache **ret);
/* The same with a second value a slot (32 bytes): an id found by way of
 * the first, kept where the probe for the first reads anyway. */
int idcache_new_aux(size_t max_entries, idcache **ret);
idcache *idcache_free(idcache *c);
void idcache_clear(idcache *c);
size_t idcache_size(const idcache *c);
size_t idcache_memory_bytes(const idcache *c);

/* true and *ret_id if (a, b) is cached. */
bool idcache_get(const idcache *c, uint64_t a, uint64_t b, int64_t *ret_id);
/* And the second value (0 until set, and after a put replaced the id). */
bool idcache_get_aux(const idcache *c, uint64_t a, uint64_t b, int64_t *ret_id, int64_t *ret_aux);
/* Caches (a, b) -> id, replacing an older id; -EINVAL for id <= 0,
 * -ENOMEM if the table cannot grow (then (a, b) is not cached). */
int idcache_put(idcache *c, uint64_t a, uint64_t b, int64_t id);
/* Sets the second value of a cached (a, b): -ENOENT if it is not cached,
 * -EINVAL without idcache_new_aux(). */
int idcache_set_aux(idcache *c, uint64_t a, uint64_t b, int64_t aux);
