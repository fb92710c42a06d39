/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* What a query asks and what it answers, independent of the wire format
 * (query-json.c) and of the storage (store.c); freed by query.c. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "store/sample-kind.h"

typedef struct query_params {
        uint64_t since_ns;      /* wall clock, inclusive; 0 = from the beginning */
        uint64_t until_ns;      /* wall clock, exclusive; 0 = until now */
        int64_t pid;            /* -1 = any */
        int32_t cpu;            /* -1 = any */
        const char *comm;       /* NULL = any; exact match */
        uint32_t top;           /* max rows; 0 = no limit (the server still caps it) */
        bool want_stacks;       /* also return whole stacks (folded output) */
        /* Which frames count: all; kernel frames only (a row is the
         * innermost kernel frame, stacks lose their user part); user
         * frames only (a row is the innermost user frame: kernel time
         * goes to the user code that entered the kernel). A sample
         * without such frames is a row "[unknown]". */
        enum { QUERY_FRAMES_ALL = 0, QUERY_FRAMES_KERNEL, QUERY_FRAMES_USER } frames;
        /* NULL = any; else only rows whose module is this one (its path,
         * the path's last component, or a kernel module's name without
         * brackets), and only stacks with a frame in it. Percentages stay
         * shares of all samples. */
        const char *dso;
        /* Also name the functions inlined where a user frame is (from the
         * DWARF of its file): a row's inlined chain, and frames of their
         * own in stacks. */
        bool inlined;
        /* Exports (perfsnapctl export). With want_stacks: stacks are also
         * told apart by pid and by CPU, and by the timeline slot their
         * sample block falls in; each stack says how many of its frames
         * (at the leaf end) are kernel frames, and, with want_modules, the
         * module of each frame (query_result.modules). timeline > 0 needs
         * since_ns and until_ns: the window is cut in that many slots of
         * equal width and the answer counts the samples of each (at the
         * resolution of the blocks read: a second for slots of less than
         * a minute, else a minute, or an hour for slots of an hour or
         * more). */
        bool by_pid, by_cpu, want_modules;
        /* With want_stacks and a timeline of at most 128 slots: stacks
         * told apart by process, thread and CPU (the thread of blocks of
         * seconds; else the process's id). */
        bool by_tid;
        uint32_t timeline;
        /* With want_stacks: frame names once, in the answer's names, and
         * each stack's frames as indices into them (a smaller answer for
         * many stacks; see doc/protocol.md). */
        bool packed;
        /* Named frames read "symbol+0x<offset in it>", in rows (one per
         * offset) and stacks. */
        bool offsets;
        /* With want_stacks (perfsnapctl export --format perf.data): each
         * stack's frames' addresses too (query_stack.addrs), and the
         * kernel's _text and build-id of the window's last boot; stacks of
         * other addresses in the same functions stay apart. */
        bool raw;
        /* With raw (perfsnapctl export --format perf.data): each distinct
         * stack once, as a shape (query_result.shapes: addresses, modules
         * and kernel frames, no names), and its samples per comm, process,
         * thread, CPU and slot as entries referring to it
         * (query_result.entries); no rows. "[other stacks]" stay stacks. */
        bool shapes;
        /* Attribution (cgroup.h). Filters, NULL = any: a unit (fnmatch
         * glob) the sample's cgroup is in or below, a cgroup path prefix
         * (whole components), a container id prefix (hex). Samples of no
         * known cgroup pass none of them. */
        const char *unit, *cgroup, *container;
        /* Rows, and stacks, told apart by cgroup, each with its path
         * (query_row.cgroup, query_stack.cgroup). */
        bool by_cgroup;
        /* Rows and stacks not told apart by command: all are "[unknown]"'s
         * (perfsnapctl units: a row per function and cgroup, not per
         * command too, a fraction of the rows over a day of churn). */
        bool no_comm;
        /* With by_cgroup and no stacks: also each cgroup's totals over all
         * rows (query_result.cgroup_totals; perfsnapctl units). */
        bool cgroup_totals;
        /* What is counted: CPU samples (SAMPLE_KIND_CPU), or off-CPU
         * waits (SAMPLE_KIND_OFFCPU), whose "samples" are then nanoseconds
         * of waiting: rows, stacks, totals and timelines weigh time. */
        uint32_t kind;
        /* Not on the wire: the cache directory whose function tables
         * (elf/symstore.h) name user frames; NULL: they stay unnamed. */
        const char *symbols_dir;
        /* Not on the wire: CLOCK_MONOTONIC time after which store_query()
         * stops with -ETIME (the daemon's query_timeout); 0: none. */
        uint64_t deadline_ns;
} query_params;

