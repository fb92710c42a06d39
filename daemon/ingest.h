/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The ingest path: raw perf records from every CPU's ring buffer are
 * copied out, merged by time, decoded, handed to the task table (COMM,
 * FORK, EXIT, MMAP2) or the symbolizer (samples), and written to the
 * store with store_insert_sample(), the one sample write, in one
 * transaction per drain pass. */

#include <stdbool.h>
#include <stdint.h>

#include "kernel/kallsyms.h"
#include "kernel/layout.h"
#include "kernel/notes.h"
#include "perf/perf-record.h"
#include "perf/ringbuf.h"
#include "perf/tasks.h"
#include "store/store.h"
#include "symbolizer.h"

typedef struct ingest ingest;

typedef struct ingest_stats {
        uint64_t samples;               /* stored since start */
        uint64_t records;               /* all records decoded */
        uint64_t deferred;              /* records kept for the next drain (at or after its horizon) */
        uint64_t rescued;               /* records taken out of a ring buffer past a quarter full during a drain */
        uint64_t bad_records;           /* failed to decode, skipped */
        uint64_t lost;                  /* PERF_RECORD_LOST totals, all CPUs */
        uint64_t drains;
        uint64_t commits;
        uint64_t cpu_ns;                /* thread CPU time spent in ingest_drain() */
        uint64_t cgroups_unknown;       /* samples whose cgroup id no walk of the hierarchy found */
        uint64_t offcpu_waits, offcpu_ns;       /* off-CPU waits stored, and their time */
} ingest_stats;

typedef struct kernel_info {
        char build_id[BUILD_ID_HEX_MAX];        /* "" if unknown */
        uint64_t text_addr;
        char release[128];
        char boot_uuid[64];
} kernel_info;

/* Takes ownership of nothing; store must outlive the ingest object. */
int ingest_new(store *st, const char *root, ingest **ret);
ingest *ingest_free(ingest *in);
/* Threads and processes the records have not named are not looked up in
 * ROOT/proc (comm, maps, JIT maps) from now on: for records replayed from
 * a capture (bench-history --replay), whose ids the machine's live tasks
 * may have. The kernel's files under ROOT are still read. */
void ingest_stop_task_lookups(ingest *in);

/* The sample_type of the events the records come from (default
 * PERFSNAP_SAMPLE_TYPE). With PERF_SAMPLE_CGROUP, samples are attributed
 * to their cgroups through a map of the cgroup v2 hierarchy (found in
 * ROOT/proc/self/mountinfo); without, through /proc/PID/cgroup. */
void ingest_set_sample_type(ingest *in, uint64_t sample_type);
/* Where cgroups come from: "perf" (PERF_SAMPLE_CGROUP), "proc"
 * (/proc/PID/cgroup: kernels before 5.7) or "none" (no cgroup v2
 * hierarchy); and how many cgroups (or processes, for "proc") are known. */
const char *ingest_cgroup_source(const ingest *in);
size_t ingest_cgroups_known(const ingest *in);

/* Loads kallsyms, notes, boot id and registers the boot in the store. */
int ingest_load_kernel(ingest *in);
const kernel_info *ingest_kernel(const ingest *in);
int64_t ingest_boot_id(const ingest *in);

/* The kcore snapshot samples are linked to: id for samples taken at or
 * after since_ns, prev_id before; 0 for "not known yet" (linked later
 * with store_link_snapshot()). */
void ingest_set_snapshot(ingest *in, int64_t prev_id, int64_t id, uint64_t since_ns);
size_t ingest_n_symbols(const ingest *in);

/* The kernel code layout samples are resolved against; the module tracker
 * changes it, ingest notices by its generation. */
layout *ingest_layout(ingest *in);

/* The symbolizer's miss handler (symbolizer.h), run at most once per
 * drain pass. */
typedef symbolizer_miss_handler ingest_miss_handler;
void ingest_set_miss_handler(ingest *in, ingest_miss_handler cb, void *userdata);
/* The symbolizer's user file handler (symbolizer.h). */
void ingest_set_user_file_handler(ingest *in, symbolizer_user_file_handler cb, void *userdata);

/* Called for PERF_RECORD_KSYMBOL, PERF_RECORD_BPF_EVENT and
 * PERF_RECORD_LOST, in time order with the samples, inside the drain's
 * batch: a handler changing the layout changes it for the samples after
 * the record. */
