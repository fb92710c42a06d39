/* SPDX-License-Identifier: GPL-2.0-or-later */
/* offcpu_choose_clock(): which clock times off-CPU waits, from a
 * synthetic sysfs in the kernel's formats: debugfs's sched/debug (its
 * "sched_clock_stable()" line) where mounted, else the clocksources
 * (names and a newline). */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture-root.h"
#include "macro.h"
#include "offcpu.h"
#include "test.h"

#define CS "devices/system/clocksource/clocksource0/"

#define put(dir, rel, text) ASSERT_OK(fixture_put(dir, rel, text))

/* debug arguments: no sched/debug at all, or one without the line. */
#define NO_DEBUGFS (-2)
#define NO_LINE (-1)

/* A sched/debug as Linux 6.x starts it, with the stable line or not. */
static void put_debug(const char *dir, int stable) {
        char text[512];

        snprintf(text, sizeof text,
                 "Sched Debug Version: v0.11, 6.18.44 #1\n"
                 "ktime                                   : 2430093.570393\n"
                 "sched_clk                               : 2430130.106224\n"
                 "cpu_clk                                 : 2430128.693398\n"
                 "jiffies                                 : 4297097381\n"
                 "%s"
                 "\n"
                 "sysctl_sched\n",
                 stable == NO_LINE ? "" :
                 stable ? "sched_clock_stable()                    : 1\n" :
                          "sched_clock_stable()                    : 0\n");
        put(dir, "kernel/debug/sched/debug", text);
}

/* What auto answers for a sysfs with these files (NULL: none). */
static const char *auto_for(const char *current, const char *available, int debug, const char **why) {
        char dir[64];
        const char *r;

        snprintf(dir, sizeof dir, "/tmp/test-offcpu-clock.XXXXXX");
        ASSERT_TRUE(mkdtemp(dir));
        if (current)
                put(dir, CS "current_clocksource", current);
        if (available)
                put(dir, CS "available_clocksource", available);
        if (debug != NO_DEBUGFS)
                put_debug(dir, debug);
        r = offcpu_choose_clock("auto", dir, why);
        ASSERT_OK(fixture_sh("rm -rf %s", dir));
        return r;
}

TEST(the_kernels_word_decides_where_debugfs_is_mounted) {
        const char *why = NULL;

        ASSERT_STREQ(auto_for("hpet\n", "hpet acpi_pm \n", 1, &why), "sched");
        ASSERT_TRUE(strstr(why, "sched_clock_stable() is 1"));
        ASSERT_STREQ(auto_for("tsc\n", "tsc hpet \n", 0, &why), "monotonic");
        ASSERT_TRUE(strstr(why, "sched_clock_stable() is 0"));
        /* A guest whose paravirtual clock is stable. */
        ASSERT_STREQ(auto_for("tsc\n", "tsc kvm-clock \n", 1, &why), "sched");
}

TEST(without_debugfs_the_clocksources) {
        const char *why = NULL;

#if defined(__x86_64__) || defined(__i386__)
        ASSERT_STREQ(auto_for("tsc\n", "tsc hpet acpi_pm \n", NO_DEBUGFS, &why), "sched");
        ASSERT_TRUE(strstr(why, "TSC"));
        /* A TSC marked unstable leaves the clocksources. */
        ASSERT_STREQ(auto_for("hpet\n", "hpet acpi_pm \n", NO_DEBUGFS, &why), "monotonic");
        ASSERT_TRUE(strstr(why, "not the TSC"));
        ASSERT_STREQ(auto_for("acpi_pm", "acpi_pm\n", NO_DEBUGFS, &why), "monotonic");
        ASSERT_STREQ(auto_for("tsc-early\n", "tsc-early\n", NO_DEBUGFS, &why), "monotonic");
        /* The TSC as the clocksource of a guest whose sched_clock is
         * paravirtual: kvm-clock without its stable bit is per CPU. */
        ASSERT_STREQ(auto_for("tsc\n", "tsc kvm-clock \n", NO_DEBUGFS, &why), "monotonic");
        ASSERT_TRUE(strstr(why, "paravirtual"));
        ASSERT_STREQ(auto_for("tsc\n", "tsc hyperv_clocksource_tsc_page \n", NO_DEBUGFS, &why), "monotonic");
        ASSERT_STREQ(auto_for("tsc\n", "tsc xen \n", NO_DEBUGFS, &why), "monotonic");
        ASSERT_STREQ(auto_for("tsc\n", NULL, NO_DEBUGFS, &why), "monotonic");
        ASSERT_STREQ(auto_for("", "", NO_DEBUGFS, &why), "monotonic");
        ASSERT_STREQ(auto_for(NULL, NULL, NO_DEBUGFS, &why), "monotonic");
        ASSERT_TRUE(strstr(why, "not known"));
        /* x86 always prints the line: a sched/debug without it is not
         * trusted. */
        ASSERT_STREQ(auto_for("hpet\n", "hpet\n", NO_LINE, &why), "monotonic");
#else
        ASSERT_STREQ(auto_for("arch_sys_counter\n", "arch_sys_counter\n", NO_LINE, &why), "sched");
#endif
        /* NULL is auto. */
        ASSERT_STREQ(offcpu_choose_clock(NULL, "/nonexistent", &why), auto_for(NULL, NULL, NO_DEBUGFS, &why));
}

TEST(a_clock_asked_for_is_taken_whatever_the_machine) {
        const char *why = NULL;

        ASSERT_STREQ(offcpu_choose_clock("sched", "/nonexistent", &why), "sched");
        ASSERT_STREQ(why, "offcpu_clock = sched");
        ASSERT_STREQ(offcpu_choose_clock("monotonic", "/nonexistent", &why), "monotonic");
        ASSERT_STREQ(why, "offcpu_clock = monotonic");
        ASSERT_NULL(offcpu_choose_clock("tsc", "/nonexistent", &why));
        ASSERT_NULL(offcpu_choose_clock("", "/nonexistent", NULL));
}
