/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The helpers of macro.h that are easy to get subtly wrong. */
#include <assert.h>

#include "macro.h"
#include "test.h"

/* Each argument is evaluated once: the old MIN(a++, b) incremented a
 * twice when a was the smaller. */
TEST(min_max_evaluate_once) {
        int a = 1, b = 5, calls = 0;

        ASSERT_EQ(MIN(a++, b), 1);
        ASSERT_EQ(a, 2);
        ASSERT_EQ(MAX(b++, a), 5);
        ASSERT_EQ(b, 6);
        ASSERT_EQ(MIN(({ calls++; 3; }), 4), 3);
        ASSERT_EQ(MAX(({ calls++; 3; }), 4), 4);
        ASSERT_EQ(calls, 2);
        /* nested uses do not shadow each other's temporaries */
        ASSERT_EQ(MIN(MAX(a, b), MIN(b, 9)), 6);
        ASSERT_U64_EQ(MAX((size_t) 16, (size_t) 0), 16);
}

/* CONST_MIN and CONST_MAX work where a constant expression is needed. */
static char buf[CONST_MAX(8, 3)];
static_assert(CONST_MIN(2, 7) == 2, "CONST_MIN");

TEST(const_min_max) {
        ASSERT_EQ(sizeof buf, 8);
}

/* array_reserve_one grows by doubling from 16 and keeps what was there. */
TEST(array_reserve_one_grows) {
        int *v = NULL;
        size_t alloc = 0;

        for (size_t n = 0; n < 1000; n++) {
                ASSERT_OK(array_reserve_one((void **) &v, &alloc, n, sizeof *v));
                ASSERT_GT(alloc, n);
                v[n] = (int) n;
        }
        ASSERT_EQ(alloc, 1024);
        for (size_t n = 0; n < 1000; n++)
                ASSERT_EQ(v[n], (int) n);
        free(v);
}

/* GREEDY_REALLOC: at least what is asked, doubling, 16 at least; an
 * overflowing size fails and leaves the array as it was. */
TEST(greedy_realloc_grows_and_refuses_overflow) {
        uint64_t *v = NULL;
        size_t alloc = 0;

        ASSERT_OK(GREEDY_REALLOC(v, alloc, 1));
        ASSERT_EQ(alloc, 16);
        v[15] = 15;
        ASSERT_OK(GREEDY_REALLOC(v, alloc, 16));
        ASSERT_EQ(alloc, 16);
        ASSERT_OK(GREEDY_REALLOC(v, alloc, 17));
        ASSERT_EQ(alloc, 32);
        ASSERT_OK(GREEDY_REALLOC(v, alloc, 100));
        ASSERT_EQ(alloc, 100);
        ASSERT_U64_EQ(v[15], 15);

        uint64_t *old = v;
        ASSERT_ERROR(GREEDY_REALLOC(v, alloc, SIZE_MAX / 4), ENOMEM);
        ASSERT_TRUE(v == old);
        ASSERT_EQ(alloc, 100);
        ASSERT_ERROR(array_reserve_one((void **) &v, &alloc, SIZE_MAX, sizeof *v), ENOMEM);
        free(v);
}
