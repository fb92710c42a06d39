/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* A block of aggregated samples, as stored in one row of sample_blocks:
 * the distinct (cpu, kind, pid, tid, comm, cgroup, snapshot, stack) of a
 * time bucket, each with its exact sample count and period sum. The kind
 * is a CPU sample (period: the event's) or an off-CPU wait (count: waits,
 * period: nanoseconds off the CPU).
 *
 * Encoding (format 4):
 *   u8      format (4; 3 when every entry is a CPU sample)
 *   varint  number of entries n
 *   varint  mean period per sample (total period / total count)
 *   rest    a zstd frame of the columns below, each n varints, entries
 *           sorted by (cpu, pid, tid, comm, cgroup, snapshot, stack):
 *             cpu       delta from the previous entry's (never negative)
 *             pid       zigzag delta from the previous entry's
 *             tid       zigzag of (tid - pid): 0 for a main thread
 *             comm      zigzag delta
 *             snapshot  zigzag delta
 *             stack     zigzag delta
 *             count     count - 1
 *             period    zigzag of (period - count * mean period)
 *             frame     zigzag delta: the stack's leaf frame
 *             cgroup    zigzag delta: the string id of the task's cgroup v2
 *                       path (0: not known)
 *             kind      zigzag delta
 * Format 3 is the same without the kind column (CPU samples), format 2
 * without the cgroup column either (cgroup_id 0). Format 1
 * (schema 5 and 6) has neither the frame column; its entries decode with
 * frame_id 0, and readers find the leaf frame in the
 * stack dictionary. The leaf frame is what a report of functions needs:
 * with it, such a query does not read the stack dictionary at all.
 * Column-wise deltas leave long runs of small numbers (most entries share
 * cpu, pid, tid and comm with the one before), which zstd packs to a
 * fraction of a byte each; see doc/storage.md for the measurements. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/sample-kind.h"

#define SAMPLE_BLOCK_FORMAT 4

/* A decoder refuses blocks that claim more entries than this. */
#define SAMPLE_BLOCK_MAX_ENTRIES (4u * 1024 * 1024)

typedef struct block_entry {
        /* the key: compared and hashed as these 56 bytes */
        uint32_t cpu, pid, tid, kind;
        int64_t comm_id, snapshot_id, stack_id;
        int64_t cgroup_id;      /* string id of the cgroup v2 path; 0: not known */
        /* the stack's leaf frame (follows from stack_id, but the leaf
         * levels key by it alone); 0: not known */
        int64_t frame_id;
        /* the values */
        uint64_t count, period;
} block_entry;

#define BLOCK_ENTRY_KEY_SIZE offsetof(block_entry, count)

/* zstd's compression and decompression contexts, kept across blocks: a
 * context costs more to set up than a block of a second costs to
 * compress. One per thread. */
typedef struct sample_codec sample_codec;
sample_codec *sample_codec_new(void);
sample_codec *sample_codec_free(sample_codec *c);
/* What the codec keeps between blocks for the encoders (columns, the
 * sort's memory; zstd's contexts not counted). */
size_t sample_codec_memory_bytes(const sample_codec *c);

/* A block of this one byte stands for a period of an aggregate level
 * that is not stored: readers take the period from the finer level. */
#define SAMPLE_BLOCK_MARKER ((const uint8_t *) "\0")

static inline bool sample_block_is_marker(const void *data, size_t size) {
        return size == 1 && *(const uint8_t *) data == 0;
}

/* Sorts v in place and encodes it into a malloc'ed buffer. codec may be
 * NULL (a context for this call only). Without with_frames the frame
 * column is written as zeros (a few bytes a block): for blocks whose
 * readers find the leaf frame from the stack. */
int sample_block_encode(sample_codec *codec, block_entry *v, size_t n, bool with_frames, uint8_t **ret,
                        size_t *ret_size);

/* Decodes a block; *ret is malloc'ed (NULL when n is 0). -EBADMSG for a
 * malformed block, -EPROTONOSUPPORT for an unknown format. codec may be
 * NULL. */
int sample_block_decode(sample_codec *codec, const uint8_t *data, size_t size, block_entry **ret, size_t *ret_n);

/* Process hours (level 6) keep the entries of a process they saw in
 * three minutes or more; those of a process seen in fewer (most of a
 * fork/exec-heavy machine's) are folded into an entry a CPU and kind of
 * this pid, without comm, cgroup, stack or leaf frame, and a report of
 * such a process, or of a unit, reads the minutes of that hour
 * (store-samples.c, "brief processes"). */
#define SAMPLE_PID_BRIEF UINT32_MAX

/* The columns a reader needs besides cpu, comm, count, leaf frame,
 * cgroup and kind, which are always decoded; the others read 0. Each
 * column is a stream of its own, so one left out is not read at all
 * (the block is still checked whole). */
