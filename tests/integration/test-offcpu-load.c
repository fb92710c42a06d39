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
#include <bpf/bpf.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture-root.h"
#include "kernel/kallsyms.h"
#include "macro.h"
#include "offcpu.h"
#include "test.h"

#define VERIFIER_BUDGET 250000

/* The running kernel's symbol name: its start and end (kallsyms.h's
 * lookup end: where the next one begins); false if it has none, or
 * /proc/kallsyms hides addresses. */
static bool ksym_range(const kallsyms *k, const char *name, uint64_t *lo, uint64_t *hi) {
        ksym sym;

        if (!k || kallsyms_find(k, name, lo) < 0 || *lo == 0 || kallsyms_lookup(k, *lo, &sym) < 0)
                return false;
        *hi = sym.end;
        return true;
}

/* The kernel's .sched.text, as the daemon finds it (daemon.c). */
static bool sched_text(uint64_t *lo, uint64_t *hi) {
        kallsyms *k = NULL;
        bool found = kallsyms_load("/", &k) >= 0 && kallsyms_find(k, "__sched_text_start", lo) >= 0 &&
                     kallsyms_find(k, "__sched_text_end", hi) >= 0 && *lo != 0 && *hi > *lo;

        kallsyms_free(k);
        return found;
}

/* The configuration the daemon would load with, or why this machine
 * cannot run the test. */
static const char *setup(offcpu_config *c) {
        *c = OFFCPU_CONFIG_DEFAULT;
        if (geteuid() != 0)
                return "needs root to load BPF programs";
        /* Addresses hidden (kptr_restrict=2, lockdown): the daemon then
         * loads without the stack check, which is not what is tested. */
        if (!sched_text(&c->sched_text_start, &c->sched_text_end))
                return "/proc/kallsyms gives no address of .sched.text here";
        return NULL;
}

#define SETUP(c)                                                \
        do {                                                    \
                const char *_skip = setup(&(c));                \
                if (_skip)                                      \
                        TEST_SKIP("%s", _skip);                 \
        } while (0)

/* The clock a program asked to time waits by clock times them by: the
 * run queue's only where the kernel has what the program reads it
 * through. */
static void check_clock(const offcpu *o, const char *clock) {
        if (streq(clock, "sched") && streq(offcpu_clock_name(o), "monotonic"))
                ASSERT_TRUE(strstr(offcpu_clock_why(o), "CONFIG_FAIR_GROUP_SCHED"));
        else
                ASSERT_STREQ(offcpu_clock_name(o), clock);
}

/* The length of the instructions the kernel runs of o's program (its
 * verifier drops the branch a setting rules out: the clock not taken). */
static uint32_t xlated_len(const offcpu *o) {
        struct bpf_prog_info info = {};
        uint32_t len = sizeof info;
        int fd = offcpu_program_fd(o);

        ASSERT_GE(fd, 0);
        ASSERT_OK(bpf_obj_get_info_by_fd(fd, &info, &len));
        ASSERT_GT(info.xlated_prog_len, 0);
        return info.xlated_prog_len;
}

/* The program loads with either clock, and they make two programs. */
static void check_program(offcpu_config c, const char *prog) {
        static const char *const clocks[] = { "sched", "monotonic" };
        uint32_t lens[2] = {};
        const char *taken = NULL;

        for (size_t i = 0; i < ELEMENTSOF(clocks); i++) {
                const char *why = "";
                offcpu *o = NULL;
                uint32_t n;
                int r;

                c.program = prog;
                c.clock = clocks[i];
                r = offcpu_new(&c, &o, &why);
                if (r < 0)
                        TEST_FAIL_("%s: %s (%s)", prog, why, strerror(-r));
                ASSERT_STREQ(offcpu_program(o), prog);
                check_clock(o, clocks[i]);
                n = offcpu_verified_insns(o);
                fprintf(stderr, "%s, %s clock: %" PRIu32 " instructions verified (budget %d)\n", prog, clocks[i], n,
                        VERIFIER_BUDGET);
                if (offcpu_kernel_at_least(5, 16))
                        ASSERT_GT(n, 0);
                ASSERT_LE(n, VERIFIER_BUDGET);
                lens[i] = xlated_len(o);
                if (i == 0)
                        taken = offcpu_clock_name(o);
                offcpu_free(o);
        }
        /* Where the kernel has a run queue clock to read, the setting
         * changes what runs: the branch of the other clock is gone (not
         * compared byte for byte: two loads differ in their maps'
         * addresses anyway). */
        fprintf(stderr, "%s: %" PRIu32 " and %" PRIu32 " bytes of instructions run\n", prog, lens[0], lens[1]);
        if (streq(taken, "sched"))
                ASSERT_NE(lens[0], lens[1]);
}

