/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfsnapctl export --format perf.data: a raw Query answer (stacks with
 * their frames' addresses, per pid, CPU and timeline slot) as a perf.data
 * file that perf report and perf script read.
 *
 * The file: the header, one cpu-clock attribute (sample_type IP, TID,
 * TIME, CPU, PERIOD, CALLCHAIN; sample_id_all, so that every record has a
 * time), then the records: the kernel's MMAP at its _text (perf relocates
 * kallsyms by it) and the modules', a COMM per thread and name, an MMAP2
 * per (process, user file) with the file's build-id, then the samples in
 * time order; then the HEADER_BUILD_ID feature (the kernel and
 * the user files). User frames are kept as offsets in their files, so
 * each file gets an address range of its own (USER_BASE + 4 GiB * k,
 * mapped from offset 0): a frame's address is its range's start plus its
 * offset, whatever the process's layout was. A stack's samples of one
 * slot get times spread evenly over the slot. */

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "export.h"
#include "hashmap.h"
#include "macro.h"

#define USER_BASE UINT64_C(0x100000000000)
#define USER_SPAN UINT64_C(0x100000000)
/* perf's own record type and flag for the build-id table (not in the
 * kernel's ABI: tools/perf/util/header.h, event.h). */
#define HEADER_BUILD_ID 2
#define PERF_RECORD_HEADER_BUILD_ID 67
#define PERF_RECORD_MISC_BUILD_ID_SIZE (1 << 15)
#define NAME_ALIGN 64
/* x86-64's MODULES_VADDR: __START_KERNEL_map + KERNEL_IMAGE_SIZE (1 GiB). */
#define X86_64_MODULES_VADDR UINT64_C(0xffffffffc0000000)
/* Threads and (process, file) maps whose COMM and MMAP2 the writer
 * remembers having written. */
#define PERF_WRITER_TABLE_MAX (64u * 1024u)
/* Frames of a stack (callchain_depth is at most 127) and two contexts. */
#define MAX_CHAIN 256

struct file_section {
        uint64_t offset, size;
};

struct file_header {
        char magic[8];
        uint64_t size, attr_size;
        struct file_section attrs, data, event_types;
        uint64_t features[4];
};

struct file_attr {
        struct perf_event_attr attr;
        struct file_section ids;
};

typedef struct out {
        FILE *f;
        uint64_t pos;
} out;

static void put(out *o, const void *p, size_t n) {
        /* One thread writes the stream: no lock per record. */
        fwrite_unlocked(p, 1, n, o->f);
        o->pos += n;
}

static void put_u64(out *o, uint64_t v) {
        put(o, &v, sizeof v);
}

static void put_u32(out *o, uint32_t v) {
        put(o, &v, sizeof v);
}

static void put_header(out *o, uint32_t type, uint16_t misc, size_t size) {
        struct perf_event_header h = { .type = type, .misc = misc, .size = (uint16_t) size };

        put(o, &h, sizeof h);
}

/* The attribute sets sample_id_all: every record but the samples ends in
 * this, the sample's TID, TIME and CPU fields, so that perf orders them
 * with the samples by time (a COMM after an exec applies from then on). */
#define SAMPLE_ID_SIZE 24

static void put_sample_id(out *o, uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu) {
        uint32_t ids[2] = { pid, tid }, cpu_res[2] = { cpu, 0 };

        put(o, ids, sizeof ids);
        put(o, &time, sizeof time);
        put(o, cpu_res, sizeof cpu_res);
}

/* A NUL-terminated string padded with NULs to a multiple of align. */
static size_t padded(const char *s, size_t align) {
        return (strlen(s) + 1 + align - 1) / align * align;
}

static void put_padded(out *o, const char *s, size_t size) {
        size_t len = strlen(s);
        char zero[NAME_ALIGN] = {};

        put(o, s, len);
        for (size_t left = size - len; left > 0;) {
                size_t k = MIN(left, sizeof zero);

                put(o, zero, k);
                left -= k;
        }
}

