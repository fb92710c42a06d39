/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Off-CPU time (offcpu = on): a BPF program (bpf/offcpu.bpf.c) on the
 * sched_switch tracepoint sums, in the kernel, how long threads wait off
 * the CPU, per (thread, stack, cgroup); the daemon takes those sums at
 * every drain with offcpu_drain(). Nothing crosses to user space per
 * context switch. A wait is counted when the thread is put back on a
 * CPU; its stacks are the ones it left the CPU with (the blocking kernel
 * stack: do_nanosleep, pipe_read, io_schedule, futex_wait...), reused
 * from its last wait when it waits at the same spot (a long wait there
 * gets its own kernel stack). Preemption is not a wait. A thread's
 * waits reach the sums once they add up to 1 ms, or at a drain, a change
 * of stack or cgroup, or its exit. Kernel memory of ~1.2 KiB each: twice
 * max_entries sums, preallocated, and an entry per thread that has
 * waited, until it exits (task storage, Linux 6.4 and later; before, a
 * preallocated table of max_threads). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct offcpu offcpu;

/* The programs read where a thread waits from (to reuse its stacks) on
 * x86-64 only; elsewhere they take the stacks at every wait. */
#if defined(__x86_64__)
#  define OFFCPU_READS_SPOTS 1
#else
#  define OFFCPU_READS_SPOTS 0
#endif

typedef struct offcpu_config {
        uint64_t min_ns;                /* waits shorter than this are counted in stats only */
        uint64_t long_ns;               /* a wait this long at a reused spot has its kernel stack checked */
        uint64_t sched_text_start, sched_text_end;      /* the kernel's .sched.text (kallsyms); 0: not checked */
        uint32_t max_threads;           /* threads followed (that waited and have not exited) */
        uint32_t max_entries;           /* (thread, stack, cgroup) sums held between two drains */
        const char *program;            /* NULL: the first of the programs below the kernel takes; else only
                                         * this one (tests) */
        const char *clock;              /* what times the waits: "sched", "monotonic" or NULL/"auto" (see
                                         * offcpu_choose_clock()) */
        const char *sysfs;              /* where kernel/debug/sched/debug and devices/system/clocksource
                                         * are read for "auto"; NULL: /sys */
} offcpu_config;

#define OFFCPU_CONFIG_DEFAULT                   \
        ((offcpu_config) {                      \
                .min_ns = 0,                    \
                .long_ns = 1000000,             \
                .max_threads = 8192,            \
                .max_entries = 4096,            \
        })

/* Loads the program and attaches it (it runs from then on, on every CPU).
 * Errors: -EPERM/-EACCES without CAP_BPF+CAP_PERFMON (or CAP_SYS_ADMIN),
 * -ENOEXEC if the kernel refused the program (too old: it needs BTF, BPF
 * bounded loops and raw tracepoints with BTF, Linux 5.5), -errno
 * otherwise. *ret_why (static text) says what failed. */
int offcpu_new(const offcpu_config *c, offcpu **ret, const char **ret_why);
offcpu *offcpu_free(offcpu *o);
/* Whether a thread waiting at the same spot again keeps its stacks
 * (Linux 5.15 and later, x86-64); else they are taken at every wait. */
bool offcpu_reuses_stacks(const offcpu *o);
/* Whether threads' entries are in task storage (Linux 6.4 and later: no
 * max_threads), not in the preallocated table of max_threads. */
bool offcpu_task_storage(const offcpu *o);
/* The running kernel's release is major.minor or later (which programs
 * it can take). */
bool offcpu_kernel_at_least(unsigned major, unsigned minor);
/* The program loaded: offcpu_switch_ts (task storage), offcpu_switch
 * (x86-64) or offcpu_switch_every (stacks taken at every wait). */
const char *offcpu_program(const offcpu *o);
/* The instructions the verifier went through to accept it (of the
 * million it allows; bpf_prog_info.verified_insns, Linux 5.16 and later;
 * 0 before). */
uint32_t offcpu_verified_insns(const offcpu *o);
/* The loaded switch program's file descriptor (tests: its instructions
 * as the kernel runs them); -1 if none. */
