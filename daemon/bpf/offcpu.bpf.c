// SPDX-License-Identifier: GPL-2.0-or-later
/* Off-CPU time: attached to a software context-switch event on every CPU
 * (PERF_COUNT_SW_CONTEXT_SWITCHES, period 1), which the scheduler raises
 * in the task that leaves the CPU. A thread that leaves it to wait
 * (any state but running) has its stacks saved; the wait ends when the
 * thread is put back on a CPU, which is the time of the previous switch
 * on the CPU it next leaves. Waits are summed per (thread, stack, CPU,
 * cgroup) in `counts`, which the daemon empties every drain. Nothing is
 * sent per switch. */

#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "offcpu.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by the loader before loading. */
const volatile __u64 min_ns = 0;

/* Preallocated, as a perf_event program's maps must be: a full map
 * refuses a new thread (OFFCPU_STAT_NO_ROOM) rather than evicting one. */
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
        __type(value, __u64);
} last_switch SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct offcpu_wait);
} scratch SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, _OFFCPU_STAT_MAX);
        __type(key, __u32);
        __type(value, __u64);
} stats SEC(".maps");

/* The task state field, named __state since Linux 5.14. */
struct task_struct___new {
        unsigned int __state;
} __attribute__((preserve_access_index));

struct task_struct___old {
        long state;
} __attribute__((preserve_access_index));

static __always_inline void stat_add(__u32 i, __u64 v) {
        __u64 *p = bpf_map_lookup_elem(&stats, &i);

        if (p)
                *p += v;
}

static __always_inline long task_state(void) {
        void *t = (void *) bpf_get_current_task();

        if (bpf_core_field_exists(((struct task_struct___new *) t)->__state))
                return BPF_CORE_READ((struct task_struct___new *) t, __state);
        return BPF_CORE_READ((struct task_struct___old *) t, state);
}

static __always_inline __u64 hash_frames(__u64 h, const __u64 *ips, __u32 n, __u32 max) {
        for (__u32 i = 0; i < max; i++) {
                if (i >= n)
                        break;
                h = (h ^ ips[i]) * 0x100000001b3ULL;
        }
        return h;
}

SEC("perf_event")
int offcpu_switch(struct bpf_perf_event_data *ctx) {
        __u64 now = bpf_ktime_get_ns(), pid_tgid, in_ns;
        __u32 zero = 0, tid;
        struct offcpu_wait *w, *s;
        __u64 *last;
        long n, state;

        last = bpf_map_lookup_elem(&last_switch, &zero);
        if (!last)
                return 0;
        /* The task leaving now came on at the previous switch here. */
        in_ns = *last;
        *last = now;
        stat_add(OFFCPU_STAT_SWITCHES, 1);

        pid_tgid = bpf_get_current_pid_tgid();
        tid = (__u32) pid_tgid;
        if (tid == 0)
                return 0;       /* the idle task */

        w = bpf_map_lookup_elem(&start, &tid);
        if (w) {
                if (in_ns > w->start_ns) {
                        __u64 d = in_ns - w->start_ns;

                        if (d < min_ns)
                                stat_add(OFFCPU_STAT_SHORT, 1);
                        else {
                                struct offcpu_wait *c = bpf_map_lookup_elem(&counts, &w->key);

                                if (c) {
                                        __sync_fetch_and_add(&c->ns, d);
                                        __sync_fetch_and_add(&c->count, 1);
                                        c->last_ns = in_ns;
                                        stat_add(OFFCPU_STAT_ENDED, 1);
                                        stat_add(OFFCPU_STAT_ENDED_NS, d);
                                } else {
                                        w->ns = d;
                                        w->count = 1;
                                        w->last_ns = in_ns;
                                        if (bpf_map_update_elem(&counts, &w->key, w, BPF_NOEXIST) == 0) {
                                                stat_add(OFFCPU_STAT_ENDED, 1);
                                                stat_add(OFFCPU_STAT_ENDED_NS, d);
                                        } else {
                                                stat_add(OFFCPU_STAT_FULL, 1);
                                                stat_add(OFFCPU_STAT_FULL_NS, d);
                                        }
                                }
                        }
                }
                bpf_map_delete_elem(&start, &tid);
        }

        /* Preempted (still runnable): not a wait. Exiting (TASK_DEAD,
         * 0x80 since Linux 4.14): it does not come back. */
        state = task_state();
        if ((state & 0x7f) == 0 || (state & 0x80))
                return 0;
        stat_add(OFFCPU_STAT_BLOCKED, 1);

        s = bpf_map_lookup_elem(&scratch, &zero);
        if (!s)
                return 0;
        s->start_ns = now;
        s->key.pid = pid_tgid >> 32;
        s->key.tid = tid;
        s->key.cpu = bpf_get_smp_processor_id();
        s->key._pad = 0;
        s->key.cgroup = bpf_get_current_cgroup_id();
        n = bpf_get_stack(ctx, s->kernel, sizeof s->kernel, 0);
        if (n <= 0) {
                stat_add(OFFCPU_STAT_NO_STACK, 1);
                return 0;
        }
        s->n_kernel = (__u64) n / 8;
        n = bpf_get_stack(ctx, s->user, sizeof s->user, BPF_F_USER_STACK);
        s->n_user = n > 0 ? (__u64) n / 8 : 0;
        s->key.stack_hash = hash_frames(hash_frames(0xcbf29ce484222325ULL, s->kernel, s->n_kernel, OFFCPU_KERNEL_DEPTH),
                                        s->user, s->n_user, OFFCPU_USER_DEPTH);
        if (bpf_map_update_elem(&start, &tid, s, BPF_ANY) != 0)
                stat_add(OFFCPU_STAT_NO_ROOM, 1);
        return 0;
}