/* hex -> bytes; the number of bytes, at most 20. */
static size_t build_id_bytes(const char *hex, uint8_t bytes[20]) {
        size_t n = 0;

        memset(bytes, 0, 20);
        for (; hex && n < 20; hex += 2) {
                int hi = unhexchar(hex[0]), lo = hi < 0 ? -1 : unhexchar(hex[1]);

                if (lo < 0)
                        break;
                bytes[n++] = (uint8_t) (hi << 4 | lo);
        }
        return n;
}

typedef struct timed {
        uint64_t time;
        uint32_t stack;
} timed;

static int timed_cmp(const void *x, const void *y) {
        const timed *a = x, *b = y;

        if (a->time != b->time)
                return a->time < b->time ? -1 : 1;
        return a->stack < b->stack ? -1 : a->stack > b->stack;
}

typedef struct kmod {
        char name[64];
        uint64_t start, size;
} kmod;

/* The modules of a /proc/modules file: "name size refs deps state addr". */
static size_t read_modules(const char *path, kmod *v, size_t max) {
        FILE *m = path ? fopen(path, "re") : NULL;
        char line[1024];
        size_t n = 0;

        if (!m)
                return 0;
        while (n < max && fgets(line, sizeof line, m)) {
                char name[56], state[32], refs[16], deps[512];
                unsigned long long size, addr;

                if (sscanf(line, "%55s %llu %15s %511s %31s 0x%llx", name, &size, refs, deps, state, &addr) == 6 &&
                    addr != 0 && size > 0) {
                        snprintf(v[n].name, sizeof v[n].name, "[%s]", name);
                        v[n].start = addr;
                        v[n].size = size;
                        n++;
                }
        }
        fclose(m);
        return n;
}

/* A user file of the whole export: its range and its build-id. */
typedef struct dso {
        char *name, *build_id;
        uint64_t base;
        uint8_t bid[20];        /* build_id's bytes, n_bid of them */
        size_t n_bid;
} dso;

struct perf_writer {
        out o;
        struct file_header h;
        uint64_t period;
        char *kernel_build_id;
        hashmap *pids;          /* (pid, tid) -> 1 + index in comms of the COMM written last */
        hashmap *comm_idx;      /* comm -> index in comms */
        char **comms;
        size_t n_comms, alloc_comms;
        hashmap *maps;          /* (pid, dso) -> 1: MMAP2 written */
        hashmap *dso_idx;       /* name -> index in dsos */
        dso *dsos;
        size_t n_dsos, alloc_dsos;
        /* Kernel modules with build-ids ("[brd]"): for the build-id table
         * only (their maps are the modules file's). */
        hashmap *kmod_idx;
        /* Cgroup paths -> their ids in the file (1, 2, ...): a
         * PERF_RECORD_CGROUP each, and each sample's PERF_SAMPLE_CGROUP
         * (0: not known), so that perf report --sort cgroup names them. */
        hashmap *cgroup_idx;
        uint64_t n_cgroups;
        dso *kmods;
        size_t n_kmods, alloc_kmods;
        uint64_t samples, omitted;
};

static void dsos_free(dso *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(v[i].name);
                free(v[i].build_id);
        }
        free(v);
}

perf_writer *perf_writer_free(perf_writer *w) {
        if (!w)
                return NULL;
        hashmap_free(w->pids);
        hashmap_free(w->cgroup_idx);
        hashmap_free(w->comm_idx);
        for (size_t i = 0; i < w->n_comms; i++)
                free(w->comms[i]);
        free(w->comms);
        hashmap_free(w->maps);
        hashmap_free(w->dso_idx);
        dsos_free(w->dsos, w->n_dsos);
        hashmap_free(w->kmod_idx);
        dsos_free(w->kmods, w->n_kmods);
        free(w->kernel_build_id);
        free(w);
        return NULL;
}

