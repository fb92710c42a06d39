/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Loading and draining the off-CPU program. libbpf loads it: it relocates
 * the program's maps and its reads of task fields against the running
 * kernel's BTF (the state is __state since 5.14, state before), which a
 * hand-written loader would have to redo. */

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>

#include "bpf/offcpu.h"
#include "log.h"
#include "macro.h"
#include "offcpu.h"
#include "offcpu.bpf.h"         /* offcpu_bpf_object[]: the compiled program */

#define DRAIN_BATCH 256

struct offcpu {
        struct bpf_object *obj;
        struct bpf_link *link;
        int counts_fd, stats_fd;
        uint32_t max_entries;
        struct offcpu_key *keys;
        struct offcpu_wait *values;
        uint64_t drained;
        int n_possible;
        bool no_batch;
        bool reuses_stacks;
};

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap) {
        if (level == LIBBPF_WARN && log_get_max_level() >= LOG_DEBUG)
                return vfprintf(stderr, fmt, ap);
        return 0;
}

offcpu *offcpu_free(offcpu *o) {
        if (!o)
                return NULL;
        bpf_link__destroy(o->link);
        bpf_object__close(o->obj);
        free(o->keys);
        free(o->values);
        free(o);
        return NULL;
}

/* Opens the object with the settings of c, and loads it with one of its
 * two programs: `prog` (the other is not loaded). */
static int load(offcpu *o, const offcpu_config *c, const char *prog, const char **why) {
        LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "perfsnapd_offcpu");
        struct bpf_program *p;
        struct bpf_map *m;
        bool fast;
        int r;

        o->obj = bpf_object__open_mem(offcpu_bpf_object, sizeof offcpu_bpf_object, &opts);
        if (!o->obj) {
                *why = "the program's object is damaged";
                return -errno;
        }
        bpf_object__for_each_program(p, o->obj)
                bpf_program__set_autoload(p, streq(bpf_program__name(p), prog));
        /* The waits are in task storage or in `start`, not both. */
        fast = streq(prog, "offcpu_switch");
        m = bpf_object__find_map_by_name(o->obj, "start");
        if (!m || bpf_map__set_max_entries(m, c->max_threads) < 0 || bpf_map__set_autocreate(m, !fast) < 0)
                return -EINVAL;
        m = bpf_object__find_map_by_name(o->obj, "waits");
        if (!m || bpf_map__set_autocreate(m, fast) < 0)
                return -EINVAL;
        m = bpf_object__find_map_by_name(o->obj, "counts");
        if (!m || bpf_map__set_max_entries(m, c->max_entries) < 0)
                return -EINVAL;
        /* The program's settings: its read-only data, min_ns alone. */
        m = bpf_object__find_map_by_name(o->obj, ".rodata");
        {
                size_t size = 0;
                const void *cur = m ? bpf_map__initial_value(m, &size) : NULL;
                _cleanup_free_ uint8_t *data = NULL;

                if (!cur || size < sizeof c->min_ns) {
                        *why = "the program has no settings";
                        return -EINVAL;
                }
                data = malloc(size);
                if (!data)
                        return -ENOMEM;
                memcpy(data, cur, size);
                memcpy(data, &c->min_ns, sizeof c->min_ns);
                r = bpf_map__set_initial_value(m, data, size);
                if (r < 0)
                        return r;
        }
        r = bpf_object__load(o->obj);
        if (r < 0) {
                *why = r == -EPERM || r == -EACCES ? "loading a BPF program needs CAP_BPF and CAP_PERFMON" :
                       "the kernel refused the program (it needs Linux 5.5 or later with BTF)";
                return r == -EPERM || r == -EACCES ? r : -ENOEXEC;
        }
        p = bpf_object__find_program_by_name(o->obj, prog);
        o->counts_fd = bpf_object__find_map_fd_by_name(o->obj, "counts");
        o->stats_fd = bpf_object__find_map_fd_by_name(o->obj, "stats");
        if (!p || o->counts_fd < 0 || o->stats_fd < 0)
                return -EINVAL;
        o->link = bpf_program__attach_trace(p);
        if (!o->link) {
                *why = "attaching the program to the sched_switch tracepoint failed";
                return -errno;
        }
        return 0;
}

int offcpu_new(const offcpu_config *c, offcpu **ret, const char **ret_why) {
        offcpu *o;
        const char *why = "";
        int r;

        if (!c || !ret || c->max_threads == 0 || c->max_entries == 0)
                return -EINVAL;
        libbpf_set_print(libbpf_quiet);

        o = calloc(1, sizeof *o);
        if (!o)
                return -ENOMEM;
        o->max_entries = c->max_entries;
        o->keys = calloc(DRAIN_BATCH, sizeof *o->keys);
        o->values = calloc(DRAIN_BATCH, sizeof *o->values);
        if (!o->keys || !o->values) {
                r = -ENOMEM;
                goto fail;
        }
        o->n_possible = libbpf_num_possible_cpus();
        if (o->n_possible <= 0) {
                r = o->n_possible < 0 ? o->n_possible : -EINVAL;
                why = "the possible CPUs are not known";
                goto fail;
        }

        /* Kernels before 5.15 have no bpf_task_pt_regs(), before 5.11 no
         * task storage: the program that keeps waits in a map by thread
         * id and takes the stacks at every wait. */
        r = load(o, c, "offcpu_switch", &why);
        o->reuses_stacks = r >= 0;
        if (r == -ENOEXEC) {
                bpf_object__close(o->obj);
                o->obj = NULL;
                r = load(o, c, "offcpu_switch_every", &why);
        }
        if (r < 0)
                goto fail;

        *ret = o;
        return 0;

fail:
        offcpu_free(o);
        if (ret_why)
                *ret_why = why;
        return r;
}

