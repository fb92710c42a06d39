/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Shared by the two halves of the tracker: modules (tracker.c) and
 * dynamic symbols (tracker-ksyms.c). */

#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>

#include "tracker.h"

/* kallsyms text of a distribution kernel is ~6 MiB; see kallsyms.c. */
#define KALLSYMS_READ_MAX_BYTES (64u * 1024u * 1024u)

struct tracker {
        store *store;                   /* the journal */
        layout *layout;                 /* the layout samples resolve against */
        ingest *in;                     /* its boot, kernel, batch (commit after journaling) */
        char *root;
        struct event *syms_ev;          /* reads kallsyms for new modules, after journaling */
        struct event *ksym_rescan_ev;   /* rescans kallsyms' dynamic symbols after lost records */
        bool ksym_rescan_pending;
        uint64_t last_ksym_rescan_ns;   /* CLOCK_MONOTONIC */
        bool hidden_warned;
        /* proc/modules read before the events were enabled: a module Live
         * there ran its init before anything was sampled. */
        proc_module *before_sampling;
        size_t n_before_sampling;
        tracker_stats stats;
        tracker_layout_cb layout_cb;    /* a module was added or removed */
        void *layout_userdata;
};

uint64_t tracker_wall_from_mono(uint64_t mono);

/* Appends a journal entry with the complete layout after the change. */
int tracker_journal(tracker *t, const char *kind, int64_t module_id, int64_t ksym_id, const char *detail, uint64_t wall);

/* Makes a change durable at once unless a drain is running (its batch is
 * committed with the drain's). timed: count it in the latency stats. */
void tracker_changed(tracker *t, uint64_t started_mono, bool timed);

/* Adds the dynamic symbols of the kernel's start-up table to the layout
 * (continuing this boot's rows of an earlier run). */
void tracker_start_ksyms(tracker *t, uint64_t wall);

void tracker_on_ksym_rescan(evutil_socket_t fd, short what, void *userdata);
