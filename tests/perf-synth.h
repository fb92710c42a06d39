/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Synthetic perf ring buffers for tests and benchmarks: an in-memory
 * buffer laid out as the kernel's mmap of a perf event (a metadata page,
 * then the data area), and writers of the records perfsnapd opens its
 * events for (PERFSNAP_SAMPLE_TYPE with sample_id_all), so the daemon's
 * own ingest path (ingest_drain()) reads them as it reads the kernel's. */

#include <errno.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/ringbuf.h"

#define SYNTH_PAGE 4096

typedef struct synth_rb {
        uint64_t *mem;
        size_t data_size;       /* a power of two */
        ringbuf rb;
} synth_rb;

static inline struct perf_event_mmap_page *synth_meta(synth_rb *c) {
        return (struct perf_event_mmap_page *) (void *) c->mem;
}

static inline int synth_rb_init(synth_rb *c, size_t data_size) {
        c->data_size = data_size;
        c->mem = aligned_alloc(SYNTH_PAGE, SYNTH_PAGE + data_size);
        if (!c->mem)
                return -ENOMEM;
        memset(c->mem, 0, SYNTH_PAGE);
        synth_meta(c)->data_offset = SYNTH_PAGE;
        synth_meta(c)->data_size = data_size;
        return ringbuf_init(&c->rb, c->mem, SYNTH_PAGE + data_size, SYNTH_PAGE);
}

static inline void synth_rb_done(synth_rb *c) {
        ringbuf_done(&c->rb);
        free(c->mem);
        c->mem = NULL;
}

/* Appends one record; -ENOSPC when the reader has not made room. */
static inline int synth_put(synth_rb *c, const void *rec, size_t size) {
        struct perf_event_mmap_page *m = synth_meta(c);
        uint8_t *data = (uint8_t *) c->mem + SYNTH_PAGE;
        uint64_t head = m->data_head;

        if (head + size - m->data_tail > c->data_size)
                return -ENOSPC;
        for (size_t i = 0; i < size; i++)
                data[(head + i) & (c->data_size - 1)] = ((const uint8_t *) rec)[i];
        m->data_head = head + size;
        return 0;
}

/* sample_id_all trailer: pid, tid, time, cpu, res, identifier. */
static inline size_t synth_sample_id(uint64_t *p, uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu) {
        p[0] = (uint64_t) pid | (uint64_t) tid << 32;
        p[1] = time;
        p[2] = cpu;
        p[3] = 1;
        return 4;
}

/* chain: nr entries, context markers included (leaf first). cgroup: the
 * PERF_SAMPLE_CGROUP field, for events with it; NULL for those without. */
static inline int synth_sample_cg(synth_rb *c, uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu,
                                  uint64_t period, const uint64_t *chain, size_t nr, bool user, const uint64_t *cgroup) {
        uint64_t rec[9 + 256];
        struct perf_event_header *h = (void *) rec;
        size_t n = 1;

        if (nr > 256)
                return -E2BIG;
        rec[n++] = 1;                   /* identifier */
        rec[n++] = nr > 1 ? chain[1] : nr == 1 ? chain[0] : 0;     /* ip */
        rec[n++] = (uint64_t) pid | (uint64_t) tid << 32;
        rec[n++] = time;
        rec[n++] = cpu;
        rec[n++] = period;
        rec[n++] = nr;
        memcpy(rec + n, chain, nr * sizeof(uint64_t));
        n += nr;
        if (cgroup)
                rec[n++] = *cgroup;
        *h = (struct perf_event_header) {
                .type = PERF_RECORD_SAMPLE,
                .misc = user ? PERF_RECORD_MISC_USER : PERF_RECORD_MISC_KERNEL,
                .size = (uint16_t) (n * 8),
        };
        return synth_put(c, rec, n * 8);
}

static inline int synth_sample(synth_rb *c, uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu, uint64_t period,
                               const uint64_t *chain, size_t nr, bool user) {
        return synth_sample_cg(c, pid, tid, time, cpu, period, chain, nr, user, NULL);
}

/* PERF_RECORD_CGROUP: a cgroup made, its id and path. */
static inline int synth_cgroup(synth_rb *c, uint64_t id, const char *path, uint64_t time, uint32_t cpu) {
        uint64_t rec[8 + 64] = {};
        struct perf_event_header *h = (void *) rec;
        size_t n = 1, len = strlen(path) + 1;

        if (len > 64 * 8)
                return -E2BIG;
        rec[n++] = id;
        memcpy(rec + n, path, len);
        n += (len + 7) / 8;
        n += synth_sample_id(rec + n, 0, 0, time, cpu);
        *h = (struct perf_event_header) { .type = PERF_RECORD_CGROUP, .size = (uint16_t) (n * 8) };
        return synth_put(c, rec, n * 8);
}

