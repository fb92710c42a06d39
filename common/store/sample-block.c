/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The sample block codec; the format is described in sample-block.h. */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "macro.h"
#include "store/sample-block.h"

/* zstd's fastest levels already find the long runs the columns are made
 * of; higher levels cost more CPU for a few percent. */
#define SAMPLE_BLOCK_ZSTD_LEVEL 1

#define N_COLUMNS 11      /* format 4; format 3 has the first 10, format 2 the first 9, format 1 the first 8 */
#define FRAME_COLUMN 8
#define VARINT_MAX 10

typedef struct wbuf {
        uint8_t *p;
        size_t len, alloc;
} wbuf;

static int wbuf_reserve(wbuf *b, size_t more) {
        size_t need;

        if (size_add(b->len, more, &need) < 0)
                return -ENOMEM;
        return GREEDY_REALLOC(b->p, b->alloc, need);
}

/* The caller reserved VARINT_MAX bytes. */
static void put_varint(wbuf *b, uint64_t v) {
        while (v >= 0x80) {
                b->p[b->len++] = (uint8_t) (v | 0x80);
                v >>= 7;
        }
        b->p[b->len++] = (uint8_t) v;
}

/* Of 8 bytes of varints (unaligned_read_le64()), the high bit of each
 * byte that ends one (its own high bit clear). */
static inline uint64_t varint_ends(uint64_t x) {
        return ~x & UINT64_C(0x8080808080808080);
}

/* The varint at p, of up to 8 bytes with 8 readable, without a branch on
 * each byte (their number is about random in the columns of stack ids and
 * periods, and mispredicted branches were the loop's cost): its length,
 * or 0 if it is longer. The same value as get_varint()'s loop gives. */
static inline unsigned varint_word(const uint8_t *p, uint64_t *ret) {
        uint64_t x = unaligned_read_le64(p), stop = varint_ends(x);
        unsigned len;

        if (stop == 0)
                return 0;
        len = (unsigned) __builtin_ctzll(stop) / 8 + 1;
        /* Its 8 * len low bits: a mask shifted by 8 * len - 1 (a shift
         * by 64 is undefined) from a value without bit 0. */
        x &= ~(UINT64_C(0xfffffffffffffffe) << (8 * len - 1));
        x &= UINT64_C(0x7f7f7f7f7f7f7f7f);
        /* 7-bit groups side by side: pairs, fours, eights. */
        x = ((x & UINT64_C(0x7f007f007f007f00)) >> 1) | (x & UINT64_C(0x007f007f007f007f));
        x = ((x & UINT64_C(0x3fff00003fff0000)) >> 2) | (x & UINT64_C(0x00003fff00003fff));
        x = ((x & UINT64_C(0x0fffffff00000000)) >> 4) | (x & UINT64_C(0x000000000fffffff));
        *ret = x;
        return len;
}

static inline bool get_varint(const uint8_t **p, const uint8_t *end, uint64_t *ret) {
        uint64_t v = 0;
        unsigned len;

        /* Most column values are deltas under 128: one byte. */
        if (*p < end && **p < 0x80) {
                *ret = *(*p)++;
                return true;
        }
        if (end - *p >= 8 && (len = varint_word(*p, ret)) > 0) {
                *p += len;
                return true;
        }
        for (unsigned shift = 0; shift < 64; shift += 7) {
                if (*p >= end)
                        return false;
                uint8_t c = *(*p)++;
                v |= (uint64_t) (c & 0x7f) << shift;
                if (!(c & 0x80)) {
                        *ret = v;
                        return true;
                }
        }
        return false;
}

/* get_varint() without its branch on one-byte values, for the columns
 * whose values are of any length (stack ids, periods, leaf frames), where
 * that branch is mispredicted. */
static inline __attribute__((always_inline)) bool get_varint_any(const uint8_t **p, const uint8_t *end, uint64_t *ret) {
        unsigned len;

        if (end - *p >= 8 && (len = varint_word(*p, ret)) > 0) {
                *p += len;
                return true;
        }
        return get_varint(p, end, ret);
}

/* Past n varints from p, or NULL if the data end first: counts the bytes
 * that end one (high bit clear), eight at a time. */
