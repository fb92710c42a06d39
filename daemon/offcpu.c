/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Loading and draining the off-CPU program. libbpf loads it: it relocates
 * the program's maps and its reads of task fields against the running
 * kernel's BTF (the state is __state since 5.14, state before), which a
 * hand-written loader would have to redo. */

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bpf/offcpu.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "offcpu.h"
#include "offcpu.bpf.h"         /* offcpu_bpf_object[]: the compiled program */
#include "timeparse.h"

#define DRAIN_BATCH 256

/* A thread's ended waits are added to their sum once they reach this
 * (or at a change of its stack or cgroup, its exit, or its first switch
 * after a drain): up to this much of a thread's waiting may be seen late;
 * the last drain takes all. */
#define FLUSH_NS UINT64_C(1000000)

struct offcpu {
        struct bpf_object *obj;
        struct bpf_link *link;
        int counts_fd[2], active_fd, stats_fd, start_fd;
        struct bpf_program *flush_prog; /* offcpu_flush_ts, with task storage */
        char program[32];               /* the switch program loaded */
        int program_fd;
        const char *clock, *clock_why;  /* what times the waits (static text) */
        const char *clock_want;         /* as asked for (static text; NULL: auto) */
        char *sysfs;
        bool clock_stale;               /* auto's run queue clock no longer one clock */
        bool clock_by_clocksource;      /* auto took it for the TSC as clocksource (no debugfs) */
        uint32_t verified_insns;
        /* The generation: the program adds to counts[active & 1]; a
         * thread's held waits go to a sum at its first switch in a new
         * one. */
        uint32_t active;
        uint64_t flipped_ns;    /* CLOCK_MONOTONIC of the last flip */
        uint32_t max_entries;
        struct offcpu_key *keys;
        struct offcpu_wait *values;
        uint64_t drained;
        /* A drain whose callback failed takes the rest of its sums
         * anyway, counted here, and returns the error at its end. */
        int cb_error;
        uint64_t dropped_waits, dropped_ns;
        int n_possible;
        bool no_batch;
        bool reuses_stacks;
        bool stopped;           /* the last drain was made */
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
        free(o->sysfs);
        free(o);
        return NULL;
}

/* Sets the u64 `const volatile` variable name of the program's .rodata
 * (found by its BTF) in data, a copy of the map's initial value. */
static int set_setting(struct bpf_object *obj, uint8_t *data, size_t size, const char *name, uint64_t value) {
        const struct btf *btf = bpf_object__btf(obj);
        const struct btf_type *sec;
        const struct btf_var_secinfo *v;
        int id;

        if (!btf)
                return -EINVAL;
        id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
        if (id < 0)
                return -EINVAL;
        sec = btf__type_by_id(btf, (uint32_t) id);
        v = btf_var_secinfos(sec);
        for (uint16_t i = 0; i < btf_vlen(sec); i++, v++) {
                const struct btf_type *var = btf__type_by_id(btf, v->type);

                if (!var || !streq(btf__name_by_offset(btf, var->name_off), name))
                        continue;
                if (v->size != sizeof value || (size_t) v->offset + sizeof value > size)
                        return -EINVAL;
                memcpy(data + v->offset, &value, sizeof value);
                return 0;
        }
        return -ENOENT;
}

/* The kernel's own word, where debugfs is mounted (Linux 5.13 and later
 * keep it there): 1 or 0 from "sched_clock_stable() : N" in
 * sched/debug, 2 if the file has no such line (a kernel without
 * CONFIG_HAVE_UNSTABLE_SCHED_CLOCK: sched_clock() is one clock), -1 if
 * it cannot be read. The line is in the header, the first few hundred
 * bytes: one read() of those, since the kernel renders the rest (every
 * thread of a CPU, under its run queue's lock) only when it is read. */
