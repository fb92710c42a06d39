/* SPDX-License-Identifier: GPL-2.0-or-later */
/* offcpu_choose_clock(): which clock times off-CPU waits, from a
 * synthetic sysfs's current clocksource (the kernel's format: the name
 * and a newline). */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "macro.h"
#include "offcpu.h"
#include "test.h"

static void make_sysfs(char *dir, size_t size, const char *clocksource) {
        char path[256];
        FILE *f;

        snprintf(dir, size, "/tmp/test-offcpu-clock.XXXXXX");
        ASSERT_TRUE(mkdtemp(dir));
        if (!clocksource)
                return;
        snprintf(path, sizeof path, "mkdir -p %s/devices/system/clocksource/clocksource0", dir);
        ASSERT_EQ(system(path), 0);
        snprintf(path, sizeof path, "%s/devices/system/clocksource/clocksource0/current_clocksource", dir);
        f = fopen(path, "we");
        ASSERT_TRUE(f);
        fputs(clocksource, f);
        fclose(f);
}

static void remove_sysfs(const char *dir) {
        char cmd[128];

        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        ASSERT_EQ(system(cmd), 0);
}

/* What auto answers for a machine whose clocksource is cs (NULL: no
 * such file). */
static const char *auto_for(const char *cs, const char **why) {
        char dir[64];
        const char *r;

        make_sysfs(dir, sizeof dir, cs);
        r = offcpu_choose_clock("auto", dir, why);
        remove_sysfs(dir);
        return r;
}

TEST(auto_takes_the_run_queue_clock_only_where_it_is_one_clock) {
        const char *why = NULL;

#if defined(__x86_64__) || defined(__i386__)
        ASSERT_STREQ(auto_for("tsc\n", &why), "sched");
        ASSERT_TRUE(strstr(why, "TSC"));
        /* A TSC marked unstable leaves the clocksources: these say the
         * run queues' clocks may differ between CPUs. */
        ASSERT_STREQ(auto_for("hpet\n", &why), "monotonic");
        ASSERT_TRUE(strstr(why, "not the TSC"));
        ASSERT_STREQ(auto_for("kvm-clock\n", &why), "monotonic");
        ASSERT_STREQ(auto_for("acpi_pm", &why), "monotonic");
        ASSERT_STREQ(auto_for("tsc-early\n", &why), "monotonic");
        ASSERT_STREQ(auto_for("", &why), "monotonic");
        ASSERT_STREQ(auto_for(NULL, &why), "monotonic");
        ASSERT_TRUE(strstr(why, "not known"));
#else
        ASSERT_STREQ(auto_for("arch_sys_counter\n", &why), "sched");
        ASSERT_STREQ(auto_for(NULL, &why), "sched");
#endif
        /* NULL is auto. */
        ASSERT_STREQ(offcpu_choose_clock(NULL, "/nonexistent", &why), auto_for(NULL, &why));
}

TEST(a_clock_asked_for_is_taken_whatever_the_clocksource) {
        const char *why = NULL;
        char dir[64];

        make_sysfs(dir, sizeof dir, "hpet\n");
        ASSERT_STREQ(offcpu_choose_clock("sched", dir, &why), "sched");
        ASSERT_STREQ(why, "offcpu_clock = sched");
        remove_sysfs(dir);
        make_sysfs(dir, sizeof dir, "tsc\n");
        ASSERT_STREQ(offcpu_choose_clock("monotonic", dir, &why), "monotonic");
        ASSERT_STREQ(why, "offcpu_clock = monotonic");
        ASSERT_NULL(offcpu_choose_clock("tsc", dir, &why));
        ASSERT_NULL(offcpu_choose_clock("", dir, NULL));
        remove_sysfs(dir);
}