static const uint8_t *skip_varints(const uint8_t *p, const uint8_t *end, uint64_t n) {
        while (n > 0 && end - p >= 8) {
                uint64_t stop = varint_ends(unaligned_read_le64(p));
                unsigned k;

                /* One bit a byte, added up in the top byte. */
                k = (unsigned) (((stop >> 7) * UINT64_C(0x0101010101010101)) >> 56);
                if (k < n) {
                        n -= k;
                        p += 8;
                        continue;
                }
                /* The n-th is in this word: drop the n - 1 before it. */
                while (--n > 0)
                        stop &= stop - 1;
                return p + __builtin_ctzll(stop) / 8 + 1;
        }
        for (; n > 0; p++) {
                if (p >= end)
                        return NULL;
                if (*p < 0x80)
                        n--;
        }
        return p;
}

static uint64_t zigzag(int64_t v) {
        return ((uint64_t) v << 1) ^ (uint64_t) (v >> 63);
}

static int64_t unzigzag(uint64_t v) {
        return (int64_t) (v >> 1) ^ -(int64_t) (v & 1);
}

static inline int entry_cmp(const block_entry *x, const block_entry *y) {
#define CMP(f) if (x->f != y->f) return x->f < y->f ? -1 : 1
        CMP(cpu);
        CMP(kind);
        CMP(pid);
        CMP(tid);
        CMP(comm_id);
        CMP(cgroup_id);
        CMP(snapshot_id);
        CMP(stack_id);
        CMP(frame_id);
#undef CMP
        return 0;
}

struct sample_codec {
        ZSTD_CCtx *cctx;
        ZSTD_DCtx *dctx;
        /* The encoders' memory, kept from one block to the next: a
         * bucket of 16,384 entries takes up to 1.8 MB of columns (and
         * the sort 256 KiB of pointers), which malloc() would map and
         * unmap at each block, so that every page of them faulted again. */
        wbuf cols;
        const block_entry **sort_p;
        size_t sort_alloc;      /* entries sort_p has room for (two pointers each) */
};

/* Blocks of more entries than the writer's accumulators hold (a bucket
 * block of an older version, fed again) are encoded in memory of their
 * own: the codec keeps at most this much for the daemon's life. */
#define CODEC_KEEP_MAX_ENTRIES (16u * 1024)

/* The codec whose memory a block of n entries is encoded in: NULL past
 * that bound. */
static sample_codec *codec_keeping(sample_codec *c, size_t n) {
        return n <= CODEC_KEEP_MAX_ENTRIES ? c : NULL;
}

size_t sample_codec_memory_bytes(const sample_codec *c) {
        return c ? c->cols.alloc + c->sort_alloc * 2 * sizeof *c->sort_p : 0;
}

int block_entry_cmp(const void *a, const void *b) {
        return entry_cmp(a, b);
}

/* Sorts v by block_entry_cmp(), stably: a merge sort of pointers with
 * the comparison inlined, then the 72-byte entries moved into place
 * along the cycles of the permutation (no copy of the block). qsort()
 * took ~700 instructions an entry here, most of them calls through its
 * comparison pointer, and glibc's takes as much memory for 72-byte
 * entries (it sorts 2n pointers too). Without memory for the pointers,
 * qsort() it is. */
