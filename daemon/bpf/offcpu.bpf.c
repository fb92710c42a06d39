// SPDX-License-Identifier: GPL-2.0-or-later
/* Off-CPU time, attached to the sched_switch tracepoint as a BTF-typed
 * raw tracepoint (no perf event, no tracefs; the tasks' fields are read
 * directly). At each context switch:
 *  - the task put on the CPU (next): if it was waiting, its wait ends
 *    now and is added to the thread's own entry;
 *  - the task leaving (prev): if it leaves to wait (not preempted, not
 *    exiting), its wait begins, with the stacks it leaves the CPU with.
 * A thread's entry moves its ended waits to a sum in `counts`, per
 * (thread, stack, cgroup), when they reach flush_ns, when its stack or
 * cgroup changes, when it exits, and at its first switch after the
 * daemon flipped `active`: a map update per wait would cost more than
 * the rest of a switch. The daemon takes the sums at every drain.
 * Nothing is sent per switch.
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
 * A thread's entry is in task storage where the kernel allocates it
 * without locks (Linux 6.4 and later: offcpu_switch_ts), else in the
 * preallocated hash `start` by thread id (offcpu_switch and, without
 * bpf_task_pt_regs(), offcpu_switch_every).
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
const volatile __u64 flush_ns = 1000000;
const volatile __u64 precise_ns = 20000;
const volatile __u64 sched_lo = 0, sched_hi = 0;
/* 1: waits timed by the run queue's clock (below); 0: by the monotonic
 * clock, where the run queues' clocks may differ between CPUs. */
const volatile __u64 clock_rq = 1;

