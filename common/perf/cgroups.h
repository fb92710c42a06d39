/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The cgroup v2 hierarchy as perf names it: a sample's PERF_SAMPLE_CGROUP
 * is the id of its task's cgroup (the kernfs node id, which
 * name_to_handle_at() gives for the cgroup's directory), and
 * PERF_RECORD_CGROUP tells of cgroups made while sampling. The map from
 * ids to paths ("/system.slice/nginx.service", from the hierarchy's
 * root) starts from a walk of the mounted hierarchy; an id it does not
 * know is looked up by walking it again, at most once per
 * CGROUPS_RESCAN_NS, and while walks do not find the ids asked for, at
 * twice the interval each time, up to CGROUPS_RESCAN_MAX_NS. Ids are not
 * reused while the machine runs (64-bit node ids), so a cgroup removed
 * since keeps its path here until the map is full: it holds at most
 * CGROUPS_MAX ids (a walk adds none past it; the walk after a full map
 * starts from empty). */

#include <stddef.h>
#include <stdint.h>

#define CGROUPS_MAX (64u * 1024u)
#define CGROUPS_RESCAN_NS (UINT64_C(1000000000))
#define CGROUPS_RESCAN_MAX_NS (64 * CGROUPS_RESCAN_NS)
/* Deeper directories are not walked (their samples' cgroups stay unknown
 * unless a PERF_RECORD_CGROUP names them). */
#define CGROUPS_MAX_DEPTH 64

typedef struct cgroups cgroups;

/* The mount point of the cgroup2 hierarchy in mountinfo (a
 * /proc/self/mountinfo, or a fixture in its format); -ENODEV if it lists
 * none (a machine with cgroup v1 only), the error of reading it else. */
int cgroups_find_mount(const char *mountinfo, char **ret);

/* A map over the hierarchy mounted at dir, walked once. */
int cgroups_new(const char *dir, cgroups **ret);
cgroups *cgroups_free(cgroups *c);

/* What a PERF_RECORD_CGROUP says. */
int cgroups_add(cgroups *c, uint64_t id, const char *path);

/* The path of id, walking the hierarchy again if it is not known and the
 * last walk is older than CGROUPS_RESCAN_NS at now_ns (any clock, the
 * same for every call); NULL if it stays unknown (a cgroup made and
 * removed between two walks). The pointer is valid until the next call. */
const char *cgroups_path(cgroups *c, uint64_t id, uint64_t now_ns);

/* Ids known, and walks done (the first included). */
size_t cgroups_size(const cgroups *c);
uint64_t cgroups_walks(const cgroups *c);

/* The cgroup v2 path of a process from its /proc/PID/cgroup ("0::/x"),
 * malloc'ed: for kernels without PERF_SAMPLE_CGROUP (before 5.7). proc is
 * the procfs directory ("/proc"). -ENOENT when the process is gone or has
 * no v2 line. */
int cgroups_of_pid(const char *proc, uint32_t pid, char **ret);
