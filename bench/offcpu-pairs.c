/* SPDX-License-Identifier: GPL-2.0-or-later */
/* offcpu-pairs EMPTY_OBJECT [SAMPLES] [LOOPS] [one|any]: what the off-CPU program
 * costs a context switch, measured in pairs close in time.
 *
 * bench/offcpu.sh starts a daemon for each setting and runs `perf bench
 * sched pipe` for seconds; on a VM, runs of one setting a minute apart
 * differ by 20 % and more, which hides a 5 % difference. Here a
 * measurement is `perf bench sched pipe -l LOOPS` (default 20000; two
 * processes pass a token back and forth through two pipes: two context
 * switches and two waits a round trip), both processes pinned to CPU 1
 * ("one", the default) or on any CPU ("any", perf bench's own way, where
 * a wake-up often finds the other CPU idle), with in turn:
 *   none       no program on sched_switch
 *   empty      EMPTY_OBJECT's empty program (the floor of any program)
 *   sched      daemon/offcpu.c's program, waits timed by the run queue's
 *              clock (offcpu_clock = sched)
 *   monotonic  the same timed by the monotonic clock
 * A sample is one measurement of each, in an order that rotates from
 * sample to sample; a setting's cost is the median over SAMPLES (default
 * 60) of its time over the time of "none" of the same sample, with a 95 %
 * interval of that median from order statistics. Programs are loaded or
 * attached before their measurement (not timed) and removed after it.
 * Then, with the kernel's BPF run time statistics on (which add two
 * clock reads a run, so not during the samples), the time of one run of
 * each program, from its bpf_prog_info. Needs root; prints one line per
 * sample, then the medians and the run times. */

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernel/kallsyms.h"
#include "macro.h"
#include "offcpu.h"

enum { NONE, EMPTY, SCHED, MONOTONIC, N_SETTINGS };
static const char *const names[N_SETTINGS] = { "none", "empty", "sched", "monotonic" };

static struct bpf_program *empty_prog;
static unsigned loops;
static offcpu_config config;

static void pin(void) {
        cpu_set_t set;

        CPU_ZERO(&set);
        CPU_SET(1, &set);
        if (sched_setaffinity(0, sizeof set, &set) < 0) {
                perror("sched_setaffinity(CPU 1)");
                exit(1);
        }
}

/* perf bench sched pipe -l n (pinned where this process is): ns a
 * round trip, as it says. */
static double round_trips(unsigned n) {
        char cmd[64], line[256];
        double us = -1;
        FILE *f;

        snprintf(cmd, sizeof cmd, "perf bench sched pipe -l %u 2>&1", n);
        f = popen(cmd, "r");
        if (!f) {
                perror("popen");
                exit(1);
        }
        while (fgets(line, sizeof line, f))
                if (strstr(line, "usecs/op"))
                        (void) sscanf(line, "%lf", &us);
        if (pclose(f) != 0 || us <= 0) {
                fprintf(stderr, "%s failed (is perf, linux-perf, installed?)\n", cmd);
                exit(1);
        }
        return us * 1000;
}

static double measure(int setting) {
        struct bpf_link *link = NULL;
        offcpu *o = NULL;
        const char *why = "";
        double ns;
        int r;

        if (setting == EMPTY) {
                link = bpf_program__attach_trace(empty_prog);
                if (!link) {
                        fprintf(stderr, "cannot attach the empty program: %s\n", strerror(errno));
                        exit(1);
                }
        } else if (setting != NONE) {
                offcpu_config c = config;

                c.clock = setting == SCHED ? "sched" : "monotonic";
                r = offcpu_new(&c, &o, &why);
                if (r < 0) {
                        fprintf(stderr, "cannot load the off-CPU program: %s (%s)\n", why, strerror(-r));
                        exit(1);
                }
                if (!streq(offcpu_clock_name(o), c.clock)) {
                        fprintf(stderr, "the program times waits by the %s clock here, not the %s one (%s)\n",
                                offcpu_clock_name(o), c.clock, offcpu_clock_why(o));
                        exit(77);
                }
        }
        ns = round_trips(loops);
        bpf_link__destroy(link);
        offcpu_free(o);
        return ns;
}

/* The loaded program whose name starts with prefix (the kernel keeps 15
 * characters of it): its run count and time. */
static int prog_runs(const char *prefix, uint64_t *ret_count, uint64_t *ret_ns) {
        uint32_t id = 0;

        while (bpf_prog_get_next_id(id, &id) == 0) {
                struct bpf_prog_info info = {};
                uint32_t len = sizeof info;
                int fd = bpf_prog_get_fd_by_id(id);

                if (fd < 0)
                        continue;
                if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && strncmp(info.name, prefix, MIN(strlen(prefix), sizeof info.name - 1)) == 0) {
                        *ret_count = info.run_cnt;
                        *ret_ns = info.run_time_ns;
                        close(fd);
                        return 0;
                }
                close(fd);
        }
        return -ENOENT;
}

/* ns a run of the program of setting over loops round trips, with the
 * kernel's statistics on. */
static double run_time(int setting) {
        struct bpf_link *link = NULL;
        offcpu *o = NULL;
        const char *why = "", *prefix = "sched_switch_empty";
        uint64_t c0 = 0, n0 = 0, c1 = 0, n1 = 0;
        int stats = bpf_enable_stats(BPF_STATS_RUN_TIME);

        if (stats < 0)
                return -1;
        if (setting == EMPTY)
                link = bpf_program__attach_trace(empty_prog);
        else {
                offcpu_config c = config;

                c.clock = setting == SCHED ? "sched" : "monotonic";
                if (offcpu_new(&c, &o, &why) < 0)
                        return -1;
                prefix = offcpu_program(o);
        }
        if (prog_runs(prefix, &c0, &n0) == 0) {
                (void) round_trips(loops);
                (void) prog_runs(prefix, &c1, &n1);
        }
        bpf_link__destroy(link);
        offcpu_free(o);
        close(stats);
        return c1 > c0 ? (double) (n1 - n0) / (double) (c1 - c0) : -1;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;

        return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorted in place) and a 95 % interval of it:
 * the order statistics around n/2 at 1.96 sqrt(n)/2 ranks. */