static int sched_clock_stable(const char *sysfs) {
        _cleanup_free_ char *path = path_join(sysfs, "kernel/debug/sched/debug");
        char buf[1024];
        const char *line;
        ssize_t n;
        int fd;

        if (!path)
                return -1;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -1;
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
                return -1;
        buf[n] = '\0';
        for (line = buf; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (strncmp(line, "sched_clock_stable()", 20) == 0) {
                        const char *colon = strchr(line, ':');

                        return colon && strtol(colon + 1, NULL, 10) == 1 ? 1 : 0;
                }
        return 2;
}

#if defined(__x86_64__) || defined(__i386__)
/* 1 if the TSC is the current clocksource, 0 if another is, -1 if that
 * cannot be read. */
static int clocksource_is_tsc(const char *sysfs) {
        _cleanup_free_ char *cur = NULL;
        size_t size;

        if (read_full_file_at(sysfs, "devices/system/clocksource/clocksource0/current_clocksource", 64, &cur, &size) <
            0)
                return -1;
        cur[strcspn(cur, "\n")] = '\0';
        return streq(cur, "tsc");
}
#endif

/* offcpu_choose_clock(), and *by_clocksource whether auto took sched
 * for the TSC as clocksource (no debugfs to ask). */
static const char *choose_clock(const char *want, const char *sysfs, const char **why, bool *by_clocksource) {
        const char *w;

        *by_clocksource = false;
        if (!why)
                why = &w;
        if (want && streq(want, "sched"))
                return *why = "offcpu_clock = sched", "sched";
        if (want && streq(want, "monotonic"))
                return *why = "offcpu_clock = monotonic", "monotonic";
        if (want && !streq(want, "auto"))
                return *why = "unknown clock", NULL;
        if (!sysfs)
                sysfs = "/sys";
        switch (sched_clock_stable(sysfs)) {
        case 1:
                return *why = "the kernel's sched_clock_stable() is 1: one clock on all CPUs", "sched";
        case 0:
                return *why = "the kernel's sched_clock_stable() is 0: the run queues' clocks may differ between CPUs",
                       "monotonic";
#if !defined(__x86_64__) && !defined(__i386__)
        case 2:         /* (x86 always has the line: not trusted there) */
                return *why = "this kernel's sched_clock() is one clock on all CPUs", "sched";
#endif
        default:
                break;
        }
#if defined(__x86_64__) || defined(__i386__)
        {
                /* Without debugfs: mark_tsc_unstable() takes the TSC from
                 * the clocksources and makes a native sched_clock() one
                 * clock per CPU, together. A guest's paravirtual
                 * sched_clock (kvm-clock, Hyper-V, Xen) may be unstable
                 * with the TSC as the clocksource (kvm-clock without its
                 * stable bit); and nothing tells of other clocksources:
                 * the safe choice. */
                static const char *const paravirt[] = { "kvm-clock", "hyperv_clocksource", "xen" };
                _cleanup_free_ char *avail = NULL;
                size_t size;
                int tsc = clocksource_is_tsc(sysfs);

                if (tsc < 0)
                        return *why = "the clocksource is not known (nor, without debugfs, sched_clock_stable())",
                               "monotonic";
                if (!tsc)
                        return *why = "the clocksource is not the TSC: the run queues' clocks may differ between CPUs",
                               "monotonic";
                if (read_full_file_at(sysfs, "devices/system/clocksource/clocksource0/available_clocksource", 4096,
                                      &avail, &size) < 0)
                        return *why = "the clocksources are not known", "monotonic";
                for (size_t i = 0; i < ELEMENTSOF(paravirt); i++)
                        if (strstr(avail, paravirt[i]))
                                return *why = "a paravirtual sched_clock may differ between CPUs, and without "
                                              "debugfs sched_clock_stable() cannot be read",
                                       "monotonic";
                *by_clocksource = true;
                return *why = "the TSC is the clocksource: one clock on all CPUs", "sched";
        }
#elif defined(__aarch64__) || defined(__riscv) || defined(__s390x__) || defined(__powerpc64__) || \
        defined(__loongarch__)
        /* No CONFIG_HAVE_UNSTABLE_SCHED_CLOCK on these. */
        return *why = "sched_clock() is one clock on all CPUs on this architecture", "sched";
#else
        return *why = "sched_clock_stable() cannot be read without debugfs", "monotonic";
#endif
}

const char *offcpu_choose_clock(const char *want, const char *sysfs, const char **why) {
        bool by_clocksource;

        return choose_clock(want, sysfs, why, &by_clocksource);
}

/* Whether the running kernel has what clock_now() reads the run queue's
 * clock through: sched_entity.cfs_rq and cfs_rq.rq. */
static bool kernel_has_rq_clock(void) {
        static const char *const path[][2] = { { "sched_entity", "cfs_rq" }, { "cfs_rq", "rq" } };
        struct btf *btf = btf__load_vmlinux_btf();
        bool found = btf != NULL;

        for (size_t i = 0; found && i < ELEMENTSOF(path); i++) {
                int id = btf__find_by_name_kind(btf, path[i][0], BTF_KIND_STRUCT);
                const struct btf_type *t = id > 0 ? btf__type_by_id(btf, (uint32_t) id) : NULL;
                const struct btf_member *m = t ? btf_members(t) : NULL;

                found = false;
                for (uint16_t j = 0; t && j < btf_vlen(t); j++, m++)
                        if (streq(btf__name_by_offset(btf, m->name_off) ?: "", path[i][1]))
                                found = true;
        }
        btf__free(btf);
        return found;
}

/* Opens the object with the settings of c, and loads it with one of its
 * two programs: `prog` (the other is not loaded). */
static int load(offcpu *o, const offcpu_config *c, const char *prog, const char **why) {
        LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "perfsnapd_offcpu");
        static const char *const counts[2] = { "counts0", "counts1" };
        struct bpf_program *p;
        struct bpf_map *m;
        bool ts;
        int r;

        o->obj = bpf_object__open_mem(offcpu_bpf_object, sizeof offcpu_bpf_object, &opts);
        if (!o->obj) {
                *why = "the program's object is damaged";
                return -errno;
        }
        /* The threads' entries: in task storage, or in `start`. With
         * task storage, the iterator that moves their held waits to the
         * sums at the end. */
        ts = streq(prog, "offcpu_switch_ts");
        bpf_object__for_each_program(p, o->obj)
                bpf_program__set_autoload(p, streq(bpf_program__name(p), prog) ||
                                                     (ts && streq(bpf_program__name(p), "offcpu_flush_ts")));
        m = bpf_object__find_map_by_name(o->obj, "start");
        if (!m || bpf_map__set_max_entries(m, ts ? 1 : c->max_threads) < 0)
                return -EINVAL;
        m = bpf_object__find_map_by_name(o->obj, "threads");
        if (!m || bpf_map__set_autocreate(m, ts) < 0)
                return -EINVAL;
        for (size_t i = 0; i < 2; i++) {
                m = bpf_object__find_map_by_name(o->obj, counts[i]);
                if (!m || bpf_map__set_max_entries(m, c->max_entries) < 0)
                        return -EINVAL;
        }
        /* The program's settings: its read-only data. */
        m = bpf_object__find_map_by_name(o->obj, ".rodata");
        {
                size_t size = 0;
                const void *cur = m ? bpf_map__initial_value(m, &size) : NULL;
                _cleanup_free_ uint8_t *data = NULL;

                if (!cur) {
                        *why = "the program has no settings";
                        return -EINVAL;
                }
                data = malloc(size);
                if (!data)
                        return -ENOMEM;
                memcpy(data, cur, size);
                if (set_setting(o->obj, data, size, "min_ns", c->min_ns) < 0 ||
                    set_setting(o->obj, data, size, "long_ns", c->long_ns) < 0 ||
                    set_setting(o->obj, data, size, "flush_ns", FLUSH_NS) < 0 ||
                    set_setting(o->obj, data, size, "sched_lo", c->sched_text_start) < 0 ||
                    set_setting(o->obj, data, size, "sched_hi", c->sched_text_end) < 0 ||
                    set_setting(o->obj, data, size, "clock_rq", streq(o->clock, "sched")) < 0) {
                        *why = "the program has no settings";
                        return -EINVAL;
                }
                r = bpf_map__set_initial_value(m, data, size);
                if (r < 0)
                        return r;
        }
        r = bpf_object__load(o->obj);
        if (r < 0) {
                /* E2BIG: the verifier gave up on it (a million
                 * instructions explored; offcpu_verified_insns() of the
                 * ones it takes tells how far from that they are). */
                log_info_errno(r, "Off-CPU time: the kernel refused the program %s (%m).", prog);
                /* Before Linux 5.11 maps are charged to RLIMIT_MEMLOCK. */
                *why = r == -EPERM || r == -EACCES ?
                       "loading a BPF program needs CAP_BPF and CAP_PERFMON (and, before Linux 5.11, RLIMIT_MEMLOCK "
                       "of some 20 MiB)" :
                       r == -E2BIG ? "the kernel's verifier gave up on the program (a million instructions)" :
                                     "the kernel refused the program (it needs Linux 5.5 or later with BTF)";
                return r == -EPERM || r == -EACCES ? r : -ENOEXEC;
        }
        p = bpf_object__find_program_by_name(o->obj, prog);
        o->counts_fd[0] = bpf_object__find_map_fd_by_name(o->obj, counts[0]);
        o->counts_fd[1] = bpf_object__find_map_fd_by_name(o->obj, counts[1]);
        o->active_fd = bpf_object__find_map_fd_by_name(o->obj, "active");
        o->stats_fd = bpf_object__find_map_fd_by_name(o->obj, "stats");
        o->start_fd = ts ? -1 : bpf_object__find_map_fd_by_name(o->obj, "start");
        o->flush_prog = ts ? bpf_object__find_program_by_name(o->obj, "offcpu_flush_ts") : NULL;
        if (!p || o->counts_fd[0] < 0 || o->counts_fd[1] < 0 || o->active_fd < 0 || o->stats_fd < 0 ||
            (ts ? !o->flush_prog : o->start_fd < 0))
                return -EINVAL;
        {
                struct bpf_prog_info info = {};
                uint32_t len = sizeof info;

                /* Kernels before 5.16 leave it 0. */
                if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) >= 0)
                        o->verified_insns = info.verified_insns;
        }
        snprintf(o->program, sizeof o->program, "%s", prog);
        o->program_fd = bpf_program__fd(p);
        o->link = bpf_program__attach_trace(p);
        if (!o->link) {
                *why = "attaching the program to the sched_switch tracepoint failed";
                return -errno;
        }
        return 0;
}

