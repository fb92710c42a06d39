/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The tracker keeps the ingest path's layout in step with the kernel: it
 * reads a module's section map, build-id, ELF and symbols when the module
 * appears (add uevent, rescan of proc/modules, or a sample in an address
 * nothing covers), marks it unloaded when it goes; it registers and
 * unregisters dynamic symbols (BPF programs, trampolines, out-of-line
 * code) as PERF_RECORD_KSYMBOL records announce them; and it journals
 * every change with the complete layout after it. */

#include <event2/event.h>
#include <stdint.h>

#include "ingest.h"
#include "kernel/uevent.h"
#include "perf/perf-record.h"

typedef struct tracker tracker;

typedef struct tracker_stats {
        uint64_t module_uevents;        /* SUBSYSTEM=module add/remove handled */
        uint64_t ignored_uevents;       /* other subsystems/actions, or not a loadable module */
        uint64_t spurious_removes;      /* "remove" for a module still live in proc/modules (a synthetic uevent) */
        uint64_t rescans;
        uint64_t modules_added, modules_removed;
        uint64_t events;                /* journal entries written */
        uint64_t ksyms_registered, ksyms_unregistered;  /* by records and rescans */
        uint64_t ksym_records;          /* PERF_RECORD_KSYMBOL seen */
        uint64_t bpf_events;            /* PERF_RECORD_BPF_EVENT seen */
        uint64_t ksym_duplicates;       /* register of a symbol known already (start-up race) */
        uint64_t ksym_unknown_unregisters;      /* unregister of a symbol not registered */
        uint64_t ksym_rescans;
        uint64_t last_change_ns;        /* add/remove received -> journal committed, the last one */
        uint64_t max_change_ns;
} tracker_stats;

typedef struct tracker_rescan_result {
        unsigned added, removed, live;
        unsigned ksyms_added, ksyms_removed, ksyms_live;
} tracker_rescan_result;

/* st: the journal; l: the layout ingest resolves samples against; in: its
 * boot and kernel, and the batch the journal entries join. All must
 * outlive the tracker. */
int tracker_new(struct event_base *base, store *st, layout *l, ingest *in, const char *root, tracker **ret);
tracker *tracker_free(tracker *t);

/* Reads proc/modules before the perf events are enabled: the modules Live
 * then ran their init before anything was sampled, so their freed init
 * sections are nobody's for all samples (see layout_module). Optional; 0,
 * or a negative errno (the tracker then takes no module for one of those). */
int tracker_read_before_sampling(tracker *t);

/* Records the modules loaded now (continuing this boot's rows of an
 * earlier run of the daemon) and journals a "start" event. */
int tracker_start(tracker *t);

/* A kernel uevent (from uevent_monitor). */
void tracker_uevent(tracker *t, const uevent *ev);

/* Compares proc/modules with the layout and applies the difference. */
int tracker_rescan(tracker *t, const char *why, tracker_rescan_result *ret);

/* Compares the dynamic symbols of kallsyms with the layout and applies
 * the difference (costs a read of kallsyms, tens of ms). */
int tracker_rescan_ksyms(tracker *t, const char *why, tracker_rescan_result *ret);

/* A side-band record from the ingest path, in time order with the
 * samples: PERF_RECORD_KSYMBOL and PERF_RECORD_BPF_EVENT change the
 * layout; PERF_RECORD_LOST schedules a rescan of the dynamic symbols
 * (at most one a second), as lost records may have announced some. */
void tracker_perf_record(tracker *t, const perf_record *rec, int64_t mono_to_wall_ns);

const tracker_stats *tracker_get_stats(const tracker *t);

/* Called after a module add or remove is journaled (wall: its time). */
typedef void (*tracker_layout_cb)(uint64_t wall_ns, void *userdata);
void tracker_set_layout_cb(tracker *t, tracker_layout_cb cb, void *userdata);

/* Journals a kcore snapshot of the current layout ("snapshot-created" or
 * "snapshot-reused"), with the layout's records like every entry. */
int tracker_journal_snapshot(tracker *t, const char *kind, int64_t snapshot_id, const char *detail, uint64_t wall);
