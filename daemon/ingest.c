/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "fileio.h"
#include "hashmap.h"
#include "ingest.h"
#include "log.h"
#include "macro.h"
#include "timeparse.h"

#define MAX_CPUS 4096
/* User addresses lie below, kernel ones above, on the 64-bit architectures
 * that split one address space (x86-64: user below 2^47, or 2^56 with
 * 5-level paging, kernel from 0xff00000000000000). */
#define USER_ADDR_END (UINT64_C(1) << 63)
/* Not a perf context marker (those are -1..-4095): the rest of a user
 * call chain that went astray, dropped. */
#define CONTEXT_INVALID_USER UINT64_C(1)
#define STACK_CACHE_MAX_ENTRIES (256 * 1024)
/* User frames by (file, offset): the hot ones of a busy machine fit; the
 * table (40 bytes a slot, at most 70% full) stays ~2.5 MiB. */
#define UFILE_CACHE_MAX_ENTRIES (32 * 1024)
/* The caches keyed by whole call chains hold keys of up to ~1 KiB: bound
 * them by bytes too, or a churning machine's stacks fill hundreds of MB. */
#define CHAIN_CACHE_MAX_BYTES (4 * 1024 * 1024)
/* Records stamped further than this past a drain's horizon are processed
 * at once rather than kept (no clock runs that far ahead). */
#define INGEST_CARRY_MAX_NS (60 * NSEC_PER_SEC)

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
        uint64_t layout_gen;    /* the generation the caches below were filled in */
        uint32_t epoch;         /* layout_epoch() of the sample being processed */
        kernel_info kernel;
        int64_t boot_id;
        int64_t snapshot_id, snapshot_prev_id;  /* see ingest_set_snapshot() */
        uint64_t snapshot_since_ns;
        tasks *tasks;

        ingest_miss_handler miss_cb;
        void *miss_userdata;
        ingest_record_handler record_cb;
        void *record_userdata;
        bool miss_handled;      /* the handler ran in this drain pass */
        bool draining;

        /* (kernel address, layout epoch) -> interned frame id, valid for
         * one layout generation */
        hashmap *kframe_cache;
        /* (file id of the tasks table, file offset) -> interned frame id
         * of a user frame in a file */
        hashmap *ufile_cache;
        /* (pid, maps generation of pid, raw callchain) -> leaf stack id. A
         * repeated call chain costs one lookup instead of one per frame. */
        hashmap *stack_cache;
        hashmap *path_cache;    /* the resolved frame ids of a chain -> stack id: shared by processes */
        uint64_t store_gen;     /* the store's dictionary generation the caches hold ids of */
        hashmap *maps_gen;      /* pid -> generation, bumped on MMAP2 and exec */
        uint64_t next_gen;
        uint64_t *key;          /* scratch for stack_cache keys */
        size_t key_alloc;

        /* the merge buffer of one drain pass; records kept for the next
         * one (at or after the horizon) are moved to the other arena */
        uint8_t *arena, *carry;
        size_t arena_len, arena_alloc, carry_alloc;
        pending *pend;
        size_t n_pend, pend_alloc;

        int64_t *frame_ids;     /* scratch, callchain_depth + slack */
        size_t frame_ids_alloc;

        uint64_t lost_per_cpu[MAX_CPUS];
        size_t n_lost_cpus;

        bool in_transaction;    /* a batch is open across drains until ingest_commit() */

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
                r = hashmap_new(&in->kframe_cache);
        if (r >= 0)
                r = hashmap_new(&in->ufile_cache);
        if (r >= 0)
                r = hashmap_new(&in->stack_cache);
        if (r >= 0)
                r = hashmap_new(&in->path_cache);
        if (r >= 0)
                r = hashmap_new(&in->maps_gen);
        if (r >= 0)
                r = tasks_new(in->root, &in->tasks);
        if (r < 0) {
                ingest_free(in);
                return r;
        }
        *ret = in;
        return 0;
}

