/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Reading a perf mmap ring buffer: the metadata page is followed by
 * data_size bytes (a power of two). The kernel writes at data_head; we
 * consume from data_tail. Protocol (perf_event.h, "mmap control page"):
 * load data_head with acquire semantics (smp_rmb after reading it), read
 * the records, then store data_tail with release semantics (smp_mb before
 * writing it). A record may wrap around the end of the data area: it is
 * copied into a scratch buffer so the callback always sees it contiguous. */

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ringbuf {
        struct perf_event_mmap_page *meta;
        uint8_t *data;          /* meta + page size (meta->data_offset if set) */
        uint64_t data_size;     /* power of two */
        uint8_t *scratch;       /* at least 64 KiB (max record size is 65535) */
        uint64_t n_bad;         /* drains that found corruption (size 0, not a multiple
                                 * of 8, > available) and skipped to head */
} ringbuf;

/* Called for each complete record, contiguous and 8-byte aligned in memory
 * (valid only during the call). A negative return stops the drain: the tail
 * is advanced past the records consumed so far, and the record the callback
 * refused is delivered again by the next drain. */
typedef int (*ringbuf_record_cb)(const struct perf_event_header *hdr, void *userdata);

/* Sets up r over a mapping of 1 + 2^n pages starting at base (does not take
 * ownership of the mapping). -EINVAL if the geometry in the metadata page
 * does not fit mmap_bytes, -ENOMEM. */
int ringbuf_init(ringbuf *r, void *base, size_t mmap_bytes, size_t page_size);
void ringbuf_done(ringbuf *r);

/* Consumes every complete record present. Returns the number of records
 * delivered, or a negative errno (the callback's, or -EBADMSG when the
 * buffer is corrupt: then everything up to head is discarded, n_bad++). */
int ringbuf_drain(ringbuf *r, ringbuf_record_cb cb, void *userdata);

/* Bytes waiting to be consumed. */
uint64_t ringbuf_pending(const ringbuf *r);
