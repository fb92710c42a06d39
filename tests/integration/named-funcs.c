/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Spins for SECONDS in a call chain of functions with known names, for
 * the tests of user-space symbols: main -> named_outer_alpha ->
 * named_middle_beta -> named_leaf_gamma, into which named_inlined_delta
 * and, in it, named_inlined_epsilon are inlined (always_inline; DWARF
 * describes their code). Built with frame pointers, so the kernel can walk
 * the chain, and without optimization, so each function has its own frame
 * (a leaf without one hides its caller). */

#include <stdio.h>
#include <stdlib.h>
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

int main(int argc, char **argv) {
        double seconds = argc > 1 ? atof(argv[1]) : 2;

        if (seconds <= 0 || seconds > 600) {
                fprintf(stderr, "usage: named-funcs [SECONDS]\n");
                return 2;
        }
        named_outer_alpha(seconds);
        return 0;
}
