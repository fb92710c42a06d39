/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perf_record_decode() against records built here byte by byte in the
 * layouts of include/uapi/linux/perf_event.h, plus truncated, oversized
 * and inconsistent variants of each. */
#include <errno.h>

#include "macro.h"
#include "perf/perf-record.h"
#include "test.h"

#define ST PERFSNAP_SAMPLE_TYPE

/* Builds one record in an 8-byte aligned buffer. */
typedef struct builder {
        uint64_t words[1024];
        size_t len;
} builder;

static uint8_t *bytes(builder *b) {
        return (uint8_t *) b->words;
}

static void begin(builder *b) {
        memset(b, 0, sizeof(*b));
        b->len = sizeof(struct perf_event_header);
}

static void put(builder *b, const void *p, size_t n) {
        if (b->len + n > sizeof(b->words))
                abort();
        memcpy(bytes(b) + b->len, p, n);
        b->len += n;
}

static void put_u64(builder *b, uint64_t v) {
        put(b, &v, sizeof(v));
}

static void put_u32x2(builder *b, uint32_t x, uint32_t y) {
        uint32_t v[2] = { x, y };
        put(b, v, sizeof(v));
}

/* A string padded with NULs to a multiple of 8, as the kernel writes it. */
static void put_str(builder *b, const char *s) {
        size_t n = strlen(s) + 1, padded = (n + 7) & ~(size_t) 7;
        uint8_t zero[8] = {};

        put(b, s, n);
        put(b, zero, padded - n);
}

/* struct sample_id for PERFSNAP_SAMPLE_TYPE: pid/tid, time, cpu/res, identifier. */
static void put_sid(builder *b, uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu, uint64_t id) {
        put_u32x2(b, pid, tid);
        put_u64(b, time);
        put_u32x2(b, cpu, 0);
        put_u64(b, id);
}

static size_t finish(builder *b, uint32_t type, uint16_t misc) {
        struct perf_event_header h = { .type = type, .misc = misc, .size = (uint16_t) b->len };
        memcpy(bytes(b), &h, sizeof(h));
        return b->len;
}

/* Rewrites header.size without changing the bytes present. */
static void set_size(builder *b, uint16_t size) {
        memcpy(bytes(b) + offsetof(struct perf_event_header, size), &size, sizeof(size));
}

static const uint64_t chain[] = {
        PERF_CONTEXT_KERNEL, 0xffffffff81234567ULL, 0xffffffff81000010ULL,
        PERF_CONTEXT_USER, 0x55550000aaaaULL,
};

static size_t build_sample(builder *b, uint64_t nr_claimed, size_t nr_present) {
        begin(b);
        put_u64(b, 0x77);                       /* identifier */
        put_u64(b, 0xffffffff81234567ULL);      /* ip */
        put_u32x2(b, 1234, 1235);               /* pid, tid */
        put_u64(b, 5000000000ULL);              /* time */
        put_u32x2(b, 1, 0);                     /* cpu, res */
        put_u64(b, 1001001);                    /* period */
        put_u64(b, nr_claimed);
        put(b, chain, nr_present * sizeof(uint64_t));
        return finish(b, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_KERNEL);
}

TEST(sample_id_size) {
        ASSERT_EQ(perf_sample_id_size(ST), 32);
        ASSERT_EQ(perf_sample_id_size(0), 0);
        ASSERT_EQ(perf_sample_id_size(PERF_SAMPLE_TID | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID), 24);
        /* IP, PERIOD, CALLCHAIN are not part of struct sample_id. */
        ASSERT_EQ(perf_sample_id_size(PERF_SAMPLE_IP | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN), 0);
}