void sample_block_sort(sample_codec *codec, block_entry *v, size_t n) {
        enum { RUN = 16 };
        _cleanup_free_ const block_entry **own_p = NULL;
        const block_entry **a, **b, **p;
        size_t sorted = 1;

        /* A block cut from a sorted accumulator is in order already: a
         * pass of n comparisons instead of the sort's n log n. Another
         * is found out of order within a few entries. */
        while (sorted < n && entry_cmp(v + sorted - 1, v + sorted) <= 0)
                sorted++;
        if (sorted >= n)
                return;
        codec = codec_keeping(codec, n);
        if (codec && codec->sort_alloc < n) {
                const block_entry **np = reallocarray(codec->sort_p, 2 * n, sizeof *np);

                if (np) {
                        codec->sort_p = np;
                        codec->sort_alloc = n;
                }
        }
        if (codec && codec->sort_alloc >= n)
                p = codec->sort_p;
        else
                p = own_p = malloc(2 * n * sizeof *p);
        if (!p) {
                qsort(v, n, sizeof *v, block_entry_cmp);
                return;
        }
        a = p;
        b = p + n;
        for (size_t i = 0; i < n; i++) {
                size_t j = i;

                /* Insertion sort within runs of RUN. */
                for (; j % RUN != 0 && entry_cmp(v + i, a[j - 1]) < 0; j--)
                        a[j] = a[j - 1];
                a[j] = v + i;
        }
        for (size_t width = RUN; width < n; width *= 2) {
                for (size_t lo = 0; lo < n; lo += 2 * width) {
                        size_t mid = MIN(lo + width, n), hi = MIN(lo + 2 * width, n);
                        size_t i = lo, j = mid, o = lo;

                        while (i < mid && j < hi)
                                b[o++] = entry_cmp(a[j], a[i]) < 0 ? a[j++] : a[i++];
                        while (i < mid)
                                b[o++] = a[i++];
                        while (j < hi)
                                b[o++] = a[j++];
                }
                SWAP(a, b);
        }
        /* Position i takes the entry a[i] points to. Each cycle of that
         * permutation is walked once: its first entry waits aside while
         * every other moves into the place that takes it; a place done
         * is marked NULL. */
        for (size_t i = 0; i < n; i++) {
                if (!a[i])
                        continue;
                if ((size_t) (a[i] - v) == i) {
                        a[i] = NULL;
                        continue;
                }
                block_entry first = v[i];

                for (size_t j = i;;) {
                        size_t from = (size_t) (a[j] - v);

                        a[j] = NULL;
                        if (from == i) {
                                v[j] = first;
                                break;
                        }
                        v[j] = v[from];
                        j = from;
                }
        }
}

/* Column c of entry i, given entry i - 1 (prev) and the mean period. */
static inline __attribute__((always_inline)) uint64_t column_value(unsigned c, const block_entry *e,
                                                                    const block_entry *prev, uint64_t mean) {
        switch (c) {
        case 0: return e->cpu - prev->cpu;
        case 1: return zigzag((int64_t) e->pid - (int64_t) prev->pid);
        case 2: return zigzag((int64_t) e->tid - (int64_t) e->pid);
        /* Ids may be anything: differences wrap, as the decoder's sums do. */
        case 3: return zigzag((int64_t) ((uint64_t) e->comm_id - (uint64_t) prev->comm_id));
        case 4: return zigzag((int64_t) ((uint64_t) e->snapshot_id - (uint64_t) prev->snapshot_id));
        case 5: return zigzag((int64_t) ((uint64_t) e->stack_id - (uint64_t) prev->stack_id));
        case 6: return e->count - 1;
        case 7: return zigzag((int64_t) (e->period - e->count * mean));
        case FRAME_COLUMN: return zigzag((int64_t) ((uint64_t) e->frame_id - (uint64_t) prev->frame_id));
        case FRAME_COLUMN + 1: return zigzag((int64_t) ((uint64_t) e->cgroup_id - (uint64_t) prev->cgroup_id));
        default: return zigzag((int64_t) e->kind - (int64_t) prev->kind);
        }
}

/* Column c of v[0..n): the first entry's values against zeros, each
 * next one's against the one before it. */
static inline __attribute__((always_inline)) void put_column(wbuf *cols, unsigned c, const block_entry *v, size_t n,
                                                             uint64_t mean) {
        static const block_entry none;

        for (size_t i = 0; i < n; i++)
                put_varint(cols, column_value(c, v + i, i > 0 ? v + i - 1 : &none, mean));
}

/* Columns of n entries (need bytes) to encode into: the codec's,
 * emptied, or a buffer of the caller's (*ret_owned, to free) without a
 * codec or for more than CODEC_KEEP_MAX_ENTRIES. */
