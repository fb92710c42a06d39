// SPDX-License-Identifier: GPL-2.0-or-later
/* Off-CPU time, attached to the sched_switch tracepoint as a BTF-typed
 * raw tracepoint (no perf event, no tracefs; the tasks' fields are read
 * directly). At each context switch:
 *  - the task put on the CPU (next): if it was waiting, its wait ends
 *    now and is added to its sum in `counts`, per (thread, stack, CPU,
 *    cgroup);
 *  - the task leaving (prev): if it leaves to wait (not preempted, not
 *    exiting), its wait begins, with the stacks it leaves the CPU with.
 * The daemon empties `counts` at every drain. Nothing is sent per switch.
 *
 * Taking the stacks (an unwind of the kernel's and a walk of the user
 * one) is most of the cost, so a thread that waits again at the same
 * spot (the same system call, first argument, user instruction and stack
 * pointer: a loop around read(), epoll_wait() or futex()) keeps the
 * stacks of its last wait, in its task's local storage. */

#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "offcpu.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by the loader before loading. */
const volatile __u64 min_ns = 0;

/* A thread's wait: in its task's local storage (Linux 5.11; freed with
 * the task), or, for older kernels, in a map by thread id. */
struct {
        __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
        __uint(map_flags, BPF_F_NO_PREALLOC);
        __type(key, int);
        __type(value, struct offcpu_wait);
} waits SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 4096);
        __type(key, __u32);
        __type(value, struct offcpu_wait);
} start SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 4096);
        __type(key, struct offcpu_key);
        __type(value, struct offcpu_wait);
} counts SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct offcpu_wait);
} scratch SEC(".maps");

/* One entry: the counters, looked up once per switch. */
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
} __attribute__((preserve_access_index));

struct task_struct___new {              /* Linux 5.14 and later */
        unsigned int __state;
} __attribute__((preserve_access_index));

struct task_struct___old {
        long state;
} __attribute__((preserve_access_index));

struct pt_regs {
        unsigned long di, orig_ax, ip, sp;
} __attribute__((preserve_access_index));

#define PF_KTHREAD 0x00200000
#define TASK_DEAD 0x80                  /* since Linux 4.14 */

#define stat_add(i, n) (st->v[i] += (n))

static __always_inline long task_state(struct task_struct *t) {
        if (bpf_core_field_exists(((struct task_struct___new *) t)->__state))
                return ((struct task_struct___new *) t)->__state;
        return ((struct task_struct___old *) t)->state;
}

static __always_inline __u64 hash_frames(__u64 h, const __u64 *ips, __u32 n, __u32 max) {
        for (__u32 i = 0; i < max; i++) {
                if (i >= n)
                        break;
                h = (h ^ ips[i]) * 0x100000001b3ULL;
        }
        return h;
}

/* Where a user thread waits from: its system call, first argument,
 * return address and stack pointer; 0 (take the stacks) for kernel
 * threads and waits outside a system call (page faults). */
static __always_inline __u64 wait_spot(struct task_struct *t, bool cache) {
        struct pt_regs *r;
        long nr;
        __u64 h = 0xcbf29ce484222325ULL;

        if (!cache || (t->flags & PF_KTHREAD))
                return 0;
        r = (struct pt_regs *) bpf_task_pt_regs((void *) t);
        if (!r)
                return 0;
        nr = (long) r->orig_ax;
        if (nr < 0)
                return 0;
        h = (h ^ (__u64) nr) * 0x100000001b3ULL;
        h = (h ^ r->di) * 0x100000001b3ULL;
        h = (h ^ r->ip) * 0x100000001b3ULL;
        h = (h ^ r->sp) * 0x100000001b3ULL;
        return h | 1;
}

/* The clock is read once per switch, and only by a switch that needs it
 * (a read costs about as much as the rest of a switch without stacks). */
static __always_inline __u64 clock_now(__u64 *now) {
        if (*now == 0)
                *now = bpf_ktime_get_ns();
        return *now;
}

