/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The kcore snapshot cache as the CacheList, Snapshot and CachePrune
 * methods answer it (doc/protocol.md). The daemon gathers the facts
 * (kernel/snapshot.h: what is in the cache, what a take did; the store:
 * ids and reuse counts); this file owns their JSON. 0 or -ENOMEM. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel/snapshot.h"

struct json_object;

/* One snapshot in the cache with what the database knows of it. */
typedef struct cache_entry {
        const snapshot_info *info;
        int64_t id;             /* its row; 0: none */
        uint64_t reuses;
        bool current;           /* the snapshot of the layout in use */
} cache_entry;

/* CacheList: {"cache_dir", "snapshots": [...]}. */
int cache_list_json(const char *cache_dir, const cache_entry *v, size_t n, struct json_object **ret);

/* Snapshots a prune removed: [{"path", "size"}]. */
struct json_object *cache_removed_json(const snapshot_info *removed, size_t n);

/* Snapshot: what the take did, and what the prune after it removed. */
typedef struct cache_take {
        const snapshot_take_result *take;
        int64_t id;
        uint64_t reuses;
        uint64_t duration_ns;
        const snapshot_info *removed;
        size_t n_removed;
} cache_take;

int cache_take_json(const char *cache_dir, const cache_take *t, struct json_object **ret);

/* CachePrune: {"cache_dir", "removed", "remaining", "remaining_size"}. */
int cache_prune_json(const char *cache_dir, const snapshot_info *removed, size_t n_removed, size_t n_left,
                     uint64_t size_left, struct json_object **ret);