#define QUERY_PARAMS_INIT { .pid = -1, .cpu = -1 }
#define QUERY_DSO_MAX 4096
#define QUERY_TIMELINE_MAX 2000

/* One row of the report: samples whose leaf frame is (module, symbol) in comm. */
typedef struct query_row {
        char *comm;
        char *module;           /* "[kernel.kallsyms]", "[brd]", a user mapping path, or "[unknown]" */
        char *symbol;           /* symbol, "FILE+0x<offset>" for an unnamed user frame in a file, else "0x<addr>" */
        char *inlined;          /* NULL, or (query_params.inlined) the functions inlined there: "outer;inner" */
        bool kernel;            /* leaf frame is a kernel frame */
        uint64_t samples;
        char *cgroup;           /* with query_params.by_cgroup: the cgroup v2 path ("" if not known), else NULL */
} query_row;

/* A whole stack, for folded output: frames outermost caller first, leaf last. */
typedef struct query_stack {
        char *comm;
        char **frames;
        size_t n_frames;
        uint64_t samples;
        /* Frames at the leaf end that are kernel frames. */
        size_t n_kernel;
        /* With query_params.by_pid / by_cpu / timeline, else -1; tid with
         * by_tid (which gives pid and cpu too). */
        int64_t pid, tid;
        int32_t cpu;
        int32_t slot;
        /* With want_modules: per frame, an index in query_result.modules. */
        uint32_t *modules;
        /* With packed: per frame, an index in query_result.names. */
        uint32_t *name_ids;
        /* With query_params.by_cgroup: the cgroup v2 path ("" if not
         * known). */
        char *cgroup;
        /* With raw: per frame, a kernel frame's address as sampled, a user
         * frame's offset in its file (its module), or the address of one
         * in no file. */
        uint64_t *addrs;
        /* frames[] point into query_result.names (not freed with the stack). */
        bool borrowed;
} query_stack;

/* With query_params.shapes: samples of one shape (an index in
 * query_result.shapes) in one comm (an index in query_result.comms),
 * process, thread, CPU and timeline slot (-1: not told apart), and with
 * by_cgroup, cgroup (1 + an index in query_result.cgroups; 0: not known
 * or not told apart). */
typedef struct query_entry {
        uint32_t shape, comm;
        int64_t pid, tid;
        int32_t cpu, slot;
        uint32_t cgroup;
        uint64_t samples;
} query_entry;

/* The one frame of the stack that holds, per command (and timeline slot),
 * the samples of the stacks beyond the answer's cap. */
#define OTHER_STACKS "[other stacks]"

static inline bool query_stack_is_other(const query_stack *st) {
        return st->n_frames == 1 && strcmp(st->frames[0], OTHER_STACKS) == 0;
}

/* Whether a user frame's module is a mapped file's path, so that the
 * frame is an offset in it: not "//anon", "[vdso]", "[heap]" and the like. */
static inline bool module_is_file(const char *module) {
        return module && module[0] == '/' && module[1] != '/';
}

/* A module of the frames of stacks: its path or "[name]", and the
 * build-id of the file (hex), or NULL. */
typedef struct query_module {
        char *name;
        char *build_id;
        bool kernel;
} query_module;

/* A cgroup's samples over all rows of the answer (not only those shown):
 * those whose leaf is a kernel frame, and its row of most samples
 * (perfsnapctl units: a unit's totals, whatever the row cap). */
