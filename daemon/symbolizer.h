/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The symbolizer: a sample's call chain -> the interned stack of the
 * frames it names, as perf's machine__resolve() does for a report. Kernel
 * addresses resolve against the kernel code layout at the sample's time
 * (kallsyms, module sections and symbols, dynamic symbols); user addresses
 * against the task table's mappings of the sampled process, as (file,
 * build-id, file offset) so the same code is the same frame in every
 * process. It owns the resolution caches; the store owns the dictionary
 * of frames and stacks. */

#include <stddef.h>
#include <stdint.h>

#include "kernel/layout.h"
#include "perf/perf-record.h"
#include "perf/tasks.h"
#include "store/store.h"

typedef struct symbolizer symbolizer;

typedef struct symbolizer_stats {
        uint64_t kernel_frames, user_frames, unresolved_kernel_frames, module_frames;
        uint64_t module_data_frames;    /* kernel frames in a module's data section (see layout_hit.data) */
        uint64_t invalid_user_frames;   /* user entries at kernel addresses, and those after them: dropped */
        uint64_t stack_cache_hits;      /* samples of two frames or more whose resolved frames were a stack seen before */
        uint64_t jit_frames;            /* user frames named from a JIT map (perf/jitmaps.h) */
        /* How the other user frames can be shown, counted as jit_frames
         * (for each sample): in a file with a build-id
         * (named by function where its table is kept), in a file without
         * one (FILE+0xOFFSET), elsewhere (anonymous memory, no mapping:
         * 0xADDR). */
        uint64_t user_frames_build_id, user_frames_no_build_id, user_frames_unknown;
} symbolizer_stats;

/* The collaborators must outlive the symbolizer. */
int symbolizer_new(store *st, layout *l, tasks *t, symbolizer **ret);
symbolizer *symbolizer_free(symbolizer *s);

/* The build-id kernel frames carry ("" or NULL: none). */
void symbolizer_set_kernel_build_id(symbolizer *s, const char *build_id);

/* Called (at most once per pass, see symbolizer_new_pass()) when a kernel
 * address resolves to nothing: a module may have been loaded and not yet
 * announced (its init runs before the add uevent). The handler may change
 * the layout; the address is then resolved again. */
typedef void (*symbolizer_miss_handler)(void *userdata);
void symbolizer_set_miss_handler(symbolizer *s, symbolizer_miss_handler cb, void *userdata);
/* Called the first time a sample lands in a mapped file with a build-id
 * (per file of the task table; again after UFILE_SEEN_MAX files), from
 * the draining loop: the handler queues the file's function table to be
 * kept (daemon/usymbols.h). pid: a process that maps it now. */
/* Returns false if it could not take the file (its queue is full): the
 * file is announced again at its next sample. */
typedef bool (*symbolizer_user_file_handler)(uint32_t pid, const char *path, const char *build_id, void *userdata);
void symbolizer_set_user_file_handler(symbolizer *s, symbolizer_user_file_handler cb, void *userdata);
/* JIT maps that name frames in anonymous executable memory (NULL: none);
 * owned by the caller. */
typedef struct jitmaps jitmaps;
void symbolizer_set_jitmaps(symbolizer *s, jitmaps *j);
/* A new drain pass: the miss handler may run again. */
void symbolizer_new_pass(symbolizer *s);

/* The leaf stack id of ps's call chain (0 for an empty one), interning
 * frames and stack nodes in the store's open batch; *ret_leaf_frame (if
 * not NULL): the frame of that node (0 for an empty chain), which the
 * store would otherwise look up. Call chain layout: PERF_CONTEXT_KERNEL,
 * kernel ips..., PERF_CONTEXT_USER, user ips..., leaf first; without
 * one, the sample ip and its cpumode decide. */
int symbolizer_stack(symbolizer *s, const perf_sample *ps, int64_t *ret_stack, int64_t *ret_leaf_frame);

/* The string id of a sample's comm, through a cache that the store's
 * generations and rolled-back batches clear as they do the frames'. */
int symbolizer_comm_id(symbolizer *s, const char *comm, int64_t *ret_id);

/* The store dropped ids (a rolled-back batch): forget every cached id. */
void symbolizer_forget_ids(symbolizer *s);

const symbolizer_stats *symbolizer_get_stats(const symbolizer *s);
/* Bytes held by the caches, and by the scratch buffers. */
size_t symbolizer_cache_bytes(const symbolizer *s);
size_t symbolizer_buffer_bytes(const symbolizer *s);