static void unload(offcpu *o) {
        bpf_link__destroy(o->link);
        o->link = NULL;
        bpf_object__close(o->obj);
        o->obj = NULL;
}

bool offcpu_kernel_at_least(unsigned major, unsigned minor) {
        struct utsname u;
        unsigned a = 0, b = 0;

        if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &a, &b) != 2)
                return false;
        return a > major || (a == major && b >= minor);
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
        o->clock_want = c->clock;
        o->sysfs = strdup(c->sysfs ?: "/sys");
        if (!o->sysfs) {
                r = -ENOMEM;
                goto fail;
        }
        o->clock = choose_clock(c->clock, o->sysfs, &o->clock_why, &o->clock_by_clocksource);
        if (!o->clock) {
                r = -EINVAL;
                why = "offcpu_clock is none of auto, sched and monotonic";
                goto fail;
        }
        if (streq(o->clock, "sched") && !kernel_has_rq_clock()) {
                o->clock = "monotonic";
                o->clock_why = "the kernel's CFS entities have no run queue pointer (no CONFIG_FAIR_GROUP_SCHED)";
        }
        o->n_possible = libbpf_num_possible_cpus();
        if (o->n_possible <= 0) {
                r = o->n_possible < 0 ? o->n_possible : -EINVAL;
                why = "the possible CPUs are not known";
                goto fail;
        }

        /* Linux 6.4 and later allocate task storage without locks, from
         * per-CPU caches: a thread's entry can be made inside the
         * scheduler, where an allocation that wakes kswapd could
         * deadlock on the run queue's lock. Earlier kernels: the
         * preallocated hash. */
        r = -ENOEXEC;
        if (c->program)
                r = load(o, c, c->program, &why);
        else {
                if (offcpu_kernel_at_least(6, 4)) {
                        r = load(o, c, "offcpu_switch_ts", &why);
                        if (r == -ENOEXEC)
                                unload(o);
                }
                /* Its waits' spots are read on x86-64 only (read_spot());
                 * elsewhere it would be offcpu_switch_every by another
                 * name. */
                if (r == -ENOEXEC && OFFCPU_READS_SPOTS)
                        r = load(o, c, "offcpu_switch", &why);
                /* Kernels before 5.15 have no bpf_task_pt_regs(), before
                 * 5.9 no bpf_get_task_stack(): the program that takes the
                 * stacks at every wait. */
                if (r == -ENOEXEC) {
                        unload(o);
                        r = load(o, c, "offcpu_switch_every", &why);
                }
        }
        o->reuses_stacks = r >= 0 && OFFCPU_READS_SPOTS && !streq(o->program, "offcpu_switch_every");
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