/* A thread's comm (tid: the thread's id; a process's main thread has its pid). */
static inline int synth_comm_tid(synth_rb *c, uint32_t pid, uint32_t tid, const char *comm, uint64_t time,
                                 uint32_t cpu, bool exec) {
        uint64_t rec[16] = {};
        struct perf_event_header *h = (void *) rec;
        size_t n = 1;

        rec[n++] = (uint64_t) pid | (uint64_t) tid << 32;
        snprintf((char *) (rec + n), 16, "%s", comm);
        n += 2;
        n += synth_sample_id(rec + n, pid, tid, time, cpu);
        *h = (struct perf_event_header) { .type = PERF_RECORD_COMM, .misc = exec ? PERF_RECORD_MISC_COMM_EXEC : 0,
                                          .size = (uint16_t) (n * 8) };
        return synth_put(c, rec, n * 8);
}

static inline int synth_comm(synth_rb *c, uint32_t pid, const char *comm, uint64_t time, uint32_t cpu, bool exec) {
        return synth_comm_tid(c, pid, pid, comm, time, cpu, exec);
}

/* PERF_RECORD_KSYMBOL: a dynamic symbol registered (or, with flags
 * PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER, unregistered). */
static inline int synth_ksymbol(synth_rb *c, uint64_t addr, uint32_t len, uint16_t type, uint16_t flags,
                                const char *name, uint64_t time, uint32_t cpu) {
        uint64_t rec[8 + 64] = {};
        struct perf_event_header *h = (void *) rec;
        size_t n = 1, nl = strlen(name) + 1;

        if (nl > 64 * 8)
                return -E2BIG;
        rec[n++] = addr;
        rec[n++] = (uint64_t) len | (uint64_t) type << 32 | (uint64_t) flags << 48;
        memcpy(rec + n, name, nl);
        n += (nl + 7) / 8;
        n += synth_sample_id(rec + n, 0, 0, time, cpu);
        *h = (struct perf_event_header) { .type = PERF_RECORD_KSYMBOL, .size = (uint16_t) (n * 8) };
        return synth_put(c, rec, n * 8);
}

/* type: PERF_RECORD_FORK or PERF_RECORD_EXIT, of thread tid of process
 * pid, whose parent is thread ptid of process ppid. */
static inline int synth_task_tid(synth_rb *c, uint32_t type, uint32_t pid, uint32_t tid, uint32_t ppid,
                                 uint32_t ptid, uint64_t time, uint32_t cpu) {
        uint64_t rec[16] = {};
        struct perf_event_header *h = (void *) rec;
        size_t n = 1;

        rec[n++] = (uint64_t) pid | (uint64_t) ppid << 32;
        rec[n++] = (uint64_t) tid | (uint64_t) ptid << 32;
        rec[n++] = time;
        n += synth_sample_id(rec + n, pid, tid, time, cpu);
        *h = (struct perf_event_header) { .type = (uint16_t) type, .size = (uint16_t) (n * 8) };
        return synth_put(c, rec, n * 8);
}

/* type: PERF_RECORD_FORK or PERF_RECORD_EXIT, of a single-threaded process. */
static inline int synth_task(synth_rb *c, uint32_t type, uint32_t pid, uint32_t ppid, uint64_t time, uint32_t cpu) {
        return synth_task_tid(c, type, pid, pid, ppid, ppid, time, cpu);
}

/* An executable private file mapping with a 20-byte build-id; with
 * build_id NULL, without one (device and inode 0), as the kernel writes
 * when it cannot read the file's. */
static inline int synth_mmap2(synth_rb *c, uint32_t pid, uint64_t addr, uint64_t len, uint64_t pgoff,
                              const char *filename, const uint8_t build_id[20], uint64_t time, uint32_t cpu) {
        uint64_t rec[48] = {};
        struct perf_event_header *h = (void *) rec;
        size_t n = 1, fl = strlen(filename) + 1;
        uint8_t *b;

        if (fl > 256)
                return -E2BIG;
        rec[n++] = (uint64_t) pid | (uint64_t) pid << 32;
        rec[n++] = addr;
        rec[n++] = len;
        rec[n++] = pgoff;
        b = (uint8_t *) (rec + n);      /* build_id_size, reserved, build_id[20]; or maj, min, ino, ino_generation */
        if (build_id) {
                b[0] = 20;
                memcpy(b + 4, build_id, 20);
        }
        n += 3;
        rec[n++] = (uint64_t) 5 | (uint64_t) 2 << 32;   /* prot r-x, flags MAP_PRIVATE */
        memcpy(rec + n, filename, fl);
        n += (fl + 7) / 8;
        n += synth_sample_id(rec + n, pid, pid, time, cpu);
        *h = (struct perf_event_header) { .type = PERF_RECORD_MMAP2, .misc = build_id ? PERF_RECORD_MISC_MMAP_BUILD_ID : 0,
                                          .size = (uint16_t) (n * 8) };
        return synth_put(c, rec, n * 8);
}