TEST(sample) {
        builder b;
        perf_record r;
        size_t n = build_sample(&b, ELEMENTSOF(chain), ELEMENTSOF(chain));

        ASSERT_EQ(n, 8 + 7 * 8 + 8 * ELEMENTSOF(chain));
        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_EQ(r.type, PERF_RECORD_SAMPLE);
        ASSERT_EQ(r.size, n);
        ASSERT_EQ(r.misc, PERF_RECORD_MISC_KERNEL);
        ASSERT_U64_EQ(r.sample.id, 0x77);
        ASSERT_U64_EQ(r.sample.ip, 0xffffffff81234567ULL);
        ASSERT_EQ(r.sample.pid, 1234);
        ASSERT_EQ(r.sample.tid, 1235);
        ASSERT_U64_EQ(r.sample.time, 5000000000ULL);
        ASSERT_EQ(r.sample.cpu, 1);
        ASSERT_U64_EQ(r.sample.period, 1001001);
        ASSERT_EQ(r.sample.user, false);
        ASSERT_EQ(r.sample.nr, ELEMENTSOF(chain));
        for (size_t i = 0; i < ELEMENTSOF(chain); i++) {
                ASSERT_U64_EQ(r.sample.ips[i], chain[i]);
                ASSERT_U64_EQ(perf_sample_ip(&r.sample, i), chain[i]);
        }
        ASSERT_TRUE(perf_callchain_is_context(r.sample.ips[0]));
        ASSERT_TRUE(!perf_callchain_is_context(r.sample.ips[1]));
        ASSERT_TRUE(perf_callchain_is_context(r.sample.ips[3]));
        /* ips point into the record, not into a copy. */
        ASSERT_TRUE((const uint8_t *) r.sample.ips == bytes(&b) + 8 + 7 * 8);
        /* The sample's fields are mirrored into sid for uniform handling. */
        ASSERT_EQ(r.sid.pid, 1234);
        ASSERT_EQ(r.sid.tid, 1235);
        ASSERT_U64_EQ(r.sid.time, 5000000000ULL);
        ASSERT_EQ(r.sid.cpu, 1);
        ASSERT_U64_EQ(r.sid.id, 0x77);
}

TEST(sample_user_mode_and_empty_chain) {
        builder b;
        perf_record r;
        size_t n = build_sample(&b, 0, 0);

        finish(&b, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_EQ(r.sample.user, true);
        ASSERT_EQ(r.sample.nr, 0);
}

TEST(sample_unaligned) {
        builder b;
        static uint8_t buf[1024 + 1];
        perf_record r;
        size_t n = build_sample(&b, ELEMENTSOF(chain), ELEMENTSOF(chain));

        /* The fuzzer hands out arbitrary addresses: decoding must not load
         * through misaligned pointers, and perf_sample_ip() must read. */
        memcpy(buf + 1, bytes(&b), n);
        ASSERT_OK(perf_record_decode(buf + 1, n, ST, &r));
        ASSERT_U64_EQ(r.sample.ip, 0xffffffff81234567ULL);
        ASSERT_U64_EQ(r.sample.time, 5000000000ULL);
        for (size_t i = 0; i < ELEMENTSOF(chain); i++)
                ASSERT_U64_EQ(perf_sample_ip(&r.sample, i), chain[i]);
}

TEST(sample_truncated_and_oversized) {
        builder b;
        perf_record r;
        size_t n = build_sample(&b, ELEMENTSOF(chain), ELEMENTSOF(chain));

        /* Fewer bytes available than header.size. */
        ASSERT_ERROR(perf_record_decode(bytes(&b), n - 8, ST, &r), EBADMSG);
        ASSERT_ERROR(perf_record_decode(bytes(&b), 7, ST, &r), EBADMSG);
        ASSERT_ERROR(perf_record_decode(bytes(&b), 0, ST, &r), EBADMSG);

        /* header.size cuts into the callchain: nr * 8 does not fit. */
        set_size(&b, (uint16_t) (n - 8));
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
        /* header.size cuts into the fixed fields. */
        set_size(&b, 8 + 3 * 8);
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
        /* header.size below the header itself. */
        set_size(&b, 7);
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
        set_size(&b, 0);
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);

        /* A huge nr must not wrap around when multiplied by 8. */
        n = build_sample(&b, UINT64_MAX / 8 + 2, ELEMENTSOF(chain));
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
        n = build_sample(&b, UINT64_MAX, ELEMENTSOF(chain));
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);

        /* More bytes than the sample_type accounts for: a desync. */
        n = build_sample(&b, ELEMENTSOF(chain) - 1, ELEMENTSOF(chain));
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);

        /* More bytes available than header.size is fine: next record. */
        n = build_sample(&b, ELEMENTSOF(chain), ELEMENTSOF(chain));
        ASSERT_OK(perf_record_decode(bytes(&b), n + 64, ST, &r));
        ASSERT_EQ(r.size, n);
}

