/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "macro.h"
#include "store/sample-block.h"
#include "test.h"

/* xorshift64*: reproducible across runs and machines. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) {
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545f4914f6cdd1dULL;
}

/* A value from a mix of the shapes real data has and the extremes it
 * must survive. */
static uint64_t rnd_value(uint64_t small) {
        switch (rnd() % 6) {
        case 0: return 0;
        case 1: return rnd() % small;
        case 2: return rnd() % (small * 1000);
        case 3: return rnd();
        case 4: return UINT64_MAX - rnd() % 3;
        default: return (uint64_t) INT64_MAX + rnd() % 3 - 1;
        }
}

static void random_entries(block_entry *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                v[i] = (block_entry) {
                        .cpu = (uint32_t) rnd_value(4),
                        .pid = (uint32_t) rnd_value(100),
                        .comm_id = (int64_t) rnd_value(20),
                        .snapshot_id = (int64_t) rnd_value(3),
                        .stack_id = (int64_t) rnd_value(100000),
                        .count = 1 + rnd_value(5) % 100000,
                        .period = rnd_value(1000000),
                        .frame_id = (int64_t) rnd_value(50000),
                        .cgroup_id = (int64_t) rnd_value(30),
                };
                v[i].tid = rnd() % 2 ? v[i].pid : (uint32_t) rnd_value(100);
                /* Equal keys happen in real blocks only after merging;
                 * the format allows them either way. */
                if (i > 0 && rnd() % 8 == 0)
                        v[i] = v[i - 1];
        }
}

/* Entries and their place in the input: the encoder's order is the
 * stable one (equal keys in input order). */
typedef struct placed {
        block_entry e;
        size_t at;
} placed;

static int placed_cmp(const void *a, const void *b) {
        const placed *x = a, *y = b;
        int c = block_entry_cmp(&x->e, &y->e);

        return c != 0 ? c : x->at < y->at ? -1 : x->at > y->at;
}

static int entry_full_cmp(const void *a, const void *b) {
        const block_entry *x = a, *y = b;
        int c = block_entry_cmp(a, b);

        if (c != 0)
                return c;
        if (x->count != y->count)
                return x->count < y->count ? -1 : 1;
        return x->period < y->period ? -1 : x->period > y->period;
}

TEST(round_trip_random_blocks) {
        /* One codec for all rounds: what it keeps from a block (the
         * columns, the sort's memory) must not show in the next, larger
         * or smaller. */
        sample_codec *codec = sample_codec_new();

        ASSERT_TRUE(codec != NULL);
        for (int round = 0; round < 400; round++) {
                size_t n = round < 10 ? (size_t) round : 1 + rnd() % (round % 50 == 0 ? 20000 : 300);
                block_entry *v = calloc(MAX(n, (size_t) 1), sizeof *v), *want = calloc(MAX(n, (size_t) 1), sizeof *v);
                block_entry *got = NULL;
                uint8_t *data = NULL;
                size_t size = 0, m = 99;

                ASSERT_TRUE(v && want);
                random_entries(v, n);
                memcpy(want, v, n * sizeof *v);
                ASSERT_OK(sample_block_encode(NULL, v, n, true, &data, &size));
                {
                        block_entry *again = malloc(MAX(n, (size_t) 1) * sizeof *again);
                        uint8_t *data2 = NULL;
                        size_t size2 = 0;

                        /* The same block, unsorted as v was (the encoder
                         * sorts v in place), from the codec's memory. */
                        ASSERT_TRUE(again != NULL);
                        memcpy(again, want, n * sizeof *again);
                        ASSERT_OK(sample_block_encode(codec, again, n, true, &data2, &size2));
                        ASSERT_EQ(size2, size);
                        ASSERT_TRUE(memcmp(data2, data, size) == 0);
                        free(again);
                        free(data2);
                }
                ASSERT_OK(sample_block_decode(NULL, data, size, &got, &m));
                ASSERT_EQ(m, n);
                /* Encoded in key order: the encoder sorts them. */
                for (size_t i = 1; i < n; i++)
                        if (block_entry_cmp(got + i - 1, got + i) > 0) {
                                fprintf(stderr, "round %d: entry %zu of %zu out of key order\n", round, i, n);
                                ASSERT_TRUE(false);
                        }
                {
                        /* In the stable order, entry for entry. */
                        placed *in = calloc(MAX(n, (size_t) 1), sizeof *in);

                        ASSERT_TRUE(in != NULL);
                        for (size_t i = 0; i < n; i++)
                                in[i] = (placed) { want[i], i };
                        qsort(in, n, sizeof *in, placed_cmp);
                        for (size_t i = 0; i < n; i++)
                                if (memcmp(&in[i].e, got + i, sizeof *got) != 0) {
                                        fprintf(stderr, "round %d: entry %zu of %zu is not input entry %zu\n", round,
                                                i, n, in[i].at);
                                        ASSERT_TRUE(false);
                                }
                        free(in);
                }
                if (n > 0) {
                        qsort(want, n, sizeof *want, entry_full_cmp);
                        qsort(got, n, sizeof *got, entry_full_cmp);
                }
                for (size_t i = 0; i < n; i++)
                        if (memcmp(want + i, got + i, sizeof *got) != 0) {
                                fprintf(stderr, "round %d entry %zu: cpu %u/%u pid %u/%u tid %u/%u comm %lld/%lld "
                                        "stack %lld/%lld count %llu/%llu period %llu/%llu\n", round, i,
                                        want[i].cpu, got[i].cpu, want[i].pid, got[i].pid, want[i].tid, got[i].tid,
                                        (long long) want[i].comm_id, (long long) got[i].comm_id,
                                        (long long) want[i].stack_id, (long long) got[i].stack_id,
                                        (unsigned long long) want[i].count, (unsigned long long) got[i].count,
                                        (unsigned long long) want[i].period, (unsigned long long) got[i].period);
                                ASSERT_TRUE(false);
                        }
                free(v);
                free(want);
                free(got);
                free(data);
        }
        ASSERT_GT(sample_codec_memory_bytes(codec), 0);
        sample_codec_free(codec);
}

