/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The off-CPU programs on this machine's kernel (suite "root"): each of
 * the three loads, with the kernel's .sched.text set as the daemon sets
 * it (without it the verifier leaves out the stack check, the part that
 * once made it give up), and its verifier went through a quarter of its
 * million instructions at most, so that another kernel's verifier, which
 * explores a little differently, still takes it. Skips (77) unless
 * running as root. */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "macro.h"
#include "offcpu.h"
#include "test.h"

#define VERIFIER_BUDGET 250000

/* The kernel's .sched.text, from /proc/kallsyms (addresses need root). */
static bool sched_text(uint64_t *lo, uint64_t *hi) {
        FILE *f = fopen("/proc/kallsyms", "re");
        char line[512], name[256], type;
        unsigned long long a;

        *lo = *hi = 0;
        if (!f)
                return false;
        while (fgets(line, sizeof line, f))
                if (sscanf(line, "%llx %c %255s", &a, &type, name) == 3) {
                        if (streq(name, "__sched_text_start"))
                                *lo = a;
                        else if (streq(name, "__sched_text_end"))
                                *hi = a;
                }
        fclose(f);
        return *lo != 0 && *hi > *lo;
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
