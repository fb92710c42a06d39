/* SPDX-License-Identifier: GPL-2.0-or-later */
/* held-waits: 5 sleeps of 20 us, then one of an hour, all at one spot:
 * the same system call, instruction, first argument (one timespec's
 * address), stack and frame pointers and caller. The off-CPU program
 * keeps the thread's stacks and holds the short waits' time in the
 * thread's entry (under the 1 ms at which it moves them to a sum), and
 * the long sleep, still going, moves nothing. test-offcpu.sh stops the
 * daemon meanwhile: its last drain must take the held waits. The system
 * call is made here, not by libc, whose registers at the call are its
 * own (a register pointing at the timespec, whose contents change,
 * where the frame pointer would be). Prints the wall time of the 5
 * short sleeps, in ns, before the long one, and on a second line how
 * many times the thread left the CPU to wait meanwhile (a sleep whose
 * timer fires before the thread gets to schedule() does not wait). */
#include <stdio.h>
#include <sys/prctl.h>
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

/* The thread's voluntary context switches: its waits. */
static long waits(void) {
        FILE *f = fopen("/proc/thread-self/status", "re");
        char line[256];
        long n = -1;

        if (!f)
                return -1;
        while (fgets(line, sizeof line, f))
                if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
                        break;
        fclose(f);
        return n;
}

static long long now_ns(void) {
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(void) {
        /* One call site: a loop the compiler cannot unroll. */
        static volatile int n = 6;
        long long t0 = 0;
        long w0 = 0;

        /* Sleeps as short as the kernel makes them (no 50 us of slack). */
        (void) prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
        for (int i = 0; i < n; i++) {
                if (i == 0) {
                        w0 = waits();
                        t0 = now_ns();
                }
                if (i == 5) {
                        /* How long the short ones took, for the test: an
                         * emulated machine takes far more than 20 us. */
                        long long t = now_ns() - t0;

                        printf("%lld\n%ld\n", t, waits() - w0);
                        fflush(stdout);
                }
                sleep_ns(i < 5 ? 20 * 1000 : 3600 * 1000000000L);
        }
        return 0;
}