/* Blocks of up to 16,384 entries (what the writer's accumulators hold)
 * are encoded in the codec's memory, larger ones in their own: a codec
 * keeps no more than that for its life. */
TEST(codec_keeps_memory_for_blocks_it_writes) {
        sample_codec *codec = sample_codec_new();
        size_t n = 20000, size = 0, kept;
        block_entry *v = calloc(n, sizeof *v);
        uint8_t *data = NULL;

        ASSERT_TRUE(codec && v);
        random_entries(v, n);
        ASSERT_OK(sample_block_encode(codec, v, n, true, &data, &size));
        ASSERT_EQ(sample_codec_memory_bytes(codec), 0);
        free(data);
        /* Out of order again (a block in order is not sorted). */
        random_entries(v, n);
        ASSERT_OK(sample_block_encode(codec, v, 16384, true, &data, &size));
        kept = sample_codec_memory_bytes(codec);
        ASSERT_GE(kept, 16384 * (2 * sizeof(void *) + 11 * 10));
        free(data);
        ASSERT_OK(sample_block_encode(codec, v, 100, true, &data, &size));
        ASSERT_EQ(sample_codec_memory_bytes(codec), kept);
        free(data);
        free(v);
        sample_codec_free(codec);
}

/* sample_block_sort() gives the stable order (equal keys in input
 * order) for blocks out of order, in order, in reverse and past the
 * codec's 16,384 entries; a block in order costs the codec nothing. */
TEST(sort_is_stable_in_every_case) {
        sample_codec *codec = sample_codec_new();
        size_t sizes[] = { 0, 1, 2, 15, 16, 17, 1000, 16384, 20000 };

        ASSERT_TRUE(codec);
        for (size_t k = 0; k < ELEMENTSOF(sizes); k++)
                for (unsigned shape = 0; shape < 3; shape++) {
                        size_t n = sizes[k];
                        block_entry *v = calloc(MAX(n, (size_t) 1), sizeof *v);
                        placed *want = calloc(MAX(n, (size_t) 1), sizeof *want);

                        ASSERT_TRUE(v && want);
                        random_entries(v, n);
                        /* Counts tell equal keys apart. */
                        for (size_t i = 0; i < n; i++)
                                v[i].count = i + 1;
                        if (shape > 0) {
                                qsort(v, n, sizeof *v, block_entry_cmp);
                                for (size_t i = 0; shape == 2 && i < n / 2; i++)
                                        SWAP(v[i], v[n - 1 - i]);
                        }
                        for (size_t i = 0; i < n; i++)
                                want[i] = (placed) { v[i], i };
                        qsort(want, n, sizeof *want, placed_cmp);
                        sample_block_sort(n % 2 ? codec : NULL, v, n);
                        for (size_t i = 0; i < n; i++)
                                if (memcmp(v + i, &want[i].e, sizeof *v) != 0) {
                                        fprintf(stderr, "n %zu shape %u: entry %zu has count %llu, want %llu\n", n,
                                                shape, i, (unsigned long long) v[i].count,
                                                (unsigned long long) want[i].e.count);
                                        ASSERT_TRUE(false);
                                }
                        free(v);
                        free(want);
                }
        sample_codec_free(codec);

        codec = sample_codec_new();
        block_entry v[100];
        ASSERT_TRUE(codec);
        random_entries(v, ELEMENTSOF(v));
        qsort(v, ELEMENTSOF(v), sizeof *v, block_entry_cmp);
        sample_block_sort(codec, v, ELEMENTSOF(v));
        ASSERT_EQ(sample_codec_memory_bytes(codec), 0);
        sample_codec_free(codec);
}

/* What a busy bucket looks like: few CPUs and tasks, many stacks, a
 * near-constant period. It must come out at a few bytes an entry. */
TEST(typical_block_is_small) {
        enum { N = 2000 };
        block_entry v[N];
        uint8_t *data = NULL;
        size_t size;

        for (size_t i = 0; i < N; i++)
                v[i] = (block_entry) {
                        .cpu = (uint32_t) (i % 2), .pid = 1000 + (uint32_t) (i % 5), .tid = 1000 + (uint32_t) (i % 5),
                        .comm_id = 3 + (int64_t) (i % 5), .snapshot_id = 1, .stack_id = 1 + (int64_t) (rnd() % 5000),
                        .count = 1 + rnd() % 3, .period = 0,
                };
        for (size_t i = 0; i < N; i++)
                v[i].period = v[i].count * 1001000 + rnd() % 2000;
        ASSERT_OK(sample_block_encode(NULL, v, N, true, &data, &size));
        fprintf(stderr, "%d entries: %zu bytes, %.2f bytes an entry\n", N, size, (double) size / N);
        ASSERT_LT(size, (size_t) N * 6);
        free(data);
}