static void median_ci(double *v, size_t n, double *med, double *lo, double *hi) {
        double h = 0.98 * sqrt((double) n);
        long l = (long) floor((double) n / 2 - h), u = (long) ceil((double) n / 2 + h);

        qsort(v, n, sizeof *v, cmp_double);
        *med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
        *lo = v[MAX(l, 0L)];
        *hi = v[MIN(u, (long) n - 1)];
}

int main(int argc, char **argv) {
        unsigned samples = argc > 2 ? (unsigned) atoi(argv[2]) : 60;
        bool pinned = argc <= 4 || streq(argv[4], "one");
        struct bpf_object *obj;
        kallsyms *k = NULL;
        double *t[N_SETTINGS];

        loops = argc > 3 ? (unsigned) atoi(argv[3]) : 20000;

        if (argc < 2 || argc > 5 || samples < 4 || loops == 0 || (!pinned && !streq(argv[4], "any"))) {
                fprintf(stderr, "usage: offcpu-pairs EMPTY_OBJECT [SAMPLES >= 4] [LOOPS] [one|any]\n");
                return 2;
        }
        if (geteuid() != 0) {
                fprintf(stderr, "needs root\n");
                return 77;
        }
        obj = bpf_object__open_file(argv[1], NULL);
        if (!obj || bpf_object__load(obj) < 0) {
                fprintf(stderr, "cannot load %s: %s\n", argv[1], strerror(errno));
                return 1;
        }
        empty_prog = bpf_object__find_program_by_name(obj, "sched_switch_empty");
        if (!empty_prog)
                return 1;
        /* The daemon's settings: its .sched.text, its default program. */
        config = OFFCPU_CONFIG_DEFAULT;
        if (kallsyms_load("/", &k) < 0 || kallsyms_find(k, "__sched_text_start", &config.sched_text_start) < 0 ||
            kallsyms_find(k, "__sched_text_end", &config.sched_text_end) < 0)
                config.sched_text_start = config.sched_text_end = 0;
        kallsyms_free(k);

        /* perf bench's two processes inherit it. */
        if (pinned)
                pin();

        for (int s = 0; s < N_SETTINGS; s++) {
                t[s] = calloc(samples, sizeof *t[s]);
                if (!t[s])
                        return 1;
        }
        printf("# %u samples of perf bench sched pipe -l %u (2 context switches a round trip) %s; ns a round trip\n",
               samples, loops, pinned ? "on CPU 1" : "on any CPU");
        printf("# sample");
        for (int s = 0; s < N_SETTINGS; s++)
                printf(" %s", names[s]);
        printf("\n");
        for (unsigned i = 0; i < samples; i++) {
                for (int j = 0; j < N_SETTINGS; j++) {
                        /* Rotations, reversed every other round: a slow
                         * drift of the machine weighs on all alike. */
                        int s = (int) ((i / 2 + (i % 2 ? N_SETTINGS - 1 - j : j)) % N_SETTINGS);

                        t[s][i] = measure(s);
                }
                printf("%u", i);
                for (int s = 0; s < N_SETTINGS; s++)
                        printf(" %.1f", t[s][i]);
                printf("\n");
                fflush(stdout);
        }

        for (int s = 0; s < N_SETTINGS; s++) {
                double med, lo, hi, *v = calloc(samples, sizeof *v);

                if (!v)
                        return 1;
                memcpy(v, t[s], samples * sizeof *v);
                median_ci(v, samples, &med, &lo, &hi);
                printf("%-9s median %.1f ns a round trip (95 %% interval %.1f-%.1f)", names[s], med, lo, hi);
                if (s != NONE) {
                        for (unsigned i = 0; i < samples; i++)
                                v[i] = t[s][i] / t[NONE][i];
                        median_ci(v, samples, &med, &lo, &hi);
                        printf("; against none of the same sample: %+.1f %% (95 %% interval %+.1f to %+.1f %%)",
                               100 * (med - 1), 100 * (lo - 1), 100 * (hi - 1));
                }
                printf("\n");
                free(v);
        }
        {
                double med, lo, hi, *v = calloc(samples, sizeof *v);

                if (!v)
                        return 1;
                for (unsigned i = 0; i < samples; i++)
                        v[i] = t[MONOTONIC][i] / t[SCHED][i];
                median_ci(v, samples, &med, &lo, &hi);
                printf("monotonic against sched of the same sample: %+.1f %% (95 %% interval %+.1f to %+.1f %%)\n",
                       100 * (med - 1), 100 * (lo - 1), 100 * (hi - 1));
                free(v);
        }
        /* Five each, the median: one is as noisy as a sample. */
        for (int s = EMPTY; s < N_SETTINGS; s++) {
                double v[5], med, lo, hi;

                for (size_t i = 0; i < ELEMENTSOF(v); i++)
                        v[i] = run_time(s);
                median_ci(v, ELEMENTSOF(v), &med, &lo, &hi);
                printf("%-9s %.1f ns a run (kernel.bpf_stats_enabled; median of %zu runs of -l %u, %.1f-%.1f)\n",
                       names[s], med, ELEMENTSOF(v), loops, v[0], v[ELEMENTSOF(v) - 1]);
        }
        bpf_object__close(obj);
        return 0;
}