TEST(failure_leaves_output_untouched) {
        builder b;
        perf_record r;
        size_t n = build_sample(&b, ELEMENTSOF(chain), ELEMENTSOF(chain));

        memset(&r, 0xa5, sizeof(r));
        ASSERT_ERROR(perf_record_decode(bytes(&b), n - 1, ST, &r), EBADMSG);
        ASSERT_EQ(r.type, 0xa5a5a5a5);
        ASSERT_U64_EQ(r.sample.ip, 0xa5a5a5a5a5a5a5a5ULL);
}

TEST(unsupported_sample_type) {
        builder b;
        perf_record r;
        size_t n = build_sample(&b, 0, 0);

        /* PERF_SAMPLE_READ's size depends on read_format, unknown here. */
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST | PERF_SAMPLE_READ, &r), EOPNOTSUPP);
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST | PERF_SAMPLE_RAW, &r), EOPNOTSUPP);
}

TEST(sample_other_type_bits) {
        builder b;
        perf_record r;
        size_t n;

        /* ip, tid, time, addr, id, stream_id, cpu, period in kernel order. */
        begin(&b);
        put_u64(&b, 0x1000);
        put_u32x2(&b, 7, 8);
        put_u64(&b, 99);
        put_u64(&b, 0xdead);    /* addr, skipped */
        put_u64(&b, 0x55);      /* id */
        put_u64(&b, 0x66);      /* stream_id, skipped */
        put_u32x2(&b, 3, 0);
        put_u64(&b, 10);
        n = finish(&b, PERF_RECORD_SAMPLE, 0);
        ASSERT_OK(perf_record_decode(bytes(&b), n,
                                     PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR |
                                     PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD,
                                     &r));
        ASSERT_U64_EQ(r.sample.ip, 0x1000);
        ASSERT_EQ(r.sample.pid, 7);
        ASSERT_U64_EQ(r.sample.time, 99);
        ASSERT_U64_EQ(r.sample.id, 0x55);
        ASSERT_EQ(r.sample.cpu, 3);
        ASSERT_U64_EQ(r.sample.period, 10);
        ASSERT_EQ(r.sample.nr, 0);
}

static size_t build_comm(builder *b, const char *comm, uint16_t misc) {
        begin(b);
        put_u32x2(b, 42, 43);
        put_str(b, comm);
        put_sid(b, 42, 43, 777, 1, 0x77);
        return finish(b, PERF_RECORD_COMM, misc);
}

TEST(comm) {
        builder b;
        perf_record r;
        size_t n = build_comm(&b, "true", PERF_RECORD_MISC_COMM_EXEC);

        ASSERT_EQ(n, 8 + 8 + 8 + 32);
        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_EQ(r.type, PERF_RECORD_COMM);
        ASSERT_EQ(r.comm.pid, 42);
        ASSERT_EQ(r.comm.tid, 43);
        ASSERT_STREQ(r.comm.comm, "true");
        ASSERT_EQ(r.comm.exec, true);
        ASSERT_EQ(r.sid.pid, 42);
        ASSERT_EQ(r.sid.tid, 43);
        ASSERT_U64_EQ(r.sid.time, 777);
        ASSERT_EQ(r.sid.cpu, 1);
        ASSERT_U64_EQ(r.sid.id, 0x77);

        /* 7 characters + NUL fill the 8-byte slot exactly; prctl rename. */
        n = build_comm(&b, "abcdefg", 0);
        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_STREQ(r.comm.comm, "abcdefg");
        ASSERT_EQ(r.comm.exec, false);
}