/* Without the frame column a block costs little more than without frames
 * at all, and reads back with frame 0 and every other value. */
TEST(block_without_frames) {
        enum { N = 2000 };
        block_entry v[N], w[N], *got = NULL;
        uint8_t *with = NULL, *without = NULL;
        size_t with_size, without_size, n;

        for (size_t i = 0; i < N; i++)
                v[i] = (block_entry) {
                        .cpu = (uint32_t) (i % 2), .pid = 1000 + (uint32_t) (i % 50), .tid = 1000 + (uint32_t) (i % 50),
                        .comm_id = 3, .stack_id = 1 + (int64_t) (rnd() % 50000), .frame_id = 1 + (int64_t) (rnd() % 20000),
                        .count = 1, .period = 1001000,
                };
        memcpy(w, v, sizeof v);
        ASSERT_OK(sample_block_encode(NULL, v, N, true, &with, &with_size));
        ASSERT_OK(sample_block_encode(NULL, w, N, false, &without, &without_size));
        fprintf(stderr, "%d entries: %zu bytes with frames, %zu without\n", N, with_size, without_size);
        ASSERT_LT(without_size + N, with_size);
        ASSERT_OK(sample_block_decode(NULL, without, without_size, &got, &n));
        ASSERT_EQ(n, (size_t) N);
        for (size_t i = 0; i < N; i++) {
                ASSERT_EQ(got[i].frame_id, 0);
                ASSERT_EQ(got[i].stack_id, w[i].stack_id);
                ASSERT_EQ(got[i].pid, w[i].pid);
                ASSERT_U64_EQ(got[i].period, w[i].period);
        }
        free(got);
        /* A reader that groups by leaf frame gets the stacks to find them. */
        ASSERT_OK(sample_block_decode_some(NULL, without, without_size, 0, &got, &n));
        ASSERT_EQ(n, (size_t) N);
        for (size_t i = 0; i < N; i++) {
                ASSERT_EQ(got[i].stack_id, w[i].stack_id);
                ASSERT_U64_EQ(got[i].period, 0);
        }
        free(got);
        free(with);
        free(without);
}

/* sample_block_decode_some(): the columns asked for as the whole
 * decode has them, the others 0; stacks anyway for a block with an
 * entry without a leaf frame. */
TEST(columns_left_out_read_zero) {
        for (int round = 0; round < 60; round++) {
                size_t n = 1 + rnd() % 500, m = 0, k = 0;
                block_entry *v = calloc(n, sizeof *v), *all = NULL;
                uint8_t *data = NULL;
                size_t size = 0;

                ASSERT_TRUE(v != NULL);
                random_entries(v, n);
                /* Half the blocks have a leaf frame in every entry; some
                 * have folded processes without one, which need no stack. */
                for (size_t i = 0; i < n; i++) {
                        if (round % 2 && v[i].frame_id == 0)
                                v[i].frame_id = 1;
                        if (round % 4 == 1 && i % 3 == 0) {
                                v[i].pid = v[i].tid = SAMPLE_PID_BRIEF;
                                v[i].frame_id = v[i].stack_id = 0;
                        }
                }
                ASSERT_OK(sample_block_encode(NULL, v, n, true, &data, &size));
                ASSERT_OK(sample_block_decode(NULL, data, size, &all, &m));
                for (unsigned need = 0; need <= SAMPLE_NEED_ALL; need++) {
                        bool pids = need & (SAMPLE_NEED_PID | SAMPLE_NEED_TID), leafless = false;
                        block_entry *got = NULL;

                        for (size_t i = 0; i < m; i++)
                                leafless = leafless || (all[i].frame_id == 0 && (!pids || all[i].pid != SAMPLE_PID_BRIEF));

                        ASSERT_OK(sample_block_decode_some(NULL, data, size, need, &got, &k));
                        ASSERT_EQ(k, m);
                        for (size_t i = 0; i < k; i++) {
                                block_entry want = all[i];

                                if (!pids)
                                        want.pid = 0;
                                if (!(need & SAMPLE_NEED_TID))
                                        want.tid = 0;
                                if (!(need & SAMPLE_NEED_SNAPSHOT))
                                        want.snapshot_id = 0;
                                if (!(need & SAMPLE_NEED_STACK) && !leafless)
                                        want.stack_id = 0;
                                if (!(need & SAMPLE_NEED_PERIOD))
                                        want.period = 0;
                                if (memcmp(&want, got + i, sizeof want) != 0) {
                                        fprintf(stderr, "round %d need %#x entry %zu: pid %u/%u tid %u/%u "
                                                "snapshot %lld/%lld stack %lld/%lld period %llu/%llu frame %lld/%lld\n",
                                                round, need, i, want.pid, got[i].pid, want.tid, got[i].tid, (long long) want.snapshot_id,
                                                (long long) got[i].snapshot_id, (long long) want.stack_id,
                                                (long long) got[i].stack_id, (unsigned long long) want.period,
                                                (unsigned long long) got[i].period, (long long) want.frame_id,
                                                (long long) got[i].frame_id);
                                        ASSERT_TRUE(false);
                                }
                        }
                        free(got);
                }
                free(all);
                free(data);
                free(v);
        }
}

/* Off-CPU entries make a format-4 block that keeps each entry's kind;
 * blocks of CPU samples alone stay format 3, byte for byte. */
