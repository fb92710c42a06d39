/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* A block of aggregated samples, as stored in one row of sample_blocks:
 * the distinct (cpu, pid, tid, comm, snapshot, stack) of a time bucket,
 * each with its exact sample count and period sum.
 *
 * Encoding (format 1):
 *   u8      format (1)
 *   varint  number of entries n
 *   varint  mean period per sample (total period / total count)
 *   rest    a zstd frame of the columns below, each n varints, entries
 *           sorted by (cpu, pid, tid, comm, snapshot, stack):
 *             cpu       delta from the previous entry's (never negative)
 *             pid       zigzag delta from the previous entry's
 *             tid       zigzag of (tid - pid): 0 for a main thread
 *             comm      zigzag delta
 *             snapshot  zigzag delta
 *             stack     zigzag delta
 *             count     count - 1
 *             period    zigzag of (period - count * mean period)
 * Column-wise deltas leave long runs of small numbers (most entries share
 * cpu, pid, tid and comm with the one before), which zstd packs to a
 * fraction of a byte each; see doc/storage.md for the measurements. */

#include <stddef.h>
#include <stdint.h>

#define SAMPLE_BLOCK_FORMAT 1

/* A decoder refuses blocks that claim more entries than this. */
#define SAMPLE_BLOCK_MAX_ENTRIES (4u * 1024 * 1024)

typedef struct block_entry {
        /* the key: compared and hashed as these 40 bytes */
        uint32_t cpu, pid, tid, _pad;
        int64_t comm_id, snapshot_id, stack_id;
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

/* Sorts v in place and encodes it into a malloc'ed buffer. codec may be
 * NULL (a context for this call only). */
int sample_block_encode(sample_codec *codec, block_entry *v, size_t n, uint8_t **ret, size_t *ret_size);

/* Decodes a block; *ret is malloc'ed (NULL when n is 0). -EBADMSG for a
 * malformed block, -EPROTONOSUPPORT for an unknown format. codec may be
 * NULL. */
int sample_block_decode(sample_codec *codec, const uint8_t *data, size_t size, block_entry **ret, size_t *ret_n);

int block_entry_cmp(const void *a, const void *b);