bool offcpu_check_clock(offcpu *o) {
        int st;

        if (!o || o->clock_stale || !streq(o->clock ?: "", "sched") || (o->clock_want && !streq(o->clock_want, "auto")))
                return false;
        /* By what decided at the start, when it answers: a file that
         * cannot be read now says nothing (the stricter fallback would
         * warn where nothing changed). */
        st = sched_clock_stable(o->sysfs);
#if defined(__x86_64__) || defined(__i386__)
        if (st == -1 && o->clock_by_clocksource) {
                if (clocksource_is_tsc(o->sysfs) != 0)
                        return false;
        } else
#endif
        if (st != 0)
                return false;
        o->clock_stale = true;
        o->clock_why = "auto took the run queues' clock at the start, but they may differ between CPUs since (a TSC "
                       "marked unstable?): waits that end on another CPU than they began may be mis-timed; restart "
                       "perfsnapd";
        return true;
}

int offcpu_program_fd(const offcpu *o) {
        return o && o->program[0] ? o->program_fd : -1;
}

const char *offcpu_program(const offcpu *o) {
        return o && o->program[0] ? o->program : NULL;
}

const char *offcpu_clock_name(const offcpu *o) {
        return o ? o->clock : NULL;
}

const char *offcpu_clock_why(const offcpu *o) {
        return o ? o->clock_why : NULL;
}