TEST(kinds_round_trip) {
        block_entry v[300], copy[300], *got = NULL;
        uint8_t *data = NULL, *cpu_only = NULL;
        size_t size, cpu_size, n;

        random_entries(v, 300);
        for (size_t i = 0; i < 300; i++)
                v[i].count = MAX(v[i].count, (uint64_t) 1);
        memcpy(copy, v, sizeof v);
        ASSERT_OK(sample_block_encode(NULL, copy, 300, true, &cpu_only, &cpu_size));
        ASSERT_EQ(cpu_only[0], 3);

        for (size_t i = 0; i < 300; i += 3) {
                v[i].kind = SAMPLE_KIND_OFFCPU;
                v[i].period = 1000000ull * (i + 1);     /* ns, far from the CPU entries' periods */
        }
        memcpy(copy, v, sizeof v);
        ASSERT_OK(sample_block_encode(NULL, copy, 300, true, &data, &size));
        ASSERT_EQ(data[0], 4);
        fprintf(stderr, "300 entries: %zu bytes with 100 off-CPU, %zu CPU only\n", size, cpu_size);
        ASSERT_OK(sample_block_decode(NULL, data, size, &got, &n));
        ASSERT_EQ(n, 300u);
        qsort(v, 300, sizeof *v, block_entry_cmp);
        for (size_t i = 0; i < n; i++) {
                ASSERT_EQ(got[i].kind, v[i].kind);
                ASSERT_EQ(got[i].period, v[i].period);
                ASSERT_EQ(got[i].count, v[i].count);
                ASSERT_EQ(got[i].stack_id, v[i].stack_id);
        }
        free(got);

        /* A kind this build does not know is refused, on either side. */
        free(data);
        data = NULL;
        v[0].kind = _SAMPLE_KIND_MAX;
        ASSERT_ERROR(sample_block_encode(NULL, v, 300, true, &data, &size), EINVAL);
        v[0].kind = _SAMPLE_KIND_MAX - 1;
        ASSERT_OK(sample_block_encode(NULL, v, 1, true, &data, &size));
        ASSERT_EQ(data[0], 4);
        free(data);
        free(cpu_only);
}

TEST(bad_blocks_are_refused) {
        block_entry v[50], *got = NULL;
        uint8_t *data = NULL, *copy;
        size_t size, n;
        int refused = 0;

        random_entries(v, 50);
        for (size_t i = 0; i < 50; i++)
                v[i].count = MAX(v[i].count, (uint64_t) 1);
        ASSERT_OK(sample_block_encode(NULL, v, 50, true, &data, &size));

        ASSERT_ERROR(sample_block_decode(NULL, data, 0, &got, &n), EBADMSG);
        copy = malloc(size);
        ASSERT_TRUE(copy);
        memcpy(copy, data, size);
        copy[0] = SAMPLE_BLOCK_FORMAT + 1;
        ASSERT_ERROR(sample_block_decode(NULL, copy, size, &got, &n), EPROTONOSUPPORT);

        /* Every truncation is an error, never a read past the end. */
        for (size_t len = 1; len < size; len++) {
                ASSERT_TRUE(sample_block_decode(NULL, data, len, &got, &n) < 0);
        }
        /* A flipped byte anywhere: an error, or entries (the header's
         * mean period is not checked by anything) — never a crash. */
        for (size_t i = 0; i < size; i++) {
                memcpy(copy, data, size);
                copy[i] ^= 0x5a;
                got = NULL;
                if (sample_block_decode(NULL, copy, size, &got, &n) < 0)
                        refused++;
                free(got);
        }
        fprintf(stderr, "%d of %zu flipped bytes refused\n", refused, size);
        ASSERT_GT(refused, 0);

        /* A header that claims more entries than the limit. */
        uint8_t huge[] = { 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0 };
        ASSERT_ERROR(sample_block_decode(NULL, huge, sizeof huge, &got, &n), EBADMSG);
        free(copy);
        free(data);
}

static size_t put_varint(uint8_t *p, uint64_t v) {
        size_t len = 0;

        for (; v >= 0x80; v >>= 7)
                p[len++] = (uint8_t) (v | 0x80);
        p[len++] = (uint8_t) v;
        return len;
}

/* A format-3 block of n entries and mean period `mean` around the raw
 * column bytes given. */
static uint8_t *block_of_raw(const uint8_t *raw, size_t raw_size, uint64_t n, uint64_t mean, size_t *ret_size) {
        size_t bound = ZSTD_compressBound(raw_size), len = 1;
        uint8_t *b = malloc(1 + 20 + bound);

        ASSERT_TRUE(b);
        b[0] = 3;
        len += put_varint(b + len, n);
        len += put_varint(b + len, mean);
        len += ZSTD_compress(b + len, bound, raw, raw_size, 1);
        *ret_size = len;
        return b;
}

/* The decoder finds where each column starts by counting the bytes that
 * end a varint, then reads the entries one by one from all columns:
 * varints of 1, 2, 3, 6, 8, 9 and 10 bytes, one at the very start and
 * a 3-byte one read with 5 bytes left, land in their own columns; a
 * varint of 11 bytes, a column one varint short, one byte too many and a
 * CPU number past 32 bits are refused. */