/* Preallocated (no allocation in the scheduler): a thread that finds it
 * full is not followed (OFFCPU_STAT_NO_ROOM). */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 8192);
        __type(key, __u32);
        __type(value, struct offcpu_wait);
} start SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
        __uint(map_flags, BPF_F_NO_PREALLOC);
        __type(key, int);
        __type(value, struct offcpu_wait);
} threads SEC(".maps");

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
struct css_set;
struct task_struct {
        int pid;
        int tgid;
        unsigned int flags;
        unsigned int in_iowait:1;
        struct css_set *cgroups;
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
 * caller's frame, and the kind of sleep; false (take the stacks) for
 * kernel threads, waits outside a system call (page faults), and
 * architectures this is not written for. The caller's return address is
 * a read of user memory, some 60 ns: it is read when the stacks are
 * taken, and compared at waits that follow a wait of precise_ns or more
 * (where it costs little against the wait); the thread's waits that
 * follow shorter waits take its other registers as telling enough. */
static __always_inline bool read_spot(struct task_struct *t, long state, bool reuse, struct offcpu_spot *s) {
#if defined(__TARGET_ARCH_x86)
        struct pt_regs *r;
        long nr;

        if (!reuse || (t->flags & PF_KTHREAD))
                return false;
        r = (struct pt_regs *) bpf_task_pt_regs((void *) t);
        if (!r)
                return false;
        nr = (long) r->orig_ax;
        if (nr < 0)
                return false;
        s->nr = (__u64) nr;
        s->di = r->di;
        s->ip = r->ip;
        s->sp = r->sp;
        s->bp = r->bp;
        s->state = (__u64) state | ((__u64) t->in_iowait << 32);
        return true;
#else
        return false;
#endif
}

/* With frame pointers, [bp + 8] is the caller's return address: one
 * caller further up tells two call sites of one function apart. Without,
 * bp is some register, and this whatever it points to. */
static __always_inline __u64 read_ret(const struct offcpu_spot *s) {
        __u64 ret = 0;

        bpf_probe_read_user(&ret, sizeof ret, (void *) (s->bp + 8));
        return ret;
}

static __always_inline bool same_spot(const struct offcpu_spot *a, const struct offcpu_spot *b) {
        return a->valid && a->nr == b->nr && a->di == b->di && a->ip == b->ip && a->sp == b->sp && a->bp == b->bp &&
               a->state == b->state;
}

/* The run queue's clock, which __schedule() has just brought up to date:
 * loads instead of a clock read (bpf_ktime_get_ns() costs some 50 ns on
 * a VM's clock, as much as the rest of a switch). It is sched_clock()
 * time, the same on all CPUs where sched_clock is stable; only
 * differences are used. Where it is not (clock_rq 0: the loader's
 * offcpu_choose_clock()), each CPU's is kept near the monotonic clock at
 * its ticks only, and a wait that ends on another CPU than it began would
 * be timed across two clocks: the monotonic clock then. The run queue
 * is the leaving task's, this CPU's, found through its CFS run queue
 * (CONFIG_FAIR_GROUP_SCHED; the per-CPU `runqueues` is not in kallsyms
 * without CONFIG_KALLSYMS_ALL). Kernels without: the monotonic clock. */
struct rq {
        __u64 clock;
} __attribute__((preserve_access_index));

struct cfs_rq {
        struct rq *rq;
} __attribute__((preserve_access_index));

struct sched_entity {
        struct cfs_rq *cfs_rq;
} __attribute__((preserve_access_index));

struct task_struct___se {
        struct sched_entity se;
} __attribute__((preserve_access_index));

static __always_inline __u64 clock_now(__u64 *now, struct task_struct *prev) {
        if (*now != 0)
                return *now;
        if (clock_rq && bpf_core_field_exists(((struct task_struct___se *) prev)->se.cfs_rq) &&
            bpf_core_field_exists(((struct cfs_rq *) 0)->rq)) {
                struct cfs_rq *cfs = ((struct task_struct___se *) prev)->se.cfs_rq;
                struct rq *rq = cfs ? cfs->rq : NULL;

                /* 0 (no run queue): no time, rather than one of another
                 * clock. */
                *now = rq ? rq->clock : 0;
        } else
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

/* Moves the thread's ended waits to their sum in the `counts` map of
 * generation gen (`active`: the daemon adds 1 at each drain; its low bit
 * picks the map). */
static __always_inline int add_sum(void *counts, struct offcpu_wait *w) {
        struct offcpu_wait *c = bpf_map_lookup_elem(counts, &w->key);

        /* The key has the thread id: only this thread's switches, one
         * at a time, add to it. */
        if (c) {
                c->ns += w->ns;
                c->count += w->count;
                c->cpu = w->cpu;
                return 0;
        }
        return bpf_map_update_elem(counts, &w->key, w, BPF_NOEXIST);
}

static __always_inline void flush(struct offcpu_stats_value *st, struct offcpu_wait *w, __u32 gen) {
        int r;

        w->gen = gen;
        w->css = 0;             /* the cgroup id is read again at the next wait */
        if (w->count == 0)
                return;
        r = (gen & 1) ? add_sum(&counts1, w) : add_sum(&counts0, w);
        if (r != 0) {
                stat_add(OFFCPU_STAT_FULL, w->count);
                stat_add(OFFCPU_STAT_FULL_NS, w->ns);
        } else {
                stat_add(OFFCPU_STAT_ENDED, w->count);
                stat_add(OFFCPU_STAT_ENDED_NS, w->ns);
        }
        w->ns = 0;
        w->count = 0;
}

/* The stack of a waiting task, taken from the task (bpf_get_task_stack(),
 * as /proc/PID/stack shows it), has no frames of .sched.text: no
 * schedule(), and no __sched wait function either. The thread's cached
 * stack from past its run of those (which also leaves out the
 * tracepoint's frames above __schedule) is compared with it, by hash; if
 * they differ, the wait was somewhere else, and its time goes to the
 * task's stack as it is (the innermost frame then is the caller of the
 * __sched function), and the thread's next wait takes its stacks
 * afresh. */
static __always_inline void check_stack(struct offcpu_stats_value *st, struct task_struct *next, struct offcpu_wait *w,
                                        __u32 gen) {
        __u64 h_cached = 0xcbf29ce484222325ULL, h_task;
        __u32 zero = 0, i, run = 0;
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
        /* The cached stack's frames past its first run of .sched.text
         * frames, in one pass. Not as an index from the run's end: the
         * verifier would follow each of its 48 positions apart, and
         * gives up on the task storage program (E2BIG, a million
         * instructions; 41,035 this way, on Linux 6.18). */
        for (i = 0; i < OFFCPU_KERNEL_DEPTH; i++) {
                bool sched;

                if (i >= w->n_kernel)
                        break;
                sched = in_sched_text(w->kernel[i]);
                if (run == 0 && sched)
                        run = 1;        /* in the run */
                else if (run == 1 && !sched)
                        run = 2;        /* past it */
                if (run == 2)
                        h_cached = mix(h_cached, w->kernel[i]);
        }
        if (run > 0 && h_cached == h_task)
                return;
        flush(st, w, gen);      /* the waits before, at the cached stack */
        for (i = 0; i < OFFCPU_KERNEL_DEPTH; i++)
                w->kernel[i] = s->kernel[i];
        w->n_kernel = s->n_kernel;
        w->key.stack_hash = stack_hash(w);
        w->spot.valid = 0;
        stat_add(OFFCPU_STAT_STACKS_AT_END, 1);
}

/* A thread's entry: in task storage (ts) or in `start`. */
static __always_inline struct offcpu_wait *thread_find(struct task_struct *t, __u32 tid, bool ts) {
        if (ts)
                return bpf_task_storage_get(&threads, t, 0, 0);
        return bpf_map_lookup_elem(&start, &tid);
}

static __always_inline struct offcpu_wait *thread_new(struct offcpu_stats_value *st, struct task_struct *t, __u32 tid,
                                                      bool ts) {
        struct offcpu_wait *w;
        __u32 zero = 0;

        if (ts) {
                /* Zeroed; freed with the task if not deleted before. */
                w = bpf_task_storage_get(&threads, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
                if (!w)
                        goto no_room;
        } else {
                struct offcpu_wait *s = bpf_map_lookup_elem(&scratch, &zero);

                if (!s)
                        return NULL;
                s->ns = 0;
                s->count = 0;
                s->spot.valid = 0;
                s->last_ns = 0;
                s->css = 0;
                s->waiting = 0;
                s->key.pid = 0;
                s->key.cgroup = 0;
                if (bpf_map_update_elem(&start, &tid, s, BPF_NOEXIST) != 0)
                        goto no_room;
                w = bpf_map_lookup_elem(&start, &tid);
                if (!w)
                        return NULL;
        }
        w->key.tid = tid;
        return w;
no_room:
        stat_add(OFFCPU_STAT_NO_ROOM, 1);
        return NULL;
}

static __always_inline void thread_delete(struct task_struct *t, __u32 tid, bool ts) {
        if (ts)
                bpf_task_storage_delete(&threads, t);
        else
                bpf_map_delete_elem(&start, &tid);
}

static __always_inline void wait_ends(struct offcpu_stats_value *st, struct task_struct *prev, struct task_struct *next,
                                      __u64 *clock, __u32 gen, bool reuse, bool ts) {
        __u32 tid = next->pid;
        struct offcpu_wait *w;
        __u64 d, now;

        if (tid == 0)
                return;
        w = thread_find(next, tid, ts);
        if (!w || !w->waiting)
                return;
        w->waiting = 0;
        now = clock_now(clock, prev);
        if (now <= w->start_ns || w->start_ns == 0) {
                stat_add(OFFCPU_STAT_NO_TIME, 1);
                return;
        }
        d = now - w->start_ns;
        w->last_ns = d;
        if (d < min_ns) {
                stat_add(OFFCPU_STAT_SHORT, 1);
                return;
        }
        /* A long wait at a reused spot: is its kernel stack the one of
         * the wait that took the stacks? */
        if (reuse && !w->fresh && d >= long_ns)
                check_stack(st, next, w, gen);
        w->ns += d;
        w->count++;
        if (w->ns >= flush_ns || w->gen != gen)
                flush(st, w, gen);
}

static __always_inline void wait_begins(struct offcpu_stats_value *st, void *ctx, struct task_struct *prev,
                                        __u64 *clock, __u32 gen, bool reuse, bool ts) {
        __u32 tid = prev->pid;
        struct offcpu_wait *w;
        struct offcpu_spot spot = {};
        long state, n;
        __u64 css = 0;
        bool have_spot, reused;

        if (tid == 0)
                return;         /* the idle task */
        state = task_state(prev);
        if (state & TASK_DEAD) {
                w = thread_find(prev, tid, ts);
                if (w) {
                        flush(st, w, gen);
                        thread_delete(prev, tid, ts);
                }
                return;
        }
        /* Runnable: preempted, not waiting. TASK_WAKING: it was dequeued
         * to sleep, and a waker on another CPU got to it already. */
        if ((state & 0x7f) == 0 && !(state & TASK_WAKING))
                return;
        stat_add(OFFCPU_STAT_BLOCKED, 1);

        w = thread_find(prev, tid, ts);
        if (!w) {
                w = thread_new(st, prev, tid, ts);
                if (!w)
                        return;
        }
        if (w->gen != gen)
                flush(st, w, gen);
        /* A thread that called execve() while another thread of its
         * process was the leader has the leader's id since. */
        if (w->key.tid != tid) {
                flush(st, w, gen);
                w->key.tid = tid;
        }
        /* The cgroup id, read again when the thread's css_set changed
         * (it moved) and after each flush. A thread that moved twice
         * between two waits, to a css_set at the address of the first,
         * keeps its old id until its next flush, a drain at most. */
        if (bpf_core_field_exists(prev->cgroups))
                css = (__u64) prev->cgroups;
        if (css == 0 || css != w->css) {
                __u64 cg = bpf_get_current_cgroup_id();

                if (cg != w->key.cgroup) {
                        flush(st, w, gen);
                        w->key.cgroup = cg;
                }
                w->css = css;
        }
        have_spot = read_spot(prev, state & ~TASK_WAKING, reuse, &spot);
        reused = have_spot && same_spot(&w->spot, &spot) &&
                 w->key.pid == (__u32) prev->tgid && (w->last_ns < precise_ns || read_ret(&spot) == w->spot.ret);
        w->start_ns = clock_now(clock, prev);
        w->fresh = !reused;
        if (w->fresh) {
                flush(st, w, gen);      /* with the CPU of the waits it sums */
                w->css = css;
                w->key.pid = prev->tgid;
                w->spot.valid = 0;
                n = bpf_get_stack(ctx, w->kernel, sizeof w->kernel, 0);
                if (n <= 0) {
                        stat_add(OFFCPU_STAT_NO_STACK, 1);
                        return;
                }
                w->n_kernel = (__u64) n / 8;
                n = bpf_get_stack(ctx, w->user, sizeof w->user, BPF_F_USER_STACK);
                w->n_user = n > 0 ? (__u64) n / 8 : 0;
                w->key.stack_hash = stack_hash(w);
                stat_add(OFFCPU_STAT_STACKS_TAKEN, 1);
                if (have_spot) {
                        spot.ret = read_ret(&spot);
                        spot.valid = 1;
                        w->spot = spot;
                }
        }
        w->cpu = bpf_get_smp_processor_id();
        w->waiting = 1;
}

/* A preempted thread's ended waits go to their sum if the daemon flipped
 * `active` since: a thread that keeps the CPU does not hold them back
 * for longer than that. */
static __always_inline void preempted(struct offcpu_stats_value *st, struct task_struct *prev, __u32 gen, bool ts) {
        __u32 tid = prev->pid;
        struct offcpu_wait *w;

        if (tid == 0)
                return;
        w = thread_find(prev, tid, ts);
        if (w && w->gen != gen)
                flush(st, w, gen);
}

static __always_inline int on_switch(void *ctx, bool preempt, struct task_struct *prev, struct task_struct *next,
                                     bool reuse, bool ts) {
        __u64 now = 0;
        __u32 zero = 0, gen = 0, *a;
        struct offcpu_stats_value *st = bpf_map_lookup_elem(&stats, &zero);

        if (!st)
                return 0;
        a = bpf_map_lookup_elem(&active, &zero);
        if (a)
                gen = *a;
        stat_add(OFFCPU_STAT_SWITCHES, 1);
        wait_ends(st, prev, next, &now, gen, reuse, ts);
        if (preempt)
                preempted(st, prev, gen, ts);
        else
                wait_begins(st, ctx, prev, &now, gen, reuse, ts);
        return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next) {
        return on_switch(ctx, preempt, prev, next, true, false);
}

/* Linux 6.4 and later: a thread's entry in task storage. */
SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch_ts, bool preempt, struct task_struct *prev, struct task_struct *next) {
        return on_switch(ctx, preempt, prev, next, true, true);
}

struct bpf_iter_meta;
struct bpf_iter__task {
        struct bpf_iter_meta *meta;
        struct task_struct *task;
} __attribute__((preserve_access_index));

/* When the daemon stops, after the switch program is detached: every
 * thread's held waits go to their sums, for the last drain. */
SEC("iter/task")
int offcpu_flush_ts(struct bpf_iter__task *ctx) {
        struct task_struct *t = ctx->task;
        struct offcpu_stats_value *st;
        struct offcpu_wait *w;
        __u32 zero = 0, gen = 0, *a;

        if (!t)
                return 0;
        st = bpf_map_lookup_elem(&stats, &zero);
        a = bpf_map_lookup_elem(&active, &zero);
        if (!st || !a)
                return 0;
        gen = *a;
        w = bpf_task_storage_get(&threads, t, 0, 0);
        if (w)
                flush(st, w, gen);
        return 0;
}

/* For kernels before 5.15 (no bpf_task_pt_regs; before 5.9 no
 * bpf_get_task_stack): stacks taken at every wait. */
SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch_every, bool preempt, struct task_struct *prev, struct task_struct *next) {
        return on_switch(ctx, preempt, prev, next, false, false);
}