int perf_writer_new(FILE *f, uint64_t period_ns, uint64_t kernel_text, const char *kernel_build_id,
                    const char *modules_file, perf_writer **ret) {
        perf_writer *w = calloc(1, sizeof *w);
        struct file_attr fa = {};
        kmod *mods = NULL;
        size_t n_mods;

        if (!w)
                return -ENOMEM;
        w->o.f = f;
        w->period = period_ns ? period_ns : 1;
        w->h = (struct file_header) { .magic = "PERFILE2", .size = sizeof(struct file_header),
                                      .attr_size = sizeof(struct file_attr) };
        if ((kernel_build_id && !(w->kernel_build_id = strdup(kernel_build_id))) || hashmap_new(&w->pids) < 0 ||
            hashmap_new(&w->comm_idx) < 0 || hashmap_new(&w->maps) < 0 || hashmap_new(&w->cgroup_idx) < 0 || hashmap_new(&w->dso_idx) < 0 || hashmap_new(&w->kmod_idx) < 0 ||
            !(mods = calloc(1024, sizeof(kmod)))) {
                perf_writer_free(w);
                return -ENOMEM;
        }
        put(&w->o, &w->h, sizeof w->h);         /* written again at the end */

        fa.attr = (struct perf_event_attr) {
                .type = PERF_TYPE_SOFTWARE,
                .size = sizeof(struct perf_event_attr),
                .config = PERF_COUNT_SW_CPU_CLOCK,
                .sample_freq = period_ns ? 1000000000 / period_ns : 0,
                .sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
                               PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_CGROUP,
                .freq = period_ns != 0,
                .mmap = 1,
                .comm = 1,
                .mmap2 = 1,
                .ksymbol = 1,
                .cgroup = 1,
                .sample_id_all = 1,
                .disabled = 1,
        };
        w->h.attrs = (struct file_section) { .offset = w->o.pos, .size = sizeof fa };
        put(&w->o, &fa, sizeof fa);
        w->h.data.offset = w->o.pos;

        /* The kernel, from its _text (perf relocates kallsyms by it), up
         * to the first module; then the modules, as perf record writes
         * them (perf names their functions from kallsyms only where a
         * module has a map). */
        n_mods = read_modules(modules_file, mods, 1024);
        if (kernel_build_id) {
                const char *name = "[kernel.kallsyms]_text";
                size_t len = padded(name, 8);
                /* Not past the kernel image: perf puts a KSYMBOL (a BPF
                 * program) into the map that holds its address, and one
                 * in the kernel's would be lost among kallsyms. On x86-64
                 * the image is below the modules' area wherever KASLR put
                 * it. */
                uint64_t end = kernel_text >= UINT64_C(0xffffffff80000000) && kernel_text < X86_64_MODULES_VADDR
                                       ? X86_64_MODULES_VADDR : UINT64_MAX;

                for (size_t i = 0; i < n_mods; i++)
                        if (mods[i].start > kernel_text)
                                end = MIN(end, mods[i].start);
                put_header(&w->o, PERF_RECORD_MMAP, PERF_RECORD_MISC_KERNEL,
                           sizeof(struct perf_event_header) + 32 + len + SAMPLE_ID_SIZE);
                put_u32(&w->o, UINT32_MAX);     /* pid -1: the kernel */
                put_u32(&w->o, 0);
                put_u64(&w->o, kernel_text);
                put_u64(&w->o, end - kernel_text);
                put_u64(&w->o, kernel_text);
                put_padded(&w->o, name, len);
                put_sample_id(&w->o, UINT32_MAX, 0, 0, 0);      /* time 0: before everything */
        }
        for (size_t i = 0; i < n_mods; i++) {
                size_t len = padded(mods[i].name, 8);

                put_header(&w->o, PERF_RECORD_MMAP, PERF_RECORD_MISC_KERNEL,
                           sizeof(struct perf_event_header) + 32 + len + SAMPLE_ID_SIZE);
                put_u32(&w->o, UINT32_MAX);
                put_u32(&w->o, 0);
                put_u64(&w->o, mods[i].start);
                put_u64(&w->o, mods[i].size);
                put_u64(&w->o, 0);
                put_padded(&w->o, mods[i].name, len);
                put_sample_id(&w->o, UINT32_MAX, 0, 0, 0);
        }
        free(mods);
        *ret = w;
        return 0;
}

