/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Decoding of perf ring-buffer records (include/uapi/linux/perf_event.h).
 * Every length is checked against the record's own header.size and the
 * layout implied by the event's sample_type; a record that does not fit is
 * rejected with -EBADMSG, never read past. */

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The sample_type every perfsnapd event uses; the decoder relies on it.
 * Kernels that have it (5.7+) add PERF_SAMPLE_CGROUP (perf_events_open()
 * says which one the events have). */
#define PERFSNAP_SAMPLE_TYPE \
        (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | \
         PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN)

/* Fields appended to non-sample records with sample_id_all = 1, for
 * PERFSNAP_SAMPLE_TYPE: pid, tid, time, cpu(+res), identifier. */
typedef struct perf_sample_id {
        uint32_t pid, tid;
        uint64_t time;
        uint32_t cpu;
        uint64_t id;
} perf_sample_id;

typedef struct perf_sample {
        uint64_t id;
        uint64_t ip;
        uint32_t pid, tid;
        uint64_t time;
        uint32_t cpu;
        uint64_t period;
        uint64_t nr;            /* callchain entries, context markers included */
        /* nr entries, pointing into the record. 8-byte aligned whenever the
         * record is (ring-buffer records and ringbuf's scratch copy are);
         * perf_sample_ip() reads an entry from any buffer. */
        const uint64_t *ips;
        bool user;              /* header.misc says PERF_RECORD_MISC_USER */
        uint64_t cgroup;        /* PERF_SAMPLE_CGROUP: the task's cgroup v2 id (its kernfs node id); else 0 */
} perf_sample;

typedef struct perf_cgroup {     /* PERF_RECORD_CGROUP (attr.cgroup): a cgroup made */
        uint64_t id;
        const char *path;       /* from the hierarchy's root; NUL-terminated within the record, checked */
} perf_cgroup;

typedef struct perf_comm {
        uint32_t pid, tid;
        const char *comm;       /* NUL-terminated within the record, checked */
        bool exec;              /* PERF_RECORD_MISC_COMM_EXEC */
} perf_comm;

typedef struct perf_task {       /* PERF_RECORD_FORK / PERF_RECORD_EXIT */
        uint32_t pid, ppid, tid, ptid;
        uint64_t time;
} perf_task;

typedef struct perf_mmap2 {
        uint32_t pid, tid;
        uint64_t addr, len, pgoff;
        uint32_t prot, flags;
        const char *filename;   /* NUL-terminated within the record, checked */
        /* Without PERF_RECORD_MISC_MMAP_BUILD_ID: the file's identity. */
        uint32_t maj, min;
        uint64_t ino, ino_generation;
        uint8_t build_id[20];
        uint8_t build_id_size;  /* 0 unless PERF_RECORD_MISC_MMAP_BUILD_ID */
} perf_mmap2;

typedef struct perf_lost {
        uint64_t id;
        uint64_t lost;
} perf_lost;

typedef struct perf_ksymbol {
        uint64_t addr;
        uint32_t len;
        uint16_t ksym_type;     /* PERF_RECORD_KSYMBOL_TYPE_* */
        uint16_t flags;         /* PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER */
        const char *name;
} perf_ksymbol;

typedef struct perf_bpf_event {
        uint16_t type;          /* PERF_BPF_EVENT_* */
        uint16_t flags;
        uint32_t id;
        uint8_t tag[8];
} perf_bpf_event;

typedef struct perf_record {
        uint32_t type;          /* PERF_RECORD_* */
        uint16_t misc;
        uint16_t size;
        perf_sample_id sid;     /* for non-sample records (sample_id_all); for samples a copy of the sample's fields */
        union {
                perf_sample sample;
                perf_comm comm;
                perf_task task;
                perf_mmap2 mmap2;
                perf_lost lost;
                perf_ksymbol ksymbol;
                perf_bpf_event bpf;
                perf_cgroup cgroup;
        };
} perf_record;

/* Decodes one record (data starts with struct perf_event_header; size is
 * the number of bytes available, at least header.size). sample_type must
 * be PERFSNAP_SAMPLE_TYPE-compatible (the bits in it are what is parsed;
 * bits the decoder cannot size, e.g. PERF_SAMPLE_READ, give -EOPNOTSUPP).
 * Non-sample records are expected to carry the sample_id trailer
 * (attr.sample_id_all = 1, as perfsnapd always sets).
 * Unknown record types return 0 with only type/misc/size set.
 * Pointers in *ret point into data. Any alignment of data is accepted.
 * Returns -EBADMSG for a record that is short, oversized or inconsistent. */
int perf_record_decode(const void *data, size_t size, uint64_t sample_type, perf_record *ret);

/* Size of the sample_id trailer that sample_id_all appends for sample_type. */
size_t perf_sample_id_size(uint64_t sample_type);

/* Entry i (< s->nr) of a decoded callchain, safe for unaligned records. */
static inline uint64_t perf_sample_ip(const perf_sample *s, uint64_t i) {
        uint64_t v;
        __builtin_memcpy(&v, (const uint8_t *) s->ips + i * sizeof(uint64_t), sizeof(v));
        return v;
}

/* Only the timestamp of a record, without decoding the rest: for merging
 * the CPUs' records by time before they are decoded. Where
 * perf_record_decode() succeeds, this gives the same time (the sample's,
 * or the sample_id trailer's). -ENODATA for types without one we read,
 * -EBADMSG if the header or the time's position is out of bounds. */
int perf_record_time(const void *data, size_t size, uint64_t sample_type, uint64_t *ret_time);

/* Marker values in callchains (PERF_CONTEXT_*): true if ip is one. */
static inline bool perf_callchain_is_context(uint64_t ip) {
        return ip >= (uint64_t) PERF_CONTEXT_MAX;
}
