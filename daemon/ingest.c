/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The ingest path (ingest.h): copying records out of the ring buffers,
 * the time-ordered merge with its horizon, decoding, the task table and
 * the symbolizer, and the one sample write. */
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "hashmap.h"
#include "idcache.h"
#include "perf/cgroups.h"
#include "perf/jitmaps.h"
#include "fileio.h"
#include "ingest.h"
#include "log.h"
#include "macro.h"
#include "symbolizer.h"
#include "timeparse.h"

#define MAX_CPUS 4096
/* Records stamped further than this past a drain's horizon are processed
 * at once rather than kept (no clock runs that far ahead). */
#define INGEST_CARRY_MAX_NS (60 * NSEC_PER_SEC)
/* While the store holds batches a commit refused (a full disk), each try
 * replays them all: tries are spaced 1, 2, 4 .. this far apart, the batch
 * left open in between. */
#define INGEST_HELD_RETRY_MAX_NS (16 * NSEC_PER_SEC)
/* Cgroups whose string ids are cached, and processes whose cgroup was
 * read from /proc (kernels without PERF_SAMPLE_CGROUP). */
#define INGEST_CGROUP_IDS_MAX 16384
#define INGEST_PID_CGROUPS_MAX (64u * 1024u)
/* Frames an off-CPU stack may have above __schedule (the tracepoint's
 * and the BPF program's own). */
#define OFFCPU_SCHEDULER_FRAMES_MAX 8
/* While a drain works through its records, a ring buffer past a quarter
 * full is emptied for the next drain (rescue_rings()): looked at every
 * this many records, up to this many bytes a drain. */
#define RESCUE_CHECK_RECORDS 32
#define RESCUE_MAX_BYTES (4u << 20)

/* One raw record copied out of a ring buffer, waiting to be merged. */
typedef struct pending {
        uint64_t time;
        uint32_t seq;           /* arrival order, keeps the sort stable */
        uint32_t len;
        size_t off;             /* into the arena */
} pending;

struct ingest {
        store *store;
        char *root;
        layout *layout;
        kernel_info kernel;
        int64_t boot_id;
        int64_t snapshot_id, snapshot_prev_id;  /* see ingest_set_snapshot() */
        uint64_t snapshot_since_ns;
        tasks *tasks;
        symbolizer *symbolizer;
        jitmaps *jit;

        /* Attribution (ingest_set_sample_type()): the events' sample_type;
         * with PERF_SAMPLE_CGROUP the cgroup map (NULL without a cgroup2
         * hierarchy) and its ids' string ids; without, the string id of
         * each process's path from /proc/PID/cgroup, at its first sample. */
        uint64_t sample_type;
        cgroups *cgroups;
        char *cgroup_mount;
        idcache *cgroup_ids;            /* (kernel id, 0) -> string id */
        hashmap *pid_cgroups;           /* pid -> string id, or -1: none */
        uint64_t cgroup_gen, cgroup_epoch;      /* store_generation(), store_epoch() of those ids */

        ingest_record_handler record_cb;
        void *record_userdata;
        bool draining;

        /* Off-CPU sums (ingest_set_offcpu_source()), all of a drain
         * stamped at offcpu_time (CLOCK_MONOTONIC): its horizon, no
         * earlier than the last record processed, last_time. */
        ingest_offcpu_source offcpu_cb;
        void *offcpu_userdata;
        uint64_t last_time;
        uint64_t offcpu_time;
        int64_t offcpu_mono_to_wall;
        uint64_t schedule_lo[2], schedule_hi[2];       /* __schedule, schedule */
        bool schedule_found;                            /* looked them up */

        /* the merge buffer of one drain pass; records kept for the next
         * one (at or after the horizon) are moved to the other arena */
        uint8_t *arena, *carry;
        size_t arena_len, arena_alloc, carry_alloc;
        pending *pend;
        size_t n_pend, pend_alloc;
        /* the merge's other array, and where each source's run begins */
        pending *merged;
        size_t merged_alloc;
        size_t *runs;
        size_t runs_alloc;
        /* bytes of records rescued during a drain (rescue_rings()), and
         * whether the arrays grew for them */
        size_t rescued_bytes;
        bool rescuing, grown_by_rescue;

        uint64_t lost_per_cpu[MAX_CPUS];
        size_t n_lost_cpus;

        bool in_transaction;    /* a batch is open across drains until ingest_commit() */
        uint64_t retry_at_ns, retry_delay_ns;   /* CLOCK_MONOTONIC; see INGEST_HELD_RETRY_MAX_NS */
        uint64_t store_epoch;   /* store_epoch() the symbolizer's ids are of */

        ingest_stats stats;
};

