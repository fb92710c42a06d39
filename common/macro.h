/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Small macros and inline helpers used everywhere: MIN/MAX that evaluate
 * their arguments once, cleanup attributes, overflow-checked sizes and
 * the growth helper (GREEDY_REALLOC, after systemd's). */

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
/* MIN and MAX evaluate each argument once (MIN(x++, y) is safe); in a
 * constant expression (an array size, a static initializer) use
 * CONST_MIN/CONST_MAX, which evaluate twice but only take constants. */
#define UNIQ_CAT_(a, b) a##b
#define UNIQ_T_(x, n) UNIQ_CAT_(x, n)
#define MIN_(a, b, n)                                                                    \
        ({                                                                              \
                const __typeof__(a) UNIQ_T_(min_a_, n) = (a);                           \
                const __typeof__(b) UNIQ_T_(min_b_, n) = (b);                           \
                UNIQ_T_(min_a_, n) < UNIQ_T_(min_b_, n) ? UNIQ_T_(min_a_, n) : UNIQ_T_(min_b_, n); \
        })
#define MAX_(a, b, n)                                                                    \
        ({                                                                              \
                const __typeof__(a) UNIQ_T_(max_a_, n) = (a);                           \
                const __typeof__(b) UNIQ_T_(max_b_, n) = (b);                           \
                UNIQ_T_(max_a_, n) > UNIQ_T_(max_b_, n) ? UNIQ_T_(max_a_, n) : UNIQ_T_(max_b_, n); \
        })
#define MIN(a, b) MIN_(a, b, __COUNTER__)
#define MAX(a, b) MAX_(a, b, __COUNTER__)
#define CONST_MIN(a, b) __builtin_choose_expr(__builtin_constant_p(a) && __builtin_constant_p(b), \
                                              ((a) < (b) ? (a) : (b)), (void) 0)
#define CONST_MAX(a, b) __builtin_choose_expr(__builtin_constant_p(a) && __builtin_constant_p(b), \
                                              ((a) > (b) ? (a) : (b)), (void) 0)
#define SWAP(a, b) do { __typeof__(a) swap_tmp_ = (a); (a) = (b); (b) = swap_tmp_; } while (0)

/* The value of a hex digit (either case), or -1. */
static inline int unhexchar(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

static inline bool streq(const char *a, const char *b) {
        return strcmp(a, b) == 0;
}

#define NSEC_PER_SEC  1000000000ULL
#define NSEC_PER_MSEC 1000000ULL
#define NSEC_PER_USEC 1000ULL
#define USEC_PER_SEC  1000000ULL

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void closep(int *fd) {
        if (*fd >= 0)
                close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

static inline void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

/* For types with a NULL-accepting destructor `type *func(type *)`. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                 \
        static inline void func##p(type *p) {                  \
                if (*p)                                         \
                        func(*p);                               \
        }

/* Hand ownership out of a _cleanup_ variable. */
#define TAKE_PTR(p)                             \
        ({                                      \
                __typeof__(p) _tp = (p);        \
                (p) = NULL;                     \
                _tp;                            \
        })

#define TAKE_FD(fd)                             \
        ({                                      \
                int _tfd = (fd);                \
                (fd) = -1;                      \
                _tfd;                           \
        })

/* errno as a negative value, never 0 (for calls that failed but left errno unset). */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

/* Overflow-checked size arithmetic for lengths that come from outside. */
static inline int size_add(size_t a, size_t b, size_t *ret) {
        return __builtin_add_overflow(a, b, ret) ? -EOVERFLOW : 0;
}

/* Makes room for need elements of size bytes in the array *p, which has
 * room for *alloc: grows it to the larger of need, twice *alloc and 16
 * (need alone where that would overflow), contents kept. 0 (also when
 * there is room already) or -ENOMEM, *p and *alloc unchanged then. The
 * model is systemd's GREEDY_REALLOC. */
static inline int greedy_realloc(void **p, size_t *alloc, size_t need, size_t size) {
        size_t m;
        void *q;

        if (need <= *alloc)
                return 0;
        m = *alloc > SIZE_MAX / 2 ? need : MAX(need, *alloc * 2);
        m = MAX(m, (size_t) 16);
        if (m > SIZE_MAX / size) {
                if (need > SIZE_MAX / size)
                        return -ENOMEM;
                m = need;
        }
        q = realloc(*p, m * size);
        if (!q)
                return -ENOMEM;
        *p = q;
        *alloc = m;
        return 0;
}
#define GREEDY_REALLOC(p, alloc, need) greedy_realloc((void **) &(p), &(alloc), (need), sizeof *(p))

/* 4 or 8 bytes at p, at any alignment, read or written as a
 * little-endian number (file formats of our own). */
static inline uint32_t unaligned_read_le32(const void *p) {
        uint32_t v;

        memcpy(&v, p, sizeof v);
        return le32toh(v);
}

static inline uint64_t unaligned_read_le64(const void *p) {
        uint64_t v;

        memcpy(&v, p, sizeof v);
        return le64toh(v);
}

static inline void unaligned_write_le32(void *p, uint32_t v) {
        v = htole32(v);
        memcpy(p, &v, sizeof v);
}

static inline void unaligned_write_le64(void *p, uint64_t v) {
        v = htole64(v);
        memcpy(p, &v, sizeof v);
}

static inline int u64_cmp(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return x < y ? -1 : x > y;
}

/* Sorts v[0..n) ascending (v may be NULL with n 0: qsort()'s may not). */
static inline void sort_u64(uint64_t *v, size_t n) {
        if (n > 1)
                qsort(v, n, sizeof *v, u64_cmp);
}

/* Makes room for one more element after n (doubling). */
static inline int array_reserve_one(void **p, size_t *alloc, size_t n, size_t elem) {
        return n < SIZE_MAX ? greedy_realloc(p, alloc, n + 1, elem) : -ENOMEM;
}