TEST(task_storage_program) {
        offcpu_config c;

        SETUP(c);
        if (!offcpu_kernel_at_least(6, 4))
                TEST_SKIP("the task storage program is for Linux 6.4 and later");
        check_program(c, "offcpu_switch_ts");
}

TEST(hash_program) {
        offcpu_config c;

        SETUP(c);
        if (!OFFCPU_READS_SPOTS || !offcpu_kernel_at_least(5, 15))
                TEST_SKIP("the program that reuses stacks needs x86-64 and Linux 5.15 (bpf_task_pt_regs)");
        check_program(c, "offcpu_switch");
}

TEST(every_wait_program) {
        offcpu_config c;

        SETUP(c);
        check_program(c, "offcpu_switch_every");
}

/* With no program named, the daemon's choice: task storage where the
 * kernel has it. */
TEST(default_choice) {
        offcpu_config c;
        const char *why = "";
        offcpu *o = NULL;
        int r;

        SETUP(c);
        r = offcpu_new(&c, &o, &why);
        if (r < 0)
                TEST_FAIL_("%s (%s)", why, strerror(-r));
        fprintf(stderr, "default: %s\n", offcpu_program(o));
        ASSERT_STREQ(offcpu_program(o), offcpu_kernel_at_least(6, 4)                         ? "offcpu_switch_ts" :
                                        OFFCPU_READS_SPOTS && offcpu_kernel_at_least(5, 15) ? "offcpu_switch" :
                                                                                              "offcpu_switch_every");
        ASSERT_EQ(offcpu_reuses_stacks(o), OFFCPU_READS_SPOTS && offcpu_kernel_at_least(5, 15));
        ASSERT_EQ(offcpu_task_storage(o), offcpu_kernel_at_least(6, 4));
        /* And the clock auto takes on this machine. */
        fprintf(stderr, "clock: %s (%s)\n", offcpu_clock_name(o), offcpu_clock_why(o));
        check_clock(o, offcpu_choose_clock("auto", "/sys", NULL));
        offcpu_free(o);
}

#define put(dir, rel, text) ASSERT_OK(fixture_put(dir, rel, text))

#define DEBUG "kernel/debug/sched/debug"
#define CS "devices/system/clocksource/clocksource0/"

/* auto's run queue clock, then the kernel says sched_clock is no longer
 * stable (a synthetic sysfs): the daemon is told once, and why says to
 * restart it; a file it cannot read tells nothing. By debugfs, and
 * (x86) by the clocksource where there was no debugfs at the start. */
TEST(a_clock_that_stops_being_one_is_reported) {
        char dir[64];
        offcpu_config c;
        const char *why = "";
        offcpu *o = NULL;
        bool sched;

        SETUP(c);
        snprintf(dir, sizeof dir, "/tmp/test-offcpu-load.XXXXXX");
        ASSERT_TRUE(mkdtemp(dir));
        put(dir, DEBUG, "Sched Debug Version: v0.11\nsched_clock_stable()                    : 1\n");
        put(dir, CS "current_clocksource", "tsc\n");
        put(dir, CS "available_clocksource", "tsc kvm-clock \n");
        c.sysfs = dir;
        ASSERT_OK(offcpu_new(&c, &o, &why));
        sched = streq(offcpu_clock_name(o), "sched");
        if (sched) {
                ASSERT_TRUE(!offcpu_check_clock(o));
                /* Unreadable now: the fallback (kvm-clock: monotonic)
                 * is not what decided. */
                ASSERT_OK(fixture_sh("rm %s/" DEBUG, dir));
                ASSERT_TRUE(!offcpu_check_clock(o));
                put(dir, DEBUG, "Sched Debug Version: v0.11\nsched_clock_stable()                    : 0\n");
                ASSERT_TRUE(offcpu_check_clock(o));
                ASSERT_TRUE(strstr(offcpu_clock_why(o), "restart perfsnapd"));
                ASSERT_STREQ(offcpu_clock_name(o), "sched");
                ASSERT_TRUE(!offcpu_check_clock(o));
        }
        offcpu_free(o);
        o = NULL;
#if defined(__x86_64__)
        if (sched) {
                ASSERT_OK(fixture_sh("rm %s/" DEBUG, dir));
                put(dir, CS "available_clocksource", "tsc hpet acpi_pm \n");
                ASSERT_OK(offcpu_new(&c, &o, &why));
                ASSERT_STREQ(offcpu_clock_name(o), "sched");
                ASSERT_TRUE(!offcpu_check_clock(o));
                put(dir, CS "current_clocksource", "hpet\n");
                ASSERT_TRUE(offcpu_check_clock(o));
                ASSERT_TRUE(!offcpu_check_clock(o));
                offcpu_free(o);
        }
#endif
        ASSERT_OK(fixture_sh("rm -rf %s", dir));
        if (!sched)
                TEST_SKIP("no run queue clock here (no CONFIG_FAIR_GROUP_SCHED)");
}