TEST(comm_malformed) {
        builder b;
        perf_record r;
        size_t n = build_comm(&b, "abcdefg", 0);

        /* No NUL inside the string area: the trailer's bytes (which do
         * contain zeros) must not count as the terminator. */
        bytes(&b)[8 + 8 + 7] = 'h';
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);

        /* Too short for the trailer plus pid/tid. */
        n = build_comm(&b, "x", 0);
        set_size(&b, 8 + 32);
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
        /* Room for pid/tid and trailer but not a single string byte. */
        set_size(&b, 8 + 8 + 32);
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
        /* Truncated by the buffer. */
        n = build_comm(&b, "x", 0);
        ASSERT_ERROR(perf_record_decode(bytes(&b), n - 1, ST, &r), EBADMSG);
}

static size_t build_task(builder *b, uint32_t type) {
        begin(b);
        put_u32x2(b, 100, 1);
        put_u32x2(b, 101, 2);
        put_u64(b, 123456);
        put_sid(b, 100, 101, 123457, 0, 0x77);
        return finish(b, type, 0);
}

TEST(fork_exit) {
        builder b;
        perf_record r;
        uint32_t types[] = { PERF_RECORD_FORK, PERF_RECORD_EXIT };

        for (size_t i = 0; i < ELEMENTSOF(types); i++) {
                size_t n = build_task(&b, types[i]);

                ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
                ASSERT_EQ(r.type, types[i]);
                ASSERT_EQ(r.task.pid, 100);
                ASSERT_EQ(r.task.ppid, 1);
                ASSERT_EQ(r.task.tid, 101);
                ASSERT_EQ(r.task.ptid, 2);
                ASSERT_U64_EQ(r.task.time, 123456);
                ASSERT_U64_EQ(r.sid.time, 123457);

                /* One u64 short of the body. */
                set_size(&b, (uint16_t) (n - 8));
                ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
                /* One u64 too many: the trailer would be misread. */
                put_u64(&b, 0);
                finish(&b, types[i], 0);
                ASSERT_ERROR(perf_record_decode(bytes(&b), n + 8, ST, &r), EBADMSG);
        }
}

static size_t build_mmap2(builder *b, bool with_build_id, uint8_t build_id_size, const char *filename) {
        begin(b);
        put_u32x2(b, 500, 500);
        put_u64(b, 0x7f0000001000ULL);  /* addr */
        put_u64(b, 0x2000);             /* len */
        put_u64(b, 0x3000);             /* pgoff */
        if (with_build_id) {
                uint8_t id[24] = { build_id_size, 0, 0, 0 };
                for (size_t i = 0; i < 20; i++)
                        id[4 + i] = (uint8_t) (0xa0 + i);
                put(b, id, sizeof(id));
        } else {
                put_u32x2(b, 8, 1);     /* maj, min */
                put_u64(b, 131);        /* ino */
                put_u64(b, 9);          /* ino_generation */
        }
        put_u32x2(b, 5, 2);             /* prot = r-x, flags = MAP_PRIVATE */
        put_str(b, filename);
        put_sid(b, 500, 500, 42, 1, 0x77);
        return finish(b, PERF_RECORD_MMAP2, with_build_id ? PERF_RECORD_MISC_MMAP_BUILD_ID | PERF_RECORD_MISC_USER
                                                          : PERF_RECORD_MISC_USER);
}