ingest *ingest_free(ingest *in) {
        if (!in)
                return NULL;
        layout_free(in->layout);
        tasks_free(in->tasks);
        hashmap_free(in->kframe_cache);
        hashmap_free(in->ufile_cache);
        hashmap_free(in->stack_cache);
        hashmap_free(in->path_cache);
        hashmap_free(in->maps_gen);
        free(in->key);
        free(in->arena);
        free(in->carry);
        free(in->pend);
        free(in->frame_ids);
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

store *ingest_store(ingest *in) {
        return in->store;
}

void ingest_set_miss_handler(ingest *in, ingest_miss_handler cb, void *userdata) {
        in->miss_cb = cb;
        in->miss_userdata = userdata;
}

void ingest_set_record_handler(ingest *in, ingest_record_handler cb, void *userdata) {
        in->record_cb = cb;
        in->record_userdata = userdata;
}

bool ingest_draining(const ingest *in) {
        return in->draining;
}

/* Cached resolutions are only valid for the layout generation they were
 * made in. Returns true if they were dropped. */
static bool check_layout(ingest *in) {
        if (layout_generation(in->layout) == in->layout_gen)
                return false;
        hashmap_clear(in->kframe_cache);
        hashmap_clear(in->stack_cache);
        hashmap_clear(in->path_cache);
        in->layout_gen = layout_generation(in->layout);
        return true;
}

const ingest_stats *ingest_get_stats(const ingest *in) {
        return &in->stats;
}

size_t ingest_buffer_bytes(const ingest *in) {
        return in->arena_alloc + in->carry_alloc + in->pend_alloc * sizeof *in->pend +
               in->frame_ids_alloc * sizeof *in->frame_ids + in->key_alloc * sizeof *in->key;
}

size_t ingest_cache_bytes(const ingest *in) {
        return hashmap_memory_bytes(in->kframe_cache) + hashmap_memory_bytes(in->ufile_cache) +
               hashmap_memory_bytes(in->stack_cache) +
               hashmap_memory_bytes(in->path_cache) +
               hashmap_memory_bytes(in->maps_gen) + store_cache_bytes(in->store);
}

size_t ingest_tasks_bytes(const ingest *in) {
        return tasks_memory_bytes(in->tasks);
}

const uint64_t *ingest_lost_per_cpu(const ingest *in, size_t *ret_n) {
        *ret_n = in->n_lost_cpus;
        return in->lost_per_cpu;
}

static int kernel_frame_id(ingest *in, uint64_t ip, uint64_t time, int64_t *ret) {
        char module[MODULE_NAME_MAX + 2], data[256];
        frame f = { .kind = FRAME_KERNEL, .addr = ip };
        uint64_t key[2] = { ip, in->epoch };
        layout_hit hit;
        int r;

        if (hashmap_get(in->kframe_cache, key, sizeof key, ret) >= 0)
                return 0;

        r = layout_resolve(in->layout, ip, time, &hit);
        if (r < 0 && in->miss_cb && !in->miss_handled) {
                in->miss_handled = true;
                in->miss_cb(in->miss_userdata);
                if (check_layout(in)) {
                        in->epoch = layout_epoch(in->layout, time);
                        key[1] = in->epoch;
                }
                r = layout_resolve(in->layout, ip, time, &hit);
        }
        if (r >= 0) {
                f.symbol = hit.symbol;
                f.offset = hit.symbol ? ip - hit.symbol_addr : 0;
                if (hit.data) {
                        /* No function is there: name the place, "[brd] .orc_unwind+0x2f0". */
                        snprintf(data, sizeof data, "%s+0x%" PRIx64, hit.symbol, f.offset);
                        f.symbol = data;
                        in->stats.module_data_frames++;
                }
                if (hit.module_name) {
                        snprintf(module, sizeof module, "[%s]", hit.module_name);
                        f.module = module;
                        if (hit.module) {
                                f.build_id = hit.module->build_id[0] ? hit.module->build_id : NULL;
                                in->stats.module_frames++;
                        }
                } else {
                        f.module = MODULE_KERNEL;
                        f.build_id = in->kernel.build_id[0] ? in->kernel.build_id : NULL;
                }
        } else
                in->stats.unresolved_kernel_frames++;

        r = store_intern_frame(in->store, &f, ret);
        if (r < 0)
                return r;
        return hashmap_put(in->kframe_cache, key, sizeof key, *ret);
}

/* 1 (and no frame) for a return address that cannot be one: outside
 * every executable mapping of a process whose mappings are known. */
static int user_frame_id(ingest *in, uint32_t pid, uint64_t ip, bool return_address, int64_t *ret) {
        frame f = { .kind = FRAME_USER, .addr = ip };
        uint64_t key[2];
        mapping m;
        int r;

        if (tasks_find_mapping(in->tasks, pid, ip, &m) < 0) {
                if (return_address && tasks_n_mappings(in->tasks, pid) > 0)
                        return 1;
                return store_intern_frame(in->store, &f, ret);
        }
        f.module = m.path;
        f.offset = m.pgoff + (ip - m.start);
        f.build_id = m.build_id[0] ? m.build_id : NULL;
        /* A file's code is the same frame in every process that maps it,
         * wherever ASLR put it: keyed by the file, its build-id and the
         * file offset, not by the process's address. Anonymous memory
         * ("", "[heap]", "//anon") has no such identity. */
        if (!m.path || m.path[0] != '/')
                return store_intern_frame(in->store, &f, ret);
        f.addr = f.offset;

        /* Two numbers instead of the frame's path and build-id. */
        key[0] = m.file_id;
        key[1] = f.offset;
        if (hashmap_get(in->ufile_cache, key, sizeof key, ret) >= 0)
                return 0;
        r = store_intern_frame(in->store, &f, ret);
        if (r < 0)
                return r;
        if (hashmap_size(in->ufile_cache) >= UFILE_CACHE_MAX_ENTRIES)
                hashmap_clear(in->ufile_cache);
        return hashmap_put(in->ufile_cache, key, sizeof key, *ret);
}

static int ingest_sample(ingest *in, const perf_sample *ps, int64_t mono_to_wall_ns) {
        /* Callchain layout: PERF_CONTEXT_KERNEL, kernel ips..., PERF_CONTEXT_USER,
         * user ips... (leaf first). Entries are attributed to the context of the
         * last marker seen; without a callchain, the sample ip and the record's
         * cpumode decide. */
        uint64_t context = ps->user ? PERF_CONTEXT_USER : PERF_CONTEXT_KERNEL;
        size_t n = 0, need = ps->nr + 1;
        int64_t stack = 0, comm_id = 0;
        const char *comm;
        int r;

        check_layout(in);
        if (store_generation(in->store) != in->store_gen) {
                /* Ids of an older generation must not be used again. */
                hashmap_clear(in->kframe_cache);
                hashmap_clear(in->ufile_cache);
                hashmap_clear(in->stack_cache);
                hashmap_clear(in->path_cache);
                in->store_gen = store_generation(in->store);
        }
        in->epoch = layout_epoch(in->layout, ps->time);
        uint64_t gen_at_start = in->layout_gen;

        /* Key: pid, the pid's maps generation, cpumode, the layout epoch of
         * the sample's time, the raw callchain. */
        if (GREEDY_REALLOC(in->key, in->key_alloc, (size_t) ps->nr + 5) < 0)
                return -ENOMEM;
        int64_t gen = 0;
        (void) hashmap_get_u64(in->maps_gen, ps->pid, &gen);
        in->key[0] = ps->pid;
        in->key[1] = (uint64_t) gen;
        in->key[2] = ps->nr == 0 ? ps->ip : 0;
        in->key[3] = ps->user;
        in->key[4] = in->epoch;
        for (uint64_t i = 0; i < ps->nr; i++)
                memcpy(&in->key[5 + i], &ps->ips[i], sizeof(uint64_t));
        size_t key_len = (ps->nr + 5) * sizeof(uint64_t);
        if (hashmap_get(in->stack_cache, in->key, key_len, &stack) >= 0) {
                in->stats.stack_cache_hits++;
                goto insert;
        }

        if (GREEDY_REALLOC(in->frame_ids, in->frame_ids_alloc, need) < 0)
                return -ENOMEM;

        if (ps->nr == 0) {
                r = context == PERF_CONTEXT_KERNEL ? kernel_frame_id(in, ps->ip, ps->time, &in->frame_ids[n])
                                                   : user_frame_id(in, ps->pid, ps->ip, false, &in->frame_ids[n]);
                if (r < 0)
                        return r;
                n++;
        }

        unsigned user_entries = 0;
        for (uint64_t i = 0; i < ps->nr; i++) {
                uint64_t ip;

                memcpy(&ip, &ps->ips[i], sizeof ip);
                if (perf_callchain_is_context(ip)) {
                        context = ip;
                        continue;
                }
                /* The kernel walks a user stack by its frame pointers and
                 * takes whatever lies beside each saved one for a return
                 * address, unchecked (perf_callchain_user()). Where the
                 * program keeps no frame pointers, that is any value on its
                 * stack: perfsnapd's own stack holds the module addresses it
                 * just parsed from sysfs. An entry in the kernel's half of
                 * the address space is no user return address, and the
                 * entries after it come from the same bogus frame. */
                if (context == PERF_CONTEXT_USER && ip >= USER_ADDR_END)
                        context = CONTEXT_INVALID_USER;
                if (context == PERF_CONTEXT_KERNEL) {
                        r = kernel_frame_id(in, ip, ps->time, &in->frame_ids[n]);
                        in->stats.kernel_frames++;
                } else if (context == PERF_CONTEXT_USER) {
                        /* Likewise an entry outside all executable code:
                         * a frame-pointer walk through code built without
                         * them reads whatever the stack holds. The first
                         * entry is the sampled IP, from the registers. */
                        r = user_frame_id(in, ps->pid, ip, user_entries++ > 0, &in->frame_ids[n]);
                        if (r == 1) {
                                context = CONTEXT_INVALID_USER;
                                in->stats.invalid_user_frames++;
                                continue;
                        }
                        in->stats.user_frames++;
                } else {
                        if (context == CONTEXT_INVALID_USER)
                                in->stats.invalid_user_frames++;
                        continue;       /* and guest contexts: not ours to resolve */
                }
                if (r < 0)
                        return r;
                n++;
        }

        /* The same frames in another process (same binaries, other
         * addresses) make the same stack: one lookup instead of one per
         * node. Else stacks are interned outermost caller first. */
        if (hashmap_get(in->path_cache, in->frame_ids, n * sizeof(int64_t), &stack) < 0) {
                stack = 0;
                for (size_t i = n; i > 0; i--) {
                        r = store_intern_stack(in->store, stack, in->frame_ids[i - 1], &stack);
                        if (r < 0)
                                return r;
                }
                if (hashmap_size(in->path_cache) >= STACK_CACHE_MAX_ENTRIES ||
                    hashmap_memory_bytes(in->path_cache) >= CHAIN_CACHE_MAX_BYTES)
                        hashmap_clear(in->path_cache);
                r = hashmap_put(in->path_cache, in->frame_ids, n * sizeof(int64_t), stack);
                if (r < 0)
                        return r;
        }

        /* Bounded: start over rather than grow without limit. A layout
         * change while resolving this sample makes its epoch in the key
         * stale: do not cache it then. */
        if (hashmap_size(in->stack_cache) >= STACK_CACHE_MAX_ENTRIES ||
            hashmap_memory_bytes(in->stack_cache) >= CHAIN_CACHE_MAX_BYTES)
                hashmap_clear(in->stack_cache);
        if (in->layout_gen == gen_at_start) {
                r = hashmap_put(in->stack_cache, in->key, key_len, stack);
                if (r < 0)
                        return r;
        }

insert:
        /* pid 0 is the idle task of each CPU; it has no /proc entry. perf calls it swapper. */
        comm = ps->pid == 0 ? "swapper" : tasks_get_comm(in->tasks, ps->pid, ps->tid);
        if (comm) {
                r = store_intern_string(in->store, comm, &comm_id);
                if (r < 0)
                        return r;
        }

        r = store_insert_sample(in->store, &(stored_sample) {
                        .time_ns = (uint64_t) ((int64_t) ps->time + mono_to_wall_ns),
                        .cpu = ps->cpu,
                        .pid = ps->pid,
                        .tid = ps->tid,
                        .comm_id = comm_id,
                        .stack_id = stack,
                        .period = ps->period,
                        .boot_id = in->boot_id,
                        .snapshot_id = (uint64_t) ((int64_t) ps->time + mono_to_wall_ns) >= in->snapshot_since_ns ?
                                       in->snapshot_id : in->snapshot_prev_id,
                });
        if (r < 0)
                return r;
        in->stats.samples++;
        return 0;
}

/* User frames of pid resolve differently from now on: cached stacks of the
 * previous generation no longer match. */
static void maps_changed(ingest *in, uint32_t pid) {
        (void) hashmap_put_u64(in->maps_gen, pid, (int64_t) ++in->next_gen);
        if (hashmap_size(in->maps_gen) >= STACK_CACHE_MAX_ENTRIES) {
                /* Forgetting generations would make old keys match again:
                 * forget the stacks keyed by them too. */
                hashmap_clear(in->maps_gen);
                hashmap_clear(in->stack_cache);
        }
}

int ingest_record(ingest *in, const perf_record *rec, int64_t mono_to_wall_ns) {
        char bid[BUILD_ID_HEX_MAX];
        int r;

        switch (rec->type) {
        case PERF_RECORD_SAMPLE:
                return ingest_sample(in, &rec->sample, mono_to_wall_ns);

        case PERF_RECORD_COMM:
                if (rec->comm.exec)
                        maps_changed(in, rec->comm.pid);
                return tasks_comm(in->tasks, rec->comm.pid, rec->comm.tid, rec->comm.comm, rec->comm.exec);

        case PERF_RECORD_FORK:
                return tasks_fork(in->tasks, rec->task.ppid, rec->task.ptid, rec->task.pid, rec->task.tid);

        case PERF_RECORD_EXIT:
                return tasks_exit(in->tasks, rec->task.pid, rec->task.tid,
                                  (uint64_t) ((int64_t) rec->task.time + mono_to_wall_ns));

        case PERF_RECORD_MMAP2:
                maps_changed(in, rec->mmap2.pid);
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
        hashmap_clear(in->kframe_cache);
        hashmap_clear(in->ufile_cache);
        hashmap_clear(in->stack_cache);
        hashmap_clear(in->path_cache);
}

int ingest_commit(ingest *in) {
        int r;

        if (!in->in_transaction)
                return 0;
        in->in_transaction = false;
        r = store_commit(in->store);
        if (r < 0) {
                forget_batch_ids(in);
                return log_error_errno(r, "Failed to commit samples to the database: %m");
        }
        in->stats.commits++;
        return 0;
}

/* Copies one record out of the ring buffer into the merge arena. */
static int collect_record(const struct perf_event_header *hdr, void *userdata) {
        ingest *in = userdata;
        uint64_t time = 0;

        /* Only the time here; the record is decoded once, after the merge.
         * One without a time sorts first; if malformed, it is skipped then. */
        (void) perf_record_time(hdr, hdr->size, PERFSNAP_SAMPLE_TYPE, &time);

        if (in->arena_alloc - in->arena_len < hdr->size) {
                size_t n = MAX(in->arena_alloc * 2, in->arena_len + hdr->size + 65536);
                uint8_t *p = realloc(in->arena, n);
                if (!p)
                        return -ENOMEM;
                in->arena = p;
                in->arena_alloc = n;
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

        /* Records kept by the previous drain stay at the front. */
        in->miss_handled = false;

        for (size_t i = 0; i < n; i++) {
                r = ringbuf_drain(bufs[i], collect_record, in);
                if (r == -EBADMSG)
                        log_warning_ratelimited("Ring buffer of CPU %u held a malformed record; skipped to its head.", cpus[i]);
                else if (r < 0)
                        return log_error_errno(r, "Failed to drain the ring buffer of CPU %u: %m", cpus[i]);
        }

        if (in->n_pend == 0)
                goto done;

        /* Each CPU's records are in time order; merge them. */
        qsort(in->pend, in->n_pend, sizeof *in->pend, pending_cmp);

        /* Keep what is stamped after the horizon, but not a time that cannot
         * be real (far ahead of it): that would wait forever. */
        for (n_now = in->n_pend; n_now > 0 && in->pend[n_now - 1].time >= horizon_ns; n_now--)
                if (in->pend[n_now - 1].time - horizon_ns > INGEST_CARRY_MAX_NS)
                        break;
        if (n_now == 0)
                goto done;

        if (!in->in_transaction) {
                r = store_begin(in->store);
                if (r < 0)
                        return log_error_errno(r, "Failed to begin a database transaction: %m");
                in->in_transaction = true;
        }

        in->draining = true;
        for (size_t i = 0; i < n_now; i++) {
                perf_record rec;

                in->stats.records++;
                r = perf_record_decode(in->arena + in->pend[i].off, in->pend[i].len, PERFSNAP_SAMPLE_TYPE, &rec);
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
                ret = flush_buckets(in, horizon_ns, mono_to_wall_ns);

        if (ret < 0) {
                /* Do not commit half a drain: drop the batch. */
                (void) store_rollback(in->store);
                in->in_transaction = false;
                forget_batch_ids(in);
        }

        tasks_gc(in->tasks, (uint64_t) ((int64_t) in->pend[n_now - 1].time + mono_to_wall_ns) - 10 * NSEC_PER_SEC);
        /* Every record before the horizon is processed. */
        (void) layout_forget_ksyms_before(in->layout, horizon_ns);

done:
        if (n_now == 0 && flush_buckets(in, horizon_ns, mono_to_wall_ns) < 0 && in->in_transaction) {
                /* Nothing new, but time went on: close what ended. If that
                 * failed, the batch is gone (sqlite may have rolled it back
                 * already), and with it the ids it interned. */
                (void) store_rollback(in->store);
                in->in_transaction = false;
                forget_batch_ids(in);
        }
        if (keep_for_next_drain(in, n_now) < 0) {
                log_error("Out of memory: dropping %zu records stamped after this drain began.", in->n_pend - n_now);
                in->stats.bad_records += in->n_pend - n_now;
                in->n_pend = 0;
                in->arena_len = 0;
        }
        in->stats.drains++;
        in->stats.cpu_ns += clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
        return ret;
}