/* The export-wide file of an answer's module; its index, or -1 for
 * kernel code and user frames in no file. */
static int dso_of(perf_writer *w, const query_module *m, int64_t *ret) {
        int64_t idx;
        int k;

        *ret = -1;
        if (m->kernel && m->name[0] == '[' && strcmp(m->name, "[kernel.kallsyms]") != 0 && m->build_id &&
            hashmap_get(w->kmod_idx, m->name, strlen(m->name), &idx) < 0) {
                k = array_reserve_one((void **) &w->kmods, &w->alloc_kmods, w->n_kmods, sizeof(dso));
                if (k < 0)
                        return k;
                w->kmods[w->n_kmods++] = (dso) { .name = strdup(m->name), .build_id = strdup(m->build_id) };
                if (!w->kmods[w->n_kmods - 1].name || !w->kmods[w->n_kmods - 1].build_id)
                        return -ENOMEM;
                return hashmap_put(w->kmod_idx, m->name, strlen(m->name), (int64_t) w->n_kmods - 1);
        }
        if (m->kernel || !module_is_file(m->name))
                return 0;
        if (hashmap_get(w->dso_idx, m->name, strlen(m->name), &idx) >= 0) {
                *ret = idx;
                return 0;
        }
        k = array_reserve_one((void **) &w->dsos, &w->alloc_dsos, w->n_dsos, sizeof(dso));
        if (k < 0)
                return k;
        w->dsos[w->n_dsos] = (dso) {
                .name = strdup(m->name),
                .build_id = m->build_id ? strdup(m->build_id) : NULL,
                .base = USER_BASE + USER_SPAN * w->n_dsos,
        };
        w->dsos[w->n_dsos].n_bid = build_id_bytes(m->build_id, w->dsos[w->n_dsos].bid);
        if (!w->dsos[w->n_dsos].name || (m->build_id && !w->dsos[w->n_dsos].build_id)) {
                free(w->dsos[w->n_dsos].name);
                free(w->dsos[w->n_dsos].build_id);
                return -ENOMEM;
        }
        /* Counted first, so that the writer frees it whatever follows. */
        *ret = (int64_t) w->n_dsos++;
        return hashmap_put(w->dso_idx, m->name, strlen(m->name), *ret);
}

/* The COMM of st's process and the MMAP2s of its files, once each. */
/* The writer's index of a comm. */
static int comm_id(perf_writer *w, const char *comm, int64_t *ret) {
        int k;

        if (hashmap_get(w->comm_idx, comm, strlen(comm), ret) >= 0)
                return 0;
        k = array_reserve_one((void **) &w->comms, &w->alloc_comms, w->n_comms, sizeof(char *));
        if (k < 0)
                return k;
        w->comms[w->n_comms] = strdup(comm);
        if (!w->comms[w->n_comms])
                return -ENOMEM;
        *ret = (int64_t) w->n_comms++;
        return hashmap_put(w->comm_idx, comm, strlen(comm), *ret);
}

/* The file's id of a cgroup path, with its PERF_RECORD_CGROUP written
 * at time the first time; 0 for none. */