/* A name the object does not have: an error, nothing loaded. */
TEST(unknown_program) {
        offcpu_config c;
        const char *why = "";
        offcpu *o = NULL;

        SETUP(c);
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
 * at their spot: two drains do not take them, the last one does. Timed
 * by clock. */
static void check_held(offcpu_config c, const char *prog, const char *clock) {
        const char *why = "";
        offcpu *o = NULL;
        taken before, last;
        long long wall = 0, asked = 0, longest = 0;
        int waited = 0, fds[2], r, n;
        bool found;
        FILE *out;
        pid_t pid;

        c.program = prog;
        c.clock = clock;
        r = offcpu_new(&c, &o, &why);
        if (r < 0)
                TEST_FAIL_("%s: %s (%s)", prog, why, strerror(-r));
        check_clock(o, clock);
        ASSERT_OK(pipe(fds));
        pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
                /* Gone with the test if an assertion aborts it: else its
                 * hour of sleep would hold the test's output open. */
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                dup2(fds[1], STDOUT_FILENO);
                close(fds[0]);
                execl(HELD_WAITS, HELD_WAITS, (char *) NULL);
                _exit(127);
        }
        close(fds[1]);
        out = fdopen(fds[0], "r");
        ASSERT_TRUE(out);
        n = fscanf(out, "%lld %d %lld %lld", &wall, &waited, &asked, &longest);
        fclose(out);
        sleep_ms(100);  /* in its long sleep */

        before = (taken) { .pid = (uint32_t) pid };
        {
                kallsyms *k = NULL;

                found = kallsyms_load("/", &k) >= 0 && ksym_range(k, "do_nanosleep", &before.lo, &before.hi);
                kallsyms_free(k);
        }
        last = before;
        /* Three drains: each takes the map the program stopped adding
         * to at the one before. The assertions wait for the child's
         * end. */
        for (int i = 0; i < 3 && r >= 0; i++) {
                r = offcpu_drain(o, false, take, &before);
                sleep_ms(20);
        }
        if (r >= 0)
                r = offcpu_drain(o, true, take, &last);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        offcpu_free(o);
        ASSERT_EQ(n, 4);
        ASSERT_TRUE(found);
        ASSERT_OK(r);

        fprintf(stderr,
                "%s, %s clock: %d short sleeps waited, %lld ns asked for, %lld ns by the clock; in do_nanosleep: "
                "%" PRIu64 " waits, %" PRIu64 " ns before the stop, %" PRIu64 " waits, %" PRIu64 " ns at it\n",
                prog, clock, waited, asked, wall, before.waits, before.ns, last.waits, last.ns);
        if (waited != 5)
                TEST_SKIP("only %d of held-waits' short sleeps left the CPU", waited);
        /* At least 80 % of what they asked for (the program's clock
         * starts at schedule(), after the timer was set). One may be
         * missing: a sleep whose timer woke it between its dequeue and
         * the tracepoint is runnable there, not waiting (the kernel
         * counts its switch as voluntary); seen once. Without it, at
         * least 80 % of the rest. */
        ASSERT_GE(before.waits + last.waits, 4);
        ASSERT_LE(before.waits + last.waits, 5);
        ASSERT_GE(before.ns + last.ns, (uint64_t) (before.waits + last.waits == 5 ? asked : asked - longest) * 8 / 10);
        ASSERT_LE(before.ns + last.ns, (uint64_t) wall);
        /* Under the 1 ms at which the program moves them itself: held
         * until the stop. */
        if (before.ns + last.ns < 1000000)
                ASSERT_EQ(before.waits, 0);
}

TEST(task_storage_held_waits) {
        offcpu_config c;

        SETUP(c);
        /* Elsewhere every wait takes the stacks and moves what was held. */
        if (!OFFCPU_READS_SPOTS)
                TEST_SKIP("threads' waits are held at one spot on x86-64 only");
        if (!offcpu_kernel_at_least(6, 4))
                TEST_SKIP("the task storage program is for Linux 6.4 and later");
        check_held(c, "offcpu_switch_ts", "sched");
        /* Timed by the monotonic clock: what auto takes where the TSC is
         * not the clocksource. */
        check_held(c, "offcpu_switch_ts", "monotonic");
}

TEST(hash_held_waits) {
        offcpu_config c;

        SETUP(c);
        if (!OFFCPU_READS_SPOTS || !offcpu_kernel_at_least(5, 15))
                TEST_SKIP("the program that reuses stacks needs x86-64 and Linux 5.15 (bpf_task_pt_regs)");
        check_held(c, "offcpu_switch", "sched");
}