int ingest_new(store *st, const char *root, ingest **ret) {
        ingest *in;
        int r;

        in = calloc(1, sizeof *in);
        if (!in)
                return -ENOMEM;
        in->store = st;
        in->root = strdup(root ?: "/");
        if (!in->root) {
                ingest_free(in);
                return -ENOMEM;
        }
        r = layout_new(&in->layout);
        if (r >= 0)
                r = tasks_new(in->root, &in->tasks);
        if (r >= 0)
                r = symbolizer_new(st, in->layout, in->tasks, &in->symbolizer);
        if (r >= 0)
                r = jitmaps_new(in->root, &in->jit);
        if (r >= 0)
                symbolizer_set_jitmaps(in->symbolizer, in->jit);
        if (r >= 0)
                r = idcache_new(INGEST_CGROUP_IDS_MAX, &in->cgroup_ids);
        if (r >= 0)
                r = hashmap_new(&in->pid_cgroups);
        if (r < 0) {
                ingest_free(in);
                return r;
        }
        in->sample_type = PERFSNAP_SAMPLE_TYPE;
        *ret = in;
        return 0;
}

void ingest_set_sample_type(ingest *in, uint64_t sample_type) {
        _cleanup_free_ char *mountinfo = NULL;
        int r;

        in->sample_type = sample_type;
        if (!(sample_type & PERF_SAMPLE_CGROUP) || in->cgroups)
                return;
        mountinfo = path_join(in->root, "proc/self/mountinfo");
        r = mountinfo ? cgroups_find_mount(mountinfo, &in->cgroup_mount) : -ENOMEM;
        if (r == -ENODEV) {
                log_warning("%s lists no cgroup v2 hierarchy (cgroup v1 only): samples are not attributed to cgroups "
                            "or units.", mountinfo);
                return;
        }
        if (r < 0) {
                log_warning("Cannot read %s: %s; samples are not attributed to cgroups or units.",
                            mountinfo ?: "mountinfo", strerror(-r));
                return;
        }
        {
                _cleanup_free_ char *dir = path_join(in->root, in->cgroup_mount + 1);

                r = dir ? cgroups_new(dir, &in->cgroups) : -ENOMEM;
                if (r < 0) {
                        log_warning("Cannot read the cgroup v2 hierarchy at %s: %s; samples are not attributed to "
                                    "cgroups or units.", dir ?: in->cgroup_mount, strerror(-r));
                        return;
                }
        }
}

const char *ingest_cgroup_source(const ingest *in) {
        if (in->sample_type & PERF_SAMPLE_CGROUP)
                return in->cgroups ? "perf" : "none";
        return "proc";
}

size_t ingest_cgroups_known(const ingest *in) {
        return in->cgroups ? cgroups_size(in->cgroups) : hashmap_size(in->pid_cgroups);
}

void ingest_stop_task_lookups(ingest *in) {
        tasks_stop_lookups(in->tasks);
        jitmaps_stop_lookups(in->jit);
}

ingest *ingest_free(ingest *in) {
        if (!in)
                return NULL;
        symbolizer_free(in->symbolizer);
        jitmaps_free(in->jit);
        cgroups_free(in->cgroups);
        free(in->cgroup_mount);
        idcache_free(in->cgroup_ids);
        hashmap_free(in->pid_cgroups);
        layout_free(in->layout);
        tasks_free(in->tasks);
        free(in->arena);
        free(in->carry);
        free(in->pend);
        free(in->merged);
        free(in->runs);
        free(in->root);
        free(in);
        return NULL;
}

static void read_line_file(const char *root, const char *rel, char *buf, size_t size) {
        _cleanup_free_ char *s = NULL;

        buf[0] = 0;
        if (read_full_file_at(root, rel, 4096, &s, NULL) < 0)
                return;
        s[strcspn(s, "\n")] = 0;
        snprintf(buf, size, "%s", s);
}

int ingest_load_kernel(ingest *in) {
        kallsyms *k = NULL;
        int r;

        r = kallsyms_load(in->root, &k);
        if (r < 0)
                return log_error_errno(r, "Failed to load %s%sproc/kallsyms: %m%s", in->root, in->root[strlen(in->root) - 1] == '/' ? "" : "/",
                                       r == -EPERM ? " (the addresses are hidden: perfsnapd needs CAP_SYSLOG, and kernel.kptr_restrict must be below 2)" : "");
        layout_set_kernel(in->layout, k);

        if (kallsyms_text_addr(k, &in->kernel.text_addr) < 0)
                log_warning("Neither _text nor _stext is in kallsyms: the KASLR offset is not recorded.");

        r = notes_kernel_build_id(in->root, in->kernel.build_id);
        if (r < 0) {
                log_warning_errno(r, "Failed to read the kernel build-id from %s/sys/kernel/notes: %m", in->root);
                in->kernel.build_id[0] = 0;
        }
        symbolizer_set_kernel_build_id(in->symbolizer, in->kernel.build_id);
        read_line_file(in->root, "proc/sys/kernel/osrelease", in->kernel.release, sizeof in->kernel.release);
        read_line_file(in->root, "proc/sys/kernel/random/boot_id", in->kernel.boot_uuid, sizeof in->kernel.boot_uuid);

        r = store_add_boot(in->store, in->kernel.boot_uuid, in->kernel.build_id, in->kernel.text_addr,
                           in->kernel.release, clock_ns(CLOCK_REALTIME), &in->boot_id);
        if (r < 0)
                return log_error_errno(r, "Failed to record the kernel in the database: %m");

        /* Kernel addresses defeat KASLR: the log, which others may read
         * (journal groups, a terminal), gets them at debug level only. */
        log_info("Kernel %s, build-id %s, %zu symbols (%zu KiB)",
                 in->kernel.release[0] ? in->kernel.release : "(unknown release)",
                 in->kernel.build_id[0] ? in->kernel.build_id : "(unknown)", kallsyms_count(k),
                 kallsyms_memory_bytes(k) / 1024);
        log_debug("Kernel _text at 0x%llx.", (unsigned long long) in->kernel.text_addr);
        return 0;
}

