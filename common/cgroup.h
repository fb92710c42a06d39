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
         * ("nginx.service"); else the innermost slice; else "". The
         * units of a user's manager or of a container's own systemd are
         * named after it, so that nobody's "sshd.service" passes for the
         * system's: "/user.slice/user-1000.slice/user@1000.service/
         * app.slice/x.service" gives "user@1000.service/x.service". */
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

/* Whether a unit of path, its own or an enclosing one, named as
 * cgroup_info.unit names them, matches glob (fnmatch, '*' also across
 * '/'): "nginx.service" and "system.slice" match
 * "/system.slice/nginx.service"; "user@1000.service" (all of that user's
 * units), "user@1000.service/x.service" and "*x.service" match
 * "/user.slice/user-1000.slice/user@1000.service/app.slice/x.service",
 * "x.service" does not. */
bool cgroup_unit_matches(const char *path, const char *glob);

/* Whether path is prefix or below it, whole components compared
 * ("/system.slice" is a prefix of "/system.slice/x.service", not of
 * "/system.slicex"). A prefix without the leading '/' is taken from the
 * root. */
bool cgroup_path_under(const char *path, const char *prefix);

/* Whether path's container id starts with id (at least 1 hex digit, as
 * docker ps shortens them to 12). */
bool cgroup_container_matches(const char *path, const char *id);
