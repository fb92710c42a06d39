/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Spins for SECONDS in a call chain of functions with known names, for
 * the tests of user-space symbols: main -> named_outer_alpha ->
 * named_middle_beta -> named_leaf_gamma, into which named_inlined_delta
 * and, in it, named_inlined_epsilon are inlined (always_inline; DWARF
 * describes their code). With "inlined-call" after SECONDS: main ->
 * named_caller_theta, into which named_inlined_eta is inlined, which calls
 * named_callee_zeta (the return address is just past eta's inlined code).
 * Built with frame pointers, so the kernel can walk the chain, and
 * without optimization, so each function has its own frame (a leaf
 * without one hides its caller). */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile unsigned long sink;

static double now(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static inline __attribute__((always_inline)) unsigned long named_inlined_epsilon(unsigned long i) {
        unsigned long v = i * 7;

        v ^= sink >> 3;
        v += (v << 2) ^ (sink >> 5);
        return v + (sink >> 7);
}

static inline __attribute__((always_inline)) unsigned long named_inlined_delta(unsigned long i) {
        return named_inlined_epsilon(i) + 1;
}

static __attribute__((noinline)) void named_leaf_gamma(unsigned long n) {
        for (unsigned long i = 0; i < n; i++)
                sink += named_inlined_delta(i);
}

static __attribute__((noinline)) void named_middle_beta(unsigned long n) {
        named_leaf_gamma(n);
        sink++;
}

static __attribute__((noinline)) void named_outer_alpha(double seconds) {
        double end = now() + seconds;

        while (now() < end)
                named_middle_beta(200000);
        sink++;
}

static __attribute__((noinline)) void named_callee_zeta(unsigned long n) {
        for (unsigned long i = 0; i < n; i++)
                sink += i * 5 + (sink >> 2);
}

static inline __attribute__((always_inline)) void named_inlined_eta(unsigned long n) {
        named_callee_zeta(n);
}

/* Optimized, so the instruction after the call is the loop's, outside
 * eta's inlined code (at -O0 a nop of eta's follows the call). */
static __attribute__((noinline, optimize("O1", "no-omit-frame-pointer"))) void named_caller_theta(double seconds) {
        double end = now() + seconds;

        while (now() < end)
                named_inlined_eta(200000);
        sink++;
}

int main(int argc, char **argv) {
        double seconds = argc > 1 ? atof(argv[1]) : 2;

        if (seconds <= 0 || seconds > 600 || (argc > 2 && strcmp(argv[2], "inlined-call") != 0)) {
                fprintf(stderr, "usage: named-funcs [SECONDS [inlined-call]]\n");
                return 2;
        }
        if (argc > 2)
                named_caller_theta(seconds);
        else
                named_outer_alpha(seconds);
        return 0;
}