const kernel_info *ingest_kernel(const ingest *in) {
        return &in->kernel;
}

void ingest_set_snapshot(ingest *in, int64_t prev_id, int64_t id, uint64_t since_ns) {
        in->snapshot_prev_id = prev_id;
        in->snapshot_id = id;
        in->snapshot_since_ns = since_ns;
}

int64_t ingest_boot_id(const ingest *in) {
        return in->boot_id;
}

size_t ingest_n_symbols(const ingest *in) {
        return kallsyms_count(layout_kernel_syms(in->layout));
}

layout *ingest_layout(ingest *in) {
        return in->layout;
}

void ingest_set_miss_handler(ingest *in, ingest_miss_handler cb, void *userdata) {
        symbolizer_set_miss_handler(in->symbolizer, cb, userdata);
}

void ingest_set_user_file_handler(ingest *in, symbolizer_user_file_handler cb, void *userdata) {
        symbolizer_set_user_file_handler(in->symbolizer, cb, userdata);
}

void ingest_set_record_handler(ingest *in, ingest_record_handler cb, void *userdata) {
        in->record_cb = cb;
        in->record_userdata = userdata;
}

bool ingest_draining(const ingest *in) {
        return in->draining;
}

const ingest_stats *ingest_get_stats(const ingest *in) {
        return &in->stats;
}

const symbolizer_stats *ingest_symbolizer_stats(const ingest *in) {
        return symbolizer_get_stats(in->symbolizer);
}

size_t ingest_buffer_bytes(const ingest *in) {
        return in->arena_alloc + in->carry_alloc + in->pend_alloc * sizeof *in->pend +
               in->merged_alloc * sizeof *in->merged + in->runs_alloc * sizeof *in->runs +
               symbolizer_buffer_bytes(in->symbolizer);
}

size_t ingest_cache_bytes(const ingest *in) {
        return symbolizer_cache_bytes(in->symbolizer) + store_cache_bytes(in->store) + jitmaps_memory_bytes(in->jit);
}

size_t ingest_tasks_bytes(const ingest *in) {
        return tasks_memory_bytes(in->tasks);
}

const uint64_t *ingest_lost_per_cpu(const ingest *in, size_t *ret_n) {
        *ret_n = in->n_lost_cpus;
        return in->lost_per_cpu;
}

/* The string id of the sample's cgroup path; 0 if not known. */
static int sample_cgroup(ingest *in, const perf_sample *ps, int64_t *ret) {
        int64_t id;
        int r;

        *ret = 0;
        if (store_generation(in->store) != in->cgroup_gen || store_epoch(in->store) != in->cgroup_epoch) {
                idcache_clear(in->cgroup_ids);
                hashmap_clear(in->pid_cgroups);
                in->cgroup_gen = store_generation(in->store);
                in->cgroup_epoch = store_epoch(in->store);
        }
        if (in->sample_type & PERF_SAMPLE_CGROUP) {
                const char *path;

                if (!in->cgroups || ps->cgroup == 0)
                        return 0;
                if (idcache_get(in->cgroup_ids, ps->cgroup, 0, ret))
                        return 0;
                path = cgroups_path(in->cgroups, ps->cgroup, ps->time);
                if (!path) {
                        in->stats.cgroups_unknown++;
                        return 0;
                }
                r = store_intern_string(in->store, path, ret);
                if (r < 0)
                        return r;
                (void) idcache_put(in->cgroup_ids, ps->cgroup, 0, *ret);       /* a cache */
                return 0;
        }
        /* Kernels before 5.7: the process's, read once. The idle task
         * (pid 0, no /proc entry) is the root cgroup's, as perf says. */
        if (ps->pid == 0)
                return store_intern_string(in->store, "/", ret);
        if (hashmap_get_u64(in->pid_cgroups, ps->pid, &id) >= 0) {
                *ret = MAX(id, (int64_t) 0);
                return 0;
        }
        {
                _cleanup_free_ char *proc = path_join(in->root, "proc"), *path = NULL;

                if (!proc)
                        return -ENOMEM;
                id = -1;
                if (cgroups_of_pid(proc, ps->pid, &path) >= 0) {
                        r = store_intern_string(in->store, path, &id);
                        if (r < 0)
                                return r;
                }
        }
        if (hashmap_size(in->pid_cgroups) >= INGEST_PID_CGROUPS_MAX)
                hashmap_clear(in->pid_cgroups);
        r = hashmap_put_u64(in->pid_cgroups, ps->pid, id);
        if (r < 0)
                return r;
        *ret = MAX(id, (int64_t) 0);
        return 0;
}

