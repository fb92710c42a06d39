/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The sample writer and reader of the store (store-samples.c); for the
 * store's own files, not for its users. */

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/sample-block.h"
#include "store/store.h"

/* Level 0 period: samples are counted per bucket of this width. */
#define STORE_BUCKET_NS NSEC_PER_SEC

/* Level 0: buckets with every attribute. Levels 1 and 2: minutes and
 * hours of every attribute but the thread and the snapshot link. Levels 3
 * and 4: minutes and hours of (cpu, comm, leaf frame) only, for the
 * profile most queries ask for. Levels 5 and 6: minutes and hours of
 * (cpu, pid, comm, cgroup, leaf frame), for the profiles of a process or
 * a unit. Level 7: hours of (cpu, comm, cgroup, leaf frame), for the
 * profiles of units and cgroups, built from the written process minutes
 * once an hour is over (sample_writer_build_step()). */
enum {
        SAMPLE_LEVEL_BUCKET,
        SAMPLE_LEVEL_MINUTE,
        SAMPLE_LEVEL_HOUR,
        SAMPLE_LEVEL_LEAF_MINUTE,
        SAMPLE_LEVEL_LEAF_HOUR,
        SAMPLE_LEVEL_PROC_MINUTE,
        SAMPLE_LEVEL_PROC_HOUR,
        SAMPLE_LEVEL_CGROUP_HOUR,
        SAMPLE_LEVELS,
};

uint64_t sample_level_width(unsigned level);

/* SAMPLE_PID_BRIEF (sample-block.h): the pid of folded processes. Pids
 * are below SAMPLE_PID_LIMIT (the kernel's PID_MAX_LIMIT); those at or
 * above it are never folded. */
#define SAMPLE_PID_LIMIT (UINT32_C(1) << 22)

/* sample_meta: the totals status reads, and the aggregation state. */
typedef struct sample_counters {
        uint64_t samples;               /* in level-0 blocks */
        uint64_t first_ns, last_ns;
        uint64_t complete[SAMPLE_LEVELS];       /* [k]: level k is complete for periods ending at or before */
        int64_t fed[SAMPLE_LEVELS];     /* [k]: last source block id in a written level k block */
        uint64_t gen;                   /* the dictionary generation new stacks get */
        uint64_t gen_start_ns;          /* sample time it began at */
        /* The generation new frames get: the stack generation it began
         * with. It outlives stack generations, so that the leaf levels'
         * frame ids stay the same while the stacks turn over. */
        uint64_t frame_gen;
        uint64_t frame_gen_start_ns;
        uint64_t trimmed_ns;            /* the size cap deleted blocks ending up to here */
} sample_counters;

int sample_meta_read(sqlite3 *db, sample_counters *ret);

typedef struct sample_writer sample_writer;

int sample_writer_new(store *s, sample_writer **ret);
sample_writer *sample_writer_free(sample_writer *w);
/* Reads the counters and the open periods back from the database; the
 * samples the writer held (of a batch rolled back) count as dropped,
 * because of cause (a negative errno). */
int sample_writer_reload(sample_writer *w, int cause);

/* Inside a transaction of the store. */
int sample_writer_add(sample_writer *w, const stored_sample *smp);
/* Writes the periods of every level that end at or before before_ns
 * (UINT64_MAX: all, closing the open minute and hour too; after a restart
 * within them their later samples go in as extra blocks). */
int sample_writer_flush(sample_writer *w, uint64_t before_ns);
/* Writes the open bucket so far (it stays open). */
int sample_writer_flush_partial(sample_writer *w);
int sample_writer_before_commit(sample_writer *w);
void sample_writer_committed(sample_writer *w);

/* Stacks and frames are interned per generation (stack_blocks.gen,
 * frame_blocks.gen); a block names the oldest stack generation its entries
 * use (gen_min). A frame generation spans one or more stack generations
 * and is named by the first. When no block names a generation any more,
 * its dictionary rows are deleted (sample_writer_collect()): stack rows of
 * generations before the oldest named, frame rows of frame generations
 * before the one that holds it. new_frames: frames start afresh too. */
int sample_writer_new_generation(sample_writer *w, uint64_t time_ns, bool new_frames);
uint64_t sample_writer_generation(const sample_writer *w, uint64_t *ret_start_ns);
uint64_t sample_writer_frame_generation(const sample_writer *w, uint64_t *ret_start_ns);
/* Deletes at most max_blocks stack and frame blocks of generations no
 * sample block or open period uses; *ret_blocks: how many. */
