/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Cgroup ids to paths (cgroups.h). */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroups.h"
#include "fileio.h"
#include "hashmap.h"
#include "macro.h"

struct cgroups {
        char *dir;
        hashmap *idx;           /* id -> index in paths */
        char **paths;
        size_t n, alloc;
        uint64_t walks, last_walk_ns;
        uint64_t interval_ns;   /* between walks for unknown ids: doubles while they find nothing */
};

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s) {
        char *w = s;

        for (char *p = s; *p; p++) {
                if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' &&
                    p[3] <= '7') {
                        *w++ = (char) ((p[1] - '0') << 6 | (p[2] - '0') << 3 | (p[3] - '0'));
                        p += 3;
                } else
                        *w++ = *p;
        }
        *w = '\0';
}

int cgroups_find_mount(const char *mountinfo, char **ret) {
        _cleanup_free_ char *text = NULL;
        char *save = NULL;
        int r;

        r = read_full_file(mountinfo, 4 * 1024 * 1024, &text, NULL);
        if (r < 0)
                return r;
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *sep = strstr(line, " - "), *f[5], *s2 = NULL;
                size_t n = 0;

                if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0)
                        continue;
                *sep = '\0';
                /* id parent major:minor root mount-point ... */
                for (char *t = strtok_r(line, " ", &s2); t && n < ELEMENTSOF(f); t = strtok_r(NULL, " ", &s2))
                        f[n++] = t;
                /* The hierarchy's root mounted (not a subtree of it,
                 * whose paths would lack their start). */
                if (n < 5 || f[4][0] != '/' || strcmp(f[3], "/") != 0)
                        continue;
                unescape(f[4]);
                *ret = strdup(f[4]);
                return *ret ? 0 : -ENOMEM;
        }
        return -ENODEV;
}

static int put_path(cgroups *c, uint64_t id, const char *path) {
        int64_t i;
        int r;

        if (hashmap_get_u64(c->idx, id, &i) >= 0) {
                if (strcmp(c->paths[i], path) == 0)
                        return 0;
                char *copy = strdup(path);
                if (!copy)
                        return -ENOMEM;
                free(c->paths[i]);
                c->paths[i] = copy;
                return 0;
        }
        r = array_reserve_one((void **) &c->paths, &c->alloc, c->n, sizeof(char *));
        if (r < 0)
                return r;
        c->paths[c->n] = strdup(path);
        if (!c->paths[c->n])
                return -ENOMEM;
        r = hashmap_put_u64(c->idx, id, (int64_t) c->n);
        if (r < 0) {
                free(c->paths[c->n]);
                return r;
        }
        c->n++;
        return 0;
}

static void forget(cgroups *c) {
        for (size_t i = 0; i < c->n; i++)
                free(c->paths[i]);
        c->n = 0;
        hashmap_clear(c->idx);
}

/* The id of the directory open at fd: its file handle, 8 bytes for
 * cgroup2 (and for a tmpfs fixture: inode and generation). */
static int dir_id(int fd, uint64_t *ret) {
        union {
                struct file_handle fh;
                uint8_t buf[sizeof(struct file_handle) + 64];
        } h = { .fh.handle_bytes = 64 };
        int mount_id;

        if (name_to_handle_at(fd, "", &h.fh, &mount_id, AT_EMPTY_PATH) < 0)
                return -errno;
        if (h.fh.handle_bytes < sizeof(uint64_t))
                return -EOPNOTSUPP;
        memcpy(ret, h.fh.f_handle, sizeof(uint64_t));
        return 0;
}

