// SPDX-License-Identifier: GPL-2.0-or-later
/* Off-CPU time, attached to the sched_switch tracepoint as a BTF-typed
 * raw tracepoint (no perf event, no tracefs; the tasks' fields are read
 * directly). At each context switch:
 *  - the task put on the CPU (next): if it was waiting, its wait ends
 *    now and is added to its sum in `counts`, per (thread, stack, cgroup);
 *  - the task leaving (prev): if it leaves to wait (not preempted, not
 *    exiting), its wait begins, with the stacks it leaves the CPU with.
 * The daemon takes the sums at every drain. Nothing is sent per switch.
 *
 * Taking a stack costs 1-2 µs (the kernel's unwind alone), more than all
 * the rest of a switch, so a thread that waits again at the same spot
 * (the same system call, first argument, user instruction, stack and
 * frame pointers, and the same kind of sleep) keeps the stacks of its
 * last wait; and when such a wait turns out long (long_ns), its kernel
 * stack is taken then, from the sleeping task, before it runs again. Only
 * short waits at a reused spot may be shown at the kernel stack of an
 * earlier wait there.
 *
 * `counts` is two maps: the program adds to the one `active` names, the
 * daemon flips it and takes the other's sums a drain later, when no
 * program can still be adding to them. */

#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "offcpu.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by the loader before loading. sched_lo..sched_hi: the kernel's
 * .sched.text (__sched functions: schedule() and the waits that call it,
 * do_nanosleep, io_schedule, the lock slow paths...); 0, 0: not known. */
const volatile __u64 min_ns = 0;
const volatile __u64 long_ns = 1000000;
const volatile __u64 sched_lo = 0, sched_hi = 0;

/* Preallocated (no allocation in the scheduler): a thread that finds it
 * full is not followed (OFFCPU_STAT_NO_ROOM). */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 8192);
        __type(key, __u32);
        __type(value, struct offcpu_wait);
} start SEC(".maps");

struct counts_map {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 4096);
        __type(key, struct offcpu_key);
        __type(value, struct offcpu_wait);
};
struct counts_map counts0 SEC(".maps"), counts1 SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, __u32);
} active SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct offcpu_wait);
} scratch SEC(".maps");

struct offcpu_stats_value {
        __u64 v[_OFFCPU_STAT_MAX];
};

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct offcpu_stats_value);
} stats SEC(".maps");

/* What is read of a task, relocated against the kernel's BTF. */
struct task_struct {
        int pid;
        int tgid;
        unsigned int flags;
        unsigned int in_iowait:1;
} __attribute__((preserve_access_index));

struct task_struct___new {              /* Linux 5.14 and later */
        unsigned int __state;
} __attribute__((preserve_access_index));

struct task_struct___old {
        long state;
} __attribute__((preserve_access_index));

#define PF_KTHREAD 0x00200000
#define TASK_DEAD 0x80                  /* since Linux 4.14 */
#define TASK_WAKING 0x200               /* a waker got there before the tracepoint */

#define stat_add(i, n) (st->v[i] += (n))

static __always_inline long task_state(struct task_struct *t) {
        if (bpf_core_field_exists(((struct task_struct___new *) t)->__state))
                return ((struct task_struct___new *) t)->__state;
        return ((struct task_struct___old *) t)->state;
}

static __always_inline __u64 mix(__u64 h, __u64 v) {
        return (h ^ v) * 0x100000001b3ULL;
}

static __always_inline __u64 hash_frames(__u64 h, const __u64 *ips, __u32 n, __u32 max) {
        for (__u32 i = 0; i < max; i++) {
                if (i >= n)
                        break;
                h = mix(h, ips[i]);
        }
        return h;
}

#if defined(__TARGET_ARCH_x86)
struct pt_regs {
        unsigned long di, orig_ax, ip, sp, bp;
} __attribute__((preserve_access_index));
#endif

/* Where a user thread waits from: its system call, first argument,
 * return address, stack and frame pointers, the return address in its
 * caller's frame, and the kind of sleep; 0 (take the stacks) for kernel
 * threads, waits outside a system call (page faults), and architectures
 * this is not written for. */