TEST(mmap2_inode_form) {
        builder b;
        perf_record r;
        size_t n = build_mmap2(&b, false, 0, "/usr/lib/x86_64-linux-gnu/libc.so.6");

        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_EQ(r.type, PERF_RECORD_MMAP2);
        ASSERT_EQ(r.mmap2.pid, 500);
        ASSERT_U64_EQ(r.mmap2.addr, 0x7f0000001000ULL);
        ASSERT_U64_EQ(r.mmap2.len, 0x2000);
        ASSERT_U64_EQ(r.mmap2.pgoff, 0x3000);
        ASSERT_EQ(r.mmap2.maj, 8);
        ASSERT_EQ(r.mmap2.min, 1);
        ASSERT_U64_EQ(r.mmap2.ino, 131);
        ASSERT_U64_EQ(r.mmap2.ino_generation, 9);
        ASSERT_EQ(r.mmap2.build_id_size, 0);
        ASSERT_EQ(r.mmap2.prot, 5);
        ASSERT_EQ(r.mmap2.flags, 2);
        ASSERT_STREQ(r.mmap2.filename, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        ASSERT_U64_EQ(r.sid.time, 42);
}

TEST(mmap2_build_id_form) {
        builder b;
        perf_record r;
        size_t n = build_mmap2(&b, true, 20, "/usr/bin/true");

        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_EQ(r.mmap2.build_id_size, 20);
        for (size_t i = 0; i < 20; i++)
                ASSERT_EQ(r.mmap2.build_id[i], 0xa0 + i);
        ASSERT_EQ(r.mmap2.maj, 0);
        ASSERT_U64_EQ(r.mmap2.ino, 0);
        ASSERT_STREQ(r.mmap2.filename, "/usr/bin/true");

        /* Shorter ids (e.g. md5-style 16 bytes) are kept at their size. */
        n = build_mmap2(&b, true, 16, "/x");
        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_EQ(r.mmap2.build_id_size, 16);

        /* More than the 20 bytes the field holds is malformed. */
        n = build_mmap2(&b, true, 21, "/x");
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
        n = build_mmap2(&b, true, 255, "/x");
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
}

TEST(mmap2_malformed) {
        builder b;
        perf_record r;
        size_t n = build_mmap2(&b, false, 0, "/abcdefghijklmn");   /* 15 + NUL = 16 */

        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        /* Unterminated file name. */
        bytes(&b)[8 + 64 + 15] = 'o';
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
        /* Cut inside the fixed part (before the file name). */
        n = build_mmap2(&b, false, 0, "/x");
        set_size(&b, 8 + 56 + 32);
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
        ASSERT_ERROR(perf_record_decode(bytes(&b), n - 8, ST, &r), EBADMSG);
}

TEST(lost_and_lost_samples) {
        builder b;
        perf_record r;
        size_t n;

        begin(&b);
        put_u64(&b, 0x77);
        put_u64(&b, 1234);
        put_sid(&b, 0, 0, 99, 1, 0x77);
        n = finish(&b, PERF_RECORD_LOST, 0);
        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_EQ(r.type, PERF_RECORD_LOST);
        ASSERT_U64_EQ(r.lost.id, 0x77);
        ASSERT_U64_EQ(r.lost.lost, 1234);
        ASSERT_U64_EQ(r.sid.time, 99);
        set_size(&b, (uint16_t) (n - 8));
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);

        begin(&b);
        put_u64(&b, 17);
        put_sid(&b, 0, 0, 100, 0, 0x78);
        n = finish(&b, PERF_RECORD_LOST_SAMPLES, 0);
        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_EQ(r.type, PERF_RECORD_LOST_SAMPLES);
        ASSERT_U64_EQ(r.lost.lost, 17);
        ASSERT_U64_EQ(r.lost.id, 0x78);        /* from the trailer */
        set_size(&b, (uint16_t) (n - 8));
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
}