static int cgroup_of(perf_writer *w, const char *path, uint64_t time, uint64_t *ret) {
        int64_t v;
        size_t len;
        int k;

        *ret = 0;
        if (!path || !path[0])
                return 0;
        if (hashmap_get(w->cgroup_idx, path, strlen(path), &v) >= 0) {
                *ret = (uint64_t) v;
                return 0;
        }
        len = padded(path, 8);
        if (len > 4096)
                return 0;       /* longer than perf takes: not named */
        k = hashmap_put(w->cgroup_idx, path, strlen(path), (int64_t) ++w->n_cgroups);
        if (k < 0)
                return k;
        put_header(&w->o, PERF_RECORD_CGROUP, 0, sizeof(struct perf_event_header) + 8 + len + SAMPLE_ID_SIZE);
        put_u64(&w->o, w->n_cgroups);
        put_padded(&w->o, path, len);
        put_sample_id(&w->o, UINT32_MAX, 0, time, 0);
        *ret = w->n_cgroups;
        return 0;
}

/* The COMM of st's thread, when it is not the one written last for it,
 * at comm_time (its slot's start: a thread that exec'ed has its new name
 * from the slot of its first sample under it); the MMAP2s of its files,
 * once each, at map_time (the part's start: before all its samples). */
static int put_process(perf_writer *w, const query_result *r, const query_stack *st, const int64_t *dso_map,
                       uint64_t comm_time, uint64_t map_time) {
        int64_t v, c;
        int k;

        int64_t tid = st->tid > 0 ? st->tid : st->pid;
        uint32_t cpu = st->cpu >= 0 ? (uint32_t) st->cpu : 0;

        k = comm_id(w, st->comm ?: "", &c);
        if (k < 0)
                return k;
        if (hashmap_get_pair(w->pids, (uint64_t) st->pid, (uint64_t) tid, &v) < 0 || v != c + 1) {
                size_t len = padded(st->comm ?: "", 8);

                k = hashmap_put_pair(w->pids, (uint64_t) st->pid, (uint64_t) tid, c + 1);
                if (k < 0)
                        return k;
                put_header(&w->o, PERF_RECORD_COMM, 0, sizeof(struct perf_event_header) + 8 + len + SAMPLE_ID_SIZE);
                put_u32(&w->o, (uint32_t) st->pid);
                put_u32(&w->o, (uint32_t) tid);
                put_padded(&w->o, st->comm ?: "", len);
                put_sample_id(&w->o, (uint32_t) st->pid, (uint32_t) tid, comm_time, cpu);
        }
        for (size_t j = 0, last = SIZE_MAX; st->modules && j < st->n_frames; j++) {
                int64_t d = st->modules[j] < r->n_modules ? dso_map[st->modules[j]] : -1;
                const dso *m;
                size_t len;

                /* Frames of one file come in runs: looked up once a run. */
                if (d < 0 || (size_t) d == last)
                        continue;
                last = (size_t) d;
                if (hashmap_get_pair(w->maps, (uint64_t) st->pid, (uint64_t) d, &v) >= 0)
                        continue;
                k = hashmap_put_pair(w->maps, (uint64_t) st->pid, (uint64_t) d, 1);
                if (k < 0)
                        return k;
                m = &w->dsos[d];
                len = padded(m->name, 8);
                put_header(&w->o, PERF_RECORD_MMAP2,
                           PERF_RECORD_MISC_USER | (m->n_bid > 0 ? PERF_RECORD_MISC_MMAP_BUILD_ID : 0),
                           sizeof(struct perf_event_header) + 64 + len + SAMPLE_ID_SIZE);
                put_u32(&w->o, (uint32_t) st->pid);
                put_u32(&w->o, (uint32_t) st->pid);
                put_u64(&w->o, m->base);
                put_u64(&w->o, USER_SPAN);
                put_u64(&w->o, 0);
                if (m->n_bid > 0) {
                        uint8_t sz[4] = { (uint8_t) m->n_bid };

                        put(&w->o, sz, sizeof sz);
                        put(&w->o, m->bid, sizeof m->bid);
                } else {
                        uint8_t zero[24] = {};

                        put(&w->o, zero, sizeof zero);
                }
                put_u32(&w->o, PROT_READ | PROT_EXEC);
                put_u32(&w->o, MAP_PRIVATE);
                put_padded(&w->o, m->name, len);
                put_sample_id(&w->o, (uint32_t) st->pid, (uint32_t) tid, map_time, cpu);
        }
        return 0;
}

