/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Takes kcore snapshots (snapshot.h) on a thread of its own, so that
 * copying tens of MiB never delays draining the ring buffers: at
 * start-up, after module loads and unloads (once no module changed for
 * snapshot_delay, at most 10 × snapshot_delay after the first change),
 * and when a client asks. Each snapshot made or reused is recorded in the
 * store, journaled, and the samples taken while the kernel had its layout
 * are linked to it. Also prunes the cache to its limits after each
 * snapshot, and on request. */

#include <event2/event.h>
#include <stdint.h>

#include "config.h"
#include "ingest.h"
#include "server.h"
#include "tracker.h"
#include "wire/status-json.h"

struct json_object;
typedef struct snapshotter snapshotter;

/* Nothing is taken before snapshotter_start(). ret is NULL (and 0 is
 * returned) when cache_dir is empty: snapshots are off. */
int snapshotter_new(struct event_base *base, const config *c, store *st, ingest *in, tracker *t, server *srv,
                    snapshotter **ret);
/* Waits for a snapshot being taken to finish; requests not started are
 * dropped (their clients get no answer; the server frees them). */
snapshotter *snapshotter_free(snapshotter *s);

/* Cleans what an interrupted run left in CACHE/.tmp and takes the
 * start-up snapshot, covering samples from since_ns (wall) on. */
void snapshotter_start(snapshotter *s, uint64_t since_ns);

/* A module was added or removed at wall_ns (tracker_layout_cb). */
void snapshotter_layout_changed(uint64_t wall_ns, void *userdata);

/* Snapshot and CachePrune calls (server_async_cb). */
int snapshotter_call(server_call *call, const char *method, struct json_object *params, void *userdata);

/* Adds "current" for a CacheList call (server_status_cb). */
void snapshotter_cache_info(struct json_object *params, void *userdata);

/* Cache limits from a reloaded configuration. */
void snapshotter_reconfigure(snapshotter *s, const config *c);

/* Its part of the Status answer (snapshots_*, cache_dir); s may be NULL. */
void snapshotter_status(snapshotter *s, status_snapshots *ret);