static int store_sample(ingest *in, const perf_sample *ps, int64_t mono_to_wall_ns, sample_kind kind, uint64_t count) {
        int64_t stack = 0, leaf_frame = 0, comm_id = 0, cgroup_id = 0;
        const char *comm;
        int r;

        r = symbolizer_stack(in->symbolizer, ps, &stack, &leaf_frame);
        if (r < 0)
                return r;
        /* pid 0 is the idle task of each CPU; it has no /proc entry. perf calls it swapper. */
        comm = ps->pid == 0 ? "swapper" : tasks_get_comm(in->tasks, ps->pid, ps->tid);
        if (comm) {
                r = symbolizer_comm_id(in->symbolizer, comm, &comm_id);
                if (r < 0)
                        return r;
        }
        r = sample_cgroup(in, ps, &cgroup_id);
        if (r < 0)
                return r;

        r = store_insert_sample(in->store, &(stored_sample) {
                        .time_ns = (uint64_t) ((int64_t) ps->time + mono_to_wall_ns),
                        .cpu = ps->cpu,
                        .pid = ps->pid,
                        .tid = ps->tid,
                        .comm_id = comm_id,
                        .cgroup_id = cgroup_id,
                        .stack_id = stack,
                        .frame_id = leaf_frame,
                        .period = ps->period,
                        .kind = kind,
                        .count = count,
                        .boot_id = in->boot_id,
                        .snapshot_id = (uint64_t) ((int64_t) ps->time + mono_to_wall_ns) >= in->snapshot_since_ns ?
                                       in->snapshot_id : in->snapshot_prev_id,
                });
        if (r < 0)
                return r;
        if (kind == SAMPLE_KIND_CPU)
                in->stats.samples++;
        else {
                in->stats.offcpu_waits += count;
                in->stats.offcpu_ns += ps->period;
        }
        return 0;
}

static void check_store_epoch(ingest *in);

/* The drain's batch: a transaction open until ingest_commit(). */
static int begin_batch(ingest *in) {
        int r;

        if (in->in_transaction)
                return 0;
        r = store_begin(in->store);
        check_store_epoch(in);
        if (r < 0)
                return log_error_errno(r, "Failed to begin a database transaction: %m");
        in->in_transaction = true;
        return 0;
}

static int ingest_sample(ingest *in, const perf_sample *ps, int64_t mono_to_wall_ns) {
        in->last_time = MAX(in->last_time, ps->time);
        return store_sample(in, ps, mono_to_wall_ns, SAMPLE_KIND_CPU, 1);
}

void ingest_set_offcpu_source(ingest *in, ingest_offcpu_source cb, void *userdata) {
        in->offcpu_cb = cb;
        in->offcpu_userdata = userdata;
}

/* Where __schedule and schedule are: the frames every wait's stack
 * begins with, which say nothing about why it waits. */
static void find_schedule(ingest *in) {
        static const char *const names[2] = { "__schedule", "schedule" };
        const kallsyms *k = layout_kernel_syms(in->layout);

        for (size_t i = 0; i < 2; i++) {
                uint64_t a;
                ksym sym;

                in->schedule_lo[i] = in->schedule_hi[i] = 0;
                if (!k || kallsyms_find(k, names[i], &a) < 0 || kallsyms_lookup(k, a, &sym) < 0)
                        continue;
                in->schedule_lo[i] = sym.addr;
                in->schedule_hi[i] = MAX(sym.end, sym.addr + 1);
        }
}

static bool is_schedule(const ingest *in, uint64_t ip) {
        for (size_t i = 0; i < 2; i++)
                if (ip >= in->schedule_lo[i] && ip < in->schedule_hi[i])
                        return true;
        return false;
}

int ingest_offcpu(ingest *in, uint32_t pid, uint32_t tid, uint32_t cpu, uint64_t cgroup, uint64_t *ips, size_t nr,
                  uint64_t waits, uint64_t wait_ns) {
        size_t skip = 0;

        if (waits == 0 || wait_ns == 0 || nr == 0)
                return 0;
        /* The stack from the function that called schedule(): the frames
         * above __schedule (the tracepoint's, the BPF program's) and the
         * scheduler's own go. */
        if (ips[0] == PERF_CONTEXT_KERNEL) {
                size_t i = 1;

                while (i < nr && i <= OFFCPU_SCHEDULER_FRAMES_MAX && ips[i] < PERF_CONTEXT_MAX && !is_schedule(in, ips[i]))
                        i++;
                if (i < nr && i <= OFFCPU_SCHEDULER_FRAMES_MAX && ips[i] < PERF_CONTEXT_MAX) {
                        while (i + 1 < nr && ips[i + 1] < PERF_CONTEXT_MAX && is_schedule(in, ips[i + 1]))
                                i++;
                        /* Keep one kernel frame at least. */
                        if (i + 1 < nr && ips[i + 1] < PERF_CONTEXT_MAX)
                                skip = i;
                }
        }
        /* The context marker moves down over the frames left out. */
        if (skip > 0) {
                ips[skip] = PERF_CONTEXT_KERNEL;
                ips += skip;
                nr -= skip;
        }
        return store_sample(in, &(perf_sample) {
                        .ip = nr > 1 ? ips[1] : 0,
                        .pid = pid,
                        .tid = tid,
                        .time = in->offcpu_time,
                        .cpu = cpu,
                        .period = wait_ns,
                        .nr = nr,
                        .ips = ips,
                        .cgroup = cgroup,
                }, in->offcpu_mono_to_wall, SAMPLE_KIND_OFFCPU, waits);
}

