/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* JIT symbol maps, /tmp/perf-PID.map: the text file a JIT compiler writes
 * for perf (node --perf-basic-prof, Java agents, LuaJIT, ...), one line
 * per compiled function, "START SIZE NAME" with START and SIZE in hex,
 * appended as code is compiled. The ingest path names a user frame in
 * anonymous executable memory from the map of its process, read while the
 * process lives: the name is stored with the frame, since the map (and
 * the process) may be gone when a query comes. This runs on the draining
 * loop: a re-read takes at most 1 MiB, and all of them together at most
 * 4 MiB a second.
 *
 * A map is read from /tmp/perf-NSPID.map inside ROOT/proc/PID/root (the
 * process's own /tmp and its pid in its own pid namespace: a container's
 * or a service's private /tmp), else, for a process of the daemon's pid
 * namespace, from ROOT/tmp/perf-PID.map; never through a symbolic link
 * anywhere in the path, and only if the file is a regular file with one
 * name owned by the process's real uid (a map planted by another user, or
 * a root file mounted over the path, is not read). It is read incrementally: a lookup that
 * finds nothing reads what was appended since, at most once per
 * JITMAPS_RECHECK_NS per process (the symbolizer caches only the frames
 * a map names, by jitmaps_version(), so a frame not named yet is looked up
 * again at its next sample). Later lines win over earlier ones that
 * overlap them (code moved or recompiled). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JITMAPS_RECHECK_NS (100ULL * 1000 * 1000)
#define JITMAPS_MAX_PROCESSES 256               /* least recently used dropped */
#define JITMAPS_MAX_ENTRIES (1024u * 1024u)     /* per process; the rest is ignored */
#define JITMAPS_MAX_NAME 1024                   /* longer names are cut */
#define JITMAPS_MAX_NAME_BYTES (64u * 1024u * 1024u)    /* all processes' names */

typedef struct jitmaps jitmaps;

typedef struct jitmaps_stats {
        uint64_t reads;                 /* (re)reads of a map */
        uint64_t entries;               /* lines taken, all processes */
        uint64_t bad_lines;             /* lines that were not START SIZE NAME */
        uint64_t refused;               /* maps not read: a link, not a regular file, another owner */
        uint64_t hits, misses;          /* lookups */
} jitmaps_stats;

/* root: where proc/ and tmp/ are read ("/" or a test's tree). */
int jitmaps_new(const char *root, jitmaps **ret);
jitmaps *jitmaps_free(jitmaps *j);
/* No map is read from now on (lookups find nothing): see
 * tasks_stop_lookups(). */
void jitmaps_stop_lookups(jitmaps *j);

/* The name of the JIT function covering addr in pid, and its start in
 * *ret_start; NULL if none (no map, or no line covers addr). now_ns: a
 * monotonic time, for the re-read interval. Valid until the next call. */
const char *jitmaps_lookup(jitmaps *j, uint32_t pid, uint64_t addr, uint64_t now_ns, uint64_t *ret_start);

/* The version of pid's map as last read: it changes at every (re)read,
 * and no two processes' maps, nor a process's map before and after
 * jitmaps_forget(), ever have the same. false if pid's map is not held
 * (never looked up, forgotten, or evicted). */
bool jitmaps_version(const jitmaps *j, uint32_t pid, uint64_t *ret);

/* pid exec'd or exited: its map is another program's from now on. */
void jitmaps_forget(jitmaps *j, uint32_t pid);

/* Parses one line (without its '\n'): 0, or -EINVAL. *ret_name points
 * into line, *ret_name_len its length (cut to JITMAPS_MAX_NAME). */
int jitmaps_parse_line(const char *line, size_t len, uint64_t *ret_start, uint64_t *ret_size,
                       const char **ret_name, size_t *ret_name_len);

const jitmaps_stats *jitmaps_get_stats(const jitmaps *j);
/* Bytes the maps take (entries, names, the table of processes). */
size_t jitmaps_memory_bytes(const jitmaps *j);
