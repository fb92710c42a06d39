/* SPDX-License-Identifier: GPL-2.0-or-later */
/* ringbuf_drain() over a ring buffer fabricated in memory: a fake
 * struct perf_event_mmap_page followed by a 4096-byte data area, with
 * records placed where the kernel would put them. */
#include <errno.h>

#include "macro.h"
#include "perf/ringbuf.h"
#include "test.h"

#define PAGE 4096
#define DATA 4096

typedef struct fake {
        uint64_t mem[(PAGE + DATA) / sizeof(uint64_t)];
        ringbuf rb;
} fake;

static struct perf_event_mmap_page *meta(fake *f) {
        return (struct perf_event_mmap_page *) (void *) f->mem;
}

static uint8_t *data(fake *f) {
        return (uint8_t *) f->mem + PAGE;
}

static void fake_init(fake *f, uint64_t start) {
        memset(f, 0, sizeof(*f));
        meta(f)->data_offset = PAGE;
        meta(f)->data_size = DATA;
        meta(f)->data_head = start;
        meta(f)->data_tail = start;
        ASSERT_OK(ringbuf_init(&f->rb, f->mem, sizeof(f->mem), PAGE));
}

/* Writes a record of `size` bytes (header included) at head, wrapping at
 * the end of the data area like the kernel's perf_output_copy(); its
 * payload byte i is (type + i) so the reader can verify it. */
static void fake_put(fake *f, uint32_t type, uint16_t size) {
        uint8_t rec[512];
        struct perf_event_header h = { .type = type, .misc = 0, .size = size };
        uint64_t head = meta(f)->data_head;

        if (size > sizeof(rec) || size < sizeof(h))
                abort();
        memcpy(rec, &h, sizeof(h));
        for (size_t i = sizeof(h); i < size; i++)
                rec[i] = (uint8_t) (type + i);
        for (size_t i = 0; i < size; i++)
                data(f)[(head + i) & (DATA - 1)] = rec[i];
        meta(f)->data_head = head + size;
}

typedef struct seen {
        size_t n;
        uint32_t types[64];
        uint16_t sizes[64];
        bool payload_ok[64];
        bool aligned[64];
        int stop_at;            /* return -ECANCELED for this record index (if >= 0) */
        size_t calls;
} seen;

static int collect(const struct perf_event_header *h, void *userdata) {
        seen *s = userdata;
        const uint8_t *p = (const uint8_t *) h;
        bool ok = true;

        s->calls++;
        if (s->stop_at >= 0 && s->n == (size_t) s->stop_at)
                return -ECANCELED;
        if (s->n >= ELEMENTSOF(s->types))
                abort();
        /* fake_put() seeds payload byte i with type + i. */
        for (size_t i = sizeof(*h); i < h->size; i++)
                if (p[i] != (uint8_t) (h->type + i))
                        ok = false;
        s->types[s->n] = h->type;
        s->sizes[s->n] = h->size;
        s->payload_ok[s->n] = ok;
        s->aligned[s->n] = ((uintptr_t) h % 8) == 0;
        s->n++;
        return 0;
}

#define SEEN_INIT ((seen) { .stop_at = -1 })

TEST(init_geometry) {
        static uint64_t mem[(PAGE + DATA) / 8];
        struct perf_event_mmap_page *m = (void *) mem;
        ringbuf rb;

        /* Old kernels leave data_offset/data_size 0: data follows page 0. */
        memset(mem, 0, sizeof(mem));
        ASSERT_OK(ringbuf_init(&rb, mem, sizeof(mem), PAGE));
        ASSERT_EQ(rb.data_size, DATA);
        ASSERT_TRUE(rb.data == (uint8_t *) mem + PAGE);
        ASSERT_TRUE(rb.scratch != NULL);
        ringbuf_done(&rb);
        ASSERT_NULL(rb.scratch);

        /* Not a power of two. */
        m->data_offset = PAGE;
        m->data_size = 3000;
        ASSERT_ERROR(ringbuf_init(&rb, mem, sizeof(mem), PAGE), EINVAL);
        /* Larger than the mapping. */
        m->data_size = 8192;
        ASSERT_ERROR(ringbuf_init(&rb, mem, sizeof(mem), PAGE), EINVAL);
        /* Offset beyond the mapping. */
        m->data_offset = 3 * PAGE;
        m->data_size = DATA;
        ASSERT_ERROR(ringbuf_init(&rb, mem, sizeof(mem), PAGE), EINVAL);
        /* Mapping without a data page. */
        ASSERT_ERROR(ringbuf_init(&rb, mem, PAGE, PAGE), EINVAL);
}