/* In the drain's batch, after its records: the off-CPU sums so far. */
static int pull_offcpu(ingest *in, uint64_t horizon_ns, int64_t mono_to_wall_ns) {
        int r;

        if (!in->offcpu_cb)
                return 0;
        r = begin_batch(in);
        if (r < 0)
                return r;
        if (!in->schedule_found) {
                find_schedule(in);
                in->schedule_found = true;
        }
        /* After the drain's records, before its horizon: one bucket, the
         * open one. */
        in->offcpu_time = MAX(in->last_time, horizon_ns == INGEST_HORIZON_ALL ? clock_ns(CLOCK_MONOTONIC) :
                                                                             horizon_ns - 1);
        in->offcpu_mono_to_wall = mono_to_wall_ns;
        r = in->offcpu_cb(in, horizon_ns == INGEST_HORIZON_ALL, in->offcpu_userdata);
        if (r < 0)
                return log_error_errno(r, "Failed to store off-CPU time: %m");
        return 0;
}

int ingest_record(ingest *in, const perf_record *rec, int64_t mono_to_wall_ns) {
        char bid[BUILD_ID_HEX_MAX];
        int r;

        switch (rec->type) {
        case PERF_RECORD_SAMPLE:
                return ingest_sample(in, &rec->sample, mono_to_wall_ns);

        case PERF_RECORD_COMM:
                if (rec->comm.exec)
                        jitmaps_forget(in->jit, rec->comm.pid);
                return tasks_comm(in->tasks, rec->comm.pid, rec->comm.tid, rec->comm.comm, rec->comm.exec);

        case PERF_RECORD_FORK:
                return tasks_fork(in->tasks, rec->task.ppid, rec->task.ptid, rec->task.pid, rec->task.tid);

        case PERF_RECORD_CGROUP:
                if (in->cgroups)
                        (void) cgroups_add(in->cgroups, rec->cgroup.id, rec->cgroup.path); /* a relative path: ignored */
                return 0;

        case PERF_RECORD_EXIT:
                /* Its pid may be another process's next. */
                if (rec->task.pid == rec->task.tid)
                        (void) hashmap_remove_u64(in->pid_cgroups, rec->task.pid, NULL);
                return tasks_exit(in->tasks, rec->task.pid, rec->task.tid,
                                  (uint64_t) ((int64_t) rec->task.time + mono_to_wall_ns));

        case PERF_RECORD_MMAP2:
                if (rec->mmap2.build_id_size > 0)
                        build_id_to_hex(rec->mmap2.build_id, MIN(rec->mmap2.build_id_size, BUILD_ID_MAX_BYTES), bid);
                return tasks_mmap(in->tasks, rec->mmap2.pid, rec->mmap2.addr, rec->mmap2.len, rec->mmap2.pgoff,
                                  rec->mmap2.filename, rec->mmap2.build_id_size > 0 ? bid : NULL);

        case PERF_RECORD_LOST:
                in->stats.lost += rec->lost.lost;
                if (rec->sid.cpu < MAX_CPUS) {
                        in->lost_per_cpu[rec->sid.cpu] += rec->lost.lost;
                        in->n_lost_cpus = MAX(in->n_lost_cpus, (size_t) rec->sid.cpu + 1);
                }
                r = store_add_lost(in->store, (uint64_t) ((int64_t) rec->sid.time + mono_to_wall_ns),
                                   rec->sid.cpu, rec->lost.lost);
                if (r < 0)
                        return r;
                log_warning_ratelimited("Lost %llu records on CPU %u: the ring buffer overflowed (raise ring_buffer_pages or lower frequency_hz)",
                            (unsigned long long) rec->lost.lost, rec->sid.cpu);
                if (in->record_cb)
                        in->record_cb(rec, mono_to_wall_ns, in->record_userdata);
                return 0;

        case PERF_RECORD_KSYMBOL:
        case PERF_RECORD_BPF_EVENT:
                if (in->record_cb)
                        in->record_cb(rec, mono_to_wall_ns, in->record_userdata);
                return 0;

        default:
                return 0;
        }
}

/* The store rolled a batch back: ids interned in it are gone from the
 * database, so the caches that hold them must go too. */
static void forget_batch_ids(ingest *in) {
        symbolizer_forget_ids(in->symbolizer);
        in->store_epoch = store_epoch(in->store);
}

/* Rolls the open batch back, and forgets the ids it interned. */
static void drop_batch(ingest *in) {
        (void) store_rollback(in->store);
        in->in_transaction = false;
        forget_batch_ids(in);
}