TEST(ksymbol) {
        builder b;
        perf_record r;
        size_t n;

        begin(&b);
        put_u64(&b, 0xffffffffc0001000ULL);
        {
                uint32_t len = 0x1a4;
                uint16_t tf[2] = { PERF_RECORD_KSYMBOL_TYPE_BPF, PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER };
                put(&b, &len, sizeof(len));
                put(&b, tf, sizeof(tf));
        }
        put_str(&b, "bpf_prog_6deef7357e7b4530_sd_fw_egress");
        put_sid(&b, 0, 0, 5, 0, 0x77);
        n = finish(&b, PERF_RECORD_KSYMBOL, PERF_RECORD_MISC_KERNEL);
        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_EQ(r.type, PERF_RECORD_KSYMBOL);
        ASSERT_U64_EQ(r.ksymbol.addr, 0xffffffffc0001000ULL);
        ASSERT_EQ(r.ksymbol.len, 0x1a4);
        ASSERT_EQ(r.ksymbol.ksym_type, PERF_RECORD_KSYMBOL_TYPE_BPF);
        ASSERT_EQ(r.ksymbol.flags, PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER);
        ASSERT_STREQ(r.ksymbol.name, "bpf_prog_6deef7357e7b4530_sd_fw_egress");
        ASSERT_U64_EQ(r.sid.time, 5);

        /* Name not terminated before the trailer. */
        memset(bytes(&b) + 8 + 16, 'A', n - 8 - 16 - 32);
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
        /* No room for the name at all. */
        set_size(&b, 8 + 16 + 32);
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
        set_size(&b, 8 + 8 + 32);
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
}