int sample_writer_collect(sample_writer *w, size_t max_blocks, uint64_t *ret_blocks);

/* Builds a part of the next hour of the levels made from written blocks
 * (level 7), if one is over; *ret_more: another step has work. */
int sample_writer_build_step(sample_writer *w, bool *ret_more);

uint64_t sample_writer_pending(const sample_writer *w);
/* Samples in blocks written since the last commit. */
uint64_t sample_writer_uncommitted(const sample_writer *w);
const sample_counters *sample_writer_counters(const sample_writer *w);
/* Samples of batches that failed to commit, the last error, and since when. */
uint64_t sample_writer_dropped(const sample_writer *w, int *ret_error, uint64_t *ret_since_ns);
size_t sample_writer_memory_bytes(const sample_writer *w);
/* Blocks the writer skipped when reading the open periods back. */
uint64_t sample_writer_bad_blocks(const sample_writer *w);
uint64_t sample_writer_link_snapshot(sample_writer *w, int64_t boot_id, int64_t snapshot_id, uint64_t from_ns,
                                     uint64_t until_ns);

/* Reading: calls cb for every entry of every block a window needs, using
 * the coarsest complete level for each part of it, from `top` down to
 * the finer levels it is read from where it lacks a period (hours, their
 * minutes, the buckets; SAMPLE_LEVEL_HOUR: every attribute but the
 * thread; SAMPLE_LEVEL_LEAF_HOUR: cpu, comm and leaf frame only;
 * SAMPLE_LEVEL_PROC_HOUR: those, the pid and the cgroup;
 * SAMPLE_LEVEL_CGROUP_HOUR: those but the pid (not with pid >= 0); 0: the
 * buckets). A block counts if its period overlaps [since_ns, until_ns)
 * (until_ns 0: no end). With pid >= 0, only the entries of that pid
 * count to the caller, and blocks of process hours without them may be
 * left out: such an hour that folded brief processes is read from its
 * minutes for a pid it does not hold, and without a pid. */
typedef struct scan_block {
        unsigned level;
        int64_t boot_id;
        uint64_t start_ns, end_ns, first_ns, last_ns;
} scan_block;
typedef int (*sample_scan_cb)(const scan_block *b, const block_entry *v, size_t n, void *userdata);

int sample_scan(store *s, uint64_t since_ns, uint64_t until_ns, unsigned top, int64_t pid, sample_scan_cb cb,
                void *userdata);
/* The same, the entries' columns in `need` only (SAMPLE_NEED_*,
 * sample-block.h); the others read 0. */
int sample_scan_some(store *s, uint64_t since_ns, uint64_t until_ns, unsigned top, int64_t pid, unsigned need,
                     sample_scan_cb cb, void *userdata);

int store_migrate_4_to_5(sqlite3 *db);
int store_migrate_5_to_6(sqlite3 *db);
int store_migrate_7_to_8(sqlite3 *db);
int store_migrate_8_to_9(sqlite3 *db);
int store_migrate_9_to_10(sqlite3 *db);
int store_migrate_10_to_11(sqlite3 *db);
int store_migrate_12_to_13(sqlite3 *db);
/* Moves the rows of a schema-4 samples table into blocks; 1 if there was one. */
int sample_writer_convert_v4(sample_writer *w, uint64_t *ret_converted);

/* Deletes at most max_blocks blocks per level that end by before_ns;
 * *ret_samples: level-0 samples deleted; *ret_more: some are left. */
int sample_writer_expire(sample_writer *w, uint64_t before_ns, size_t max_blocks, uint64_t *ret_samples,
                         bool *ret_more);

typedef struct cap_result {
        uint64_t used_bytes;            /* pages in use before */
        uint64_t blocks, samples;       /* removed (samples: of level 0) */
        uint64_t rows;                  /* stack and frame rows removed */
        bool need_new_generation;       /* over the cap with only the current generation's rows left */
        uint64_t newest_removed_ns;     /* the newest level-0 sample removed */
} cap_result;
int sample_writer_enforce_cap(sample_writer *w, uint64_t max_bytes, size_t max_blocks, cap_result *ret);

int64_t sample_writer_link_written(sample_writer *w, int64_t boot_id, int64_t snapshot_id, uint64_t from_ns,
                                   uint64_t until_ns);
int64_t sample_count_snapshot(store *s, int64_t snapshot_id);
/* Every block of one level, whatever the others hold (tools, tests). */
int sample_scan_level(store *s, unsigned level, sample_scan_cb cb, void *userdata);