TEST(columns_are_read_where_they_start) {
        /* Two entries, format 3 (ten columns), as the encoder writes them
         * (zigzagged differences); each column's values differ from its
         * neighbours', so that a cursor reading another column shows. */
        const uint64_t cols[10][2] = {
                { 200, 1 },                             /* cpu 200, 201: 2 bytes first */
                { 20, 2 },                              /* pid 10, 11 */
                { 0, 4 },                               /* tid 10, 13 */
                { 6, 2 },                               /* comm 3, 4 */
                { UINT64_C(1) << 57, 0 },               /* snapshot 2^56, 2^56: 9 bytes */
                { 600, UINT64_C(1) << 41 },             /* stack 300, 300 + 2^40: 2 and 6 bytes */
                { 1, 0 },                               /* count 2, 1 */
                { UINT64_C(1) << 55, UINT64_MAX - 1 },  /* period 2000 + 2^54, 1000 + INT64_MAX: 8 and 10 bytes */
                { 14, UINT64_C(1) << 14 },              /* frame 7, 7 + 2^13: 3 bytes, 5 left */
                { 2, 2 },                               /* cgroup 1, 2 */
        };
        uint8_t raw[256], bad[256];
        size_t raw_size = 0, size, n, stack_at = 0;
        block_entry *got = NULL;
        uint8_t *b;

        for (size_t c = 0; c < 10; c++)
                for (size_t i = 0; i < 2; i++) {
                        if (c == 5 && i == 0)
                                stack_at = raw_size;
                        raw_size += put_varint(raw + raw_size, cols[c][i]);
                }
        ASSERT_EQ(raw_size, 2 * 10 + 1 + 8 + (1 + 5) + (7 + 9) + 2);

        b = block_of_raw(raw, raw_size, 2, 1000, &size);
        ASSERT_OK(sample_block_decode(NULL, b, size, &got, &n));
        free(b);
        ASSERT_EQ(n, 2);
        ASSERT_EQ(got[0].cpu, 200);
        ASSERT_EQ(got[1].cpu, 201);
        ASSERT_EQ(got[0].pid, 10);
        ASSERT_EQ(got[1].pid, 11);
        ASSERT_EQ(got[0].tid, 10);
        ASSERT_EQ(got[1].tid, 13);
        ASSERT_EQ(got[0].comm_id, 3);
        ASSERT_EQ(got[1].comm_id, 4);
        ASSERT_EQ(got[0].snapshot_id, INT64_C(1) << 56);
        ASSERT_EQ(got[1].snapshot_id, INT64_C(1) << 56);
        ASSERT_EQ(got[0].stack_id, 300);
        ASSERT_EQ(got[1].stack_id, 300 + (INT64_C(1) << 40));
        ASSERT_U64_EQ(got[0].count, 2);
        ASSERT_U64_EQ(got[1].count, 1);
        ASSERT_U64_EQ(got[0].period, 2000 + (UINT64_C(1) << 54));
        ASSERT_U64_EQ(got[1].period, 1000 + (uint64_t) INT64_MAX);
        ASSERT_EQ(got[0].frame_id, 7);
        ASSERT_EQ(got[1].frame_id, 7 + (INT64_C(1) << 13));
        ASSERT_EQ(got[0].cgroup_id, 1);
        ASSERT_EQ(got[1].cgroup_id, 2);
        ASSERT_EQ(got[1].kind, SAMPLE_KIND_CPU);
        free(got);

        /* The first stack varint made 11 bytes long: the columns still
         * have their 20 ends, one varint is too long. */
        memcpy(bad, raw, stack_at);
        memset(bad + stack_at, 0x80, 9);
        memcpy(bad + stack_at + 9, raw + stack_at, raw_size - stack_at);
        bad[stack_at] = 0xd8;
        bad[stack_at + 9] = 0x84;
        bad[stack_at + 10] = 0x00;
        b = block_of_raw(bad, raw_size + 9, 2, 1000, &size);
        got = NULL;
        ASSERT_ERROR(sample_block_decode(NULL, b, size, &got, &n), EBADMSG);
        free(b);

        /* The last varint's end byte gone: one varint short. */
        memcpy(bad, raw, raw_size);
        bad[raw_size - 1] |= 0x80;
        b = block_of_raw(bad, raw_size, 2, 1000, &size);
        ASSERT_ERROR(sample_block_decode(NULL, b, size, &got, &n), EBADMSG);
        free(b);

        /* A byte after the last column. */
        memcpy(bad, raw, raw_size);
        bad[raw_size] = 0;
        b = block_of_raw(bad, raw_size + 1, 2, 1000, &size);
        ASSERT_ERROR(sample_block_decode(NULL, b, size, &got, &n), EBADMSG);
        free(b);

        /* A CPU number past 32 bits (a 5-byte varint for the first). */
        static const uint8_t cpu_2_32[] = { 0x80, 0x80, 0x80, 0x80, 0x10 };
        memcpy(bad, cpu_2_32, sizeof cpu_2_32);
        memcpy(bad + sizeof cpu_2_32, raw + 2, raw_size - 2);
        b = block_of_raw(bad, raw_size + 3, 2, 1000, &size);
        ASSERT_ERROR(sample_block_decode(NULL, b, size, &got, &n), EBADMSG);
        free(b);
}

/* A block the schema-5 and -6 daemons wrote (format 1, no leaf frame
 * column): two entries, (cpu 0, pid 10, comm 3, stack 7, 2 samples,
 * period 2000) and (cpu 1, pid 11, tid 12, comm 4, snapshot 1, stack 9,
 * 1 sample, period 1000). */