/* The store may drop ids on its own (held batches that could not be
 * replayed, in store_begin()). */
static void check_store_epoch(ingest *in) {
        if (store_epoch(in->store) != in->store_epoch)
                forget_batch_ids(in);
}

int ingest_commit(ingest *in) {
        uint64_t was_held;
        int r;

        if (!in->in_transaction)
                return 0;
        if (store_held(in->store, &was_held, NULL, NULL, NULL) && clock_ns(CLOCK_MONOTONIC) < in->retry_at_ns)
                return 0;
        in->in_transaction = false;
        r = store_commit(in->store);
        if (r < 0) {
                uint64_t samples, bytes;

                if (store_held(in->store, &samples, &bytes, NULL, NULL)) {
                        in->retry_delay_ns = MIN(MAX(2 * in->retry_delay_ns, NSEC_PER_SEC), INGEST_HELD_RETRY_MAX_NS);
                        in->retry_at_ns = clock_ns(CLOCK_MONOTONIC) + in->retry_delay_ns;
                        check_store_epoch(in);
                        /* Its ids stay valid: the next batch writes it. */
                        log_warning_ratelimited("Failed to commit samples to the database: %s; holding %llu samples "
                                                "(%llu KiB of writes) in memory until it succeeds.",
                                                strerror(-r), (unsigned long long) samples,
                                                (unsigned long long) (bytes / 1024));
                        return r;
                }
                in->retry_delay_ns = in->retry_at_ns = 0;
                forget_batch_ids(in);
                return log_error_errno(r, "Failed to commit samples to the database: %m");
        }
        in->retry_delay_ns = in->retry_at_ns = 0;
        if (was_held > 0)
                log_info("The database takes writes again: %llu samples held in memory are written.",
                         (unsigned long long) was_held);
        in->stats.commits++;
        return 0;
}

int ingest_write_open_bucket(ingest *in) {
        int r = begin_batch(in);

        if (r < 0)
                return r;
        r = store_write_open_bucket(in->store);
        if (r < 0) {
                /* The batch failed: dropped, as a drain that fails drops
                 * its batch (counted in dropped_samples). */
                drop_batch(in);
                return log_error_errno(r, "Failed to write the open bucket: %m");
        }
        return 0;
}

int ingest_commit_now(ingest *in) {
        in->retry_at_ns = 0;
        return ingest_commit(in);
}

/* Copies one record out of the ring buffer into the merge arena. */
static int collect_record(const struct perf_event_header *hdr, void *userdata) {
        ingest *in = userdata;
        uint64_t time = 0;

        /* A rescue past its bytes leaves the record in the ring. */
        if (in->rescuing) {
                if (in->rescued_bytes + hdr->size > RESCUE_MAX_BYTES)
                        return -ENOBUFS;
                in->rescued_bytes += hdr->size;
        }

        /* Only the time here; the record is decoded once, after the merge.
         * One without a time sorts first; if malformed, it is skipped then. */
        (void) perf_record_time(hdr, hdr->size, in->sample_type, &time);

        if (in->arena_alloc - in->arena_len < hdr->size) {
                int r = GREEDY_REALLOC(in->arena, in->arena_alloc, in->arena_len + hdr->size + 65536);
                if (r < 0)
                        return r;
        }
        if (GREEDY_REALLOC(in->pend, in->pend_alloc, in->n_pend + 1) < 0)
                return -ENOMEM;
        memcpy(in->arena + in->arena_len, hdr, hdr->size);
        in->pend[in->n_pend] = (pending) {
                .time = time,
                .seq = (uint32_t) in->n_pend,
                .len = hdr->size,
                .off = in->arena_len,
        };
        in->n_pend++;
        in->arena_len += hdr->size;
        return 0;
}

