/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Units and containers from cgroup v2 paths (cgroup.h). The layouts are
 * those of systemd (slices, services, scopes; user managers), of docker,
 * podman, containerd and CRI-O under systemd ("docker-<id>.scope") and
 * under plain cgroupfs ("/docker/<id>"), and of kubepods in both drivers. */

#include <fnmatch.h>
#include <string.h>

#include "cgroup.h"
#include "macro.h"

static const char *const unit_suffixes[] = { ".service", ".scope", ".slice", ".socket", ".mount", ".swap" };

/* Calls fn on each component of path ([p, p + len)); stops when it
 * returns true. */
static bool each_component(const char *path, bool (*fn)(const char *p, size_t len, void *userdata), void *userdata) {
        for (const char *p = path; p && *p;) {
                size_t len;

                p += strspn(p, "/");
                len = strcspn(p, "/");
                if (len > 0 && fn(p, len, userdata))
                        return true;
                p += len;
        }
        return false;
}

static bool has_suffix(const char *p, size_t len, const char *suffix) {
        size_t n = strlen(suffix);

        return len > n && memcmp(p + len - n, suffix, n) == 0;
}

/* A unit name: something before one of the suffixes. */
static bool is_unit(const char *p, size_t len) {
        for (size_t i = 0; i < ELEMENTSOF(unit_suffixes); i++)
                if (has_suffix(p, len, unit_suffixes[i]))
                        return true;
        return false;
}

static bool all_hex(const char *p, size_t len) {
        for (size_t i = 0; i < len; i++)
                if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
                        return false;
        return true;
}

static void copy(char *dst, size_t size, const char *p, size_t len) {
        len = MIN(len, size - 1);
        memcpy(dst, p, len);
        dst[len] = '\0';
}

/* The container id in a component: "<runtime>-<64 hex>[.scope]" or 64
 * hex digits alone; NULL if none. Monitors ("libpod-conmon-<id>.scope")
 * are not the container. */
static const char *container_id(const char *p, size_t len) {
        static const char *const prefixes[] = { "docker-", "libpod-", "cri-containerd-", "crio-", "" };

        if (has_suffix(p, len, ".scope"))
                len -= strlen(".scope");
        for (size_t i = 0; i < ELEMENTSOF(prefixes); i++) {
                size_t n = strlen(prefixes[i]);

                if (len == n + CGROUP_ID_MAX && memcmp(p, prefixes[i], n) == 0 && all_hex(p + n, CGROUP_ID_MAX))
                        return p + n;
        }
        return NULL;
}

/* A pod's uid: "pod<uid>" (cgroupfs), "kubepods[-<qos>]-pod<uid>.slice"
 * with '_' for '-' (systemd). */
static bool pod_uid(const char *p, size_t len, char *ret, size_t size) {
        const char *at = NULL;
        size_t n;

        if (len > 3 && memcmp(p, "pod", 3) == 0)
                at = p + 3;
        else if (len > 8 && memcmp(p, "kubepods", 8) == 0 && has_suffix(p, len, ".slice")) {
                len -= strlen(".slice");
                for (size_t i = 8; i + 4 <= len; i++)
                        if (memcmp(p + i, "-pod", 4) == 0)
                                at = p + i + 4;
        }
        if (!at)
                return false;
        n = (size_t) (p + len - at);
        if (n == 0 || n >= size)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = at[i] == '_' ? '-' : at[i];

                if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-'))
                        return false;
        }
        /* Valid through: only now written. */
        for (size_t i = 0; i < n; i++)
                ret[i] = at[i] == '_' ? '-' : at[i];
        ret[n] = '\0';
        return true;
}

/* A unit that runs units of its own below it: a user's manager
 * (user@UID.service), a container's scope (its init may be systemd). The
 * units below are named after it, "user@1000.service/dbus.service", so
 * that they are not taken for the system's units of the same name. */
static bool is_manager(const char *p, size_t len) {
        return (len > 13 && memcmp(p, "user@", 5) == 0 && has_suffix(p, len, ".service")) || container_id(p, len);
}

/* The unit name of [p, p + len) below qualifier ("" or
 * "user@1000.service/"), cut at size - 1 bytes. */
static void unit_name(char *dst, size_t size, const char *qualifier, const char *p, size_t len) {
        size_t q = MIN(strlen(qualifier), size - 1);

        memcpy(dst, qualifier, q);
        copy(dst + q, size - q, p, len);
}

/* After a manager's component: the units below are its. qualifier has
 * CGROUP_UNIT_MAX bytes. */
static void push_qualifier(char *qualifier, const char *p, size_t len) {
        char q[CGROUP_UNIT_MAX - 1];
        size_t n;

        unit_name(q, sizeof q, qualifier, p, len);
        n = strlen(q);
        memcpy(qualifier, q, n);
        qualifier[n] = '/';
        qualifier[n + 1] = '\0';
}

typedef struct info_acc {
        cgroup_info *info;
        char slice[CGROUP_UNIT_MAX];
        char qualifier[CGROUP_UNIT_MAX];
} info_acc;

static bool info_component(const char *p, size_t len, void *userdata) {
        info_acc *a = userdata;
        const char *id;

        if (is_unit(p, len)) {
                if (has_suffix(p, len, ".slice"))
                        unit_name(a->slice, sizeof a->slice, a->qualifier, p, len);
                else
                        unit_name(a->info->unit, sizeof a->info->unit, a->qualifier, p, len);
                if (is_manager(p, len))
                        push_qualifier(a->qualifier, p, len);
        }
        id = container_id(p, len);
        if (id)
                copy(a->info->container, sizeof a->info->container, id, CGROUP_ID_MAX);
        if (!a->info->pod[0])
                pod_uid(p, len, a->info->pod, sizeof a->info->pod);
        return false;
}

void cgroup_info_of(const char *path, cgroup_info *ret) {
        info_acc a = { .info = ret };

        *ret = (cgroup_info) {};
        each_component(path, info_component, &a);
        if (!ret->unit[0])
                memcpy(ret->unit, a.slice, sizeof ret->unit);
}

typedef struct glob_acc {
        const char *glob;
        char buf[CGROUP_UNIT_MAX];
        char qualifier[CGROUP_UNIT_MAX];
} glob_acc;

static bool glob_component(const char *p, size_t len, void *userdata) {
        glob_acc *a = userdata;
        bool match;

        if (!is_unit(p, len))
                return false;
        if (strlen(a->qualifier) + len >= sizeof a->buf)
                return false;   /* no unit name is that long */
        unit_name(a->buf, sizeof a->buf, a->qualifier, p, len);
        match = fnmatch(a->glob, a->buf, 0) == 0;
        if (is_manager(p, len))
                push_qualifier(a->qualifier, p, len);
        return match;
}

bool cgroup_unit_matches(const char *path, const char *glob) {
        glob_acc a = { .glob = glob };

        return each_component(path, glob_component, &a);
}

bool cgroup_path_under(const char *path, const char *prefix) {
        size_t n;

        /* Both from the root, without trailing slashes. */
        path += strspn(path, "/");
        prefix += strspn(prefix, "/");
        n = strlen(prefix);
        while (n > 0 && prefix[n - 1] == '/')
                n--;
        if (n == 0)
                return true;
        return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

bool cgroup_container_matches(const char *path, const char *id) {
        cgroup_info info;
        size_t n = strlen(id);

        if (n == 0 || n > CGROUP_ID_MAX || !all_hex(id, n))
                return false;
        cgroup_info_of(path, &info);
        return info.container[0] && strncmp(info.container, id, n) == 0;
}
