/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Snapshots of the kernel's code in perf's build-id cache layout:
 *
 *   CACHE/[kernel.kcore]/<kernel build-id>/<YYYYmmddHHMMSShh>/{kcore,kallsyms,modules}
 *
 * the layout `perf buildid-cache --kcore` writes and perf reads
 * (`perf --buildid-dir CACHE ...`, `perf report --kallsyms=DIR/kallsyms`). The name is the local time the snapshot was
 * made, to the hundredth of a second; files are mode 0400. A snapshot is
 * built in CACHE/.tmp/ and renamed into place, so a partial one is never
 * visible; CACHE/.tmp/ is not a build-id cache path, so perf never looks
 * there.
 *
 * These functions do file I/O only (no threads, no logging except debug):
 * the daemon runs them on a worker thread, tests call them directly. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel/notes.h"      /* BUILD_ID_HEX_MAX */

#define SNAPSHOT_KCORE_DIR "[kernel.kcore]"
#define SNAPSHOT_TMP_DIR ".tmp"
#define SNAPSHOT_NAME_LEN 16    /* YYYYmmddHHMMSShh */
#define SNAPSHOT_MAX_ATTEMPTS_DEFAULT 3

typedef struct snapshot_info {
        char build_id[BUILD_ID_HEX_MAX];
        char name[SNAPSHOT_NAME_LEN + 1];
        char *path;                     /* CACHE/[kernel.kcore]/<build-id>/<name> */
        uint64_t time_ns;               /* the wall-clock time the name says */
        uint64_t text_addr;             /* _text (else _stext) in its kallsyms; 0 if neither */
        size_t n_modules;               /* lines of its modules file */
        uint64_t size_bytes;            /* sum of its files' sizes */
        bool has_kcore;
} snapshot_info;

void snapshot_info_done(snapshot_info *s);
void snapshot_infos_free(snapshot_info *v, size_t n);

/* The cache root as a directory descriptor: made 0700 if missing (with
 * create), opened without following a link, refused (-EPERM, said in a
 * debug line) unless root's or the caller's and writable by nobody else.
 * Everything below it is reached from it one name at a time, with
 * O_NOFOLLOW. */
int snapshot_cache_open(const char *cache_dir, bool create);

/* The directory name for a wall-clock time, in local time. -EINVAL if the
 * time cannot be represented. */
int snapshot_name_from_time(uint64_t wall_ns, char ret[static SNAPSHOT_NAME_LEN + 1]);
/* The inverse; -EINVAL unless name is exactly 16 digits of a valid time. */
int snapshot_time_from_name(const char *name, uint64_t *ret_ns);

/* Every snapshot under CACHE/[kernel.kcore]/, oldest first (by name, then
 * build-id). Entries that are not snapshot directories are ignored. A
 * missing cache is an empty list. */
int snapshot_list(const char *cache_dir, snapshot_info **ret, size_t *ret_n);

typedef struct snapshot_take_result {
        snapshot_info info;
        bool reused;                    /* an existing snapshot matched: nothing was written */
        unsigned attempts;              /* copies made (0 when reused at once) */
        int kcore_error;                /* 0, or why the snapshot has no kcore (positive errno) */
        uint64_t kcore_bytes;           /* bytes copied from kcore */
        size_t kcore_segments;          /* PT_LOAD segments of the copy */
} snapshot_take_result;

/* Takes a snapshot of ROOT/proc/{kallsyms,modules,kcore} for the kernel
 * whose build-id is in ROOT/sys/kernel/notes, or reuses an existing one:
 * an existing snapshot is reused when it is under the same build-id, its
 * modules file lists the same modules at the same addresses, its kallsyms
 * has the same _text (else _stext), and it has a kcore unless kcore is
 * missing now as well.
 *
 * The kcore copy holds only the executable PT_LOAD ranges that cover the
 * kernel text and the module area (kcore.h). After the copy, modules and
 * kallsyms are read again and compared with what was copied (kallsyms
 * without its lines for dynamic code — BPF programs, ftrace and kprobe
 * trampolines —, which come and go every second on a busy system and are
 * tracked from perf records instead); if they changed, the copy is thrown
 * away and taken again, at most max_attempts times (-EAGAIN after that).
 *
 * Without ROOT/proc/kcore (or without the right to read it), kallsyms and
 * modules are still snapshotted and kcore_error says why kcore is missing.
 * The result's info is filled on success (snapshot_info_done() it). On
 * failure, *ret_failed (may be NULL) says what failed: a path relative to
 * root ("proc/kcore", "sys/kernel/notes", ...), or NULL for the cache
 * directory itself. */
int snapshot_take(const char *root, const char *cache_dir, unsigned max_attempts, uint64_t now_ns,
                  snapshot_take_result *ret, const char **ret_failed);

typedef struct snapshot_prune_limits {
        uint64_t max_size_bytes;        /* 0: no size limit */
        uint64_t max_age_ns;            /* 0: no age limit */
        uint64_t now_ns;                /* wall clock, for the age */
        const char *keep;               /* a path never removed (the snapshot in use), or NULL */
} snapshot_prune_limits;

/* Removes snapshots, oldest first, while one is older than max_age or the
 * total size exceeds max_size; never the newest one, nor keep. Returns
 * the removed ones (caller frees with snapshot_infos_free()), and the
 * number and total size of those that remain. A snapshot is renamed into
 * CACHE/.tmp/ before its files are deleted, so it disappears at once. */
int snapshot_prune(const char *cache_dir, const snapshot_prune_limits *lim, snapshot_info **ret_removed,
                   size_t *ret_n_removed, size_t *ret_n_left, uint64_t *ret_size_left);

/* Deletes what an interrupted snapshot or prune left in CACHE/.tmp/.
 * Returns the number of entries removed. */
int snapshot_clean_tmp(const char *cache_dir);

/* The address of _text (else _stext) in kallsyms text; 0 if neither. */
uint64_t snapshot_text_addr_from_kallsyms(const char *text, size_t len);

/* Whether two kallsyms texts are the same but for their lines of dynamic
 * code ([bpf], [__builtin__*]). */
bool snapshot_kallsyms_same_code(const char *a, size_t a_len, const char *b, size_t b_len);