bool offcpu_reuses_stacks(const offcpu *o) {
        return o && o->reuses_stacks;
}

static int emit(offcpu *o, const struct offcpu_wait *w, offcpu_entry_cb cb, void *userdata) {
        uint64_t ips[2 + OFFCPU_KERNEL_DEPTH + OFFCPU_USER_DEPTH];
        size_t nr = 0, nk = MIN(w->n_kernel, (uint32_t) OFFCPU_KERNEL_DEPTH),
               nu = MIN(w->n_user, (uint32_t) OFFCPU_USER_DEPTH);

        ips[nr++] = PERF_CONTEXT_KERNEL;
        memcpy(ips + nr, w->kernel, nk * sizeof *ips);
        nr += nk;
        if (nu > 0) {
                ips[nr++] = PERF_CONTEXT_USER;
                memcpy(ips + nr, w->user, nu * sizeof *ips);
                nr += nu;
        }
        o->drained++;
        return cb(&(offcpu_entry) {
                        .pid = w->key.pid,
                        .tid = w->key.tid,
                        .cpu = w->key.cpu,
                        .cgroup = w->key.cgroup,
                        .wait_ns = w->ns,
                        .waits = w->count,
                        .last_ns = w->last_ns,
                        .ips = ips,
                        .nr = nr,
                }, userdata);
}

/* Kernels before 5.6 have no batch operations: keys one at a time, the
 * next key found before the entry is deleted. */
static int drain_one_by_one(offcpu *o, offcpu_entry_cb cb, void *userdata) {
        struct offcpu_key key, next;
        bool have = false;
        int r;

        for (uint32_t i = 0; i < o->max_entries; i++) {
                if (bpf_map_get_next_key(o->counts_fd, have ? &key : NULL, &next) < 0)
                        break;
                if (have)
                        (void) bpf_map_delete_elem(o->counts_fd, &key);
                key = next;
                have = true;
                if (bpf_map_lookup_elem(o->counts_fd, &key, o->values) < 0)
                        continue;
                r = emit(o, o->values, cb, userdata);
                if (r < 0)
                        return r;
        }
        if (have)
                (void) bpf_map_delete_elem(o->counts_fd, &key);
        return 0;
}

int offcpu_drain(offcpu *o, offcpu_entry_cb cb, void *userdata) {
        struct offcpu_key in;
        struct offcpu_key out;
        bool first = true;
        int r;

        if (!o || !cb)
                return -EINVAL;
        if (o->no_batch)
                return drain_one_by_one(o, cb, userdata);

        for (;;) {
                uint32_t count = DRAIN_BATCH;

                r = bpf_map_lookup_and_delete_batch(o->counts_fd, first ? NULL : &in, &out, o->keys, o->values,
                                                    &count, NULL);
                if (r < 0 && errno != ENOENT) {
                        if (first && (errno == EINVAL || errno == 524 /* ENOTSUPP */ || errno == EOPNOTSUPP)) {
                                o->no_batch = true;
                                return drain_one_by_one(o, cb, userdata);
                        }
                        return -errno;
                }
                for (uint32_t i = 0; i < count; i++) {
                        int k = emit(o, &o->values[i], cb, userdata);
                        if (k < 0)
                                return k;
                }
                if (r < 0)      /* ENOENT: that was the last batch */
                        return 0;
                in = out;
                first = false;
        }
}

int offcpu_get_stats(offcpu *o, offcpu_stats *ret) {
        uint64_t sum[_OFFCPU_STAT_MAX] = {};
        _cleanup_free_ uint64_t *v = NULL;
        uint32_t zero = 0;

        if (!o || !ret)
                return -EINVAL;
        /* Per possible CPU, the counters' array. */
        v = calloc((size_t) o->n_possible * _OFFCPU_STAT_MAX, sizeof *v);
        if (!v)
                return -ENOMEM;
        if (bpf_map_lookup_elem(o->stats_fd, &zero, v) < 0)
                return -errno;
        for (int c = 0; c < o->n_possible; c++)
                for (uint32_t k = 0; k < _OFFCPU_STAT_MAX; k++)
                        sum[k] += v[(size_t) c * _OFFCPU_STAT_MAX + k];
        *ret = (offcpu_stats) {
                .switches = sum[OFFCPU_STAT_SWITCHES],
                .blocked = sum[OFFCPU_STAT_BLOCKED],
                .counted = sum[OFFCPU_STAT_ENDED],
                .counted_ns = sum[OFFCPU_STAT_ENDED_NS],
                .short_waits = sum[OFFCPU_STAT_SHORT],
                .full = sum[OFFCPU_STAT_FULL],
                .full_ns = sum[OFFCPU_STAT_FULL_NS],
                .no_stack = sum[OFFCPU_STAT_NO_STACK],
                .no_room = sum[OFFCPU_STAT_NO_ROOM],
                .stacks_taken = sum[OFFCPU_STAT_STACKS_TAKEN],
                .drained = o->drained,
        };
        return 0;
}