static int cols_begin(sample_codec *codec, size_t n, size_t need, wbuf *local, wbuf **ret, uint8_t **ret_owned) {
        wbuf *b;
        int r;

        codec = codec_keeping(codec, n);
        b = codec ? &codec->cols : local;

        b->len = 0;
        r = wbuf_reserve(b, need);
        if (r < 0)
                return r;
        *ret = b;
        *ret_owned = codec ? NULL : b->p;
        return 0;
}

sample_codec *sample_codec_new(void) {
        sample_codec *c = calloc(1, sizeof *c);

        if (!c)
                return NULL;
        c->cctx = ZSTD_createCCtx();
        c->dctx = ZSTD_createDCtx();
        if (!c->cctx || !c->dctx)
                return sample_codec_free(c);
        return c;
}

sample_codec *sample_codec_free(sample_codec *c) {
        if (c) {
                ZSTD_freeCCtx(c->cctx);
                ZSTD_freeDCtx(c->dctx);
                free(c->cols.p);
                free(c->sort_p);
                free(c);
        }
        return NULL;
}

/* Header (format, two varints) and the compressed columns: a block. */
static int block_finish(sample_codec *codec, uint8_t format, uint64_t h1, uint64_t h2, const wbuf *cols,
                        uint8_t **ret, size_t *ret_size) {
        size_t bound = ZSTD_compressBound(cols->len);
        wbuf out = {};
        int r = wbuf_reserve(&out, 1 + 2 * VARINT_MAX + bound);

        if (r < 0)
                return r;
        out.p[out.len++] = format;
        put_varint(&out, h1);
        put_varint(&out, h2);
        size_t z = codec ? ZSTD_compressCCtx(codec->cctx, out.p + out.len, bound, cols->p, cols->len,
                                             SAMPLE_BLOCK_ZSTD_LEVEL)
                         : ZSTD_compress(out.p + out.len, bound, cols->p, cols->len, SAMPLE_BLOCK_ZSTD_LEVEL);
        if (ZSTD_isError(z)) {
                free(out.p);
                return -ENOMEM;
        }
        out.len += z;
        *ret = out.p;
        *ret_size = out.len;
        return 0;
}

/* The header of a block of a format in [lo, hi]; *ret_p: where the zstd
 * frame starts. */
static int block_header(const uint8_t *data, size_t size, uint8_t lo, uint8_t hi, uint8_t *ret_format,
                        uint64_t *ret_h1, uint64_t *ret_h2, const uint8_t **ret_p) {
        const uint8_t *p = data, *end = data + size;

        if (size < 1)
                return -EBADMSG;
        if (*p < lo || *p > hi)
                return -EPROTONOSUPPORT;
        *ret_format = *p++;
        if (!get_varint(&p, end, ret_h1) || !get_varint(&p, end, ret_h2))
                return -EBADMSG;
        *ret_p = p;
        return 0;
}

/* The columns of n entries of n_columns varints each (1..10 bytes): the
 * frame must say a size in that range, and is decompressed into exactly
 * that much. */
static int block_inflate(sample_codec *codec, const uint8_t *p, const uint8_t *end, uint64_t n, unsigned n_columns,
                         uint8_t **ret, size_t *ret_size) {
        uint64_t raw_size = ZSTD_getFrameContentSize(p, (size_t) (end - p));
        uint8_t *raw;

        if (raw_size == ZSTD_CONTENTSIZE_ERROR || raw_size == ZSTD_CONTENTSIZE_UNKNOWN ||
            raw_size < n * n_columns || raw_size > n * n_columns * VARINT_MAX)
                return -EBADMSG;
        raw = malloc(raw_size);
        if (!raw)
                return -ENOMEM;
        size_t got = codec ? ZSTD_decompressDCtx(codec->dctx, raw, raw_size, p, (size_t) (end - p))
                           : ZSTD_decompress(raw, raw_size, p, (size_t) (end - p));
        if (ZSTD_isError(got) || got != raw_size) {
                free(raw);
                return -EBADMSG;
        }
        *ret = raw;
        *ret_size = raw_size;
        return 0;
}

