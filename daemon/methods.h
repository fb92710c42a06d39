/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The method table: every varlink method the daemon answers, who may call
 * it, which thread answers it, and the handlers that run on the worker
 * threads. server.c looks a call up here and dispatches by the entry; it
 * keeps the sockets, credentials and framing. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/store.h"

struct json_object;

typedef enum method_thread {
        METHOD_QUERY_THREAD,    /* the worker with the read-only connection for queries */
        METHOD_STATUS_THREAD,   /* its own worker and connection: never waits behind a query */
        METHOD_LOOP,            /* answered on the main loop by the daemon's rescan callback */
        METHOD_LOOP_LATER,      /* taken by the daemon's async callback, answered when done */
} method_thread;

/* What the server hands the loop before queueing the call: the daemon's
 * live counters (Status) or its side of the cache (CacheList). */
typedef enum method_fill {
        METHOD_FILL_NONE,       /* the job's parameters are the call's */
        METHOD_FILL_STATUS,     /* server_status_cb */
        METHOD_FILL_CACHE,      /* the cache callback */
} method_fill;

/* What the loop does before queueing the call (server_set_freshen_cb()). */
typedef enum method_fresh {
        METHOD_FRESH_NO,        /* nothing */
        METHOD_FRESH_DRAIN,     /* reads what drains record (the journal, ksyms): drains and commits */
        METHOD_FRESH_SAMPLES,   /* reads samples: drains, writes the open bucket, commits */
} method_fresh;

/* A call on a worker thread. */
typedef struct method_job {
        struct json_object *params;     /* the call's parameters (may be NULL), or what the fill made */
        uint32_t max_rows, max_stacks;  /* limits as configured when the call came */
        uint64_t query_timeout_ns;      /* 0: none */
        bool more;                      /* the caller accepts an answer split over replies */
        store *store;                   /* the thread's read-only connection; NULL if it failed: */
        int store_error;                /*   the negative errno */
        const char *db_path, *cache_dir;
        /* Set by the handler: its transient heap goes back to the system
         * (malloc_trim()) unless another call waits for the thread. */
        bool trim;
} method_job;

typedef struct method {
        const char *name;               /* PERFSNAP_METHOD_* */
        bool root_only;                 /* mutating: root only, whatever the group */
        const char *denied;             /* root only: "only root may <denied>" */
        method_thread thread;
        method_fill fill;
        /* Worker threads: a NULL-terminated array of formatted replies,
         * NULL when out of memory. */
        char **(*run)(method_job *j);
        method_fresh fresh;
} method;

/* The entry of a method name; NULL if there is none. */
const method *method_lookup(const char *name);
/* The whole table, for tests and documentation. */
const method *method_table(size_t *ret_n);

/* Whether uid may call m. Group membership is checked once, at accept;
 * this is the per-method rule on top. */
bool method_allowed(const method *m, uid_t uid);

/* One formatted message as a NULL-terminated array (takes msg; NULL when
 * msg is NULL or out of memory). */
char **method_single_reply(char *msg);