TEST(bpf_event) {
        builder b;
        perf_record r;
        size_t n;
        uint16_t tf[2] = { PERF_BPF_EVENT_PROG_LOAD, 0 };
        uint32_t id = 4242;
        uint8_t tag[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

        begin(&b);
        put(&b, tf, sizeof(tf));
        put(&b, &id, sizeof(id));
        put(&b, tag, sizeof(tag));
        put_sid(&b, 0, 0, 6, 1, 0x77);
        n = finish(&b, PERF_RECORD_BPF_EVENT, 0);
        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_EQ(r.type, PERF_RECORD_BPF_EVENT);
        ASSERT_EQ(r.bpf.type, PERF_BPF_EVENT_PROG_LOAD);
        ASSERT_EQ(r.bpf.flags, 0);
        ASSERT_EQ(r.bpf.id, 4242);
        ASSERT_TRUE(memcmp(r.bpf.tag, tag, 8) == 0);
        ASSERT_EQ(r.sid.cpu, 1);
        set_size(&b, (uint16_t) (n - 8));
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
}

/* The kernel grows a KSYMBOL/BPF_EVENT record by the trailer's size for
 * every session it is written to: the second session's copy ends in
 * bytes that are not its trailer. The trailer is the one after the body. */
TEST(sideband_records_longer_than_their_contents) {
        uint16_t tf[2] = { PERF_RECORD_KSYMBOL_TYPE_BPF, 0 };
        uint32_t len = 0x40;
        builder b;
        perf_record r;
        uint64_t t = 0;
        size_t n;

        begin(&b);
        put_u64(&b, 0xffffffffc0002000ULL);
        put(&b, &len, sizeof(len));
        put(&b, tf, sizeof(tf));
        put_str(&b, "bpf_prog_0123456789abcdef_x");
        put_sid(&b, 7, 8, 123456789, 1, 0x77);
        put_sid(&b, 0xdead, 0xbeef, 0x100000000ULL + 2533, 0, 0);      /* another session's share */
        n = finish(&b, PERF_RECORD_KSYMBOL, PERF_RECORD_MISC_KERNEL);
        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_STREQ(r.ksymbol.name, "bpf_prog_0123456789abcdef_x");
        ASSERT_U64_EQ(r.sid.time, 123456789);
        ASSERT_EQ(r.sid.pid, 7);
        ASSERT_EQ(r.sid.cpu, 1);
        ASSERT_OK(perf_record_time(bytes(&b), n, ST, &t));
        ASSERT_U64_EQ(t, 123456789);

        begin(&b);
        tf[0] = PERF_BPF_EVENT_PROG_UNLOAD;
        put(&b, tf, sizeof(tf));
        put(&b, &len, sizeof(len));
        put_u64(&b, 0x0807060504030201ULL);
        put_sid(&b, 7, 8, 987654321, 0, 0x77);
        put_sid(&b, 1, 2, 3, 4, 5);
        put_sid(&b, 1, 2, 3, 4, 5);
        n = finish(&b, PERF_RECORD_BPF_EVENT, 0);
        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_EQ(r.bpf.type, PERF_BPF_EVENT_PROG_UNLOAD);
        ASSERT_EQ(r.bpf.id, 0x40);
        ASSERT_U64_EQ(r.sid.time, 987654321);
        ASSERT_OK(perf_record_time(bytes(&b), n, ST, &t));
        ASSERT_U64_EQ(t, 987654321);
}

TEST(unknown_type) {
        builder b;
        perf_record r;
        size_t n;

        /* PERF_RECORD_THROTTLE: not decoded, only described. */
        begin(&b);
        put_u64(&b, 1);
        put_u64(&b, 2);
        put_u64(&b, 3);
        put_sid(&b, 9, 9, 9, 1, 9);
        n = finish(&b, PERF_RECORD_THROTTLE, 0);
        memset(&r, 0xa5, sizeof(r));
        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_EQ(r.type, PERF_RECORD_THROTTLE);
        ASSERT_EQ(r.size, n);
        ASSERT_EQ(r.misc, 0);
        ASSERT_U64_EQ(r.sid.time, 0);

        /* Still bounded by the available bytes. */
        ASSERT_ERROR(perf_record_decode(bytes(&b), n - 1, ST, &r), EBADMSG);
        /* A bare header is a complete record of an unknown type. */
        begin(&b);
        n = finish(&b, 1000, 0);
        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_EQ(r.type, 1000);
        /* ...but too short for any known type. */
        n = finish(&b, PERF_RECORD_COMM, 0);
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
        n = finish(&b, PERF_RECORD_SAMPLE, 0);
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
}

/* The fuzz seeds are generated independently (Python struct, from the uapi
 * comments); the decoder must agree with them on what is valid. */
TEST(fuzz_seeds_agree) {
        static const struct {
                const char *name;
                int expect;
                uint32_t type;
        } seeds[] = {
                { "rec-sample", 0, PERF_RECORD_SAMPLE },
                { "rec-sample-user", 0, PERF_RECORD_SAMPLE },
                { "rec-sample-empty-chain", 0, PERF_RECORD_SAMPLE },
                { "rec-sample-nr-too-big", -EBADMSG, 0 },
                { "rec-sample-nr-huge", -EBADMSG, 0 },
                { "rec-sample-truncated", -EBADMSG, 0 },
                { "rec-comm-exec", 0, PERF_RECORD_COMM },
                { "rec-comm-unterminated", -EBADMSG, 0 },
                { "rec-fork", 0, PERF_RECORD_FORK },
                { "rec-exit-short", -EBADMSG, 0 },
                { "rec-mmap2-inode", 0, PERF_RECORD_MMAP2 },
                { "rec-mmap2-build-id", 0, PERF_RECORD_MMAP2 },
                { "rec-mmap2-build-id-size-bad", -EBADMSG, 0 },
                { "rec-lost", 0, PERF_RECORD_LOST },
                { "rec-lost-samples", 0, PERF_RECORD_LOST_SAMPLES },
                { "rec-ksymbol", 0, PERF_RECORD_KSYMBOL },
                { "rec-bpf-event", 0, PERF_RECORD_BPF_EVENT },
                { "rec-throttle-unknown", 0, PERF_RECORD_THROTTLE },
                { "rec-header-size-0", -EBADMSG, 0 },
                { "rec-header-size-oversized", -EBADMSG, 0 },
                { "rec-header-only", -EBADMSG, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(seeds); i++) {
                char path[512];
                uint64_t buf[64] = {};
                perf_record r;
                FILE *f;
                size_t n;
                int ret;

                snprintf(path, sizeof(path), "%s/%s", TEST_DATA("../fuzz/corpus/fuzz-perf-record"), seeds[i].name);
                f = fopen(path, "re");
                if (!f)
                        TEST_FAIL_("cannot open %s", path);
                n = fread(buf, 1, sizeof(buf), f);
                fclose(f);
                ASSERT_TRUE(n >= 1 && n < sizeof(buf));
                /* Byte 0 is the fuzzer's mode byte (0: single record). */
                ASSERT_EQ(((uint8_t *) buf)[0], 0);
                ret = perf_record_decode((uint8_t *) buf + 1, n - 1, ST, &r);
                if (ret != seeds[i].expect)
                        TEST_FAIL_("%s: expected %d, got %d", seeds[i].name, seeds[i].expect, ret);
                if (ret == 0)
                        ASSERT_EQ(r.type, seeds[i].type);
        }
}

/* PERF_SAMPLE_CGROUP (Linux 5.7+): a u64 after the callchain. */
TEST(sample_with_cgroup) {
        builder b;
        perf_record r;
        size_t n;

        build_sample(&b, ELEMENTSOF(chain), ELEMENTSOF(chain));
        put_u64(&b, 0x1234abcdULL);
        n = finish(&b, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_KERNEL);
        ASSERT_OK(perf_record_decode(bytes(&b), n, ST | PERF_SAMPLE_CGROUP, &r));
        ASSERT_U64_EQ(r.sample.cgroup, 0x1234abcdULL);
        ASSERT_EQ(r.sample.nr, ELEMENTSOF(chain));
        /* The same bytes without the bit: one u64 too many. */
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
        /* With the bit but without the field: short. */
        n = build_sample(&b, ELEMENTSOF(chain), ELEMENTSOF(chain));
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST | PERF_SAMPLE_CGROUP, &r), EBADMSG);
        /* Without the bit the field is 0. */
        ASSERT_OK(perf_record_decode(bytes(&b), n, ST, &r));
        ASSERT_U64_EQ(r.sample.cgroup, 0);
}