int sample_block_encode(sample_codec *codec, block_entry *v, size_t n, bool with_frames, uint8_t **ret,
                        size_t *ret_size) {
        _cleanup_free_ uint8_t *raw = NULL;
        wbuf local = {}, *cols;
        uint64_t count = 0, period = 0, mean;
        bool kinds = false;
        int r;

        if (n > SAMPLE_BLOCK_MAX_ENTRIES)
                return -E2BIG;
        for (size_t i = 0; i < n; i++) {
                if (v[i].count == 0 || v[i].kind >= _SAMPLE_KIND_MAX)
                        return -EINVAL;
                count += v[i].count;
                period += v[i].period;
                kinds = kinds || v[i].kind != SAMPLE_KIND_CPU;
        }
        mean = count > 0 ? period / count : 0;
        sample_block_sort(codec, v, n);

        r = cols_begin(codec, n, n * N_COLUMNS * VARINT_MAX, &local, &cols, &raw);
        if (r < 0)
                return r;
        /* Blocks of CPU samples alone are format 3: the kind column
         * would be n zeros. */
        for (unsigned c = 0; c < (kinds ? N_COLUMNS : N_COLUMNS - 1); c++) {
                if (c == FRAME_COLUMN && !with_frames) {
                        memset(cols->p + cols->len, 0, n);
                        cols->len += n;
                        continue;
                }
                /* A loop of its own for each column, c a constant in it. */
                _Static_assert(N_COLUMNS == 11, "a case per column");
                switch (c) {
#define COLUMN(k) case k: put_column(cols, k, v, n, mean); break
                COLUMN(0); COLUMN(1); COLUMN(2); COLUMN(3); COLUMN(4); COLUMN(5);
                COLUMN(6); COLUMN(7); COLUMN(8); COLUMN(9);
#undef COLUMN
                default: put_column(cols, N_COLUMNS - 1, v, n, mean); break;
                }
        }

        return block_finish(codec, kinds ? SAMPLE_BLOCK_FORMAT : 3, n, mean, cols, ret, ret_size);
}

int sample_block_decode(sample_codec *codec, const uint8_t *data, size_t size, block_entry **ret, size_t *ret_n) {
        return sample_block_decode_some(codec, data, size, SAMPLE_NEED_ALL, ret, ret_n);
}

/* Entry by entry, with a cursor and a running sum for each column, each
 * entry written once: 5-12 % faster than column by column
 * (bench/RESULTS.md). A cursor reads only its own column: each varint
 * ends at a byte that skip_varints() counted. Inlined for each `need`
 * sample_block_decode_some() names, so that the columns left out cost no
 * test an entry. */