static __always_inline void wait_ends(struct offcpu_stats_value *st, struct task_struct *next, __u64 *clock, bool fast) {
        __u32 tid = next->pid;
        struct offcpu_wait *w, *c;
        __u64 d, now;

        if (tid == 0)
                return;
        w = fast ? bpf_task_storage_get(&waits, next, 0, 0) : bpf_map_lookup_elem(&start, &tid);
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
        c = bpf_map_lookup_elem(&counts, &w->key);
        if (c) {
                __sync_fetch_and_add(&c->ns, d);
                __sync_fetch_and_add(&c->count, 1);
                c->last_ns = now;
        } else {
                w->ns = d;
                w->count = 1;
                w->last_ns = now;
                if (bpf_map_update_elem(&counts, &w->key, w, BPF_NOEXIST) != 0) {
                        stat_add(OFFCPU_STAT_FULL, 1);
                        stat_add(OFFCPU_STAT_FULL_NS, d);
                        return;
                }
        }
        stat_add(OFFCPU_STAT_ENDED, 1);
        stat_add(OFFCPU_STAT_ENDED_NS, d);
}

static __always_inline void wait_begins(struct offcpu_stats_value *st, void *ctx, struct task_struct *prev, __u64 *clock,
                                        bool fast) {
        __u32 tid = prev->pid, zero = 0;
        struct offcpu_wait *w;
        long state, n;
        __u64 spot;

        if (tid == 0)
                return;         /* the idle task */
        state = task_state(prev);
        if (state & TASK_DEAD) {
                if (!fast)
                        bpf_map_delete_elem(&start, &tid);
                return;
        }
        if ((state & 0x7f) == 0)
                return;         /* runnable: not a wait */
        stat_add(OFFCPU_STAT_BLOCKED, 1);

        if (fast) {
                w = bpf_task_storage_get(&waits, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
                if (!w) {
                        stat_add(OFFCPU_STAT_NO_ROOM, 1);
                        return;
                }
        } else
                w = bpf_map_lookup_elem(&start, &tid);
        if (!w) {
                struct offcpu_wait *s = bpf_map_lookup_elem(&scratch, &zero);

                if (!s)
                        return;
                s->spot = 0;
                s->waiting = 0;
                if (bpf_map_update_elem(&start, &tid, s, BPF_NOEXIST) != 0) {
                        stat_add(OFFCPU_STAT_NO_ROOM, 1);
                        return;
                }
                w = bpf_map_lookup_elem(&start, &tid);
                if (!w)
                        return;
        }
        spot = wait_spot(prev, fast);
        w->start_ns = clock_now(clock);
        w->key.tid = tid;
        w->key.cpu = bpf_get_smp_processor_id();
        w->key.cgroup = bpf_get_current_cgroup_id();
        if (spot == 0 || spot != w->spot || w->key.pid != (__u32) prev->tgid) {
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
                w->key.stack_hash = hash_frames(hash_frames(0xcbf29ce484222325ULL, w->kernel, w->n_kernel,
                                                            OFFCPU_KERNEL_DEPTH),
                                                w->user, w->n_user, OFFCPU_USER_DEPTH);
                stat_add(OFFCPU_STAT_STACKS_TAKEN, 1);
        }
        w->waiting = 1;
}

static __always_inline int on_switch(void *ctx, bool preempt, struct task_struct *prev, struct task_struct *next,
                                     bool fast) {
        __u64 now = 0;
        __u32 zero = 0;
        struct offcpu_stats_value *st = bpf_map_lookup_elem(&stats, &zero);

        if (!st)
                return 0;
        stat_add(OFFCPU_STAT_SWITCHES, 1);
        wait_ends(st, next, &now, fast);
        if (!preempt)
                wait_begins(st, ctx, prev, &now, fast);
        return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next) {
        return on_switch(ctx, preempt, prev, next, true);
}

/* For kernels before 5.15 (no bpf_task_pt_regs; before 5.11 no task
 * storage): waits in `start`, stacks taken at every wait. */
SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch_every, bool preempt, struct task_struct *prev, struct task_struct *next) {
        return on_switch(ctx, preempt, prev, next, false);
}
