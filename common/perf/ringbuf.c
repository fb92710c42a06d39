/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Consumer side of a perf mmap ring buffer (see ringbuf.h for the protocol).
 * data_head and data_tail are free-running u64 byte counters: the position
 * in the data area is counter & (data_size - 1), and head - tail is the
 * number of unread bytes, valid across wrap-around of the counters too. */

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "macro.h"
#include "perf/ringbuf.h"

#define RINGBUF_SCRATCH_BYTES (64 * 1024)

static bool is_pow2(uint64_t v) {
        return v != 0 && (v & (v - 1)) == 0;
}

int ringbuf_init(ringbuf *r, void *base, size_t mmap_bytes, size_t page_size) {
        struct perf_event_mmap_page *meta = base;
        uint64_t data_offset, data_size;
        uint8_t *scratch;

        if (!r || !base || !is_pow2(page_size) || mmap_bytes <= page_size)
                return -EINVAL;

        /* data_offset/data_size exist since Linux 4.1; before, the data
         * area simply followed the first page. */
        data_offset = meta->data_offset;
        data_size = meta->data_size;
        if (data_offset == 0 && data_size == 0) {
                data_offset = page_size;
                data_size = mmap_bytes - page_size;
        }
        if (data_offset < sizeof(*meta) || data_offset > mmap_bytes ||
            data_size > mmap_bytes - data_offset || !is_pow2(data_size) ||
            data_offset % sizeof(uint64_t) != 0)
                return -EINVAL;

        scratch = malloc(RINGBUF_SCRATCH_BYTES);
        if (!scratch)
                return -ENOMEM;

        *r = (ringbuf) {
                .meta = meta,
                .data = (uint8_t *) base + data_offset,
                .data_size = data_size,
                .scratch = scratch,
        };
        return 0;
}

void ringbuf_done(ringbuf *r) {
        if (!r)
                return;
        free(r->scratch);
        r->scratch = NULL;
        r->meta = NULL;
        r->data = NULL;
}

/* Copies n bytes starting at counter pos out of the ring, wrapping at the
 * end of the data area. */
static void ring_copy(const ringbuf *r, uint64_t pos, void *dst, size_t n) {
        uint64_t off = pos & (r->data_size - 1);
        size_t first = (size_t) MIN((uint64_t) n, r->data_size - off);

        memcpy(dst, r->data + off, first);
        memcpy((uint8_t *) dst + first, r->data, n - first);
}

static uint64_t load_head(const ringbuf *r) {
        /* Acquire pairs with the kernel's store of data_head in
         * perf_output_put_handle(): record bytes below head are visible
         * once head is (the "smp_rmb() after reading data_head" rule). */
        return __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
}

static void store_tail(ringbuf *r, uint64_t tail) {
        /* Release orders our reads of the records before the kernel can see
         * the space as free and overwrite it (the "smp_mb() before writing
         * data_tail" rule; a release store is enough for load->store
         * ordering, as tools/include/linux/ring_buffer.h does). */
        __atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
}

uint64_t ringbuf_pending(const ringbuf *r) {
        uint64_t tail = __atomic_load_n(&r->meta->data_tail, __ATOMIC_RELAXED);

        return load_head(r) - tail;
}

int ringbuf_drain(ringbuf *r, ringbuf_record_cb cb, void *userdata) {
        uint64_t head, tail;
        int n = 0, ret;

        if (!r || !r->meta || !cb)
                return -EINVAL;

        head = load_head(r);
        /* Only we write data_tail; a relaxed load sees our last store. */
        tail = __atomic_load_n(&r->meta->data_tail, __ATOMIC_RELAXED);

        /* The kernel never runs head more than data_size past a tail we
         * publish (the mapping is writable, so it does not overwrite). */
        if (head - tail > r->data_size)
                goto corrupt;

        while (tail != head && n < INT_MAX) {
                uint64_t avail = head - tail, off;
                struct perf_event_header h;
                const struct perf_event_header *rec;

                if (avail < sizeof(h))
                        goto corrupt;
                /* Read through a copy: with the kernel's 8-byte padding a
                 * header never straddles the end, but nothing here relies
                 * on the tail being aligned. */
                ring_copy(r, tail, &h, sizeof(h));
                /* Records are u64-sized and u64-aligned (the kernel pads
                 * every record to 8 bytes); size 0 would never advance. */
                if (h.size < sizeof(h) || h.size % sizeof(uint64_t) != 0 || h.size > avail)
                        goto corrupt;

                off = tail & (r->data_size - 1);
                /* Contiguous and aligned: hand out the ring memory itself.
                 * Otherwise copy, so callbacks always get an aligned record. */
                if (off + h.size <= r->data_size && off % sizeof(uint64_t) == 0)
                        rec = (const struct perf_event_header *) (const void *) (r->data + off);
                else {
                        /* h.size <= 65535 < RINGBUF_SCRATCH_BYTES. */
                        ring_copy(r, tail, r->scratch, h.size);
                        rec = (const struct perf_event_header *) (const void *) r->scratch;
                }

                ret = cb(rec, userdata);
                if (ret < 0) {
                        /* This record is not consumed: it is delivered
                         * again on the next drain. */
                        store_tail(r, tail);
                        return ret;
                }

                tail += h.size;
                n++;
        }

        store_tail(r, tail);
        return n;

corrupt:
        /* Nothing after a bad header can be trusted to start on a record
         * boundary: drop everything the kernel has published. */
        r->n_bad++;
        store_tail(r, head);
        return -EBADMSG;
}