/* One SAMPLE record of st at time; false if it cannot be one (no frames,
 * too long a chain). */
static bool put_sample(perf_writer *w, const query_result *r, const int64_t *dso_map, const query_stack *st,
                       uint64_t time, uint64_t cgroup) {
        size_t n_user_frames = st->n_frames - st->n_kernel;
        size_t nr = st->n_frames + (st->n_kernel > 0) + (n_user_frames > 0);
        /* The record, written at once: header, 6 fixed fields, the chain,
         * the cgroup. */
        uint64_t rec[1 + 6 + MAX_CHAIN + 1], *chain = rec + 7;
        size_t c = 0;

        if (st->n_frames == 0 || nr > MAX_CHAIN)
                return false;
        /* The chain, leaf first: kernel frames, then user ones. */
        if (st->n_kernel > 0) {
                chain[c++] = (uint64_t) PERF_CONTEXT_KERNEL;
                for (size_t j = st->n_frames; j-- > n_user_frames;)
                        chain[c++] = st->addrs[j];
        }
        if (n_user_frames > 0) {
                chain[c++] = (uint64_t) PERF_CONTEXT_USER;
                for (size_t j = n_user_frames; j-- > 0;) {
                        int64_t d = st->modules && st->modules[j] < r->n_modules ? dso_map[st->modules[j]] : -1;

                        chain[c++] = d >= 0 ? w->dsos[d].base + st->addrs[j] : st->addrs[j];
                }
        }
        struct perf_event_header h = {
                .type = PERF_RECORD_SAMPLE,
                .misc = st->n_kernel > 0 ? PERF_RECORD_MISC_KERNEL : PERF_RECORD_MISC_USER,
                .size = (uint16_t) (sizeof h + 48 + 8 * c + 8),
        };
        uint32_t pid_tid[2] = { (uint32_t) st->pid, (uint32_t) (st->tid > 0 ? st->tid : st->pid) };
        uint32_t cpu_res[2] = { st->cpu >= 0 ? (uint32_t) st->cpu : 0, 0 };

        memcpy(&rec[0], &h, sizeof h);
        rec[1] = chain[1];      /* the leaf */
        memcpy(&rec[2], pid_tid, sizeof pid_tid);
        rec[3] = time;
        memcpy(&rec[4], cpu_res, sizeof cpu_res);
        rec[5] = w->period;
        rec[6] = c;
        chain[c] = cgroup;
        put(&w->o, rec, h.size);
        return true;
}

int perf_writer_ksymbol(perf_writer *w, uint64_t addr, uint32_t len, bool bpf, const char *name) {
        size_t size = padded(name, 8);

        if (size > 4096)
                return -EINVAL;
        put_header(&w->o, PERF_RECORD_KSYMBOL, PERF_RECORD_MISC_KERNEL,
                   sizeof(struct perf_event_header) + 16 + size + SAMPLE_ID_SIZE);
        put_u64(&w->o, addr);
        put_u32(&w->o, len);
        uint16_t type_flags[2] = { bpf ? PERF_RECORD_KSYMBOL_TYPE_BPF : PERF_RECORD_KSYMBOL_TYPE_OOL, 0 };
        put(&w->o, type_flags, sizeof type_flags);
        put_padded(&w->o, name, size);
        put_sample_id(&w->o, UINT32_MAX, 0, 0, 0);
        return ferror(w->o.f) ? -EIO : 0;
}

/* Item i of r's samples: its stacks, then its entries (query_params.shapes)
 * as stacks in *tmp. */
