/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The off-CPU programs on this machine's kernel (suite "root"): each of
 * the three loads, with the kernel's .sched.text set as the daemon sets
 * it (without it the verifier leaves out the stack check, the part that
 * once made it give up), and its verifier went through a quarter of its
 * million instructions at most, so that another kernel's verifier, which
 * explores a little differently, still takes it. And the waits a thread
 * holds in its entry (under the 1 ms at which the program moves them to
 * a sum) are taken by the last drain only, from task storage and from
 * the hash alike. Skips (77) unless running as root. */
#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "offcpu.h"
#include "test.h"

#define VERIFIER_BUDGET 250000

/* The address of the kernel symbol name and of the next one up, from
 * /proc/kallsyms (addresses need root); false if it has no such symbol. */
static bool ksym_range(const char *name, uint64_t *lo, uint64_t *hi) {
        FILE *f = fopen("/proc/kallsyms", "re");
        char line[512], sym[256], type;
        unsigned long long a;
        uint64_t next = UINT64_MAX;

        *lo = 0;
        if (!f)
                return false;
        while (fgets(line, sizeof line, f))
                if (sscanf(line, "%llx %c %255s", &a, &type, sym) == 3 && streq(sym, name))
                        *lo = a;
        if (*lo != 0) {
                rewind(f);
                while (fgets(line, sizeof line, f))
                        if (sscanf(line, "%llx %c %255s", &a, &type, sym) == 3 && a > *lo && a < next)
                                next = a;
        }
        fclose(f);
        *hi = next;
        return *lo != 0;
}

/* The kernel's .sched.text. */
static bool sched_text(uint64_t *lo, uint64_t *hi) {
        uint64_t unused;

        return ksym_range("__sched_text_start", lo, &unused) && ksym_range("__sched_text_end", hi, &unused) &&
               *hi > *lo;
}

static offcpu_config config(void) {
        offcpu_config c = OFFCPU_CONFIG_DEFAULT;

        ASSERT_TRUE(sched_text(&c.sched_text_start, &c.sched_text_end));
        return c;
}

static void check_program(const char *prog) {
        offcpu_config c = config();
        const char *why = "";
        offcpu *o = NULL;
        uint32_t n;
        int r;

        c.program = prog;
        r = offcpu_new(&c, &o, &why);
        if (r < 0)
                TEST_FAIL_("%s: %s (%s)", prog, why, strerror(-r));
        ASSERT_STREQ(offcpu_program(o), prog);
        n = offcpu_verified_insns(o);
        fprintf(stderr, "%s: %" PRIu32 " instructions verified (budget %d)\n", prog, n, VERIFIER_BUDGET);
        if (offcpu_kernel_at_least(5, 16))
                ASSERT_GT(n, 0);
        ASSERT_LE(n, VERIFIER_BUDGET);
        offcpu_free(o);
}

TEST(task_storage_program) {
        if (geteuid() != 0)
                TEST_SKIP("needs root to load BPF programs");
        if (!offcpu_kernel_at_least(6, 4))
                TEST_SKIP("the task storage program is for Linux 6.4 and later");
        check_program("offcpu_switch_ts");
}

TEST(hash_program) {
        if (geteuid() != 0)
                TEST_SKIP("needs root to load BPF programs");
        if (!offcpu_kernel_at_least(5, 15))
                TEST_SKIP("the program that reuses stacks needs Linux 5.15 (bpf_task_pt_regs)");
        check_program("offcpu_switch");
}

TEST(every_wait_program) {
        if (geteuid() != 0)
                TEST_SKIP("needs root to load BPF programs");
        check_program("offcpu_switch_every");
}

/* With no program named, the daemon's choice: task storage where the
 * kernel has it. */
TEST(default_choice) {
        offcpu_config c;
        const char *why = "";
        offcpu *o = NULL;
        int r;

        if (geteuid() != 0)
                TEST_SKIP("needs root to load BPF programs");
        c = config();
        r = offcpu_new(&c, &o, &why);
        if (r < 0)
                TEST_FAIL_("%s (%s)", why, strerror(-r));
        fprintf(stderr, "default: %s\n", offcpu_program(o));
        ASSERT_STREQ(offcpu_program(o), offcpu_kernel_at_least(6, 4)  ? "offcpu_switch_ts" :
                                        offcpu_kernel_at_least(5, 15) ? "offcpu_switch" :
                                                                 "offcpu_switch_every");
        ASSERT_EQ(offcpu_task_storage(o), offcpu_kernel_at_least(6, 4));
        offcpu_free(o);
}

