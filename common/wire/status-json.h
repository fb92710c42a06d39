/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The Status and Rescan answers (doc/protocol.md): the daemon gathers its
 * counters into the structs below (daemon.c, snapshotter.c, methods.c);
 * this file owns their JSON names and order. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;

typedef struct status_modules {
        uint64_t loaded, added, removed, uevents, ignored_uevents, spurious_removes, rescans;
        uint64_t layout_events, last_change_ns, max_change_ns;
        uint64_t module_frames, module_data_frames;
        uint64_t ksyms_live, ksyms_tracked, ksyms_registered, ksyms_unregistered, ksym_records, bpf_events;
        uint64_t ksym_duplicates, ksym_unknown_unregisters, ksym_rescans;
        uint64_t unresolved_kernel_frames;
} status_modules;

typedef struct status_snapshots {
        const char *cache_dir;          /* NULL: no cache; the other fields are left out */
        uint64_t created, reused, failures, pruned;
        bool pending;
        const char *current;            /* NULL: none */
        uint64_t last_duration_ns;
        int64_t last_attempts;
        int last_error;                 /* negative errno, 0: none */
        int kcore_error;                /* positive errno, 0: none */
        uint64_t linked_samples;
        uint64_t layout_generation;
} status_snapshots;

/* Function tables of user-space files (daemon/usymbols.h). */
typedef struct status_symbols {
        uint64_t files_seen, written, kept_already, no_symbols, failed, dropped, pruned;
        uint64_t tables, bytes, last_ns, max_ns;
        uint64_t debuginfod_found, debuginfod_missed;
        int last_error;                 /* negative errno, 0: none */
        const char *last_failed_what;   /* what failed then ("open", "read", "save") */
} status_symbols;

typedef struct status_uevents {
        uint64_t received, accepted, forged, malformed, overruns;
} status_uevents;

/* Profiles pushed to export_url. */
typedef struct status_push {
        const char *url;                /* without user information and query */
        uint64_t intervals, pushed, failed, dropped, queued, last_push_ns;
        const char *last_error;         /* "" if the last attempt worked */
} status_push;

typedef struct status_info {
        const char *version;
        int pid;
        uint64_t uptime_ns;
        unsigned cpus, frequency_hz;
        const char *event;
        /* ingest */
        uint64_t samples, lost;
        const uint64_t *lost_per_cpu;   /* cpus of them */
        uint64_t bad_records, ingest_cpu_ns, stack_cache_hits, invalid_user_frames, jit_frames, deferred_records;
        uint64_t rescued_records;
        uint64_t user_frames_build_id, user_frames_no_build_id, user_frames_unknown;
        bool ksymbol_records;
        /* attribution: "perf", "proc" or "none" (ingest_cgroup_source()) */
        const char *cgroup_source;
        uint64_t cgroups_known, cgroups_unknown;
        /* off-CPU time: "off", "on", or "unavailable: WHY" */
        const char *offcpu;
        const char *offcpu_program;                     /* the BPF program loaded; NULL: none */
        uint32_t offcpu_verified_insns;                 /* the instructions the verifier went through to accept it */
        const char *offcpu_clock;                       /* what times the waits: "sched" or "monotonic"; NULL: none */
        const char *offcpu_clock_why;                   /* why that one */
        uint64_t offcpu_waits, offcpu_wait_ns;          /* stored */
        uint64_t offcpu_switches, offcpu_short_waits;   /* seen in the kernel; waits under offcpu_min_wait */
        uint64_t offcpu_full_waits, offcpu_full_ns;     /* not stored: the kernel's table of sums was full */
        uint64_t offcpu_no_stack;                       /* not followed: no kernel stack */
        uint64_t offcpu_stacks_taken;                   /* waits whose stacks were taken (the rest reused their thread's) */
        uint64_t offcpu_stacks_at_end;                  /* long waits at a reused spot whose kernel stack was taken at their end */
        uint64_t offcpu_no_room;                        /* not followed: the kernel's table of waiting threads was full */
        uint64_t offcpu_no_time;                        /* not counted: no clock at the start, or one that went back */
        uint64_t offcpu_dropped_waits, offcpu_dropped_ns;       /* taken from the kernel when storing failed */
        uint64_t commits;
        /* storage */
        uint64_t pending_samples, bad_sample_blocks, dropped_samples;
        int dropped_error;              /* negative errno of the last drop, 0: none */
        uint64_t dropped_since_ns, database_max_size, cap_removed_samples, cap_removed_newest_ns;
        uint64_t held_samples, held_bytes, held_since_ns;
        int held_error;
        const char *db_path;
        /* kernel */
        const char *kernel_release, *kernel_build_id;
        uint64_t kernel_text_addr, kernel_symbols;
        unsigned clients;
        /* memory */
        uint64_t heap_bytes;
        int64_t sqlite_memory_bytes, sqlite_allocations;
        uint64_t ingest_buffer_bytes, ingest_cache_bytes, store_cache_bytes, tasks_bytes;

        const status_modules *modules;  /* NULL: no tracker */
        status_snapshots snapshots;
        const status_uevents *uevents;  /* NULL: no uevent monitor */
        const status_symbols *symbols;  /* NULL: none kept (no cache_dir) */
        const status_push *push;        /* NULL: export_url is not set */
} status_info;

/* Adds the fields to the reply parameters p. */
void status_json(const status_info *s, struct json_object *p);

/* What the database holds, added by the worker that reads it. */
typedef struct status_stored {
        uint64_t samples, lost, db_bytes, first_ns, last_ns;
} status_stored;

void status_stored_json(const status_stored *s, struct json_object *p);

/* Rescan: what a rescan of the modules and dynamic symbols changed. */
typedef struct status_rescan {
        unsigned added, removed, loaded;
        unsigned ksyms_registered, ksyms_unregistered, ksyms_live;
} status_rescan;

void status_rescan_json(const status_rescan *r, struct json_object *p);
