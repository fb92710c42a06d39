/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* What the ingest path knows about user space: thread names (comm) and the
 * memory mappings of each process, learnt from COMM/FORK/EXIT/MMAP2
 * side-band records and, for processes that existed before sampling
 * started, read lazily from ROOT/proc/PID/{comm,maps}. Used to label user
 * frames with mapping path, build-id and file offset; never with kernel
 * symbols. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel/notes.h"

typedef struct tasks tasks;

typedef struct mapping {
        uint64_t start, end;    /* [start, end) */
        uint64_t pgoff;         /* file offset of start */
        const char *path;       /* owned by the table */
        /* The file (path and build-id) as a number, never given to
         * another file by this table: a key for caches of what the file's
         * offsets resolve to. */
        uint64_t file_id;
        const char *build_id;   /* hex, "" if unknown; owned by the table */
} mapping;

/* Memory bounds. At a cap, the entry that exited longest ago (or a
 * negative-cache entry for a pid whose /proc read failed) is dropped to
 * make room; with none to drop, new entries are refused with -ENOSPC. A
 * mapping that would exceed a mappings cap is refused with -ENOSPC. */
#define TASKS_MAX_PROCESSES_DEFAULT 65536
#define TASKS_MAX_THREADS_DEFAULT 262144
#define TASKS_MAX_MAPPINGS_PER_PROCESS_DEFAULT 65536  /* vm.max_map_count is 65530 */
#define TASKS_MAX_MAPPINGS_TOTAL_DEFAULT (4u * 1024u * 1024u)

/* root: where proc/ is read lazily for unknown pids (NULL disables lazy reads). */
int tasks_new(const char *root, tasks **ret);
tasks *tasks_free(tasks *t);
/* No lazy reads from now on, as with a NULL root: for records of another
 * machine's (or another time's) tasks, whose ids live ones may have. */
void tasks_stop_lookups(tasks *t);

/* Overrides the caps above; 0 keeps a cap as it is. */
void tasks_set_limits(tasks *t, size_t max_processes, size_t max_threads,
                      size_t max_mappings_per_process, size_t max_mappings_total);

/* Side-band events, in time order per CPU. */
int tasks_comm(tasks *t, uint32_t pid, uint32_t tid, const char *comm, bool exec);
int tasks_fork(tasks *t, uint32_t ppid, uint32_t ptid, uint32_t pid, uint32_t tid);
/* Marks the thread (and the process, if tid == pid) exited at time_ns. It is
 * kept for samples drained late and freed by tasks_gc(). */
int tasks_exit(tasks *t, uint32_t pid, uint32_t tid, uint64_t time_ns);
/* Like mmap(MAP_FIXED): replaces the parts of existing mappings it overlaps
 * (trimming or splitting them). path NULL or "" is anonymous memory, stored
 * as "//anon" (perf's name for it). -EINVAL for len 0, a range that wraps,
 * or a build-id that is not lowercase hex of at most 40 digits. */
int tasks_mmap(tasks *t, uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff,
               const char *path, const char *build_id_hex /* NULL if none */);

/* comm of a thread; reads ROOT/proc/PID/task/TID/comm once if unknown.
 * NULL if it cannot be known. Valid until the next tasks_* call. */
const char *tasks_get_comm(tasks *t, uint32_t pid, uint32_t tid);

/* The mapping of pid covering addr; reads ROOT/proc/PID/maps once if the
 * pid is unknown (keeping only executable mappings, as perf's MMAP2 records
 * do). 0, or -ENOENT. *ret valid until the next tasks_* call. */
int tasks_find_mapping(tasks *t, uint32_t pid, uint64_t addr, mapping *ret);

/* Parses one line of /proc/PID/maps, NUL-terminated without its '\n'
 * (a line containing '\n' is -EINVAL). 0 if it is a file-backed or named
 * mapping (path set, possibly "[vdso]" etc.), -ENOENT for anonymous
 * mappings without a name (the other outputs set, path ""), -EINVAL if
 * malformed. *ret_path points into line. */
int proc_maps_parse_line(const char *line, uint64_t *ret_start, uint64_t *ret_end,
                         uint64_t *ret_pgoff, bool *ret_exec, const char **ret_path);

/* Frees threads and processes that exited before before_ns. */
void tasks_gc(tasks *t, uint64_t before_ns);

size_t tasks_n_threads(const tasks *t);
size_t tasks_n_processes(const tasks *t);
/* Bytes allocated for the tables, processes, threads, mappings and files. */
size_t tasks_memory_bytes(const tasks *t);

/* Number of mappings tracked for pid (no /proc read), for tests and status. */
size_t tasks_n_mappings(const tasks *t, uint32_t pid);