#define SAMPLE_NEED_PID (1u << 0)
/* The thread (its pid decoded too). */
#define SAMPLE_NEED_TID (1u << 1)
#define SAMPLE_NEED_SNAPSHOT (1u << 2)
/* Without it, the stacks of a block are decoded only if an entry of it
 * has no leaf frame (a block written without them, or a sample without
 * frames) and is not of SAMPLE_PID_BRIEF (with its pid decoded). */
#define SAMPLE_NEED_STACK (1u << 3)
#define SAMPLE_NEED_PERIOD (1u << 4)
#define SAMPLE_NEED_ALL \
        (SAMPLE_NEED_PID | SAMPLE_NEED_TID | SAMPLE_NEED_SNAPSHOT | SAMPLE_NEED_STACK | SAMPLE_NEED_PERIOD)

/* sample_block_decode() of the columns in `need` (SAMPLE_NEED_*). */
int sample_block_decode_some(sample_codec *codec, const uint8_t *data, size_t size, unsigned need, block_entry **ret,
                             size_t *ret_n);

/* The pids a process hour's block folded into its SAMPLE_PID_BRIEF
 * entries (sample_blocks.folded_pids, schema 13): a report of one pid
 * reads the minutes of an hour that folded processes only if one of its
 * blocks folded that pid, or does not say which it folded.
 *
 * Encoding:
 *   u8      format (1)
 *   varint  number of pids n
 *   varint  the greatest pid (0 when n is 0)
 *   rest    (n > 0) a zstd frame of n varints: the first pid, then each
 *           pid's difference from the one before it, less 1
 * Pids of a machine that starts many processes come in order, so the
 * differences are mostly 0 and small numbers. */
#define PID_SET_FORMAT 1

/* pids: n in strictly increasing order (-EINVAL otherwise). */
int pid_set_encode(sample_codec *codec, const uint32_t *pids, size_t n, uint8_t **ret, size_t *ret_size);
/* Whether the set holds pid; -EBADMSG for a malformed set (one whose pids
 * are not increasing, or more than SAMPLE_BLOCK_MAX_ENTRIES),
 * -EPROTONOSUPPORT for another format. */
int pid_set_has(sample_codec *codec, const uint8_t *data, size_t size, uint32_t pid, bool *ret);

int block_entry_cmp(const void *a, const void *b);

/* Sorts v by block_entry_cmp() in place, as sample_block_encode() does:
 * in memory the codec keeps for up to 16,384 entries, past that in 2n
 * pointers of its own for the call. codec may be NULL. */
void sample_block_sort(sample_codec *codec, block_entry *v, size_t n);

/* A block of dictionary rows, as stored in one row of stack_blocks or
 * frame_blocks: rows (id, columns...) in increasing id order.
 *
 * A stack node (DICT_STACKS: parent, frame) is one frame of a call stack
 * under its caller's node (parent 0: an outermost caller); the id of a
 * sample's leaf node names its whole stack. A frame (DICT_FRAMES: kind,
 * addr, symbol, offset, module, build_id; strings as ids, 0 for none) is
 * what a stack node points to.
 *
 * Encoding:
 *   u8      format (1: stack nodes, 2: frames)
 *   varint  number of rows n
 *   varint  id of the first row
 *   rest    a zstd frame of 1 + columns columns of n varints each:
 *             id      id - previous id - 1 (0 for the first row)
 *             parent  id - parent (at least 1: a parent is older)
 *             others  zigzag delta from the previous row's value
 * Stacks are interned caller first, so a new node's parent is mostly the
 * node made just before it: the parent column is mostly 1s; frames are
 * made in the order code is first seen, so addresses and offsets of
 * neighbouring rows are close. */

typedef enum dict_kind {
        DICT_STACKS,
        DICT_FRAMES,
        _DICT_KIND_MAX,
} dict_kind;

#define DICT_MAX_COLUMNS 6
#define DICT_BLOCK_MAX_ROWS 16384

/* Values per row after the id: 2 for stacks, 6 for frames. */
unsigned dict_columns(dict_kind kind);

/* A row (id, columns...) keeps the rules below. */
bool dict_row_valid(dict_kind kind, const int64_t *row);

/* rows: n rows of 1 + dict_columns(kind) int64_t each, the id first, in
 * strictly increasing id order (ids > 0). Stack nodes: parent in [0, id),
 * frame > 0; frames: kind 1 or 2, string ids >= 0. -EINVAL otherwise. */
int dict_block_encode(sample_codec *codec, dict_kind kind, const int64_t *rows, size_t n, uint8_t **ret,
                      size_t *ret_size);
/* -EBADMSG for a malformed block (including one that breaks the rules of
 * dict_block_encode()), -EPROTONOSUPPORT for another format. */
int dict_block_decode(sample_codec *codec, dict_kind kind, const uint8_t *data, size_t size, int64_t **ret,
                      size_t *ret_n);
