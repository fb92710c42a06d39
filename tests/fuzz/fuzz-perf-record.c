/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Fuzzes the perf record decoder, directly and behind ringbuf_drain().
 *
 * Input: byte 0 selects the mode.
 *   even: bytes 1.. are one record buffer for perf_record_decode() (at
 *         whatever alignment the fuzzer's buffer has).
 *   odd:  byte 1 (b) picks the start offset in a 4 KiB ring: (b >> 1) * 32,
 *         plus 4 if b & 1 (a misaligned tail the kernel never produces);
 *         bytes 2.. are written there as the kernel would (wrapping), head
 *         is set past them, and every record the drain delivers is decoded.
 * Every decoded string and callchain entry is read, so a bounds mistake
 * shows up under ASan. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf-record.h"
#include "perf/ringbuf.h"

#define RING_PAGE 4096
#define RING_DATA 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void touch(const perf_record *r) {
        uint64_t acc = r->sid.time ^ r->sid.id;

        switch (r->type) {
        case PERF_RECORD_SAMPLE:
                for (uint64_t i = 0; i < r->sample.nr; i++)
                        acc += perf_sample_ip(&r->sample, i);
                break;
        case PERF_RECORD_COMM:
                acc += strlen(r->comm.comm);
                break;
        case PERF_RECORD_MMAP2:
                acc += strlen(r->mmap2.filename) + r->mmap2.build_id_size;
                for (size_t i = 0; i < r->mmap2.build_id_size; i++)
                        acc += r->mmap2.build_id[i];
                break;
        case PERF_RECORD_KSYMBOL:
                acc += strlen(r->ksymbol.name);
                break;
        default:
                break;
        }
        sink = acc;
}

static void decode_one(const void *p, size_t n) {
        perf_record r;

        uint64_t t;

        if (perf_record_decode(p, n, PERFSNAP_SAMPLE_TYPE, &r) < 0) {
                (void) perf_record_time(p, n, PERFSNAP_SAMPLE_TYPE, &t);      /* bounds only */
                return;
        }
        if (r.size > n)
                abort();
        /* The merge orders by perf_record_time(): it must agree with the decoder. */
        if (perf_record_time(p, n, PERFSNAP_SAMPLE_TYPE, &t) >= 0) {
                if (t != (r.type == PERF_RECORD_SAMPLE ? r.sample.time : r.sid.time))
                        abort();
        } else if (r.type == PERF_RECORD_SAMPLE || r.sid.time != 0)
                abort();
        touch(&r);
}

static int on_record(const struct perf_event_header *h, void *userdata) {
        size_t *n = userdata;

        /* The drain guarantees the record is complete and contiguous. */
        decode_one(h, h->size);
        (*n)++;
        return 0;
}

static void fuzz_ring(const uint8_t *data, size_t size) {
        static uint64_t mem[(RING_PAGE + RING_DATA) / sizeof(uint64_t)];
        struct perf_event_mmap_page *meta = (struct perf_event_mmap_page *) (void *) mem;
        uint8_t *area = (uint8_t *) mem + RING_PAGE;
        uint64_t start;
        size_t n = 0;
        ringbuf rb;

        if (size < 1)
                return;
        start = (uint64_t) (data[0] >> 1) * 32 + (data[0] & 1) * 4;
        data++;
        size--;
        size = size > RING_DATA ? RING_DATA : size;

        memset(mem, 0, sizeof(mem));
        meta->data_offset = RING_PAGE;
        meta->data_size = RING_DATA;
        for (size_t i = 0; i < size; i++)
                area[(start + i) & (RING_DATA - 1)] = data[i];
        meta->data_tail = start;
        meta->data_head = start + size;

        if (ringbuf_init(&rb, mem, sizeof(mem), RING_PAGE) < 0)
                abort();
        (void) ringbuf_drain(&rb, on_record, &n);
        /* Whatever happened, the drain consumed up to head. */
        if (ringbuf_pending(&rb) != 0)
                abort();
        ringbuf_done(&rb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        if (data[0] & 1)
                fuzz_ring(data + 1, size - 1);
        else
                decode_one(data + 1, size - 1);
        return 0;
}