int offcpu_program_fd(const offcpu *o);

/* The clock that times waits: "sched", the run queue's (sched_clock(),
 * read from memory the scheduler has just updated: no clock read at a
 * switch), or "monotonic" (bpf_ktime_get_ns()). want "auto" (or NULL):
 * sched where it is one clock on all CPUs (the kernel's
 * sched_clock_stable() in debugfs; without debugfs, on x86, the TSC as
 * the clocksource and no paravirtual clocksource; arm64, RISC-V, s390x,
 * POWER64, LoongArch: always), else monotonic, since a wait may end on
 * another CPU than it began and each CPU's run queue clock then follows
 * the monotonic clock only at its ticks. On kernels without
 * CONFIG_FAIR_GROUP_SCHED (no run queue pointer in sched_entity) the
 * loader times waits by the monotonic clock whatever this says
 * (offcpu_clock_name() tells). *why (static text) says why. sysfs: where
 * kernel/debug/sched/debug and devices/system/clocksource/ are read
 * (NULL: /sys). NULL for an unknown want. */
const char *offcpu_choose_clock(const char *want, const char *sysfs, const char **why);
/* The clock the loaded program times waits with ("sched" or
 * "monotonic"), and why. */
const char *offcpu_clock_name(const offcpu *o);
const char *offcpu_clock_why(const offcpu *o);
/* For auto's run queue clock: true, once, if what decided at the start
 * (debugfs's sched_clock_stable(), else the TSC as clocksource) says it
 * is no longer one clock; a file that cannot be read says nothing. The
 * program goes on with it (its clock is set when it is loaded), and
 * offcpu_clock_why() says so from then on. */
bool offcpu_check_clock(offcpu *o);

/* One sum: ips is a perf callchain (PERF_CONTEXT_KERNEL, kernel frames,
 * PERF_CONTEXT_USER, user frames), innermost first; the callback may
 * change it (it is the drain's scratch). */
typedef struct offcpu_entry {
        uint32_t pid, tid, cpu;
        uint64_t cgroup;                /* cgroup v2 id, as PERF_SAMPLE_CGROUP's */
        uint64_t wait_ns, waits;
        uint64_t *ips;
        size_t nr;
} offcpu_entry;

typedef int (*offcpu_entry_cb)(const offcpu_entry *e, void *userdata);

/* Takes the sums out of the kernel and calls cb for each: those of the
 * previous drain's map, which the program stopped adding to then (none
 * if that was less than 10 ms ago). With all (the last drain), the
 * program is detached first, and the waits the threads' entries hold
 * and the current map's sums are taken too; the object is then only
 * good for offcpu_get_stats() and offcpu_free(). After cb fails, the
 * rest are taken and counted in dropped_waits/dropped_ns with the one
 * that failed, and the error is returned at the end. */
int offcpu_drain(offcpu *o, bool all, offcpu_entry_cb cb, void *userdata);
/* A drain takes the waits of the map the program stopped adding to at the
 * drain before, and not sooner than 10 ms after: how long until the next
 * drain may (0: now). Waits end up stored two drains after they ended. */
uint64_t offcpu_drain_wait_ns(const offcpu *o);

typedef struct offcpu_stats {
        uint64_t switches;              /* context switches seen */
        uint64_t blocked;               /* switch-outs to wait */
        uint64_t counted, counted_ns;   /* waits ended and summed */
        uint64_t short_waits;           /* shorter than min_ns */
        uint64_t full, full_ns;         /* not summed: max_entries sums already held */
        uint64_t no_stack;              /* not followed: no kernel stack */
        uint64_t no_room;               /* not followed: max_threads threads waiting already */
        uint64_t stacks_taken;          /* waits whose stacks were taken, not reused */
        uint64_t stacks_at_end;         /* long waits at a reused spot whose kernel stack was taken at their end */
        uint64_t no_time;               /* not counted: no clock at their start, or one that went back */
        uint64_t drained;               /* sums taken by offcpu_drain() */
        uint64_t dropped_waits, dropped_ns;     /* of those, not handed to a callback that worked */
} offcpu_stats;

int offcpu_get_stats(offcpu *o, offcpu_stats *ret);