TEST(empty) {
        fake f;
        seen s = SEEN_INIT;

        fake_init(&f, 0);
        ASSERT_EQ(ringbuf_pending(&f.rb), 0);
        ASSERT_EQ(ringbuf_drain(&f.rb, collect, &s), 0);
        ASSERT_EQ(s.calls, 0);
        ringbuf_done(&f.rb);
}

TEST(several_records) {
        fake f;
        seen s = SEEN_INIT;

        fake_init(&f, 0);
        fake_put(&f, 9, 64);
        fake_put(&f, 3, 40);
        fake_put(&f, 10, 8);
        fake_put(&f, 7, 128);
        ASSERT_EQ(ringbuf_pending(&f.rb), 64 + 40 + 8 + 128);
        ASSERT_EQ(ringbuf_drain(&f.rb, collect, &s), 4);
        ASSERT_EQ(s.n, 4);
        ASSERT_EQ(s.types[0], 9);
        ASSERT_EQ(s.sizes[0], 64);
        ASSERT_EQ(s.types[1], 3);
        ASSERT_EQ(s.types[2], 10);
        ASSERT_EQ(s.sizes[2], 8);
        ASSERT_EQ(s.types[3], 7);
        for (size_t i = 0; i < s.n; i++) {
                ASSERT_TRUE(s.payload_ok[i]);
                ASSERT_TRUE(s.aligned[i]);
        }
        ASSERT_U64_EQ(meta(&f)->data_tail, 240);
        ASSERT_EQ(ringbuf_pending(&f.rb), 0);

        /* The next drain starts where the last one stopped. */
        fake_put(&f, 4, 48);
        s = SEEN_INIT;
        ASSERT_EQ(ringbuf_drain(&f.rb, collect, &s), 1);
        ASSERT_EQ(s.types[0], 4);
        ASSERT_TRUE(s.payload_ok[0]);
        ASSERT_U64_EQ(meta(&f)->data_tail, 288);
        ASSERT_EQ(f.rb.n_bad, 0);
        ringbuf_done(&f.rb);
}

TEST(record_wrapping_payload) {
        fake f;
        seen s = SEEN_INIT;

        /* Header fits before the end, payload continues at offset 0. */
        fake_init(&f, DATA - 16);
        fake_put(&f, 9, 96);
        fake_put(&f, 3, 32);
        ASSERT_EQ(ringbuf_drain(&f.rb, collect, &s), 2);
        ASSERT_EQ(s.sizes[0], 96);
        ASSERT_TRUE(s.payload_ok[0]);
        ASSERT_TRUE(s.aligned[0]);
        ASSERT_TRUE(s.payload_ok[1]);
        ASSERT_U64_EQ(meta(&f)->data_tail, DATA - 16 + 128);
        ringbuf_done(&f.rb);
}

TEST(record_ending_at_the_end) {
        fake f;
        seen s = SEEN_INIT;

        /* A record that ends exactly at the end of the area is contiguous
         * (no copy); the next one starts at offset 0. */
        fake_init(&f, DATA - 48);
        fake_put(&f, 5, 48);
        fake_put(&f, 6, 24);
        ASSERT_EQ(ringbuf_drain(&f.rb, collect, &s), 2);
        ASSERT_TRUE(s.payload_ok[0]);
        ASSERT_TRUE(s.payload_ok[1]);
        ASSERT_U64_EQ(meta(&f)->data_tail, DATA + 24);
        ringbuf_done(&f.rb);
}