static __always_inline __u64 wait_spot(struct task_struct *t, long state, bool reuse) {
#if defined(__TARGET_ARCH_x86)
        struct pt_regs *r;
        __u64 h = 0xcbf29ce484222325ULL, ret = 0;
        long nr;

        if (!reuse || (t->flags & PF_KTHREAD))
                return 0;
        r = (struct pt_regs *) bpf_task_pt_regs((void *) t);
        if (!r)
                return 0;
        nr = (long) r->orig_ax;
        if (nr < 0)
                return 0;
        /* With frame pointers, [bp + 8] is the caller's return address:
         * one caller further up tells two call sites of one function
         * apart. Without, bp is some register: still part of the spot. */
        bpf_probe_read_user(&ret, sizeof ret, (void *) (r->bp + 8));
        h = mix(h, (__u64) nr);
        h = mix(h, r->di);
        h = mix(h, r->ip);
        h = mix(h, r->sp);
        h = mix(h, r->bp);
        h = mix(h, ret);
        h = mix(h, (__u64) state);
        h = mix(h, t->in_iowait);
        return h | 1;
#else
        return 0;
#endif
}

static __always_inline __u64 clock_now(__u64 *now) {
        if (*now == 0)
                *now = bpf_ktime_get_ns();
        return *now;
}

static __always_inline __u64 stack_hash(const struct offcpu_wait *w) {
        return hash_frames(hash_frames(0xcbf29ce484222325ULL, w->kernel, w->n_kernel, OFFCPU_KERNEL_DEPTH), w->user,
                           w->n_user, OFFCPU_USER_DEPTH);
}

static __always_inline bool in_sched_text(__u64 ip) {
        return ip >= sched_lo && ip < sched_hi;
}

/* The stack of a waiting task, taken from the task (bpf_get_task_stack(),
 * as /proc/PID/stack shows it), has no frames of .sched.text: no
 * schedule(), and no __sched wait function either. The thread's cached
 * stack from past its run of those (which also leaves out the
 * tracepoint's frames above __schedule) is compared with it, by hash; if
 * they differ, the wait was somewhere else, and its sum goes to the
 * task's stack as it is (the innermost frame then is the caller of the
 * __sched function), and the thread's next wait takes its stacks
 * afresh. */
static __always_inline void check_stack(struct offcpu_stats_value *st, struct task_struct *next, struct offcpu_wait *w) {
        __u64 h_cached = 0xcbf29ce484222325ULL, h_task;
        __u32 zero = 0, i, k = 0;
        struct offcpu_wait *s;
        long n;

        if (sched_hi == 0)
                return;
        s = bpf_map_lookup_elem(&scratch, &zero);
        if (!s)
                return;
        n = bpf_get_task_stack((void *) next, s->kernel, sizeof s->kernel, 0);
        if (n <= 0)
                return;
        s->n_kernel = (__u64) n / 8;
        h_task = hash_frames(0xcbf29ce484222325ULL, s->kernel, s->n_kernel, OFFCPU_KERNEL_DEPTH);
        /* k: past the cached stack's run of .sched.text frames. */
        for (i = 0; i < OFFCPU_KERNEL_DEPTH; i++) {
                if (i >= w->n_kernel)
                        break;
                if (in_sched_text(w->kernel[i]))
                        k = i + 1;
                else if (k > 0)
                        break;
        }
        for (i = 0; i < OFFCPU_KERNEL_DEPTH; i++) {
                __u32 at = k + i;

                if (at >= w->n_kernel || at >= OFFCPU_KERNEL_DEPTH)
                        break;
                h_cached = mix(h_cached, w->kernel[at]);
        }
        if (k > 0 && h_cached == h_task)
                return;
        for (i = 0; i < OFFCPU_KERNEL_DEPTH; i++)
                w->kernel[i] = s->kernel[i];
        w->n_kernel = s->n_kernel;
        w->key.stack_hash = stack_hash(w);
        w->spot = 0;
        stat_add(OFFCPU_STAT_STACKS_AT_END, 1);
}

static __always_inline int add_wait(void *counts, struct offcpu_wait *w, __u64 d) {
        struct offcpu_wait *c = bpf_map_lookup_elem(counts, &w->key);

        if (c) {
                __sync_fetch_and_add(&c->ns, d);
                __sync_fetch_and_add(&c->count, 1);
                c->cpu = w->cpu;
                return 0;
        }
        w->ns = d;
        w->count = 1;
        return bpf_map_update_elem(counts, &w->key, w, BPF_NOEXIST);
}

