/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The varlink socket: accepts perfsnapctl connections, checks the caller
 * with SO_PEERCRED (root, or a member of the configured group), frames
 * NUL-terminated JSON calls, and answers them. Anything that reads the
 * database runs on a worker thread with its own read-only connection, so
 * a big query never delays draining the ring buffers. */

#include <event2/event.h>
#include <stdint.h>

#include "config.h"

struct json_object;
typedef struct server server;

/* Fills the live part of a Status reply (the loop's own counters). */
typedef void (*server_status_cb)(struct json_object *params, void *userdata);

/* Runs a rescan of the kernel modules for a Rescan call (root only) and
 * fills the reply; a negative errno becomes an error reply. */
typedef int (*server_rescan_cb)(struct json_object *reply, void *userdata);

/* A call the daemon answers later (Snapshot, CachePrune: root only).
 * The callback gets the call's parameters (may be NULL) and returns 0 if
 * it will answer with server_call_reply(), or a negative errno: -EINVAL
 * (bad parameters), -EOPNOTSUPP (snapshots off), -EBUSY. */
typedef struct server_call server_call;
typedef int (*server_async_cb)(server_call *call, const char *method, struct json_object *params, void *userdata);

/* Answers an async call with a formatted message (proto_format_reply()
 * or proto_format_error_message()); takes msg. Main thread only. */
void server_call_reply(server *s, server_call *call, char *msg);

int server_new(struct event_base *base, const config *c, server_status_cb status_cb, void *userdata, server **ret);
server *server_free(server *s);
void server_set_rescan_cb(server *s, server_rescan_cb cb);
/* Called on the loop before a call that reads what the daemon drains
 * (method.fresh) is queued, with server_new()'s userdata; samples: it
 * reads samples (METHOD_FRESH_SAMPLES), up to the last one drained. */
typedef void (*server_freshen_cb)(void *userdata, bool samples);
void server_set_freshen_cb(server *s, server_freshen_cb cb);
/* async_cb answers Snapshot and CachePrune; cache_cb adds the daemon's
 * side to a CacheList call ("current": the snapshot in use). */
void server_set_cache_cbs(server *s, server_async_cb async_cb, server_status_cb cache_cb, void *userdata);

/* Binds and listens; the socket gets mode 0660 and the configured group. */
int server_listen(server *s);

/* Applies reloadable settings (group, limits). */
int server_reconfigure(server *s, const config *c);

unsigned server_n_clients(const server *s);