/* Adds the directory open at fd (path from the root) and those below it. */
static int walk(cgroups *c, int fd, char *path, size_t len, size_t size, unsigned depth) {
        DIR *d;
        struct dirent *de;
        uint64_t id = 0;
        int r = 0;

        if (c->n < CGROUPS_MAX && dir_id(fd, &id) >= 0) {
                r = put_path(c, id, len == 0 ? "/" : path);
                if (r < 0) {
                        close(fd);
                        return r;
                }
        }
        if (depth >= CGROUPS_MAX_DEPTH || c->n >= CGROUPS_MAX) {
                close(fd);
                return 0;
        }
        d = fdopendir(fd);
        if (!d) {
                r = -errno;
                close(fd);
                return r;
        }
        while (r >= 0 && c->n < CGROUPS_MAX && (de = readdir(d))) {
                size_t n = strlen(de->d_name);
                int sub;

                if (de->d_type != DT_DIR || strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                    len + 1 + n >= size)
                        continue;
                /* Not through a link: a cgroup hierarchy has none. */
                sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0)
                        continue;       /* removed meanwhile, or not ours to read */
                path[len] = '/';
                memcpy(path + len + 1, de->d_name, n + 1);
                r = walk(c, sub, path, len + 1 + n, size, depth + 1);
                path[len] = '\0';
        }
        closedir(d);
        return r;
}

static int walk_all(cgroups *c, uint64_t now_ns) {
        _cleanup_free_ char *path = malloc(PATH_MAX);
        int fd;

        if (!path)
                return -ENOMEM;
        if (c->n >= CGROUPS_MAX)
                forget(c);
        c->walks++;
        c->last_walk_ns = now_ns;
        fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        path[0] = '\0';
        return walk(c, fd, path, 0, PATH_MAX, 0);
}

int cgroups_new(const char *dir, cgroups **ret) {
        cgroups *c = calloc(1, sizeof *c);
        int r;

        if (!c)
                return -ENOMEM;
        c->dir = strdup(dir);
        c->interval_ns = CGROUPS_RESCAN_NS;
        if (!c->dir || hashmap_new(&c->idx) < 0) {
                cgroups_free(c);
                return -ENOMEM;
        }
        r = walk_all(c, 0);
        if (r < 0) {
                cgroups_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

cgroups *cgroups_free(cgroups *c) {
        if (!c)
                return NULL;
        forget(c);
        free(c->paths);
        hashmap_free(c->idx);
        free(c->dir);
        free(c);
        return NULL;
}

int cgroups_add(cgroups *c, uint64_t id, const char *path) {
        if (!path || path[0] != '/')
                return -EINVAL;
        if (c->n >= CGROUPS_MAX)
                forget(c);
        return put_path(c, id, path);
}

const char *cgroups_path(cgroups *c, uint64_t id, uint64_t now_ns) {
        int64_t i;

        if (hashmap_get_u64(c->idx, id, &i) >= 0)
                return c->paths[i];
        /* The first walk was at "0": the first miss may walk at once. */
        if (c->walks > 1 && now_ns - c->last_walk_ns < c->interval_ns)
                return NULL;
        if (walk_all(c, now_ns) >= 0 && hashmap_get_u64(c->idx, id, &i) >= 0) {
                c->interval_ns = CGROUPS_RESCAN_NS;
                return c->paths[i];
        }
        /* Unreachable by a walk (too deep, past the bound): walks of a
         * large hierarchy are not repeated every second for it. */
        c->interval_ns = MIN(c->interval_ns * 2, CGROUPS_RESCAN_MAX_NS);
        return NULL;
}

size_t cgroups_size(const cgroups *c) {
        return c->n;
}

uint64_t cgroups_walks(const cgroups *c) {
        return c->walks;
}

int cgroups_of_pid(const char *proc, uint32_t pid, char **ret) {
        _cleanup_free_ char *text = NULL;
        char name[64];
        char *save = NULL;
        int r;

        snprintf(name, sizeof name, "%u/cgroup", pid);
        r = read_full_file_at(proc, name, 64 * 1024, &text, NULL);
        if (r < 0)
                return r;
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
                if (strncmp(line, "0::/", 4) == 0) {
                        *ret = strdup(line + 3);
                        return *ret ? 0 : -ENOMEM;
                }
        return -ENOENT;
}
