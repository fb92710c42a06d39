/* SPDX-License-Identifier: GPL-2.0-or-later */
/* forged-frame ADDR SECONDS: spins in user space for SECONDS with the frame
 * pointer register on a forged frame record whose return address is ADDR
 * and whose caller's record returns to a plausible user address. A program
 * built without frame pointers leaves such values in rbp, and the kernel's
 * user stack walk for perf (perf_callchain_user()) reports whatever the
 * records say: this is how a kernel address gets into the user part of a
 * real call chain. x86-64 only. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
#if defined(__x86_64__)
        /* { saved frame pointer, return address } pairs, as pushed by a call
         * and "push %rbp". */
        static volatile uint64_t caller[2], forged[2];
        double end;

        if (argc != 3) {
                fprintf(stderr, "usage: forged-frame ADDR SECONDS\n");
                return 2;
        }
        caller[0] = 0;                  /* the walk ends here */
        caller[1] = 0x401000;           /* a user address, reached only through the forged record */
        forged[0] = (uint64_t) (uintptr_t) caller;
        forged[1] = strtoull(argv[1], NULL, 0);
        end = now() + atof(argv[2]);
        while (now() < end) {
                uint64_t n = 50 * 1000 * 1000;

                __asm__ volatile("push %%rbp\n\t"
                                 "mov %[fp], %%rbp\n\t"
                                 "1: dec %[n]\n\t"
                                 "jnz 1b\n\t"
                                 "pop %%rbp"
                                 /* Fixed registers: with -fomit-frame-pointer the
                                  * compiler may give an "r" operand %rbp itself. */
                                 : [n] "+c"(n)
                                 : [fp] "d"(forged)
                                 : "memory", "cc");
        }
        return 0;
#else
        (void) argc;
        (void) argv;
        fprintf(stderr, "forged-frame: x86-64 only\n");
        return 77;
#endif
}