TEST(format_1_blocks_still_decode) {
        static const uint8_t v1[] = {
                0x01, 0x02, 0xe8, 0x07, 0x28, 0xb5, 0x2f, 0xfd, 0x24, 0x10, 0x81, 0x00, 0x00, 0x00, 0x01, 0x14, 0x02,
                0x00, 0x02, 0x06, 0x02, 0x00, 0x02, 0x0e, 0x04, 0x01, 0x00, 0x00, 0x00, 0x0a, 0x98, 0x76, 0xa1,
        };
        block_entry *got = NULL;
        size_t n;

        ASSERT_OK(sample_block_decode(NULL, v1, sizeof v1, &got, &n));
        ASSERT_EQ(n, 2);
        ASSERT_EQ(got[0].pid, 10);
        ASSERT_EQ(got[0].tid, 10);
        ASSERT_EQ(got[0].comm_id, 3);
        ASSERT_EQ(got[0].stack_id, 7);
        ASSERT_U64_EQ(got[0].count, 2);
        ASSERT_U64_EQ(got[0].period, 2000);
        ASSERT_EQ(got[0].frame_id, 0);
        ASSERT_EQ(got[1].cpu, 1);
        ASSERT_EQ(got[1].tid, 12);
        ASSERT_EQ(got[1].snapshot_id, 1);
        ASSERT_EQ(got[1].stack_id, 9);
        ASSERT_U64_EQ(got[1].period, 1000);
        ASSERT_EQ(got[1].frame_id, 0);
        free(got);
}

/* A block of format 2 (before the cgroup column), made from a format-3
 * one by dropping its last column: the entries come back with cgroup 0. */
TEST(format_2_blocks_still_decode) {
        block_entry v[40], *got = NULL;
        uint8_t *data = NULL, *raw, *v2;
        size_t size, n, raw_size, v2_size;
        const uint8_t *p;
        uint64_t hdr[2];

        random_entries(v, 40);
        for (size_t i = 0; i < 40; i++)
                v[i].cgroup_id = (int64_t) (rnd() % 30);
        ASSERT_OK(sample_block_encode(NULL, v, 40, true, &data, &size));
        /* The header: format, n, mean (varints). */
        p = data + 1;
        for (int i = 0; i < 2; i++) {
                hdr[i] = 0;
                for (unsigned shift = 0;; shift += 7) {
                        hdr[i] |= (uint64_t) (*p & 0x7f) << shift;
                        if (!(*p++ & 0x80))
                                break;
                }
        }
        ASSERT_EQ(hdr[0], 40);
        raw_size = ZSTD_getFrameContentSize(p, size - (size_t) (p - data));
        raw = malloc(raw_size);
        ASSERT_TRUE(raw);
        ASSERT_EQ(ZSTD_decompress(raw, raw_size, p, size - (size_t) (p - data)), raw_size);
        /* The cgroup column is the last: 40 varints, 1 byte each here
         * (deltas of ids below 30 zigzag to below 64). */
        raw_size -= 40;
        v2 = malloc(64 + ZSTD_compressBound(raw_size));
        ASSERT_TRUE(v2);
        memcpy(v2, data, (size_t) (p - data));
        v2[0] = 2;
        v2_size = (size_t) (p - data) + ZSTD_compress(v2 + (p - data), ZSTD_compressBound(raw_size), raw, raw_size, 3);

        ASSERT_OK(sample_block_decode(NULL, v2, v2_size, &got, &n));
        ASSERT_EQ(n, 40);
        qsort(v, 40, sizeof *v, block_entry_cmp);
        for (size_t i = 0; i < n; i++) {
                ASSERT_EQ(got[i].cgroup_id, 0);
                ASSERT_EQ(got[i].stack_id, v[i].stack_id);
                ASSERT_EQ(got[i].frame_id, v[i].frame_id);
                ASSERT_U64_EQ(got[i].count, v[i].count);
        }
        free(got);
        free(v2);
        free(raw);
        free(data);
}

TEST(zero_count_is_refused) {
        block_entry v[1] = { { .count = 0 } };
        uint8_t *data = NULL;
        size_t size;

        ASSERT_ERROR(sample_block_encode(NULL, v, 1, true, &data, &size), EINVAL);
}

/* Rows as a writer makes them: ids mostly consecutive (gaps where a
 * migrated table had them); stack parents mostly the node before; values
 * of any size. Rows of 1 + dict_columns(kind) int64_t. */
static void random_rows(dict_kind kind, int64_t *v, size_t n, int64_t first) {
        size_t w = 1 + dict_columns(kind);
        int64_t id = first;

        for (size_t i = 0; i < n; i++) {
                int64_t *row = v + i * w;

                if (i > 0)
                        id += rnd() % 4 == 0 ? 1 + (int64_t) (rnd() % 100000) : 1;
                row[0] = id;
                if (kind == DICT_STACKS) {
                        switch (rnd() % 3) {
                        case 0: row[1] = id - 1; break;
                        case 1: row[1] = 0; break;
                        default: row[1] = (int64_t) (rnd() % (uint64_t) id); break;
                        }
                        row[2] = rnd() % 5 == 0 ? (int64_t) (rnd() >> 1) | 1 : 1 + (int64_t) (rnd() % 5000);
                } else {
                        row[1] = 1 + (int64_t) (rnd() % 2);                     /* kind */
                        row[2] = (int64_t) rnd_value(1 << 20);                  /* addr: any */
                        row[3] = (int64_t) (rnd_value(5000) >> 1);              /* symbol */
                        row[4] = (int64_t) rnd_value(4096);                     /* offset: any */
                        row[5] = (int64_t) (rnd_value(50) >> 1);                /* module */
                        row[6] = (int64_t) (rnd_value(50) >> 1);                /* build id */
                }
        }
}

