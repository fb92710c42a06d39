/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Pushes a pprof of each export_interval to export_url (perfsnapd.conf(5)):
 * a timer on the loop closes an interval; the pusher's own thread queries
 * the database on its own read-only connection, writes the profile into
 * CACHE/push (0700; files 0600, named by the interval), then POSTs the
 * queued profiles oldest first with libcurl (10 s to connect, 60 s in
 * all). A 2xx answer removes the file; anything else keeps it, and the
 * next attempt waits 5 s, then twice as long each time, up to 10 min.
 * Past export_queue_max files the oldest are dropped, and counted.
 * Sampling never waits for any of it. */

#include <event2/event.h>
#include <stdint.h>

#include "config.h"

typedef struct pusher pusher;

typedef struct pusher_stats {
        uint64_t intervals;             /* profiles made */
        uint64_t pushed;                /* sent and accepted (2xx) */
        uint64_t failed;                /* attempts that did not get a 2xx */
        uint64_t dropped;               /* queued profiles removed past export_queue_max */
        uint64_t queued;                /* waiting to be sent */
        uint64_t last_push_ns;          /* wall clock of the last accepted one, 0 if none */
        char last_error[160];           /* "" if the last attempt worked */
} pusher_stats;

/* NULL in *ret if export_url is empty, or cache_dir is (the queue lives
 * there). period_ns: the CPU time a sample stands for. */
int pusher_new(struct event_base *base, const config *cfg, uint64_t period_ns, pusher **ret);
/* cb is called on the loop before an interval is handed to the thread that
 * reads it (the daemon drains and commits). p may be NULL. */
void pusher_set_freshen(pusher *p, void (*cb)(void *userdata), void *userdata);
pusher *pusher_free(pusher *p);
void pusher_get_stats(pusher *p, pusher_stats *ret);

/* export_url without its user information and query: what status shows. */
void pusher_url_for_display(const char *url, char *buf, size_t size);