typedef void (*ingest_record_handler)(const perf_record *rec, int64_t mono_to_wall_ns, void *userdata);
void ingest_set_record_handler(ingest *in, ingest_record_handler cb, void *userdata);

/* Off-CPU time (offcpu.h): called by every ingest_drain() after the
 * drain's records, in its batch, to store the sums waiting in the kernel
 * with ingest_offcpu(); last: the drain with INGEST_HORIZON_ALL. */
typedef int (*ingest_offcpu_source)(ingest *in, bool last, void *userdata);
void ingest_set_offcpu_source(ingest *in, ingest_offcpu_source cb, void *userdata);
/* Stores one sum of off-CPU waits: ips is a perf callchain, which this
 * may change; the frames down to __schedule and schedule are left out,
 * so that the stack's leaf is the function that waits (do_nanosleep,
 * pipe_read, io_schedule...).
 * Every sum of a drain is stored at one time: the drain's (its horizon,
 * after its last record), so that they go into one bucket. Only from an
 * ingest_offcpu_source. */
int ingest_offcpu(ingest *in, uint32_t pid, uint32_t tid, uint32_t cpu, uint64_t cgroup, uint64_t *ips, size_t nr,
                  uint64_t waits, uint64_t wait_ns);

/* True while ingest_drain() runs (its batch must not be committed then). */
bool ingest_draining(const ingest *in);

/* Drains every ring buffer, merges the records by time and stores them in
 * the open batch (one is begun if needed); ingest_commit() makes them
 * durable and visible to readers. A failing drain drops the batch.
 * mono_to_wall_ns converts the events' CLOCK_MONOTONIC time to wall clock.
 *
 * Records stamped at or after horizon_ns are kept for the next drain:
 * the buffers are read one after the other, so a record another CPU
 * writes meanwhile (say, a BPF program's registration) may be older than
 * records read already. With horizon_ns a time taken before the first
 * buffer is read, every record before it is in this drain, and the
 * records are processed in time order across drains. INGEST_HORIZON_ALL
 * processes everything (the last drain). Dynamic symbols unregistered
 * before the horizon are forgotten afterwards: no sample can need them. */
#define INGEST_HORIZON_ALL UINT64_MAX
int ingest_drain(ingest *in, ringbuf *const *bufs, const uint32_t *cpus, size_t n, int64_t mono_to_wall_ns,
                 uint64_t horizon_ns);

/* Commits the open batch, if any. */
int ingest_commit(ingest *in);
/* Writes the open bucket into the batch (store_write_open_bucket()): what
 * was drained is then all readable at the next commit, not only the
 * seconds before the drain's horizon. */
int ingest_write_open_bucket(ingest *in);

/* Between drains, and after a drain's records are processed (a commit,
 * blocks written, retention, the cap: sqlite's progress handler on the
 * event loop's thread calls it): empties the ring buffers past a quarter
 * full into the records the next drain takes, as a drain does every 32
 * records. Does nothing while a drain processes its records. */
void ingest_rescue(ingest *in, ringbuf *const *bufs, const uint32_t *cpus, size_t n);
/* ingest_commit() does not try while batches held for a full disk wait
 * for their next try (1 .. 16 s apart; store_held()); this one does. */
int ingest_commit_now(ingest *in);

/* Processes one decoded record (exposed for tests). */
int ingest_record(ingest *in, const perf_record *rec, int64_t mono_to_wall_ns);

const ingest_stats *ingest_get_stats(const ingest *in);
/* The symbolizer's counters (frames by kind, stacks found in its cache). */
const symbolizer_stats *ingest_symbolizer_stats(const ingest *in);
/* Bytes allocated for the merge buffers (their high-water mark). */
size_t ingest_buffer_bytes(const ingest *in);
/* Bytes held by the resolution caches (frames, stacks, comms)
 * and the store's interning caches (strings, frames, stacks), which grow
 * with the distinct stacks seen, up to their bounds. */
size_t ingest_cache_bytes(const ingest *in);
/* Bytes held by the table of processes, threads and their mappings, which
 * grows with the tasks alive on the machine. */
size_t ingest_tasks_bytes(const ingest *in);
/* Lost records per CPU since start (n entries, indexed by cpu). */
const uint64_t *ingest_lost_per_cpu(const ingest *in, size_t *ret_n);