TEST(dict_blocks_round_trip) {
        sample_codec *codec = sample_codec_new();

        ASSERT_TRUE(codec);
        for (int round = 0; round < 400; round++) {
                dict_kind kind = round % 4 < 2 ? DICT_STACKS : DICT_FRAMES;
                size_t w = 1 + dict_columns(kind);
                size_t n = round < 4 ? 1 : round < 8 ? DICT_BLOCK_MAX_ROWS : 1 + rnd() % DICT_BLOCK_MAX_ROWS;
                int64_t first = round % 3 == 0 ? 1 : (int64_t) (rnd() % ((uint64_t) 1 << 40)) + 1;
                int64_t *v = calloc(n * w, sizeof *v), *got = NULL;
                uint8_t *data = NULL;
                size_t size, m;

                ASSERT_TRUE(v);
                random_rows(kind, v, n, first);
                ASSERT_OK(dict_block_encode(round % 2 ? codec : NULL, kind, v, n, &data, &size));
                ASSERT_OK(dict_block_decode(round % 2 ? codec : NULL, kind, data, size, &got, &m));
                ASSERT_EQ(m, n);
                for (size_t i = 0; i < n * w; i++) {
                        if (got[i] != v[i])
                                fprintf(stderr, "round %d (kind %d) row %zu column %zu: %lld came back as %lld\n", round,
                                        (int) kind, i / w, i % w, (long long) v[i], (long long) got[i]);
                        ASSERT_EQ(got[i], v[i]);
                }
                /* A block of one kind is not read as the other. */
                ASSERT_ERROR(dict_block_decode(NULL, kind == DICT_STACKS ? DICT_FRAMES : DICT_STACKS, data, size, &got, &m),
                             EPROTONOSUPPORT);
                free(got);
                free(data);
                free(v);
        }
        sample_codec_free(codec);
}

TEST(typical_dict_blocks_are_small) {
        /* Chains of 12 under a few hundred roots, as a writer interns
         * them: a parent is the node before but at a chain's root. */
        enum { N = 16384 };
        int64_t *v = calloc(N * 7, sizeof *v);
        uint8_t *data = NULL;
        size_t size;

        ASSERT_TRUE(v);
        for (size_t i = 0; i < N; i++) {
                int64_t *row = v + i * 3;
                row[0] = 1000 + (int64_t) i;
                row[1] = i % 12 == 0 ? (int64_t) (rnd() % 1000) : row[0] - 1;
                row[2] = 1 + (int64_t) (rnd() % 3000);
        }
        ASSERT_OK(dict_block_encode(NULL, DICT_STACKS, v, N, &data, &size));
        fprintf(stderr, "%d stack nodes: %zu bytes, %.2f bytes a node\n", N, size, (double) size / N);
        ASSERT_LT(size, (size_t) N * 4);
        free(data);

        /* Frames of code as first seen: a few files, offsets rising. */
        for (size_t i = 0; i < N; i++) {
                int64_t *row = v + i * 7;
                row[0] = 1 + (int64_t) i;
                row[1] = 2;
                row[2] = 0x7f0000000000LL + (int64_t) (rnd() % (1 << 24));
                row[3] = 0;
                row[4] = (int64_t) (rnd() % (1 << 22));
                row[5] = 10 + (int64_t) (rnd() % 8);
                row[6] = row[5] + 100;
        }
        ASSERT_OK(dict_block_encode(NULL, DICT_FRAMES, v, N, &data, &size));
        fprintf(stderr, "%d user frames: %zu bytes, %.2f bytes a frame\n", N, size, (double) size / N);
        ASSERT_LT(size, (size_t) N * 16);
        free(data);
        free(v);
}