TEST(header_split_across_end) {
        fake f;
        seen s = SEEN_INIT;

        /* The kernel pads records to 8 bytes, so in a real buffer a header
         * never straddles the end; the drain still reads headers with a
         * wrapping copy and hands misaligned records over via the aligned
         * scratch, so a tail that is off by 4 cannot make it misread. */
        fake_init(&f, DATA - 4);
        fake_put(&f, 6, 24);
        fake_put(&f, 7, 16);         /* contiguous but misaligned */
        ASSERT_EQ(ringbuf_drain(&f.rb, collect, &s), 2);
        ASSERT_EQ(s.types[0], 6);
        ASSERT_EQ(s.sizes[0], 24);
        ASSERT_TRUE(s.payload_ok[0]);
        ASSERT_TRUE(s.aligned[0]);
        ASSERT_EQ(s.types[1], 7);
        ASSERT_TRUE(s.payload_ok[1]);
        ASSERT_TRUE(s.aligned[1]);
        ASSERT_U64_EQ(meta(&f)->data_tail, DATA - 4 + 40);
        ringbuf_done(&f.rb);
}

TEST(counters_far_beyond_data_size) {
        fake f;
        seen s = SEEN_INIT;
        /* data_head/data_tail are free-running u64 byte counts; start just
         * below 2^64 so they also wrap the integer itself. */
        uint64_t start = UINT64_MAX - 63;   /* 8-aligned, offset 4032 */

        fake_init(&f, start);
        for (uint8_t i = 0; i < 8; i++)
                fake_put(&f, 20 + i, 48);
        ASSERT_EQ(ringbuf_pending(&f.rb), 8 * 48);
        ASSERT_EQ(ringbuf_drain(&f.rb, collect, &s), 8);
        for (size_t i = 0; i < 8; i++) {
                ASSERT_EQ(s.types[i], 20 + i);
                ASSERT_TRUE(s.payload_ok[i]);
        }
        ASSERT_U64_EQ(meta(&f)->data_tail, start + 8 * 48);
        ASSERT_TRUE(meta(&f)->data_tail < start);     /* wrapped past 2^64 */
        ringbuf_done(&f.rb);

        /* Many laps around the 4 KiB area. */
        fake_init(&f, 1000ULL * DATA + 8);
        s = SEEN_INIT;
        fake_put(&f, 2, 200);
        ASSERT_EQ(ringbuf_drain(&f.rb, collect, &s), 1);
        ASSERT_TRUE(s.payload_ok[0]);
        ringbuf_done(&f.rb);
}

TEST(zero_size_record) {
        fake f;
        seen s = SEEN_INIT;

        fake_init(&f, 0);
        fake_put(&f, 9, 32);
        fake_put(&f, 3, 32);
        /* Clobber the second header's size to 0. */
        data(&f)[32 + 6] = 0;
        data(&f)[32 + 7] = 0;
        fake_put(&f, 4, 16);
        ASSERT_ERROR(ringbuf_drain(&f.rb, collect, &s), EBADMSG);
        /* The first record was delivered; everything to head discarded. */
        ASSERT_EQ(s.n, 1);
        ASSERT_EQ(f.rb.n_bad, 1);
        ASSERT_U64_EQ(meta(&f)->data_tail, 80);
        ASSERT_EQ(ringbuf_pending(&f.rb), 0);

        /* The buffer is usable again afterwards. */
        fake_put(&f, 5, 16);
        s = SEEN_INIT;
        ASSERT_EQ(ringbuf_drain(&f.rb, collect, &s), 1);
        ASSERT_EQ(s.types[0], 5);
        ringbuf_done(&f.rb);
}

TEST(record_bigger_than_available) {
        fake f;
        seen s = SEEN_INIT;

        fake_init(&f, 0);
        fake_put(&f, 9, 64);
        /* Claims 64 bytes but head is only 32 past it. */
        fake_put(&f, 3, 32);
        data(&f)[64 + 6] = 64;
        ASSERT_ERROR(ringbuf_drain(&f.rb, collect, &s), EBADMSG);
        ASSERT_EQ(s.n, 1);
        ASSERT_EQ(f.rb.n_bad, 1);
        ASSERT_U64_EQ(meta(&f)->data_tail, 96);
        ringbuf_done(&f.rb);
}