static int pending_cmp(const void *a, const void *b) {
        const pending *x = a, *y = b;

        if (x->time != y->time)
                return x->time < y->time ? -1 : 1;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sorts pend[start, end), in order up to `first`, by (time, seq) if it is
 * nearly in order: an insertion sort, each record moved back past the
 * few that came before it. false once the moves pass a few a record (a
 * run not nearly in order): the run is then some order of its records,
 * which the caller's qsort() by (time, seq), a total order, sorts. */
static bool sort_nearly_sorted(pending *pend, size_t start, size_t first, size_t end) {
        size_t budget = 4 * (end - start), moved = 0;

        for (size_t i = first; i < end; i++) {
                pending p = pend[i];
                size_t j = i;

                while (j > start && pending_cmp(&p, &pend[j - 1]) < 0)
                        j--;
                if (j == i)
                        continue;
                moved += i - j;
                if (moved > budget)
                        return false;
                memmove(pend + j + 1, pend + j, (i - j) * sizeof *pend);
                pend[j] = p;
        }
        return true;
}

/* Merges in->pend, made of the runs that begin at in->runs[0..n_runs)
 * (the records kept by the last drain, then each CPU's), into time
 * order. A CPU's ring buffer holds its records nearly in time order (a
 * side-band record takes its time before its space, so a sample can
 * slip in before it): a run out of order is sorted by itself, then
 * adjacent runs are merged pairwise, O(n log runs), against the sort's
 * O(n log n) calls through a comparison pointer. Ties keep arrival
 * order (the left run first), which is what the sort by (time, seq)
 * gives. Without memory for the merge, the whole is sorted. */
static void merge_runs(ingest *in, size_t n_runs) {
        size_t n = in->n_pend;

        for (size_t k = 0; k < n_runs; k++) {
                size_t start = in->runs[k], end = k + 1 < n_runs ? in->runs[k + 1] : n;

                for (size_t i = start + 1; i < end; i++)
                        if (in->pend[i].time < in->pend[i - 1].time) {
                                if (!sort_nearly_sorted(in->pend, start, i, end))
                                        qsort(in->pend + start, end - start, sizeof *in->pend, pending_cmp);
                                break;
                        }
        }
        if (n_runs <= 1)
                return;
        if (GREEDY_REALLOC(in->merged, in->merged_alloc, n) < 0) {
                qsort(in->pend, n, sizeof *in->pend, pending_cmp);
                return;
        }

        while (n_runs > 1) {
                size_t out = 0;

                for (size_t k = 0; k < n_runs; k += 2) {
                        size_t a = in->runs[k], a_end = k + 1 < n_runs ? in->runs[k + 1] : n;
                        size_t b = a_end, b_end = k + 2 < n_runs ? in->runs[k + 2] : n;
                        size_t o = a;

                        while (a < a_end && b < b_end)
                                in->merged[o++] = in->pend[b].time < in->pend[a].time ? in->pend[b++] : in->pend[a++];
                        memcpy(in->merged + o, in->pend + a, (a_end - a) * sizeof *in->pend);
                        o += a_end - a;
                        memcpy(in->merged + o, in->pend + b, (b_end - b) * sizeof *in->pend);
                        in->runs[out++] = in->runs[k];
                }
                SWAP(in->pend, in->merged);
                SWAP(in->pend_alloc, in->merged_alloc);
                n_runs = out;
        }
}

/* Moves the records from index first on to the front of the other
 * arena, in their merged order, for the next drain. */
static int keep_for_next_drain(ingest *in, size_t first) {
        size_t len = 0;

        if (first == in->n_pend) {
                in->n_pend = 0;
                in->arena_len = 0;
                return 0;
        }
        for (size_t i = first; i < in->n_pend; i++)
                len += in->pend[i].len;
        if (in->carry_alloc < len) {
                size_t n = MAX(len, in->arena_alloc);
                uint8_t *p = realloc(in->carry, n);
                if (!p)
                        return -ENOMEM;
                in->carry = p;
                in->carry_alloc = n;
        }
        len = 0;
        for (size_t i = first; i < in->n_pend; i++) {
                pending p = in->pend[i];

                memcpy(in->carry + len, in->arena + p.off, p.len);
                in->pend[i - first] = (pending) { .time = p.time, .seq = (uint32_t) (i - first), .len = p.len, .off = len };
                len += p.len;
        }
        SWAP(in->arena, in->carry);
        SWAP(in->arena_alloc, in->carry_alloc);
        in->n_pend -= first;
        in->arena_len = len;
        in->stats.deferred += in->n_pend;
        return 0;
}

/* A drain's records are copied out of the ring buffers when it begins;
 * the kernel writes on meanwhile. Where every CPU is busy, a drain that
 * has many records to work through (a storm of BPF programs loaded and
 * unloaded: each is journaled) waits its turn between them, and a ring
 * buffer filled at that pace overflows before the drain ends: the kernel
 * drops what does not fit. So every RESCUE_CHECK_RECORDS records, a ring
 * buffer past a quarter full is emptied into the pending records, up to
 * RESCUE_MAX_BYTES a drain (beyond that, the kernel drops and counts as
 * before). A quarter, not a half: between two looks the drain may wait
 * for its turn on a busy CPU while the kernel writes on, and what is left
 * of the buffer must hold that. The next drain takes
 * them with the records it keeps: its first run, sorted by time when
 * merge_runs() finds it out of order. */
static void rescue_rings(ingest *in, ringbuf *const *bufs, const uint32_t *cpus, size_t n) {
        for (size_t i = 0; i < n; i++) {
                size_t start = in->n_pend;
                int r;

                if (ringbuf_pending(bufs[i]) < bufs[i]->data_size / 4)
                        continue;
                in->rescuing = true;
                r = ringbuf_drain(bufs[i], collect_record, in);
                in->rescuing = false;
                if (r == -EBADMSG)
                        log_warning_ratelimited("Ring buffer of CPU %u held a malformed record; skipped to its head.",
                                                cpus[i]);
                if (in->n_pend == start)
                        continue;
                in->stats.rescued += in->n_pend - start;
                in->grown_by_rescue = true;
        }
}

void ingest_rescue(ingest *in, ringbuf *const *bufs, const uint32_t *cpus, size_t n) {
        /* A record being processed points into the arena, which a
         * rescue may move. */
        if (in && !in->draining)
                rescue_rings(in, bufs, cpus, n);
}

/* Every record before the horizon is in: the buckets that end by it are
 * complete, and are written. */
static int flush_buckets(ingest *in, uint64_t horizon_ns, int64_t mono_to_wall_ns) {
        uint64_t wall = horizon_ns == INGEST_HORIZON_ALL ? UINT64_MAX : (uint64_t) ((int64_t) horizon_ns + mono_to_wall_ns);
        int r;

        if (store_pending_samples(in->store) == 0 && horizon_ns != INGEST_HORIZON_ALL)
                return 0;
        r = store_flush_samples(in->store, wall);
        if (r < 0)
                return log_error_errno(r, "Failed to write a block of samples: %m");
        return 0;
}

int ingest_drain(ingest *in, ringbuf *const *bufs, const uint32_t *cpus, size_t n, int64_t mono_to_wall_ns,
                 uint64_t horizon_ns) {
        uint64_t t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        size_t n_now = 0;
        int r, ret = 0;

        /* Records kept (or rescued) by the previous drain stay at the
         * front. */
        symbolizer_new_pass(in->symbolizer);
        if (GREEDY_REALLOC(in->runs, in->runs_alloc, n + 1) < 0)
                return log_oom();
        in->runs[0] = 0;
        in->rescued_bytes = 0;

        for (size_t i = 0; i < n; i++) {
                in->runs[i + 1] = in->n_pend;
                r = ringbuf_drain(bufs[i], collect_record, in);
                if (r == -EBADMSG)
                        log_warning_ratelimited("Ring buffer of CPU %u held a malformed record; skipped to its head.", cpus[i]);
                else if (r < 0)
                        return log_error_errno(r, "Failed to drain the ring buffer of CPU %u: %m", cpus[i]);
        }

        if (in->n_pend == 0)
                goto done;

        /* Each CPU's records are in time order; merge them. */
        merge_runs(in, n + 1);

        /* Keep what is stamped after the horizon, but not a time that cannot
         * be real (far ahead of it): that would wait forever. */
        for (n_now = in->n_pend; n_now > 0 && in->pend[n_now - 1].time >= horizon_ns; n_now--)
                if (in->pend[n_now - 1].time - horizon_ns > INGEST_CARRY_MAX_NS)
                        break;
        if (n_now == 0)
                goto done;

        r = begin_batch(in);
        if (r < 0)
                return r;

        in->draining = true;
        for (size_t i = 0; i < n_now; i++) {
                perf_record rec;

                if (i % RESCUE_CHECK_RECORDS == RESCUE_CHECK_RECORDS - 1)
                        rescue_rings(in, bufs, cpus, n);
                in->stats.records++;
                r = perf_record_decode(in->arena + in->pend[i].off, in->pend[i].len, in->sample_type, &rec);
                if (r < 0) {
                        in->stats.bad_records++;
                        log_debug_errno(r, "Skipping a malformed perf record: %m");
                        continue;
                }
                r = ingest_record(in, &rec, mono_to_wall_ns);
                if (r < 0) {
                        ret = log_error_errno(r, "Failed to store a perf record: %m");
                        break;
                }
        }

        in->draining = false;

        if (ret >= 0)
                ret = pull_offcpu(in, horizon_ns, mono_to_wall_ns);
        if (ret >= 0)
                ret = flush_buckets(in, horizon_ns, mono_to_wall_ns);

        if (ret < 0) {
                /* Do not commit half a drain: drop the batch. */
                drop_batch(in);
        }

        tasks_gc(in->tasks, (uint64_t) ((int64_t) in->pend[n_now - 1].time + mono_to_wall_ns) - 10 * NSEC_PER_SEC);
        /* Every record before the horizon is processed. */
        (void) layout_forget_ksyms_before(in->layout, horizon_ns);

done:
        if (n_now == 0 && (pull_offcpu(in, horizon_ns, mono_to_wall_ns) < 0 ||
                           flush_buckets(in, horizon_ns, mono_to_wall_ns) < 0) && in->in_transaction) {
                /* Nothing new, but time went on: close what ended. If that
                 * failed, the batch is gone (sqlite may have rolled it back
                 * already), and with it the ids it interned. */
                drop_batch(in);
        }
        if (keep_for_next_drain(in, n_now) < 0) {
                log_error("Out of memory: dropping %zu records stamped after this drain began.", in->n_pend - n_now);
                in->stats.bad_records += in->n_pend - n_now;
                in->n_pend = 0;
                in->arena_len = 0;
        }
        /* What a storm's rescues grew is given back once it is worked
         * through (the next drain grows the arrays again as it needs). */
        if (in->grown_by_rescue && in->n_pend == 0) {
                free(in->arena);
                free(in->carry);
                free(in->pend);
                free(in->merged);
                in->arena = in->carry = NULL;
                in->pend = in->merged = NULL;
                in->arena_alloc = in->carry_alloc = in->pend_alloc = in->merged_alloc = 0;
                in->grown_by_rescue = false;
        }
        in->stats.drains++;
        in->stats.cpu_ns += clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
        return ret;
}
