/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* What a cgroup v2 path says about the code that ran in it: the systemd
 * unit, and the container where the path carries one. Pure functions of
 * the path (as /proc/PID/cgroup and PERF_RECORD_CGROUP give it, from the
 * hierarchy's root: "/system.slice/nginx.service"): the store keeps the
 * path, and queries derive the rest, so a rule learnt later applies to
 * old samples too. */

#include <stdbool.h>
#include <stddef.h>

/* Units with cgroups of their own (systemd.unit(5)). */
#define CGROUP_UNIT_MAX 256
#define CGROUP_ID_MAX 64

typedef struct cgroup_info {
        /* The innermost unit of the path that is not a slice
         * ("nginx.service"; in a user manager its own unit, e.g.
         * "/user.slice/user-1000.slice/user@1000.service/app.slice/x.service"
         * gives "x.service"); else the innermost slice; else "". */
        char unit[CGROUP_UNIT_MAX];
        /* The container runtime's id (64 hex digits) where the path has
         * one: docker, podman/libpod, containerd and CRI-O scopes, and
         * the cgroupfs layouts of docker and kubepods; else "". */
        char container[CGROUP_ID_MAX + 1];
        /* A Kubernetes pod's uid ("pod<uid>" under kubepods), with dashes;
         * else "". */
        char pod[CGROUP_ID_MAX + 1];
} cgroup_info;

void cgroup_info_of(const char *path, cgroup_info *ret);

/* Whether a component of path is a unit name matching glob (fnmatch):
 * "nginx.service", "user@1000.service" (all of that user's units) or
 * "system.slice" all match "/system.slice/nginx.service"... as their own
 * unit or an enclosing one. */
bool cgroup_unit_matches(const char *path, const char *glob);

/* Whether path is prefix or below it, whole components compared
 * ("/system.slice" is a prefix of "/system.slice/x.service", not of
 * "/system.slicex"). A prefix without the leading '/' is taken from the
 * root. */
bool cgroup_path_under(const char *path, const char *prefix);

/* Whether path's container id starts with id (at least 1 hex digit, as
 * docker ps shortens them to 12). */
bool cgroup_container_matches(const char *path, const char *id);