TEST(record_size_not_multiple_of_8) {
        fake f;
        seen s = SEEN_INIT;

        fake_init(&f, 0);
        fake_put(&f, 9, 32);
        data(&f)[6] = 28;
        ASSERT_ERROR(ringbuf_drain(&f.rb, collect, &s), EBADMSG);
        ASSERT_EQ(s.n, 0);
        ASSERT_EQ(f.rb.n_bad, 1);
        ASSERT_U64_EQ(meta(&f)->data_tail, 32);
        ringbuf_done(&f.rb);
}

TEST(partial_header_and_overrun) {
        fake f;
        seen s = SEEN_INIT;

        /* Fewer than 8 bytes published. */
        fake_init(&f, 0);
        meta(&f)->data_head = 4;
        ASSERT_ERROR(ringbuf_drain(&f.rb, collect, &s), EBADMSG);
        ASSERT_U64_EQ(meta(&f)->data_tail, 4);
        ringbuf_done(&f.rb);

        /* head more than data_size ahead of tail: cannot happen with a
         * writable mapping, so it is treated as corruption, not read. */
        fake_init(&f, 0);
        meta(&f)->data_head = DATA + 8;
        ASSERT_ERROR(ringbuf_drain(&f.rb, collect, &s), EBADMSG);
        ASSERT_EQ(s.calls, 0);
        ASSERT_U64_EQ(meta(&f)->data_tail, DATA + 8);
        ASSERT_EQ(f.rb.n_bad, 1);
        ringbuf_done(&f.rb);
}

TEST(callback_stops_early) {
        fake f;
        seen s = SEEN_INIT;

        fake_init(&f, 0);
        fake_put(&f, 9, 64);
        fake_put(&f, 3, 40);
        fake_put(&f, 10, 80);
        s.stop_at = 2;
        ASSERT_ERROR(ringbuf_drain(&f.rb, collect, &s), ECANCELED);
        ASSERT_EQ(s.n, 2);
        ASSERT_EQ(s.calls, 3);
        /* Tail moved past the two consumed records only. */
        ASSERT_U64_EQ(meta(&f)->data_tail, 104);
        ASSERT_EQ(ringbuf_pending(&f.rb), 80);
        ASSERT_EQ(f.rb.n_bad, 0);

        /* The refused record is delivered again. */
        s = SEEN_INIT;
        ASSERT_EQ(ringbuf_drain(&f.rb, collect, &s), 1);
        ASSERT_EQ(s.types[0], 10);
        ASSERT_TRUE(s.payload_ok[0]);
        ASSERT_U64_EQ(meta(&f)->data_tail, 184);

        /* Stopping on the first record leaves the tail where it was. */
        fake_put(&f, 11, 16);
        s = SEEN_INIT;
        s.stop_at = 0;
        ASSERT_ERROR(ringbuf_drain(&f.rb, collect, &s), ECANCELED);
        ASSERT_U64_EQ(meta(&f)->data_tail, 184);
        ringbuf_done(&f.rb);
}

TEST(max_size_record_wrapping) {
        static uint64_t mem[(PAGE + 131072) / 8];
        struct perf_event_mmap_page *m = (void *) mem;
        uint8_t *d = (uint8_t *) mem + PAGE;
        struct perf_event_header h = { .type = 9, .size = 65528 };   /* largest 8-aligned u16 */
        uint64_t start = 131072 - 8;
        ringbuf rb;
        seen s = SEEN_INIT;

        /* The scratch copy must hold the largest record the kernel can
         * emit, split with only its header before the end. */
        memset(mem, 0, sizeof(mem));
        m->data_offset = PAGE;
        m->data_size = 131072;
        m->data_head = m->data_tail = start;
        ASSERT_OK(ringbuf_init(&rb, mem, sizeof(mem), PAGE));
        memcpy(d + start, &h, sizeof(h));
        for (size_t i = 8; i < h.size; i++)
                d[(start + i) & (131072 - 1)] = (uint8_t) (9 + i);
        m->data_head = start + h.size;
        ASSERT_EQ(ringbuf_drain(&rb, collect, &s), 1);
        ASSERT_EQ(s.sizes[0], 65528);
        ASSERT_TRUE(s.payload_ok[0]);
        ringbuf_done(&rb);
}
