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
        _OFFCPU_STAT_MAX,
};

/* The aggregate key: one thread's waits at one stack in one cgroup. */
struct offcpu_key {
        __u32 pid, tid;
        __u64 cgroup;
        __u64 stack_hash;
};

/* A thread's entry in `start` (kept between its waits, with the stacks
 * of the last, until it exits), and a sum in `counts`: the same layout,
 * so that a wait's entry is copied from one map to the other. */
struct offcpu_wait {
        __u64 ns;               /* summed wait time */
        __u64 count;            /* waits */
        __u64 start_ns;         /* CLOCK_MONOTONIC switch-out */
        __u64 spot;             /* where the stacks were taken (wait_spot()); 0: not reused */
        __u32 waiting;          /* 1 from the switch-out to the switch-in */
        __u32 fresh;            /* the stacks were taken at this wait's switch-out */
        __u32 cpu, _pad;        /* the CPU it left */
        struct offcpu_key key;
        __u32 n_kernel, n_user; /* frames */
        __u64 kernel[OFFCPU_KERNEL_DEPTH];
        __u64 user[OFFCPU_USER_DEPTH];
};