static size_t build_cgroup(builder *b, uint64_t id, const char *path) {
        begin(b);
        put_u64(b, id);
        put_str(b, path);
        put_sid(b, 0, 0, 888, 1, 0x77);
        return finish(b, PERF_RECORD_CGROUP, 0);
}

TEST(cgroup_record) {
        builder b;
        perf_record r;
        uint64_t t = 0;
        size_t n = build_cgroup(&b, 4242, "/system.slice/x.service");

        ASSERT_OK(perf_record_decode(bytes(&b), n, ST | PERF_SAMPLE_CGROUP, &r));
        ASSERT_EQ(r.type, PERF_RECORD_CGROUP);
        ASSERT_U64_EQ(r.cgroup.id, 4242);
        ASSERT_STREQ(r.cgroup.path, "/system.slice/x.service");
        ASSERT_U64_EQ(r.sid.time, 888);
        ASSERT_OK(perf_record_time(bytes(&b), n, ST, &t));
        ASSERT_U64_EQ(t, 888);

        /* A path without its NUL before the trailer, or no room for one. */
        n = build_cgroup(&b, 1, "/abcdefg");
        memset(bytes(&b) + 8 + 8 + 8, 'x', 8);  /* the path's NUL and padding */
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
        begin(&b);
        put_u64(&b, 1);
        put_sid(&b, 0, 0, 888, 1, 0x77);
        n = finish(&b, PERF_RECORD_CGROUP, 0);
        ASSERT_ERROR(perf_record_decode(bytes(&b), n, ST, &r), EBADMSG);
}