typedef struct query_cgroup_total {
        char *cgroup;           /* its cgroup v2 path; "" if not known */
        uint64_t samples, kernel;
        query_row top;          /* comm, module, symbol, kernel, samples; no cgroup */
} query_cgroup_total;

typedef struct query_result {
        uint64_t total_samples; /* all samples matching the filter, not only the rows shown */
        uint64_t first_ns, last_ns; /* time of first and last matching sample, 0 if none */
        uint32_t n_cpus;        /* distinct CPUs among matching samples */
        uint64_t lost;          /* PERF_RECORD_LOST counts in the window (for the CPU filter if set) */
        /* Samples of all rows (not only those shown) whose leaf is a user
         * frame: named (a function table's or a JIT map's name), by
         * offset in a file ("FILE+0x<offset>"), or unknown (an address
         * outside any file). */
        uint64_t user_named, user_by_offset, user_unknown;
        query_row *rows;        /* sorted by samples descending, then comm, module, symbol */
        size_t n_rows;
        query_stack *stacks;    /* only when want_stacks; sorted by samples descending */
        size_t n_stacks;
        query_module *modules;  /* only with want_modules */
        size_t n_modules;
        char **names;           /* only with packed: the stacks' frame names */
        size_t n_names;
        /* Only with raw: the kernel of the window's last boot (0 / NULL if
         * the window has no samples). */
        uint64_t kernel_text;
        char *kernel_build_id;
        /* Only with raw: the directory of the kcore snapshot of the
         * layout most of the window's samples in kernel modules (else most
         * of its samples) were taken in; NULL if none is linked (a window
         * read from minute or hour blocks has no links). */
        char *kcore_snapshot;
        /* Only with query_params.timeline: samples per slot of
         * timeline_slot_ns from timeline_start_ns (the window's start). */
        uint64_t *timeline;
        uint32_t n_timeline;
        uint64_t timeline_start_ns, timeline_slot_ns;
        /* Only with query_params.shapes: the distinct stacks (no frames'
         * names: frames is NULL; n_frames, n_kernel, addrs and modules
         * are set), the comms, and the entries that refer to them. */
        query_stack *shapes;
        size_t n_shapes;
        char **comms;
        size_t n_comms;
        char **cgroups;         /* with by_cgroup: the entries' cgroup paths */
        size_t n_cgroups;
        query_entry *entries;
        size_t n_entries;
        /* With cgroup_totals: the window's cgroups, most samples first, at
         * most the server's row cap of them. */
        struct query_cgroup_total *cgroup_totals;
        size_t n_cgroup_totals;
        uint32_t passes;        /* reads of the window the grouping took (store_query(); not on the wire) */
} query_result;

/* An entry as a stack: its shape's frames with the entry's comm, pid,
 * tid, cpu, slot and samples (pointers into r: not to be freed). */
static inline query_stack query_entry_stack(const query_result *r, const query_entry *e) {
        query_stack st = r->shapes[e->shape];

        st.comm = r->comms[e->comm];
        st.cgroup = e->cgroup > 0 ? r->cgroups[e->cgroup - 1] : NULL;
        st.pid = e->pid;
        st.tid = e->tid;
        st.cpu = e->cpu;
        st.slot = e->slot;
        st.samples = e->samples;
        st.borrowed = true;
        return st;
}

/* Frees the strings of rows[0..n) (not the array). */
void query_rows_free(query_row *rows, size_t n);
/* Frees what st holds (not st). */
void query_stack_done(query_stack *st);
/* Sets r's names to the distinct frame names of its stacks, and each
 * stack's name_ids (query_params.packed). 0, -ENOMEM. */
int query_result_pack(query_result *r);
/* Undoes it: the stacks' own frames again (for stacks that were packed
 * by query_result_pack(), not parsed from a reply). */
void query_result_unpack(query_result *r);
/* Frees r and all it holds; NULL-safe; returns NULL. */
query_result *query_result_free(query_result *r);
