/* SPDX-License-Identifier: GPL-2.0-or-later */
/* held-waits: 5 short sleeps, then one of an hour, all at one spot:
 * the same system call, instruction, first argument (one timespec's
 * address), stack and frame pointers and caller. The off-CPU program
 * keeps the thread's stacks and holds the short waits' time in the
 * thread's entry (under the 1 ms at which it moves them to a sum), and
 * the long sleep, still going, moves nothing. The tests stop the daemon
 * meanwhile: its last drain must take the held waits. The system call
 * is made here, not by libc, whose registers at the call are its own (a
 * register pointing at the timespec, whose contents change, where the
 * frame pointer would be).
 *
 * A sleep whose timer fires before the thread gets to schedule() does
 * not leave the CPU: under emulation a 20 us one seldom does. So a
 * sleep counts when the thread's voluntary context switches went up
 * across it, and the next one is twice as long (up to 160 us) after one
 * that did not wait. Prints, before the long sleep, four lines: the
 * wall time of the short ones, in ns; how many of them waited (5 unless
 * 200 tries were not enough); the time those asked for, in ns; and the
 * longest of them, in ns. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* RUSAGE_THREAD */
#endif
#include <stdbool.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>

static __attribute__((noinline)) long sleep_ns(long ns) {
        struct timespec t = { .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
#if defined(__x86_64__)
        long r;

        __asm__ volatile("syscall"
                         : "=a"(r)
                         : "0"((long) SYS_nanosleep), "D"(&t), "S"(0L)
                         : "rcx", "r11", "memory");
        return r;
#else
        return nanosleep(&t, NULL);
#endif
}

/* The thread's voluntary context switches: its waits. A system call
 * that does not wait itself (reading /proc could, and a wait at another
 * spot makes the program move the held ones). */
static long waits(void) {
        struct rusage u;

        return getrusage(RUSAGE_THREAD, &u) == 0 ? u.ru_nvcsw : -1;
}

static long long now_ns(void) {
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return t.tv_sec * 1000000000LL + t.tv_nsec;
}

#define LONG_NS (3600 * 1000000000L)

int main(void) {
        static volatile long next = 20 * 1000;  /* the next sleep */
        long long t0, asked = 0, longest = 0;
        int waited = 0, tries = 0;

        /* Sleeps as short as asked for (no 50 us of slack). */
        (void) prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
        t0 = now_ns();
        for (;;) {
                long before = waits(), ns = next;

                /* The one call site of all the sleeps, the long one too:
                 * nothing decided before it (a compiler may make two
                 * calls of one that is). */
                sleep_ns(ns);
                if (ns == LONG_NS)
                        return 0;
                if (waits() > before) {
                        waited++;
                        asked += ns;
                        if (ns > longest)
                                longest = ns;
                } else if (ns < 160 * 1000)
                        next = ns * 2;
                if (waited == 5 || ++tries == 200) {
                        printf("%lld\n%d\n%lld\n%lld\n", now_ns() - t0, waited, asked, longest);
                        fflush(stdout);
                        next = LONG_NS;
                }
        }
}