/* A name the object does not have: an error, nothing loaded. */
TEST(unknown_program) {
        offcpu_config c;
        const char *why = "";
        offcpu *o = NULL;

        if (geteuid() != 0)
                TEST_SKIP("needs root to load BPF programs");
        c = config();
        c.program = "offcpu_nonesuch";
        ASSERT_LT(offcpu_new(&c, &o, &why), 0);
        ASSERT_TRUE(o == NULL);
}

/* What the drains took of one process's waits in do_nanosleep. */
typedef struct taken {
        uint32_t pid;
        uint64_t lo, hi;        /* do_nanosleep */
        uint64_t waits, ns;
} taken;

static int take(const offcpu_entry *e, void *userdata) {
        taken *t = userdata;

        if (e->pid != t->pid)
                return 0;
        for (size_t i = 0; i < e->nr && e->ips[i] != PERF_CONTEXT_USER; i++)
                if (e->ips[i] >= t->lo && e->ips[i] < t->hi) {
                        t->waits += e->waits;
                        t->ns += e->wait_ns;
                        break;
                }
        return 0;
}

static void sleep_ms(long ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000 };

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* held-waits' 5 short sleeps, held in its entry while it sleeps an hour
 * at their spot: two drains do not take them, the last one does. */
static void check_held(const char *prog) {
        offcpu_config c = config();
        const char *why = "";
        offcpu *o = NULL;
        taken before, last;
        long long wall = 0, asked = 0;
        int waited = 0, fds[2], r;
        FILE *out;
        pid_t pid;

        c.program = prog;
        r = offcpu_new(&c, &o, &why);
        if (r < 0)
                TEST_FAIL_("%s: %s (%s)", prog, why, strerror(-r));
        ASSERT_OK(pipe(fds));
        pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
                dup2(fds[1], STDOUT_FILENO);
                close(fds[0]);
                execl(HELD_WAITS, HELD_WAITS, (char *) NULL);
                _exit(127);
        }
        close(fds[1]);
        out = fdopen(fds[0], "r");
        ASSERT_TRUE(out);
        ASSERT_EQ(fscanf(out, "%lld %d %lld", &wall, &waited, &asked), 3);
        fclose(out);
        sleep_ms(100);  /* in its long sleep */

        before = (taken) { .pid = (uint32_t) pid };
        ASSERT_TRUE(ksym_range("do_nanosleep", &before.lo, &before.hi));
        last = before;
        /* Two drains: each takes the map the program stopped adding to
         * at the one before. */
        for (int i = 0; i < 3; i++) {
                ASSERT_OK(offcpu_drain(o, false, take, &before));
                sleep_ms(20);
        }
        ASSERT_OK(offcpu_drain(o, true, take, &last));
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        offcpu_free(o);

        fprintf(stderr,
                "%s: %d short sleeps waited, %lld ns asked for, %lld ns by the clock; in do_nanosleep: "
                "%" PRIu64 " waits, %" PRIu64 " ns before the stop, %" PRIu64 " waits, %" PRIu64 " ns at it\n",
                prog, waited, asked, wall, before.waits, before.ns, last.waits, last.ns);
        if (waited != 5)
                TEST_SKIP("only %d of held-waits' short sleeps left the CPU", waited);
        /* One may be missing: a sleep whose timer woke it between its
         * dequeue and the tracepoint is runnable there, not waiting (the
         * kernel counts its switch as voluntary); seen once. */
        ASSERT_GE(before.waits + last.waits, 4);
        ASSERT_LE(before.waits + last.waits, 5);
        ASSERT_GE(before.ns + last.ns, (uint64_t) asked * 8 / 10);
        ASSERT_LE(before.ns + last.ns, (uint64_t) wall);
        /* Under the 1 ms at which the program moves them itself: held
         * until the stop. */
        if (before.ns + last.ns < 1000000)
                ASSERT_EQ(before.waits, 0);
}

TEST(task_storage_held_waits) {
        if (geteuid() != 0)
                TEST_SKIP("needs root to load BPF programs");
        if (!offcpu_kernel_at_least(6, 4))
                TEST_SKIP("the task storage program is for Linux 6.4 and later");
        check_held("offcpu_switch_ts");
}

TEST(hash_held_waits) {
        if (geteuid() != 0)
                TEST_SKIP("needs root to load BPF programs");
        if (!offcpu_kernel_at_least(5, 15))
                TEST_SKIP("the program that reuses stacks needs Linux 5.15 (bpf_task_pt_regs)");
        check_held("offcpu_switch");
}