static inline __attribute__((always_inline)) int decode_entries(const uint8_t **cur, const uint8_t *qend, size_t n,
                                                                uint64_t mean, unsigned columns, unsigned need,
                                                                block_entry *v) {
        uint32_t cpu = 0;
        uint64_t pid = 0, comm = 0, snap = 0, stack = 0, frame = 0, cg = 0, kind = 0, x;
        bool leafless = false;  /* an entry has no leaf frame */
#define NEXT_WITH(get, c)                                       \
        do {                                                    \
                if (!get(&cur[c], qend, &x))                    \
                        return -EBADMSG;                        \
        } while (0)
#define NEXT(c) NEXT_WITH(get_varint, c)
#define NEXT_ANY(c) NEXT_WITH(get_varint_any, c)
        for (size_t i = 0; i < n; i++) {
                uint32_t this_pid;
                uint64_t count;
                block_entry *e = v + i;

                NEXT(0);
                if (x > UINT32_MAX - cpu)
                        return -EBADMSG;
                cpu += (uint32_t) x;
                this_pid = 0;
                if (need & (SAMPLE_NEED_PID | SAMPLE_NEED_TID)) {
                        NEXT(1);
                        pid += (uint64_t) unzigzag(x);
                        this_pid = (uint32_t) pid;
                        pid = this_pid;
                }
                e->cpu = cpu;
                e->pid = this_pid;
                e->tid = 0;
                if (need & SAMPLE_NEED_TID) {
                        NEXT(2);
                        e->tid = (uint32_t) ((uint64_t) this_pid + (uint64_t) unzigzag(x));
                }
                NEXT(3);
                comm += (uint64_t) unzigzag(x);
                e->comm_id = (int64_t) comm;
                e->snapshot_id = 0;
                if (need & SAMPLE_NEED_SNAPSHOT) {
                        NEXT(4);
                        snap += (uint64_t) unzigzag(x);
                        e->snapshot_id = (int64_t) snap;
                }
                e->stack_id = 0;
                if (need & SAMPLE_NEED_STACK) {
                        NEXT_ANY(5);
                        stack += (uint64_t) unzigzag(x);
                        e->stack_id = (int64_t) stack;
                }
                NEXT(6);
                if (x == UINT64_MAX)
                        return -EBADMSG;
                count = x + 1;
                e->count = count;
                e->period = 0;
                if (need & SAMPLE_NEED_PERIOD) {
                        NEXT_ANY(7);
                        e->period = count * mean + (uint64_t) unzigzag(x);
                }
                if (columns > FRAME_COLUMN) {
                        NEXT_ANY(FRAME_COLUMN);
                        frame += (uint64_t) unzigzag(x);
                }
                e->frame_id = (int64_t) frame;
                /* A folded process has no stack either (fold_out()). */
                leafless = leafless ||
                           (frame == 0 && (!(need & (SAMPLE_NEED_PID | SAMPLE_NEED_TID)) || this_pid != SAMPLE_PID_BRIEF));
                if (columns > FRAME_COLUMN + 1) {
                        NEXT(FRAME_COLUMN + 1);
                        cg += (uint64_t) unzigzag(x);
                }
                e->cgroup_id = (int64_t) cg;
                if (columns > FRAME_COLUMN + 2) {
                        NEXT(FRAME_COLUMN + 2);
                        kind += (uint64_t) unzigzag(x);         /* wraps, as the encoder's differences */
                        if (kind >= _SAMPLE_KIND_MAX)
                                return -EBADMSG;
                }
                e->kind = (uint32_t) kind;
        }
        if (!(need & SAMPLE_NEED_STACK) && leafless)
                /* Their leaf frames are found from their stacks. */
                for (size_t i = 0; i < n; i++) {
                        NEXT_ANY(5);
                        stack += (uint64_t) unzigzag(x);
                        v[i].stack_id = (int64_t) stack;
                }
#undef NEXT_ANY
#undef NEXT
#undef NEXT_WITH
        return 0;
}

int sample_block_decode_some(sample_codec *codec, const uint8_t *data, size_t size, unsigned need, block_entry **ret,
                             size_t *ret_n) {
        _cleanup_free_ uint8_t *raw = NULL;
        _cleanup_free_ block_entry *v = NULL;
        const uint8_t *p, *end = data + size;
        uint64_t n, mean;
        size_t raw_size;
        uint8_t format;
        unsigned columns;
        int r;

        r = block_header(data, size, 1, SAMPLE_BLOCK_FORMAT, &format, &n, &mean, &p);
        if (r < 0)
                return r;
        if (n > SAMPLE_BLOCK_MAX_ENTRIES)
                return -EBADMSG;
        if (n == 0) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }

        /* Format 1 blocks have no leaf frame column (frame_id 0), format 2
         * ones no cgroup column (cgroup_id 0), format 3 no kind column
         * (CPU samples). */
        columns = format == 1 ? FRAME_COLUMN : format == 2 ? FRAME_COLUMN + 1 : format == 3 ? FRAME_COLUMN + 2 : N_COLUMNS;
        r = block_inflate(codec, p, end, n, columns, &raw, &raw_size);
        if (r < 0)
                return r;
        /* Where each column starts; the last one ends where the data do. */
        const uint8_t *cur[N_COLUMNS], *q = raw, *qend = raw + raw_size;
        for (unsigned c = 0; c < columns; c++) {
                cur[c] = q;
                q = skip_varints(q, qend, n);
                if (!q)
                        return -EBADMSG;
        }
        if (q != qend)
                return -EBADMSG;
        v = malloc(n * sizeof *v);
        if (!v)
                return -ENOMEM;

        if (need == SAMPLE_NEED_ALL)
                r = decode_entries(cur, qend, n, mean, columns, SAMPLE_NEED_ALL, v);
        else if (need == 0)
                r = decode_entries(cur, qend, n, mean, columns, 0, v);
        else if (need == SAMPLE_NEED_PID)
                r = decode_entries(cur, qend, n, mean, columns, SAMPLE_NEED_PID, v);
        else
                r = decode_entries(cur, qend, n, mean, columns, need, v);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