uint32_t offcpu_verified_insns(const offcpu *o) {
        return o ? o->verified_insns : 0;
}

bool offcpu_task_storage(const offcpu *o) {
        return o && o->flush_prog;      /* loaded with offcpu_switch_ts only */
}

static void emit(offcpu *o, const struct offcpu_wait *w, offcpu_entry_cb cb, void *userdata) {
        uint64_t ips[2 + OFFCPU_KERNEL_DEPTH + OFFCPU_USER_DEPTH];
        size_t nr = 0, nk = MIN(w->n_kernel, (uint32_t) OFFCPU_KERNEL_DEPTH),
               nu = MIN(w->n_user, (uint32_t) OFFCPU_USER_DEPTH);
        int r;

        o->drained++;
        if (o->cb_error < 0) {
                o->dropped_waits += w->count;
                o->dropped_ns += w->ns;
                return;
        }
        ips[nr++] = PERF_CONTEXT_KERNEL;
        memcpy(ips + nr, w->kernel, nk * sizeof *ips);
        nr += nk;
        if (nu > 0) {
                ips[nr++] = PERF_CONTEXT_USER;
                memcpy(ips + nr, w->user, nu * sizeof *ips);
                nr += nu;
        }
        r = cb(&(offcpu_entry) {
                        .pid = w->key.pid,
                        .tid = w->key.tid,
                        .cpu = w->cpu,
                        .cgroup = w->key.cgroup,
                        .wait_ns = w->ns,
                        .waits = w->count,
                        .ips = ips,
                        .nr = nr,
                }, userdata);
        if (r < 0) {
                o->cb_error = r;
                o->dropped_waits += w->count;
                o->dropped_ns += w->ns;
        }
}

/* Kernels before 5.6 have no batch operations: keys one at a time, the
 * next key found before the entry is deleted. */
static int drain_one_by_one(offcpu *o, int fd, offcpu_entry_cb cb, void *userdata) {
        struct offcpu_key key, next;
        bool have = false;

        for (uint32_t i = 0; i < o->max_entries; i++) {
                if (bpf_map_get_next_key(fd, have ? &key : NULL, &next) < 0)
                        break;
                if (have)
                        (void) bpf_map_delete_elem(fd, &key);
                key = next;
                have = true;
                if (bpf_map_lookup_elem(fd, &key, o->values) < 0)
                        continue;
                emit(o, o->values, cb, userdata);
        }
        if (have)
                (void) bpf_map_delete_elem(fd, &key);
        return 0;
}

static int drain_map(offcpu *o, int fd, offcpu_entry_cb cb, void *userdata) {
        struct offcpu_key in, out;
        bool first = true;
        int r;

        if (o->no_batch)
                return drain_one_by_one(o, fd, cb, userdata);
        for (;;) {
                uint32_t count = DRAIN_BATCH;

                r = bpf_map_lookup_and_delete_batch(fd, first ? NULL : &in, &out, o->keys, o->values, &count, NULL);
                if (r < 0 && errno != ENOENT) {
                        if (first && (errno == EINVAL || errno == 524 /* ENOTSUPP */ || errno == EOPNOTSUPP)) {
                                o->no_batch = true;
                                return drain_one_by_one(o, fd, cb, userdata);
                        }
                        return -errno;
                }
                for (uint32_t i = 0; i < count; i++) {
                        emit(o, &o->values[i], cb, userdata);
                }
                if (r < 0)      /* ENOENT: that was the last batch */
                        return 0;
                in = out;
                first = false;
        }
}