static __always_inline void wait_ends(struct offcpu_stats_value *st, struct task_struct *next, __u64 *clock,
                                      bool reuse) {
        __u32 tid = next->pid, zero = 0;
        struct offcpu_wait *w;
        __u32 *a;
        __u64 d, now;
        int r;

        if (tid == 0)
                return;
        w = bpf_map_lookup_elem(&start, &tid);
        if (!w || !w->waiting)
                return;
        w->waiting = 0;
        now = clock_now(clock);
        if (now <= w->start_ns)
                return;
        d = now - w->start_ns;
        if (d < min_ns) {
                stat_add(OFFCPU_STAT_SHORT, 1);
                return;
        }
        /* A long wait at a reused spot: is its kernel stack the one of
         * the wait that took the stacks? */
        if (reuse && !w->fresh && d >= long_ns)
                check_stack(st, next, w);
        a = bpf_map_lookup_elem(&active, &zero);
        if (!a)
                return;
        r = *a ? add_wait(&counts1, w, d) : add_wait(&counts0, w, d);
        if (r != 0) {
                stat_add(OFFCPU_STAT_FULL, 1);
                stat_add(OFFCPU_STAT_FULL_NS, d);
                return;
        }
        stat_add(OFFCPU_STAT_ENDED, 1);
        stat_add(OFFCPU_STAT_ENDED_NS, d);
}

static __always_inline void wait_begins(struct offcpu_stats_value *st, void *ctx, struct task_struct *prev,
                                        __u64 *clock, bool reuse) {
        __u32 tid = prev->pid, zero = 0;
        struct offcpu_wait *w;
        long state, n;
        __u64 spot;

        if (tid == 0)
                return;         /* the idle task */
        state = task_state(prev);
        if (state & TASK_DEAD) {
                bpf_map_delete_elem(&start, &tid);
                return;
        }
        /* Runnable: preempted, not waiting. TASK_WAKING: it was dequeued
         * to sleep, and a waker on another CPU got to it already. */
        if ((state & 0x7f) == 0 && !(state & TASK_WAKING))
                return;
        stat_add(OFFCPU_STAT_BLOCKED, 1);

        w = bpf_map_lookup_elem(&start, &tid);
        if (!w) {
                struct offcpu_wait *s = bpf_map_lookup_elem(&scratch, &zero);

                if (!s)
                        return;
                s->spot = 0;
                s->waiting = 0;
                s->key.pid = 0;
                if (bpf_map_update_elem(&start, &tid, s, BPF_NOEXIST) != 0) {
                        stat_add(OFFCPU_STAT_NO_ROOM, 1);
                        return;
                }
                w = bpf_map_lookup_elem(&start, &tid);
                if (!w)
                        return;
        }
        spot = wait_spot(prev, state & ~TASK_WAKING, reuse);
        w->start_ns = clock_now(clock);
        w->cpu = bpf_get_smp_processor_id();
        w->key.tid = tid;
        w->key.cgroup = bpf_get_current_cgroup_id();
        w->fresh = spot == 0 || spot != w->spot || w->key.pid != (__u32) prev->tgid;
        if (w->fresh) {
                w->key.pid = prev->tgid;
                w->spot = spot;
                n = bpf_get_stack(ctx, w->kernel, sizeof w->kernel, 0);
                if (n <= 0) {
                        stat_add(OFFCPU_STAT_NO_STACK, 1);
                        w->spot = 0;
                        return;
                }
                w->n_kernel = (__u64) n / 8;
                n = bpf_get_stack(ctx, w->user, sizeof w->user, BPF_F_USER_STACK);
                w->n_user = n > 0 ? (__u64) n / 8 : 0;
                w->key.stack_hash = stack_hash(w);
                stat_add(OFFCPU_STAT_STACKS_TAKEN, 1);
        }
        w->waiting = 1;
}

static __always_inline int on_switch(void *ctx, bool preempt, struct task_struct *prev, struct task_struct *next,
                                     bool reuse) {
        __u64 now = 0;
        __u32 zero = 0;
        struct offcpu_stats_value *st = bpf_map_lookup_elem(&stats, &zero);

        if (!st)
                return 0;
        stat_add(OFFCPU_STAT_SWITCHES, 1);
        wait_ends(st, next, &now, reuse);
        if (!preempt)
                wait_begins(st, ctx, prev, &now, reuse);
        return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next) {
        return on_switch(ctx, preempt, prev, next, true);
}

/* For kernels before 5.15 (no bpf_task_pt_regs; before 5.9 no
 * bpf_get_task_stack): stacks taken at every wait. */
SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch_every, bool preempt, struct task_struct *prev, struct task_struct *next) {
        return on_switch(ctx, preempt, prev, next, false);
}
