/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Tiny test harness: TEST(name) { ... } registers a test; ASSERT_*() fail
 * with the values seen. main() runs all tests, or exits 77 when every test
 * skipped. Include once per test binary, then write TEST()s. */

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_TEST_SKIP 77

typedef struct test_case {
        const char *name;
        void (*func)(void);
} test_case;

extern test_case test_cases_[];
extern size_t n_test_cases_;
extern int test_skipped_;

void test_register_(const char *name, void (*func)(void));

#define TEST(name)                                                              \
        static void test_##name(void);                                          \
        __attribute__((constructor)) static void test_register_##name(void) {   \
                test_register_(#name, test_##name);                             \
        }                                                                       \
        static void test_##name(void)

#define TEST_FAIL_(fmt, ...)                                                    \
        do {                                                                    \
                fprintf(stderr, "%s:%d: " fmt "\n", __FILE__, __LINE__, ##__VA_ARGS__); \
                abort();                                                        \
        } while (0)

/* Marks the running test skipped (with a reason) and returns from it. */
#define TEST_SKIP(...)                                                          \
        do {                                                                    \
                fprintf(stderr, "skipped: " __VA_ARGS__);                       \
                fputc('\n', stderr);                                            \
                test_skipped_ = 1;                                              \
                return;                                                         \
        } while (0)

#define ASSERT_TRUE(expr)                                                       \
        do {                                                                    \
                if (!(expr))                                                    \
                        TEST_FAIL_("assertion failed: %s", #expr);              \
        } while (0)

#define ASSERT_INT_OP_(a, op, b)                                                \
        do {                                                                    \
                intmax_t _a = (intmax_t) (a), _b = (intmax_t) (b);              \
                if (!(_a op _b))                                                \
                        TEST_FAIL_("expected %s %s %s, got %jd %s %jd", #a, #op, #b, _a, #op, _b); \
        } while (0)

#define ASSERT_EQ(a, b) ASSERT_INT_OP_(a, ==, b)
#define ASSERT_NE(a, b) ASSERT_INT_OP_(a, !=, b)
#define ASSERT_LT(a, b) ASSERT_INT_OP_(a, <, b)
#define ASSERT_LE(a, b) ASSERT_INT_OP_(a, <=, b)
#define ASSERT_GT(a, b) ASSERT_INT_OP_(a, >, b)
#define ASSERT_GE(a, b) ASSERT_INT_OP_(a, >=, b)

#define ASSERT_U64_EQ(a, b)                                                     \
        do {                                                                    \
                uint64_t _a = (uint64_t) (a), _b = (uint64_t) (b);              \
                if (_a != _b)                                                   \
                        TEST_FAIL_("expected %s == %s, got 0x%" PRIx64 " != 0x%" PRIx64, #a, #b, _a, _b); \
        } while (0)

/* Asserts a call returning 0/positive succeeded, showing the errno otherwise. */
#define ASSERT_OK(expr)                                                         \
        do {                                                                    \
                long _r = (long) (expr);                                        \
                if (_r < 0)                                                     \
                        TEST_FAIL_("%s failed: %ld (%s)", #expr, _r, strerror((int) -_r)); \
        } while (0)

#define ASSERT_ERROR(expr, err)                                                 \
        do {                                                                    \
                long _r = (long) (expr);                                        \
                if (_r != -(long) (err))                                        \
                        TEST_FAIL_("expected %s to fail with -%s, got %ld", #expr, #err, _r); \
        } while (0)

#define ASSERT_STREQ(a, b)                                                      \
        do {                                                                    \
                const char *_a = (a), *_b = (b);                                \
                if (!_a || !_b || strcmp(_a, _b) != 0)                          \
                        TEST_FAIL_("expected %s == %s, got \"%s\" != \"%s\"", #a, #b, _a ? _a : "(null)", _b ? _b : "(null)"); \
        } while (0)

#define ASSERT_NULL(p)                                                          \
        do {                                                                    \
                const void *_p = (p);                                           \
                if (_p)                                                         \
                        TEST_FAIL_("expected %s to be NULL, got %p", #p, _p);   \
        } while (0)

/* Limits this process's address space (RLIMIT_AS) to what it maps now
 * plus spare bytes, for a child that checks how code fails without memory.
 * 0, or -errno. */
int test_limit_address_space(size_t spare);

/* Path of a test data file: TEST_DATA_DIR is defined by meson. */
#define TEST_DATA(rel) TEST_DATA_DIR "/" rel