/* ---- pid sets ---- */

int pid_set_encode(sample_codec *codec, const uint32_t *pids, size_t n, uint8_t **ret, size_t *ret_size) {
        _cleanup_free_ uint8_t *raw = NULL;
        wbuf local = {}, *cols;
        int r;

        if (n > SAMPLE_BLOCK_MAX_ENTRIES)
                return -E2BIG;
        for (size_t i = 1; i < n; i++)
                if (pids[i] <= pids[i - 1])
                        return -EINVAL;
        if (n == 0) {
                wbuf out = {};

                r = wbuf_reserve(&out, 3);
                if (r < 0)
                        return r;
                out.p[out.len++] = PID_SET_FORMAT;
                put_varint(&out, 0);
                put_varint(&out, 0);
                *ret = out.p;
                *ret_size = out.len;
                return 0;
        }
        r = cols_begin(codec, n, n * VARINT_MAX, &local, &cols, &raw);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                put_varint(cols, i == 0 ? pids[0] : (uint64_t) (pids[i] - pids[i - 1] - 1));
        return block_finish(codec, PID_SET_FORMAT, n, pids[n - 1], cols, ret, ret_size);
}

int pid_set_has(sample_codec *codec, const uint8_t *data, size_t size, uint32_t pid, bool *ret) {
        _cleanup_free_ uint8_t *raw = NULL;
        const uint8_t *p, *q, *qend;
        uint64_t n, max, at = 0;
        size_t raw_size;
        uint8_t format;
        int r;

        r = block_header(data, size, PID_SET_FORMAT, PID_SET_FORMAT, &format, &n, &max, &p);
        if (r < 0)
                return r;
        if (n > SAMPLE_BLOCK_MAX_ENTRIES || max > UINT32_MAX || (n == 0 && (max != 0 || p != data + size)))
                return -EBADMSG;
        *ret = false;
        if (n == 0)
                return 0;
        /* Checked whole, as a block is, whatever pid is asked. */
        r = block_inflate(codec, p, data + size, n, 1, &raw, &raw_size);
        if (r < 0)
                return r;
        q = raw;
        qend = raw + raw_size;
        for (uint64_t i = 0; i < n; i++) {
                uint64_t x;

                if (!get_varint(&q, qend, &x) || x > UINT32_MAX || (i > 0 && x >= UINT32_MAX - at))
                        return -EBADMSG;
                at = i == 0 ? x : at + x + 1;
                if (at == pid)
                        *ret = true;
        }
        if (q != qend || at != max) {
                *ret = false;
                return -EBADMSG;
        }
        return 0;
}

/* ---- dictionary blocks ---- */

enum { COL_DELTA, COL_PARENT };

static const struct dict_spec {
        uint8_t format;
        unsigned columns;
        uint8_t mode[DICT_MAX_COLUMNS];
} dict_specs[_DICT_KIND_MAX] = {
        [DICT_STACKS] = { 1, 2, { COL_PARENT, COL_DELTA } },
        [DICT_FRAMES] = { 2, 6, { COL_DELTA, COL_DELTA, COL_DELTA, COL_DELTA, COL_DELTA, COL_DELTA } },
};

unsigned dict_columns(dict_kind kind) {
        return kind < _DICT_KIND_MAX ? dict_specs[kind].columns : 0;
}

/* The rules a row keeps beyond its encoding: what makes walking a stack up
 * terminate, and the ranges queries rely on. */
bool dict_row_valid(dict_kind kind, const int64_t *row) {
        if (row[0] <= 0)
                return false;
        if (kind == DICT_STACKS)
                return row[1] >= 0 && row[1] < row[0] && row[2] > 0;
        /* kind, addr, symbol, offset, module, build_id */
        return (row[1] == 1 || row[1] == 2) && row[3] >= 0 && row[5] >= 0 && row[6] >= 0;
}