static const query_stack *item_at(const query_result *r, size_t i, query_stack *tmp) {
        if (i < r->n_stacks)
                return &r->stacks[i];
        *tmp = query_entry_stack(r, &r->entries[i - r->n_stacks]);
        return tmp;
}

int perf_writer_add(perf_writer *w, const query_result *r, uint64_t since_ns, uint64_t until_ns) {
        _cleanup_free_ int64_t *dso_map = calloc(MAX(r->n_modules, (size_t) 1), sizeof(int64_t));
        _cleanup_free_ timed *times = NULL;
        uint64_t slot_ns = r->timeline_slot_ns ? r->timeline_slot_ns : until_ns - since_ns, n_times = 0;
        _cleanup_free_ uint64_t *cgroup_ids = NULL;
        size_t n_items;
        int k;

        if (!dso_map)
                return -ENOMEM;
        /* Bounded memory over any window: past this many threads and
         * maps written, they are forgotten, and written again before
         * their next sample (perf takes the same COMM or MMAP2 twice as
         * the same thread name and mapping). */
        if (hashmap_size(w->pids) + hashmap_size(w->maps) + w->n_comms > PERF_WRITER_TABLE_MAX) {
                hashmap_clear(w->pids);
                hashmap_clear(w->maps);
                hashmap_clear(w->comm_idx);
                hashmap_clear(w->cgroup_idx);
                for (size_t i = 0; i < w->n_comms; i++)
                        free(w->comms[i]);
                w->n_comms = 0;
        }
        for (size_t i = 0; i < r->n_modules; i++) {
                k = dso_of(w, &r->modules[i], &dso_map[i]);
                if (k < 0)
                        return k;
        }
        /* The processes and their files before their samples. A part
         * cannot hold more samples than its window has nanoseconds: a
         * reply that says so is refused, not believed. */
        if (r->n_entries > UINT32_MAX - r->n_stacks)
                return -EBADMSG;
        /* In slot order: a thread's first COMM in the part is at its
         * earliest slot, before all its samples. */
        n_items = r->n_stacks + r->n_entries;
        times = calloc(MAX(n_items, (size_t) 1), sizeof(timed));
        if (!times)
                return -ENOMEM;
        for (size_t i = 0; i < n_items; i++) {
                query_stack tmp;
                const query_stack *st = item_at(r, i, &tmp);

                times[i] = (timed) { since_ns + (st->slot > 0 ? (uint64_t) st->slot * slot_ns : 0), (uint32_t) i };
        }
        qsort(times, n_items, sizeof(timed), timed_cmp);
        cgroup_ids = calloc(MAX(n_items, (size_t) 1), sizeof(uint64_t));
        if (!cgroup_ids)
                return -ENOMEM;
        for (size_t x = 0; x < n_items; x++) {
                query_stack tmp;
                const query_stack *st = item_at(r, times[x].stack, &tmp);

                k = cgroup_of(w, st->cgroup, since_ns, &cgroup_ids[times[x].stack]);
                if (k < 0)
                        return k;
                if (!st->addrs) {
                        w->omitted += st->samples;      /* "[other stacks]": no addresses */
                        continue;
                }
                if (st->samples > until_ns - since_ns || n_times > UINT32_MAX - st->samples)
                        return -EBADMSG;
                k = put_process(w, r, st, dso_map, times[x].time, since_ns);
                if (k < 0)
                        return k;
                n_times += st->samples;
        }
        free(times);
        /* The samples in time order: a stack's samples of a slot spread
         * evenly over it. */
        times = calloc(MAX(n_times, (uint64_t) 1), sizeof(timed));
        if (!times)
                return -ENOMEM;
        n_times = 0;
        for (size_t i = 0; i < r->n_stacks + r->n_entries; i++) {
                query_stack tmp;
                const query_stack *st = item_at(r, i, &tmp);
                uint64_t start = since_ns + (st->slot > 0 ? (uint64_t) st->slot * slot_ns : 0);

                for (uint64_t s = 0; st->addrs && s < st->samples; s++)
                        times[n_times++] = (timed) {
                                .time = start + (uint64_t) ((unsigned __int128) (2 * s + 1) * slot_ns /
                                                            (2 * (unsigned __int128) st->samples)),
                                .stack = (uint32_t) i,
                        };
        }
        qsort(times, n_times, sizeof(timed), timed_cmp);
        for (size_t x = 0; x < n_times; x++) {
                query_stack tmp;

                if (put_sample(w, r, dso_map, item_at(r, times[x].stack, &tmp), times[x].time,
                               cgroup_ids[times[x].stack]))
                        w->samples++;
                else
                        w->omitted++;
        }
        return ferror(w->o.f) ? -EIO : 0;
}