TEST(bad_dict_blocks_are_refused) {
        int64_t v[300 * 7], *got = NULL;
        uint8_t *data = NULL, *copy;
        size_t size, n;
        int refused = 0;

        /* What a block must not hold. */
        int64_t bad[][6] = {
                { 5, 5, 1, 6, 5, 1 },   /* own parent */
                { 5, 4, 1, 5, 4, 2 },   /* ids not increasing */
                { 5, -1, 1, 6, 5, 1 },  /* negative parent */
                { 5, 4, 0, 6, 5, 1 },   /* frame 0 */
                { 0, 0, 1, 6, 5, 1 },   /* id 0 */
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ASSERT_ERROR(dict_block_encode(NULL, DICT_STACKS, bad[i], 2, &data, &size), EINVAL);
        int64_t bad_frames[][7] = {
                { 1, 3, 0, 0, 0, 0, 0 },        /* kind 3 */
                { 1, 1, 0, -1, 0, 0, 0 },       /* negative symbol id */
                { 1, 2, 0, 0, 0, 0, -5 },       /* negative build id */
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_frames); i++)
                ASSERT_ERROR(dict_block_encode(NULL, DICT_FRAMES, bad_frames[i], 1, &data, &size), EINVAL);
        ASSERT_ERROR(dict_block_encode(NULL, DICT_STACKS, v, 0, &data, &size), EINVAL);

        for (dict_kind kind = 0; kind < _DICT_KIND_MAX; kind++) {
                size_t w = 1 + dict_columns(kind);

                random_rows(kind, v, 300, 77);
                ASSERT_OK(dict_block_encode(NULL, kind, v, 300, &data, &size));
                ASSERT_ERROR(dict_block_decode(NULL, kind, data, 0, &got, &n), EBADMSG);
                copy = malloc(size);
                ASSERT_TRUE(copy);
                memcpy(copy, data, size);
                copy[0] = 9;
                ASSERT_ERROR(dict_block_decode(NULL, kind, copy, size, &got, &n), EPROTONOSUPPORT);
                for (size_t len = 1; len < size; len++)
                        ASSERT_TRUE(dict_block_decode(NULL, kind, data, len, &got, &n) < 0);
                /* A flipped byte: refused, or rows that keep every rule. */
                refused = 0;
                for (size_t i = 0; i < size; i++) {
                        memcpy(copy, data, size);
                        copy[i] ^= 0x5a;
                        got = NULL;
                        if (dict_block_decode(NULL, kind, copy, size, &got, &n) < 0)
                                refused++;
                        else
                                for (size_t k = 0; k < n; k++) {
                                        ASSERT_TRUE(dict_row_valid(kind, got + k * w));
                                        ASSERT_TRUE(k == 0 || got[k * w] > got[(k - 1) * w]);
                                }
                        free(got);
                }
                fprintf(stderr, "kind %d: %d of %zu flipped bytes refused\n", (int) kind, refused, size);
                ASSERT_GT(refused, 0);
                free(copy);
                free(data);
        }
}

/* Sets of pids: members are found and no other, from the empty set to
 * 100,000 pids (each tested up to 1,000, a sample of them past that;
 * each test decodes the set), with pid 0 and UINT32_MAX; a set out of
 * order is refused, and so is every truncation of one. */
TEST(pid_sets_round_trip) {
        const size_t sizes[] = { 0, 1, 2, 17, 1000, 100000 };
        sample_codec *codec = sample_codec_new();
        uint32_t *pids = malloc(100000 * sizeof *pids);
        uint8_t *data = NULL;
        size_t size;
        bool has;

        ASSERT_TRUE(codec && pids);
        for (size_t k = 0; k < ELEMENTSOF(sizes); k++) {
                size_t n = sizes[k];
                uint32_t at = k % 2 ? 0 : 1 + (uint32_t) (rnd() % 5000);

                /* Mostly runs of forks (differences 1-3), a jump now and then. */
                for (size_t i = 0; i < n; i++) {
                        pids[i] = at;
                        at += (rnd() % 64 == 0) ? 1 + (uint32_t) (rnd() % 100000) : 1 + (uint32_t) (rnd() % 3);
                }
                if (n == 2)
                        pids[1] = UINT32_MAX;
                ASSERT_OK(pid_set_encode(k % 2 ? codec : NULL, pids, n, &data, &size));
                fprintf(stderr, "%zu pids: %zu bytes\n", n, size);
                if (n >= 1000)
                        ASSERT_LT(size, n);     /* under a byte a pid */
                for (size_t i = 0; i < n; i += n > 1000 ? 97 : 1) {
                        ASSERT_OK(pid_set_has(codec, data, size, pids[i], &has));
                        ASSERT_TRUE(has);
                        if (i + 1 < n && pids[i] + 1 < pids[i + 1]) {
                                ASSERT_OK(pid_set_has(codec, data, size, pids[i] + 1, &has));
                                ASSERT_TRUE(!has);
                        }
                }
                ASSERT_OK(pid_set_has(NULL, data, size, n > 0 ? pids[n - 1] + 1 : 7, &has));
                ASSERT_TRUE(!has);
                if (n > 0 && pids[0] > 0) {
                        ASSERT_OK(pid_set_has(NULL, data, size, pids[0] - 1, &has));
                        ASSERT_TRUE(!has);
                }
                /* Every truncation is refused. */
                for (size_t len = 0; len < size; len += size > 4096 ? 61 : 1)
                        ASSERT_TRUE(pid_set_has(NULL, data, len, 1, &has) < 0);
                free(data);
        }

        /* Out of order, or repeated: refused. */
        uint32_t bad[][2] = { { 5, 5 }, { 6, 5 } };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ASSERT_ERROR(pid_set_encode(NULL, bad[i], 2, &data, &size), EINVAL);
        /* A set whose greatest pid is not the one it ends at, of another
         * format, or that claims more pids than it holds. */
        uint32_t two[] = { 10, 20 };
        ASSERT_OK(pid_set_encode(NULL, two, 2, &data, &size));
        ASSERT_EQ(data[2], 20);
        data[2] = 21;
        ASSERT_ERROR(pid_set_has(NULL, data, size, 10, &has), EBADMSG);
        data[2] = 20;
        data[0] = PID_SET_FORMAT + 1;
        ASSERT_ERROR(pid_set_has(NULL, data, size, 10, &has), EPROTONOSUPPORT);
        data[0] = PID_SET_FORMAT;
        data[1] = 3;
        ASSERT_ERROR(pid_set_has(NULL, data, size, 10, &has), EBADMSG);
        free(data);
        free(pids);
        sample_codec_free(codec);
}