int dict_block_encode(sample_codec *codec, dict_kind kind, const int64_t *rows, size_t n, uint8_t **ret,
                      size_t *ret_size) {
        _cleanup_free_ uint8_t *raw = NULL;
        const struct dict_spec *sp;
        size_t w;
        wbuf local = {}, *cols;
        int r;

        if (kind >= _DICT_KIND_MAX || n == 0 || n > DICT_BLOCK_MAX_ROWS)
                return -EINVAL;
        sp = dict_specs + kind;
        w = 1 + sp->columns;
        for (size_t i = 0; i < n; i++)
                if (!dict_row_valid(kind, rows + i * w) || (i > 0 && rows[i * w] <= rows[(i - 1) * w]))
                        return -EINVAL;

        r = cols_begin(codec, n, n * w * VARINT_MAX, &local, &cols, &raw);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                put_varint(cols, i == 0 ? 0 : (uint64_t) (rows[i * w] - rows[(i - 1) * w] - 1));
        for (unsigned c = 0; c < sp->columns; c++)
                for (size_t i = 0; i < n; i++) {
                        const int64_t *row = rows + i * w;

                        if (sp->mode[c] == COL_PARENT)
                                put_varint(cols, (uint64_t) (row[0] - row[1 + c]));
                        else    /* differences wrap, as the decoder's sums do */
                                put_varint(cols, zigzag((int64_t) ((uint64_t) row[1 + c] -
                                                                    (i == 0 ? 0 : (uint64_t) row[1 + c - w]))));
                }

        return block_finish(codec, sp->format, n, (uint64_t) rows[0], cols, ret, ret_size);
}

int dict_block_decode(sample_codec *codec, dict_kind kind, const uint8_t *data, size_t size, int64_t **ret,
                      size_t *ret_n) {
        _cleanup_free_ uint8_t *raw = NULL;
        _cleanup_free_ int64_t *v = NULL;
        const struct dict_spec *sp;
        const uint8_t *p, *end = data + size;
        uint64_t n, first, id;
        size_t raw_size, w;
        uint8_t format;
        int r;

        if (kind >= _DICT_KIND_MAX)
                return -EINVAL;
        sp = dict_specs + kind;
        w = 1 + sp->columns;
        r = block_header(data, size, sp->format, sp->format, &format, &n, &first, &p);
        if (r < 0)
                return r;
        if (n == 0 || n > DICT_BLOCK_MAX_ROWS || first == 0 || first > INT64_MAX)
                return -EBADMSG;
        r = block_inflate(codec, p, end, n, (unsigned) w, &raw, &raw_size);
        if (r < 0)
                return r;
        v = malloc(n * w * sizeof *v);  /* every value is written below */
        if (!v)
                return -ENOMEM;

        const uint8_t *q = raw, *qend = raw + raw_size;
        id = first;
        for (size_t i = 0; i < n; i++) {
                uint64_t x;

                if (!get_varint(&q, qend, &x))
                        return -EBADMSG;
                if (i > 0) {
                        /* Strictly increasing, and within int64_t. */
                        if (x >= (uint64_t) INT64_MAX - id)
                                return -EBADMSG;
                        id += x + 1;
                }
                v[i * w] = (int64_t) id;
        }
        for (unsigned c = 0; c < sp->columns; c++)
                for (size_t i = 0; i < n; i++) {
                        int64_t *row = v + i * w;
                        uint64_t x;

                        if (!get_varint(&q, qend, &x))
                                return -EBADMSG;
                        if (sp->mode[c] == COL_PARENT) {
                                if (x == 0 || x > (uint64_t) row[0])
                                        return -EBADMSG;
                                row[1 + c] = row[0] - (int64_t) x;
                        } else
                                row[1 + c] = (int64_t) ((i == 0 ? 0 : (uint64_t) row[1 + c - w]) +
                                                        (uint64_t) unzigzag(x));
                }
        if (q != qend)
                return -EBADMSG;
        for (size_t i = 0; i < n; i++)
                if (!dict_row_valid(kind, v + i * w))
                        return -EBADMSG;

        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}