int perf_writer_finish(perf_writer *w, uint64_t *ret_samples, uint64_t *ret_omitted) {
        FILE *f = w->o.f;
        uint64_t index;
        struct file_section fs;

        w->h.data.size = w->o.pos - w->h.data.offset;
        /* HEADER_BUILD_ID: its section's place, then the events. */
        index = w->o.pos;
        fs = (struct file_section) { .offset = index + sizeof(struct file_section) };
        put(&w->o, &fs, sizeof fs);
        for (size_t i = 0; i <= w->n_dsos + w->n_kmods; i++) {
                /* The user files, the kernel, its modules. */
                const dso *d = i < w->n_dsos ? &w->dsos[i] : i > w->n_dsos ? &w->kmods[i - w->n_dsos - 1] : NULL;
                const char *name = d ? d->name : "[kernel.kallsyms]";
                const char *hex = d ? d->build_id : w->kernel_build_id;
                uint16_t misc = i < w->n_dsos ? PERF_RECORD_MISC_USER : PERF_RECORD_MISC_KERNEL;
                int32_t pid = -1;
                uint8_t bid[24] = {};
                size_t len, n_bid;

                n_bid = build_id_bytes(hex, bid);
                if (n_bid == 0)
                        continue;
                bid[20] = (uint8_t) n_bid;
                len = padded(name, NAME_ALIGN);
                put_header(&w->o, PERF_RECORD_HEADER_BUILD_ID, misc | PERF_RECORD_MISC_BUILD_ID_SIZE,
                           sizeof(struct perf_event_header) + 4 + 24 + len);
                put(&w->o, &pid, sizeof pid);
                put(&w->o, bid, sizeof bid);
                put_padded(&w->o, name, len);
        }
        fs.size = w->o.pos - fs.offset;
        w->h.features[0] = UINT64_C(1) << HEADER_BUILD_ID;

        if (fflush(f) != 0 || fseek(f, (long) index, SEEK_SET) != 0)
                return -errno;
        fwrite(&fs, 1, sizeof fs, f);
        if (fseek(f, 0, SEEK_SET) != 0)
                return -errno;
        fwrite(&w->h, 1, sizeof w->h, f);
        if (fflush(f) != 0 || ferror(f) || fseek(f, 0, SEEK_END) != 0)
                return -EIO;
        if (ret_samples)
                *ret_samples = w->samples;
        if (ret_omitted)
                *ret_omitted = w->omitted;
        return 0;
}

int export_perf_data(FILE *f, const export_input *in, uint64_t *ret_omitted) {
        perf_writer *w = NULL;
        int k;

        k = perf_writer_new(f, in->period_ns, in->r->kernel_text, in->r->kernel_build_id, in->modules_file, &w);
        if (k < 0)
                return k;
        k = perf_writer_add(w, in->r, in->since_ns, in->until_ns);
        if (k >= 0)
                k = perf_writer_finish(w, NULL, ret_omitted);
        perf_writer_free(w);
        return k;
}
