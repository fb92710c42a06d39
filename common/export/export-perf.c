/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfsnapctl export --format perf.data: a raw Query answer (stacks with
 * their frames' addresses, per pid, CPU and timeline slot) as a perf.data
 * file that perf report and perf script read.
 *
 * The file: the header, one cpu-clock attribute (sample_type IP, TID,
 * TIME, CPU, PERIOD, CALLCHAIN), then the records: the kernel's MMAP at
 * its _text (perf relocates kallsyms by it), a COMM per process, an
 * MMAP2 per (process, user file) with the file's build-id, then the
 * samples in time order; then the HEADER_BUILD_ID feature (the kernel and
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
        fwrite(p, 1, n, o->f);
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
        for (; hex && hex[0] && hex[1] && n < 20; hex += 2) {
                unsigned v;

                if (sscanf(hex, "%2x", &v) != 1)
                        break;
                bytes[n++] = (uint8_t) v;
        }
        return n;
}

static bool is_file(const char *path) {
        return path[0] == '/';
}

typedef struct sample_ref {
        uint32_t stack;
        int32_t slot;
} sample_ref;

static int ref_cmp(const void *x, const void *y) {
        const sample_ref *a = x, *b = y;

        if (a->slot != b->slot)
                return a->slot < b->slot ? -1 : 1;
        return a->stack < b->stack ? -1 : a->stack > b->stack;
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

/* One SAMPLE record of st at time; 1 if it cannot be one (no frames, too
 * long a chain), else 0. */
static uint64_t put_sample(out *o, const query_result *r, const uint64_t *base, const query_stack *st, uint64_t time,
                           uint64_t period) {
        size_t n_user_frames = st->n_frames - st->n_kernel;
        size_t nr = st->n_frames + (st->n_kernel > 0) + (n_user_frames > 0);
        uint64_t chain[MAX_CHAIN];
        size_t c = 0;

        if (st->n_frames == 0 || nr > MAX_CHAIN)
                return 1;
        /* The chain, leaf first: kernel frames, then user ones. */
        if (st->n_kernel > 0) {
                chain[c++] = (uint64_t) PERF_CONTEXT_KERNEL;
                for (size_t j = st->n_frames; j-- > n_user_frames;)
                        chain[c++] = st->addrs[j];
        }
        if (n_user_frames > 0) {
                chain[c++] = (uint64_t) PERF_CONTEXT_USER;
                for (size_t j = n_user_frames; j-- > 0;) {
                        uint32_t m = st->modules ? st->modules[j] : UINT32_MAX;

                        chain[c++] = m != UINT32_MAX && m < r->n_modules && base[m] ? base[m] + st->addrs[j]
                                                                                   : st->addrs[j];
                }
        }
        put_header(o, PERF_RECORD_SAMPLE, st->n_kernel > 0 ? PERF_RECORD_MISC_KERNEL : PERF_RECORD_MISC_USER,
                   sizeof(struct perf_event_header) + 48 + 8 * c);
        put_u64(o, chain[1]);   /* the leaf */
        put_u32(o, (uint32_t) st->pid);
        put_u32(o, (uint32_t) st->pid);
        put_u64(o, time);
        put_u32(o, st->cpu >= 0 ? (uint32_t) st->cpu : 0);
        put_u32(o, 0);
        put_u64(o, period);
        put_u64(o, c);
        put(o, chain, c * sizeof(uint64_t));
        return 0;
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

int export_perf_data(FILE *f, const export_input *in, uint64_t *ret_omitted) {
        const query_result *r = in->r;
        _cleanup_free_ uint64_t *base = calloc(MAX(r->n_modules, (size_t) 1), sizeof(uint64_t));
        _cleanup_free_ sample_ref *refs = calloc(MAX(r->n_stacks, (size_t) 1), sizeof(sample_ref));
        hashmap *seen = NULL;
        struct file_header h = { .magic = "PERFILE2", .size = sizeof(struct file_header),
                                 .attr_size = sizeof(struct file_attr) };
        struct file_attr fa = {};
        uint64_t period = in->period_ns ? in->period_ns : 1, omitted = 0, n_user = 0;
        size_t n_refs = 0;
        out o = { .f = f };
        int k = 0;

        if (!base || !refs)
                return -ENOMEM;
        if (hashmap_new(&seen) < 0)
                return -ENOMEM;

        /* User files: a range each. */
        for (size_t i = 0; i < r->n_modules; i++)
                if (!r->modules[i].kernel && is_file(r->modules[i].name))
                        base[i] = USER_BASE + USER_SPAN * n_user++;

        put(&o, &h, sizeof h);          /* written again at the end */

        fa.attr = (struct perf_event_attr) {
                .type = PERF_TYPE_SOFTWARE,
                .size = sizeof(struct perf_event_attr),
                .config = PERF_COUNT_SW_CPU_CLOCK,
                .sample_freq = in->period_ns ? 1000000000 / in->period_ns : 0,
                .sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
                               PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN,
                .freq = in->period_ns != 0,
                .mmap = 1,
                .comm = 1,
                .mmap2 = 1,
                .disabled = 1,
        };
        h.attrs = (struct file_section) { .offset = o.pos, .size = sizeof fa };
        put(&o, &fa, sizeof fa);

        h.data.offset = o.pos;
        /* The kernel, from its _text (perf relocates kallsyms by it), up
         * to the first module; then the modules, as perf record writes
         * them (perf names their functions from kallsyms only where a
         * module has a map). */
        _cleanup_free_ kmod *mods = calloc(1024, sizeof(kmod));
        size_t n_mods = mods ? read_modules(in->modules_file, mods, 1024) : 0;
        if (r->kernel_build_id) {
                const char *name = "[kernel.kallsyms]_text";
                size_t len = padded(name, 8);
                uint64_t end = UINT64_MAX;

                for (size_t i = 0; i < n_mods; i++)
                        if (mods[i].start > r->kernel_text)
                                end = MIN(end, mods[i].start);
                put_header(&o, PERF_RECORD_MMAP, PERF_RECORD_MISC_KERNEL, sizeof(struct perf_event_header) + 32 + len);
                put_u32(&o, UINT32_MAX);        /* pid -1: the kernel */
                put_u32(&o, 0);
                put_u64(&o, r->kernel_text);
                put_u64(&o, end - r->kernel_text);
                put_u64(&o, r->kernel_text);
                put_padded(&o, name, len);
        }
        for (size_t i = 0; i < n_mods; i++) {
                size_t len = padded(mods[i].name, 8);

                put_header(&o, PERF_RECORD_MMAP, PERF_RECORD_MISC_KERNEL, sizeof(struct perf_event_header) + 32 + len);
                put_u32(&o, UINT32_MAX);
                put_u32(&o, 0);
                put_u64(&o, mods[i].start);
                put_u64(&o, mods[i].size);
                put_u64(&o, 0);
                put_padded(&o, mods[i].name, len);
        }

        /* A COMM per process, its files' MMAP2s, before its samples. */
        for (size_t i = 0; i < r->n_stacks; i++) {
                const query_stack *st = &r->stacks[i];
                int64_t v;

                if (!st->addrs) {
                        omitted += st->samples;         /* "[other stacks]": no addresses */
                        continue;
                }
                refs[n_refs++] = (sample_ref) { .stack = (uint32_t) i, .slot = st->slot };
                if (hashmap_get_pair(seen, (uint64_t) st->pid, UINT64_MAX, &v) < 0) {
                        size_t len = padded(st->comm, 8);

                        k = hashmap_put_pair(seen, (uint64_t) st->pid, UINT64_MAX, 1);
                        if (k < 0)
                                break;
                        put_header(&o, PERF_RECORD_COMM, 0, sizeof(struct perf_event_header) + 8 + len);
                        put_u32(&o, (uint32_t) st->pid);
                        put_u32(&o, (uint32_t) st->pid);
                        put_padded(&o, st->comm, len);
                }
                for (size_t j = 0; st->modules && j < st->n_frames; j++) {
                        const query_module *m = &r->modules[st->modules[j]];
                        uint8_t bid[20];
                        size_t len, n_bid;

                        if (base[st->modules[j]] == 0 ||
                            hashmap_get_pair(seen, (uint64_t) st->pid, st->modules[j], &v) >= 0)
                                continue;
                        k = hashmap_put_pair(seen, (uint64_t) st->pid, st->modules[j], 1);
                        if (k < 0)
                                break;
                        n_bid = build_id_bytes(m->build_id, bid);
                        len = padded(m->name, 8);
                        put_header(&o, PERF_RECORD_MMAP2,
                                   PERF_RECORD_MISC_USER | (n_bid > 0 ? PERF_RECORD_MISC_MMAP_BUILD_ID : 0),
                                   sizeof(struct perf_event_header) + 64 + len);
                        put_u32(&o, (uint32_t) st->pid);
                        put_u32(&o, (uint32_t) st->pid);
                        put_u64(&o, base[st->modules[j]]);
                        put_u64(&o, USER_SPAN);
                        put_u64(&o, 0);
                        if (n_bid > 0) {
                                uint8_t sz[4] = { (uint8_t) n_bid };

                                put(&o, sz, sizeof sz);
                                put(&o, bid, sizeof bid);
                        } else {
                                uint8_t zero[24] = {};

                                put(&o, zero, sizeof zero);
                        }
                        put_u32(&o, PROT_READ | PROT_EXEC);
                        put_u32(&o, MAP_PRIVATE);
                        put_padded(&o, m->name, len);
                }
                if (k < 0)
                        break;
        }
        hashmap_free(seen);
        if (k < 0)
                return k;

        /* The samples in time order: slot by slot, each slot's samples
         * sorted by the times they get. */
        qsort(refs, n_refs, sizeof(sample_ref), ref_cmp);
        uint64_t slot_ns = r->timeline_slot_ns ? r->timeline_slot_ns : in->until_ns - in->since_ns;
        for (size_t i = 0; i < n_refs && k >= 0;) {
                size_t j = i, n_times = 0;
                timed *times;

                for (; j < n_refs && refs[j].slot == refs[i].slot; j++)
                        n_times += r->stacks[refs[j].stack].samples;
                times = calloc(MAX(n_times, (size_t) 1), sizeof(timed));
                if (!times)
                        return -ENOMEM;
                n_times = 0;
                for (size_t x = i; x < j; x++) {
                        const query_stack *st = &r->stacks[refs[x].stack];
                        uint64_t start = in->since_ns + (st->slot > 0 ? (uint64_t) st->slot * slot_ns : 0);

                        for (uint64_t s = 0; s < st->samples; s++)
                                times[n_times++] = (timed) {
                                        .time = start + (2 * s + 1) * slot_ns / (2 * st->samples),
                                        .stack = refs[x].stack,
                                };
                }
                qsort(times, n_times, sizeof(timed), timed_cmp);
                for (size_t x = 0; x < n_times; x++)
                        omitted += put_sample(&o, r, base, &r->stacks[times[x].stack], times[x].time, period);
                free(times);
                i = j;
        }
        h.data.size = o.pos - h.data.offset;

        /* HEADER_BUILD_ID: its section's place, then the events. */
        uint64_t index = o.pos;
        struct file_section fs = { .offset = index + sizeof(struct file_section) };
        put(&o, &fs, sizeof fs);
        for (size_t i = 0; i <= r->n_modules; i++) {
                const char *name, *hex;
                uint16_t misc;
                int32_t pid = -1;
                uint8_t bid[24] = {};
                size_t len, n_bid;

                if (i == r->n_modules) {
                        name = "[kernel.kallsyms]";
                        hex = r->kernel_build_id;
                        misc = PERF_RECORD_MISC_KERNEL;
                } else {
                        name = r->modules[i].name;
                        hex = r->modules[i].build_id;
                        misc = PERF_RECORD_MISC_USER;
                        if (base[i] == 0)
                                continue;
                }
                n_bid = build_id_bytes(hex, bid);
                if (n_bid == 0)
                        continue;
                bid[20] = (uint8_t) n_bid;
                len = padded(name, NAME_ALIGN);
                put_header(&o, PERF_RECORD_HEADER_BUILD_ID, misc | PERF_RECORD_MISC_BUILD_ID_SIZE,
                           sizeof(struct perf_event_header) + 4 + 24 + len);
                put(&o, &pid, sizeof pid);
                put(&o, bid, sizeof bid);
                put_padded(&o, name, len);
        }
        fs.size = o.pos - fs.offset;
        h.features[0] = UINT64_C(1) << HEADER_BUILD_ID;

        if (fflush(f) != 0 || fseek(f, (long) index, SEEK_SET) != 0)
                return -errno;
        fwrite(&fs, 1, sizeof fs, f);
        if (fseek(f, 0, SEEK_SET) != 0)
                return -errno;
        fwrite(&h, 1, sizeof h, f);
        if (fflush(f) != 0 || ferror(f) || fseek(f, 0, SEEK_END) != 0)
                return -EIO;
        if (ret_omitted)
                *ret_omitted = omitted;
        return 0;
}