/* The generation from now on. */
static int set_active(offcpu *o, uint32_t v) {
        uint32_t zero = 0;

        if (bpf_map_update_elem(o->active_fd, &zero, &v, BPF_ANY) < 0)
                return -errno;
        o->active = v;
        o->flipped_ns = clock_ns(CLOCK_MONOTONIC);
        return 0;
}

/* The held waits of the threads' entries, into the sums (the program is
 * detached): with task storage, by the iterator over all tasks; from
 * `start`, read here. */
static int take_held(offcpu *o, offcpu_entry_cb cb, void *userdata) {
        if (o->flush_prog) {
                struct bpf_link *link = bpf_program__attach_iter(o->flush_prog, NULL);
                char buf[64];
                int fd;
                ssize_t n;

                if (!link)
                        return -errno;
                fd = bpf_iter_create(bpf_link__fd(link));
                if (fd < 0) {
                        int r = -errno;

                        bpf_link__destroy(link);
                        return r;
                }
                int r = 0;

                /* It writes nothing: reading runs it over every task. */
                do
                        n = read(fd, buf, sizeof buf);
                while (n > 0 || (n < 0 && errno == EINTR));
                if (n < 0)
                        r = -errno;     /* before close() can change it */
                close(fd);
                bpf_link__destroy(link);
                return r;
        }
        if (o->start_fd >= 0) {
                uint32_t key, next;
                bool have = false;

                while (bpf_map_get_next_key(o->start_fd, have ? &key : NULL, &next) == 0) {
                        key = next;
                        have = true;
                        if (bpf_map_lookup_elem(o->start_fd, &key, o->values) == 0 && o->values->count > 0)
                                emit(o, o->values, cb, userdata);
                }
        }
        return 0;
}

/* A flip this recent may have a program run that read the generation
 * before it still adding to the map it named. */
#define DRAIN_AFTER_NS UINT64_C(10000000)

int offcpu_drain(offcpu *o, bool all, offcpu_entry_cb cb, void *userdata) {
        int r;

        if (!o || !cb)
                return -EINVAL;
        o->cb_error = 0;
        if (o->stopped)
                return 0;       /* all taken */
        if (all) {
                o->stopped = true;
                /* The last drain: the program stops first (detaching
                 * waits for its runs to end), then the threads' held
                 * waits and both maps are taken. */
                bpf_link__destroy(o->link);
                o->link = NULL;
                r = take_held(o, cb, userdata);
                if (r < 0)
                        log_warning_errno(r, "Failed to take the threads' last off-CPU waits: %m");
                r = drain_map(o, o->counts_fd[0], cb, userdata);
                if (r >= 0)
                        r = drain_map(o, o->counts_fd[1], cb, userdata);
                return r < 0 ? r : o->cb_error;
        }
        /* The map the program stopped adding to a drain ago: no program
         * that read the old generation runs still (they run for
         * microseconds; drains that come sooner than DRAIN_AFTER_NS
         * leave it). Then the other one's turn. */
        if (clock_ns(CLOCK_MONOTONIC) - o->flipped_ns < DRAIN_AFTER_NS)
                return 0;
        r = drain_map(o, o->counts_fd[(o->active & 1) ^ 1], cb, userdata);
        if (r < 0)
                return r;
        r = set_active(o, o->active + 1);
        return r < 0 ? r : o->cb_error;
}

uint64_t offcpu_drain_wait_ns(const offcpu *o) {
        uint64_t since;

        if (!o || o->stopped)
                return 0;
        since = clock_ns(CLOCK_MONOTONIC) - o->flipped_ns;
        return since < DRAIN_AFTER_NS ? DRAIN_AFTER_NS - since : 0;
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
                .stacks_at_end = sum[OFFCPU_STAT_STACKS_AT_END],
                .no_time = sum[OFFCPU_STAT_NO_TIME],
                .drained = o->drained,
                .dropped_waits = o->dropped_waits,
                .dropped_ns = o->dropped_ns,
        };
        return 0;
}
