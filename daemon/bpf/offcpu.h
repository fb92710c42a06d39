/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* What the off-CPU program (offcpu.bpf.c) and its loader (offcpu.c) share:
 * the layout of its maps. */

#include <linux/types.h>

/* Frames kept per stack: the kernel's, then the user's. */
#define OFFCPU_KERNEL_DEPTH 48
#define OFFCPU_USER_DEPTH 80

/* The counters of the `stats` map (one per-CPU entry of them all). */
enum {
        OFFCPU_STAT_SWITCHES,           /* context switches seen */
        OFFCPU_STAT_BLOCKED,            /* of those, tasks leaving the CPU to wait */
        OFFCPU_STAT_ENDED,              /* waits that ended and were counted */
        OFFCPU_STAT_SHORT,              /* waits shorter than min_ns, not counted */
        OFFCPU_STAT_FULL,               /* waits not counted: the `counts` map was full */
        OFFCPU_STAT_NO_STACK,           /* waits whose kernel stack could not be read */
        OFFCPU_STAT_ENDED_NS,           /* the time of the ENDED ones */
        OFFCPU_STAT_FULL_NS,            /* the time of the FULL ones */
        OFFCPU_STAT_NO_ROOM,            /* waits not followed: `start` was full */
        OFFCPU_STAT_STACKS_TAKEN,       /* waits whose stacks were taken when they began */
        OFFCPU_STAT_STACKS_AT_END,      /* long waits at a reused spot whose kernel stack, taken when they ended, was another */
        OFFCPU_STAT_NO_TIME,            /* waits not counted: no clock when they began, or one that went back */
        _OFFCPU_STAT_MAX,
};

/* The aggregate key: one thread's waits at one stack in one cgroup. */
struct offcpu_key {
        __u32 pid, tid;
        __u64 cgroup;
        __u64 stack_hash;
};

/* Where a thread waits from (offcpu.bpf.c's read_spot()). */
struct offcpu_spot {
        __u64 nr, di, ip, sp, bp;       /* system call, first argument, user registers */
        __u64 ret;                      /* [bp + 8]: the caller's return address */
        __u64 state;                    /* sleep state, and in_iowait */
        __u64 valid;                    /* 0: take the stacks at the next wait */
};

/* A thread's entry (kept between its waits, with the stacks of the last,
 * until it exits), and a sum in `counts`: the same layout, so that a
 * thread's entry is copied from one map to the other. In a thread's
 * entry, ns and count are its ended waits not yet added to a sum. */
struct offcpu_wait {
        __u64 ns;               /* summed wait time */
        __u64 count;            /* waits */
        __u64 start_ns;         /* switch-out, by the run queue's clock (offcpu.bpf.c's clock_now()) */
        struct offcpu_spot spot;        /* where the stacks were taken (read_spot()) */
        __u64 last_ns;          /* the thread's last wait */
        __u64 css;              /* the thread's css_set when its cgroup id was read */
        __u32 waiting;          /* 1 from the switch-out to the switch-in */
        __u32 fresh;            /* the stacks were taken at this wait's switch-out */
        __u32 cpu;              /* the CPU it left */
        __u32 gen;              /* `active` when ns and count were last moved to a sum */
        struct offcpu_key key;
        __u32 n_kernel, n_user; /* frames */
        __u64 kernel[OFFCPU_KERNEL_DEPTH];
        __u64 user[OFFCPU_USER_DEPTH];
};
