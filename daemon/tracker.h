/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The module tracker keeps the ingest path's layout in step with the
 * kernel: it reads a module's section map, build-id, ELF and symbols when
 * the module appears (add uevent, rescan of proc/modules, or a sample in
 * an address nothing covers), marks it unloaded when it goes, and
 * journals every change with the complete layout after it. */

#include <event2/event.h>
#include <stdint.h>

#include "ingest.h"
#include "uevent.h"

typedef struct tracker tracker;

typedef struct tracker_stats {
        uint64_t module_uevents;        /* SUBSYSTEM=module add/remove handled */
        uint64_t ignored_uevents;       /* other subsystems/actions, or not a loadable module */
        uint64_t spurious_removes;      /* "remove" for a module still live in proc/modules (a synthetic uevent) */
        uint64_t rescans;
        uint64_t modules_added, modules_removed;
        uint64_t events;                /* journal entries written */
        uint64_t last_change_ns;        /* add/remove received -> journal committed, the last one */
        uint64_t max_change_ns;
} tracker_stats;

typedef struct tracker_rescan_result {
        unsigned added, removed, live;
} tracker_rescan_result;

int tracker_new(struct event_base *base, ingest *in, const char *root, tracker **ret);
tracker *tracker_free(tracker *t);

/* Records the modules loaded now (continuing this boot's rows of an
 * earlier run of the daemon) and journals a "start" event. */
int tracker_start(tracker *t);

/* A kernel uevent (from uevent_monitor). */
void tracker_uevent(tracker *t, const uevent *ev);

/* Compares proc/modules with the layout and applies the difference. */
int tracker_rescan(tracker *t, const char *why, tracker_rescan_result *ret);

const tracker_stats *tracker_get_stats(const tracker *t);
